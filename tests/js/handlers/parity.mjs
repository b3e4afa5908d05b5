// Parity features of the reference implementation (@ably/ai-transport@0.8.0 + ably-js) against the
// emulator, for tests/test_session_parity_js.py: steering (ClientRun.steer / AgentRun.hasInput /
// onSteer), branch-selection handles, regenerate / edit, run read models (BaseRun status / error /
// messages), view events.
//
// Clients keep state by id (pOpen -> {id}); runs a client sent are kept by their inputCodecMessageId,
// steers by a steerId.
import * as Ably from 'ably';
import { createAgentSession, createClientSession, Invocation } from '@ably/ai-transport';
import { ResponsesCodec, toResponsesInput } from '@ably/ai-transport/openai';

const clients = new Map();
let nextId = 1;

const plain = (value) => JSON.parse(JSON.stringify(value ?? null));
const userMessage = (text) =>
  ResponsesCodec.createUserMessage({
    role: 'user',
    items: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text }] }],
  });

async function realtime(options) {
  const client = new Ably.Realtime({ ...options, logLevel: 0 });
  if (client.connection.state !== 'connected') await client.connection.once('connected');
  return client;
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
    }),
  ]);
}

const errJson = (e) => (e ? { code: e.code ?? null, statusCode: e.statusCode ?? null, message: e.message } : null);

export async function pOpen({ options, channel }) {
  const client = await realtime(options);
  const session = createClientSession({ client, channelName: channel, codec: ResponsesCodec });
  await session.connect();
  const id = nextId++;
  const events = [];
  session.view.on('update', () => events.push({ event: 'update' }));
  session.view.on('run', (e) => events.push({ event: 'run', type: e.type, runId: e.runId }));
  clients.set(id, { client, session, runs: new Map(), steers: new Map(), events, nextSteer: 1 });
  return { id };
}

export async function pClose({ id }) {
  const entry = clients.get(id);
  if (!entry) return null;
  clients.delete(id);
  await entry.session.close();
  entry.client.close();
  return null;
}

function sent(entry, run) {
  entry.runs.set(run.inputCodecMessageId, run);
  return {
    invocation: run.toInvocation().toJSON(),
    inputCodecMessageId: run.inputCodecMessageId,
    inputEventId: run.inputEventId,
  };
}

export async function pSend({ id, text, parent, forkOf }) {
  const entry = clients.get(id);
  const options = {};
  if (parent !== undefined) options.parent = parent;
  if (forkOf !== undefined) options.forkOf = forkOf;
  return sent(entry, await entry.session.view.send([userMessage(text)], options));
}

export async function pStarted({ id, inputCodecMessageId, timeoutMs = 15000 }) {
  const run = clients.get(id).runs.get(inputCodecMessageId);
  await withTimeout(run.started, timeoutMs, 'run start');
  return { runId: run.runId };
}

export async function pSteer({ id, inputCodecMessageId, text }) {
  const entry = clients.get(id);
  const run = entry.runs.get(inputCodecMessageId);
  const result = run.steer(userMessage(text));
  const steerId = entry.nextSteer++;
  entry.steers.set(steerId, result);
  return { steerId };
}

export async function pSteerResult({ id, steerId, timeoutMs = 15000 }) {
  const result = clients.get(id).steers.get(steerId);
  try {
    const published = await withTimeout(result.published, timeoutMs, 'steer publish');
    const outcome = await withTimeout(result.outcome, timeoutMs, 'steer outcome');
    return { published: plain(published), outcome: plain(outcome) };
  } catch (e) {
    return { error: errJson(e) };
  }
}

export async function pRun({ id, inputCodecMessageId }) {
  const run = clients.get(id).runs.get(inputCodecMessageId);
  return { runId: run.runId, status: run.status, error: errJson(run.error), messages: plain(run.messages) };
}

export async function pWait({ id, runId, status, timeoutMs = 15000 }) {
  // listens to the tree too: a view fires nothing for a run on a branch it does not show
  const { session } = clients.get(id);
  const view = session.view;
  await withTimeout(
    new Promise((resolve) => {
      const check = () => {
        if (view.run(runId)?.status === status) {
          offs.forEach((off) => off());
          resolve();
        }
      };
      const offs = [view.on('update', check), view.on('run', check), session.tree.on('run', check)];
      check();
    }),
    timeoutMs,
    `run ${runId} ${status}`,
  );
  return null;
}

