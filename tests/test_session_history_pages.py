"""A page of history is one input of a session: the hydrator hands it whole to the session, which
folds it and dispatches what it changed once. A view's handlers (:class:`~ai_transport.sessions.view.IgnoresHistory`)
ignore what a page of the session's own history changes, so they are not called meanwhile and the
view changes only they want are not queued; every other subscriber gets every change, in order.
Real codec and in-process channel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support_sessions import open_session, user_message, wait_status

from ai_transport.conversation.changes import OutputChanged, TreeChanged, WireFolded
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession
from ai_transport.sessions.view import IgnoresHistory

pytestmark = pytest.mark.asyncio


async def _conversation(turns: int) -> tuple[Any, list[tuple[str, str]]]:
    """A hub holding ``turns`` answered prompts; the (serial, name) of every message, oldest first."""
    hub, client, agent = await open_session()
    for i in range(turns):
        sent = await client.view.send(user_message(f"question {i}"))
        run = await agent.create_run(sent.invocation.to_json())
        await run.start()
        await run.pipe(build_response_events([ScriptedText(f"answer {i}")], seed=i))
        await run.end("complete")
        await wait_status(client.view, run.run_id, "complete")
    history = await client.channel.history(limit=1000)
    serials = [(m["serial"], m["name"]) for m in reversed(history.items)]
    await client.close()
    await agent.close()
    return hub, serials


@pytest.mark.parametrize("flavour", ["client", "agent"])
async def test_history_pages_reach_plain_subscribers_in_order_and_skip_the_ones_that_ignore_history(
    flavour: str,
) -> None:
    hub, history = await _conversation(3)
    channel = hub.client("reader" if flavour == "client" else "agent").channel("chat")
    session: Any = (
        ClientSession(channel, history_page_size=4)
        if flavour == "client"
        else AgentSession(channel, history_page_size=4)
    )
    plain: list[str] = []
    quiet: list[Any] = []
    session.subscribe(WireFolded, lambda change: plain.append(change.wire["serial"]))
    session.subscribe(WireFolded, IgnoresHistory(quiet.append))
    queued: list[type] = []
    changes = session.core.changes

    def spy() -> list[Any]:
        out = changes()
        queued.extend(type(c) for c in out)
        return out

    session.core.changes = spy
    await session.connect()
    await session.hydrator.fold_until(lambda: False)
    assert session.hydrator.pages_folded == -(-len(history) // 4)
    # every wire of history the tree folds (an agent folds a lease wire into its ledger), once: pages
    # newest first, each oldest first
    pages = [history[max(0, i - 4) : i] for i in range(len(history), 0, -4)]
    folds = [s for page in pages for s, name in page if flavour == "client" or name != "ai-claim"]
    assert plain == folds
    assert quiet == []  # never called while the session's own history folds
    # the views only (IgnoresHistory) want the structure: it is not queued while history folds
    assert TreeChanged not in queued and WireFolded in queued
    # a live wire reaches both, and the view changes are queued again
    sender = hub.client("alice").channel("chat")
    await sender.publish({"name": "note", "data": "live"})
    for _ in range(50):
        if quiet:
            break
        await asyncio.sleep(0.01)
    assert quiet and quiet[-1].wire["data"] == "live" and plain[-1] == quiet[-1].wire["serial"]
    await session.close()
    await sender.close()


async def test_a_handler_that_wants_history_gets_every_output_while_the_views_stay_quiet() -> None:
    hub, _history = await _conversation(2)
    agent = AgentSession(hub.client("agent").channel("chat"), history_page_size=3)
    outputs: list[OutputChanged] = []
    agent.subscribe(OutputChanged, outputs.append)
    await agent.connect()
    updates: list[Any] = []
    client = ClientSession(hub.client("alice").channel("chat"), history_page_size=3)
    await client.connect()
    client.view.on("update", lambda *a: updates.append(a))
    await agent.hydrator.fold_until(lambda: False)
    await client.view.load_all()
    assert len(updates) == 1  # the view emits once, when the load settles
    assert {c.codec_message_id for c in outputs} >= {m.codec_message_id for m in client.view.get_messages()}
    await agent.close()
    await client.close()
