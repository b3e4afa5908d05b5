"""The sans-I/O lease core (``ai_transport.lease``): the holder rule, its TTL boundary, authority and
rewrites, the keeper's fence, the supervisor's decision, and a simulated fleet.

The simulation (:class:`Fleet`) runs workers that follow the shell's protocol
(:mod:`ai_transport.sessions.claims`: claim, watch a live rival or take a lapsed one over, renew
while the tool runs, check the fence before publishing the output) against a simulated channel
whose server stamps each wire with the simulated time at arrival (serial order = arrival order) and
a publish latency below the keeper's safety margin. Hypothesis draws the schedule: wake-ups,
crashes, pauses (SIGSTOP/SIGCONT), tool durations, latencies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support_gc import tracked_from

from ai_transport.lease import (
    LEASE_NAME,
    ChannelClock,
    LeaseKeeper,
    LeaseLedger,
    LeasePolicy,
    Poison,
    lapsed,
    lease_body,
    parse_lease_wire,
    stalled_runs,
)

TRUSTED = {"agent"}
LEASE_MS = 1000.0


def wire(serial: int, ts: float, keys: list[str], claimant: str, *, run: str = "r", **extra: Any) -> dict[str, Any]:
    body = lease_body(run, keys, claimant, "inv", **extra)
    return {
        "name": LEASE_NAME,
        "clientId": "agent",
        "serial": f"{serial:08d}",
        "timestamp": ts,
        "action": "message.create",
        "data": json.dumps(body),
    }


def ledger_of(*wires: dict[str, Any]) -> LeaseLedger:
    ledger = LeaseLedger()
    for w in wires:
        assert ledger.note(w, TRUSTED) is None
    return ledger


# -- the holder rule and its boundary ------------------------------------------------------------


def test_a_takeover_needs_a_wire_stamped_strictly_after_the_lease() -> None:
    """A lease renewed at t holds through t + lease inclusive: a rival's claim at exactly t + lease
    is refused, one 1 ms later takes the key over."""
    at_boundary = ledger_of(wire(1, 0, ["k"], "a"), wire(2, 500, ["k"], "a"), wire(3, 1500, ["k"], "b"))
    holder = at_boundary.holder("r", "k", LEASE_MS)
    assert holder is not None and holder.claimant == "a" and holder.renewed_at == 500
    past = ledger_of(wire(1, 0, ["k"], "a"), wire(2, 500, ["k"], "a"), wire(3, 1501, ["k"], "b"))
    holder = past.holder("r", "k", LEASE_MS)
    assert holder is not None and holder.claimant == "b" and holder.takeover
    h = at_boundary.holder("r", "k", LEASE_MS)
    assert h is not None and not lapsed(h, 1500, LEASE_MS) and lapsed(h, 1500.5, LEASE_MS)


def test_a_renewal_keeps_a_key_however_long_the_holder_works() -> None:
    wires = [wire(i, i * 300.0, ["k"], "a") for i in range(1, 40)]  # 12 s of renewals every 0.3 s
    wires += [wire(100 + i, i * 300.0 + 150, ["k"], f"rival{i}") for i in range(1, 40)]
    wires.sort(key=lambda w: w["timestamp"])
    for i, w in enumerate(wires):
        w["serial"] = f"{i:08d}"
    holder = ledger_of(*wires).holder("r", "k", LEASE_MS)
    assert holder is not None and holder.claimant == "a" and not holder.takeover


def test_a_released_key_is_never_taken_over() -> None:
    ledger = ledger_of(wire(1, 0, ["k"], "a"), wire(2, 10, ["k"], "a", done=True), wire(3, 99_999, ["k"], "b"))
    holder = ledger.holder("r", "k", LEASE_MS)
    assert holder is not None and holder.claimant == "a" and holder.done


@settings(max_examples=200, deadline=None)
@given(
    claims=st.lists(
        st.tuples(st.integers(0, 4000), st.sets(st.sampled_from(["a", "b", "c"]), min_size=1), st.integers(0, 3)),
        max_size=14,
    ),
    lease=st.sampled_from([500.0, 1000.0, 2000.0]),
    data=st.data(),
)
def test_every_reader_agrees_on_the_holders_and_takeovers_happen_exactly_when_due(
    claims: list[tuple[int, set[str], int]], lease: float, data: Any
) -> None:
    """The holders are a function of the wires alone (any fold order), and, for every key, a wire
    of another claimant takes it over if and only if the holder's lease lapsed at its timestamp."""
    stamps = sorted(t for t, _, _ in claims)  # the channel stamps wires in serial order
    wires = [wire(i, stamps[i], sorted(keys), f"w{who}") for i, (_, keys, who) in enumerate(claims)]
    ledgers = []
    for order in (wires, data.draw(st.permutations(wires))):
        ledger = LeaseLedger()
        for w in order:
            ledger.note(w, TRUSTED)
        ledgers.append(ledger)
    for key in ("a", "b", "c"):
        holder = None
        for w in wires:
            body = json.loads(w["data"])
            if key not in body["callIds"]:
                continue
            seen = [lg.holder("r", key, lease, upto=w["serial"]) for lg in ledgers]
            assert seen[0] == seen[1]  # fold order does not matter
            now = seen[0]
            assert now is not None
            if holder is None:
                assert now.claimant == body["claimant"]  # the first claim holds
            elif holder.claimant == body["claimant"]:
                assert now.claimant == holder.claimant and now.renewed_at == w["timestamp"]  # a renewal
            elif w["timestamp"] - holder.renewed_at > lease:
                assert now.claimant == body["claimant"] and now.takeover  # due: it happens
            else:
                assert now == holder  # not due: refused
            holder = now


