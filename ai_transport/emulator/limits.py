"""Ably's inbound rate limits, ``appendRollupWindow`` and the outbound queue bound, for the emulator.

Sans-I/O except for the roll-up timers (``loop.call_later``). What Ably documents, and what the
emulator does:

* **Inbound publish rate** (``platform/pricing/limits``): 50 messages/s per connection and 50/s per
  channel on every plan; publishes, updates, deletes and appends all count. Over the connection
  limit a message is rejected with **42911** (``rate_limit_exceeded_per_connection_inbound``, the
  connection stays); over the channel limit with **42913** (``rate_limit_exceeded_per_channel_inbound``,
  the limit shared by every publisher to the channel); both HTTP status 429, message
  ``Rate limit exceeded; request rejected (nonfatal); metric = ...``
  (https://ably.com/docs/platform/errors/codes/42911-rate-limit-exceeded-per-connection-inbound,
  .../42913-rate-limit-exceeded-per-channel-inbound). A connection publishing at about **20x** the
  limit is closed with **42921** (.../42921-rate-limit-exceeded-per-connection-inbound-fatal).
  The emulator counts with a token bucket per connection and per channel (``burst`` seconds of
  the rate may be spent at once) and closes a connection whose attempted publishes in one second
  exceed ``fatal_factor`` x the connection rate.
* **appendRollupWindow** (``ai-transport/token-streaming/token-rate-limits``): a transport
  parameter of the *publishing* connection (0, 20, 40 = default, 100, 500 ms). The first append to
  a message is published at once; later appends received within the window are concatenated into
  one published message (data joined, the last append's ``extras`` and version) delivered when
  the window closes, so one response costs at most ``1000 / window`` messages/s of the
  connection's rate. Merged appends do not count again. History, rewind and ``getMessage`` are
  unaffected (every append is stored as it arrives); a normal publish sent while an append is held
  may reach subscribers first; an update or delete of a message flushes its held appends first.
* **Outbound queue bound** (#11): Ably drops what a connection cannot take and reports the gap as
  continuity loss **80020** (``connection_discontinuity_message_rate_exceeded``,
  https://ably.com/docs/platform/errors/codes/80020-connection-discontinuity-message-rate-exceeded).
  The emulator never buffers more than ``max_outbound_bytes`` (default 8 MiB) for one websocket:
  a subscriber whose unsent bytes exceed it is sent ``DISCONNECTED`` with error 80020 and its
  transport is cut; the connection stays resumable (the SDK resumes and re-attaches), every other
  client is unaffected. Memory held for stalled subscribers is therefore at most
  ``max_outbound_bytes`` (+ one frame) each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..token_bucket import TokenBucket
from .protocol import EmulatorError, MessageAction
from .store import Event

__all__ = [
    "APPEND_ROLLUP_WINDOWS",
    "DEFAULT_APPEND_ROLLUP_WINDOW",
    "FatalRateError",
    "InboundLimiter",
    "RateLimits",
    "Rollup",
    "TokenBucket",
    "parse_rollup_window",
]

#: The appendRollupWindow values Ably documents (ms).
APPEND_ROLLUP_WINDOWS = (0, 20, 40, 100, 500)
#: Ably's default appendRollupWindow (ms).
DEFAULT_APPEND_ROLLUP_WINDOW = 40

CONNECTION_LIMIT_CODE = 42911
CHANNEL_LIMIT_CODE = 42913
FATAL_CODE = 42921
CONTINUITY_LOSS_CODE = 80020


@dataclass(frozen=True)
class RateLimits:
    """The emulator's limits (defaults as on every Ably plan); ``None`` or 0 turns one off.

    Attributes:
        connection_rate: inbound messages/s per realtime connection (42911 over it).
        channel_rate: inbound messages/s per channel, every publisher together (42913 over it).
        fatal_factor: a connection attempting more than this x ``connection_rate`` messages in one
            second is closed with 42921.
        burst: seconds of the rate a bucket holds (how much may be published at once).
        append_rollup_window: the default appendRollupWindow in ms for connections that do not
            pass the transport parameter (Ably: 40).
        max_outbound_bytes: unsent bytes one websocket may queue before its subscriber is
            disconnected (80020).
    """

    connection_rate: float | None = 50.0
    channel_rate: float | None = 50.0
    fatal_factor: float = 20.0
    burst: float = 1.0
    append_rollup_window: int = DEFAULT_APPEND_ROLLUP_WINDOW
    max_outbound_bytes: int = 8 * 1024 * 1024

    @classmethod
    def off(cls) -> RateLimits:
        """No rate limits and no roll-up (the outbound bound stays)."""
        return cls(connection_rate=None, channel_rate=None, append_rollup_window=0)


def parse_rollup_window(raw: Any, default: int) -> int:
    """The appendRollupWindow (ms) from a transport parameter; 40000 when it is not a number.

    Values are clamped to Ably's range 0..500 ms; any value in range is honoured (Ably documents
    0, 20, 40, 100 and 500).
    """
    if raw is None or raw == "":
        return default
    try:
        value = int(str(raw))
    except ValueError as exc:
        raise EmulatorError(
            f"invalid appendRollupWindow {raw!r}; expected a number of milliseconds (0..500)", 40000, 400
        ) from exc
    return max(0, min(500, value))


def rate_error(code: int, metric: str, rate: float) -> EmulatorError:
    """A nonfatal rate-limit error as Ably words it."""
    return EmulatorError(
        f"Rate limit exceeded; request rejected (nonfatal); metric = {metric}; permitted rate = {rate:g}",
        code,
        429,
    )


def fatal_error(rate: float, factor: float) -> EmulatorError:
    """42921: the connection is closed for far exceeding its publish rate."""
    return EmulatorError(
        f"Connection terminated; per-connection publish Rate limit exceeded; permitted rate = {rate:g}, "
        f"closed above {factor:g}x",
        FATAL_CODE,
        429,
    )


@dataclass
class _Held:
    events: list[Any]
    timer: asyncio.TimerHandle | None = None


@dataclass
class Rollup:
    """appendRollupWindow state of one publishing connection (per channel and message serial).

    ``deliver(channel, events)`` is called with the event list to fan out (a held run merged into
    one event by ``merge``).
    """

    window_ms: int
    deliver: Callable[[str, list[Any]], None]
    merge: Callable[[list[Any]], Any]
    last: dict[tuple[str, str], float] = field(default_factory=dict)
    held: dict[tuple[str, str], _Held] = field(default_factory=dict)

    def counts(self, channel: str, msg: dict[str, Any]) -> bool:
        """Whether an inbound message would be a new published message (False: merged into a held one)."""
        if self.window_ms <= 0 or msg.get("action") != MessageAction.APPEND:
            return True
        serial = msg.get("serial")
        return not (isinstance(serial, str) and (channel, serial) in self.held)

    def route(self, channel: str, events: list[Any], now: float) -> list[Any]:
        """Take the appends this window holds out of ``events``; return what to deliver now."""
        if self.window_ms <= 0:
            return events
        window = self.window_ms / 1000
        if len(self.last) > 4096:
            self.last = {k: t for k, t in self.last.items() if now - t < window}
        out: list[Any] = []
        for ev in events:
            key = (channel, ev.message_serial)
            if ev.action != MessageAction.APPEND:
                if key in self.held:
                    out.extend(self._take(key))
                out.append(ev)
                continue
            held = self.held.get(key)
            if held is not None:
                held.events.append(ev)
                continue
            last = self.last.get(key)
            if last is None or now - last >= window:
                self.last[key] = now
                out.append(ev)
                continue
            held = self.held[key] = _Held([ev])
            held.timer = asyncio.get_running_loop().call_later(
                max(0.0, last + window - now), self._fire, key
            )
        return out

    def _take(self, key: tuple[str, str]) -> list[Any]:
        held = self.held.pop(key)
        if held.timer is not None:
            held.timer.cancel()
        self.last[key] = asyncio.get_running_loop().time()
        return [self.merge(held.events)]

    def _fire(self, key: tuple[str, str]) -> None:
        if key in self.held:
            self.deliver(key[0], self._take(key))

    def flush_all(self) -> None:
        """Deliver everything held now (the connection is going away)."""
        for key in list(self.held):
            self.deliver(key[0], self._take(key))


class FatalRateError(EmulatorError):
    """42921: close the connection (raised by :meth:`InboundLimiter.admit`)."""


def merge_appends(events: list[Event]) -> Event:
    """One delivery for a held run of appends to one message: data joined, the last one's rest."""
    last = events[-1]
    if len(events) == 1:
        return last
    live = dict(last.live)
    parts = [ev.live["data"] for ev in events if ev.live.get("data") is not None]
    if parts:
        live["data"] = b"".join(parts) if isinstance(parts[0], bytes) else "".join(parts)
        first_enc = next((ev.live.get("encoding") for ev in events if ev.live.get("data") is not None), None)
        if first_enc:
            live["encoding"] = first_enc
        else:
            live.pop("encoding", None)
    return last.with_live(live)


