"""Locating a trigger on a long channel (issue 21: "a worker locating its trigger while paging newest
first must not act on a match an older wire could still own").

A channel of 3,000 messages, pages of 100, alice's prompt 1,000 messages back (ten pages), with and
without mallory's copy of alice's ``event-id`` as the newest wire:

* bound (``inputClientId`` or ``inputSerial``): the worker stops at alice's wire (page 11);
* unbound (0.8.0's body): it reads history to its start (30 pages) — past ``page_until_located``'s
  and the Temporal ``openRun``'s cap of 20 pages, which now bounds only the search for an id not seen
  at all — and answers alice, never mallory;
* an id on no wire still fails with 104010 after 20 pages;
* an adopted run (every Temporal activity after ``openRun``) is bound by its ``ai-run-start`` (the
  input client a trusted agent stamped): it stops at its trigger, and never at mallory's copy;
* over the emulator with the real ``ably`` SDK (a shorter channel, pages of 10: the same shape).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from support_emulator import emulator_thread, unique_channel  # noqa: F401
from support_sessions import prompt_wire as prompt
from support_sessions import user_message

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.channels.memory import InProcessHub
from ai_transport.emulator.client import client_options
from ai_transport.errors import AITransportError, ErrorCode
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession
from ai_transport.sessions.durable import page_until_located
from ai_transport.temporal.activities import DEFAULT_MAX_HISTORY_PAGES, page_history_for_trigger

PAGE = 100
OLDER = 1_999  # bob's prompts before alice's
NEWER = 1_000  # mallory's after it (the last one her copy of alice's event-id, when copied)


async def publish_many(channel: Any, wires: list[dict[str, Any]], batch: int) -> None:
    for i in range(0, len(wires), batch):
        await channel.publish(wires[i : i + batch])


async def long_channel(
    open_channel: Any, older: int, newer: int, copied: bool, batch: int = 100
) -> tuple[Any, str]:
    """bob's ``older`` prompts, alice's, then mallory's ``newer`` (the last carrying alice's
    event-id when ``copied``); returns alice's ClientRun and her wire's serial."""
    bob, mallory = await open_channel("bob"), await open_channel("mallory")
    await publish_many(bob, [prompt(f"earlier {i}", str(uuid.uuid4()), "bob") for i in range(older)], batch)
    alice = ClientSession(await open_channel("alice"))
    await alice.connect()
    sent = await alice.view.send(user_message("alice's question"))
    newest = (await bob.history(limit=1)).items[0]
    assert newest["clientId"] == "alice"
    serial = newest["serial"]
    fillers = [prompt(f"filler {i}", str(uuid.uuid4()), "mallory") for i in range(newer - 1)]
    last = prompt("mallory's question", sent.input_event_id if copied else str(uuid.uuid4()), "mallory")
    await publish_many(mallory, [*fillers, last], batch)
    await alice.close()
    for ch in (alice.channel, bob, mallory):
        await ch.close()
    return sent, serial


def invocation_of(sent: Any, serial: str, binding: str) -> dict[str, Any]:
    body = sent.invocation.to_json()
    if binding == "publisher":
        body["inputClientId"] = "alice"
    elif binding == "serial":
        body["inputSerial"] = serial
    return body


def hub_opener(hub: InProcessHub) -> Any:
    async def open_channel(client_id: str) -> Any:
        return hub.client(client_id).channel("chat")

    return open_channel


def assert_answers_alice(run: Any, sent: Any) -> None:
    assert run.input_client_id == "alice"
    assert run.input_codec_message_id == sent.input_codec_message_id
    assert run.trigger is not None and run.trigger.get("clientId") == "alice"


BINDINGS = ["unbound", "publisher", "serial"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("copied", [False, True], ids=["original only", "hostile copy newest"])
@pytest.mark.parametrize("binding", BINDINGS)
async def test_page_until_located_settles_a_trigger_far_back_on_a_long_channel(binding: str, copied: bool) -> None:
    hub = InProcessHub()
    sent, serial = await long_channel(hub_opener(hub), OLDER, NEWER, copied)
    worker = AgentSession(hub.client("agent").channel("chat"))
    await worker.connect()
    run = await worker.create_run(invocation_of(sent, serial, binding))
    await page_until_located(run, sent.input_event_id, page_size=PAGE, trigger_wait=0)
    total_pages = (OLDER + 1 + NEWER) // PAGE
    # bound: alice's wire is on page 11 (1,000 newer wires above it); unbound: the whole channel
    assert worker.hydrator.pages_folded == (total_pages if binding == "unbound" else NEWER // PAGE + 1)
    assert total_pages > 20  # past 0.8.0's (and our default) page cap
    await run.start(timeout=1)
    assert_answers_alice(run, sent)
    if copied:
        assert worker.skipped >= 1  # mallory's claim of alice's event-id: refused, counted
    await run.end("complete")
    await worker.close()


@pytest.mark.parametrize("binding", ["publisher", "serial"])
async def test_a_bound_invocation_of_the_newest_trigger_reads_one_page(binding: str) -> None:
    hub = InProcessHub()
    sent, serial = await long_channel(hub_opener(hub), 500, 1, copied=False)
    worker = AgentSession(hub.client("agent").channel("chat"))
    await worker.connect()
    run = await worker.create_run(invocation_of(sent, serial, binding))
    await page_until_located(run, sent.input_event_id, page_size=PAGE, trigger_wait=0)
    assert worker.hydrator.pages_folded == 1
    await run.start(timeout=1)
    assert_answers_alice(run, sent)
    await run.end("complete")
    await worker.close()


async def test_an_invocation_bound_to_mallorys_copy_never_takes_alices_wire() -> None:
    # a binding names what to answer: a body naming mallory's copy (its serial) gets mallory's own
    # wire, as if she had used an event-id of her own — never alice's prompt
    hub = InProcessHub()
    sent, _alice_serial = await long_channel(hub_opener(hub), 10, 5, copied=True, batch=5)
    newest = (await hub.client("x").channel("chat").history(limit=1)).items[0]
    assert newest["clientId"] == "mallory"
    worker = AgentSession(hub.client("agent").channel("chat"), history_page_size=4)
    await worker.connect()
    run = await worker.create_run({**sent.invocation.to_json(), "inputSerial": newest["serial"]})
    await run.start(timeout=1)
    assert run.input_client_id == "mallory" and run.input_codec_message_id != sent.input_codec_message_id
    await run.end("complete")
    await worker.close()


async def test_an_id_on_no_wire_fails_after_the_page_cap() -> None:
    hub = InProcessHub()
    sent, _serial = await long_channel(hub_opener(hub), OLDER, NEWER, copied=False)
    worker = AgentSession(hub.client("agent").channel("chat"))
    await worker.connect()
    run = await worker.create_run({**sent.invocation.to_json(), "inputEventId": str(uuid.uuid4())})
    with pytest.raises(AITransportError) as info:
        await page_until_located(run, run.invocation.input_event_id, page_size=PAGE, trigger_wait=0)
    assert info.value.code == ErrorCode.INPUT_EVENT_NOT_FOUND
    assert worker.hydrator.pages_folded == 20
    await worker.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("binding", BINDINGS)
async def test_temporal_open_run_paging_settles_a_trigger_far_back(binding: str) -> None:
    hub = InProcessHub()
    sent, serial = await long_channel(hub_opener(hub), OLDER, NEWER, copied=True)
    worker = AgentSession(hub.client("agent").channel("chat"), history_page_size=PAGE)
    await worker.connect()
    run = await worker.create_run(invocation_of(sent, serial, binding))
    beats: list[None] = []
    pages = await page_history_for_trigger(
        worker, sent.input_event_id, on_page=lambda: beats.append(None), located=lambda: run.located
    )
    total_pages = (OLDER + 1 + NEWER) // PAGE
    assert pages == len(beats) == (total_pages if binding == "unbound" else NEWER // PAGE + 1)
    assert pages > DEFAULT_MAX_HISTORY_PAGES or binding != "unbound"
    await run.start(timeout=1)
    assert_answers_alice(run, sent)
    await run.end("complete")
    with pytest.raises(AITransportError) as info:  # an id on no wire: the cap still ends the search
        await page_history_for_trigger(AgentSession(hub.client("agent").channel("chat")), str(uuid.uuid4()))
    assert info.value.code == ErrorCode.INPUT_EVENT_NOT_FOUND
    await worker.close()


# -- over the emulator, real SDK ------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("binding", ["unbound", "publisher"])
async def test_a_trigger_far_back_is_located_over_the_ably_sdk(emulator_thread: Any, binding: str) -> None:
    name = unique_channel("paging")
    opened: list[AblyChannel] = []

    async def open_channel(client_id: str) -> AblyChannel:
        ch = await asyncio.wait_for(AblyChannel.connect(name, **client_options(emulator_thread, client_id=client_id)), 15)
        opened.append(ch)
        return ch

    # 300 messages, pages of 10 (30 pages > the cap of 20), alice's 100 back, mallory's copy newest
    sent, serial = await long_channel(open_channel, 199, 100, copied=True, batch=50)
    agent_ch = await open_channel("agent")
    worker = AgentSession(agent_ch)
    try:
        await worker.connect()
        run = await worker.create_run(invocation_of(sent, serial, binding))
        await page_until_located(run, sent.input_event_id, page_size=10, trigger_wait=0)
        assert worker.hydrator.pages_folded == (30 if binding == "unbound" else 11)
        await run.start(timeout=5)
        assert_answers_alice(run, sent)
        assert worker.skipped >= 1
        await run.end("complete")
    finally:
        await worker.close()
        for ch in opened:
            await ch.close()


def test_the_invocation_body_round_trips_its_bindings_and_names_a_bad_one() -> None:
    from ai_transport.errors import InvalidTypeError
    from ai_transport.sessions.invocation import Invocation

    body = {"inputEventId": "e", "sessionName": "chat", "inputClientId": "alice", "inputSerial": "s1"}
    inv = Invocation.from_json(body)
    assert (inv.input_client_id, inv.input_serial) == ("alice", "s1") and inv.to_json() == body
    assert Invocation.from_json({"inputEventId": "e", "sessionName": "chat"}).to_json() == {
        "inputEventId": "e", "sessionName": "chat"}  # 0.8.0's body, unchanged
    with pytest.raises(InvalidTypeError) as info:
        Invocation.from_json({**body, "inputSerial": 7})
    assert "invocation.inputSerial must be a string" in info.value.message


@pytest.mark.timeout(120)
@pytest.mark.parametrize("copied", [False, True], ids=["original only", "hostile copy newest"])
async def test_an_adopted_run_is_bound_by_its_run_start_and_stops_at_its_trigger(copied: bool) -> None:
    # every Temporal activity after openRun adopts the run: its ai-run-start (a trusted agent's)
    # names who started it, so an unbound invocation stops at the trigger instead of the start
    hub = InProcessHub()
    bob = hub.client("bob").channel("chat")
    await publish_many(bob, [prompt(f"earlier {i}", str(uuid.uuid4()), "bob") for i in range(OLDER)], PAGE)
    alice = ClientSession(hub.client("alice").channel("chat"))
    await alice.connect()
    sent = await alice.view.send(user_message("alice's question"))
    await alice.close()  # (a live client would fold all 3,000 wires: not what this test is about)
    first = AgentSession(hub.client("agent").channel("chat"), lease=0.2)
    await first.connect()
    run = await first.create_run(sent.invocation.to_json())
    await run.start()
    await first.close()  # a worker gone: the run stays open for the next activity to adopt
    fillers = [prompt(f"filler {i}", str(uuid.uuid4()), "mallory") for i in range(NEWER - 1)]
    last = prompt("mallory's question", sent.input_event_id if copied else str(uuid.uuid4()), "mallory")
    await publish_many(hub.client("mallory").channel("chat"), [*fillers, last], PAGE)
    await asyncio.sleep(0.5)  # the first worker's lease lapses
    worker = AgentSession(hub.client("agent").channel("chat"), lease=0.2, history_page_size=PAGE)
    await worker.connect()
    adopted = worker.adopt_run(sent.invocation, run.run_id, run.invocation_id)
    await adopted.load(timeout=10)
    assert worker.hydrator.pages_folded == NEWER // PAGE + 1  # not the whole channel (30 pages)
    assert_answers_alice(adopted, sent)
    await adopted.end("complete")
    await worker.close()


async def test_an_adopted_run_never_binds_to_a_copy_folded_after_its_run_start() -> None:
    # mallory copies alice's event-id at once, before the agent's ai-run-start: paging one wire a
    # page, the worker folds the run-start, then the copy, then alice's prompt
    hub = InProcessHub()
    alice = ClientSession(hub.client("alice").channel("chat"))
    await alice.connect()
    sent = await alice.view.send(user_message("alice's question"))
    await alice.close()
    await hub.client("mallory").channel("chat").publish(prompt("mallory's question", sent.input_event_id, "mallory"))
    first = AgentSession(hub.client("agent").channel("chat"), lease=0.2)
    await first.connect()
    run = await first.create_run(sent.invocation.to_json())
    await run.start()
    assert run.input_client_id == "alice"
    await first.close()
    await asyncio.sleep(0.5)  # the first worker's lease lapses
    worker = AgentSession(hub.client("agent").channel("chat"), lease=0.2, history_page_size=1)
    await worker.connect()
    adopted = worker.adopt_run(sent.invocation, run.run_id, run.invocation_id)
    await adopted.load(timeout=10)
    assert_answers_alice(adopted, sent)
    await adopted.end("complete")
    await worker.close()
