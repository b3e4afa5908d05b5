// The reference decoder + reducer (ResponsesCodec of @ably/ai-transport@0.8.0) for conformance tests,
// and the reference encoder driven over a recording writer to produce realistic wires.
import { ResponsesCodec } from '@ably/ai-transport/openai';

// What ably-js does to every inbound message (Message.fromValues): version defaults to {} and
// version.serial to the message serial.
// Numeric actions become ably-js's action strings, as ably-js decodes them off the wire.
const ACTIONS = ['message.create', 'message.update', 'message.delete', 'meta', 'message.summary', 'message.append'];

function inbound(m) {
  if (!m || typeof m !== 'object') return m;
  const msg = { ...m };
  // ably-js's stringifyAction: a missing (omitted zero) action is a create, unknown ones 'unknown'.
  if (typeof msg.action !== 'string') msg.action = ACTIONS[msg.action || 0] ?? 'unknown';
  if (!msg.version || typeof msg.version !== 'object') msg.version = {};
  else msg.version = { ...msg.version };
  if (!msg.version.serial && msg.serial) msg.version.serial = msg.serial;
  return msg;
}

function messageIdOf(m) {
  const t = m?.extras?.ai?.transport;
  const id = t && typeof t === 'object' ? t['codec-message-id'] : undefined;
  return id ?? undefined;
}

function errorOf(e) {
  return { error: String(e?.message ?? e) };
}

// Decode every message of `wire` with one decoder and fold the decoded events (inputs before
// outputs, as the transport does) into one projection keyed by each message's codec-message-id.
// Returns the per-message decode results (or {error} where the reference threw) and getMessages.
export async function decodeFold({ wire, fold = true }) {
  const decoder = ResponsesCodec.createDecoder();
  const state = ResponsesCodec.init();
  const decoded = [];
  let foldError = null;
  for (const raw of wire) {
    let result;
    try {
      result = decoder.decode(inbound(raw));
    } catch (e) {
      decoded.push(errorOf(e));
      continue;
    }
    decoded.push(result);
    if (!fold) continue;
    const messageId = messageIdOf(raw);
    const meta = { serial: raw?.serial ?? '', messageId };
    try {
      for (const event of result.inputs) ResponsesCodec.fold(state, { direction: 'input', event }, meta);
      for (const event of result.outputs) ResponsesCodec.fold(state, { direction: 'output', event }, meta);
    } catch (e) {
      foldError = foldError ?? String(e?.message ?? e);
    }
  }
  let messages = null;
  let getMessagesError = null;
  try {
    messages = ResponsesCodec.getMessages(state);
  } catch (e) {
    getMessagesError = String(e?.message ?? e);
  }
  return { decoded, messages, foldError, getMessagesError };
}

export async function decodeFoldBatch({ wires, fold = true }) {
  const out = [];
  for (const wire of wires) out.push(await decodeFold({ wire, fold }));
  return out;
}

// Fold hand-built events: [{direction, event, messageId?}] -> getMessages (or the error).
export async function foldEvents({ events }) {
  const state = ResponsesCodec.init();
  try {
    for (const { direction, event, messageId } of events) {
      ResponsesCodec.fold(state, { direction, event }, { serial: '', messageId: messageId ?? undefined });
    }
    return { messages: ResponsesCodec.getMessages(state) };
  } catch (e) {
    return errorOf(e);
  }
}

export async function foldEventsBatch({ cases }) {
  const out = [];
  for (const events of cases) out.push(await foldEvents({ events }));
  return out;
}

