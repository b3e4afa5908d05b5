"""Who may cancel a run (issue 21's authority rule, break #4).

A cancel by ``run-id`` counts from the run's input client (the publisher of its trigger), a trusted
agent identity (configuration) or a client ``trusted_client_ids`` / ``accept_input`` admit; a cancel
by ``input-codec-message-id`` counts from the same, judged against the run that input triggered.
0.8.0's agent checks nothing (only an ``on_cancel`` hook); its clients cancel their own runs
(``ClientRun.cancel``: ``input-codec-message-id`` plus ``run-id`` once known;
``ClientSession.cancel(run_id)``: ``run-id``), so a JS client still cancels what it started.

* in process: mallory's cancels of alice's run (by run id, by input, both, live or deferred) are
  refused and counted; alice's, a trusted agent's and a trusted client's count; a copy of alice's
  prompt (her codec-message-id, a fresh event-id) is never a trigger, and a run a fresh worker
  opened on it before reading alice's original neither takes her cancel (refused there, counted,
  held for her run) nor, ending, drops her run from the input's index;
* over the emulator with the real ``ably`` SDK and least-privilege tokens (:mod:`ai_transport.auth`):
  break #4 (mallory's second cancel of the same input, and a flood of fresh ones, neither replace
  nor evict alice's early cancel) and mallory's live cancels refused while alice's counts.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from support_emulator import emulator_thread, unique_channel  # noqa: F401
from support_sessions import eventually, open_session, user_message

from ai_transport.auth import agent_token_params, browser_token_params, token_request_callback
from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.channels.memory import InProcessHub
from ai_transport.conversation.lifecycle import CancelTarget, build_cancel_message
from ai_transport.emulator.client import client_options
from ai_transport.errors import AITransportError, ErrorCode
from ai_transport.sessions.agent import DEFERRED_CANCEL_LIMIT, AgentSession
from ai_transport.sessions.client import ClientSession


def cancels_refused(agent: AgentSession, who: str) -> int:
    return sum(1 for m in agent.rejected if m.get("name") == "ai-cancel" and m.get("clientId") == who)


def target(kind: str, run_id: str, cmid: str) -> CancelTarget:
    return {
        "run-id": CancelTarget(run_id, None),
        "input": CancelTarget(None, cmid),
        "both": CancelTarget(run_id, cmid),
    }[kind]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def alices_run(**agent_options: Any) -> tuple[InProcessHub, ClientSession, AgentSession, Any, Any]:
    hub, alice, agent = await open_session(**agent_options)
    sent = await alice.view.send(user_message("Count to a million"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    return hub, alice, agent, sent, run


async def close(agent: AgentSession, *clients: ClientSession) -> None:
    for c in clients:
        await c.close()
    await agent.end()


# -- live runs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["run-id", "input", "both"])
async def test_only_the_prompts_publisher_cancels_a_live_run(kind: str) -> None:
    hub, alice, agent, sent, run = await alices_run()
    mallory = hub.client("mallory").channel("chat")
    await mallory.publish(build_cancel_message(target(kind, run.run_id, sent.input_codec_message_id)))
    await eventually(lambda: cancels_refused(agent, "mallory") == 1)
    await settle()
    assert not run.abort_signal.is_set()
    # by input alone it is held for another run of that input (judged again there); naming the run,
    # it is only refused
    assert len(agent._deferred_cancels) == (1 if kind == "input" else 0)
    alice_raw = hub.client("alice").channel("chat")
    await alice_raw.publish(build_cancel_message(target(kind, run.run_id, sent.input_codec_message_id)))
    await eventually(run.abort_signal.is_set)
    await run.end("cancelled")
    await close(agent, alice)


@pytest.mark.parametrize("who", ["agent", "support"])
async def test_a_trusted_agent_or_trusted_client_may_cancel(who: str) -> None:
    # the agent identity is trusted by default (its own); ``support`` only by configuration
    hub, alice, agent, sent, run = await alices_run(trusted_client_ids={"support"})
    other = hub.client(who).channel("chat")
    await other.publish(build_cancel_message(CancelTarget(None, sent.input_codec_message_id)))
    await eventually(run.abort_signal.is_set)
    assert cancels_refused(agent, who) == 0
    await run.end("cancelled")
    await close(agent, alice)


async def test_a_trusted_identity_comes_from_configuration_only() -> None:
    # eve calls herself "agent" in her data: she is still eve, and her cancel is refused
    hub, alice, agent, _sent, run = await alices_run(trusted_client_ids={"support"})
    eve = hub.client("eve").channel("chat")
    message = build_cancel_message(CancelTarget(run.run_id, None))
    message["data"] = {"role": "agent", "clientId": "agent"}
    await eve.publish(message)
    await eventually(lambda: cancels_refused(agent, "eve") == 1)
    assert not run.abort_signal.is_set()
    await run.end("complete")
    await close(agent, alice)


# -- deferred cancels -----------------------------------------------------------------------------


async def test_mallorys_early_cancel_of_alices_input_is_refused_at_start() -> None:
    hub, alice, agent = await open_session()
    sent = await alice.view.send(user_message("hi"))
    mallory = hub.client("mallory").channel("chat")
    await mallory.publish(build_cancel_message(CancelTarget(None, sent.input_codec_message_id)))
    await agent.wait_seen((await mallory.history(limit=1)).items[0]["serial"])
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    await settle()
    assert not run.abort_signal.is_set()
    assert cancels_refused(agent, "mallory") == 1  # refused and counted, once
    await run.end("complete")
    await close(agent, alice)


async def copy_of(hub: InProcessHub, sent: Any) -> str:
    """mallory republishes alice's prompt (her codec-message-id) under a fresh event-id; returns it."""
    page = await hub.client("x").channel("chat").history(limit=50)
    original = next(m for m in page.items if m.get("clientId") == "alice" and m.get("name") == "ai-input")
    wire = {k: copy.deepcopy(original[k]) for k in ("name", "data", "extras")}
    event_id = str(uuid.uuid4())
    wire["extras"]["ai"]["transport"]["event-id"] = event_id
    await hub.client("mallory").channel("chat").publish(wire)
    return event_id