# -- authority and rewrites ----------------------------------------------------------------------


def test_untrusted_malformed_and_mutated_wires_are_refused_and_counted() -> None:
    ledger = LeaseLedger()
    untrusted = {**wire(1, 0, ["k"], "m"), "clientId": "mallory"}
    assert ledger.note(untrusted, TRUSTED) is not None
    assert ledger.note({**wire(2, 0, ["k"], "a"), "data": "{nope"}, TRUSTED) == "malformed lease wire"
    assert ledger.note({**wire(3, 0, ["k"], "a"), "data": json.dumps({"runId": 1})}, TRUSTED) is not None
    assert ledger.note({**wire(4, 0, ["k"], "?x")}, TRUSTED) is not None  # the unknown-holder prefix is ours
    assert ledger.holder("r", "k", LEASE_MS) is None
    assert sum(ledger.refused.values()) == 4


def test_a_live_claim_rewritten_by_a_client_keeps_its_first_version() -> None:
    """Break #3 of issue 21: a client holding ``message-update-any`` rewrites the agent's claim;
    live, the first version seen stands and the mutation is refused and counted."""
    original = wire(1, 0, ["call_1", "trigger:e"], "a")
    rewrite = {
        **original,
        "action": "message.update",
        "version": {"serial": "00000009", "clientId": "mallory", "timestamp": 50},
        "data": json.dumps(lease_body("r", [], "mallory", "inv")),
    }
    ledger = ledger_of(original)
    assert ledger.note(rewrite, TRUSTED) is not None
    for key in ("call_1", "trigger:e"):
        holder = ledger.holder("r", key, LEASE_MS)
        assert holder is not None and holder.claimant == "a"
    assert any("mutation" in why for why in ledger.refused)


