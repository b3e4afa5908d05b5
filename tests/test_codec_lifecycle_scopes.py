"""The Vercel decoder's lifecycle scopes are bounded per publisher: a channel member inventing run ids
evicts only its own scopes, never the live run of another publisher (which would give that run's next
stream a spurious ``start`` / ``start-step`` pre-roll: an extra ``step-start`` part in its message).

Through a real session (in-process hub), on the decoder itself, and on :class:`LifecycleTracker`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support_sessions import wait_status

from ai_transport import UIMessageCodec
from ai_transport.channels import InProcessHub
from ai_transport.codec.core import lifecycle
from ai_transport.codec.core.lifecycle import LifecycleTracker
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

#: The bound the tests run with (the module constant is read when a decoder's tracker is made).
SMALL = 8
FLOOD = 3 * SMALL


def _start(ctx: Any) -> list[dict[str, Any]]:
    return [{"type": "start", "messageId": ctx.get("messageId")}]


def _tracker(max_scopes: int | None = None) -> LifecycleTracker:
    return LifecycleTracker([("start", _start), ("start-step", lambda ctx: [{"type": "start-step"}])], max_scopes)


# -- a real session ---------------------------------------------------------------------------


def first_text() -> list[dict[str, Any]]:
    return [
        {"type": "start", "messageId": "m1"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "First, "},
        {"type": "text-end", "id": "t1"},
    ]


def more_text() -> list[dict[str, Any]]:  # the same run, the same step, the same message
    return [
        {"type": "text-start", "id": "t2"},
        {"type": "text-delta", "id": "t2", "delta": "then more."},
        {"type": "text-end", "id": "t2"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


async def flood_fake_runs(hub: InProcessHub, hostile: str) -> None:
    """``hostile`` opens an output text stream in each of :data:`FLOOD` fake runs."""
    channel = hub.client(hostile).channel("chat")
    for i in range(FLOOD):
        encoder = UIMessageCodec.create_encoder(channel, extras={"headers": {"run-id": f"fake-run-{i}"}})
        await encoder.publish_output({"type": "text-start", "id": "x"}, f"fake-message-{i}")


async def agent_message(hostile: str | None, trusted_agent_ids: list[str] | None) -> dict[str, Any]:
    """The client's view of the agent's message (``id`` ``m1``) after the agent streamed a text,
    ``hostile`` (None: nobody) flooded fake runs, and the agent streamed more of the same step."""
    hub = InProcessHub()
    client = ClientSession(hub.client("alice").channel("chat"), codec=UIMessageCodec, trusted_agent_ids=trusted_agent_ids)
    await client.connect()
    sent = await client.view.send(
        UIMessageCodec.create_user_message({"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    )
    agent = AgentSession(hub.client("agent").channel("chat"), codec=UIMessageCodec)
    await agent.connect()
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()

    async def chunks() -> AsyncIterator[dict[str, Any]]:
        for chunk in first_text():
            yield chunk
        if hostile is not None:
            # published (serials assigned) before the agent's next chunk: every subscriber decodes
            # the flood between the agent's two texts, whatever the delivery timing
            await flood_fake_runs(hub, hostile)
        for chunk in more_text():
            yield chunk

    await run.pipe(chunks())
    await run.end("complete")
    await wait_status(client.view, run.run_id, "complete")
    (message,) = [m.message for m in client.view.get_messages() if m.message.get("id") == "m1"]
    await agent.close()
    await client.close()
    return message


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("hostile", "trusted_agent_ids"),
    [
        ("mallory", None),  # a client that folds every publisher's outputs
        ("agent-2", ["agent", "agent-2"]),  # another trusted identity (a fleet member) inventing run ids
    ],
)
async def test_a_flood_of_fake_runs_leaves_the_agents_message_as_it_is_without_it(
    monkeypatch: pytest.MonkeyPatch, hostile: str, trusted_agent_ids: list[str] | None
) -> None:
    monkeypatch.setattr(lifecycle, "MAX_SCOPES", SMALL)
    quiet = await agent_message(None, trusted_agent_ids)
    assert [p["type"] for p in quiet["parts"]] == ["step-start", "text", "text"]
    flooded = await agent_message(hostile, trusted_agent_ids)
    assert flooded["parts"] == quiet["parts"]  # no second step-start: the agent's run was not evicted
    assert flooded == quiet


# -- the decoder ------------------------------------------------------------------------------


def _as_int_action(wire: dict[str, Any]) -> dict[str, Any]:  # Ably's integer action: the general read
    return {**wire, "action": 0}


def _as_ably_message(wire: dict[str, Any]) -> Any:  # an ably-python Message: ``client_id``
    from ably.types.message import Message, MessageAction

    return Message(
        name=wire["name"],
        data=wire["data"],
        extras=wire["extras"],
        serial=wire["serial"],
        action=MessageAction.MESSAGE_CREATE,
        client_id=wire.get("clientId"),
    )


FORMS = {"dict": lambda wire: wire, "int action": _as_int_action, "ably Message": _as_ably_message}


def _wire(serial: int, client_id: str | None, run_id: str, codec: dict[str, Any], stream: bool) -> dict[str, Any]:
    transport: dict[str, Any] = {"run-id": run_id, "codec-message-id": f"cm-{run_id}", "stream": "false"}
    if stream:
        transport.update({"stream": "true", "status": "streaming", "stream-id": codec["id"]})
    wire: dict[str, Any] = {
        "action": "message.create",
        "serial": f"s{serial:010d}",
        "name": "ai-output",
        "data": "",
        "extras": {"ai": {"transport": transport, "codec": codec}},
    }
    if client_id is not None:
        wire["clientId"] = client_id
    return wire


def _text_start(serial: int, client_id: str | None, run_id: str, text_id: str) -> dict[str, Any]:
    return _wire(serial, client_id, run_id, {"kind": "text", "id": text_id}, stream=True)


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("agent", ["agent", None])  # a named publisher, the anonymous one
def test_the_decoder_keeps_a_publishers_run_whatever_another_publishes(
    monkeypatch: pytest.MonkeyPatch, agent: str | None, form: str
) -> None:
    monkeypatch.setattr(lifecycle, "MAX_SCOPES", SMALL)
    decoder = UIMessageCodec.create_decoder()

    def decode(wire: dict[str, Any]) -> Any:  # the wire in ``form``
        return decoder.decode(FORMS[form](wire))

    decode(_wire(1, agent, "run", {"kind": "start", "messageId": "m1"}, stream=False))
    decode(_wire(2, agent, "run", {"kind": "start-step"}, stream=False))
    assert decode(_text_start(3, agent, "run", "t1")).outputs == [{"type": "text-start", "id": "t1"}]
    floods = [decode(_text_start(10 + i, "mallory", f"fake-{i}", "x")).outputs for i in range(FLOOD)]
    # the flood's own runs are repaired as 0.8.0 repairs them (a pre-roll each) ...
    assert all([e["type"] for e in out] == ["start", "start-step", "text-start"] for out in floods)
    # ... and the agent's run streams on with no pre-roll
    assert decode(_text_start(99, agent, "run", "t2")).outputs == [{"type": "text-start", "id": "t2"}]
    # another publisher's finish names the agent's run but ends only its own scope of it
    decode(_wire(100, "mallory", "run", {"kind": "finish"}, stream=False))
    assert decode(_text_start(101, agent, "run", "t3")).outputs == [{"type": "text-start", "id": "t3"}]


def test_the_decoder_repairs_a_flooding_publishers_evicted_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "MAX_SCOPES", SMALL)
    decoder = UIMessageCodec.create_decoder()
    for i in range(SMALL + 1):  # one more than its bound: its first run is forgotten
        decoder.decode(_text_start(1 + i, "mallory", f"fake-{i}", "x"))
    again = decoder.decode(_text_start(50, "mallory", "fake-0", "y")).outputs
    assert [e["type"] for e in again] == ["start", "start-step", "text-start"]
    latest = decoder.decode(_text_start(51, "mallory", f"fake-{SMALL}", "y")).outputs
    assert latest == [{"type": "text-start", "id": "y"}]


# -- the tracker ------------------------------------------------------------------------------


def test_a_publisher_over_its_bound_evicts_its_own_oldest_scope_only() -> None:
    tracker = _tracker(4)
    tracker.mark_emitted("agent", "run", "start")
    tracker.mark_emitted("agent", "run", "start-step")
    for i in range(10):
        tracker.ensure_phases("mallory", f"fake-{i}", {})
    assert tracker.scopes_of("mallory") == 4 and tracker.scopes_of("agent") == 1
    assert tracker.scopes == 5
    assert tracker.evicted == 6  # counted, never raised
    assert tracker.ensure_phases("agent", "run", {"messageId": "m1"}) == []  # the agent's run is intact
    assert tracker.ensure_phases("mallory", "fake-9", {}) == []  # the newest kept ...
    assert [e["type"] for e in tracker.ensure_phases("mallory", "fake-0", {})] == ["start", "start-step"]  # ... the oldest not


def test_the_anonymous_publisher_is_one_bucket_of_its_own() -> None:
    tracker = _tracker(2)
    tracker.mark_emitted(None, "run", "start")
    for i in range(5):
        tracker.ensure_phases("mallory", f"fake-{i}", {})
    assert [e["type"] for e in tracker.ensure_phases(None, "run", {})] == ["start-step"]
    for i in range(2):
        tracker.ensure_phases(None, f"other-{i}", {})
    assert tracker.scopes_of(None) == 2 and tracker.scopes_of("mallory") == 2


def test_clearing_a_publishers_last_scope_forgets_the_publisher() -> None:
    tracker = _tracker(4)
    tracker.ensure_phases("mallory", "fake", {})
    tracker.clear_scope("agent", "fake")  # another publisher's scope of that name: nothing
    assert tracker.scopes_of("mallory") == 1
    tracker.clear_scope("mallory", "fake")
    assert tracker.scopes == 0 and tracker._emitted == {}


def test_the_default_bound_is_the_module_constant_when_the_tracker_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "MAX_SCOPES", 3)
    tracker = _tracker()
    for i in range(5):
        tracker.ensure_phases("p", f"s-{i}", {})
    assert tracker.scopes_of("p") == 3 and tracker.evicted == 2


PUBLISHERS = st.sampled_from(["agent", "agent-2", "mallory", None])
OPS = st.lists(
    st.tuples(
        PUBLISHERS,
        st.sampled_from(["ensure", "mark-start", "mark-step", "reset-step", "clear"]),
        st.sampled_from([f"run-{i}" for i in range(6)]),
    ),
    max_size=80,
)


class _Alone:
    """A reference model of one publisher's scopes alone (0.8.0's tracker, keyed by run id, with its
    oldest scope forgotten beyond ``bound``)."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.scopes: dict[str, set[str]] = {}
        self.evicted = 0

    def scope(self, scope: str) -> set[str]:
        if scope not in self.scopes:
            if len(self.scopes) >= self.bound:
                del self.scopes[next(iter(self.scopes))]
                self.evicted += 1
            self.scopes[scope] = set()
        return self.scopes[scope]

    def apply(self, op: str, scope: str) -> list[dict[str, Any]]:
        if op == "ensure":
            emitted, events = self.scope(scope), []
            if "start" not in emitted:
                events.append({"type": "start", "messageId": scope})
            if "start-step" not in emitted:
                events.append({"type": "start-step"})
            emitted |= {"start", "start-step"}
            return events
        if op in ("mark-start", "mark-step"):
            self.scope(scope).add("start" if op == "mark-start" else "start-step")
        elif op == "reset-step":
            self.scopes.get(scope, set()).discard("start-step")
        else:
            self.scopes.pop(scope, None)
        return []


