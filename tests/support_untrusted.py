"""Recorded conversations and a seeded channel for the untrusted-input tests.

:func:`record` runs a real conversation on the in-process channel and keeps both what a live
subscriber received (``wires``, every create / append / update in delivery order) and what history
returns (``history``, aggregates in serial order). :class:`SeededChannel` is an in-process channel
whose history is a given list of wires, so a fresh session (or a fresh worker) folds exactly those.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from support_sessions import (
    Worker,
    approve_call,
    open_session,
    second_question_and_regenerate,
    user_message,
    wait_status,
)

from ai_transport.channels.memory import InProcessChannel, InProcessHub


class _Page:
    def __init__(self, pages: list[list[Any]], index: int) -> None:
        self._pages = pages
        self._index = index
        self.items = pages[index] if pages else []

    def has_next(self) -> bool:
        return self._index + 1 < len(self._pages)

    async def next(self) -> _Page | None:
        return _Page(self._pages, self._index + 1) if self.has_next() else None


class SeededChannel:
    """An in-process channel (publish, subscribe, attach: the real thing) whose history is
    ``wires`` (oldest first), served newest first in pages of ``page_size``."""

    def __init__(self, inner: InProcessChannel, wires: list[Mapping[str, Any]], page_size: int = 7) -> None:
        self._inner = inner
        newest_first = [dict(w) for w in reversed(wires)]
        self._pages = [newest_first[i : i + page_size] for i in range(0, len(newest_first), page_size)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def history(self, **_: Any) -> _Page:
        return _Page(self._pages, 0)


def seeded_hub() -> InProcessHub:
    """A hub whose channel ``chat`` mints serials above any recorded one."""
    hub = InProcessHub()
    hub._state("chat").counter = 10**9
    return hub


async def _recorder(hub: InProcessHub) -> tuple[InProcessChannel, list[dict[str, Any]]]:
    wires: list[dict[str, Any]] = []
    channel = hub.client("recorder").channel("chat")
    await channel.subscribe(lambda m: wires.append(dict(m)))
    await channel.attach()
    return channel, wires


async def _history(hub: InProcessHub) -> list[dict[str, Any]]:
    page = await hub.client("reader").channel("chat").history(limit=1000, direction="forwards")
    return [dict(m) for m in page.items]


async def record() -> dict[str, Any]:
    """Two conversations on fresh hubs.

    ``full``: a gated call approved and run, a second question, a regenerate of its answer (every
    run complete). ``pending``: the gated call approved, the agent not woken yet; ``invocation`` is
    what wakes it (a fresh worker then owes the approved call).
    """
    out: dict[str, Any] = {}
    for name in ("full", "pending"):
        hub, client, agent = await open_session()
        recorder, wires = await _recorder(hub)
        worker = Worker()
        sent = await client.view.send(user_message("Weather in Paris?"))
        run = await worker.handle(agent, sent.invocation.to_json())
        await wait_status(client.view, run.run_id, "suspended")
        answer, _call = await approve_call(client.view, run.run_id)
        if name == "pending":
            await asyncio.sleep(0.05)
            out[name] = {"invocation": answer.invocation.to_json()}
        else:
            await worker.handle(agent, answer.invocation.to_json())
            await wait_status(client.view, run.run_id, "complete")
            await second_question_and_regenerate(client, agent)
            out[name] = {}
        await asyncio.sleep(0.05)
        out[name]["wires"] = list(wires)
        out[name]["history"] = await _history(hub)
        await recorder.close()
        await client.close()
        await agent.end()
    return out
