"""The lifecycle fold's fast paths agree with the general ones.

* :func:`parse_run_lifecycle` / :func:`parse_step_lifecycle` read each header once; they answer what
  a field-by-field :func:`read_str` parse answers, for any header map (non-string values included).
* A step wire folded by :meth:`Tree.fold_step_wire` (the wire path: no event object) leaves the tree
  as :func:`parse_step_lifecycle` + :meth:`Tree.apply_step_lifecycle` do, in any arrival order, and
  the steps read model (only the step folded gets a new ``StepInfo``) equals one rebuilt from every
  step's record.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ai_transport.codec import ResponsesCodec
from ai_transport.codec.headers import read_str
from ai_transport.conversation.lifecycle import (
    EVENT_RUN_END,
    EVENT_RUN_RESUME,
    EVENT_RUN_START,
    EVENT_RUN_SUSPEND,
    EVENT_STEP_END,
    EVENT_STEP_START,
    RunLifecycleEvent,
    StepLifecycleEvent,
    build_run_end_error,
    parse_run_lifecycle,
    parse_step_lifecycle,
)
from ai_transport.conversation.run import StepInfo
from ai_transport.conversation.tree import Tree, WireApplier

_RUN_KEYS = [
    "run-id",
    "run-client-id",
    "invocation-id",
    "input-client-id",
    "input-codec-message-id",
    "parent",
    "fork-of",
    "msg-regenerate",
    "run-reason",
]
_STEP_KEYS = [
    "run-id",
    "step-id",
    "step-start-serial",
    "step-reason",
    "invocation-id",
    "run-client-id",
    "input-client-id",
    "step-client-id",
]
values = st.one_of(st.none(), st.just(""), st.text(max_size=4), st.integers(), st.booleans())
reasons = st.sampled_from(["complete", "cancelled", "error", "failed", "", "odd"])


def _headers(keys: list[str]) -> Any:
    return st.fixed_dictionaries({}, optional={k: st.one_of(values, reasons) for k in keys})


def _reference_run(name: str, headers: dict[str, Any], serial: Any, timestamp: Any) -> RunLifecycleEvent | None:
    run_id = read_str(headers, "run-id")
    if not run_id:
        return None
    common: dict[str, Any] = {
        "run_id": run_id,
        "client_id": read_str(headers, "run-client-id") or "",
        "serial": serial,
        "invocation_id": read_str(headers, "invocation-id") or "",
        "timestamp": timestamp,
        "input_client_id": read_str(headers, "input-client-id"),
        "input_codec_message_id": read_str(headers, "input-codec-message-id"),
    }
    if name == EVENT_RUN_START:
        return RunLifecycleEvent(
            "start",
            parent=read_str(headers, "parent"),
            fork_of=read_str(headers, "fork-of"),
            regenerates=read_str(headers, "msg-regenerate"),
            **common,
        )
    if name == EVENT_RUN_SUSPEND:
        return RunLifecycleEvent("suspend", **common)
    if name == EVENT_RUN_RESUME:
        return RunLifecycleEvent("resume", **common)
    if name == EVENT_RUN_END:
        reason = read_str(headers, "run-reason") or "complete"
        err = build_run_end_error(headers) if reason == "error" else None
        return RunLifecycleEvent("end", reason=reason, error=err, **common)
    return None


def _reference_step(name: str, headers: dict[str, Any], serial: Any, timestamp: Any) -> StepLifecycleEvent | None:
    run_id, step_id = read_str(headers, "run-id"), read_str(headers, "step-id")
    if not run_id or not step_id:
        return None
    scopes = {
        "invocation_id": read_str(headers, "invocation-id") or "",
        "run_client_id": read_str(headers, "run-client-id") or "",
        "invocation_client_id": read_str(headers, "input-client-id") or "",
        "step_client_id": read_str(headers, "step-client-id") or "",
    }
    if name == EVENT_STEP_START:
        return StepLifecycleEvent("step-start", run_id, step_id, serial=serial, timestamp=timestamp, **scopes)
    if name == EVENT_STEP_END:
        sss = read_str(headers, "step-start-serial")
        if not sss:
            return None
        reason = read_str(headers, "step-reason") or "complete"
        return StepLifecycleEvent(
            "step-end", run_id, step_id, serial=serial, step_start_serial=sss, reason=reason, timestamp=timestamp,
            **scopes,
        )
    return None


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, RunLifecycleEvent):
        ea, eb = a.error, b.error
        if (ea is None) != (eb is None):
            return False
        if ea is not None and (ea.code, ea.status_code, ea.message) != (eb.code, eb.status_code, eb.message):
            return False
        a.error = b.error = None
    return a == b


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from([EVENT_RUN_START, EVENT_RUN_RESUME, EVENT_RUN_SUSPEND, EVENT_RUN_END, "ai-output"]),
    headers=_headers(_RUN_KEYS),
    serial=st.one_of(st.none(), st.text(max_size=3)),
)
def test_run_parse_reads_what_a_field_by_field_parse_reads(name, headers, serial) -> None:
    assert _same(parse_run_lifecycle(name, headers, serial, 7), _reference_run(name, headers, serial, 7))


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from([EVENT_STEP_START, EVENT_STEP_END, "ai-run-start"]),
    headers=_headers(_STEP_KEYS),
    serial=st.one_of(st.none(), st.text(max_size=3)),
)
def test_step_parse_reads_what_a_field_by_field_parse_reads(name, headers, serial) -> None:
    assert _same(parse_step_lifecycle(name, headers, serial, 7), _reference_step(name, headers, serial, 7))


def _step_wires(draw: Any) -> list[dict[str, Any]]:
    """Step-starts (several attempts) and step-ends of up to three steps of one run, with serials
    in publish order; arrival order is drawn separately."""
    wires: list[dict[str, Any]] = []
    serial = 0
    for step in draw(st.lists(st.sampled_from(["s0", "s1", "s2"]), min_size=1, max_size=6)):
        serial += 1
        start = f"{serial:04d}"
        wires.append(
            {
                "name": EVENT_STEP_START,
                "serial": start,
                "clientId": "agent",
                "timestamp": serial,
                "extras": {"ai": {"transport": {"run-id": "r", "step-id": step, "step-client-id": f"c{serial}"}}},
            }
        )
        if draw(st.booleans()):
            serial += 1
            transport = {"run-id": "r", "step-id": step, "step-start-serial": start}
            reason = draw(st.sampled_from([None, "complete", "failed", "cancelled"]))
            if reason is not None:
                transport["step-reason"] = reason
            wires.append(
                {
                    "name": EVENT_STEP_END,
                    "serial": f"{serial:04d}",
                    "clientId": "agent",
                    "timestamp": serial,
                    "extras": {"ai": {"transport": transport}},
                }
            )
    return wires


def _rebuilt_steps(tree: Tree) -> list[StepInfo]:
    """The steps read model computed from scratch from every step's record."""
    entry = tree._nodes["r"]
    out = []
    for step_id, r in sorted(entry.steps.items(), key=lambda s: min(s[1]["serials"], default="")):
        status = "active"
        if r["started"] and r["canonical"] is not None:
            status = r["ends"].get(r["canonical"], "active")
        out.append(StepInfo(step_id, status, len(r["serials"]), r["client"]))
    return out


