// Run the REAL ResponsesCodec encoder (@ably/ai-transport@0.8.0) over a script of steps with a
// recording writer, and return the wire log plus each step's outcome.
//
// args: {
//   options: {extras?: {headers}},             // createEncoder options
//   steps: [{op: "output"|"input", value, messageId?, extras?} | {op: "cancel"} | {op: "close"}],
//   writer: {failAppends?: [n...], failUpdates?: bool, noSerial?: bool, failPublish?: [n...]}
// }
// result: {log: [{op, message}], results: [{ok} | {ok: false, error: {message, code, statusCode}}]}
// Serials are minted "s1", "s2", … per published message, in publish order.
import { ResponsesCodec } from '@ably/ai-transport/openai';

const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));

function recordingWriter(cfg, log) {
  let serial = 0;
  let appends = 0;
  let publishes = 0;
  return {
    async publish(msg) {
      const n = publishes++;
      log.push({ op: 'publish', message: clone(msg) });
      if ((cfg.failPublish ?? []).includes(n)) throw new Error(`publish ${n} failed`);
      const msgs = Array.isArray(msg) ? msg : [msg];
      const serials = msgs.map(() => `s${++serial}`);
      return { serials: cfg.noSerial ? [] : serials };
    },
    async appendMessage(msg) {
      const n = appends++;
      log.push({ op: 'append', message: clone(msg) });
      if ((cfg.failAppends ?? []).includes(n)) throw new Error(`append ${n} failed`);
      return { versionSerial: `v${n}` };
    },
    async updateMessage(msg) {
      log.push({ op: 'update', message: clone(msg) });
      if (cfg.failUpdates) throw new Error('update failed');
      return { versionSerial: 'u' };
    },
  };
}

const errorOf = (e) => ({ message: String(e?.message ?? e), code: e?.code ?? null, statusCode: e?.statusCode ?? null });

export async function run({ options = {}, steps = [], writer = {} }) {
  const log = [];
  const enc = ResponsesCodec.createEncoder(recordingWriter(writer, log), options);
  const results = [];
  for (const step of steps) {
    const opts = {};
    if (step.messageId !== undefined && step.messageId !== null) opts.messageId = step.messageId;
    if (step.extras !== undefined && step.extras !== null) opts.extras = step.extras;
    try {
      if (step.op === 'output') await enc.publishOutput(step.value, opts);
      else if (step.op === 'input') await enc.publishInput(step.value, opts);
      else if (step.op === 'cancel') await enc.cancelStreams();
      else if (step.op === 'close') await enc.close();
      else throw new Error(`bad step ${step.op}`);
      results.push({ ok: true });
    } catch (e) {
      results.push({ ok: false, error: errorOf(e) });
    }
  }
  return { log, results };
}

export async function runBatch({ cases }) {
  const out = [];
  for (const c of cases) out.push(await run(c));
  return out;
}

export async function factories() {
  return {
    userMessage: ResponsesCodec.createUserMessage({ role: 'user', items: [] }),
    regenerate: ResponsesCodec.createRegenerate('t', 'p'),
    toolResult: ResponsesCodec.createToolResult('m', { call_id: 'c', output: 'o' }),
    toolResultError: ResponsesCodec.createToolResultError('m', { call_id: 'c', message: 'x' }),
    toolApprovalResponse: ResponsesCodec.createToolApprovalResponse('m', { call_id: 'c', approved: true }),
  };
}
