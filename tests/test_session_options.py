"""Session options of 0.8.0: ``channel_modes`` (``channelModes``) and ``reorder_window``
(``reorderWindowMs``), with the agent registration param; the modes against the JS package."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support_parity import text_turn
from support_sessions import as_dicts, record_conversation, user_message, wait_status

from ai_transport.channels.memory import InProcessHub
from ai_transport.channels.modes import OBJECT_MODES, channel_agent, resolve_channel_modes
from ai_transport.errors import AITransportError
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

RECORDED = asyncio.run(record_conversation())


def test_resolve_channel_modes() -> None:
    assert resolve_channel_modes(None) is None and resolve_channel_modes([]) is None
    assert resolve_channel_modes(OBJECT_MODES) == [
        "PUBLISH",
        "SUBSCRIBE",
        "PRESENCE",
        "PRESENCE_SUBSCRIBE",
        "OBJECT_PUBLISH",
        "OBJECT_SUBSCRIBE",
        "ANNOTATION_PUBLISH",
    ]
    assert channel_agent("openai-responses", "1.2.3") == "ai-transport-python/1.2.3 openai-responses/1.2.3"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"channel_modes": "PUBLISH"}, "channel_modes"),
        ({"channel_modes": ["PUBLISH", "publish"]}, "channel_modes[1]"),
        ({"reorder_window": 0}, "reorder_window"),
        ({"reorder_window": True}, "reorder_window"),
    ],
)
def test_bad_options_are_40003_naming_the_field(kwargs: dict, field: str) -> None:
    for cls in (ClientSession, AgentSession):
        with pytest.raises(AITransportError) as err:
            cls(InProcessHub().client("x").channel("chat"), **kwargs)
        assert err.value.code == 40003 and field in err.value.message


async def test_a_finished_runs_log_is_swept_after_the_reorder_window() -> None:
    hub = InProcessHub()
    client = ClientSession(hub.client("alice").channel("chat"), reorder_window=0.05)
    await client.connect()
    agent = AgentSession(hub.client("agent").channel("chat"))
    await agent.connect()
    sent = await client.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation)
    await run.start()
    await run.pipe(text_turn("Hello there.", 1))
    await run.end("complete")
    await wait_status(client.view, run.run_id, "complete")
    entry = client.tree._nodes[run.run_id]
    assert not entry.log.swept and entry.sweep_queued
    before = as_dicts(client.view.get_messages())
    await asyncio.sleep(0.2)  # the window passes on the Ably-timestamp clock ...
    later = await client.view.send(user_message("still there?"))  # ... which the next wire advances
    await wait_status(client.view, run.run_id, "complete")
    await client.view.wait_for(lambda: client.tree.get_node(later.input_codec_message_id) is not None)
    await client.view.wait_for(lambda: client.tree._nodes[run.run_id].log.swept)
    assert all(not e.events for e in entry.log.entries) and entry.log.entries
    assert as_dicts(client.view.get_messages())[:2] == before
    # a re-delivered old wire is still recognised and dropped
    stored = await hub.client("reader").channel("chat").history(limit=100, direction="forwards")
    for wire in stored.items:
        client._on_live(wire)
    assert as_dicts(client.view.get_messages())[:2] == before
    await client.close()
    await agent.end()


@settings(max_examples=25, deadline=None)
@given(
    gap=st.integers(0, 5_000),
    window=st.floats(0.001, 10.0),
    repeats=st.lists(st.integers(0, 10_000), max_size=8),
)
def test_sweeping_never_changes_the_view(gap: int, window: float, repeats: list[int]) -> None:
    """Whatever the window and the spacing of the wires, and with old wires re-delivered after the
    sweep, a client folding the conversation shows what the recorded live client showed."""
    history = RECORDED["history"]

    async def fold() -> list[dict[str, Any]]:
        session = ClientSession(InProcessHub().client("alice").channel("chat"), reorder_window=window)
        wires = [dict(w, timestamp=1_000_000 + i * gap) for i, w in enumerate(history)]
        wires += [dict(wires[r % len(wires)], timestamp=1_000_000 + (len(wires) + k) * gap) for k, r in enumerate(repeats)]
        for wire in wires:
            session._on_live(wire)
        messages = json.loads(json.dumps(as_dicts(session.view.get_messages())))
        await session.close()
        return messages

    assert asyncio.run(fold()) == RECORDED["live"]["messages"]
