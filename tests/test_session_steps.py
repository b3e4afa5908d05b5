"""Step ids and attempts: a retried step replaces its failed attempt in every view (0.8.0's rule).

A model call that fails mid-stream leaves a partial message on the channel. Retrying it as a new
attempt of the same step (``run.create_step()`` right after a failed step reuses its id, or an
explicit ``step_id``) makes the retry canonical: the live client, the agent's run view and a fresh
client folding history (in any page size) all show the final attempt only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support_sessions import as_dicts, open_session, text_delta, text_opening, user_message, wait_status

from ai_transport.codec.codec import ResponsesCodec
from ai_transport.conversation.tree import Tree, WireApplier
from ai_transport.errors import AITransportError
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.client import ClientSession
from ai_transport.sessions.view import TreeBranch


async def broken_stream(text: str) -> AsyncIterator[dict[str, Any]]:
    """A model stream that opens a text, streams ``text`` and then fails (a dropped connection)."""
    for event in text_opening("msg_partial"):
        yield event
    for word in text.split():
        await asyncio.sleep(0)
        yield text_delta(word + " ", "msg_partial")
    raise ConnectionError("model stream reset")


def texts(messages: list[Any]) -> list[str]:
    out = []
    for m in messages:
        for item in m.message.items:
            if item.get("type") == "message":
                out.append("".join(p.get("text", "") for p in item.get("content", [])))
    return out


async def retried_run(explicit: str | None = None) -> dict[str, Any]:
    """A run whose first step fails mid-stream and is retried; returns what every reader shows."""
    hub, client, agent = await open_session()
    sent = await client.view.send(user_message("Tell me a story"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    first = run.create_step(step_id=explicit)
    await first.start()
    result = await first.pipe(broken_stream("Once upon a"))
    assert result.reason == "error"
    await first.end()
    retry = run.create_step(step_id=explicit)
    assert retry.step_id == first.step_id
    await retry.start()
    assert (await retry.pipe(build_response_events([ScriptedText("The end.")], seed=3))).reason == "complete"
    await retry.end()
    after = run.create_step()  # after a complete step: a fresh id
    assert after.step_id != first.step_id
    await run.end("complete")
    await wait_status(client.view, run.run_id, "complete")
    fresh = ClientSession(hub.client("bob").channel("chat"))
    await fresh.connect()
    await fresh.view.load_all()
    history = await hub.client("x").channel("chat").history(limit=1000, direction="forwards")
    out = {
        "live": texts(client.view.get_messages()),
        "agent": texts(run.view.get_messages()),
        "fresh": texts(fresh.view.get_messages()),
        "steps": [(s.step_id, s.status, s.attempt_count) for s in client.view.run(run.run_id).steps],
        "step_id": first.step_id,
        "history": list(history.items),
        "live_dicts": as_dicts(client.view.get_messages()),
    }
    for s in (client, fresh):
        await s.close()
    await agent.end()
    return out


async def test_a_step_after_a_failed_one_reuses_its_id_and_supersedes_it() -> None:
    out = await retried_run()
    assert out["live"] == out["agent"] == out["fresh"] == ["Tell me a story", "The end."]
    assert out["steps"] == [(out["step_id"], "complete", 2)]
    partial = [m for m in out["history"] if "Once" in str(m.get("data"))]
    assert partial, "the failed attempt stays on the channel (superseded, not deleted)"


async def test_explicit_step_id_wins() -> None:
    out = await retried_run(explicit="model-call-1")
    assert out["step_id"] == "model-call-1"
    assert out["live"] == out["fresh"] == ["Tell me a story", "The end."]


async def test_create_step_rejects_an_empty_step_id() -> None:
    _, client, agent = await open_session()
    sent = await client.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    with pytest.raises(AITransportError) as err:
        run.create_step(step_id="")
    assert err.value.code == 40003
    await run.end()
    await client.close()
    await agent.end()


RETRIED = asyncio.run(retried_run())


def _fold(order: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tree = Tree(ResponsesCodec)
    applier = WireApplier(tree, ResponsesCodec.create_decoder())
    for message in order:
        applier.apply(message)
    branch = TreeBranch(tree)
    return as_dicts(branch.extract_messages(branch.visible_nodes()))


@settings(deadline=None, max_examples=60)
@given(page_size=st.integers(min_value=1, max_value=40), dup=st.lists(st.integers(0, 10_000), max_size=5))
def test_history_in_any_page_size_shows_only_the_final_attempt(page_size: int, dup: list[int]) -> None:
    newest_first = list(reversed(RETRIED["history"]))
    order: list[dict[str, Any]] = []
    for start in range(0, len(newest_first), page_size):
        order.extend(reversed(newest_first[start : start + page_size]))
    for at in dup:  # a re-delivered wire
        order.append(order[at % len(order)])
    assert _fold(order) == RETRIED["live_dicts"]