async def alice_and_a_copy() -> tuple[InProcessHub, ClientSession, Any, str]:
    """A hub where alice asked "hi" and mallory republished it (:func:`copy_of`); no agent yet.
    Returns (hub, alice's session, her send, the copy's event-id)."""
    hub = InProcessHub()
    alice = ClientSession(hub.client("alice").channel("chat"))
    await alice.connect()
    sent = await alice.view.send(user_message("hi"))
    return hub, alice, sent, await copy_of(hub, sent)


async def test_a_copy_of_alices_prompt_is_never_a_trigger_and_never_captures_her_cancel() -> None:
    # mallory republishes alice's prompt (alice's codec-message-id, a fresh event-id) and invokes a
    # run on it: the tree refused the copy (the id is alice's), so no run answers it in her place
    hub, alice, agent = await open_session()
    sent = await alice.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    copied = await copy_of(hub, sent)
    for body in ({"inputEventId": copied, "sessionName": "chat"}, {"inputEventId": copied, "sessionName": "chat", "inputClientId": "mallory"}):
        theirs = await agent.create_run(body)
        with pytest.raises(AITransportError) as info:
            await theirs.start(timeout=0.2)
        assert info.value.code == ErrorCode.INPUT_EVENT_NOT_FOUND
    assert [r.run_id for r in alice.view.runs()] == [run.run_id]
    await sent.cancel()
    await eventually(run.abort_signal.is_set)
    await run.end("cancelled")
    await close(agent, alice)


async def copy_run_first(hub: InProcessHub, sent: Any, copied: str) -> tuple[AgentSession, Any]:
    """A fresh worker reading one wire a page, woken first by mallory's invocation bound to her (the
    copy is the newest wire: matched before alice's original is read): a run on alice's input id."""
    worker = AgentSession(hub.client("agent").channel("chat"), history_page_size=1)
    await worker.connect()
    theirs = await worker.create_run({"inputEventId": copied, "sessionName": "chat", "inputClientId": "mallory"})
    await theirs.start(timeout=1)
    assert theirs.input_client_id == "mallory"
    assert theirs.input_codec_message_id == sent.input_codec_message_id  # the copy's id: alice's
    return worker, theirs


