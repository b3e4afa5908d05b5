// The REAL Vercel codec (createUIMessageCodec of @ably/ai-transport@0.8.0, ./vercel entry) for
// conformance tests: its encoder over a recording writer, its decoder + reducer over a wire, and the
// pendingToolCalls / approvedPendingToolCalls readers.
import { approvedPendingToolCalls, createUIMessageCodec, pendingToolCalls } from '@ably/ai-transport/vercel';

const codec = createUIMessageCodec();
const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
const errorOf = (e) => ({ message: String(e?.message ?? e), code: e?.code ?? null, statusCode: e?.statusCode ?? null });
const ACTIONS = ['message.create', 'message.update', 'message.delete', 'meta', 'message.summary', 'message.append'];

// Records the published messages (the encoder's view: {op, message}) and, beside them, the wire a
// live subscriber receives (creates / appends / updates with serials minted in order).
function recordingWriter(cfg = {}) {
  let n = 0;
  let appends = 0;
  const next = () => `s${String(++n).padStart(10, '0')}`;
  const log = [];
  const wire = [];
  const inbound = (action, m, serial, versionSerial) => {
    const msg = { action, serial, version: { serial: versionSerial } };
    if (m.name !== undefined) msg.name = m.name;
    if (m.data !== undefined) msg.data = clone(m.data);
    if (m.extras !== undefined) msg.extras = clone(m.extras);
    return msg;
  };
  const writer = {
    async publish(msgs) {
      log.push({ op: 'publish', message: clone(msgs) });
      const list = Array.isArray(msgs) ? msgs : [msgs];
      const serials = [];
      for (const m of list) {
        const serial = next();
        serials.push(serial);
        wire.push(inbound('message.create', m, serial, serial));
      }
      return { serials };
    },
    async appendMessage(m) {
      const i = appends++;
      log.push({ op: 'append', message: clone(m) });
      if ((cfg.failAppends ?? []).includes(i)) throw new Error(`append ${i} failed`);
      const v = next();
      wire.push(inbound('message.append', m, m.serial, v));
      return { versionSerial: v };
    },
    async updateMessage(m) {
      log.push({ op: 'update', message: clone(m) });
      const v = next();
      wire.push(inbound('message.update', m, m.serial, v));
      return { versionSerial: v };
    },
  };
  return { writer, log, wire };
}

// runs: [{options: {extras?, messageId?}, steps: [{op: output|input|cancel|close, value?, messageId?, extras?}]}]
// One encoder per run, all over one writer. Returns the publish log, the live wire and each step's outcome.
export async function encode({ runs, writer: cfg = {} }) {
  const { writer, log, wire } = recordingWriter(cfg);
  const results = [];
  for (const run of runs) {
    const enc = codec.createEncoder(writer, run.options ?? {});
    for (const step of run.steps) {
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
  }
  return { log, wire, results };
}

export async function encodeBatch({ cases }) {
  const out = [];
  for (const c of cases) out.push(await encode(c));
  return out;
}

function inboundOf(m) {
  if (!m || typeof m !== 'object') return m;
  const msg = { ...m };
  if (typeof msg.action !== 'string') msg.action = ACTIONS[msg.action || 0] ?? 'unknown';
  if (!msg.version || typeof msg.version !== 'object') msg.version = {};
  else msg.version = { ...msg.version };
  if (!msg.version.serial && msg.serial) msg.version.serial = msg.serial;
  return msg;
}

// Decode `wire` with one decoder; fold every message's events (inputs first) into one projection
// under its codec-message-id; getMessages and the readers at the end.
export async function decodeFold({ wire }) {
  const decoder = codec.createDecoder();
  const state = codec.init();
  const decoded = [];
  let foldError = null;
  for (const raw of wire) {
    let result;
    try {
      result = decoder.decode(inboundOf(raw));
    } catch (e) {
      decoded.push({ error: String(e?.message ?? e) });
      continue;
    }
    decoded.push(clone(result)); // before the fold: the reducer keeps (and grows) the decoded message
    const t = raw?.extras?.ai?.transport;
    const messageId = (t && typeof t === 'object' ? t['codec-message-id'] : undefined) ?? undefined;
    const meta = { serial: raw?.serial ?? '', messageId };
    try {
      for (const event of result.inputs) codec.fold(state, { direction: 'input', event }, meta);
      for (const event of result.outputs) codec.fold(state, { direction: 'output', event }, meta);
    } catch (e) {
      foldError = foldError ?? String(e?.message ?? e);
    }
  }
  const messages = clone(codec.getMessages(state));
  const plain = messages.map((m) => m.message);
  return {
    decoded,
    messages,
    foldError,
    pending: clone(pendingToolCalls(plain)),
    approved: clone(approvedPendingToolCalls(plain)),
  };
}

export async function decodeFoldBatch({ wires }) {
  const out = [];
  for (const wire of wires) out.push(await decodeFold({ wire }));
  return out;
}

// Fold hand-built events: [{direction, event, messageId?}] -> getMessages.
export async function foldEvents({ events }) {
  const state = codec.init();
  for (const { direction, event, messageId } of events) {
    codec.fold(state, { direction, event }, { serial: '', messageId: messageId ?? undefined });
  }
  return { messages: clone(codec.getMessages(state)) };
}

export async function factories() {
  return {
    userMessage: codec.createUserMessage({ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }),
    regenerate: codec.createRegenerate('t', 'p'),
    toolResult: codec.createToolResult('m', { toolCallId: 'c', output: { a: 1 } }),
    toolResultError: codec.createToolResultError('m', { toolCallId: 'c', message: 'x' }),
    toolApprovalResponse: codec.createToolApprovalResponse('m', { toolCallId: 'c', approved: true, reason: 'ok' }),
    adapterTag: codec.adapterTag ?? null,
  };
}

// Time decode + fold of `wire` (repeated `repeat` times under fresh serials/ids): best of `rounds`,
// and every round's wall and CPU time in ms.
export async function benchDecodeFold({ wire, repeat, rounds = 3 }) {
  const reps = [];
  for (let r = 0; r < repeat; r++) {
    const p = `${String(r).padStart(6, '0')}-`;
    reps.push(
      wire.map((m) => {
        const t = { ...m.extras.ai.transport, 'codec-message-id': `${m.extras.ai.transport['codec-message-id']}-${r}` };
        return { ...m, serial: p + m.serial, version: { serial: p + m.version.serial }, extras: { ai: { ...m.extras.ai, transport: t } } };
      }),
    );
  }
  let best = Infinity;
  let events = 0;
  const times = [];
  const cpu = [];
  for (let round = 0; round < rounds; round++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    const decoder = codec.createDecoder();
    events = 0;
    for (const rep of reps) {
      const state = codec.init();
      for (const raw of rep) {
        const result = decoder.decode(raw);
        const meta = { serial: raw.serial, messageId: raw.extras.ai.transport['codec-message-id'] };
        for (const event of result.inputs) codec.fold(state, { direction: 'input', event }, meta);
        for (const event of result.outputs) codec.fold(state, { direction: 'output', event }, meta);
        events += result.inputs.length + result.outputs.length;
      }
      codec.getMessages(state);
    }
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    const c = process.cpuUsage(c0); // the whole process (user + system): V8's GC and JIT threads too
    times.push(dt * 1e3);
    cpu.push((c.user + c.system) / 1e3);
    if (dt < best) best = dt;
  }
  return { seconds: best, events, messages: wire.length * repeat, timesMs: times, cpuMs: cpu };
}
