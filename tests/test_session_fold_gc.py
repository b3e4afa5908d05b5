"""The history fold and the cyclic garbage collector (issue 21, wake-up cost).

A history page folds with no await inside, so :meth:`~ai_transport.sessions.view.HistoryHydrator.fold_until`
pauses the cyclic collector around each page (a full collection during a 10k-message wake-up scanned
every object of the process, ~30 us a message) and restores the caller's setting after it, never
enabling a collector the application turned off. That is only sound when the fold leaves no
reference cycle per wire (nothing for the paused collector to reclaim later): checked here
structurally, by counting what ``gc.collect()`` finds after a woken agent session is dropped, for a
short and a ten times longer history. Timings belong in ``benchmarks/bench_fold.py``.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from typing import Any

from support_sessions import open_session, user_message

from ai_transport.channels.memory import InProcessHub
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentSession


async def _conversation(turns: int) -> tuple[InProcessHub, Any]:
    hub, client, agent = await open_session()
    for i in range(turns):
        sent = await client.view.send(user_message(f"question {i}"))
        run = await agent.create_run(sent.invocation.to_json())
        await run.start()
        await run.pipe(build_response_events([ScriptedText(f"Answer {i}.")], seed=i))
        await run.end("complete")
    prompt = await client.view.send(user_message("And now?"))
    for session in (client, agent):
        await session.close()
        await session.channel.close()
    return hub, prompt.invocation.to_json()


def _on_cycles(objects: list[Any]) -> list[Any]:
    """The objects of ``objects`` that lie on a reference cycle among them (a strongly connected
    component of more than one object, or one referring to itself), not those merely hanging off one."""
    ids = {id(o): o for o in objects}
    edges = {i: [id(r) for r in gc.get_referents(o) if id(r) in ids] for i, o in ids.items()}
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    found: list[Any] = []
    for root in ids:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(edges[root]))]
        while work:  # Tarjan's algorithm, iteratively
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(edges[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1 or v in edges[v]:
                        found.extend(ids[x] for x in component)
    return found


def _garbage_on_cycles() -> list[Any]:
    """Collect, keeping what the collector found; return the found objects that lie on cycles."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return _on_cycles(list(gc.garbage))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def _wake(hub: InProcessHub, invocation: Any, during: list[bool]) -> None:
    """Wake a fresh agent on ``invocation``, fold the whole history, end the run and drop the session."""
    session = AgentSession(hub.client("agent").channel("chat"))
    await session.connect()
    core = session.core
    original = core.receive_history

    def noting(message: Any) -> None:
        during.append(gc.isenabled())
        original(message)

    core.receive_history = noting  # type: ignore[method-assign]
    run = await session.create_run(invocation)
    await run.start()
    await run.view.load_all()
    assert during  # folded from history
    await run.end("complete")
    await session.close()
    await session.channel.close()


def _cycles_after_wake(turns: int, during: list[bool]) -> list[Any]:
    """The objects on reference cycles ``gc.collect()`` finds once a woken session is dropped."""

    async def go() -> list[Any]:
        hub, invocation = await _conversation(turns)
        await _wake(hub, invocation, [])  # the first wake-up's leftovers (loop tasks ending) ...
        for _ in range(5):
            await asyncio.sleep(0)
        gc.collect()  # ... and the conversation's are collected before the one measured
        await _wake(hub, invocation, during)
        for _ in range(5):
            await asyncio.sleep(0)
        return _garbage_on_cycles()

    return asyncio.run(go())


def _kinds(objects: list[Any]) -> list[tuple[str, int]]:
    return Counter(type(o).__name__ for o in objects).most_common(8)


def test_fold_leaves_no_cycle_per_wire() -> None:
    gc.collect()
    short = _cycles_after_wake(3, [])
    long = _cycles_after_wake(30, [])
    # A dropped session's own wiring (bound-method listeners) makes a few cycles, whatever it folded
    # (the tree hangs off them and is reclaimed with them); ten times the history adds none.
    assert short, "the measure sees a dropped session's wiring"
    assert len(long) - len(short) <= 5, (len(short), len(long), _kinds(long))


def test_collector_paused_while_a_page_folds_and_restored_after() -> None:
    during: list[bool] = []
    assert gc.isenabled()
    _cycles_after_wake(2, during)
    assert during and not any(during)  # paused for every history wire
    assert gc.isenabled()  # and restored after


def test_a_disabled_collector_stays_disabled() -> None:
    during: list[bool] = []
    gc.disable()
    try:
        _cycles_after_wake(2, during)
        assert during and not any(during)
        assert not gc.isenabled()  # the application's choice is never overridden
    finally:
        gc.enable()