async def test_a_run_on_a_copy_of_alices_prompt_never_takes_her_cancel() -> None:
    hub, alice, sent, copied = await alice_and_a_copy()
    worker, theirs = await copy_run_first(hub, sent, copied)
    await sent.cancel()  # by input: routed to mallory's run (the only run of that input so far)
    await eventually(lambda: cancels_refused(worker, "alice") == 1)  # refused there, counted ...
    await settle()
    assert not theirs.abort_signal.is_set()
    mine = await worker.create_run(sent.invocation.to_json())
    await mine.start()  # ... and held for a run of the input alice may cancel: hers takes it
    assert mine.input_client_id == "alice" and mine.abort_signal.is_set()
    assert not theirs.abort_signal.is_set()
    await theirs.end("complete")
    await mine.end("cancelled")
    await close(worker, alice)


async def test_alices_early_cancel_outlives_a_run_on_a_copy_that_starts_first() -> None:
    hub, alice, sent, copied = await alice_and_a_copy()
    worker = AgentSession(hub.client("agent").channel("chat"), history_page_size=1)
    await worker.connect()
    await sent.cancel()  # live, before any run of the input exists here: held
    await worker.wait_seen((await hub.client("x").channel("chat").history(limit=1)).items[0]["serial"])
    theirs = await worker.create_run({"inputEventId": copied, "sessionName": "chat", "inputClientId": "mallory"})
    await theirs.start(timeout=1)  # takes the held cancels of alice's input id: alice's is refused ...
    assert not theirs.abort_signal.is_set() and cancels_refused(worker, "alice") == 1
    mine = await worker.create_run(sent.invocation.to_json())
    await mine.start()  # ... and held again: her own run takes it
    assert mine.abort_signal.is_set() and not theirs.abort_signal.is_set()
    await theirs.end("complete")
    await mine.end("cancelled")
    await close(worker, alice)


async def test_a_prompt_its_owner_published_again_is_still_a_trigger() -> None:
    # alice's client republishes her prompt (same codec-message-id, a new event-id): still hers
    hub, alice, agent = await open_session()
    sent = await alice.view.send(user_message("hi"))
    page = await hub.client("x").channel("chat").history(limit=5)
    original = next(m for m in page.items if m.get("clientId") == "alice")
    again = {k: copy.deepcopy(original[k]) for k in ("name", "data", "extras")}
    event_id = str(uuid.uuid4())
    again["extras"]["ai"]["transport"]["event-id"] = event_id
    await hub.client("alice").channel("chat").publish(again)
    run = await agent.create_run({"inputEventId": event_id, "sessionName": "chat"})
    await run.start(timeout=1)
    assert run.input_client_id == "alice" and run.input_codec_message_id == sent.input_codec_message_id
    await run.end("complete")
    await close(agent, alice)


async def test_ending_another_run_of_the_same_input_keeps_alices_run_cancellable() -> None:
    hub, alice, sent, copied = await alice_and_a_copy()
    worker, theirs = await copy_run_first(hub, sent, copied)
    mine = await worker.create_run(sent.invocation.to_json())
    await mine.start()
    await theirs.end("complete")  # the other run of the input ends: alice's keeps the input's index
    await sent.cancel()
    await eventually(mine.abort_signal.is_set)
    await mine.end("cancelled")
    await close(worker, alice)


# -- over the emulator, real SDK, least-privilege tokens ------------------------------------------


async def open_as(emu: Any, name: str, client_id: str, params: Callable[[str, str], dict[str, Any]]) -> AblyChannel:
    callback = token_request_callback(emu.key, params(client_id, name))
    return await asyncio.wait_for(
        AblyChannel.connect(name, **client_options(emu, client_id=client_id, auth_callback=callback)), 15
    )