@settings(max_examples=200, deadline=None)
@given(data=st.data(), judge=st.booleans())
def test_step_wire_fold_equals_the_event_fold(data, judge) -> None:
    wires = _step_wires(data.draw)
    arrival = data.draw(st.permutations(wires))
    by_wire, by_event = Tree(ResponsesCodec), Tree(ResponsesCodec)
    by_wire.judge_runs = by_event.judge_runs = judge
    applier = WireApplier(by_wire, ResponsesCodec.create_decoder())
    for wire in arrival:
        applier.apply(wire)
        event = parse_step_lifecycle(wire["name"], wire["extras"]["ai"]["transport"], wire["serial"], wire["timestamp"])
        assert event is not None
        assert by_event.apply_step_lifecycle(event, "agent", wire)
        node = by_wire.get_run_node("r")
        assert node is not None
        assert node.steps == by_event.get_run_node("r").steps == _rebuilt_steps(by_wire)
        assert by_wire.open_step_attempts("r") == by_event.open_step_attempts("r")
    assert by_wire._nodes["r"].steps == by_event._nodes["r"].steps


@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(st.integers(0, 60), min_size=1, max_size=30, unique=True).flatmap(st.permutations),
    late=st.lists(st.integers(0, 60), max_size=5),
    pages=st.integers(1, 8),
)
def test_nodes_stay_in_serial_order_whatever_the_insert_order(runs, late, pages) -> None:
    """The order tries the place after the previous insert first: history pages (newest page
    first, each oldest first), shuffled arrivals and earlier serials of known runs all leave the
    nodes sorted by serial."""
    tree = Tree(ResponsesCodec)
    size = max(1, len(runs) // pages)
    chunks = [sorted(runs[i : i + size]) for i in range(0, len(runs), size)]
    for chunk in sorted(chunks, reverse=True):  # newest page first, each page oldest first
        for n in chunk:
            tree.apply_run_lifecycle(RunLifecycleEvent("start", f"r{n}", serial=f"{100 + n:04d}"))
    for n in late:  # an older run-start of a known run moves it (an unknown one is placed)
        tree.apply_run_lifecycle(RunLifecycleEvent("start", f"r{n}", serial=f"{n:04d}"))
    tree.apply_step_lifecycle(StepLifecycleEvent("step-end", "unseen", "s", step_start_serial="1"))  # no serial yet: last
    serials = [node.start_serial for node in tree.nodes()]
    assert serials[-1] is None and serials[:-1] == sorted(serials[:-1])
    assert [e.node for e in tree._sorted] == tree.nodes() and len(tree.nodes()) == len(tree._nodes)