def test_a_rewritten_claim_in_history_holds_every_key_until_restated_or_lapsed() -> None:
    """From history only the rewritten version is seen: it is an unknown holder of every key, so a
    fresh worker's claim within the lease does not hold (no second execution); the real claimant's
    renewal restates it; without one it lapses after a lease (a delay, like a dead claimer)."""
    rewritten = {
        **wire(1, 0, [], "mallory"),
        "action": "message.update",
        "version": {"serial": "00000009", "clientId": "mallory", "timestamp": 50},
    }
    parsed = parse_lease_wire(rewritten, TRUSTED)
    assert isinstance(parsed, Poison)
    fresh = wire(2, 400, ["call_1"], "b")
    ledger = LeaseLedger()
    ledger.note(rewritten, TRUSTED)
    ledger.note(fresh, TRUSTED)
    holder = ledger.holder("r", "call_1", LEASE_MS)
    assert holder is not None and holder.unknown and holder.claimant != "b"
    restated = wire(3, 600, ["call_1"], "a", restates="00000001")
    ledger.note(restated, TRUSTED)
    holder = ledger.holder("r", "call_1", LEASE_MS)
    assert holder is not None and holder.claimant == "a" and not holder.unknown
    lapsed_ledger = LeaseLedger()
    lapsed_ledger.note(rewritten, TRUSTED)
    lapsed_ledger.note(wire(2, 1001, ["call_1"], "b"), TRUSTED)
    holder = lapsed_ledger.holder("r", "call_1", LEASE_MS)
    assert holder is not None and holder.claimant == "b"
    # a trusted agent deleting / rewriting its own is taken as written; an untrusted original is refused
    assert not isinstance(
        parse_lease_wire({**rewritten, "version": {"serial": "9", "clientId": "agent"}, "data": fresh["data"]}, TRUSTED),
        (Poison, str),
    )
    assert isinstance(parse_lease_wire({**rewritten, "clientId": "mallory"}, TRUSTED), str)


# -- the keeper ----------------------------------------------------------------------------------


POLICY = LeasePolicy(1.0, 0.3, 0.2)


def test_the_fence_closes_at_lease_minus_safety_after_the_latest_confirmed_send() -> None:
    ledger = LeaseLedger()
    keeper = LeaseKeeper("r", ["k"], "a", "inv", POLICY)
    body = keeper.wire(10.0)
    ledger.note({**wire(1, 10_050, [], "a"), "data": json.dumps(body)}, TRUSTED)
    assert keeper.confirm(ledger, "00000001", 10.0) == {"k"}
    assert keeper.may_publish(10.79) and not keeper.may_publish(10.801)
    assert not keeper.renew_due(10.29) and keeper.renew_due(10.3)
    body = keeper.wire(10.3)
    assert body["restates"] == "00000001" and body["callIds"] == ["k"]
    ledger.note({**wire(2, 10_350, [], "a"), "data": json.dumps(body)}, TRUSTED)
    keeper.confirm(ledger, "00000002", 10.3)
    assert keeper.may_publish(11.1)
    # a rival took the key over while this keeper was paused: its next renewal shows it lost
    ledger.note(wire(3, 11_351, ["k"], "b"), TRUSTED)
    body = keeper.wire(12.0)
    ledger.note({**wire(4, 12_000, [], "a"), "data": json.dumps(body)}, TRUSTED)
    assert keeper.confirm(ledger, "00000004", 12.0) == set() and keeper.lost == {"k"}
    assert not keeper.may_publish(12.0)
    with pytest.raises(ValueError, match="renew_every"):
        LeasePolicy(1.0, 0.9).check()
    with pytest.raises(ValueError, match="lease must"):
        LeasePolicy(0).check()


def test_a_claimant_that_lost_watches_until_the_rivals_lease_lapses() -> None:
    ledger = ledger_of(wire(1, 1000, ["k"], "a"), wire(2, 1400, ["k"], "b"))
    keeper = LeaseKeeper("r", ["k"], "b", "inv", POLICY)
    keeper.wire(0.0)
    assert keeper.confirm(ledger, "00000002", 0.0) == set()
    rival = keeper.rival(ledger, "k")
    assert rival is not None and rival.claimant == "a"
    wait = keeper.wait_for(rival, 1400)
    assert wait is not None and 0.6 <= wait <= 0.7
    done = ledger_of(wire(1, 1000, ["k"], "a", done=True))
    rival = keeper.rival(done, "k")
    assert rival is not None and keeper.wait_for(rival, 1400) is None


# -- the supervisor's decision -------------------------------------------------------------------