class _ConnState:
    __slots__ = ("attempts", "bucket", "rollup", "window_start")

    def __init__(self, bucket: TokenBucket | None, rollup: Rollup) -> None:
        self.bucket = bucket
        self.rollup = rollup
        self.window_start = 0.0
        self.attempts = 0


class InboundLimiter:
    """Per-connection and per-channel inbound rate limits and each connection's roll-up."""

    def __init__(self, limits: RateLimits, deliver: Callable[[str, str, list[Event]], None]) -> None:
        self.limits = limits
        self._deliver = deliver
        self._conns: dict[str, _ConnState] = {}
        self._channels: dict[str, TokenBucket] = {}
        #: Counters (for tests and benchmarks): messages rejected per code, fatal closes.
        self.rejected: dict[int, int] = {CONNECTION_LIMIT_CODE: 0, CHANNEL_LIMIT_CODE: 0, FATAL_CODE: 0}

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    def open(self, conn_id: str, window_ms: int) -> None:
        """Register (or, on resume, update) a connection and its appendRollupWindow."""
        state = self._conns.get(conn_id)
        if state is not None:
            state.rollup.window_ms = window_ms
            return
        rate = self.limits.connection_rate
        bucket = TokenBucket(rate, rate * self.limits.burst, self._now()) if rate else None

        def deliver(channel: str, events: list[Event]) -> None:
            self._deliver(conn_id, channel, events)

        self._conns[conn_id] = _ConnState(bucket, Rollup(window_ms, deliver, merge_appends))

    def close(self, conn_id: str) -> None:
        """Forget a connection (delivering what its roll-up holds)."""
        state = self._conns.pop(conn_id, None)
        if state is not None:
            state.rollup.flush_all()

    def window(self, conn_id: str) -> int:
        """The connection's appendRollupWindow (ms)."""
        state = self._conns.get(conn_id)
        return state.rollup.window_ms if state is not None else 0

    def admit(self, conn_id: str | None, channel: str, messages: list[Any]) -> None:
        """Count an inbound ProtocolMessage; raise 42911 / 42913 (nonfatal) or 42921 (fatal)."""
        now = self._now()
        state = self._conns.get(conn_id) if conn_id is not None else None
        n = len(messages)
        if state is not None:
            n = sum(1 for m in messages if not isinstance(m, dict) or state.rollup.counts(channel, m))
        if n == 0:
            return
        limits = self.limits
        if state is not None and state.bucket is not None:
            if now - state.window_start >= 1.0:
                state.window_start, state.attempts = now, 0
            state.attempts += n
            if state.attempts > limits.fatal_factor * state.bucket.rate:
                self.rejected[FATAL_CODE] += 1
                err = fatal_error(state.bucket.rate, limits.fatal_factor)
                raise FatalRateError(err.message, err.code, err.status_code)
            if state.bucket.available(now) < n:
                self.rejected[CONNECTION_LIMIT_CODE] += 1
                raise rate_error(CONNECTION_LIMIT_CODE, "connection.inboundRate", state.bucket.rate)
        rate = limits.channel_rate
        if rate:
            bucket = self._channels.get(channel)
            if bucket is None:
                bucket = self._channels[channel] = TokenBucket(rate, rate * limits.burst, now)
            if not bucket.take(n, now):
                self.rejected[CHANNEL_LIMIT_CODE] += 1
                raise rate_error(CHANNEL_LIMIT_CODE, "channel.inboundRate", rate)
        if state is not None and state.bucket is not None:
            state.bucket.take(n, now)

    def route(self, conn_id: str, channel: str, events: list[Event]) -> list[Event]:
        """The events to fan out now (appends the connection's window holds are delivered later)."""
        state = self._conns.get(conn_id)
        if state is None:
            return events
        return state.rollup.route(channel, events, self._now())
