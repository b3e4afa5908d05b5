// ably-js 2.x realtime presence against the local emulator, driven from Python through the node bridge.
// Clients live across calls in a registry keyed by a handle; presence events are buffered per channel.
import * as Ably from 'ably';
import { createAgentSession, createClientSession } from '@ably/ai-transport';
import { ResponsesCodec } from '@ably/ai-transport/openai';

import { waitConnected } from '../connect.mjs';

const clients = new Map();
let nextHandle = 1;

function toPlain(m) {
  const out = {
    id: m.id,
    action: m.action,
    clientId: m.clientId,
    connectionId: m.connectionId,
    data: m.data,
    timestamp: m.timestamp,
  };
  for (const k of Object.keys(out)) if (out[k] === undefined || out[k] === null) delete out[k];
  return out;
}

function entry(handle) {
  const e = clients.get(handle);
  if (!e) throw new Error(`unknown client handle ${handle}`);
  return e;
}

// A session of the reference implementation (@ably/ai-transport 0.8.0): {kind} 'client' or 'agent'.
// Its session.presence is then used by sessionPresence / sessionGet; closed by close.
export async function sessionOpen({ options, channel, kind }) {
  const client = new Ably.Realtime({ ...options, logLevel: 0 });
  await waitConnected(client);
  const create = kind === 'agent' ? createAgentSession : createClientSession;
  const session = create({ client, channelName: channel, codec: ResponsesCodec });
  await session.connect();
  const handle = nextHandle++;
  clients.set(handle, { client, session, events: new Map() });
  return { handle, connectionId: client.connection.id };
}

// enter / update / leave through session.presence.
export async function sessionPresence({ handle, action, data }) {
  await entry(handle).session.presence[action](data);
  return null;
}

// The members through session.presence.get().
export async function sessionGet({ handle }) {
  return (await entry(handle).session.presence.get()).map(toPlain);
}

// Open a realtime client; {options} are ClientOptions (see ai_transport.emulator.connect_info).
export async function open({ options }) {
  const client = new Ably.Realtime({ ...options, logLevel: 0 });
  await waitConnected(client);
  const handle = nextHandle++;
  clients.set(handle, { client, events: new Map() });
  return { handle, connectionId: client.connection.id };
}

// Subscribe to every presence event on {channel} (attaches) and buffer them.
export async function subscribe({ handle, channel }) {
  const e = entry(handle);
  const box = [];
  e.events.set(channel, box);
  await e.client.channels.get(channel).presence.subscribe((m) => box.push(toPlain(m)));
  return null;
}

// Wait until {count} presence events are buffered on {channel}; return them all.
export async function events({ handle, channel, count, timeoutMs = 10000 }) {
  const box = entry(handle).events.get(channel) ?? [];
  const deadline = Date.now() + timeoutMs;
  while (box.length < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  return box.slice();
}

// enter / update / leave with {data}.
export async function act({ handle, channel, action, data }) {
  const presence = entry(handle).client.channels.get(channel).presence;
  await presence[action](data);
  return null;
}

// The current members (waits for the attach SYNC).
export async function get({ handle, channel }) {
  const members = await entry(handle).client.channels.get(channel).presence.get();
  return members.map(toPlain);
}

export async function close({ handle }) {
  const e = clients.get(handle);
  if (!e) return null;
  clients.delete(handle);
  if (e.session && typeof e.session.close === 'function') await e.session.close();
  e.client.close();
  await new Promise((resolve) => {
    if (e.client.connection.state === 'closed' || e.client.connection.state === 'failed') return resolve();
    const t = setTimeout(resolve, 3000);
    e.client.connection.once('closed', () => {
      clearTimeout(t);
      resolve();
    });
  });
  return null;
}
