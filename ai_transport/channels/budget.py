"""``PublishBudget``: the operations/s one connection may publish, shared by every stream on it.

Ably rejects inbound messages past **50/s per connection** (and per channel) with 42911 (42913
for the channel) and closes a connection at about 20x that with 42921; publishes, updates and
appends all count (``platform/pricing/limits``, ``ai-transport/token-streaming/token-rate-limits``).
A worker streaming several responses on one connection reaches that quickly: a model emits up to
~150 deltas/s per response.

A :class:`PublishBudget` is a token bucket (:class:`~ai_transport.token_bucket.TokenBucket`, the
one the emulator's inbound limits count with) of ``rate`` operations/s holding at most ``burst``
tokens; with the defaults (40/s, 8) no one-second window ever sees more than 48 operations, a
safe margin under 50. Every writer call of the codec encoder takes one token
(:class:`~ai_transport.codec.coalesce.CoalescingPublisher`); appends that wait for a token are
merged per stream, so the window each stream coalesces over grows with the number of streams
sharing the connection and the model's speed, and the connection stays under its budget. A
rate-limit rejection (42910 / 42911 / 42913) makes the budget back off (1/rate doubling up to
1 s, reset by the next success) and the rejected operation is retried, merged with what followed
(never dropped). Writes that do not come through the encoder (a session's run and step lifecycle
messages, inputs, claims and lease renewals, presence enters / updates / leaves) take a token each
too (:meth:`PublishBudget.pace`; a batch of ``n`` messages takes its ``n`` tokens at once, as Ably
counts each message of it), so everything the connection publishes shares the budget.

:class:`~ai_transport.channels.ably_channel.AblyChannel` shares one budget per ``AblyRealtime``
client (on by default); the in-process hub gives each client one when built with
``InProcessHub(publish_rate=...)`` (off by default). ``rate=0`` turns the budget off.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from typing import Any

from ..errors import ErrorCode, InvalidArgumentError
from ..token_bucket import TokenBucket

__all__ = ["DEFAULT_PUBLISH_RATE", "RATE_LIMIT_CODES", "PublishBudget", "budget_for"]

#: The default budget: operations/s per connection (Ably's limit is 50).
DEFAULT_PUBLISH_RATE = 40.0
#: Ably's nonfatal rate-limit codes (system, per connection, per channel): back off and retry.
RATE_LIMIT_CODES = frozenset({42910, 42911, 42913})


class PublishBudget:
    """A token bucket of ``rate`` operations/s, at most ``burst`` at once, shared by a connection.

    Args:
        rate: operations per second; ``0`` = off (:attr:`enabled` False, :meth:`acquire` free).
        burst: the most tokens held (how many operations may go out back to back).
    """

    def __init__(self, rate: float = DEFAULT_PUBLISH_RATE, *, burst: float = 8.0) -> None:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate < 0:
            raise InvalidArgumentError(
                "unable to create publish budget; rate must be a non-negative number of operations/s",
                ErrorCode.INVALID_ARGUMENT,
            )
        if isinstance(burst, bool) or not isinstance(burst, (int, float)) or burst < 1:
            raise InvalidArgumentError(
                "unable to create publish budget; burst must be a number >= 1", ErrorCode.INVALID_ARGUMENT
            )
        self.rate = float(rate)
        self.burst = float(burst)
        # the bucket's clock starts at its first use (the loop's time is not known here)
        self._bucket = TokenBucket(self.rate, self.burst) if self.rate > 0 else None
        self._lock: asyncio.Lock | None = None
        self._blocked_until = 0.0
        self._backoff = 0.0
        #: Operations granted and rate-limit rejections seen (for benchmarks and logs).
        self.granted = 0
        self.rejections = 0
        self._held: contextvars.ContextVar[bool] = contextvars.ContextVar(f"budget-{id(self)}", default=False)

    @property
    def enabled(self) -> bool:
        """Whether the budget limits anything (``rate > 0``)."""
        return self.rate > 0

    def try_acquire(self) -> bool:
        """Take a token now if one is available (never waits); True when taken."""
        if self._bucket is None:
            return True
        if self._lock is not None and self._lock.locked():
            return False  # others are already waiting: keep their order
        now = asyncio.get_running_loop().time()
        if now < self._blocked_until:
            return False
        if self._bucket.take(1, now):
            self.granted += 1
            return True
        return False

    async def acquire(self, n: int = 1) -> None:
        """Wait for ``n`` tokens (first come, first served) and take them at once (a batch of ``n``
        messages leaves in one ProtocolMessage, so it must not take its tokens one by one)."""
        bucket = self._bucket
        if bucket is None:
            return
        need = min(float(max(1, n)), self.burst)
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            loop = asyncio.get_running_loop()
            while True:
                now = loop.time()
                if now < self._blocked_until:
                    await asyncio.sleep(self._blocked_until - now)
                    continue
                if bucket.take(need, now):
                    self.granted += max(1, n)
                    return
                await asyncio.sleep(bucket.wait(need, now))

    def holding(self) -> bool:
        """Whether the calling context already took its token (the encoder's coalescer did)."""
        return self._held.get()

    def hold(self) -> contextvars.Token[bool]:
        """Mark the calling context (and tasks it creates) as holding a token; undo with :meth:`unhold`."""
        return self._held.set(True)

    def unhold(self, token: contextvars.Token[bool]) -> None:
        """Undo :meth:`hold`."""
        self._held.reset(token)

    async def pace(self, n: int = 1) -> None:
        """Take ``n`` tokens (a batch of ``n`` messages) unless the calling context already holds
        its token (a channel's own writes)."""
        if self.enabled and not self._held.get():
            await self.acquire(n)

    def rejected(self) -> None:
        """A rate-limit rejection: pause every user of the budget (doubling, at most 1 s)."""
        self.rejections += 1
        if self._bucket is None:
            return
        now = asyncio.get_running_loop().time()
        self._backoff = min(1.0, max(1.0 / self.rate, self._backoff * 2))
        self._blocked_until = max(self._blocked_until, now + self._backoff)
        self._bucket.drain(now)

    def succeeded(self) -> None:
        """An operation went through: the next rejection starts the back-off afresh."""
        self._backoff = 0.0

    def __repr__(self) -> str:
        return f"PublishBudget(rate={self.rate:g}, burst={self.burst:g})"


_SHARED: weakref.WeakKeyDictionary[Any, PublishBudget] = weakref.WeakKeyDictionary()


def budget_for(client: Any, rate: float = DEFAULT_PUBLISH_RATE) -> PublishBudget:
    """The budget shared by every channel of ``client`` (one connection), created on first use."""
    try:
        budget = _SHARED.get(client)
    except TypeError:  # not weak-referenceable: a budget of its own
        return PublishBudget(rate)
    if budget is None:
        budget = _SHARED[client] = PublishBudget(rate)
    return budget
