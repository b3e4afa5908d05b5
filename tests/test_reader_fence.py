"""Fencing on the reader's side (issue 22): a worker A whose lease lapsed (paused right after its
lease check) and was taken over by B publishes a late output; every reader of ours refuses it —
a fresh :class:`ClientSession`'s view and the model input a resumed agent reads — while B's output
and A's output from before the takeover are kept. The rule: :mod:`ai_transport.conversation.fence`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support_sessions import channel_history, open_text_stream, text_delta, text_opening, user_message

from ai_transport.channels.memory import InProcessHub
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

LEASE = 0.2


def texts(messages: list[Any]) -> list[str]:
    return [
        part.get("text", "")
        for m in messages
        for item in m.message.items
        if item.get("type") == "message" and item.get("role") == "assistant"
        for part in item.get("content", [])
    ]


async def takeover_scenario() -> tuple[InProcessHub, str, Any]:
    hub = InProcessHub()
    client = ClientSession(hub.client("alice").channel("chat"), lease=LEASE)
    await client.connect()
    a = AgentSession(hub.client("agent", connection_id="conn-a").channel("chat"), lease=LEASE)
    b = AgentSession(hub.client("agent", connection_id="conn-b").channel("chat"), lease=LEASE)
    await a.connect()
    await b.connect()
    sent = await client.view.send(user_message("Hi"))
    body = sent.invocation.to_json()
    run_a = await a.create_run(body)
    await run_a.start()
    _step, encoder_a = await open_text_stream(run_a, "msg_a1", "early from A")
    run_a.lease.cancel()  # A is paused: its renewals stop
    await asyncio.sleep(LEASE * 2)
    run_b = await b.create_run(body, run_id=run_a.run_id)
    await run_b.start()  # B takes the run over (A's lease lapsed)
    await open_text_stream(run_b, "msg_b1", "from B")

    async def passed() -> None:  # A resumes right after its lease check passed: the output slips out
        return None

    run_a.lease.ensure = passed  # type: ignore[method-assign]
    for event in [*text_opening("msg_a2"), text_delta("late from A", "msg_a2")]:  # a new stream of A's
        await encoder_a.publish_output(event)
    await run_a.drain()
    return hub, run_a.run_id, sent


@pytest.mark.parametrize("page_size", [1, 2, 100])  # 1, 2: the takeover lands after the late output
async def test_a_superseded_holders_late_output_is_refused_by_a_fresh_reader_and_a_resumed_agent(page_size: int) -> None:
    hub, run_id, sent = await takeover_scenario()
    history = await channel_history(hub)
    assert any(m.get("data") == "late from A" and m.get("connectionId") == "conn-a" for m in history)  # it slipped out

    reader = ClientSession(hub.client("bob").channel("chat"), lease=LEASE, history_page_size=page_size)
    skipped: list[str] = []
    reader.on("skipped", lambda message, why: skipped.append(why))
    await reader.connect()
    await reader.view.load_all()
    shown = texts(reader.view.get_messages())
    assert "early from A" in shown and "from B" in shown
    assert "late from A" not in shown
    assert any("after its lease was taken over" in why for why in skipped)

    c = AgentSession(hub.client("agent", connection_id="conn-c").channel("chat"), lease=LEASE)
    await c.connect()
    resumed = await c.create_run(sent.invocation.to_json(), run_id=run_id)
    await resumed.start()
    await resumed.view.load_all()
    model_input = str(resumed.input_items())
    assert "from B" in model_input and "early from A" in model_input
    assert "late from A" not in model_input
