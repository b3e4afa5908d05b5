// ably-js 2.x probes of the emulator's Ably fidelity (issue 17), each a self-contained scenario:
// a client is opened with {options}, the scenario runs, the client is closed, facts are returned.
import * as Ably from 'ably';

function connected(client, timeoutMs = 10000) {
  return new Promise((resolve, reject) => {
    if (client.connection.state === 'connected') return resolve(null);
    const timer = setTimeout(() => reject(new Error(`not connected (${client.connection.state})`)), timeoutMs);
    client.connection.on((change) => {
      if (change.current === 'connected') {
        clearTimeout(timer);
        resolve(change.reason ? { code: change.reason.code } : null);
      } else if (change.current === 'failed') {
        clearTimeout(timer);
        reject(new Error(`connection failed: ${change.reason?.code} ${change.reason?.message}`));
      }
    });
  });
}

async function closeClient(client) {
  client.close();
  await new Promise((resolve) => {
    if (['closed', 'failed'].includes(client.connection.state)) return resolve();
    const t = setTimeout(resolve, 3000);
    client.connection.once('closed', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

async function withClient(options, fn) {
  const client = new Ably.Realtime({ ...options, logLevel: 0 });
  try {
    const reason = await connected(client);
    return await fn(client, reason);
  } finally {
    await closeClient(client);
  }
}

async function attachError(channel) {
  try {
    await channel.attach();
    return null;
  } catch (err) {
    return { code: err.code, channelState: channel.state, reasonCode: channel.errorReason?.code ?? null };
  }
}

// Attach to invalid names and publish on one; the connection must stay connected.
export async function invalidNames({ options }) {
  return withClient(options, async (client) => {
    const empty = await attachError(client.channels.get(''));
    const colon = await attachError(client.channels.get(':hell'));
    let publish = null;
    try {
      await client.channels.get(':hell2').publish('x', 'y');
    } catch (err) {
      publish = { code: err.code };
    }
    return { empty, colon, publish, connection: client.connection.state };
  });
}

// Attach with channel params; return what ably-js exposes (params, modes) and whether publish is refused.
export async function paramsEcho({ options, channel, params }) {
  return withClient(options, async (client) => {
    const ch = client.channels.get(channel, { params });
    await ch.attach();
    let publish = null;
    try {
      await ch.publish('x', 'y');
    } catch (err) {
      publish = { code: err.code };
    }
    return { params: ch.params, modes: ch.modes, publish };
  });
}

// Recover a connection from another client's recovery key (or a fake one).
export async function recover({ options, fakeKey }) {
  const first = new Ably.Realtime({ ...options, logLevel: 0 });
  await connected(first);
  const original = { id: first.connection.id, key: first.connection.key };
  const recoveryKey = fakeKey
    ? JSON.stringify({ connectionKey: fakeKey, msgSerial: 3, channelSerials: {} })
    : first.connection.createRecoveryKey();
  try {
    return await withClient({ ...options, recover: recoveryKey }, async (client, reason) => ({
      original,
      recovered: { id: client.connection.id, key: client.connection.key },
      reasonCode: reason?.code ?? client.connection.errorReason?.code ?? null,
      msgSerial: client.connection.connectionManager.msgSerial,
    }));
  } finally {
    await closeClient(first);
  }
}

// Connect with {options}; return the clientId ably-js settled on.
export async function identity({ options }) {
  return withClient(options, async (client) => ({ clientId: client.auth.clientId ?? null }));
}

// Publish then delete (with data {}) and append on {channel}; return what a subscriber saw.
export async function mutations({ options, channel }) {
  return withClient(options, async (client) => {
    const ch = client.channels.get(channel);
    const seen = [];
    await ch.subscribe((m) => seen.push({ action: m.action, name: m.name ?? null, data: m.data ?? null }));
    const a = (await ch.publish('to-delete', { value: 1 })).serials[0];
    await ch.deleteMessage({ serial: a, data: {} });
    const b = (await ch.publish('streamed', 'Hello')).serials[0];
    await ch.appendMessage({ serial: b, data: ' World' });
    const deadline = Date.now() + 5000;
    while (seen.length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const deleted = await ch.getMessage(a);
    return { seen, deleted: { action: deleted.action, data: deleted.data ?? null, name: deleted.name ?? null } };
  });
}
