// A `useChat` front end without a browser: 0.8.0's createChatTransport (./vercel) over a Vercel
// client session, over the emulator, for tests/test_vercel_chat_e2e.py. The transport's HTTP POST of
// each invocation is captured (a fetch stub answering 200) for the Python agent to serve; each
// sendMessages stream is drained in the background into its chunk list.
import * as Ably from 'ably';
import { createChatTransport, createClientSession } from '@ably/ai-transport/vercel';

const clients = new Map();
let nextId = 1;
const plain = (value) => JSON.parse(JSON.stringify(value ?? null));

function waitFor(predicate, ms, what) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const tick = () => {
      const value = predicate();
      if (value !== undefined) return resolve(value);
      if (Date.now() - t0 > ms) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(tick, 10);
    };
    tick();
  });
}

export async function ctOpen({ options, channel }) {
  const client = new Ably.Realtime({ ...options, logLevel: 0 });
  if (client.connection.state !== 'connected') await client.connection.once('connected');
  const session = createClientSession({ client, channelName: channel });
  await session.connect();
  const entry = { client, session, posts: [], streams: [] };
  entry.transport = createChatTransport(session, {
    fetch: async (url, init) => {
      entry.posts.push({ url, body: JSON.parse(init.body) });
      return new Response(null, { status: 200 });
    },
  });
  const id = nextId++;
  clients.set(id, entry);
  return { id };
}

async function send(entry, messages) {
  const before = entry.posts.length;
  const stream = await entry.transport.sendMessages({ trigger: 'submit-message', chatId: 'chat', messages });
  const record = { chunks: [], done: false, error: null };
  entry.streams.push(record);
  (async () => {
    try {
      for await (const chunk of stream) record.chunks.push(plain(chunk));
    } catch (e) {
      record.error = String(e?.message ?? e);
    }
    record.done = true;
  })();
  const post = await waitFor(() => entry.posts[before], 10000, 'the POST');
  return { stream: entry.streams.length - 1, post };
}

// What useChat does on submit: the messages it holds (the view's) plus the new user message.
export async function ctSend({ id, text, messageId }) {
  const entry = clients.get(id);
  const history = entry.session.view.getMessages().map((m) => m.message);
  return send(entry, [...history, { id: messageId, role: 'user', parts: [{ type: 'text', text }] }]);
}

// What useChat does after addToolApprovalResponse: the held messages, the call's part answered.
export async function ctApprove({ id, toolCallId, approved }) {
  const entry = clients.get(id);
  const messages = plain(entry.session.view.getMessages().map((m) => m.message));
  for (const m of messages) {
    for (const [i, p] of m.parts.entries()) {
      if (p.toolCallId === toolCallId) {
        m.parts[i] = { ...p, state: 'approval-responded', approval: { id: p.approval?.id ?? '', approved } };
      }
    }
  }
  return send(entry, messages);
}

export async function ctStream({ id, stream, timeoutMs = 15000 }) {
  const record = clients.get(id).streams[stream];
  await waitFor(() => (record.done ? true : undefined), timeoutMs, 'the end of the stream');
  return { chunks: record.chunks, error: record.error };
}

export async function ctView({ id }) {
  return plain(clients.get(id).session.view.getMessages());
}

export async function ctClose({ id }) {
  const entry = clients.get(id);
  if (!entry) return null;
  clients.delete(id);
  await entry.transport.close();
  entry.client.close();
  return null;
}