def test_stalled_runs_are_those_whose_every_holder_lapsed_or_left() -> None:
    ledger = ledger_of(
        wire(1, 0, ["run:r1"], "a", run="r1"),
        wire(2, 0, ["run:r2"], "b", run="r2"),
        wire(3, 900, ["run:r2"], "b", run="r2"),
        wire(4, 0, ["run:r3"], "c", run="r3", connection_id="conn-c"),
        wire(5, 0, ["run:r5"], "e", run="r5", done=True),
    )
    active = {"r1": 100.0, "r2": 100.0, "r3": 100.0, "r4": 100.0, "r5": 100.0}
    at = {s.run_id: s.reason for s in stalled_runs(ledger, active, 1500, LEASE_MS, left={"conn-c"})}
    assert at == {"r1": "lease lapsed", "r3": "holder left presence", "r4": "no activity", "r5": "released, not ended"}
    assert stalled_runs(ledger, {"r1": 0.0}, 1000, LEASE_MS) == []  # at the boundary: still held
    assert [s.run_id for s in stalled_runs(ledger, {"r1": 0.0}, 1400, LEASE_MS, grace_ms=500)] == []
    clock = ChannelClock()
    assert clock.now(0) is None
    clock.observe(5000, 100)
    clock.observe(5010, 200)  # arrived later: a slower delivery says less
    assert clock.now(300) == 5200


# -- a simulated fleet ---------------------------------------------------------------------------

SIM = LeasePolicy(0.1, 0.03, 0.02)  # 100 ms lease, renewed every 30 ms, fence 20 ms early
STEP = 1  # ms


@dataclass
class SimWorker:
    name: str
    wake: int
    tool: int
    crash: int | None = None
    pause: tuple[int, int] | None = None
    state: str = "idle"
    keeper: LeaseKeeper | None = None
    inflight: dict[int, tuple[str, float]] = field(default_factory=dict)  # wire id -> (kind, sent_at)
    serials: dict[int, str] = field(default_factory=dict)
    claim_serial: str = ""
    until: float = 0.0
    watch_since: str = ""
    rival: Any = None
    attempts: int = 0
    executed: int = 0
    fenced: bool = False

    def running(self, t: int) -> bool:
        if self.crash is not None and t >= self.crash:
            return False
        return not (self.pause is not None and self.pause[0] <= t < self.pause[0] + self.pause[1])


