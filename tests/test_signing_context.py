"""Signatures bound to their context (:mod:`ai_transport.conversation.signing`): a signed run copied
wire by wire into another channel, or into another run, fails verification there, and its approved
call does not run again.

A wildcard (or leaked) token may publish as anyone, so the copy carries the agent's and alice's
identities. Before tags covered the channel, a copy verified and a fresh worker in the other
channel ran the approved call a second time; ``ai-run-start`` (with ``input-client-id``) was never
tagged at all. In-process, then over the emulator with the real ``ably`` SDK.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ably.types.message import Message
from support_emulator import emulator_thread, realtime_client, unique_channel
from support_sessions import Worker, approve_call, channel_history, open_session, user_message, wait_status

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.conversation.signing import LIFECYCLE_NAMES, SIGNATURE_HEADER, verify_output
from ai_transport.emulator.client import client_options
from ai_transport.errors import AITransportError
from ai_transport.sessions.agent import AgentSession

__all__ = ["emulator_thread"]  # the fixture

pytestmark = pytest.mark.timeout(90)

KEY = b"signing-key-of-the-agent-fleet!!"


async def signed_and_approved(hub_session: Any) -> tuple[Any, Any, Worker, Any, Any]:
    """A signed run on ``chat``: suspended on a gated call, approved, the call run, the run complete.
    Returns (hub, alice, worker, run, the approval's ClientRun)."""
    hub, alice, agent = hub_session
    worker = Worker()
    sent = await alice.view.send(user_message("Weather in Paris?"))
    run = await worker.handle(agent, sent.invocation.to_json())
    await wait_status(alice.view, run.run_id, "suspended")
    answer, _call = await approve_call(alice.view, run.run_id)
    await worker.handle(agent, answer.invocation.to_json())
    await wait_status(alice.view, run.run_id, "complete")
    assert len(worker.executed) == 1
    await agent.close()
    return hub, alice, worker, run, answer


def upto_approval(wires: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """The wires up to alice's approval (the run suspended, approved): what a copy replays."""
    cut = next(
        i for i, m in enumerate(wires)
        if m.get("name") == "ai-input" and m["extras"]["ai"].get("codec", {}).get("kind") == "tool-approval-response"
    )
    return [m for m in wires[: cut + 1] if m.get("name") != "ai-claim"]


def retarget(wires: list[dict[str, Any]], old_run: str, new_run: str) -> list[dict[str, Any]]:
    """``wires`` with every ``run-id`` header ``old_run`` replaced and fresh event ids (a copy into
    another run of the same channel, woken by the copied approval)."""
    out = copy.deepcopy(wires)
    for m in out:
        transport = m["extras"]["ai"]["transport"]
        if transport.get("run-id") == old_run:
            transport["run-id"] = new_run
        if "event-id" in transport:
            transport["event-id"] = "copy-" + transport["event-id"]
    return out


def as_create(m: dict[str, Any]) -> dict[str, Any]:
    return {"name": m["name"], "data": m.get("data"), "extras": copy.deepcopy(m["extras"])}


async def wake_fresh(channel: Any, invocation: dict[str, Any], worker: Worker) -> AgentSession:
    """A fresh signed worker on ``channel`` woken by ``invocation``: it must run nothing."""
    session = AgentSession(channel, signing_key=KEY)
    await session.connect()
    run = await session.create_run(invocation)
    with pytest.raises(AITransportError) as info:
        await run.start(timeout=0.5)
        await run.view.load_all()
        await run.run_owed_calls(worker.execute)
    assert info.value.code in (104010, 104090)  # the copied run never starts / reports the tampering
    return session


def invocation_of(approval: dict[str, Any], invocation: dict[str, Any]) -> dict[str, Any]:
    """The invocation of the copied approval (its event-id is copied with it)."""
    return {**invocation, "inputEventId": approval["extras"]["ai"]["transport"]["event-id"]}


@pytest.mark.parametrize("target", ["another-channel", "another-run"])
async def test_a_signed_run_copied_elsewhere_fails_verification_and_runs_nothing(target: str) -> None:
    hub, alice, worker, run, answer = await signed_and_approved(await open_session(signing_key=KEY))
    wires = await channel_history(hub)
    agent_wires = [m for m in wires if m.get("name") in LIFECYCLE_NAMES or m.get("name") == "ai-output"]
    assert all(SIGNATURE_HEADER in m["extras"]["ai"]["transport"] for m in agent_wires)  # lifecycle too
    assert all(verify_output(KEY, m, channel="chat") for m in agent_wires)
    copied = upto_approval(wires, run.run_id)
    channel_name = "chat-copy" if target == "another-channel" else "chat"
    if target == "another-run":
        copied = retarget(copied, run.run_id, "run-copy")
    for m in copied:  # a wildcard token: each wire published under its original identity
        await hub.client(m["clientId"]).channel(channel_name).publish(as_create(m))
    executed = len(worker.executed)
    approval = copied[-1]
    session = await wake_fresh(hub.client("agent").channel(channel_name), invocation_of(approval, answer.invocation.to_json()), worker)
    assert len(worker.executed) == executed  # the approved call did not run again
    refused = {m.get("name") for m in session.tampered}
    assert "ai-run-start" in refused and "ai-output" in refused
    await session.close()
    await alice.close()


async def test_over_the_sdk_a_wildcard_copy_into_another_channel_runs_nothing(emulator_thread: Any) -> None:
    name = unique_channel("sig-src")
    copy_name = unique_channel("sig-copy")
    alice_ch = await AblyChannel.connect(name, **client_options(emulator_thread, client_id="alice"))
    agent_ch = await AblyChannel.connect(name, **client_options(emulator_thread, client_id="agent"))
    from ai_transport.sessions.client import ClientSession

    alice = ClientSession(alice_ch, trusted_agent_ids={"agent"})
    await alice.connect()
    agent = AgentSession(agent_ch, signing_key=KEY)
    await agent.connect()
    try:
        _hub, _alice, worker, run, answer = await signed_and_approved((None, alice, agent))
        page = await alice_ch.history(limit=1000, direction="forwards")
        copied = upto_approval([dict(m) for m in page.items], run.run_id)
        async with realtime_client(emulator_thread) as mallory:  # a dev (wildcard) token
            target = mallory.channels.get(copy_name)
            await target.attach()
            for m in copied:
                await target.publish(Message(name=m["name"], data=m.get("data"), extras=m["extras"],
                                             client_id=m["clientId"]))
        fresh_ch = await AblyChannel.connect(copy_name, **client_options(emulator_thread, client_id="agent"))
        executed = len(worker.executed)
        session = await wake_fresh(fresh_ch, invocation_of(copied[-1], answer.invocation.to_json()), worker)
        assert len(worker.executed) == executed
        assert "ai-run-start" in {m.get("name") for m in session.tampered}
        await session.close()
        await fresh_ch.close()
    finally:
        await alice.close()
        await alice_ch.close()
        await agent_ch.close()


async def test_a_live_signed_agent_refuses_a_copied_lifecycle_wire() -> None:
    # the live verifier checks lifecycle wires too: a copied ai-run-start delivered live is refused
    hub, alice, _worker, run, _answer = await signed_and_approved(await open_session(signing_key=KEY))
    wires = upto_approval(await channel_history(hub), run.run_id)
    watcher = AgentSession(hub.client("agent").channel("chat-copy"), signing_key=KEY)
    await watcher.connect()
    for m in wires:
        await hub.client(m["clientId"]).channel("chat-copy").publish(as_create(m))
    await watcher.wait_seen("\uffff", timeout=0.2)  # let every delivery fold
    assert watcher.tree.get_run_node(run.run_id) is None  # the copied run never starts
    refused = [m.get("name") for m in watcher.tampered]
    assert "ai-run-start" in refused and "ai-step-start" in refused and "ai-run-suspend" in refused
    await watcher.close()
    await alice.close()
