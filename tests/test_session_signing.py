"""Signed run output (``AgentSession(signing_key=...)``) and tampering that never silently cancels an
approval, on the in-process channel.

Mallory appends to the agent's streamed call arguments after the call was shown for approval. A
live agent refuses the append and keeps its own call. A fresh worker reading history sees an
aggregate it cannot trust: it reports the message (``session.tampered``, 104090 from the run's
model input / owed calls) instead of running the call or ending ``complete`` without it. When the
rogue append is hidden behind a later append under the agent's identity (what a wildcard token
allows), only the signature catches it.
"""

from __future__ import annotations

from typing import Any

import pytest
from support_sessions import (
    Worker,
    approve_call,
    assistant_with_call,
    channel_history,
    open_session,
    user_message,
    wait_status,
)

from ai_transport.channels.memory import InProcessHub
from ai_transport.conversation.signing import LIFECYCLE_NAMES, SIGNATURE_HEADER, verify_output
from ai_transport.errors import AITransportError, ErrorCode
from ai_transport.sessions.agent import AgentSession

KEY = b"0123456789abcdef0123456789abcdef"
EVIL = ',"city":"Evil"'


history = channel_history


def stream_of(wires: list[dict[str, Any]], kind: str) -> tuple[str, dict[str, Any]]:
    """(serial, extras) of the agent's stream whose codec kind is ``kind`` (an attacker copies the
    extras so the aggregate still decodes)."""
    return next(
        (m["serial"], m["extras"])
        for m in wires
        if m.get("name") == "ai-output" and m["extras"]["ai"].get("codec", {}).get("kind") == kind
        and m["extras"]["ai"]["transport"].get("stream") == "true"
    )


async def tamper(hub: InProcessHub, serial: str, extras: dict[str, Any], hidden: bool) -> None:
    """Mallory appends to the stream; ``hidden``: then an append under the agent's identity."""
    await hub.client("mallory").channel("chat").append_message({"serial": serial, "data": EVIL, "extras": extras})
    if hidden:
        spoofed = hub.client("agent", connection_id="spoofed").channel("chat")
        await spoofed.append_message({"serial": serial, "data": "", "extras": extras})


async def suspended(signing_key: bytes | None = KEY) -> tuple[Any, ...]:
    hub, alice, agent = await open_session(signing_key=signing_key)
    worker = Worker()
    sent = await alice.view.send(user_message("Weather in Paris?"))
    run = await worker.handle(agent, sent.invocation.to_json())
    await wait_status(alice.view, run.run_id, "suspended")
    return hub, alice, agent, worker, run


async def test_every_finished_agent_message_is_tagged_and_a_fresh_worker_verifies_them() -> None:
    hub, alice, agent, worker, run = await suspended()
    wires = await history(hub)
    outputs = [m for m in wires if m.get("name") == "ai-output"]
    agent_wires = [m for m in wires if m.get("name") in LIFECYCLE_NAMES or m.get("name") == "ai-output"]
    assert {m["name"] for m in agent_wires} >= {"ai-run-start", "ai-step-start", "ai-step-end", "ai-run-suspend"}
    assert outputs and all(verify_output(KEY, m, channel="chat") for m in agent_wires)  # lifecycle too
    assert all(SIGNATURE_HEADER not in ((m.get("extras") or {}).get("ai") or {}).get("transport", {})
               for m in wires if m not in agent_wires)  # inputs (alice's) and claims carry no tag
    assert not any(verify_output(b"another key", m, channel="chat") for m in agent_wires)
    assert not any(verify_output(KEY, m, channel="chat-copy") for m in agent_wires)
    answer, call = await approve_call(alice.view, run.run_id)
    await agent.close()
    fresh = AgentSession(hub.client("agent").channel("chat"), signing_key=KEY)
    await fresh.connect()
    await worker.handle(fresh, answer.invocation.to_json())
    await wait_status(alice.view, run.run_id, "complete")
    assert worker.executed == [("get_weather", call["arguments"])] and fresh.tampered == []
    await alice.close()
    await fresh.end()


