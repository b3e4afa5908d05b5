"""Conformance of :class:`UIMessageCodec` with the real ``@ably/ai-transport@0.8.0`` ``./vercel`` entry
(``createUIMessageCodec``) in node: for the same runs of UI message chunks and inputs, our encoder's
publish log and live wire equal JS's (key order included); our decode + fold of JS's wire equals JS's
``getMessages()`` (and the readers' answers); JS's decode + fold of our wire equals ours.
"""

from __future__ import annotations

from typing import Any

import pytest
from support_vercel import assert_ordered_equal, py_decode_fold, py_encode
from vercel_cases import CASES

from ai_transport.codec import UIMessageCodec


def _check(node: Any, runs: list[dict[str, Any]], writer: dict[str, Any] | None = None) -> dict[str, Any]:
    js = node.call("vercel_codec", "encode", runs=runs, writer=writer or {})
    py = py_encode(runs, writer)
    assert py["results"] == js["results"]
    assert_ordered_equal(py["log"], js["log"], "publish log")
    assert_ordered_equal(py["wire"], js["wire"], "wire")
    js_fold = node.call("vercel_codec", "decodeFold", wire=js["wire"])
    assert js_fold["foldError"] is None
    ours = py_decode_fold(js["wire"])
    assert_ordered_equal(ours["decoded"], js_fold["decoded"], "decoded events")
    assert_ordered_equal(ours["messages"], js_fold["messages"], "getMessages")
    assert ours["pending"] == js_fold["pending"]
    assert ours["approved"] == js_fold["approved"]
    # the reverse: JS folds the wire we wrote to what we fold it to
    assert_ordered_equal(node.call("vercel_codec", "decodeFold", wire=py["wire"])["messages"], ours["messages"], "reverse")
    return ours


@pytest.mark.parametrize("name", sorted(CASES))
def test_scripted_runs_match_js(node: Any, name: str) -> None:
    ours = _check(node, CASES[name])
    assert ours["messages"], "the case folds to messages"


def test_text_runs_fold_each_delta_into_its_own_part(node: Any) -> None:
    ours = _check(node, CASES["text-runs"])
    texts = {m["codecMessageId"]: [p["text"] for p in m["message"]["parts"] if "text" in p] for m in ours["messages"]}
    assert texts == {"t1": ["a1 a2 a3 a4 ", "b1 ", "hm", "again!"], "t2": ["other message"]}


def test_reading_between_text_deltas() -> None:
    state = UIMessageCodec.init()
    fold = UIMessageCodec.fold
    fold(state, "output", {"type": "start"}, "m")
    fold(state, "output", {"type": "text-start", "id": "a"}, "m")
    seen = []
    for delta in ("x", "y", "z"):
        fold(state, "output", {"type": "text-delta", "id": "a", "delta": delta}, "m")
        seen.append(UIMessageCodec.get_messages(state)[0].message["parts"][0]["text"])
    assert seen == ["x", "xy", "xyz"]


def test_full_turn_folds_every_part_kind(node: Any) -> None:
    ours = _check(node, CASES["full-turn"])
    by_id = {m["codecMessageId"]: m["message"] for m in ours["messages"]}
    assert [p["type"] for p in by_id["u1"]["parts"]] == ["text", "file", "data-context"]
    assistant = by_id["a1"]
    types = [p["type"] for p in assistant["parts"]]
    assert types[:4] == ["step-start", "reasoning", "text", "tool-weather"]
    assert "dynamic-tool" in types and "data-status" not in types  # a transient data part is not kept
    lookup = next(p for p in assistant["parts"] if p["type"] == "dynamic-tool")
    assert lookup["state"] == "output-available" and lookup["output"] == {"hits": [1]}  # the client's result
    weather = assistant["parts"][3]
    assert weather["state"] == "output-available" and weather["output"] == {"temp": 21}  # second pass folded back
    assert assistant["metadata"] == {"done": True} and assistant["id"] == "msg-fallback"
    assert "a2" in by_id  # the second pass's own message


def test_appends_that_fail_are_recovered_like_js(node: Any) -> None:
    _check(node, CASES["full-turn"][:2], writer={"failAppends": [1, 4]})


def test_factories_match_js(node: Any) -> None:
    js = node.call("vercel_codec", "factories")
    assert UIMessageCodec.create_user_message(
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    ) == js["userMessage"]
    assert UIMessageCodec.create_regenerate("t", "p") == js["regenerate"]
    assert UIMessageCodec.create_tool_result("m", {"toolCallId": "c", "output": {"a": 1}}) == js["toolResult"]
    assert UIMessageCodec.create_tool_result_error("m", {"toolCallId": "c", "message": "x"}) == js["toolResultError"]
    assert UIMessageCodec.create_tool_approval_response("m", {"toolCallId": "c", "approved": True, "reason": "ok"}) == js["toolApprovalResponse"]
    assert UIMessageCodec.adapter_tag == js["adapterTag"]


@pytest.mark.parametrize(
    ("factory", "args", "field"),
    [
        ("create_tool_result", ("m", {"output": 1}), "payload.toolCallId"),
        ("create_tool_result", (None, {"toolCallId": "c"}), "codec_message_id"),
        ("create_tool_result_error", ("m", {"toolCallId": "c"}), "payload.message"),
        ("create_tool_approval_response", ("m", {"toolCallId": "c", "approved": "yes"}), "payload.approved"),
        ("create_tool_approval_response", ("m", "c"), "payload must be an object"),
        ("create_user_message", ({"id": "u", "role": "user"},), "parts list"),
        ("create_regenerate", ("t", 5), "parent"),
    ],
)
def test_factories_name_the_bad_field(factory: str, args: tuple[Any, ...], field: str) -> None:
    from ai_transport.errors import InvalidTypeError

    with pytest.raises(InvalidTypeError, match=field.replace(".", r"\.")):
        getattr(UIMessageCodec, factory)(*args)