class Fleet:
    """A simulated channel (server time = simulated ms) and workers following the shell's protocol."""

    def __init__(self, workers: list[SimWorker], latency: list[int]) -> None:
        self.workers = workers
        self.latency = latency
        self.ledger = LeaseLedger()
        self.flight: list[tuple[int, int, SimWorker, int, dict[str, Any]]] = []  # (arrival, seq, who, id, msg)
        self.seq = 0
        self.serial = 0
        self.outputs: list[tuple[str, str]] = []  # (serial, claimant)

    def send(self, t: int, who: SimWorker, kind: str, msg: dict[str, Any]) -> int:
        self.seq += 1
        delay = self.latency[self.seq % len(self.latency)]
        self.flight.append((t + delay, self.seq, who, self.seq, msg))
        who.inflight[self.seq] = (kind, t / 1000)
        return self.seq

    def deliver(self, t: int) -> None:
        due = sorted(f for f in self.flight if f[0] <= t)
        self.flight = [f for f in self.flight if f[0] > t]
        for _arrival, _seq, who, wid, msg in due:
            self.serial += 1
            serial = f"{self.serial:08d}"
            if msg["name"] == "output":
                self.outputs.append((serial, msg["claimant"]))
            else:
                self.ledger.note({**msg, "serial": serial, "timestamp": float(t), "clientId": "agent"}, TRUSTED)
            who.serials[wid] = serial

    def output_before(self, serial: str) -> bool:
        return any(s < serial for s, _ in self.outputs)

    def step(self, w: SimWorker, t: int) -> None:
        now = t / 1000
        if w.state == "idle":
            if t >= w.wake:
                w.keeper = LeaseKeeper("r", ["call"], w.name, "inv", SIM)
                self.send(t, w, "claim", {"name": LEASE_NAME, "data": json.dumps(w.keeper.wire(now))})
                w.state = "claiming"
            return
        keeper = w.keeper
        assert keeper is not None
        for wid in [i for i in w.inflight if i in w.serials]:  # echoes folded: confirm them
            kind, sent_at = w.inflight.pop(wid)
            serial = w.serials.pop(wid)
            before = set(keeper.held)
            keeper.confirm(self.ledger, serial, sent_at)
            if kind == "claim":
                w.claim_serial = serial
                w.state = "claimed"
            elif before - keeper.held:
                w.fenced = True
        if w.state in ("done", "claiming"):
            return
        if w.state == "claimed":
            if "call" in keeper.held:
                if self.output_before(w.claim_serial):
                    w.state = "done"  # already answered: not owed
                    return
                w.state, w.until = "executing", t + w.tool
                return
            rival = keeper.rival(self.ledger, "call", upto=w.claim_serial)
            mine = next(x.timestamp for x in self.ledger.wires("r") if x.serial == w.claim_serial)
            wait = keeper.wait_for(rival, mine) if rival is not None else 0.0
            if wait is None or w.attempts >= 4:
                w.state = "done"
                return
            w.state, w.until, w.watch_since, w.rival = "watching", t + wait * 1000, w.claim_serial, rival
            return
        if w.state == "watching":
            h = self.ledger.holder("r", "call", SIM.lease_ms)
            if h is not None and h.claimant == w.rival.claimant and (h.renewed_serial > w.watch_since or h.done):
                w.state = "done"  # the rival is alive: yield
            elif t >= w.until:
                w.attempts += 1
                self.send(t, w, "claim", {"name": LEASE_NAME, "data": json.dumps(keeper.wire(now, claim=True))})
                w.state = "claiming"
            return
        if keeper.renew_due(now) and not w.inflight and not w.fenced:
            self.send(t, w, "renew", {"name": LEASE_NAME, "data": json.dumps(keeper.wire(now))})
        if w.state == "executing" and t >= w.until:
            w.executed += 1  # the tool's side effect
            w.state = "publishing"
        if w.state == "publishing":
            if w.fenced or keeper.lost:
                w.state = "done"
            elif keeper.may_publish(now):  # the fence, right before the publish
                self.send(t, w, "output", {"name": "output", "claimant": w.name})
                w.state = "done"
            elif not w.inflight:  # the lease may have lapsed while paused: renew first
                self.send(t, w, "renew", {"name": LEASE_NAME, "data": json.dumps(keeper.wire(now))})

    def run(self, until: int) -> None:
        for t in range(0, until, STEP):
            self.deliver(t)
            for w in self.workers:
                if w.running(t):
                    self.step(w, t)

    def accepted(self) -> list[tuple[str, str]]:
        """Outputs a reader accepts: published while their claimant held the call."""
        out = []
        for serial, claimant in self.outputs:
            h = self.ledger.holder("r", "call", SIM.lease_ms, upto=serial)
            if h is not None and h.claimant == claimant:
                out.append((serial, claimant))
        return out


