"""The encoder's coalescing publisher: appends merged per stream under a shared publish budget.

Used by :class:`~ai_transport.codec.encoder.Encoder` when its writer carries an enabled
``publish_budget`` (see :mod:`ai_transport.channels.budget`). Guarantees, for any interleaving of
streams, delta sizes, timings and rate-limit rejections:

* per stream, the appended text reaching the channel is exactly the concatenation of the deltas,
  in order: at most one append per stream is in flight; appends waiting for a token are merged
  (data joined, the latest ``extras`` / ``name``) into one; a closing append merges into what is
  pending, so it stays last;
* a rate-limit rejection (42910 / 42911 / 42913) is answered by :meth:`PublishBudget.rejected`
  (back off) and the rejected append goes back in front of what is pending for its stream, merged
  with it; it is never dropped. Any other failure is reported to ``on_failure`` (the encoder
  recovers the stream with one update, as without a budget);
* a discrete publish or an update first waits until every pending append of this publisher is
  acknowledged (:meth:`drain`), then takes a token; a rejected one is retried after the back-off.

Every writer call takes one token of the budget, first come first served across every publisher
sharing it, so however many streams run, the connection stays within the budget.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

__all__ = ["Budget", "CoalescingPublisher", "is_rate_limited"]

log = logging.getLogger("ai_transport.codec.coalesce")

_RATE_LIMIT_CODES = frozenset({42910, 42911, 42913})


def is_rate_limited(exc: BaseException) -> bool:
    """Whether ``exc`` is one of Ably's nonfatal rate-limit rejections (retry after backing off)."""
    return getattr(exc, "code", None) in _RATE_LIMIT_CODES


class Budget(Protocol):
    """What the publisher needs of :class:`~ai_transport.channels.budget.PublishBudget`."""

    def try_acquire(self) -> bool:
        """Take a token now if one is free."""
        ...

    async def acquire(self) -> None:
        """Wait for a token and take it."""
        ...

    def rejected(self) -> None:
        """A rate-limit rejection happened: back off."""
        ...

    def succeeded(self) -> None:
        """An operation went through."""
        ...

    def hold(self) -> Any:
        """Mark the calling context as holding a token (the writer then takes none itself)."""
        ...

    def unhold(self, token: Any) -> None:
        """Undo :meth:`hold`."""
        ...


class _Stream:
    __slots__ = ("in_flight", "message", "parts", "stream_id")

    def __init__(self, stream_id: str) -> None:
        self.stream_id = stream_id
        self.message: dict[str, Any] | None = None  # latest pending append (its extras win)
        self.parts: list[Any] = []  # pending data, in order
        self.in_flight = False


def _join(parts: list[Any]) -> Any:
    if len(parts) == 1:
        return parts[0]
    if parts and isinstance(parts[0], (bytes, bytearray)):
        return b"".join(parts)
    return "".join(parts)


class CoalescingPublisher:
    """Appends merged per stream (by serial), every writer call under a shared :class:`Budget`.

    Args:
        writer: ``append_message`` / ``publish`` / ``update_message`` (a Channel).
        budget: the connection's budget.
        on_failure: called with ``(stream_id, exc)`` when an append fails for another reason
            than a rate limit.
    """

    def __init__(
        self, writer: Any, budget: Budget, on_failure: Callable[[str, BaseException], None]
    ) -> None:
        self._writer = writer
        self._budget = budget
        self._on_failure = on_failure
        self._streams: dict[str, _Stream] = {}
        self._ready: deque[str] = deque()
        self._in_flight = 0
        self._pump: asyncio.Task[None] | None = None
        self._idle: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: Appends sent to the writer (after merging) and deltas handed in (for benchmarks).
        self.sent_appends = 0
        self.queued_appends = 0

    # -- appends ------------------------------------------------------------------------------

    def append(self, message: dict[str, Any], stream_id: str) -> None:
        """Queue one append (never waits); it goes out merged with its neighbours when a token frees."""
        self.queued_appends += 1
        serial = message["serial"]
        stream = self._streams.get(serial)
        if stream is None:
            stream = self._streams[serial] = _Stream(stream_id)
        data = message.get("data")
        if data is not None:
            stream.parts.append(data)
        was_pending = stream.message is not None
        stream.message = message
        if not was_pending and not stream.in_flight:
            self._ready.append(serial)
        self._kick()

    def _kick(self) -> None:
        if not self._ready or (self._pump is not None and not self._pump.done()):
            return
        # Fast path: a free token and nothing queued ahead: send without the pump task.
        while self._ready and self._budget.try_acquire():
            self._send_next()
        if self._ready:
            self._pump = asyncio.ensure_future(self._run_pump())

    async def _run_pump(self) -> None:
        while self._ready:
            await self._budget.acquire()
            if not self._ready:  # pragma: no cover - a drain emptied it meanwhile
                return
            self._send_next()

    def _send_next(self) -> None:
        serial = self._ready.popleft()
        stream = self._streams[serial]
        message = stream.message
        assert message is not None
        out = dict(message)
        if stream.parts:
            out["data"] = _join(stream.parts)
        stream.message = None
        stream.parts = []
        stream.in_flight = True
        self._in_flight += 1
        self.sent_appends += 1
        task = asyncio.ensure_future(self._send(serial, stream, out))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, serial: str, stream: _Stream, message: dict[str, Any]) -> None:
        self._budget.hold()  # this task's writer call is paid for (its own context only)
        try:
            await self._writer.append_message(message)
        except Exception as exc:
            if is_rate_limited(exc):
                self._budget.rejected()
                log.debug("append to %s rate-limited (%s); merging and retrying", serial, exc)
                if message.get("data") is not None:
                    stream.parts.insert(0, message["data"])
                if stream.message is None:
                    stream.message = message
            else:
                self._on_failure(stream.stream_id, exc)
        else:
            self._budget.succeeded()
        finally:
            stream.in_flight = False
            self._in_flight -= 1
            if stream.message is not None:
                self._ready.append(serial)  # behind the streams already waiting: round robin
            else:
                self._streams.pop(serial, None)
            self._kick()
            self._check_idle()

    # -- ordering barrier and single operations -----------------------------------------------

    def _busy(self) -> bool:
        return bool(self._ready) or self._in_flight > 0

    def _check_idle(self) -> None:
        if self._idle is not None and not self._busy():
            self._idle.set()

    async def drain(self) -> None:
        """Wait until every queued append is acknowledged (or failed and reported)."""
        while self._busy():
            self._idle = asyncio.Event()
            self._kick()
            await self._idle.wait()

    async def call(self, op: Callable[[], Awaitable[Any]]) -> Any:
        """Run one writer call (publish / update) after :meth:`drain`, under the budget, retrying
        rate-limit rejections after the back-off."""
        await self.drain()
        while True:
            await self._budget.acquire()
            token = self._budget.hold()
            try:
                pending = op()  # a task created now inherits the held token
            finally:
                self._budget.unhold(token)
            try:
                result = await pending
            except Exception as exc:
                if not is_rate_limited(exc):
                    raise
                self._budget.rejected()
                log.debug("operation rate-limited (%s); retrying after back-off", exc)
                continue
            self._budget.succeeded()
            return result
