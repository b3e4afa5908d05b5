// Shared by the bridge's handlers (not a handler itself): wait for an ably-js client to connect.

// Resolves once connected; rejects on 'failed' (with the reason's code and statusCode) or after timeoutMs.
export function waitConnected(client, timeoutMs = 10000) {
  return new Promise((resolve, reject) => {
    if (client.connection.state === 'connected') return resolve();
    const timer = setTimeout(() => reject(new Error(`not connected (${client.connection.state})`)), timeoutMs);
    client.connection.on((change) => {
      if (change.current === 'connected') {
        clearTimeout(timer);
        resolve();
      } else if (change.current === 'failed') {
        clearTimeout(timer);
        const err = new Error(change.reason?.message ?? 'connection failed');
        err.code = change.reason?.code;
        err.statusCode = change.reason?.statusCode;
        reject(err);
      }
    });
  });
}