workers_st = st.lists(
    st.tuples(
        st.integers(0, 600),  # wake-up (ms)
        st.integers(0, 350),  # tool duration: up to 3.5 leases
        st.one_of(st.none(), st.integers(0, 700)),  # crash (SIGKILL) at
        st.one_of(st.none(), st.tuples(st.integers(0, 700), st.integers(1, 400))),  # SIGSTOP at, for
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=150, deadline=None)
@example(specs=[(0, 0, None, None), (0, 30, 31, None)], latency=[0, 3], survivor=True, survivor_tool=0)
@given(
    specs=workers_st,
    latency=st.lists(st.integers(0, 15), min_size=1, max_size=6),  # below the 20 ms safety margin
    survivor=st.booleans(),
    survivor_tool=st.integers(0, 350),
)
def test_each_output_appears_at_most_once_and_exactly_once_when_a_worker_survives(
    specs: list[tuple[int, int, int | None, tuple[int, int] | None]],
    latency: list[int],
    survivor: bool,
    survivor_tool: int,
) -> None:
    workers = [
        SimWorker(f"w{i}", wake, tool, crash, pause) for i, (wake, tool, crash, pause) in enumerate(specs)
    ]
    last_failure = max(
        [w.crash or 0 for w in workers] + [(w.pause[0] + w.pause[1]) if w.pause else 0 for w in workers]
    )
    # A wake-up after every failure, of a worker that stays alive: after the failed workers' last wires
    # landed too. A wake-up inside that window (a renewal the holder sent just before it died still in
    # flight) sees the renewal, takes the holder for alive and yields: the call then waits for the next
    # wake-up (the supervisor's, or the platform's retry). Known window, at most one network latency.
    wake = last_failure + max(latency) + 1
    if survivor:
        workers.append(SimWorker("live", wake, survivor_tool))
    end = wake + 12 * int(SIM.lease_ms) + 2 * 350
    fleet = Fleet(workers, latency)
    fleet.run(end)
    assert len(fleet.outputs) <= 1, fleet.outputs  # fenced at the source
    assert len(fleet.accepted()) <= 1
    if survivor:
        assert len(fleet.outputs) == 1 and len(fleet.accepted()) == 1
    # a worker that published executed; nobody publishes without holding at that serial
    assert fleet.accepted() == fleet.outputs


def test_a_handed_off_key_is_taken_over_by_the_next_claim_at_once() -> None:
    """A worker that detaches leaving the run open publishes ``handoff``: the next claim takes the key
    at once (no lease to wait out); a key that was not handed off still waits."""
    handed = ledger_of(wire(1, 0, ["run:r"], "a"), wire(2, 10, ["run:r"], "a", handoff=True), wire(3, 20, ["run:r"], "b"))
    holder = handed.holder("r", "run:r", LEASE_MS)
    assert holder is not None and holder.claimant == "b" and holder.takeover
    kept = ledger_of(wire(1, 0, ["run:r"], "a"), wire(2, 10, ["run:r"], "a"), wire(3, 20, ["run:r"], "b"))
    holder = kept.holder("r", "run:r", LEASE_MS)
    assert holder is not None and holder.claimant == "a"


# -- a claim key belongs to the identity that claimed it (issue 21) -------------------------------------


def _as(publisher: str, w: dict[str, Any]) -> dict[str, Any]:
    return {**w, "clientId": publisher}


@pytest.mark.parametrize("order", ["serial", "newest first"])
def test_a_second_trusted_identity_naming_the_holders_claimant_neither_renews_nor_releases_its_key(
    order: str,
) -> None:
    trusted = {"agent", "agent-b"}
    # agent-b repeats the holder's claimant name: a "renewal" that would keep the key past its lapse,
    # then a "release" that would close it for good
    wires = [
        wire(1, 0, ["k"], "a"),
        _as("agent-b", wire(2, 900, ["k"], "a")),
        _as("agent-b", wire(3, 1200, ["k"], "a", done=True)),
        wire(4, 1500, ["k"], "b"),
    ]
    ledger = LeaseLedger()
    for w in wires if order == "serial" else list(reversed(wires)):
        assert ledger.note(w, trusted) is None
    holder = ledger.holder("r", "k", LEASE_MS)
    # agent-b's wire at 900 renews nothing (the key is agent's, not lapsed yet: refused); its wire at
    # 1200 comes after the lapse, so it is a takeover by the lease rule, a tenure of agent-b's own
    assert holder is not None and holder.publisher == "agent-b" and holder.takeover
    assert holder.since == f"{3:08d}" and holder.renewed_at == 1200
    # with the same identity, those wires are the holder's own: a renewal and a release
    same = ledger_of(wire(1, 0, ["k"], "a"), wire(2, 900, ["k"], "a"), wire(3, 1200, ["k"], "a", done=True),
                     wire(4, 1500, ["k"], "b"))
    h = same.holder("r", "k", LEASE_MS)
    assert h is not None and h.claimant == "a" and h.done and h.publisher == "agent"


def test_a_renewal_from_another_identity_does_not_extend_the_lease() -> None:
    ledger = LeaseLedger()
    for w in (wire(1, 0, ["k"], "a"), _as("agent-b", wire(2, 900, ["k"], "a")), wire(3, 1001, ["k"], "b")):
        ledger.note(w, {"agent", "agent-b"})
    holder = ledger.holder("r", "k", LEASE_MS)
    # agent-b's wire at 900 came before a's lapse (1000): refused, so b's claim at 1001 takes the key
    assert holder is not None and holder.claimant == "b" and holder.takeover and holder.publisher == "agent"


def _tenures_per_key(ledger: LeaseLedger, run_id: str, lease_ms: float) -> list[Any]:
    """The tenures by their definition: the holder rule folded key by key, sorted by serial."""
    out: list[Any] = []
    for key in sorted(ledger.keys(run_id)):
        previous = None
        for serial, h in ledger._fold(run_id, key, lease_ms):
            if h is not None and (previous is None or h.since != previous.since):
                out.append((serial, previous, h))
            previous = h
    out.sort(key=lambda t: t[0])
    return out


@settings(max_examples=150, deadline=None)
@given(
    claims=st.lists(
        st.tuples(
            st.integers(0, 4000),
            st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=4),
            st.integers(0, 3),
            st.booleans(),
            st.booleans(),
        ),
        max_size=16,
    ),
    lease=st.sampled_from([500.0, 1000.0]),
)
def test_tenures_in_one_pass_equal_the_holder_rule_folded_key_by_key(
    claims: list[tuple[int, list[str], int, bool, bool]], lease: float
) -> None:
    """:meth:`LeaseLedger.tenures` steps each wire through the keys it names only (a flood of claims
    with fresh keys must not cost a pass per key): the same answer as a fold per key, poisons too."""
    ledger = LeaseLedger()
    ts = 0.0
    for serial, (dt, keys, who, done, poisoned) in enumerate(claims, start=1):
        ts += dt
        w = wire(serial, ts, keys, f"w{who}", done=done)
        if poisoned:
            w = {**w, "action": "message.update", "version": {"serial": w["serial"], "clientId": "mallory"}}
        ledger.note(w, TRUSTED)
    assert ledger.tenures("r", lease) == _tenures_per_key(ledger, "r", lease)