def _apply(tracker: LifecycleTracker, publisher: str | None, op: str, scope: str) -> list[dict[str, Any]]:
    if op == "ensure":
        return tracker.ensure_phases(publisher, scope, {"messageId": scope})
    if op == "mark-start":
        tracker.mark_emitted(publisher, scope, "start")
    elif op == "mark-step":
        tracker.mark_emitted(publisher, scope, "start-step")
    elif op == "reset-step":
        tracker.reset_phase(publisher, scope, "start-step")
    else:
        tracker.clear_scope(publisher, scope)
    return []


@settings(max_examples=300, deadline=None)
@given(ops=OPS, bound=st.integers(min_value=1, max_value=4))
def test_each_publisher_sees_the_tracker_it_would_see_alone(ops: list[tuple[Any, str, str]], bound: int) -> None:
    """Whatever the others do, a publisher's events are those it would get alone (the reference
    model of 0.8.0's tracker fed its operations only), and it holds at most ``bound`` scopes."""
    shared = _tracker(bound)
    alone: dict[str | None, _Alone] = {}
    for publisher, op, scope in ops:
        own = alone.setdefault(publisher, _Alone(bound))
        assert _apply(shared, publisher, op, scope) == own.apply(op, scope)
        assert shared.scopes_of(publisher) == len(own.scopes) <= bound
    assert shared.scopes == sum(len(a.scopes) for a in alone.values())
    assert shared.evicted == sum(a.evicted for a in alone.values())
