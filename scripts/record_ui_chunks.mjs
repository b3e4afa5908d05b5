// Record UI message chunk streams for the Vercel codec tests: each recorded OpenAI Responses stream of
// tests/fixtures/openai-responses/vercel-ai is replayed (as its SSE wire) to the real AI SDK
// (`ai` 7.0.173 + `@ai-sdk/openai` 4.0.118, its Responses provider), and the UI message stream that
// `streamText(...).toUIMessageStream()` makes of it is written, one chunk per line, to
// tests/fixtures/vercel-ui/<stream>.<response>.ui.jsonl (the `.approval` variant declares the tools
// `needsApproval`). Run once, outside the test suite:
//
//   mkdir /tmp/uirec && cd /tmp/uirec && npm init -y && npm install ai@7.0.173 @ai-sdk/openai@4.0.118 zod@4
//   NODE_PATH=/tmp/uirec/node_modules node --experimental-default-type=module scripts/record_ui_chunks.mjs
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(path.join(process.env.UIREC ?? '/tmp/uirec', 'package.json'));
const { streamText, tool, jsonSchema } = await import(require.resolve('ai'));
const { createOpenAI } = await import(require.resolve('@ai-sdk/openai'));

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const src = path.join(root, 'tests/fixtures/openai-responses/vercel-ai');
const dst = path.join(root, 'tests/fixtures/vercel-ui');
fs.mkdirSync(dst, { recursive: true });

const responsesOf = (text) => {
  const out = [];
  for (const line of text.split('\n').filter((l) => l.trim())) {
    const ev = JSON.parse(line);
    if (ev.type === 'response.created' || out.length === 0) out.push([]);
    out.at(-1).push(line);
  }
  return out;
};

const sse = (lines) =>
  lines.map((l) => `event: ${JSON.parse(l).type}\ndata: ${l}\n\n`).join('');

async function record(lines, needsApproval) {
  const openai = createOpenAI({
    apiKey: 'test',
    fetch: async () => new Response(sse(lines), { status: 200, headers: { 'content-type': 'text/event-stream' } }),
  });
  const params = jsonSchema({ type: 'object', additionalProperties: true });
  const tools = {
    calculator: tool({ description: 'calc', inputSchema: params, needsApproval }),
    lookupVerificationCode: tool({ description: 'lookup', inputSchema: params, needsApproval }),
  };
  const result = streamText({ model: openai.responses('gpt-5.1'), prompt: 'hi', tools });
  const chunks = [];
  for await (const chunk of result.toUIMessageStream({ sendReasoning: true, sendSources: true, onError: (e) => String(e?.message ?? e) })) {
    chunks.push(chunk);
  }
  return chunks;
}

for (const file of fs.readdirSync(src).filter((f) => f.endsWith('.chunks.txt')).sort()) {
  const stem = file.replace(/\.chunks\.txt$/, '');
  const responses = responsesOf(fs.readFileSync(path.join(src, file), 'utf8'));
  for (const [i, lines] of responses.entries()) {
    for (const approval of [false, true]) {
      const chunks = await record(lines, approval);
      const hasTool = chunks.some((c) => c.type === 'tool-input-available');
      if (approval && !hasTool) continue;
      const name = `${stem}.${i + 1}${approval ? '.approval' : ''}.ui.jsonl`;
      fs.writeFileSync(path.join(dst, name), chunks.map((c) => JSON.stringify(c)).join('\n') + '\n');
      console.log(name, chunks.length, [...new Set(chunks.map((c) => c.type))].join(' '));
    }
  }
}
