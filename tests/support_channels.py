"""Shared fixtures and helpers for the channel tests.

``channel_kind`` is parametrised over every channel implementation the behavioural suite runs on.
A *kind* opens channel objects (``await kind.open(channel_name, client_id=...)``) that all speak the
:class:`ai_transport.transport.channel.Channel` surface and deliver inbound messages as plain dicts.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from ai_transport.transport.memory import InProcessHub

KIND_NAMES = ["inprocess"]


class InProcessKind:
    """Channels on one :class:`InProcessHub`."""

    name = "inprocess"
    #: Error codes the kind may raise for an append whose data type differs from the message's.
    append_type_error_codes = {40003}

    def __init__(self) -> None:
        self.hub = InProcessHub()
        self._opened: list[Any] = []

    async def open(self, channel_name: str, *, client_id: str | None = None) -> Any:
        ch = self.hub.channel(channel_name, client_id=client_id)
        self._opened.append(ch)
        return ch

    async def aclose(self) -> None:
        for ch in self._opened:
            await ch.close()


def unique_name(prefix: str = "test") -> str:
    """A channel name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=KIND_NAMES)
async def channel_kind(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """One channel implementation (see ``KIND_NAMES``)."""
    kind: Any
    if request.param == "inprocess":
        kind = InProcessKind()
    else:  # pragma: no cover - filled in when the emulator lands
        raise AssertionError(request.param)
    try:
        yield kind
    finally:
        await kind.aclose()


class Recorder:
    """Subscribes to a channel and records every delivery in order."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    def __call__(self, msg: dict[str, Any]) -> None:
        self.messages.append(msg)
        self._changed.set()

    async def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate(messages)`` holds (fails the test after ``timeout`` seconds)."""

        async def _wait() -> None:
            while not predicate(self.messages):
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(_wait(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError(f"timed out; recorded {len(self.messages)}: {self.messages!r}") from None

    async def wait_count(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Wait for at least ``n`` deliveries; return them all."""
        await self.wait_for(lambda ms: len(ms) >= n, timeout)
        return self.messages

    async def settle(self, quiet: float = 0.1) -> None:
        """Wait until nothing new arrived for ``quiet`` seconds."""
        while True:
            count = len(self.messages)
            await asyncio.sleep(quiet)
            if len(self.messages) == count:
                return


async def subscribed(channel: Any) -> Recorder:
    """A :class:`Recorder` subscribed to ``channel``."""
    rec = Recorder()
    await channel.subscribe(rec)
    return rec


async def all_history(channel: Any, *, limit: int = 100, direction: str = "backwards", **kw: Any) -> list[dict]:
    """Every history item, following pages."""
    page = await channel.history(limit=limit, direction=direction, **kw)
    items = list(page.items)
    while page.has_next():
        page = await page.next()
        assert page is not None
        items.extend(page.items)
    return items


def fold(deliveries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Fold live deliveries (creates, fragments, updates, deletes) into aggregates keyed by serial.

    Drops re-deliveries whose version is not newer than the one applied (as AI Transport does).
    """
    out: dict[str, dict[str, Any]] = {}
    for m in deliveries:
        serial = m["serial"]
        vs = (m.get("version") or {}).get("serial", serial)
        cur = out.get(serial)
        if cur is not None and vs <= cur["version"]["serial"]:
            continue
        if m["action"] == "message.append":
            assert cur is not None, f"fragment before its message: {m!r}"
            cur = dict(cur)
            cur["data"] = (cur.get("data") or type(m["data"])()) + m["data"]
            if "extras" in m:  # an append replaces extras wholesale
                cur["extras"] = m["extras"]
            else:
                cur.pop("extras", None)
            cur["version"] = m["version"]
            out[serial] = cur
        else:
            out[serial] = dict(m)
    return out


def essence(m: dict[str, Any]) -> tuple:
    """The parts of an aggregate a fold must reproduce."""
    return (m["serial"], m.get("name"), m.get("data"), m.get("extras"), m["version"]["serial"])