export async function pView({ id }) {
  const { session } = clients.get(id);
  return { messages: plain(session.view.getMessages()), runs: plain(session.view.runs().map((r) => ({ ...r, error: errJson(r.error) }))) };
}

export async function pEvents({ id, clear = true }) {
  const entry = clients.get(id);
  const events = entry.events.splice(0, clear ? entry.events.length : 0);
  return { events };
}

export async function pBranch({ id, codecMessageId, select }) {
  const view = clients.get(id).session.view;
  const handle = view.branchSelection(codecMessageId);
  if (select !== undefined && select !== null) handle.select(select);
  const after = view.branchSelection(codecMessageId);
  return {
    hasSiblings: after.hasSiblings,
    index: after.index,
    siblings: plain(after.siblings),
    selected: plain(after.selected),
    messages: plain(view.getMessages()),
  };
}

export async function pRegenerate({ id, codecMessageId }) {
  const entry = clients.get(id);
  return sent(entry, await entry.session.view.regenerate(codecMessageId));
}

export async function pEdit({ id, codecMessageId, text }) {
  const entry = clients.get(id);
  return sent(entry, await entry.session.view.edit(codecMessageId, [userMessage(text)]));
}

export async function pLoadAll({ id }) {
  const view = clients.get(id).session.view;
  while (view.hasOlder()) await view.loadOlder(100);
  return { count: view.getMessages().length };
}

// ---------------------------------------------------------------------------------------------
// A JS agent that answers steers: `while (run.hasInput()) pipe(turns[i])`. Its first turn stops before
// event `gateAt` until a steer folds in (onSteer), so a client can steer mid-stream deterministically.

export async function agentSteerLoop({ options, channel, invocation, turns, gateAt = 5, waitSteerMs = 15000, end = 'complete' }) {
  const client = await realtime(options);
  const session = createAgentSession({ client, channelName: channel, codec: ResponsesCodec });
  await session.connect();
  let onSteered;
  const steered = new Promise((resolve) => {
    onSteered = resolve;
  });
  let steerHints = 0;
  const log = { modelInputs: [], passes: 0 };
  try {
    const run = session.createRun(Invocation.fromJSON(invocation), {}, {
      onSteer: () => {
        steerHints++;
        onSteered();
      },
    });
    while (run.view.hasOlder()) await run.view.loadOlder(100);
    await run.start();
    while (run.hasInput()) {
      const pass = log.passes++;
      log.modelInputs.push(plain(toResponsesInput(run.view.getMessages().map((m) => m.message))));
      const events = turns[pass];
      if (!events) throw new Error(`no scripted turn ${pass}`);
      async function* source() {
        for (let i = 0; i < events.length; i++) {
          if (pass === 0 && i === gateAt) await withTimeout(steered, waitSteerMs, 'a steer');
          yield events[i];
        }
      }
      const result = await run.pipe(source());
      if (result.reason !== 'complete') throw new Error(`pipe ${result.reason}`);
    }
    await run.end({ reason: end });
    await new Promise((r) => setTimeout(r, 200));
    return { runId: run.runId, ...log, steerHints, messages: plain(run.view.getMessages()), runMessages: plain(run.messages), status: run.status };
  } finally {
    await session.end();
    client.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Channel modes: what createClientSession({channelModes}) sets on the ably-js channel, and its attach.

export async function pChannelModes({ options, channel, cases }) {
  const client = await realtime(options);
  try {
    const out = [];
    for (const [i, channelModes] of cases.entries()) {
      const name = `${channel}-${i}`;
      const session = createClientSession({ client, channelName: name, codec: ResponsesCodec, channelModes: channelModes ?? undefined });
      const ch = client.channels.get(name);
      out.push({ modes: ch.channelOptions?.modes ?? null, agent: ch.channelOptions?.params?.agent ?? null });
      await session.close();
    }
    return { cases: out };
  } finally {
    client.close();
  }
}

export async function pAttachWithModes({ options, channel, channelModes }) {
  const client = await realtime(options);
  const session = createClientSession({ client, channelName: channel, codec: ResponsesCodec, channelModes });
  await session.connect();
  const id = nextId++;
  clients.set(id, { client, session, runs: new Map(), steers: new Map(), events: [], nextSteer: 1 });
  return { id, connectionId: client.connection.id, modes: client.channels.get(channel).modes ?? null };
}

export async function pCancel({ id, runId, inputCodecMessageId }) {
  const entry = clients.get(id);
  if (inputCodecMessageId) await entry.runs.get(inputCodecMessageId).cancel();
  else await entry.session.cancel(runId);
  return null;
}
