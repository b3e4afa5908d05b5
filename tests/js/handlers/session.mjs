// Sessions of the reference implementation (@ably/ai-transport@0.8.0 + ably-js) against the emulator,
// for the interop tests: a JS client (createClientSession) and a JS agent (createAgentSession).
//
// Client ops keep state by id: clientOpen -> {id}; clientSend / clientApprove / clientToolResult ->
// {invocation, inputCodecMessageId}; clientWait (until a run reaches a status); clientMessages; clientClose.
// agentHandle runs one invocation of a JS agent worker end to end (like one HTTP request): the model's
// events are supplied by the test (`turns`, consumed in order), gated calls get a tool-approval-request
// on the same pipe, approved calls are executed from `toolOutputs[name]`.
import * as Ably from 'ably';
import { buildTransportHeaders, createAgentSession, createClientSession, Invocation } from '@ably/ai-transport';
import {
  ResponsesCodec,
  approvedUnexecutedCalls,
  toResponsesInput,
  unansweredCalls,
} from '@ably/ai-transport/openai';

const clients = new Map();
let nextId = 1;

function realtime(options) {
  return new Ably.Realtime({ ...options, logLevel: 0 });
}

async function connected(client) {
  if (client.connection.state === 'connected') return;
  await client.connection.once('connected');
}

const plain = (messages) => JSON.parse(JSON.stringify(messages));

export async function clientOpen({ options, channel }) {
  const client = realtime(options);
  await connected(client);
  const session = createClientSession({ client, channelName: channel, codec: ResponsesCodec });
  await session.connect();
  const id = nextId++;
  clients.set(id, { client, session });
  return { id };
}

function sentResult(run) {
  return {
    invocation: run.toInvocation().toJSON(),
    inputCodecMessageId: run.inputCodecMessageId,
    inputEventId: run.inputEventId,
  };
}

export async function clientSend({ id, text }) {
  const { session } = clients.get(id);
  const run = await session.view.send([
    ResponsesCodec.createUserMessage({
      role: 'user',
      items: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text }] }],
    }),
  ]);
  return sentResult(run);
}

function callMessage(view) {
  const messages = view.getMessages();
  for (let i = messages.length - 1; i >= 0; i--) {
    const call = messages[i].message.items.find((it) => it.type === 'function_call');
    if (call) return { codecMessageId: messages[i].codecMessageId, call };
  }
  throw new Error('no function_call in the view');
}

export async function clientApprove({ id, approved, reason }) {
  const { session } = clients.get(id);
  const view = session.view;
  const { codecMessageId, call } = callMessage(view);
  const runId = view.runOf(codecMessageId)?.runId;
  const payload = approved ? { call_id: call.call_id, approved: true } : { call_id: call.call_id, approved: false, reason };
  const run = await view.send([ResponsesCodec.createToolApprovalResponse(codecMessageId, payload)], { runId });
  return { ...sentResult(run), runId };
}

export async function clientToolResult({ id, output }) {
  const { session } = clients.get(id);
  const view = session.view;
  const { codecMessageId, call } = callMessage(view);
  const runId = view.runOf(codecMessageId)?.runId;
  const run = await view.send([ResponsesCodec.createToolResult(codecMessageId, { call_id: call.call_id, output })], {
    runId,
  });
  return { ...sentResult(run), runId };
}

export async function clientWait({ id, inputCodecMessageId, runId, status, timeoutMs = 15000 }) {
  const { session } = clients.get(id);
  const view = session.view;
  const current = () => (runId ? view.run(runId) : view.runOf(inputCodecMessageId));
  await new Promise((resolve, reject) => {
    const check = () => {
      const info = current();
      if (info && info.status === status) {
        offs.forEach((off) => off());
        clearTimeout(timer);
        resolve();
      }
    };
    const offs = [view.on('update', check), view.on('run', check)];
    const timer = setTimeout(() => {
      offs.forEach((off) => off());
      reject(new Error(`run did not reach ${status}; now ${JSON.stringify(current())}`));
    }, timeoutMs);
    check();
  });
  const info = current();
  return { runId: info.runId, status: info.status, clientId: info.clientId };
}

export async function clientMessages({ id }) {
  const { session } = clients.get(id);
  const runs = session.view.runs().map((r) => ({
    ...r,
    error: r.error ? { code: r.error.code, statusCode: r.error.statusCode, message: r.error.message } : undefined,
  }));
  return { messages: plain(session.view.getMessages()), runs: plain(runs) };
}