@pytest.mark.parametrize(("key", "hidden"), [(None, False), (KEY, False), (KEY, True)])
async def test_tampered_call_arguments_are_reported_never_run_nor_silently_dropped(
    key: bytes | None, hidden: bool
) -> None:
    hub, alice, agent, worker, run = await suspended(key)
    serial, extras = stream_of(await history(hub), "function_call_arguments")
    await tamper(hub, serial, extras, hidden)
    # the live agent refused the append: its call is unchanged
    _cmid, live_call = assistant_with_call(run.view.get_messages())
    assert EVIL not in live_call["arguments"]
    answer, _call = await approve_call(alice.view, run.run_id)
    await agent.close()

    fresh = AgentSession(hub.client("agent").channel("chat"), signing_key=key)
    await fresh.connect()
    resumed = await fresh.create_run(answer.invocation.to_json())
    await resumed.start()
    await resumed.view.load_all()
    with pytest.raises(AITransportError) as info:
        resumed.owed_calls()
    err = info.value
    assert err.code == ErrorCode.TAMPERED_OUTPUT == 104090 and serial in err.message
    with pytest.raises(AITransportError):
        resumed.input_items()  # nothing tampered reaches the model
    assert [m["serial"] for m in fresh.tampered] == [serial]
    await resumed.end("error", err)
    await wait_status(alice.view, run.run_id, "error")
    info_run = alice.view.run(run.run_id)
    assert info_run is not None and info_run.error is not None and info_run.error.code == 104090
    assert worker.executed == []
    await alice.close()
    await fresh.end()


async def test_without_a_key_a_hidden_append_is_not_detected() -> None:
    """The documented limit: history shows only the last mutator, so only a signature catches it."""
    hub, alice, agent, _worker, run = await suspended(None)
    serial, extras = stream_of(await history(hub), "function_call_arguments")
    await tamper(hub, serial, extras, hidden=True)
    answer, _call = await approve_call(alice.view, run.run_id)
    await agent.close()
    fresh = AgentSession(hub.client("agent").channel("chat"))
    await fresh.connect()
    resumed = await fresh.create_run(answer.invocation.to_json())
    await resumed.start()
    await resumed.view.load_all()
    assert EVIL in (resumed.owed_calls() or [{}])[0]["arguments"]
    await alice.close()
    await fresh.end()


async def test_an_approved_call_whose_message_vanished_is_reported_not_lost() -> None:
    """Without a key, a rewrite hidden behind an append under the agent's identity that strips the
    stream's headers makes the call undecodable; the approval still has to surface: the agent did
    publish that call (its approval request declares it), so it is reported (104090 to ``on_error``,
    :mod:`~ai_transport.conversation.approvals`) and the run carries on without running it."""
    hub, alice, agent, worker, run = await suspended(None)
    serial, _extras = stream_of(await history(hub), "function_call_arguments")
    done = next(
        m["serial"]
        for m in await history(hub)
        if m.get("name") == "ai-output"
        and m["extras"]["ai"].get("codec", {}).get("kind") == "response.output_item.done"
        and m["data"]["item"]["type"] == "function_call"
    )
    answer, call = await approve_call(alice.view, run.run_id)
    spoofed = hub.client("agent", connection_id="spoofed").channel("chat")
    for target in (serial, done):  # the call's stream and its done item, rewritten without headers
        await spoofed.update_message({"serial": target, "data": "", "extras": {}})
    await agent.close()
    fresh = AgentSession(hub.client("agent").channel("chat"))
    await fresh.connect()
    reported: list[AITransportError] = []
    resumed = await fresh.create_run(answer.invocation.to_json(), hooks={"on_error": reported.append})
    await resumed.start()
    await resumed.view.load_all()
    assert resumed.owed_calls() == []  # nothing to run: the call is gone, never fatal
    assert [e.code for e in reported] == [104090] and call["call_id"] in reported[0].message
    assert [a.call_id for a in resumed.tampered_approvals] == [call["call_id"]]
    assert worker.executed == []
    await alice.close()
    await fresh.end()
