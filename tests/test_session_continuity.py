"""Loss of channel continuity (``attached`` with ``resumed`` false) on the in-process channel: both
sessions emit 104006 once, rebuild from history, and an approval published in the gap is acted on."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support_sessions import (
    Worker,
    approve_call,
    as_dicts,
    eventually,
    model_stream,
    open_session,
    shapes,
    user_message,
    wait_status,
)

from ai_transport.channels.state import ChannelStateChange, is_continuity_lost
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession


def test_is_continuity_lost_follows_0_8_0() -> None:
    lost = [("failed", False), ("suspended", False), ("detached", False), ("attached", False)]
    kept = [("attached", True), ("attaching", False), ("detaching", False)]
    assert all(is_continuity_lost(ChannelStateChange(c, "attached", r)) for c, r in lost)
    assert not any(is_continuity_lost(ChannelStateChange(c, "attached", r)) for c, r in kept)


async def test_approval_published_in_the_gap_is_acted_on() -> None:
    _hub, client, agent = await open_session()
    errors: dict[str, list[Any]] = {"client": [], "agent": []}
    client.on("error", errors["client"].append)
    agent.on("error", errors["agent"].append)
    worker = Worker()
    sent = await client.view.send(user_message("Weather in Paris?"))
    run = await worker.handle(agent, sent.invocation.to_json())
    await wait_status(client.view, run.run_id, "suspended")
    agent.channel.interrupt()  # the agent's transport drops: it misses what follows live
    answer, _ = await approve_call(client.view, run.run_id)
    client.channel.interrupt()
    await client.channel.reattach()
    await agent.channel.reattach()
    await asyncio.gather(client.rebuilt(), agent.rebuilt())
    for side in ("client", "agent"):
        assert [e.code for e in errors[side]] == [104006], side
        assert "continuity lost (attached, resumed: false)" in errors[side][0].message
    # the agent's rebuilt tree holds the approval it never saw live
    resumed = await worker.handle(agent, answer.invocation.to_json())
    assert resumed.run_id == run.run_id and worker.executed and len(worker.executed) == 1
    await wait_status(client.view, run.run_id, "complete")
    assert shapes(client.view.get_messages()) == [
        ("user", ["message"]),
        ("assistant", ["reasoning", "message", "function_call"]),
        ("assistant", ["function_call_output"]),
        ("assistant", ["reasoning", "message"]),
    ]
    assert agent.continuity_losses == client.continuity_losses == 1
    await client.close()
    await agent.end()


async def test_loss_aborts_a_run_in_flight() -> None:
    _hub, client, agent = await open_session()
    sent = await client.view.send(user_message("Weather in Paris?"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    started = asyncio.Event()

    async def slow(items: list[dict[str, Any]]) -> Any:
        async for event in model_stream(items, delay=0.01):
            started.set()
            yield event

    piping = asyncio.ensure_future(run.pipe(slow(run.input_items())))
    await started.wait()
    agent.channel.interrupt()
    await agent.channel.reattach()
    result = await piping
    assert result.reason == "cancelled" and run.abort_signal.is_set()
    await run.end("cancelled")
    await agent.rebuilt()
    await wait_status(client.view, run.run_id, "cancelled")
    assert agent.continuity_losses == 1 and client.continuity_losses == 0
    await client.close()
    await agent.end()


async def test_suspended_then_reattached_reports_each_loss() -> None:
    _hub, client, agent = await open_session()
    seen: list[Any] = []
    client.channel.on_state_change(seen.append)
    errors: list[Any] = []
    client.on("error", errors.append)
    client.channel.interrupt("suspended")
    await client.channel.reattach()
    await eventually(lambda: len(errors) == 2)  # state changes arrive in order with messages
    await client.rebuilt()
    assert [(c.current, c.resumed) for c in seen][-2:] == [("suspended", False), ("attached", False)]
    assert [e.code for e in errors] == [104006, 104006]  # as 0.8.0: one per continuity-breaking change
    assert "(suspended)" in errors[0].message
    sent = await client.view.send(user_message("still here?"))
    assert sent.invocation.input_event_id
    await client.close()
    await agent.end()


# -- the views keep the pre-loss conversation while the tree is refolded ----------------------------


class HistoryGate:
    """Holds every history read of ``channel`` (first page and ``next``) while closed, so a refold
    stays in flight until the test opens it; ``fail`` makes the reads raise instead."""

    def __init__(self, channel: Any) -> None:
        self._real = channel.history
        self._open = asyncio.Event()
        self._open.set()
        #: Set when a read is waiting at the closed gate.
        self.waiting = asyncio.Event()
        self.fail = False
        #: Outcomes of the next reads (True: served, False: raises), before ``fail`` applies.
        self.plan: list[bool] = []
        channel.history = self.history

    def close(self) -> None:
        self._open.clear()
        self.waiting.clear()

    def open(self) -> None:
        self._open.set()

    async def _pass(self) -> None:
        if not self._open.is_set():
            self.waiting.set()
            await self._open.wait()
        if (self.plan.pop(0) is False) if self.plan else self.fail:
            raise ConnectionError("history unreachable")

    async def history(self, **kw: Any) -> Any:
        await self._pass()
        return _GatedPage(await self._real(**kw), self)


class _GatedPage:
    def __init__(self, page: Any, gate: HistoryGate) -> None:
        self._page, self._gate = page, gate
        self.items = page.items

    def has_next(self) -> bool:
        return bool(self._page.has_next())

    async def next(self) -> Any:
        await self._gate._pass()
        page = await self._page.next()
        return _GatedPage(page, self._gate) if page is not None else None


def picture(view: Any) -> tuple[Any, Any]:
    """What a UI renders: the messages (JS JSON shape) and each run's status."""
    return as_dicts(view.get_messages()), [(r.run_id, r.status) for r in view.runs()]