export async function clientClose({ id }) {
  const entry = clients.get(id);
  if (!entry) return;
  clients.delete(id);
  await entry.session.close();
  entry.client.close();
}

// ---------------------------------------------------------------------------------------------
// A JS agent worker: one invocation.

async function* withApprovals(events, gated, delayMs = 0) {
  const calls = [];
  for (const event of events) {
    if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    yield event;
    if (event.type === 'response.output_item.done' && event.item?.type === 'function_call' && gated.includes(event.item.name)) {
      calls.push(event.item);
    }
  }
  for (const item of calls) {
    yield { type: 'tool-approval-request', call_id: item.call_id, name: item.name, arguments: item.arguments };
  }
}

export async function agentHandle({
  options,
  channel,
  invocation,
  gated = [],
  clientTools = [],
  turns = [],
  toolOutputs = {},
  delayMs = 0,
}) {
  const client = realtime(options);
  await connected(client);
  const session = createAgentSession({ client, channelName: channel, codec: ResponsesCodec });
  await session.connect();
  const log = { modelInputs: [], executed: [], outcome: undefined };
  try {
    const run = session.createRun(Invocation.fromJSON(invocation));
    while (run.view.hasOlder()) await run.view.loadOlder(100);
    await run.start();
    const messages = () => run.view.getMessages().map((m) => m.message);
    let turnIndex = 0;
    for (;;) {
      if (unansweredCalls(messages()).length > 0) {
        await run.suspend();
        log.outcome = 'suspended';
        break;
      }
      for (const call of approvedUnexecutedCalls(messages())) {
        log.executed.push([call.name, call.arguments]);
        const step = run.createStep();
        await step.start();
        await step.send({
          type: 'function_call_output',
          item: { type: 'function_call_output', call_id: call.call_id, output: toolOutputs[call.name] },
        });
        await step.end();
        // wait for our own echo so the next model input includes the output
        for (let i = 0; i < 200 && !messages().some((m) => m.items.some((it) => it.type === 'function_call_output' && it.call_id === call.call_id)); i++) {
          await new Promise((r) => setTimeout(r, 10));
        }
      }
      const items = toResponsesInput(messages());
      log.modelInputs.push(plain(items));
      const events = turns[turnIndex++];
      if (!events) throw new Error(`no scripted turn ${turnIndex}`);
      const result = await run.pipe(withApprovals(events, gated, delayMs));
      if (result.reason !== 'complete') {
        await run.end({ reason: result.reason });
        log.outcome = result.reason;
        break;
      }
      const calls = events.filter((e) => e.type === 'response.output_item.done' && e.item?.type === 'function_call');
      if (calls.some((e) => gated.includes(e.item.name) || clientTools.includes(e.item.name))) {
        await run.suspend();
        log.outcome = 'suspended';
        break;
      }
      await run.end({ reason: 'complete' });
      log.outcome = 'complete';
      break;
    }
    // let our own echoes land so the view shows what we published
    await new Promise((r) => setTimeout(r, 300));
    return { runId: run.runId, ...log, messages: plain(run.view.getMessages()) };
  } finally {
    await session.end();
    client.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Pure helpers exported by the package.

export async function transportHeaders({ cases }) {
  return cases.map((opts) => buildTransportHeaders(opts));
}

export async function clientCancel({ id, runId }) {
  const { session } = clients.get(id);
  await session.cancel(runId);
  return null;
}

export async function clientLoadAll({ id }) {
  const { session } = clients.get(id);
  while (session.view.hasOlder()) await session.view.loadOlder(100);
  return { count: session.view.getMessages().length };
}

export async function clientRegenerate({ id, index }) {
  const { session } = clients.get(id);
  const messages = session.view.getMessages();
  const target = messages.at(index ?? -1).codecMessageId;
  const run = await session.view.regenerate(target);
  return { ...sentResult(run), target };
}

export async function clientLoadOlder({ id, limit }) {
  const { session } = clients.get(id);
  const revealed = await session.view.loadOlder(limit);
  return { revealed: plain(revealed), messages: plain(session.view.getMessages()), hasOlder: session.view.hasOlder() };
}

export async function clientLoadUntil({ id, text }) {
  const { session } = clients.get(id);
  const matches = (m) =>
    m.message.items.some((it) => it.type === 'message' && (it.content ?? []).some((p) => p.text === text));
  const shown = await session.view.loadUntil(matches);
  return { shown: plain(shown), messages: plain(session.view.getMessages()), hasOlder: session.view.hasOlder() };
}
