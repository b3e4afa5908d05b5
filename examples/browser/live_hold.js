// History first, then live: what the page's @ably/ai-transport 0.8.0 client session sees on a (re)load.
//
// `session.connect()` subscribes to the channel and attaches it; `view.loadOlder()` then reads the
// history up to the attach point (`untilAttach`). Ably delivers the channel's live messages from the
// moment it is attached, so one of them can reach the session before the history answer does. The
// 0.8.0 tree is not indifferent to that order: a run whose first wire is not its `ai-run-start` is
// placed by that wire's `parent` header, and a later `ai-run-start` (from history) does not move it.
// Every output of a run resumed after an approval names, as its parent, the assistant message the
// approval answered, a message of the same run, so such a run, met live first, hangs under itself
// and is never shown: a reload while the resumed run streamed came back with the user's question
// alone, and stayed so.
//
// So the page holds the live messages the session subscribes to until it has folded the history
// in, then hands them over in the order they came: the tree sees the run's `ai-run-start` first, as
// when the run starts live. Nothing is lost or reordered (every held message is newer than the
// history read, which ends at the attach point), and only listeners subscribed through the channel
// while it holds are affected.

/**
 * Hold the messages `channel` delivers to listeners subscribed from now on, until the returned
 * `release()` is called; `release()` hands the held messages over in arrival order, and from then
 * on messages pass straight through.
 * @param {import('ably').RealtimeChannel} channel
 * @returns {() => void} release
 */
export function holdLiveMessages(channel) {
  const held = [];
  let holding = true;
  const wrappers = new Map(); // a subscriber's listener -> the listener ably-js calls instead
  const subscribe = channel.subscribe.bind(channel);
  const unsubscribe = channel.unsubscribe.bind(channel);
  const listenerAt = (args) => args.findIndex((a) => typeof a === 'function');

  channel.subscribe = (...args) => {
    const at = listenerAt(args);
    if (at >= 0) {
      const listener = args[at];
      let wrapper = wrappers.get(listener);
      if (!wrapper) {
        wrapper = (message) => (holding ? held.push([listener, message]) : listener(message));
        wrappers.set(listener, wrapper);
      }
      args[at] = wrapper;
    }
    return subscribe(...args);
  };
  channel.unsubscribe = (...args) => {
    const at = listenerAt(args);
    const listener = at >= 0 ? args[at] : undefined;
    if (wrappers.has(listener)) {
      args[at] = wrappers.get(listener);
      wrappers.delete(listener); // what it still held is not handed to it
    }
    return unsubscribe(...args);
  };

  return function release() {
    if (!holding) return;
    holding = false;
    for (const [listener, message] of held.splice(0)) if (wrappers.has(listener)) listener(message);
  };
}
