// useChat's engine in node, over 0.8.0's createChatTransport (@ably/ai-transport/vercel), against the
// emulator: what a React page with useChat does, without React or a browser.
//
// `AbstractChat` (the `ai` package's chat, which @ai-sdk/react's useChat wraps) with a plain state,
// `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses` (as the page sets it).
// The transport's invocation POST goes to a fetch stub that queues it: the test wakes a Python worker
// with it (`nextInvocation`), as the page's server would.
//
// Ops: open({options, channel}) -> {id}; send({id, text}); nextInvocation({id, timeoutMs});
// waitFor({id, until: 'approval' | 'answered', timeoutMs}) -> snapshot; approve({id, approved, reason});
// snapshot({id}); close({id}).
import * as Ably from 'ably';
import { AbstractChat, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { createChatTransport, createClientSession } from '@ably/ai-transport/vercel';

const chats = new Map();
let nextId = 1;

// useChat's state, minus React: the messages, the status, and every text length a render would show.
class PlainState {
  constructor(onChange) {
    this.status = 'ready';
    this.error = undefined;
    this.messages = [];
    this.onChange = onChange;
  }
  pushMessage(m) {
    this.messages = [...this.messages, m];
    this.onChange();
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
    this.onChange();
  }
  replaceMessage(i, m) {
    this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
    this.onChange();
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

class NodeChat extends AbstractChat {
  constructor({ state, ...init }) {
    super({ ...init, state });
  }
}

const textShown = (messages) =>
  messages
    .filter((m) => m.role === 'assistant')
    .flatMap((m) => m.parts)
    .filter((p) => p.type === 'text' || p.type === 'reasoning')
    .reduce((n, p) => n + (p.text ?? '').length, 0);

export async function open({ options, channel }) {
  const client = new Ably.Realtime({ ...options, logLevel: 0 });
  await client.connection.once('connected');
  const session = createClientSession({ client, channelName: channel });
  await session.connect();
  const invocations = [];
  const waiters = [];
  const posts = [];
  const fetchStub = async (url, init) => {
    const body = JSON.parse(init.body);
    posts.push({ url, body });
    invocations.push(body);
    while (waiters.length) waiters.shift()();
    return new Response(JSON.stringify({ accepted: true }), { status: 202 });
  };
  const transport = createChatTransport(session, { api: '/api/chat', fetch: fetchStub });
  const shown = [];
  const errors = [];
  let chat;
  const state = new PlainState(() => shown.push(textShown(state.messages)));
  chat = new NodeChat({
    id: channel,
    transport,
    state,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onError: (e) => errors.push(String(e?.message ?? e)),
  });
  const id = nextId++;
  chats.set(id, { client, session, transport, chat, state, invocations, waiters, posts, shown, errors });
  return { id };
}

function snap(c) {
  return {
    status: c.chat.status,
    messages: structuredClone(c.state.messages),
    shown: c.shown.slice(),
    errors: c.errors.slice(),
    posts: c.posts.map((p) => p.url),
    view: c.session.view.getMessages().map((m) => m.message),
  };
}

export async function send({ id, text }) {
  const c = chats.get(id);
  c.pending = c.chat.sendMessage({ text }).catch((e) => c.errors.push(String(e?.message ?? e)));
  return null;
}

export async function nextInvocation({ id, timeoutMs = 15000 }) {
  const c = chats.get(id);
  const deadline = Date.now() + timeoutMs;
  while (!c.invocations.length) {
    if (Date.now() > deadline) throw new Error('no invocation POSTed by the chat transport');
    await new Promise((resolve) => {
      c.waiters.push(resolve);
      setTimeout(resolve, 100);
    });
  }
  return c.invocations.shift();
}

const toolParts = (messages) =>
  messages.filter((m) => m.role === 'assistant').flatMap((m) => m.parts.filter((p) => p.type.startsWith('tool-')));

const conditions = {
  approval: (c) => c.chat.status === 'ready' && toolParts(c.state.messages).some((p) => p.state === 'approval-requested'),
  answered: (c) => {
    const parts = toolParts(c.state.messages);
    const last = c.state.messages.at(-1);
    return (
      c.chat.status === 'ready' &&
      parts.length > 0 &&
      parts.every((p) => p.state.startsWith('output-')) &&
      last?.role === 'assistant' &&
      last.parts.at(-1)?.type === 'text' &&
      last.parts.at(-1).state === 'done'
    );
  },
};

export async function waitFor({ id, until, timeoutMs = 15000 }) {
  const c = chats.get(id);
  const ok = conditions[until];
  const deadline = Date.now() + timeoutMs;
  while (!ok(c)) {
    if (c.chat.status === 'error' || Date.now() > deadline) {
      throw new Error(`useChat never reached '${until}': ${JSON.stringify(snap(c)).slice(0, 3000)}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return snap(c);
}

export async function approve({ id, approved, reason }) {
  const c = chats.get(id);
  const part = toolParts(c.state.messages).find((p) => p.state === 'approval-requested');
  await c.chat.addToolApprovalResponse({ id: part.approval.id, approved, ...(reason ? { reason } : {}) });
  return null;
}

export async function snapshot({ id }) {
  return snap(chats.get(id));
}

export async function close({ id }) {
  const c = chats.get(id);
  chats.delete(id);
  await c.transport.close();
  c.client.close();
  return null;
}