async def fresh_picture(hub: Any) -> tuple[Any, Any]:
    """The view a session opened now shows, all history loaded."""
    fresh = ClientSession(hub.client("fresh").channel("chat"))
    await fresh.connect()
    await fresh.view.load_all()
    seen = picture(fresh.view)
    await fresh.close()
    return seen


async def exchange(session: Any, agent: Any, text: str) -> Any:
    """``session`` asks ``text``, the agent answers it (run complete); returns the run."""
    sent = await session.view.send(user_message(text))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    await run.pipe(build_response_events([ScriptedText(f"{text} Sunny, 21 degrees.")], seed=len(text)))
    await run.end("complete")
    return run


async def lose_continuity(session: Any, gate: HistoryGate, in_gap: Any = None) -> None:
    """Interrupt ``session``'s channel, run ``in_gap`` (missed live), re-attach without continuity
    and wait until the refold is held at the closed ``gate``."""
    gate.close()
    session.channel.interrupt()
    if in_gap is not None:
        await in_gap()
    await session.channel.reattach()
    await gate.waiting.wait()


async def test_views_keep_the_conversation_during_the_refold_then_update_once() -> None:
    hub, client, agent = await open_session()
    bob = ClientSession(hub.client("bob").channel("chat"))
    await bob.connect()
    first = await exchange(client, agent, "Weather in Paris?")
    await wait_status(client.view, first.run_id, "complete")
    other = client.create_view()
    before, before_other, older = picture(client.view), picture(other), client.view.has_older()
    updates: list[Any] = []
    client.view.on("update", lambda: updates.append(picture(client.view)))
    other_updates: list[Any] = []
    other.on("update", lambda: other_updates.append(picture(other)))
    gate = HistoryGate(client.channel)
    await lose_continuity(client, gate, lambda: exchange(bob, agent, "And in Lyon?"))
    # the refold is held mid-flight: every view still shows the conversation as it was
    for _ in range(3):
        await asyncio.sleep(0)
    assert picture(client.view) == before and picture(other) == before_other
    assert client.view.has_older() == older and updates == other_updates == []
    gate.open()
    await client.rebuilt()
    assert len(updates) == len(other_updates) == 1  # one update, when the refold is swapped in
    assert updates[0] == await fresh_picture(hub)  # the gap's exchange (missed live) is there
    assert len(updates[0][0]) == len(before[0]) + 2
    assert client.continuity_losses == 1
    await bob.close()
    await client.close()
    await agent.end()


