"""The coalescing publisher under a shared publish budget (property) and the budget itself.

For any interleaving of streams and publishers sharing one budget, any delta sizes, timings and
injected rate-limit rejections (42911 / 42913), the text each message receives is exactly its
deltas concatenated in order, the latest extras win, nothing is dropped or duplicated, and a
discrete publish never overtakes an append queued before it.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_transport.channels.budget import PublishBudget, budget_for
from ai_transport.codec.coalesce import CoalescingPublisher, is_rate_limited
from ai_transport.errors import AITransportError, InvalidArgumentError


class FlakyWriter:
    """Records accepted operations; rejects the first ones ``rejections`` marks (rate-limit codes)."""

    def __init__(self, rejections: list[int], delays: list[int]) -> None:
        self._rejections = itertools.chain(rejections, itertools.repeat(0))
        self._delays = itertools.cycle(delays or [0])
        self.text: dict[str, str] = {}
        self.extras: dict[str, Any] = {}
        self.log: list[tuple[str, Any]] = []
        self.rejected = 0

    async def _maybe_fail(self) -> None:
        delay = next(self._delays)
        if delay:
            await asyncio.sleep(delay / 1000)
        code = next(self._rejections)
        if code:
            self.rejected += 1
            raise AITransportError("Rate limit exceeded; request rejected (nonfatal)", code, 429)

    async def append_message(self, message: dict[str, Any]) -> str:
        await self._maybe_fail()
        serial = message["serial"]
        self.text[serial] = self.text.get(serial, "") + message.get("data", "")
        self.extras[serial] = message.get("extras")
        self.log.append(("append", serial))
        return "v"

    async def publish(self, message: dict[str, Any]) -> list[str]:
        await self._maybe_fail()
        self.log.append(("publish", (message["name"], dict(self.text))))
        return ["p"]


op = st.one_of(
    st.tuples(st.just("delta"), st.integers(0, 3), st.text(max_size=6), st.integers(0, 2)),
    st.tuples(st.just("publish"), st.integers(0, 3), st.just(""), st.integers(0, 2)),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scripts=st.lists(st.lists(op, max_size=25), min_size=1, max_size=3),
    rejections=st.lists(st.sampled_from([0, 0, 0, 42911, 42913]), max_size=12),
    delays=st.lists(st.integers(0, 2), max_size=6),
    rate=st.sampled_from([300.0, 2000.0]),
)
def test_coalesced_text_is_the_deltas_in_order(
    scripts: list[list[tuple[str, int, str, int]]], rejections: list[int], delays: list[int], rate: float
) -> None:
    writer = FlakyWriter(rejections, delays)
    failures: list[tuple[str, BaseException]] = []
    expected: dict[str, str] = {}
    last_extras: dict[str, Any] = {}

    async def run_publisher(p: int, script: list[tuple[str, int, str, int]], budget: PublishBudget) -> None:
        pub = CoalescingPublisher(writer, budget, lambda sid, exc: failures.append((sid, exc)))
        for n, (kind, stream, text, sleep_ms) in enumerate(script):
            if sleep_ms:
                await asyncio.sleep(sleep_ms / 1000)
            serial = f"p{p}s{stream}"
            if kind == "delta":
                expected[serial] = expected.get(serial, "") + text
                last_extras[serial] = {"n": n}
                pub.append({"serial": serial, "data": text, "extras": {"n": n}}, serial)
            else:
                queued = {s: t for s, t in expected.items() if s.startswith(f"p{p}s")}

                async def publish(name: str = f"p{p}-{n}") -> Any:
                    return await writer.publish({"name": name})

                await pub.call(publish)
                _, (_, seen) = writer.log[-1] if writer.log[-1][0] == "publish" else next(
                    e for e in reversed(writer.log) if e[0] == "publish" and e[1][0] == f"p{p}-{n}"
                )
                # every append this publisher queued before the publish was accepted before it
                for serial_, text_ in queued.items():
                    assert seen.get(serial_, "") == text_
        await pub.drain()

    async def main() -> None:
        budget = PublishBudget(rate, burst=3)
        await asyncio.gather(*(run_publisher(p, s, budget) for p, s in enumerate(scripts)))

    asyncio.run(main())
    assert failures == []
    for serial, text in expected.items():
        assert writer.text.get(serial, "") == text
        if serial in writer.extras:
            assert writer.extras[serial] == last_extras[serial]


def test_budget_never_grants_more_than_rate_plus_burst_per_second() -> None:
    async def main() -> list[float]:
        budget = PublishBudget(100, burst=5)
        loop = asyncio.get_running_loop()
        stamps = []
        for _ in range(40):
            await budget.acquire()
            stamps.append(loop.time())
        return stamps

    stamps = asyncio.run(main())
    # tokens granted by time t never exceed burst + rate * elapsed (the clock only runs forward)
    for i, t in enumerate(stamps):
        assert i + 1 <= 5 + 100 * (t - stamps[0]) + 1e-6


def test_budget_backs_off_on_rejection_and_resets() -> None:
    async def main() -> tuple[float, float]:
        budget = PublishBudget(1000, burst=1)
        loop = asyncio.get_running_loop()
        budget.rejected()
        budget.rejected()
        t0 = loop.time()
        await budget.acquire()
        waited = loop.time() - t0
        budget.succeeded()
        return waited, budget._backoff

    waited, backoff = asyncio.run(main())
    assert waited >= 0.0015  # two rejections: 1 ms then 2 ms
    assert backoff == 0.0


def test_budget_off_and_argument_checks() -> None:
    assert not PublishBudget(0).enabled
    assert PublishBudget(0).try_acquire()
    with pytest.raises(InvalidArgumentError, match="rate"):
        PublishBudget(-1)
    with pytest.raises(InvalidArgumentError, match="burst"):
        PublishBudget(10, burst=0)

    class Client:
        pass

    c = Client()
    assert budget_for(c) is budget_for(c)
    assert budget_for(Client()) is not budget_for(c)


def test_rate_limit_codes() -> None:
    assert is_rate_limited(AITransportError("x", 42911, 429))
    assert is_rate_limited(AITransportError("x", 42913, 429))
    assert not is_rate_limited(AITransportError("x", 42921, 429))
    assert not is_rate_limited(ValueError("x"))
