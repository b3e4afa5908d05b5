// ably-js 2.x clients against the local emulator, driven from Python through the node bridge.
// Clients live across calls in a registry keyed by a handle; received messages are buffered.
import * as Ably from 'ably';

import { waitConnected } from '../connect.mjs';

const clients = new Map();
let nextHandle = 1;

function toPlain(m) {
  let data = m.data;
  if (data instanceof ArrayBuffer) data = Buffer.from(data);
  if (Buffer.isBuffer(data) || data instanceof Uint8Array) data = { base64: Buffer.from(data).toString('base64') };
  const out = {
    id: m.id,
    name: m.name,
    data,
    encoding: m.encoding,
    extras: m.extras,
    action: m.action,
    serial: m.serial,
    version: m.version,
    timestamp: m.timestamp,
    clientId: m.clientId,
    connectionId: m.connectionId,
  };
  for (const k of Object.keys(out)) if (out[k] === undefined || out[k] === null) delete out[k];
  return out;
}

function entry(handle) {
  const e = clients.get(handle);
  if (!e) throw new Error(`unknown client handle ${handle}`);
  return e;
}

// Open a realtime client; {options} are ClientOptions (see ai_transport.emulator.connect_info).
export async function open({ options }) {
  const client = new Ably.Realtime({ ...options, logLevel: 0 });
  await waitConnected(client);
  const handle = nextHandle++;
  clients.set(handle, { client, inbox: new Map() });
  return {
    handle,
    connectionId: client.connection.id,
    clientId: client.auth.clientId ?? null,
  };
}

// Attach and buffer every delivery on {channel}.
export async function subscribe({ handle, channel }) {
  const e = entry(handle);
  const ch = e.client.channels.get(channel);
  const box = [];
  e.inbox.set(channel, box);
  await ch.subscribe((m) => box.push(toPlain(m)));
  return { attachSerial: ch.properties.attachSerial ?? null, state: ch.state };
}

// Wait until {count} deliveries are buffered on {channel}; return them all.
export async function received({ handle, channel, count, timeoutMs = 10000 }) {
  const box = entry(handle).inbox.get(channel) ?? [];
  const deadline = Date.now() + timeoutMs;
  while (box.length < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  return box.slice();
}

export async function publish({ handle, channel, name, data, extras }) {
  const ch = entry(handle).client.channels.get(channel);
  const msg = { name, data };
  if (extras !== undefined) msg.extras = extras;
  const res = await ch.publish(msg);
  return res;
}

// Publish a message then append each fragment, awaiting every ACK; returns serial + version serials.
export async function stream({ handle, channel, name, first = '', fragments, extras }) {
  const ch = entry(handle).client.channels.get(channel);
  const res = await ch.publish({ name, data: first, extras });
  const serial = res.serials[0];
  const versions = [];
  for (const frag of fragments) {
    const r = await ch.appendMessage({ serial, data: frag, extras });
    versions.push(r.versionSerial);
  }
  return { serial, versions };
}

export async function update({ handle, channel, serial, data, name, extras, description }) {
  const ch = entry(handle).client.channels.get(channel);
  const r = await ch.updateMessage({ serial, data, name, extras }, description ? { description } : undefined);
  return r;
}

export async function history({ handle, channel, untilAttach = false, limit, direction }) {
  const ch = entry(handle).client.channels.get(channel);
  const params = { untilAttach };
  if (limit) params.limit = limit;
  if (direction) params.direction = direction;
  let page = await ch.history(params);
  const items = [];
  for (;;) {
    items.push(...page.items.map(toPlain));
    if (!page.hasNext()) break;
    page = await page.next();
  }
  return items;
}

export async function getMessage({ handle, channel, serial }) {
  const ch = entry(handle).client.channels.get(channel);
  return toPlain(await ch.getMessage(serial));
}

export async function ping({ handle }) {
  return await entry(handle).client.connection.ping();
}

export async function close({ handle }) {
  const e = clients.get(handle);
  if (!e) return null;
  clients.delete(handle);
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

// Benchmark twin of benchmarks/bench_emulator.py: {streams} publisher clients each publish a
// message and pipeline {appends} appendMessage calls; one subscriber checks order and loss.
export async function benchStreams({ options, streams, appends }) {
  const sub = new Ably.Realtime({ ...options, logLevel: 0 });
  const pubs = Array.from({ length: streams }, (_, i) => new Ably.Realtime({ ...options, clientId: `agent-${i}`, logLevel: 0 }));
  await Promise.all([sub, ...pubs].map((c) => waitConnected(c)));
  const names = pubs.map((_, i) => `jsbench-${Date.now()}-${i}`);
  const boxes = new Map(names.map((n) => [n, []]));
  const total = streams * (appends + 1);
  let count = 0;
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  for (const n of names) {
    await sub.channels.get(n).subscribe((m) => {
      boxes.get(n).push(m);
      if (++count === total) resolveDone();
    });
  }
  const fragments = Array.from({ length: appends }, (_, j) => `tok${String(j).padStart(4, '0')} `);
  const t0 = performance.now();
  await Promise.all(
    pubs.map(async (p, i) => {
      const ch = p.channels.get(names[i]);
      await ch.attach();
      const serial = (await ch.publish({ name: 'ai-output', data: '' })).serials[0];
      await Promise.all(fragments.map((f) => ch.appendMessage({ serial, data: f })));
    }),
  );
  const acked = performance.now() - t0;
  await Promise.race([done, new Promise((_, rej) => setTimeout(() => rej(new Error('timeout')), 120000))]);
  const delivered = performance.now() - t0;
  const expected = fragments.join('');
  for (const n of names) {
    const msgs = boxes.get(n);
    if (msgs.length !== appends + 1) throw new Error(`${n}: ${msgs.length} deliveries`);
    if (msgs.slice(1).map((m) => m.data).join('') !== expected) throw new Error(`${n}: lost or reordered`);
  }
  for (const c of [sub, ...pubs]) c.close();
  return { ackedMs: acked, deliveredMs: delivered };
}