async def test_live_wires_during_the_refold_are_folded_after_the_swap() -> None:
    hub, client, agent = await open_session()
    bob = ClientSession(hub.client("bob").channel("chat"))
    await bob.connect()
    await exchange(client, agent, "Weather in Paris?")
    gate = HistoryGate(client.channel)
    await lose_continuity(client, gate, lambda: exchange(bob, agent, "And in Lyon?"))
    before = picture(client.view)
    seen: list[Any] = []
    client.view.on("update", lambda: seen.append(picture(client.view)))
    late = await exchange(bob, agent, "And in Nice?")  # live, while the refold is held
    await bob.view.wait_for(lambda: bob.view.run(late.run_id) is not None)
    assert picture(client.view) == before and seen == []
    gate.open()
    await client.rebuilt()
    await wait_status(client.view, late.run_id, "complete")
    final = await fresh_picture(hub)
    assert picture(client.view) == final
    # first the refold (history up to the new attach point: Lyon, not Nice), then the held wires
    assert len(seen[0][0]) == len(before[0]) + 2 and late.run_id not in {r for r, _ in seen[0][1]}
    assert seen[-1][0] == final[0] and len(final[0]) == len(before[0]) + 4  # (a run end is no update)
    counts = [len(messages) for messages, _ in seen]
    assert counts == sorted(counts)  # never shrinks, never empty
    await bob.close()
    await client.close()
    await agent.end()


async def test_refold_failure_keeps_the_pre_loss_conversation() -> None:
    hub = (await open_session())[0]
    client = ClientSession(hub.client("carol").channel("chat"), history_backoff=0.001)
    await client.connect()
    agent = AgentSession(hub.client("agent").channel("chat"))
    await agent.connect()
    await exchange(client, agent, "Weather in Paris?")
    errors: list[Any] = []
    client.on("error", errors.append)
    gate = HistoryGate(client.channel)
    await lose_continuity(client, gate)
    before = picture(client.view)
    updates: list[Any] = []
    client.view.on("update", lambda: updates.append(picture(client.view)))
    gate.fail = True
    gate.open()
    await client.rebuilt()
    assert [e.code for e in errors] == [104006, 104011]
    assert picture(client.view) == before and updates == []
    # the session goes on: live wires fold onto the kept tree, paging works again
    gate.fail = False
    later = await exchange(client, agent, "And in Lyon?")
    await wait_status(client.view, later.run_id, "complete")
    assert len(client.view.get_messages()) == len(before[0]) + 2
    assert all(u[0] for u in updates)
    await client.close()
    await agent.end()


async def test_a_second_loss_during_the_refold_restarts_it() -> None:
    hub, client, agent = await open_session()
    bob = ClientSession(hub.client("bob").channel("chat"))
    await bob.connect()
    await exchange(client, agent, "Weather in Paris?")
    errors: list[Any] = []
    client.on("error", errors.append)
    gate = HistoryGate(client.channel)
    await lose_continuity(client, gate, lambda: exchange(bob, agent, "And in Lyon?"))
    before = picture(client.view)
    updates: list[Any] = []
    client.view.on("update", lambda: updates.append(picture(client.view)))
    await lose_continuity(client, gate, lambda: exchange(bob, agent, "And in Nice?"))
    assert picture(client.view) == before and updates == []
    gate.open()
    await client.rebuilt()
    assert [e.code for e in errors] == [104006, 104006] and client.continuity_losses == 2
    assert len(updates) == 1 and updates[0] == await fresh_picture(hub)
    assert len(updates[0][0]) == len(before[0]) + 4
    await bob.close()
    await client.close()
    await agent.end()