// A writer that records what the reference encoder publishes as the inbound messages a live
// subscriber receives: publish -> message.create (with name), appendMessage -> message.append
// (fragment, no name), updateMessage -> message.update. One counter mints both message serials and
// version serials, zero-padded so they compare as strings in channel order.
function recordingWriter(prefix) {
  let n = 0;
  const next = () => `${prefix}${String(++n).padStart(10, '0')}`;
  const wire = [];
  const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
  const writer = {
    async publish(msgs) {
      const list = Array.isArray(msgs) ? msgs : [msgs];
      const serials = [];
      for (const m of list) {
        const serial = next();
        serials.push(serial);
        const msg = { action: 'message.create', serial, version: { serial } };
        if (m.name !== undefined) msg.name = m.name;
        if (m.data !== undefined) msg.data = clone(m.data);
        if (m.extras !== undefined) msg.extras = clone(m.extras);
        wire.push(msg);
      }
      return { serials };
    },
    async appendMessage(m) {
      const versionSerial = next();
      const msg = { action: 'message.append', serial: m.serial, version: { serial: versionSerial } };
      if (m.data !== undefined) msg.data = clone(m.data);
      if (m.extras !== undefined) msg.extras = clone(m.extras);
      wire.push(msg);
      return { versionSerial };
    },
    async updateMessage(m) {
      const versionSerial = next();
      const msg = { action: 'message.update', serial: m.serial, version: { serial: versionSerial } };
      if (m.data !== undefined) msg.data = clone(m.data);
      if (m.extras !== undefined) msg.extras = clone(m.extras);
      wire.push(msg);
      return { versionSerial };
    },
  };
  return { writer, wire };
}

// Run the reference encoder over runs of events: [{messageId, events, headers?, cancel?}]; each run is
// one encoder (one pipe), its messages stamped with `codec-message-id` = messageId. Events the
// encoder rejects are reported in `rejected` and skipped. Returns the recorded live wire.
export async function encodeWire({ runs, prefix = '' }) {
  const { writer, wire } = recordingWriter(prefix);
  const rejected = [];
  for (const run of runs) {
    const headers = { role: 'assistant', ...(run.headers ?? {}), 'codec-message-id': run.messageId };
    const encoder = ResponsesCodec.createEncoder(writer, { extras: { headers } });
    for (const [i, event] of run.events.entries()) {
      try {
        await encoder.publishOutput(event);
      } catch (e) {
        rejected.push({ index: i, type: event?.type, message: String(e?.message ?? e) });
      }
    }
    for (const input of run.inputs ?? []) {
      await encoder.publishInput(input.input, { messageId: input.messageId });
    }
    if (run.cancel) await encoder.cancelStreams();
    await encoder.close();
  }
  return { wire, rejected };
}

// Benchmark: decode + fold `base` repeated `repeat` times (serials and codec-message-ids made
// unique per repetition exactly as benchmarks/bench_codec.py does). Returns timings in ms.
export function replicate(base, repeat) {
  const reps = [];
  for (let r = 0; r < repeat; r++) {
    const p = `${String(r).padStart(6, '0')}-`;
    const rep = [];
    for (const m of base) {
      const msg = { ...m, serial: p + m.serial, version: { serial: p + m.version.serial } };
      const t = m.extras.ai.transport;
      msg.extras = { ai: { ...m.extras.ai, transport: { ...t, 'codec-message-id': `${t['codec-message-id']}-${r}` } } };
      rep.push(msg);
    }
    reps.push(rep);
  }
  return reps;
}

// One decoder for the whole wire (as a session has), one projection per repetition (as the
// transport keeps one per run node).
export async function bench({ base, repeat, rounds = 3 }) {
  const reps = replicate(base, repeat);
  const times = [];
  const cpu = [];
  let events = 0;
  let messages = 0;
  for (let round = 0; round < rounds; round++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    const decoder = ResponsesCodec.createDecoder();
    events = 0;
    messages = 0;
    for (const rep of reps) {
      const state = ResponsesCodec.init();
      for (const raw of rep) {
        const { inputs, outputs } = decoder.decode(raw);
        const meta = { serial: raw.serial, messageId: raw.extras.ai.transport['codec-message-id'] };
        for (const event of inputs) ResponsesCodec.fold(state, { direction: 'input', event }, meta);
        for (const event of outputs) ResponsesCodec.fold(state, { direction: 'output', event }, meta);
        events += inputs.length + outputs.length;
      }
      messages += ResponsesCodec.getMessages(state).length;
    }
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    const c = process.cpuUsage(c0); // the whole process (user + system): V8's GC and JIT threads too
    cpu.push((c.user + c.system) / 1e3);
  }
  return { wireMessages: repeat * base.length, events, messages, timesMs: times, cpuMs: cpu };
}