def _tenures_from_scratch(ledger: LeaseLedger, run_id: str, lease_ms: float) -> list[Any]:
    """The tenures folded from scratch in one pass over the run's wires and the poisons in serial
    order (each wire stepping the keys it names, a poison every key of the run)."""
    from ai_transport.lease import ledger as ledger_module

    keys = sorted(ledger.keys(run_id))
    holding: dict[str, Any] = dict.fromkeys(keys)
    out: list[Any] = []
    for w in ledger._ordered(run_id):
        for key in keys if isinstance(w, Poison) else sorted(set(w.keys)):
            previous = holding[key]
            h = holding[key] = ledger_module._step(previous, w, key, lease_ms)
            if h is not None and (previous is None or h.since != previous.since):
                out.append((w.serial, previous, h))
    return out


LEASE_SEQUENCES = st.lists(
    st.tuples(
        st.integers(0, 1500),  # ms since the previous wire
        st.lists(st.sampled_from(["a", "b", "c"]), min_size=0, max_size=3),  # keys
        st.integers(0, 2),  # claimant
        st.sampled_from(["agent", "agent-b"]),  # publisher
        st.sampled_from(["create", "create", "create", "poisoned", "done", "handoff", "restates"]),
        st.sampled_from(["r", "r", "s"]),  # run
    ),
    max_size=14,
)


