"""The one token bucket (ai_transport.token_bucket) and its two users: the publish budget and the
emulator's inbound limits. The burst cap holds after an idle spell, and a refill comes when due.

Clocks are fake (the bucket takes ``now``; the budget and the limiter read ``loop.time()``, which
the tests pin), so nothing sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ai_transport.channels.budget import PublishBudget
from ai_transport.emulator.limits import InboundLimiter, RateLimits
from ai_transport.emulator.protocol import EmulatorError
from ai_transport.token_bucket import TokenBucket


def _back_to_back(take: Callable[[], bool], most: int = 10_000) -> int:
    n = 0
    while n < most and take():
        n += 1
    return n


def test_after_an_idle_spell_at_most_burst_leave_back_to_back() -> None:
    bucket = TokenBucket(rate=32, burst=8, now=0.0)
    assert _back_to_back(lambda: bucket.take(1, 0.0)) == 8  # starts full
    # idle 2 s: rate x idle would be 64 tokens; the cap keeps 8
    assert _back_to_back(lambda: bucket.take(1, 2.0)) == 8
    assert bucket.available(2.0) == 0


def test_a_refill_comes_when_due_and_not_before() -> None:
    # times and rates are binary fractions, so the clock arithmetic is exact
    bucket = TokenBucket(rate=32, burst=8, now=0.0)
    _back_to_back(lambda: bucket.take(1, 0.0))
    assert bucket.wait(1, 0.0) == 1 / 32
    assert not bucket.take(1, 0.015625)  # half a token
    assert bucket.take(1, 0.03125)  # one token due at 1 / rate
    assert not bucket.take(1, 0.03125)
    assert _back_to_back(lambda: bucket.take(1, 0.125)) == 3  # 3 more tokens by 0.125 s
    bucket.drain(0.125)
    assert bucket.available(0.125) == 0 and bucket.wait(1, 0.125) == 1 / 32


def test_a_bucket_whose_clock_starts_at_first_use() -> None:
    bucket = TokenBucket(rate=8, burst=2)
    assert _back_to_back(lambda: bucket.take(1, 1024.0)) == 2
    assert bucket.take(1, 1024.125)


@given(
    rate=st.floats(0.5, 1000),
    burst=st.floats(1, 50),
    steps=st.lists(st.tuples(st.floats(0, 5), st.integers(0, 30)), max_size=30),
)
def test_tokens_granted_never_exceed_burst_plus_rate_times_elapsed(
    rate: float, burst: float, steps: list[tuple[float, int]]
) -> None:
    bucket = TokenBucket(rate, burst, now=0.0)
    now = 0.0
    granted: list[float] = []  # the time of every token taken
    for advance, tries in steps:
        now += advance
        for _ in range(tries):
            if bucket.take(1, now):
                granted.append(now)
        assert bucket.available(now) <= bucket.burst
    # in any window [a, b] at most burst + rate * (b - a) tokens are taken
    for i, start in enumerate(granted):
        for j in range(i, len(granted)):
            assert j - i + 1 <= bucket.burst + rate * (granted[j] - start) + 1e-6


def _with_clock(body: Callable[[list[float]], Any]) -> Any:
    """Run ``body(clock)`` on a loop whose ``time()`` reads ``clock[0]``."""
    clock = [1024.0]  # binary fractions added to it stay exact

    async def main() -> Any:
        loop = asyncio.get_running_loop()
        loop.time = lambda: clock[0]  # type: ignore[method-assign]
        return body(clock)

    return asyncio.run(main())


def test_the_publish_budget_keeps_the_burst_cap_after_idling() -> None:
    def body(clock: list[float]) -> tuple[int, int, int, int]:
        budget = PublishBudget(32, burst=8)
        first = _back_to_back(budget.try_acquire)
        clock[0] += 2.0  # idle 2 s: 64 tokens' worth, capped at 8
        after_idle = _back_to_back(budget.try_acquire)
        clock[0] += 0.015625  # half a token
        early = _back_to_back(budget.try_acquire)
        clock[0] += 0.015625  # 1 / rate after the last grant
        due = _back_to_back(budget.try_acquire)
        return first, after_idle, early, due

    assert _with_clock(body) == (8, 8, 0, 1)


def test_the_emulator_limits_keep_the_burst_cap_after_idling() -> None:
    def body(clock: list[float]) -> tuple[int, int, int]:
        limiter = InboundLimiter(RateLimits(connection_rate=None, channel_rate=8, burst=1.0), lambda *a: None)

        def admit() -> bool:
            try:
                limiter.admit(None, "ch", [{"data": "x"}])
            except EmulatorError as err:
                assert err.code == 42913
                return False
            return True

        first = _back_to_back(admit)
        clock[0] += 2.0  # idle 2 s: 16 tokens' worth, capped at rate x burst = 8
        after_idle = _back_to_back(admit)
        clock[0] += 0.125  # one token due
        due = _back_to_back(admit)
        return first, after_idle, due

    assert _with_clock(body) == (8, 8, 1)
