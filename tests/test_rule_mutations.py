"""Tests that catch a broken rule (issue 21's last bullet): each case here is the test that fails
when one rule of the session layer is removed or inverted by hand, for the rules no other test
caught (the list of mutations tried, and the test catching each, is in the issue's report).

* (resume closes only the step attempts opened before its trigger, as it does for streams: in
  ``tests/test_session_durable.py``, beside the stream case;)
* seeding a run's steers skips its trigger and every steer an earlier pass answered (by the run's
  own watch, without a session ledger, and after seeding);
* no test ``importorskip``\\ s the project's own modules (a broken import must fail, not skip).
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).parent


def test_no_test_importorskips_the_projects_own_modules() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if "node_modules" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "importorskip"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).split(".")[0] in ("ai_transport", "examples", "benchmarks")
            ):
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert offenders == []


# -- steer seeding (sessions/steer.py) ------------------------------------------------------------


def steering_of(trigger: str, with_ledger: bool) -> tuple[Any, Any, Any]:
    """A RunSteering of run ``run-1`` (trigger ``trigger``) on a bare session dispatch; with a
    SteerLedger on the session (fed every output, as the agent core feeds it) when ``with_ledger``."""
    from ai_transport.conversation.changes import OutputChanged
    from ai_transport.conversation.steers import SteerLedger
    from ai_transport.sessions.steer import RunSteering

    handlers: list[Any] = []

    class Session:
        def subscribe(self, kind: Any, handler: Any) -> Any:
            assert kind is OutputChanged
            handlers.append(handler)
            return lambda: handlers.remove(handler)

    session = Session()
    if with_ledger:
        ledger = SteerLedger()
        session.steer_ledger = ledger  # type: ignore[attr-defined]
        handlers.append(ledger.note)

    class Run:
        run_id = "run-1"
        abort_signal = asyncio.Event()
        input_codec_message_id = trigger

        def _report(self, err: Any) -> None:
            raise AssertionError(err)

    Run.session = session  # type: ignore[attr-defined]

    def emit(event: dict[str, Any]) -> None:
        change = OutputChanged(
            run_id=event.get("run_id"),
            input_codec_message_id=None,
            codec_message_id=event.get("codec_message_id"),
            serial=None,
            events=[],
            inputs=event.get("inputs", []),
            steer_codec_message_ids=event.get("steer_codec_message_ids"),
        )
        for handler in list(handlers):
            handler(change)

    return emit, RunSteering(Run(), None), Session


def steer(emit: Any, cmid: str, stamped: list[str] | None = None) -> None:
    event: dict[str, Any] = {"run_id": "run-1", "codec_message_id": cmid}
    if stamped is None:
        event["inputs"] = [{"type": "message", "message": {"role": "user"}}]
    else:  # an agent output answering ``stamped``
        event["steer_codec_message_ids"] = stamped
    emit(event)


@pytest.mark.parametrize("with_ledger", [False, True], ids=["run watch", "session ledger"])
def test_seeding_skips_the_trigger_and_every_steer_already_answered(with_ledger: bool) -> None:
    emitter, steering, _ = steering_of("trigger", with_ledger)
    steer(emitter, "trigger")  # the user message that woke the run (a continuation's trigger)
    steer(emitter, "s1")
    steer(emitter, "out-1", stamped=["s1"])  # an earlier pass answered s1
    steer(emitter, "s2")
    steering.seed()
    assert list(steering.tracker._pending) == ["s2"]


def test_after_seeding_a_refolded_trigger_or_answered_steer_is_no_new_steer() -> None:
    emitter, steering, _ = steering_of("trigger", False)
    steer(emitter, "s1")
    steer(emitter, "out-1", stamped=["s1"])
    steering.seed()
    assert not steering.tracker.has_pending()
    steer(emitter, "trigger")  # a refold re-reads history: neither is a steer to answer
    steer(emitter, "s1")
    assert not steering.tracker.has_pending()
    steer(emitter, "s3")
    assert list(steering.tracker._pending) == ["s3"]
    steer(emitter, "out-2", stamped=["s3"])  # another pass (a duplicate worker) answered it
    assert not steering.tracker.has_pending()


# -- admission (conversation/admission.py) --------------------------------------------------------


class Runs:
    """The part of a tree admission reads: run nodes by id, nodes by codec-message-id."""

    def __init__(self, *runs: Any, messages: dict[str, Any] | None = None) -> None:
        self.runs = {r.run_id: r for r in runs}
        self.messages = messages or {}

    def get_run_node(self, run_id: str) -> Any:
        return self.runs.get(run_id)

    def get_node_by_codec_message_id(self, cmid: str) -> Any:
        return self.messages.get(cmid)


def admission_of(accept_input: Any = None) -> tuple[Any, list[tuple[Any, str]]]:
    from ai_transport.conversation.admission import Admission

    rejected: list[tuple[Any, str]] = []
    return Admission({"agent"}, (), accept_input, lambda m, why: rejected.append((m.get("serial"), why))), rejected


def run_node(input_client_id: str | None = "alice") -> Any:
    from ai_transport.conversation.nodes import RunNode

    return RunNode("run-1", None, None, None, "", "", None, input_client_id=input_client_id)


def answer(client_id: Any, run_id: str | None = "run-1", cmid: str = "c1") -> dict[str, Any]:
    transport = {"codec-message-id": cmid}
    if run_id is not None:
        transport["run-id"] = run_id
    wire = {"name": "ai-input", "action": "message.create", "serial": "s-answer",
            "extras": {"ai": {"transport": transport, "codec": {"kind": "tool-approval-response"}}}}
    if client_id is not None:
        wire["clientId"] = client_id
    return wire


def test_a_lease_wire_from_an_untrusted_client_is_refused_and_reported() -> None:
    admission, rejected = admission_of()
    claim = {"name": "ai-claim", "clientId": "mallory", "action": "message.create", "serial": "s1", "data": "{}"}
    assert admission.admit(claim, Runs()) is False
    assert rejected == [("s1", "lease wire from untrusted client 'mallory'")]
    assert admission.admit({**claim, "clientId": "agent"}, Runs()) is True


def test_a_nameless_append_counts_for_an_accepted_stream_only_and_any_other_is_reported() -> None:
    admission, rejected = admission_of()
    output = {"name": "ai-output", "clientId": "agent", "action": "message.create", "serial": "s-out",
              "extras": {"ai": {"transport": {"stream": "true"}}}}
    assert admission.admit(output, Runs()) is True
    append = {"action": "message.append", "serial": "s-out", "clientId": "agent", "data": "more",
              "version": {"serial": "v1", "clientId": "agent"}}
    assert admission.admit(append, Runs()) is True and rejected == []
    stray = {**append, "serial": "s-other", "extras": {"ai": {"transport": {}}}}
    assert admission.admit(stray, Runs()) is False
    assert rejected == [("s-other", "mutation of a message that is not a trusted agent output")]


def test_an_anonymous_input_never_matches_a_run_whose_input_client_is_unknown() -> None:
    admission, _ = admission_of()
    assert admission.input_accepted(None, run_node(None)) is False
    assert admission.input_accepted("alice", run_node("alice")) is True


def test_with_accept_input_an_answer_into_an_unknown_run_is_judged_at_once_not_held() -> None:
    admission, rejected = admission_of(accept_input=lambda client_id, run: False)
    assert admission.admit(answer("alice"), Runs()) is False  # the predicate said no: refused now
    assert rejected and "input 'tool-approval-response' from a client" in rejected[0][1]
    plain, _ = admission_of()
    assert plain.admit(answer("alice"), Runs()) is None  # default: held until the run's start


def test_an_answer_without_run_id_is_judged_by_the_run_holding_its_message() -> None:
    admission, rejected = admission_of()
    run = run_node("alice")
    tree = Runs(run, messages={"c1": run})
    assert admission.admit(answer("alice", run_id=None), tree) is True and rejected == []
    assert admission.admit(answer("mallory", run_id=None), tree) is False


# -- HeldWires (conversation/held.py) -------------------------------------------------------------


def held_of(per_key: int, total: int) -> tuple[Any, list[Any]]:
    from ai_transport.conversation.held import HeldWires

    dropped: list[Any] = []
    return HeldWires(per_key, total, lambda m, why: dropped.append(m["serial"]), "per key", "in all"), dropped


def w(who: str, n: int) -> dict[str, Any]:
    return {"clientId": who, "serial": f"{who}-{n}", "action": "message.create"}


def test_a_redelivered_wire_is_held_once() -> None:
    held, dropped = held_of(5, 5)
    held.hold("k", "item", w("alice", 0))
    held.hold("k", "item", w("alice", 0))
    assert len(held) == 1 and held.held_by("alice") == 1
    assert [m["serial"] for m in held.release("k")] == ["alice-0"] and dropped == []


def test_beyond_the_per_key_bound_the_publishers_oldest_under_that_key_goes() -> None:
    held, dropped = held_of(2, 10)
    for n in range(3):
        held.hold("k", n, w("alice", n))
    held.hold("other", 9, w("alice", 9))
    assert dropped == ["alice-0"]
    assert [m["serial"] for m in held.release("k")] == ["alice-1", "alice-2"]


def test_beyond_the_session_cap_the_publisher_holding_most_loses_its_oldest() -> None:
    from ai_transport.conversation.held import PUBLISHERS_HELD

    total = 3
    held, dropped = held_of(total, total)
    cap = total * PUBLISHERS_HELD
    for n in range(total):
        held.hold("k", ("big", n), w("big", n))
    others = 0
    while len(held) < cap:
        who = f"p{others // 2}"
        held.hold("k", (who, others), w(who, others))
        others += 1
    assert dropped == [] and len(held) == cap
    held.hold("k", "one-more", w("late", 0))  # one over the cap: big (the most held) loses its oldest
    assert dropped == ["big-0"] and len(held) == cap


# -- the reader's fence (conversation/fence.py) ---------------------------------------------------

LEASE_MS = 200.0


def lease_wire(serial: str, at: float, conn: str | None, key: str = "run:R", **extra: Any) -> dict[str, Any]:
    import json

    from ai_transport.lease import lease_body

    wire: dict[str, Any] = {
        "name": "ai-claim", "serial": serial, "timestamp": at, "clientId": "agent", "action": "message.create",
        "data": json.dumps(lease_body("R", [key], f"claimant-{conn}", "inv")),
    }
    if conn is not None:
        wire["connectionId"] = conn
    wire.update(extra)
    return wire


def fence_of(*wires: dict[str, Any]) -> Any:
    from ai_transport.conversation.fence import Fence

    fence = Fence(LEASE_MS)
    for wire in wires:
        fence.note(wire)
    return fence


def test_a_takeover_fences_the_previous_connection_only() -> None:
    fence = fence_of(lease_wire("0001", 0, "conn-a"), lease_wire("0003", 1000, "conn-b"))
    assert fence.fenced("R", "conn-a", "0004") and not fence.fenced("R", "conn-a", "0002")
    assert not fence.fenced("R", "conn-b", "0004") and not fence.fenced("R", None, "0004")


def test_a_holder_of_unknown_connection_fences_no_one() -> None:
    # a claim whose publisher's connection is unknown takes the key, but is no other connection
    fence = fence_of(lease_wire("0001", 0, "conn-a"), lease_wire("0003", 1000, None))
    assert not fence.fenced("R", "conn-a", "0004")


def test_a_poisoned_lease_wire_fences_no_one_and_refreshes_what_was_judged_before() -> None:
    fence = fence_of(lease_wire("0001", 0, "conn-a"), lease_wire("0005", 1000, "conn-b"))
    assert fence.fenced("R", "conn-a", "0006")  # judged (and cached) before the poison lands
    # a's lease lapsed; then a lease wire rewritten by mallory (content unknown) takes the key
    poison = lease_wire("0003", 500, "conn-a", action="message.update",
                        version={"serial": "0009", "clientId": "mallory"})
    assert fence.note(poison) is None
    assert not fence.fenced("R", "conn-a", "0006")  # b took the key from an unknown holder, not a
    assert not fence.fenced("R", "conn-a", "0004")  # nor did the unknown holder fence a


def test_a_refused_lease_wire_does_not_count() -> None:
    from ai_transport.conversation.fence import Fence

    fence = Fence(LEASE_MS)
    first = lease_wire("0001", 0, "conn-a")
    assert fence.note(first) == "R"
    assert fence.note(dict(first)) == "R"  # the same wire again (live, then from history): it counts
    rewritten = lease_wire("0001", 0, "conn-a", key="call_1")  # a later version of the same serial
    assert fence.note(rewritten) is None


# -- the steer tracker (conversation/steers.py) ---------------------------------------------------


def test_a_steer_is_unresponded_from_its_fold_until_one_pass_stamps_it() -> None:
    from ai_transport.conversation.steers import SteerTracker

    tracker = SteerTracker()
    tracker.add_pending("s1")
    assert tracker.is_unresponded("s1")  # folded, not drained yet: the view already defers it
    tracker.drain_pending()
    assert not tracker.has_pending() and tracker.is_unresponded("s1")
    assert tracker.consume_recently_processed() == ["s1"]  # the next pass stamps it ...
    assert tracker.consume_recently_processed() == []  # ... and no later pass stamps it again
    assert not tracker.is_unresponded("s1")


# -- wire types (conversation/wire_check.py) ------------------------------------------------------
# The untrusted-message property draws what a publisher controls; these are the fields Ably stamps
# (``id``, ``connectionId``, ``version.*``) and header keys, which only a faulty or hostile relay
# (a proxy, a history store) could get wrong: each is still checked, and named.

GOOD = {"name": "ai-input", "clientId": "alice", "serial": "s1", "id": "m1", "connectionId": "c1",
        "action": "message.update", "timestamp": 1,
        "version": {"serial": "v1", "clientId": "alice", "timestamp": 2},
        "extras": {"ai": {"transport": {"role": "user"}, "codec": {"kind": "user-message"}}}}


def test_a_well_typed_wire_has_no_problem() -> None:
    from ai_transport.conversation.wire_check import wire_problem

    assert wire_problem(GOOD) is None


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (("id",), 7, "id is "),
        (("connectionId",), {"c": 1}, "connectionId is "),
        (("version", "clientId"), ["mallory"], "version.clientId is "),
        (("version", "serial"), 3, "version.serial is "),
        (("version", "timestamp"), "2", "version.timestamp is "),
        (("version", "timestamp"), True, "version.timestamp is "),
        (("extras", "ai", "transport"), {1: "x"}, "extras.ai.transport has a "),
        (("extras", "ai", "codec"), {("k",): "x"}, "extras.ai.codec has a "),
    ],
)
def test_every_field_a_session_reads_is_type_checked(path: tuple[str, ...], value: Any, named: str) -> None:
    import copy

    from ai_transport.conversation.wire_check import wire_problem

    wire = copy.deepcopy(GOOD)
    target = wire
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    problem = wire_problem(wire)
    assert problem is not None and problem.startswith(named), problem
