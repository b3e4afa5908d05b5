// A persistent JSON-lines bridge to the reference implementation (@ably/ai-transport@0.8.0).
// Each stdin line: {"id", "handler", "op", "args"}; each stdout line: {"id", "ok", "result"|"error"}.
// Handlers live in ./handlers/<handler>.mjs and export async functions named by op.
import readline from 'node:readline';

const handlers = new Map();
async function handler(name) {
  if (!/^[a-z0-9_-]+$/.test(name)) throw new Error(`bad handler name ${name}`);
  if (!handlers.has(name)) handlers.set(name, await import(`./handlers/${name}.mjs`));
  return handlers.get(name);
}

// Keep stdout for the protocol only.
const out = process.stdout.write.bind(process.stdout);
console.log = (...a) => process.stderr.write(a.join(' ') + '\n');
console.info = console.log;
console.debug = console.log;

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    out(JSON.stringify({ id: null, ok: false, error: { message: `bad request: ${e.message}` } }) + '\n');
    continue;
  }
  try {
    const mod = await handler(req.handler);
    const fn = mod[req.op];
    if (typeof fn !== 'function') throw new Error(`unknown op ${req.handler}.${req.op}`);
    const result = await fn(req.args ?? {});
    out(JSON.stringify({ id: req.id, ok: true, result: result === undefined ? null : result }) + '\n');
  } catch (e) {
    out(
      JSON.stringify({
        id: req.id,
        ok: false,
        error: { message: String(e?.message ?? e), code: e?.code ?? null, statusCode: e?.statusCode ?? null },
      }) + '\n',
    );
  }
}