def _lease_sequence(drawn: list[tuple[int, list[str], int, str, str, str]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    ts = 0.0
    for serial, (dt, keys, who, publisher, kind, run) in enumerate(drawn, start=1):
        ts += dt
        extra: dict[str, Any] = {}
        if kind in ("done", "handoff"):
            extra[kind] = True
        elif kind == "restates":
            extra["restates"] = f"{max(serial - 2, 1):08d}"  # perhaps the serial of a poison
        w = {**wire(serial, ts, keys, f"w{who}", run=run, **extra), "clientId": publisher}
        if kind == "poisoned":
            w = {**w, "action": "message.update", "version": {"serial": w["serial"], "clientId": "mallory"}}
        out.append(w)
    return out


@settings(max_examples=300, deadline=None)
@given(
    drawn=LEASE_SEQUENCES,
    order=st.randoms(use_true_random=False),
    probes=st.lists(st.integers(0, 14), max_size=3),
    lease=st.sampled_from([500.0, 1000.0]),
)
def test_incremental_tenures_equal_a_fold_from_scratch_whatever_the_arrival_order(
    drawn: list[tuple[int, list[str], int, str, str, str]], order: Any, probes: list[int], lease: float
) -> None:
    """:meth:`LeaseLedger.tenures` keeps a followed run's tenures up to date wire by wire (a newer
    wire steps its keys, an older one refolds them): for any lease wires arriving in any order
    (re-deliveries too), followed from any point, the same tenures as a fold from scratch."""
    wires = _lease_sequence(drawn)
    arrivals = wires + [dict(w) for w in wires[: len(wires) // 3]]  # some delivered twice
    order.shuffle(arrivals)
    ledger = LeaseLedger()
    trusted = {"agent", "agent-b"}
    for i, w in enumerate(arrivals):
        if i in probes:  # follow the runs from here on (and check what is folded so far)
            for run in ("r", "s"):
                assert ledger.tenures(run, lease) == _tenures_from_scratch(ledger, run, lease)
        ledger.note(w, trusted)
    for run in ("r", "s"):
        assert ledger.tenures(run, lease) == _tenures_from_scratch(ledger, run, lease)
        assert ledger.tenures(run, lease / 2) == _tenures_from_scratch(ledger, run, lease / 2)  # another lease


def test_a_flood_of_claims_in_serial_order_steps_each_claim_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a run is followed, each newer wire costs one holder-rule step per key it names."""
    from ai_transport.lease import ledger as ledger_module

    steps = 0
    real = ledger_module._step

    def counted(*args: Any) -> Any:
        nonlocal steps
        steps += 1
        return real(*args)

    monkeypatch.setattr(ledger_module, "_step", counted)
    ledger = ledger_of(wire(1, 0, ["run:r"], "a"))
    assert len(ledger.tenures("r", LEASE_MS)) == 1
    steps = 0
    for i in range(2, 502):
        ledger.note(wire(i, i, ["run:r", f"call_{i}"], f"m{i}"), TRUSTED)
    assert steps == 1000
    assert len(ledger.tenures("r", LEASE_MS)) == 501


def test_a_cleared_ledger_forgets_the_tenures_it_followed() -> None:
    ledger = ledger_of(wire(1, 0, ["k"], "a"))
    heard: list[tuple[str, int, int]] = []
    fold = ledger.follow_tenures("r", LEASE_MS)
    fold.on_change = lambda run, removed, added: heard.append((run, len(removed), len(added)))
    ledger.clear()
    assert heard == [("r", 1, 0)] and ledger.tenures("r", LEASE_MS) == []
    ledger.note(wire(2, 0, ["k"], "b"), TRUSTED)
    assert [after.claimant for _, _, after in ledger.tenures("r", LEASE_MS)] == ["b"]


def test_a_run_costs_the_ledger_its_wires_and_one_dict_of_them() -> None:
    """A woken worker's ledgers (the session's, the fence's) hold every run of the history: per run,
    its wires and the dict of them by serial, no record around it (one more object per run that the
    cyclic GC tracks). The wires still read back in serial order, a new one included."""
    ledger = ledger_of(wire(0, 0, ["run:r"], "a"))
    base = tracked_from(ledger)
    for i in range(1, 51):
        ledger.note(wire(2 * i + 1, 0, [f"run:r{i}"], "a", run=f"r{i}", done=True), TRUSTED)  # newest first
        ledger.note(wire(2 * i, 0, [f"run:r{i}"], "a", run=f"r{i}"), TRUSTED)
    assert tracked_from(ledger) - base == 50 * 3
    assert [w.serial for w in ledger.wires("r1")] == [f"{2:08d}", f"{3:08d}"]
    ledger.note(wire(1, 0, ["run:r1"], "b", run="r1"), TRUSTED)
    assert [w.serial for w in ledger.wires("r1")] == [f"{n:08d}" for n in (1, 2, 3)]
