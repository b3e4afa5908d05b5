"""A Vercel-codec conversation folds from history to what live shows, in any page size: history
comes newest page first, and the decoder judged its mid-stream-join pre-roll (``start`` /
``start-step``, :func:`~ai_transport.codec.vercel.codec.decode_lifecycle`) in that arrival order,
so a stream decoded before its step's ``start-step`` was pre-rolled with one and the message grew
a spurious ``step-start`` part where the page boundaries fell (pages of 1, 2, 3, 7 here, not 5 or
100): a fresh worker's model input differed from a live one's. The pre-roll is marked
(:class:`~ai_transport.codec.vercel.state.Repair`) and the reducer, folding in serial order, drops a
repaired ``start-step`` of a step already open."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support_untrusted import SeededChannel, seeded_hub

from ai_transport import UIMessageCodec as C
from ai_transport.channels.memory import InProcessHub
from ai_transport.codec.vercel import reducer
from ai_transport.codec.vercel.state import Repair
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

PASS = [
    {"type": "start", "messageId": "resp-1"}, {"type": "start-step"},
    {"type": "reasoning-start", "id": "r1"}, {"type": "reasoning-delta", "id": "r1", "delta": "think"},
    {"type": "reasoning-end", "id": "r1"},
    {"type": "text-start", "id": "t1"}, {"type": "text-delta", "id": "t1", "delta": "Checking."},
    {"type": "text-end", "id": "t1"},
    {"type": "tool-input-start", "toolCallId": "call-1", "toolName": "weather"},
    {"type": "tool-input-delta", "toolCallId": "call-1", "inputTextDelta": '{"city": "Paris"}'},
    {"type": "tool-input-available", "toolCallId": "call-1", "toolName": "weather", "input": {"city": "Paris"}},
    {"type": "tool-approval-request", "toolCallId": "call-1", "approvalId": "ap-1"},
    {"type": "finish-step"},
    {"type": "start-step"},
    {"type": "text-start", "id": "t2"}, {"type": "text-delta", "id": "t2", "delta": "Asked."},
    {"type": "text-end", "id": "t2"},
    {"type": "finish-step"}, {"type": "finish", "finishReason": "tool-calls"},
]


@pytest.fixture(scope="module")
def recorded() -> tuple[str, list[dict[str, Any]]]:
    async def record() -> tuple[str, list[dict[str, Any]]]:
        hub = InProcessHub()
        alice = ClientSession(hub.client("alice").channel("chat"), codec=C, trusted_agent_ids={"agent"})
        await alice.connect()
        sent = await alice.view.send(C.create_user_message(
            {"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "Weather?"}]}))
        agent = AgentSession(hub.client("agent").channel("chat"), codec=C)
        await agent.connect()
        run = await agent.create_run(sent.invocation.to_json())
        await run.start()
        await run.pipe(PASS)
        await run.suspend()
        await asyncio.sleep(0.05)
        live = json.dumps([m.to_dict() for m in alice.view.get_messages()])
        page = await hub.client("reader").channel("chat").history(limit=1000, direction="forwards")
        history = [dict(m) for m in page.items]
        await agent.close()
        await alice.close()
        return live, history

    return asyncio.run(record())


async def _folded(history: list[dict[str, Any]], page_size: int) -> str:
    channel = SeededChannel(seeded_hub().client("bob").channel("chat"), history, page_size)
    session = ClientSession(channel, codec=C, trusted_agent_ids={"agent"})  # type: ignore[arg-type]
    await session.connect()
    await session.view.load_all()
    shown = json.dumps([m.to_dict() for m in session.view.get_messages()])
    await session.close()
    return shown


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(page_size=st.integers(1, 30))
def test_history_in_any_page_size_folds_to_the_live_view(recorded: tuple[str, list[dict[str, Any]]], page_size: int) -> None:
    live, history = recorded
    parts = [p["type"] for p in json.loads(live)[1]["message"]["parts"]]
    assert parts == ["step-start", "reasoning", "text", "tool-weather", "step-start", "text"]
    assert asyncio.run(_folded(history, page_size)) == live


def test_a_repaired_start_step_folds_only_when_no_step_is_open() -> None:
    """A mid-stream join with no ``start-step`` on the wire still gets its pre-roll (0.8.0's
    repair), and a ``start-step`` on the wire always folds."""
    state = reducer.init()
    for chunk in [Repair(type="start", messageId="r"), Repair(type="start-step"), {"type": "text-start", "id": "t"}]:
        reducer.fold(state, "output", chunk, "m1")
    reducer.fold(state, "output", Repair(type="start-step"), "m1")  # moot: the step is open
    reducer.fold(state, "output", {"type": "finish-step"}, "m1")
    reducer.fold(state, "output", Repair(type="start-step"), "m1")  # a new step, never seen started
    reducer.fold(state, "output", {"type": "start-step"}, "m1")  # on the wire: folds as 0.8.0's does
    assert [p["type"] for p in reducer.get_messages(state)[0].message["parts"]] == [
        "step-start", "text", "step-start", "step-start"
    ]
    assert Repair(type="start-step") == {"type": "start-step"}  # the chunk it stands for
