"""Per-publisher bounds: every buffer that holds or defers wires is bounded per publisher, so a
publisher can evict only its own (issue 21, breaks #2 and #4).

* ``HeldWires`` (a Hypothesis property): whatever one publisher floods, another's held wires are
  all released, and each publisher's count stays within its bound;
* break #2: 1,100 junk ``tool-approval-response``\\ s naming alice's run, published before her
  approval, no longer evict it from a fresh worker's history fold — her approved call runs (in
  process, and over the emulator with the real ``ably`` SDK);
* break #4: a second ``ai-cancel`` of the same input by mallory, and 200 fresh ones, neither
  replace nor evict alice's early cancel: her run is cancelled.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support_codec_decoder import append, create
from support_emulator import emulator_thread, unique_channel  # noqa: F401
from support_sessions import Worker, approve_call, user_message, wait_status

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.channels.memory import InProcessHub
from ai_transport.codec.core.decoder import OPEN_STREAMS_PER_PUBLISHER
from ai_transport.codec.decoder import Decoder
from ai_transport.codec.vercel import UIMessageCodec
from ai_transport.conversation import admission as admission_module
from ai_transport.conversation.held import HeldWires
from ai_transport.conversation.lifecycle import CancelTarget, build_cancel_message
from ai_transport.emulator.client import client_options
from ai_transport.sessions.agent import DEFERRED_CANCEL_LIMIT, AgentSession
from ai_transport.sessions.client import ClientSession

# -- HeldWires ------------------------------------------------------------------------------------


def wire(who: str, n: int) -> dict[str, Any]:
    return {"clientId": who, "serial": f"{who}-{n}", "action": "message.create"}


@settings(max_examples=150, deadline=None)
@given(
    flood=st.lists(st.tuples(st.sampled_from(["k1", "k2", "k3"]), st.sampled_from(["mallory", "eve"])), max_size=60),
    alice_at=st.integers(0, 60),
)
def test_a_flood_evicts_only_its_own_publishers_wires(flood: list[tuple[str, str]], alice_at: int) -> None:
    dropped: list[Mapping[str, Any]] = []
    held = HeldWires(3, 5, lambda message, why: dropped.append(message), "per key", "in all")
    alice = wire("alice", 0)
    for i, (key, who) in enumerate(flood):
        if i == min(alice_at, len(flood)):
            held.hold("k1", "alice", alice)
        held.hold(key, i, wire(who, i))
    if alice_at >= len(flood):
        held.hold("k1", "alice", alice)
    assert all(m["clientId"] != "alice" for m in dropped)
    assert held.held_by("mallory") <= 5 and held.held_by("eve") <= 5
    assert alice in held.release("k1")


def test_a_mutation_counts_for_its_mutator() -> None:
    dropped: list[Mapping[str, Any]] = []
    held = HeldWires(1, 10, lambda message, why: dropped.append(message), "per key", "in all")
    agent_append = {"clientId": "agent", "serial": "s", "action": "message.append", "version": {"clientId": "agent"}}
    rogue_append = {"clientId": "agent", "serial": "s", "action": "message.append", "version": {"clientId": "mallory"}}
    held.hold("s", 1, agent_append)
    held.hold("s", 2, rogue_append)
    held.hold("s", 3, dict(rogue_append))  # mallory's second evicts her first, not the agent's
    assert dropped == [rogue_append] and held.release("s")[0] is agent_append


# -- break #2: held approvals ---------------------------------------------------------------------


async def captured(channel: Any, publish: Any) -> dict[str, Any]:
    """The wire ``publish()`` puts on the channel (as a raw subscriber sees it)."""
    seen: list[dict[str, Any]] = []
    await channel.subscribe(seen.append)
    await channel.attach()
    await publish()
    for _ in range(200):
        if seen:
            break
        await asyncio.sleep(0.01)
    channel.unsubscribe(seen.append)
    return seen[0]


def junk_copies(template: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """``n`` copies of an approval wire with fresh ids (each a new message)."""
    out = []
    for _ in range(n):
        w = {k: copy.deepcopy(v) for k, v in template.items() if k in ("name", "data", "extras")}
        t = w["extras"]["ai"]["transport"]
        t["codec-message-id"] = str(uuid.uuid4())
        t["event-id"] = str(uuid.uuid4())
        out.append(w)
    return out


async def test_junk_approvals_no_longer_evict_alices_held_approval() -> None:
    hub = InProcessHub()
    alice = ClientSession(hub.client("alice").channel("chat"))
    await alice.connect()
    agent = AgentSession(hub.client("agent").channel("chat"))
    await agent.connect()
    worker = Worker()
    sent = await alice.view.send(user_message("Weather in Paris?"))
    run = await worker.handle(agent, sent.invocation.to_json())
    await wait_status(alice.view, run.run_id, "suspended")
    await agent.close()
    # mallory floods approvals naming alice's run (more than a run's hold) before alice answers
    mallory = ClientSession(hub.client("mallory").channel("chat"))
    await mallory.connect()
    await mallory.view.load_all()
    template = await captured(
        hub.client("watch").channel("chat"), lambda: approve_call(mallory.view, run.run_id)
    )
    await mallory.close()
    raw = hub.client("mallory").channel("chat")
    for junk in junk_copies(template, admission_module.HELD_LIMIT + 100):
        await raw.publish(junk)
    answer, call = await approve_call(alice.view, run.run_id)
    fresh = AgentSession(hub.client("agent").channel("chat"))
    await fresh.connect()
    resumed = await worker.handle(fresh, answer.invocation.to_json())
    assert worker.executed == [("get_weather", call["arguments"])]  # alice's approved call ran
    assert fresh.skipped >= admission_module.HELD_LIMIT  # mallory's answers are refused, counted
    assert resumed.status == "complete"
    await fresh.end()
    await alice.close()


@pytest.mark.timeout(120)
async def test_junk_approvals_no_longer_evict_alices_approval_over_the_ably_sdk(
    emulator_thread: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admission_module, "HELD_LIMIT", 10)  # the bound, scaled to a short test
    name = unique_channel("held")

    async def open_channel(client_id: str) -> AblyChannel:
        return await asyncio.wait_for(
            AblyChannel.connect(name, **client_options(emulator_thread, client_id=client_id)), 15
        )

    channels = [await open_channel(c) for c in ("alice", "agent", "mallory", "watch")]
    alice_ch, agent_ch, mallory_ch, watch_ch = channels
    alice = ClientSession(alice_ch)
    await alice.connect()
    agent = AgentSession(agent_ch)
    await agent.connect()
    worker = Worker()
    fresh_ch = None
    try:
        sent = await alice.view.send(user_message("Weather in Paris?"))
        run = await worker.handle(agent, sent.invocation.to_json())
        await wait_status(alice.view, run.run_id, "suspended")
        await agent.close()
        mallory = ClientSession(mallory_ch)
        await mallory.connect()
        await mallory.view.load_all()
        template = await captured(watch_ch, lambda: approve_call(mallory.view, run.run_id))
        await mallory.close()
        for junk in junk_copies(template, 15):
            await mallory_ch.publish(junk)
        answer, call = await approve_call(alice.view, run.run_id)
        fresh_ch = await open_channel("agent")
        fresh = AgentSession(fresh_ch, history_page_size=5)
        await fresh.connect()
        await worker.handle(fresh, answer.invocation.to_json())
        assert worker.executed == [("get_weather", call["arguments"])]
        await fresh.end()
    finally:
        await alice.close()
        for ch in [*channels, fresh_ch]:
            if ch is not None:
                await ch.close()


# -- break #4: deferred cancels -------------------------------------------------------------------


@pytest.mark.parametrize("flood", ["same input", "fresh inputs"])
async def test_another_members_cancels_neither_replace_nor_evict_alices_early_cancel(flood: str) -> None:
    hub = InProcessHub()
    alice = ClientSession(hub.client("alice").channel("chat"))
    await alice.connect()
    agent = AgentSession(hub.client("agent").channel("chat"))
    await agent.connect()
    sent = await alice.view.send(user_message("Weather in Paris?"))
    alice_raw, mallory_raw = hub.client("alice").channel("chat"), hub.client("mallory").channel("chat")
    await alice_raw.publish(build_cancel_message(CancelTarget(None, sent.input_codec_message_id)))
    if flood == "same input":
        await mallory_raw.publish(build_cancel_message(CancelTarget(None, sent.input_codec_message_id)))
    else:
        for _ in range(DEFERRED_CANCEL_LIMIT + 5):
            await mallory_raw.publish(build_cancel_message(CancelTarget(None, str(uuid.uuid4()))))
    await agent.wait_seen((await mallory_raw.history(limit=1)).items[0]["serial"])
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    for _ in range(20):
        await asyncio.sleep(0)
    assert run.abort_signal.is_set()  # alice's early cancel applied
    await run.end("cancelled")
    await agent.end()
    await alice.close()


# -- pending steers -------------------------------------------------------------------------------


def test_steers_buffered_before_a_run_opens_are_bounded() -> None:
    from ai_transport.conversation.changes import OutputChanged
    from ai_transport.sessions.steer import STEERS_HELD, RunSteering

    handlers: list[Any] = []

    class Session:
        def subscribe(self, kind: type[Any], handler: Any) -> Any:
            assert kind is OutputChanged
            handlers.append(handler)
            return lambda: handlers.remove(handler)

    class Run:
        run_id = "run-1"
        abort_signal = asyncio.Event()
        session = Session()
        input_codec_message_id = "trigger"

        def _report(self, err: Any) -> None:
            raise AssertionError(err)

    steering = RunSteering(Run(), None)
    for i in range(STEERS_HELD + 7):
        for handler in handlers:
            handler(OutputChanged("run-1", None, f"s{i}", None, (), [{"type": "message", "message": {"role": "user"}}]))
    steering.seed()
    assert steering.tracker.has_pending()
    pending = list(steering.tracker._pending)
    assert len(pending) == STEERS_HELD and pending[0] == "s7"  # the run's own oldest went, nothing else grew


# -- the decoder's open streams -------------------------------------------------------------------


def _decoders() -> list[Any]:
    return [Decoder(), UIMessageCodec.create_decoder()]


@pytest.mark.parametrize("decoder", _decoders(), ids=["responses", "vercel"])
def test_a_flood_of_streams_left_open_costs_only_the_flooders_own(decoder: Any) -> None:
    """Streamed wires that never close (a member's ``ai-input`` with ``stream: "true"``, any codec
    kind) each kept a tracker with copies of both header tiers for the decoder's life: 10k of them
    ~47 MB. The decoder keeps at most twice :data:`OPEN_STREAMS_PER_PUBLISHER` streams of one
    publisher, and the agent's own stream, opened before the flood, still decodes its appends."""
    def agent(wire: dict[str, Any]) -> dict[str, Any]:
        return {**wire, "name": "ai-output", "clientId": "agent"}

    stream = {"stream": "true", "status": "streaming", "stream-id": "t1", "codec-message-id": "m1"}
    vercel = not isinstance(decoder, type(_decoders()[0]))
    codec_tier = {"kind": "text", "id": "t1"} if vercel else {"kind": "output_text"}
    decoder.decode(agent(create("00000000000000000000", "ai-output", "", stream, codec_tier)))
    flood = 10 * OPEN_STREAMS_PER_PUBLISHER
    for i in range(1, flood + 1):
        junk = create(f"{i:020d}", "ai-input", "", {"stream": "true", "x": "p" * 100}, {"kind": "nothing"})
        decoder.decode({**junk, "clientId": "mallory"})
    assert decoder.tracked_streams <= 2 * OPEN_STREAMS_PER_PUBLISHER + 1
    result = decoder.decode(agent(append("00000000000000000000", f"{flood + 1:020d}", "hello", stream, codec_tier)))
    assert result.outputs  # the agent's stream is still open: its append decodes (a delta)