async def test_agent_keeps_its_state_during_the_refold_and_every_reference_sees_the_swap() -> None:
    _hub, client, agent = await open_session()
    worker = Worker()
    sent = await client.view.send(user_message("Weather in Paris?"))
    run = await worker.handle(agent, sent.invocation.to_json())
    answer, _ = await approve_call(client.view, run.run_id)
    await worker.handle(agent, answer.invocation.to_json())  # claims the call, runs it, answers
    await wait_status(client.view, run.run_id, "complete")
    # references taken before the loss (as views, branches, steer tracking, runs hold them)
    tree, claims, streams, nav = agent.tree, agent.claims, agent.open_streams, client.view.branch
    claimed, streamed = {r: claims.wires(r) for r in claims.run_ids()}, dict(streams._by_run)
    view_before = as_dicts(run.view.get_messages())
    assert claimed and streamed and len(view_before) == 4
    gate = HistoryGate(agent.channel)
    gap: list[Any] = []

    async def ask() -> None:
        gap.append(await client.view.send(user_message("And in Lyon?")))

    await lose_continuity(agent, gate, ask)
    # mid-refold: the agent's readers see the pre-loss state, not an empty one
    assert as_dicts(run.view.get_messages()) == view_before
    assert {r: agent.claims.wires(r) for r in agent.claims.run_ids()} == claimed and agent.open_streams._by_run == streamed
    located = asyncio.ensure_future(agent.create_run(gap[0].invocation.to_json()))
    second = await located
    starting = asyncio.ensure_future(second.start())  # locates its trigger once the refold is in
    for _ in range(5):
        await asyncio.sleep(0)
    assert not starting.done()
    gate.open()
    await agent.rebuilt()
    await starting
    assert agent.tree is tree and agent.claims is claims and agent.open_streams is streams
    assert tree.find_message_by_event_id(gap[0].invocation.input_event_id) is not None
    assert set(claims.run_ids()) >= claimed.keys() and streams._by_run.keys() >= streamed.keys()
    assert as_dicts(run.view.get_messages()) == view_before
    await second.pipe(build_response_events([ScriptedText("Lyon: cloudy.")], seed=5))
    await second.end("complete")
    await wait_status(client.view, second.run_id, "complete")
    assert shapes(client.view.get_messages())[-2:] == [("user", ["message"]), ("assistant", ["message"])]
    assert nav.tree is client.tree and len(second.view.get_messages()) == 6
    await client.close()
    await agent.end()


async def test_own_send_during_the_refold_is_shown_and_survives_the_swap() -> None:
    _hub, client, agent = await open_session()
    await exchange(client, agent, "Weather in Paris?")
    gate = HistoryGate(client.channel)
    await lose_continuity(client, gate)
    counts: list[int] = []
    client.view.on("update", lambda: counts.append(len(client.view.get_messages())))
    before = len(client.view.get_messages())
    sent = await client.view.send(user_message("Still there?"))  # optimistic, its echo held
    assert len(client.view.get_messages()) == before + 1
    gate.open()
    await client.rebuilt()
    await eventually(lambda: getattr(client.tree.get_node(sent.input_codec_message_id), "serial", None) is not None)
    assert len(client.view.get_messages()) == before + 1
    assert counts and min(counts) == before + 1  # never went back to the pre-send (or an empty) view
    await client.close()
    await agent.end()


ANSWER = build_response_events(
    [ScriptedText("Tomorrow: showers in the morning, then sunny spells all afternoon.")], seed=7
)


