"""Generated UI message chunk streams (interleaved text / reasoning / tool streams, approvals, client
answers, aborts, errors, cancels, unknown chunks): our encoder's wire and our decode + fold equal the
real ``@ably/ai-transport@0.8.0`` ``./vercel`` codec's in node, both ways. Plus the never-raise rule
on mangled wires, and the readers' rules without node."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support_vercel import assert_ordered_equal, py_decode_fold, py_encode

from ai_transport.codec import UIMessageCodec, approved_pending_tool_calls, pending_tool_calls

IDS = st.sampled_from(["a", "b", "c"])
TEXT = st.text(alphabet="ab {}\"é:,1", max_size=6)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(alphabet="xy", max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["k", "v"]), inner, max_size=2),
    max_leaves=4,
)
META = st.none() | st.fixed_dictionaries({"openai": st.fixed_dictionaries({"id": st.sampled_from(["x", "y"])})})


def _chunk(draw: Any) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            [
                "text", "text", "reasoning", "tool-start", "tool-delta", "tool-available", "tool-error",
                "output", "output-error", "approval", "denied", "data", "source", "file", "meta",
                "step", "error", "abort", "unknown",
            ]
        )
    )
    i = draw(IDS)
    if kind in ("text", "reasoning"):
        phase = draw(st.sampled_from(["start", "delta", "delta", "end"]))
        c: dict[str, Any] = {"type": f"{kind}-{phase}", "id": i}
        if phase == "delta":
            c["delta"] = draw(TEXT)
        elif (m := draw(META)) is not None:
            c["providerMetadata"] = m
        return c
    if kind == "tool-start":
        c = {"type": "tool-input-start", "toolCallId": i, "toolName": draw(st.sampled_from(["w", "x-y"]))}
        if draw(st.booleans()):
            c["dynamic"] = draw(st.booleans())
        return c
    if kind == "tool-delta":
        return {"type": "tool-input-delta", "toolCallId": i, "inputTextDelta": draw(st.sampled_from(['{"a":', "1}", "[", "x"]))}
    if kind == "tool-available":
        return {"type": "tool-input-available", "toolCallId": i, "toolName": "w", "input": draw(JSONISH)}
    if kind == "tool-error":
        return {"type": "tool-input-error", "toolCallId": i, "toolName": "w", "errorText": draw(TEXT), "input": draw(JSONISH)}
    if kind == "output":
        return {"type": "tool-output-available", "toolCallId": i, "output": draw(JSONISH)}
    if kind == "output-error":
        return {"type": "tool-output-error", "toolCallId": i, "errorText": draw(TEXT)}
    if kind == "approval":
        return {"type": "tool-approval-request", "toolCallId": i, "approvalId": f"ap-{i}"}
    if kind == "denied":
        return {"type": "tool-output-denied", "toolCallId": i}
    if kind == "data":
        c = {"type": f"data-{draw(st.sampled_from(['x', 'y']))}", "data": draw(JSONISH)}
        if draw(st.booleans()):
            c["id"] = i
        if draw(st.booleans()):
            c["transient"] = draw(st.booleans())
        return c
    if kind == "source":
        return {"type": "source-url", "sourceId": i, "url": "https://e.x/" + i}
    if kind == "file":
        return {"type": "file", "mediaType": "text/plain", "url": "data:," + i}
    if kind == "meta":
        return {"type": draw(st.sampled_from(["message-metadata", "finish"])), "messageMetadata": draw(JSONISH)}
    if kind == "step":
        return {"type": draw(st.sampled_from(["start", "start-step", "finish-step"]))}
    if kind == "error":
        return {"type": "error", "errorText": draw(TEXT)}
    if kind == "abort":
        return {"type": "abort", "reason": draw(TEXT)}
    return {"type": "no-such-chunk"}


@st.composite
def runs(draw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 3))):
        cmid = f"m{n}"
        if draw(st.booleans()):
            part = {"type": "text", "text": draw(TEXT)}
            user = {"kind": "user-message", "message": {"id": f"u{n}", "role": "user", "parts": [part]}}
            out.append({"options": {}, "steps": [{"op": "input", "value": user, "messageId": f"u{n}"}]})
        headers = {"role": "assistant", "run-id": draw(st.sampled_from(["r1", "r2"])), "codec-message-id": cmid}
        steps: list[dict[str, Any]] = [{"op": "output", "value": _chunk(draw)} for _ in range(draw(st.integers(1, 14)))]
        if draw(st.booleans()):
            steps.insert(draw(st.integers(0, len(steps))), {"op": "cancel"})
        out.append({"options": {"extras": {"headers": headers}}, "steps": steps})
        if draw(st.booleans()):
            answer = draw(
                st.sampled_from(
                    [
                        {"kind": "tool-approval-response", "codecMessageId": cmid, "payload": {"toolCallId": draw(IDS), "approved": draw(st.booleans())}},
                        {"kind": "tool-result", "codecMessageId": cmid, "payload": {"toolCallId": draw(IDS), "output": draw(JSONISH)}},
                        {"kind": "tool-result-error", "codecMessageId": cmid, "payload": {"toolCallId": draw(IDS), "message": "no"}},
                    ]
                )
            )
            out.append({"options": {}, "steps": [{"op": "input", "value": answer, "messageId": cmid}]})
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs(), st.integers(0, 40))
def test_generated_streams_match_js(node: Any, generated: list[dict[str, Any]], join_at: int) -> None:
    js = node.call("vercel_codec", "encode", runs=generated, writer={})
    py = py_encode(generated)
    assert py["results"] == js["results"]
    assert_ordered_equal(py["wire"], js["wire"], "wire")
    # the whole wire, and a decoder joining mid-way (appends of unknown streams: first contact, the
    # lifecycle pre-roll of a run whose start it never saw)
    for wire in (js["wire"], js["wire"][min(join_at, len(js["wire"])) :]):
        js_fold = node.call("vercel_codec", "decodeFold", wire=wire)
        ours = py_decode_fold(wire)
        assert_ordered_equal(ours["decoded"], js_fold["decoded"], "decoded")
        assert_ordered_equal(ours["messages"], js_fold["messages"], "getMessages")
        assert (ours["pending"], ours["approved"]) == (js_fold["pending"], js_fold["approved"])


def _mangle(wire: list[dict[str, Any]], draw: Any) -> list[dict[str, Any]]:
    wire = copy.deepcopy(wire)
    for msg in wire:
        what = draw(st.sampled_from(["keep", "keep", "data", "kind", "tier", "drop-type", "serial"]))
        ai = msg.get("extras", {}).get("ai", {})
        if what == "data":
            msg["data"] = draw(JSONISH)
        elif what == "kind" and "codec" in ai:
            ai["codec"]["kind"] = draw(st.sampled_from(["valueOf", "tool-input", "data-", "start", 7]))
        elif what == "tier":
            ai["codec"] = draw(st.sampled_from([[], "x", None, {"kind": ["a"]}]))
        elif what == "drop-type":
            msg.pop("extras", None)
        elif what == "serial":
            msg["serial"] = draw(st.sampled_from([None, ["s"], {"x": 1}, 3]))
    return wire


@settings(max_examples=60, deadline=None)
@given(runs(), st.data())
def test_mangled_wire_never_raises(generated: list[dict[str, Any]], data: Any) -> None:
    wire = py_encode(generated)["wire"]
    mangled = _mangle(wire, data.draw)
    decoder = UIMessageCodec.create_decoder()
    state = UIMessageCodec.init()
    for msg in mangled:
        result = decoder.decode(msg)  # never raises
        mid = msg.get("extras", {}).get("ai", {}).get("transport", {}).get("codec-message-id")
        for ev in result.inputs:
            UIMessageCodec.fold(state, "input", ev, mid)
        for ev in result.outputs:
            UIMessageCodec.fold(state, "output", ev, mid)
    for m in UIMessageCodec.get_messages(state):
        assert isinstance(m.message["parts"], list)


def _tool(state: str, call: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool-w", "toolCallId": call, "state": state, "input": {"q": call}, **extra}


def test_readers_read_the_last_assistant_only() -> None:
    old = {"role": "assistant", "parts": [_tool("input-available", "old")]}
    last = {
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "x"},
            _tool("input-available", "c1"),
            _tool("approval-responded", "c2", approval={"id": "a", "approved": True}),
            _tool("approval-responded", "c3", approval={"id": "a", "approved": False}),
            {"type": "dynamic-tool", "toolName": "dyn", "toolCallId": "c4", "state": "input-available", "input": 1},
            {"type": "tool-w", "toolCallId": "c5", "state": "input-available"},  # no input yet
        ],
    }
    steer = {"role": "user", "parts": [{"type": "text", "text": "also"}]}
    assert pending_tool_calls([old, last, steer]) == [
        {"toolCallId": "c1", "toolName": "w", "input": {"q": "c1"}},
        {"toolCallId": "c4", "toolName": "dyn", "input": 1},
    ]
    assert approved_pending_tool_calls([old, last, steer]) == [{"toolCallId": "c2", "toolName": "w", "input": {"q": "c2"}}]
    assert pending_tool_calls([steer]) == []


def test_answers_to_unknown_calls_stay_bounded() -> None:
    from ai_transport.codec.vercel.tool_folds import MAX_PENDING_RESOLUTIONS

    state = UIMessageCodec.init()
    for i in range(MAX_PENDING_RESOLUTIONS + 50):
        answer = UIMessageCodec.create_tool_result("nobody", {"toolCallId": f"c{i}", "output": i})
        UIMessageCodec.fold(state, "input", answer, "nobody")
    assert len(state.pending_resolutions) == MAX_PENDING_RESOLUTIONS
    assert state.pending_resolutions[-1][1] == f"c{MAX_PENDING_RESOLUTIONS + 49}"  # the oldest went first


def test_a_flood_of_answers_from_one_publisher_cannot_evict_anothers() -> None:
    from ai_transport.codec.vercel.tool_folds import MAX_PENDING_RESOLUTIONS

    state = UIMessageCodec.init()
    fold = UIMessageCodec.fold
    # Alice answers her call before its assistant message is folded (history out of order, a fork).
    answer = UIMessageCodec.create_tool_result("m1", {"toolCallId": "alice-call", "output": "done"})
    fold(state, "input", answer, "u1", author="alice")
    for i in range(MAX_PENDING_RESOLUTIONS + 50):
        junk = UIMessageCodec.create_tool_result("nobody", {"toolCallId": f"c{i}", "output": i})
        fold(state, "input", junk, f"u{i}", author="mallory")
    assert state.pending_by_author == {"alice": 1, "mallory": MAX_PENDING_RESOLUTIONS}
    for chunk in (
        {"type": "start"},
        {"type": "tool-input-start", "toolCallId": "alice-call", "toolName": "w"},
    ):
        fold(state, "output", chunk, "m1", author="agent")
    (assistant,) = [m.message for m in UIMessageCodec.get_messages(state) if m.codec_message_id == "m1"]
    ((part),) = assistant["parts"]
    assert (part["toolCallId"], part["state"], part["output"]) == ("alice-call", "output-available", "done")
    assert state.pending_by_author == {"mallory": MAX_PENDING_RESOLUTIONS}


ANSWERS = st.lists(st.tuples(st.sampled_from(["alice", "bob", None, 7]), st.booleans()), max_size=30)


@given(ANSWERS)
def test_pending_answers_are_bounded_per_publisher(answers: list[tuple[Any, bool]]) -> None:
    # With a bound of 3: each publisher keeps its own 3 newest answers to unknown calls, in arrival
    # order; an answer whose call arrives is applied and frees its publisher's place.
    from unittest import mock

    from ai_transport.codec.vercel import tool_folds

    state = UIMessageCodec.init()
    fold = UIMessageCodec.fold
    model: list[tuple[Any, str]] = []
    with mock.patch.object(tool_folds, "MAX_PENDING_RESOLUTIONS", 3):
        for i, (author, answered) in enumerate(answers):
            who = author if isinstance(author, str) else None  # not a verified clientId: no publisher
            if answered and model:  # the call of the oldest pending answer arrives
                _, call = model.pop(0)
                fold(state, "output", {"type": "tool-input-start", "toolCallId": call, "toolName": "w"}, "m")
            call = f"c{i}"
            fold(state, "input", UIMessageCodec.create_tool_result("m", {"toolCallId": call, "output": i}), "u", author=author)
            mine = [k for k, (a, _) in enumerate(model) if a == who]
            if len(mine) == 3:
                del model[mine[0]]
            model.append((who, call))
            assert [(a, c) for _, c, _, a in state.pending_resolutions] == model
            counts: dict[Any, int] = {}
            for a, _ in model:
                counts[a] = counts.get(a, 0) + 1
            assert state.pending_by_author == counts
