"""Fencing on the reader's side (issue 22): a worker A whose lease lapsed (paused right after its
lease check) and was taken over by B publishes a late output; every reader of ours refuses it —
a fresh :class:`ClientSession`'s view and the model input a resumed agent reads — while B's output
and A's output from before the takeover are kept. The rule: :mod:`ai_transport.conversation.fence`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support_sessions import channel_history, open_text_stream, text_delta, text_opening, user_message

from ai_transport.channels.memory import InProcessHub
from ai_transport.conversation.fence import Fence
from ai_transport.lease import LeaseLedger, lease_body
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
    skipped: list[tuple[Any, str]] = []
    reader.on("skipped", lambda message, why: skipped.append((message, why)))
    await reader.connect()
    await reader.view.load_all()
    shown = texts(reader.view.get_messages())
    assert "early from A" in shown and "from B" in shown
    assert "late from A" not in shown
    late = next(m for m in history if m.get("data") == "late from A")
    fenced = [message for message, why in skipped if "after its lease was taken over" in why]
    # each refusal names the wire the fence judged: its serial, connection, publisher and name
    assert late["serial"] in {m["serial"] for m in fenced}
    assert {(m["connectionId"], m["clientId"], m["name"]) for m in fenced} == {("conn-a", "agent", "ai-output")}

    c = AgentSession(hub.client("agent", connection_id="conn-c").channel("chat"), lease=LEASE)
    await c.connect()
    resumed = await c.create_run(sent.invocation.to_json(), run_id=run_id)
    await resumed.start()
    await resumed.view.load_all()
    model_input = str(resumed.input_items())
    assert "from B" in model_input and "early from A" in model_input
    assert "late from A" not in model_input


# -- the rule itself (sans-I/O), for any schedule of lease wires ---------------------------------

LEASE_WIRES = st.lists(
    st.tuples(
        st.sampled_from(["conn-a", "conn-b", "conn-c"]),  # the publishing connection (its claimant)
        st.sampled_from(["run:R", "trigger:e", "call_1"]),
        st.integers(0, 400),  # ms since the previous wire
        st.booleans(),  # done
    ),
    max_size=12,
)


def _lease_messages(schedule: list[tuple[str, str, int, bool]]) -> list[dict[str, Any]]:
    out, now = [], 0
    for i, (conn, key, gap, done) in enumerate(schedule):
        now += gap
        body = lease_body("R", [key], f"claimant-{conn}", "inv", done=done)
        out.append(
            {"name": "ai-claim", "serial": f"{2 * i + 1:04d}", "timestamp": now, "clientId": "agent",
             "connectionId": conn, "data": json.dumps(body), "action": "message.create"}
        )
    return out


def _reference(ledger: LeaseLedger, conn: str, serial: str) -> bool:
    """Lost when, at a lease wire before ``serial``, a key's holder moved from ``conn`` to another
    connection, with no tenure of ``conn`` begun after it (the holder rule read through ``holder``)."""
    lost = False
    wires = [w for w in ledger.wires("R") if w.serial < serial]
    for i, w in enumerate(wires):
        for key in ledger.keys("R"):
            before = ledger.holder("R", key, LEASE * 1000, upto=wires[i - 1].serial) if i else None
            after = ledger.holder("R", key, LEASE * 1000, upto=w.serial)
            if after is None or (before is not None and before.since == after.since):
                continue
            if before is not None and before.connection_id == conn and after.connection_id != conn:
                lost = True
            if after.connection_id == conn:
                lost = False
    return lost


@settings(deadline=None, max_examples=60)
@given(schedule=LEASE_WIRES, order=st.randoms(use_true_random=False))
def test_the_fence_follows_the_holder_rule_in_serial_order_whatever_the_arrival_order(
    schedule: list[tuple[str, str, int, bool]], order: Any
) -> None:
    messages = _lease_messages(schedule)
    shuffled = list(messages)
    order.shuffle(shuffled)
    fence, reference = Fence(LEASE * 1000), LeaseLedger()
    for m in shuffled:
        fence.note(m)
    for m in messages:
        reference.note(m, {"agent"})
    probes = [f"{2 * i:04d}" for i in range(len(messages) + 1)]  # between every two lease wires
    for conn in ("conn-a", "conn-b", "conn-c"):
        for serial in probes:
            assert fence.fenced("R", conn, serial) == _reference(reference, conn, serial)
            assert not fence.fenced("other-run", conn, serial)  # a warm worker's other runs: never


def _fenced_from_scratch(ledger: LeaseLedger, run_id: str, conn: str | None, serial: str) -> bool:
    """The fence by its definition, every tenure of the run folded from scratch (0.9's fence)."""
    if conn is None:
        return False
    changes: list[tuple[str, str, bool]] = []
    for at, before, after in _scratch_tenures(ledger, run_id):
        if after.unknown or after.connection_id is None:
            continue
        if before is not None and not before.unknown and before.connection_id not in (None, after.connection_id):
            changes.append((at, before.connection_id, True))
        changes.append((at, after.connection_id, False))
    lost = False
    for at, who, is_loss in changes:
        if at >= serial:
            break
        if who == conn:
            lost = is_loss
    return lost


def _scratch_tenures(ledger: LeaseLedger, run_id: str) -> list[Any]:
    from ai_transport.lease import Poison
    from ai_transport.lease import ledger as ledger_module

    keys = sorted(ledger.keys(run_id))
    holding: dict[str, Any] = dict.fromkeys(keys)
    out: list[Any] = []
    for w in ledger._ordered(run_id):
        for key in keys if isinstance(w, Poison) else sorted(set(w.keys)):
            previous = holding[key]
            h = holding[key] = ledger_module._step(previous, w, key, LEASE * 1000)
            if h is not None and (previous is None or h.since != previous.since):
                out.append((w.serial, previous, h))
    return out


MIXED_LEASE_WIRES = st.lists(
    st.tuples(
        st.sampled_from(["conn-a", "conn-b", "conn-c", None]),  # None: no connection stamped
        st.lists(st.sampled_from(["run:R", "trigger:e", "call_1"]), max_size=3),
        st.integers(0, 400),
        st.sampled_from(["create", "create", "create", "done", "handoff", "poisoned"]),
        st.sampled_from(["R", "R", "S"]),
    ),
    max_size=14,
)


@settings(deadline=None, max_examples=200)
@given(schedule=MIXED_LEASE_WIRES, order=st.randoms(use_true_random=False), probe_every=st.integers(1, 5))
def test_the_incremental_fence_answers_as_a_fence_folded_from_scratch(
    schedule: list[tuple[str | None, list[str], int, str, str]], order: Any, probe_every: int
) -> None:
    """The fence keeps each contested run's tenures and marks wire by wire: judged between any two
    arrivals (any order, re-deliveries, poisons, several keys, wires of no known connection), the
    same answer as every tenure folded from scratch."""
    messages, now = [], 0
    for i, (conn, keys, gap, kind, run) in enumerate(schedule):
        now += gap
        body = lease_body(run, keys, f"claimant-{conn}", "inv", done=kind == "done", handoff=kind == "handoff")
        m: dict[str, Any] = {"name": "ai-claim", "serial": f"{2 * i + 1:04d}", "timestamp": now, "clientId": "agent",
                             "data": json.dumps(body), "action": "message.create"}
        if conn is not None:
            m["connectionId"] = conn
        if kind == "poisoned":
            m.update(action="message.update", version={"serial": "9999", "clientId": "mallory"})
        messages.append(m)
    arrivals = messages + [dict(m) for m in messages[::4]]
    order.shuffle(arrivals)
    fence, reference = Fence(LEASE * 1000), LeaseLedger()
    probes = [f"{2 * i:04d}" for i in range(len(messages) + 1)]
    for n, m in enumerate(arrivals, start=1):
        fence.note(m)
        reference.note(m, {m["clientId"]})
        if n % probe_every == 0 or n == len(arrivals):
            for run in ("R", "S"):
                for conn in ("conn-a", "conn-b", "conn-c", None):
                    for serial in probes:
                        expected = _fenced_from_scratch(reference, run, conn, serial)
                        assert fence.fenced(run, conn, serial) == expected, (run, conn, serial)


# -- a long tenure read newest page first ---------------------------------------------------------


def _long_tenure_then_takeover(history: list[dict[str, Any]], renewals: int) -> list[dict[str, Any]]:
    """``history`` (the takeover scenario), then B renews its claim ``renewals`` times (a long tool),
    then C takes the run over after B's lease lapsed and streams the answer (B died)."""
    b_claim = next(m for m in history if m.get("name") == "ai-claim" and m.get("connectionId") == "conn-b")
    b_body = json.loads(b_claim["data"])
    b_output = next(m for m in history if m.get("data") == "from B")
    serial, ts = int(history[-1]["serial"]), max(m["timestamp"] for m in history)
    wires = list(history)

    def lease_wire(conn: str, body: dict[str, Any], at: int) -> dict[str, Any]:
        nonlocal serial
        serial += 1
        s = f"{serial:020d}"
        return {"id": f"{conn}:{serial}", "name": "ai-claim", "clientId": "agent", "connectionId": conn,
                "serial": s, "timestamp": at, "action": "message.create", "data": json.dumps(body),
                "version": {"serial": s, "timestamp": at}}

    for _ in range(renewals):
        ts += 50  # well inside the 200 ms lease
        wires.append(lease_wire("conn-b", b_body, ts))
    ts += 1000
    c_body = {**b_body, "claimant": "claimant-c", "invocationId": "inv-c", "connectionId": "conn-c"}
    wires.append(lease_wire("conn-c", c_body, ts))
    serial += 1
    c_output = json.loads(json.dumps(b_output))
    c_output.update(id=f"conn-c:{serial}", connectionId="conn-c", serial=f"{serial:020d}", timestamp=ts + 1)
    c_output["version"] = {**c_output["version"], "serial": f"{serial:020d}"}
    c_output["extras"]["ai"]["transport"]["codec-message-id"] = "answer-of-c"
    c_output["data"] = "from C"
    wires.append(c_output)
    return wires


def _folded_texts(wires: list[dict[str, Any]], page_size: int) -> tuple[list[str], list[str]]:
    from ai_transport.codec import ResponsesCodec
    from ai_transport.conversation.core import Conversation

    refused: list[str] = []
    reader = Conversation(ResponsesCodec, trusted_agent_ids={"agent"})
    reader.tree.fence.lease_ms = LEASE * 1000
    reader.tree._on_refused = lambda message, why: refused.append(str(message.get("serial")))  # type: ignore[method-assign]
    for end in range(len(wires), 0, -page_size):  # newest page first, each page oldest first
        reader.receive_history_page(wires[max(0, end - page_size) : end])
    run_id = next(m for m in wires if m.get("name") == "ai-run-start")["extras"]["ai"]["transport"]["run-id"]
    node = reader.tree.get_run_node(run_id)
    assert node is not None
    return texts(reader.tree.messages_of(node)), sorted(set(refused))


async def test_a_long_tenure_read_newest_page_first_costs_one_refold_not_one_per_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker renewed its claim through a long tool, died, and another took the run over: a fresh
    reader paging history newest first gets the renewals after the takeover, each older than every
    lease wire folded. The holder rule is folded again once, when the run is read (each wire was a
    refold of the key from its start: 2,000 renewals took a reader ~17 s; then one a page, still
    quadratic over pages), and the reader ends as in one page."""
    from ai_transport.lease import ledger as ledger_module

    hub, _run_id, _sent = await takeover_scenario()
    renewals = 600
    wires = _long_tenure_then_takeover(await channel_history(hub), renewals)
    steps = 0
    real = ledger_module._step

    def counted(*args: Any) -> Any:
        nonlocal steps
        steps += 1
        return real(*args)

    monkeypatch.setattr(ledger_module, "_step", counted)
    whole = _folded_texts(wires, len(wires))
    one_page, steps = steps, 0
    paged = _folded_texts(wires, 10)
    # ~1,800 over 62 pages against ~600 in one page (a refold of the key a page: ~20,000)
    assert steps < 4 * one_page, (steps, one_page)
    assert paged == whole
    shown, _refused = paged
    assert "early from A" in shown and "from B" in shown and "from C" in shown and "late from A" not in shown


_BASE: list[list[dict[str, Any]]] = []


def _base_history() -> list[dict[str, Any]]:
    if not _BASE:
        hub, _run_id, _sent = asyncio.run(takeover_scenario())
        _BASE.append(asyncio.run(channel_history(hub)))
    return json.loads(json.dumps(_BASE[0]))


@settings(max_examples=60, deadline=None)
@given(
    schedule=st.lists(
        st.tuples(st.sampled_from(["conn-a", "conn-b", "conn-c"]), st.booleans(), st.integers(0, 400)), max_size=30
    ),
    page_size=st.integers(1, 12),
)
def test_a_paged_fold_of_lease_wires_and_outputs_ends_as_one_page(
    schedule: list[tuple[str, bool, int]], page_size: int
) -> None:
    """After the takeover scenario, connections renew, claim and publish outputs in any order: a
    reader folding history newest page first, in pages of any size, shows and refuses what a
    reader folding it in one page does (the fences a page's lease wires move are settled when the
    run is read, never per page)."""
    history = _base_history()
    claim = next(m for m in history if m.get("name") == "ai-claim" and m.get("connectionId") == "conn-b")
    body = json.loads(claim["data"])
    output = next(m for m in history if m.get("data") == "from B")
    serial, ts = int(history[-1]["serial"]), max(m["timestamp"] for m in history)
    wires = list(history)
    for i, (conn, is_output, gap) in enumerate(schedule):
        serial, ts = serial + 1, ts + gap
        s = f"{serial:020d}"
        if is_output:
            m = json.loads(json.dumps(output))
            m.update(id=f"{conn}:{serial}", connectionId=conn, serial=s, timestamp=ts, data=f"out {i} from {conn}")
            m["version"] = {**m["version"], "serial": s}
            m["extras"]["ai"]["transport"]["codec-message-id"] = f"out-{i}"
        else:
            mine = {**body, "claimant": f"claimant-{conn}", "connectionId": conn}
            m = {"id": f"{conn}:{serial}", "name": "ai-claim", "clientId": "agent", "connectionId": conn, "serial": s,
                 "timestamp": ts, "action": "message.create", "data": json.dumps(mine),
                 "version": {"serial": s, "timestamp": ts}}
        wires.append(m)
    assert _folded_texts(wires, page_size) == _folded_texts(wires, len(wires))


def test_a_run_one_connection_leases_costs_the_fence_no_object_the_gc_tracks() -> None:
    """A woken worker's fence names the connection(s) of every run of the history; the usual run's
    lease wires name one, kept as itself (a set per run would be one more object per run that every
    collection scans). A second connection makes the run contested, the other runs stay as they were."""
    import gc

    def wire(serial: int, run_id: str, conn: str) -> dict[str, Any]:
        body = lease_body(run_id, [f"run:{run_id}"], f"claimant-{conn}", "inv")
        return {"name": "ai-claim", "serial": f"{serial:04d}", "timestamp": serial, "clientId": "agent",
                "action": "message.create", "data": json.dumps(body), "connectionId": conn}

    fence = Fence(LEASE * 1000)
    for i in range(20):
        fence.note(wire(2 * i, f"R{i}", "conn-a"))
        fence.note(wire(2 * i + 1, f"R{i}", "conn-a"))
    gc.collect()
    assert not [v for v in fence._connections.values() if gc.is_tracked(v)]
    assert not any(fence.contested(f"R{i}") for i in range(20))
    fence.note(wire(100, "R1", "conn-b"))
    assert fence.contested("R1") and not fence.contested("R2")
    assert not fence.fenced("R2", "conn-a", "0101")
