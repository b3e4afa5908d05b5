"""Lifecycle messages and transport headers (pure): builders match 0.8.0, parsers invert them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_transport.conversation.lifecycle import (
    EVENT_CANCEL,
    EVENT_RUN_END,
    EVENT_RUN_RESUME,
    EVENT_RUN_START,
    EVENT_RUN_SUSPEND,
    EVENT_STEP_END,
    EVENT_STEP_START,
    CancelTarget,
    build_cancel_message,
    build_lifecycle_headers,
    build_lifecycle_message,
    build_run_end_error,
    build_step_headers,
    build_transport_headers,
    parse_run_lifecycle,
    parse_step_lifecycle,
    read_cancel_target,
)
from ai_transport.errors import AITransportError
from ai_transport.sessions.invocation import Invocation

ids = st.one_of(st.none(), st.just(""), st.text(min_size=1, max_size=8))
req = st.text(min_size=1, max_size=8)

_FIELDS = {
    "run_id": "runId",
    "run_client_id": "runClientId",
    "parent": "parent",
    "fork_of": "forkOf",
    "regenerates": "regenerates",
    "supersedes": "supersedes",
    "invocation_id": "invocationId",
    "input_client_id": "inputClientId",
    "input_codec_message_id": "inputCodecMessageId",
    "input_event_id": "inputEventId",
    "step_id": "stepId",
    "step_start_serial": "stepStartSerial",
    "step_client_id": "stepClientId",
}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(req, req, st.fixed_dictionaries({}, optional=dict.fromkeys(_FIELDS, ids))),
        min_size=1,
        max_size=20,
    )
)
def test_transport_headers_equal_the_js_builder(node, cases) -> None:
    js_cases = []
    ours = []
    for role, cmid, opts in cases:
        opts = {k: v for k, v in opts.items() if v is not None}
        js_cases.append({"role": role, "codecMessageId": cmid, **{_FIELDS[k]: v for k, v in opts.items()}})
        ours.append(build_transport_headers(role=role, codec_message_id=cmid, **opts))
    theirs = node.call("session", "transportHeaders", cases=js_cases)
    # same keys, same values, same order (JSON.stringify of the extras is byte-identical)
    assert [json.dumps(h) for h in ours] == [json.dumps(h) for h in theirs]


def test_lifecycle_header_tables() -> None:
    assert build_lifecycle_headers(run_id="r", run_client_id="") == {"run-id": "r", "run-client-id": ""}
    full = build_lifecycle_headers(
        run_id="r",
        run_client_id="c",
        parent="p",
        fork_of="f",
        regenerates="g",
        invocation_id="i",
        input_client_id="ic",
        input_codec_message_id="im",
        reason="error",
        error_code=50000,
        error_message="boom",
    )
    assert list(full) == [
        "run-id",
        "run-client-id",
        "run-reason",
        "parent",
        "fork-of",
        "msg-regenerate",
        "invocation-id",
        "input-client-id",
        "input-codec-message-id",
        "error-code",
        "error-message",
    ]
    assert full["error-code"] == "50000"
    step = build_step_headers(
        run_id="r",
        step_id="s",
        step_start_serial="1",
        invocation_id="i",
        run_client_id="",
        invocation_client_id="a",
        step_client_id="a",
        reason="failed",
    )
    assert step == {
        "run-id": "r",
        "step-id": "s",
        "step-start-serial": "1",
        "invocation-id": "i",
        "run-client-id": "",
        "input-client-id": "a",
        "step-client-id": "a",
        "step-reason": "failed",
    }
    msg = build_lifecycle_message(EVENT_RUN_SUSPEND, {"run-id": "r", "run-client-id": ""})
    assert msg == {
        "name": "ai-run-suspend",
        "extras": {"ai": {"transport": {"run-id": "r", "run-client-id": ""}}},
    }
    assert "data" not in msg


@given(
    name=st.sampled_from([EVENT_RUN_START, EVENT_RUN_RESUME, EVENT_RUN_SUSPEND, EVENT_RUN_END]),
    run_id=req,
    client=st.text(max_size=5),
    parent=st.one_of(st.none(), req),
    inv=st.one_of(st.none(), req),
    reason=st.sampled_from([None, "complete", "cancelled", "error"]),
    serial=st.one_of(st.none(), req),
)
def test_run_lifecycle_round_trip(name, run_id, client, parent, inv, reason, serial) -> None:
    headers = build_lifecycle_headers(
        run_id=run_id,
        run_client_id=client,
        parent=parent if name == EVENT_RUN_START else None,
        invocation_id=inv,
        reason=reason if name == EVENT_RUN_END else None,
    )
    event = parse_run_lifecycle(name, headers, serial, 5)
    assert event is not None
    assert (
        event.type,
        event.run_id,
        event.client_id,
        event.serial,
        event.timestamp,
        event.invocation_id,
    ) == (
        {
            EVENT_RUN_START: "start",
            EVENT_RUN_RESUME: "resume",
            EVENT_RUN_SUSPEND: "suspend",
            EVENT_RUN_END: "end",
        }[name],
        run_id,
        client,
        serial,
        5,
        inv or "",
    )
    if name == EVENT_RUN_START:
        assert event.parent == parent
    if name == EVENT_RUN_END:
        assert event.reason == (reason or "complete")
        assert (event.error is not None) == (reason == "error")
        if reason == "error":
            assert event.error.code == 104008 and event.error.message == "agent reported an error"


def test_run_lifecycle_parse_edges() -> None:
    assert parse_run_lifecycle(EVENT_RUN_START, {}) is None
    assert parse_run_lifecycle(EVENT_RUN_START, {"run-id": ""}) is None
    assert parse_run_lifecycle("ai-output", {"run-id": "r"}) is None
    e = parse_run_lifecycle(
        EVENT_RUN_END, {"run-id": "r", "run-reason": "error", "error-code": "40300", "error-message": "no"}
    )
    assert (e.error.code, e.error.status_code, e.error.message) == (40300, 403, "no")
    e = parse_run_lifecycle(EVENT_RUN_END, {"run-id": "r", "run-reason": "error", "error-code": "x"})
    assert (e.error.code, e.error.status_code) == (104008, 500)


@given(
    run_id=req,
    step_id=req,
    sss=st.one_of(st.none(), req),
    reason=st.sampled_from([None, "complete", "failed", "cancelled"]),
)
def test_step_lifecycle_round_trip(run_id, step_id, sss, reason) -> None:
    start = parse_step_lifecycle(
        EVENT_STEP_START, build_step_headers(run_id=run_id, step_id=step_id, step_client_id="a"), "9"
    )
    assert (start.type, start.run_id, start.step_id, start.serial, start.step_client_id) == (
        "step-start",
        run_id,
        step_id,
        "9",
        "a",
    )
    end = parse_step_lifecycle(
        EVENT_STEP_END,
        build_step_headers(run_id=run_id, step_id=step_id, step_start_serial=sss, reason=reason),
    )
    if sss is None:
        assert end is None  # a step-end must name its step-start
    else:
        assert (end.step_start_serial, end.reason) == (sss, reason or "complete")


def test_cancel_message() -> None:
    msg = build_cancel_message(CancelTarget(run_id="r", input_codec_message_id="m"), event_id="e")
    assert msg == {
        "name": EVENT_CANCEL,
        "extras": {"ai": {"transport": {"event-id": "e", "run-id": "r", "input-codec-message-id": "m"}}},
    }
    assert read_cancel_target(msg) == CancelTarget("r", "m")
    fresh = build_cancel_message(CancelTarget(run_id="r"))
    assert len(fresh["extras"]["ai"]["transport"]["event-id"]) == 36
    assert read_cancel_target({"name": EVENT_CANCEL}) == CancelTarget()
    with pytest.raises(AITransportError) as err:
        build_cancel_message(CancelTarget())
    assert err.value.code == 40003


def test_run_end_error_codes() -> None:
    assert build_run_end_error({}).code == 104008
    assert build_run_end_error({"error-code": "50000"}).status_code == 500
    assert build_run_end_error({"error-code": "123"}).status_code == 500
    assert build_run_end_error({"error-code": "0x10"}).code == 16  # JS Number()


def test_invocation_json() -> None:
    inv = Invocation.from_json({"inputEventId": "e", "sessionName": "chat", "extra": 1})
    assert inv.to_json() == {"inputEventId": "e", "sessionName": "chat"}
    assert Invocation.from_json(inv.to_json()) == inv
    with pytest.raises(TypeError) as err:
        Invocation.from_json({"inputEventId": 1, "sessionName": "chat"})
    assert "invocation.inputEventId" in str(err.value)
    with pytest.raises(TypeError):
        Invocation.from_json([])  # type: ignore[arg-type]