@pytest.mark.timeout(90)
@pytest.mark.parametrize("flood", ["same input", "fresh inputs"])
async def test_break_4_deferred_cancels_over_the_ably_sdk(emulator_thread: Any, flood: str) -> None:
    name = unique_channel("cancel")
    alice_ch = await open_as(emulator_thread, name, "alice", browser_token_params)
    mallory_ch = await open_as(emulator_thread, name, "mallory", browser_token_params)
    agent_ch = await open_as(emulator_thread, name, "agent", agent_token_params)
    alice = ClientSession(alice_ch, trusted_agent_ids={"agent"})
    agent = AgentSession(agent_ch)
    try:
        await alice.connect()
        await agent.connect()
        sent = await alice.view.send(user_message("Weather in Paris?"))
        await sent.cancel()  # alice's early cancel, by input codec-message-id
        if flood == "same input":
            await mallory_ch.publish(build_cancel_message(CancelTarget(None, sent.input_codec_message_id)))
        else:
            fresh = [build_cancel_message(CancelTarget(None, str(uuid.uuid4()))) for _ in range(DEFERRED_CANCEL_LIMIT + 5)]
            for i in range(0, len(fresh), 50):  # more than the bound: mallory's own oldest go
                await mallory_ch.publish(fresh[i : i + 50])
        last = (await mallory_ch.history(limit=1)).items[0]
        assert last["clientId"] == "mallory"
        assert await agent.wait_seen(last["serial"])
        run = await agent.create_run(sent.invocation.to_json())
        await run.start(timeout=10)
        await settle()
        assert run.abort_signal.is_set()  # alice's early cancel applied
        if flood == "same input":
            assert cancels_refused(agent, "mallory") == 1  # mallory's copy judged, refused, counted
        await run.end("cancelled")
    finally:
        await alice.close()
        await agent.end()
        for ch in (alice_ch, mallory_ch, agent_ch):
            await ch.close()


@pytest.mark.timeout(90)
async def test_mallorys_cancels_of_alices_live_run_are_refused_over_the_ably_sdk(emulator_thread: Any) -> None:
    name = unique_channel("cancel-live")
    alice_ch = await open_as(emulator_thread, name, "alice", browser_token_params)
    mallory_ch = await open_as(emulator_thread, name, "mallory", browser_token_params)
    agent_ch = await open_as(emulator_thread, name, "agent", agent_token_params)
    alice = ClientSession(alice_ch, trusted_agent_ids={"agent"})
    mallory = ClientSession(mallory_ch, trusted_agent_ids={"agent"})
    agent = AgentSession(agent_ch)
    try:
        for s in (alice, mallory, agent):
            await s.connect()
        sent = await alice.view.send(user_message("Count to a million"))
        run = await agent.create_run(sent.invocation.to_json())
        await run.start(timeout=10)
        await mallory.cancel(run.run_id)
        await mallory_ch.publish(build_cancel_message(CancelTarget(None, sent.input_codec_message_id)))
        await eventually(lambda: cancels_refused(agent, "mallory") == 2, timeout=10)
        assert not run.abort_signal.is_set()
        await sent.cancel()
        await eventually(run.abort_signal.is_set, timeout=10)
        await run.end("cancelled")
    finally:
        for s in (alice, mallory):
            await s.close()
        await agent.end()
        for ch in (alice_ch, mallory_ch, agent_ch):
            await ch.close()


async def test_an_anonymous_agent_trusts_no_anonymous_canceller() -> None:
    # an agent connected without a client id trusts its own (None) identity for outputs; a cancel
    # from an anonymous member still needs the run's input client
    hub = InProcessHub()
    alice = ClientSession(hub.client("alice").channel("chat"))
    await alice.connect()
    agent = AgentSession(hub.client(None).channel("chat"))
    await agent.connect()
    sent = await alice.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    assert None in agent.trusted_agent_ids
    await hub.client(None).channel("chat").publish(build_cancel_message(CancelTarget(run.run_id, None)))
    await eventually(lambda: any(m.get("name") == "ai-cancel" for m in agent.rejected))
    assert not run.abort_signal.is_set()
    await run.end("complete")
    await close(agent, alice)