async def lose_mid_stream(loss_at: int, gap: int, held: int, again: bool) -> None:
    """A reply streams while the client loses continuity before event ``loss_at``, re-attaches
    ``gap`` events later and its refold stays held for ``held`` more events (clamped to the end);
    ``again``: a second loss halfway through the hold."""
    hub, client, agent = await open_session()
    await exchange(client, agent, "Weather in Paris?")
    gate = HistoryGate(client.channel)
    counts: list[int] = []
    client.view.on("update", lambda: counts.append(len(client.view.get_messages())))
    sent = await client.view.send(user_message("And tomorrow?"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    done = {"lost": False, "back": False, "again": False}

    async def step(i: int) -> None:
        if i >= loss_at and not done["lost"]:
            done["lost"] = True
            gate.close()
            client.channel.interrupt()
        if i >= loss_at + gap and done["lost"] and not done["back"]:
            done["back"] = True
            await client.channel.reattach()
        if again and i >= loss_at + gap + held // 2 and done["back"] and not done["again"]:
            done["again"] = True
            client.channel.interrupt()
            await client.channel.reattach()
        if i >= loss_at + gap + held and done["back"]:
            gate.open()

    async def source() -> Any:
        for i, event in enumerate(ANSWER):
            await step(i)
            yield event
            await asyncio.sleep(0)

    await run.pipe(source())
    await run.end("complete")
    await step(10**6)
    losses = 2 if again else 1
    await eventually(lambda: client.continuity_losses == losses)  # state changes arrive with messages
    await client.rebuilt()
    await wait_status(client.view, run.run_id, "complete")
    assert picture(client.view) == await fresh_picture(hub)
    assert counts and counts == sorted(counts) and counts[0] > 0  # never shrinks, never empty
    await client.close()
    await agent.end()


@settings(max_examples=30, deadline=None)
@given(
    loss_at=st.integers(0, len(ANSWER)),
    gap=st.integers(0, len(ANSWER)),
    held=st.integers(0, len(ANSWER)),
    again=st.booleans(),
)
def test_any_point_of_loss_rebuilds_to_a_fresh_sessions_view(loss_at: int, gap: int, held: int, again: bool) -> None:
    asyncio.run(lose_mid_stream(loss_at, gap, held, again))


async def test_load_older_during_the_refold_waits_for_it_then_pages_on() -> None:
    hub, client, agent = await open_session()
    for city in ("Paris", "Lyon", "Nice"):
        await exchange(client, agent, f"Weather in {city}?")
    reader = ClientSession(hub.client("reader").channel("chat"), history_page_size=4)
    await reader.connect()
    await reader.view.load_older(2)
    before = as_dicts(reader.view.get_messages())
    assert len(before) == 2
    gate = HistoryGate(reader.channel)
    await lose_continuity(reader, gate, lambda: exchange(client, agent, "And in Brest?"))
    loading = asyncio.ensure_future(reader.view.load_older(2))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not loading.done() and as_dicts(reader.view.get_messages()) == before
    gate.open()
    await reader.rebuilt()
    revealed = await loading
    shown = as_dicts(reader.view.get_messages())
    everything = (await fresh_picture(hub))[0]
    assert len(revealed) == 2 and shown == everything[len(everything) - len(shown) :]
    assert shown[-2:] != before  # the gap's exchange (missed live) is in
    await reader.close()
    await client.close()
    await agent.end()


async def test_closing_during_the_refold_ends_it() -> None:
    _hub, client, agent = await open_session()
    await exchange(client, agent, "Weather in Paris?")
    before = as_dicts(client.view.get_messages())
    gate = HistoryGate(client.channel)
    await lose_continuity(client, gate)
    await client.close()
    await client.rebuilt()  # the refold was cancelled: nothing left to wait for
    assert as_dicts(client.view.get_messages()) == before and client._shadow is None
    gate.open()
    await agent.end()


async def test_a_run_woken_during_the_refold_finds_its_trigger_in_it() -> None:
    hub, client, agent = await open_session()
    for city in ("Paris", "Lyon", "Nice"):
        await exchange(client, agent, f"Weather in {city}?")
    worker = AgentSession(hub.client("agent").channel("chat"), history_page_size=4)
    await worker.connect()
    gate = HistoryGate(worker.channel)
    gap: list[Any] = []

    async def ask() -> None:
        gap.append(await client.view.send(user_message("And in Brest?")))

    await lose_continuity(worker, gate, ask)
    # bound to its publisher (an endpoint that authenticated alice): the first match by alice settles
    run = await worker.create_run({**gap[0].invocation.to_json(), "inputClientId": "alice"})
    starting = asyncio.ensure_future(run.start())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not starting.done()
    gate.open()
    await starting
    # the trigger came with the refold's one page: no further history was read to find it
    assert worker.hydrator.pages_folded == 1 and run.input_codec_message_id == gap[0].input_codec_message_id
    await run.end("complete")
    await worker.close()
    await client.close()
    await agent.end()


async def test_a_page_in_flight_at_the_loss_is_read_again_when_the_refold_fails() -> None:
    hub, client, agent = await open_session()
    for city in ("Paris", "Lyon"):
        await exchange(client, agent, f"Weather in {city}?")
    reader = ClientSession(hub.client("reader").channel("chat"), history_page_size=4, history_backoff=0.001)
    await reader.connect()
    errors: list[Any] = []
    reader.on("error", errors.append)
    gate = HistoryGate(reader.channel)
    gate.close()
    loading = asyncio.ensure_future(reader.view.load_older(2))  # its first page waits at the gate
    await gate.waiting.wait()
    await lose_continuity(reader, gate, lambda: exchange(client, agent, "And in Brest?"))
    gate.plan = [True, False, False, False, False]  # the stale page is served, the refold's reads fail
    gate.open()
    await reader.rebuilt()
    assert [e.code for e in errors] == [104006, 104011]
    revealed = await loading  # read again, from the new attach: the gap's exchange included
    everything = (await fresh_picture(hub))[0]
    assert as_dicts(revealed) == everything[-2:] and reader.view.has_older()
    await reader.close()
    await client.close()
    await agent.end()


async def test_own_send_during_a_refold_survives_a_second_loss() -> None:
    _hub, client, agent = await open_session()
    await exchange(client, agent, "Weather in Paris?")
    gate = HistoryGate(client.channel)
    await lose_continuity(client, gate)
    before = len(client.view.get_messages())
    publish, published = client.channel.publish, asyncio.Event()

    async def late_publish(*args: Any, **kw: Any) -> Any:
        await published.wait()  # the publish lands after the second re-attach: its echo is live
        return await publish(*args, **kw)

    client.channel.publish = late_publish
    sending = asyncio.ensure_future(client.view.send(user_message("Still there?")))
    for _ in range(3):
        await asyncio.sleep(0)
    assert len(client.view.get_messages()) == before + 1  # optimistic, at once
    await lose_continuity(client, gate)  # the refold restarts: the send is carried over
    published.set()
    await sending
    counts: list[int] = []
    client.view.on("update", lambda: counts.append(len(client.view.get_messages())))
    gate.open()
    await client.rebuilt()
    assert counts[0] == before + 1  # the swap's update, before the held echo is folded
    assert len(client.view.get_messages()) == before + 1
    await client.close()
    await agent.end()


async def test_a_refold_counts_nothing_twice() -> None:
    """A wire not folded is counted (``skipped``, its ``skipped`` event, ``rejected``, ``tampered``)
    once per (serial, version serial) for the session's life: the refolds after two losses read the
    same rogue wires from history again and count none of them again; a new rogue wire still counts."""
    key = b"0123456789abcdef0123456789abcdef"
    hub, client, agent = await open_session(signing_key=key)
    events: dict[str, list[Any]] = {"agent": [], "client": []}
    agent.on("skipped", lambda message, why: events["agent"].append((message.get("serial"), why)))
    client.on("skipped", lambda message, why: events["client"].append((message.get("serial"), why)))
    worker = Worker()
    sent = await client.view.send(user_message("Weather in Paris?"))
    run = await worker.handle(agent, sent.invocation.to_json())
    await wait_status(client.view, run.run_id, "suspended")
    transport = {"role": "assistant", "run-id": run.run_id, "codec-message-id": "forged", "stream": "false"}
    forged = {"name": "ai-output", "data": {"item": {"type": "message", "role": "assistant", "content": []}},
              "extras": {"ai": {"transport": transport, "codec": {"kind": "output_item"}}}}
    spoofed = hub.client("agent", connection_id="spoofed").channel("chat")  # the agent's identity, no key
    mallory = hub.client("mallory").channel("chat")

    async def publish_rogues() -> None:
        await spoofed.publish(forged)  # tampered (no tag)
        await mallory.publish(forged)  # rejected: not a trusted agent identity
        await mallory.publish({"name": "ai-input", "data": "x", "extras": {"ai": {"transport": {"role": {"x": 1}}}}})

    await publish_rogues()
    await eventually(lambda: agent.skipped == 3 and client.skipped >= 1)
    counts = (agent.skipped, len(agent.rejected), len(agent.tampered), client.skipped)
    assert (agent.skipped, len(agent.rejected), len(agent.tampered)) == (3, 2, 1)
    assert len(events["agent"]) == 3 and len(events["client"]) == client.skipped
    for _ in range(2):  # two losses, two refolds of the same history
        for session in (agent, client):
            session.channel.interrupt()
            await session.channel.reattach()
        await asyncio.gather(agent.rebuilt(), client.rebuilt())
        assert (agent.skipped, len(agent.rejected), len(agent.tampered), client.skipped) == counts
        assert len(events["agent"]) == 3 and len(events["client"]) == client.skipped
    assert agent.continuity_losses == 2 and client.continuity_losses == 2
    before = client.skipped
    await publish_rogues()  # new wires (new serials): counted
    await eventually(lambda: agent.skipped == 6 and client.skipped > before)
    assert (len(agent.rejected), len(agent.tampered)) == (4, 2)
    await agent.end()
    await client.close()
