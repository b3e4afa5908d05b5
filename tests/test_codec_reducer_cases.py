"""Hand-written reducer cases (reference doc §6), folded here and by the reference in node.

Events are folded directly (``fold(state, direction, event, message_id)``), so the cases also cover
event shapes the decoder never produces (the reducer is public API on its own).
"""

from __future__ import annotations

import pytest
from support_codec_decoder import fold_events, inp, out

from ai_transport.codec import reducer
from ai_transport.codec.reducer import DENIED_TOOL_OUTPUT
from ai_transport.codec.types import CodecMessage, OpenAIMessage

MSG = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
RS = {"id": "rs_1", "type": "reasoning", "summary": []}
FC = {
    "id": "fc_1",
    "type": "function_call",
    "call_id": "c1",
    "name": "rm",
    "arguments": "",
    "status": "in_progress",
}


def item_added(item, mid="m1"):
    return out({"type": "response.output_item.added", "item": item, "output_index": 0}, mid)


def part_added(index, part, item_id="msg_1"):
    return out(
        {
            "type": "response.content_part.added",
            "item_id": item_id,
            "output_index": 0,
            "content_index": index,
            "part": part,
        }
    )


def text_delta(index, delta, item_id="msg_1", typ="response.output_text.delta"):
    return out({"type": typ, "item_id": item_id, "content_index": index, "delta": delta})


def approval_request(call_id="c1"):
    return out({"type": "tool-approval-request", "call_id": call_id, "name": "rm", "arguments": '{"p":"/"}'})


def approval(approved, call_id="c1", reason=None):
    payload = {"call_id": call_id, "approved": approved}
    if reason is not None:
        payload["reason"] = reason
    return inp({"kind": "tool-approval-response", "codecMessageId": "m1", "payload": payload})


def result(call_id="c1", output="ok!"):
    return inp(
        {"kind": "tool-result", "codecMessageId": "m1", "payload": {"call_id": call_id, "output": output}}
    )


def failure(call_id="c1", message="boom"):
    return inp(
        {
            "kind": "tool-result-error",
            "codecMessageId": "m1",
            "payload": {"call_id": call_id, "message": message},
        }
    )


def user(text, mid="u1", role="user"):
    return inp(
        {
            "kind": "user-message",
            "message": {
                "role": role,
                "items": [
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
                ],
            },
        },
        mid,
    )


OUTPUT_TEXT = {"type": "output_text", "text": "", "annotations": []}

CASES: dict[str, list] = {
    "approve then deny": [item_added(FC), approval_request(), approval(True), approval(False)],
    "deny then approve": [item_added(FC), approval_request(), approval(False), approval(True)],
    "request after approval resets to pending": [
        item_added(FC),
        approval_request(),
        approval(True),
        approval_request(),
    ],
    "result then error": [item_added(FC), result(), failure()],
    "error then result": [item_added(FC), failure(), result()],
    "approve with reason then result": [approval_request(), approval(True, reason="fine"), result()],
    "deny with reason": [approval_request(), approval(False, reason="not today")],
    "deny with null reason": [
        inp(
            {
                "kind": "tool-approval-response",
                "payload": {"call_id": "c1", "approved": False, "reason": None},
            }
        )
    ],
    "approved is truthy, not strictly true": [
        inp({"kind": "tool-approval-response", "payload": {"call_id": "c1", "approved": "yes"}}),
        inp({"kind": "tool-approval-response", "payload": {"call_id": "c2", "approved": 0}}),
    ],
    "upsert replaces the first server output with that call_id": [
        out(
            {
                "type": "function_call_output",
                "item": {"type": "function_call_output", "call_id": "c1", "output": "server"},
            }
        ),
        out(
            {
                "type": "function_call_output",
                "item": {"type": "function_call_output", "call_id": "c1", "output": "server2"},
            }
        ),
        result(output="client"),
    ],
    "upsert with other call ids in between": [
        result("a"),
        result("b", "B"),
        failure("a", "A failed"),
        result("c"),
    ],
    "tool result without message id is dropped": [
        inp({"kind": "tool-result", "payload": {"call_id": "c1", "output": 1}}, None)
    ],
    "output without message id is dropped": [item_added(MSG, None)],
    "holes in message content": [item_added(MSG), part_added(2, OUTPUT_TEXT), text_delta(2, "C")],
    "hole filled": [
        item_added(MSG),
        part_added(1, OUTPUT_TEXT),
        part_added(0, OUTPUT_TEXT),
        text_delta(0, "A"),
        text_delta(1, "B"),
    ],
    "reasoning content slot created and holed": [
        item_added(RS),
        part_added(1, {"type": "reasoning_text", "text": ""}, "rs_1"),
        text_delta(1, "x", "rs_1", "response.reasoning_text.delta"),
    ],
    "reasoning text slot": [
        item_added(RS),
        part_added(0, {"type": "reasoning_text", "text": ""}, "rs_1"),
        text_delta(0, "think", "rs_1", "response.reasoning_text.delta"),
        out(
            {"type": "response.reasoning_text.done", "item_id": "rs_1", "content_index": 0, "text": "thought"}
        ),
    ],
    "summary slots": [
        item_added(RS),
        out(
            {
                "type": "response.reasoning_summary_part.added",
                "item_id": "rs_1",
                "summary_index": 1,
                "part": {"type": "summary_text", "text": "b"},
            }
        ),
        out(
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": "rs_1",
                "summary_index": 1,
                "delta": "B",
            }
        ),
        out(
            {
                "type": "response.reasoning_summary_part.added",
                "item_id": "rs_1",
                "summary_index": 0,
                "part": {"type": "summary_text", "text": ""},
            }
        ),
        out(
            {
                "type": "response.reasoning_summary_text.done",
                "item_id": "rs_1",
                "summary_index": 0,
                "text": "A",
            }
        ),
    ],
    "summary part without text concatenates like JS": [
        item_added(RS),
        out(
            {
                "type": "response.reasoning_summary_part.added",
                "item_id": "rs_1",
                "summary_index": 0,
                "part": {"type": "summary_text"},
            }
        ),
        out(
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": "rs_1",
                "summary_index": 0,
                "delta": "x",
            }
        ),
    ],
    "delta on a missing slot or wrong type is a no-op": [
        item_added(MSG),
        part_added(0, {"type": "refusal", "refusal": ""}),
        text_delta(0, "not text"),
        text_delta(3, "nothing there"),
        text_delta(0, "No.", typ="response.refusal.delta"),
        out({"type": "response.refusal.done", "item_id": "msg_1", "content_index": 0, "refusal": "No!"}),
        text_delta(0, "x", item_id="unknown"),
        out({"type": "response.function_call_arguments.delta", "item_id": "msg_1", "delta": "x"}),
    ],
    "wrong part type for the item is not slotted": [
        item_added(MSG),
        part_added(0, {"type": "reasoning_text", "text": ""}),
        item_added(RS),
        part_added(0, OUTPUT_TEXT, "rs_1"),
    ],
    "function call arguments": [
        item_added(FC),
        out(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": 0,
                "delta": '{"a"',
            }
        ),
        out(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": 0,
                "delta": ":1}",
            }
        ),
        out(
            {
                "type": "response.output_item.done",
                "item": {"type": "function_call", "id": "fc_1", "status": "completed"},
            }
        ),
    ],
    "function call arguments done replaces": [
        item_added(FC),
        out({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "garbage"}),
        out(
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_1",
                "arguments": "{}",
                "name": "rm",
            }
        ),
    ],
    "logprobs only onto existing output_text slots": [
        item_added(MSG),
        part_added(0, OUTPUT_TEXT),
        part_added(1, {"type": "refusal", "refusal": "no"}),
        out(
            {
                "type": "response.output_item.done",
                "item": {
                    "type": "message",
                    "id": "msg_1",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "logprobs": [{"t": 1}]},
                        {"type": "output_text", "logprobs": [{"t": 2}]},
                        {"type": "output_text", "logprobs": [{"t": 3}]},
                    ],
                },
            }
        ),
    ],
    "done without status removes it": [
        item_added(MSG),
        out({"type": "response.output_item.done", "item": {"type": "message", "id": "msg_1"}}),
    ],
    "done without id is ignored": [
        item_added(MSG),
        out({"type": "response.output_item.done", "item": {"type": "message", "status": "completed"}}),
    ],
    "done in another message is ignored": [
        item_added(MSG),
        out(
            {
                "type": "response.output_item.done",
                "item": {"type": "message", "id": "msg_1", "status": "completed"},
            },
            "m2",
        ),
    ],
    "reasoning encrypted_content only when a string": [
        item_added({**RS, "encrypted_content": "from-added"}),
        out(
            {
                "type": "response.output_item.done",
                "item": {"type": "reasoning", "id": "rs_1", "encrypted_content": None, "status": "completed"},
            }
        ),
    ],
    "id-less and null-id items": [
        item_added({"type": "message", "role": "assistant", "content": []}),
        item_added({"type": "message", "role": "assistant", "content": []}),
        item_added({**MSG, "id": None}),
        item_added({**MSG, "id": None, "status": "x"}),
    ],
    "numeric and string ids are distinct": [
        item_added({**MSG, "id": 1}),
        item_added({**MSG, "id": "1"}),
        item_added({**MSG, "id": 1.0}),
    ],
    "unmodelled item types leave no message": [
        item_added({"id": "x", "type": "web_search_call"}),
        item_added({"id": "y", "type": "mcp_call"}),
    ],
    "messages in first-touch order": [
        item_added(MSG, "m2"),
        user("hi", "u1"),
        item_added(FC, "m1"),
        item_added(RS, "m2"),
    ],
    "user message parts merge into one item": [user("a"), user("b"), user("c")],
    "user message role follows the last fold": [user("a", role="user"), user("b", role="assistant")],
    "user parts merge into an assistant output message of the same id": [
        item_added(MSG, "u1"),
        user("a", "u1"),
    ],
    "user message with several items": [
        inp(
            {
                "kind": "user-message",
                "message": {
                    "role": "user",
                    "items": [
                        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "1"}]},
                        {"type": "function_call_output", "call_id": "x", "output": "skip"},
                        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "2"}]},
                    ],
                },
            },
            "u1",
        )
    ],
    "regenerate and unknown inputs are no-ops": [
        inp({"kind": "regenerate", "target": "a", "parent": "b"}),
        inp({"kind": "mystery"}),
        out({"type": "response.completed"}),
        out({"type": "error"}),
    ],
    "content_part.added clones the part": [
        item_added(MSG),
        part_added(0, OUTPUT_TEXT),
        part_added(1, OUTPUT_TEXT),
        text_delta(0, "only zero"),
    ],
    "string content index addresses the slot": [
        item_added(MSG),
        part_added("0", OUTPUT_TEXT),
        text_delta(0, "A"),
        text_delta("00", "ignored"),
    ],
    "non-index content index is invisible": [
        item_added(MSG),
        part_added(-1, OUTPUT_TEXT),
        part_added(1.5, OUTPUT_TEXT),
        text_delta(-1, "x"),
    ],
    "huge content index (sparse in JS, dropped here: never visible either way)": [
        item_added(MSG),
        part_added(10**9, OUTPUT_TEXT),
        text_delta(10**9, "x"),
        part_added(0, OUTPUT_TEXT),
    ],
    "reasoning null content becomes an array": [
        item_added({**RS, "content": None}),
        part_added("x", {"type": "reasoning_text", "text": ""}, "rs_1"),
    ],
    # Runs of deltas (the fold's delta-run fast path) broken by whatever may change their target.
    "a delta run broken by a part replacing its slot": [
        item_added(MSG),
        part_added(0, OUTPUT_TEXT),
        text_delta(0, "a"),
        text_delta(0, "b"),
        part_added(0, OUTPUT_TEXT),
        text_delta(0, "c"),
        text_delta(0, "d"),
    ],
    "a delta run broken by done": [
        item_added(MSG),
        part_added(0, OUTPUT_TEXT),
        text_delta(0, "a"),
        out({"type": "response.output_text.done", "item_id": "msg_1", "content_index": 0, "text": "X"}),
        text_delta(0, "b"),
        text_delta(0, "c"),
    ],
    "deltas alternating between slots, items and messages": [
        item_added(MSG),
        item_added(MSG, "m2"),
        item_added(FC),
        part_added(0, OUTPUT_TEXT),
        part_added(1, OUTPUT_TEXT),
        out(part_added(0, OUTPUT_TEXT)["event"], "m2"),
        text_delta(0, "a"),
        text_delta(1, "b"),
        text_delta(0, "c"),
        out(text_delta(0, "d")["event"], "m2"),
        text_delta(0, "e"),
        out({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{"}),
        out({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "}"}),
        text_delta(0, "f"),
        out({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "!"}),
    ],
    "a delta run with a non-string delta, a false index and an equal message id": [
        item_added(MSG),
        part_added(0, OUTPUT_TEXT),
        text_delta(0, "a"),
        text_delta(0, 5),
        text_delta(0, "b"),
        text_delta(False, "x"),
        text_delta(0.0, "c"),
        out(text_delta(0, "d")["event"], "".join(["m", "1"])),
        out(text_delta(0, "y")["event"], "m9"),
        out(text_delta(0, "z")["event"], None),
        text_delta(0, "e"),
    ],
}


@pytest.fixture(scope="module")
def js_results(node):
    names = list(CASES)
    results = node.call("codec_decoder", "foldEventsBatch", cases=[CASES[n] for n in names])
    return dict(zip(names, results))


@pytest.mark.parametrize("name", list(CASES))
def test_fold_matches_reference(name, js_results):
    js = js_results[name]
    assert "error" not in js, js
    assert fold_events(CASES[name]) == js["messages"]


def msgs(name):
    return fold_events(CASES[name])


def only(name):
    (m,) = msgs(name)
    return m["message"]


def test_approval_sequences():
    m = only("approve then deny")
    assert m["toolCallStates"]["c1"] == {"approval": "denied", "name": "rm", "arguments": '{"p":"/"}'}
    assert m["items"][1] == {"type": "function_call_output", "call_id": "c1", "output": DENIED_TOOL_OUTPUT}
    m = only("deny then approve")
    assert m["toolCallStates"]["c1"]["approval"] == "approved"
    assert m["items"][1]["output"] == DENIED_TOOL_OUTPUT  # the rejection output stays
    assert only("request after approval resets to pending")["toolCallStates"]["c1"]["approval"] == "pending"
    m = only("result then error")
    assert m["items"][1:] == [{"type": "function_call_output", "call_id": "c1", "output": "boom"}]
    assert m["toolCallStates"] == {"c1": {"result": "failed"}}
    m = only("approve with reason then result")
    assert m["toolCallStates"]["c1"] == {
        "approval": "approved",
        "name": "rm",
        "arguments": '{"p":"/"}',
        "reason": "fine",
        "result": "ok",
    }
    assert only("deny with reason")["items"] == [
        {"type": "function_call_output", "call_id": "c1", "output": "not today"}
    ]
    m = only("deny with null reason")
    assert m["items"][0]["output"] == DENIED_TOOL_OUTPUT and m["toolCallStates"]["c1"]["reason"] is None


def test_upserts_and_appends():
    assert [
        i["output"] for i in only("upsert replaces the first server output with that call_id")["items"]
    ] == ["client", "server2"]
    assert [(i["call_id"], i["output"]) for i in only("upsert with other call ids in between")["items"]] == [
        ("a", "A failed"),
        ("b", "B"),
        ("c", "ok!"),
    ]
    assert msgs("tool result without message id is dropped") == []
    assert msgs("output without message id is dropped") == []


def test_holes_and_slots():
    assert only("holes in message content")["items"][0]["content"] == []
    assert [p["text"] for p in only("hole filled")["items"][0]["content"]] == ["A", "B"]
    assert only("reasoning content slot created and holed")["items"][0]["content"] == []
    s = only("summary slots")["items"][0]["summary"]
    assert s == [{"type": "summary_text", "text": "A"}, {"type": "summary_text", "text": "bB"}]
    assert (
        only("summary part without text concatenates like JS")["items"][0]["summary"][0]["text"]
        == "undefinedx"
    )
    m = only("delta on a missing slot or wrong type is a no-op")
    assert m["items"][0]["content"] == [{"type": "refusal", "refusal": "No!"}]
    m = only("wrong part type for the item is not slotted")
    assert m["items"][0]["content"] == [] and "content" not in m["items"][1]
    assert only("content_part.added clones the part")["items"][0]["content"][1]["text"] == ""
    assert only("string content index addresses the slot")["items"][0]["content"][0]["text"] == "A"
    assert only("non-index content index is invisible")["items"][0]["content"] == []
    assert only("reasoning null content becomes an array")["items"][0]["content"] == []


def test_delta_runs():
    def texts(name, index=0):
        return [m["message"]["items"][index]["content"] for m in msgs(name)]

    assert texts("a delta run broken by a part replacing its slot") == [[{**OUTPUT_TEXT, "text": "cd"}]]
    assert texts("a delta run broken by done") == [[{**OUTPUT_TEXT, "text": "Xbc"}]]
    m1, m2 = msgs("deltas alternating between slots, items and messages")
    assert [p["text"] for p in m1["message"]["items"][0]["content"]] == ["acef", "b"]
    assert m1["message"]["items"][1]["arguments"] == "{}!"
    assert [p["text"] for p in m2["message"]["items"][0]["content"]] == ["d"]
    (m,) = msgs("a delta run with a non-string delta, a false index and an equal message id")
    assert m["message"]["items"][0]["content"] == [{**OUTPUT_TEXT, "text": "a5bcde"}]


def test_reading_between_deltas_of_a_run():
    state = reducer.init()
    for step in [item_added(MSG), part_added(0, OUTPUT_TEXT), text_delta(0, "a"), text_delta(0, "b")]:
        reducer.fold(state, step["direction"], step["event"], step["messageId"])
    texts = []
    for delta in "cde":
        texts.append(reducer.get_messages(state)[0].message.items[0]["content"][0]["text"])
        reducer.fold(state, "output", text_delta(0, delta)["event"], "m1")
    texts.append(reducer.get_messages(state)[0].message.items[0]["content"][0]["text"])
    assert texts == ["ab", "abc", "abcd", "abcde"]


def test_items():
    assert only("function call arguments")["items"][0]["arguments"] == '{"a":1}'
    assert only("function call arguments")["items"][0]["status"] == "completed"
    assert only("function call arguments done replaces")["items"][0]["arguments"] == "{}"
    c = only("logprobs only onto existing output_text slots")["items"][0]["content"]
    assert c[0]["logprobs"] == [{"t": 1}] and "logprobs" not in c[1] and len(c) == 2
    assert "status" not in only("done without status removes it")["items"][0]
    assert only("done without id is ignored")["items"][0]["status"] == "in_progress"
    assert only("done in another message is ignored")["items"][0]["status"] == "in_progress"
    assert (
        only("reasoning encrypted_content only when a string")["items"][0]["encrypted_content"]
        == "from-added"
    )
    assert len(only("id-less and null-id items")["items"]) == 3  # two id-less, one null id (kept once)
    assert len(only("numeric and string ids are distinct")["items"]) == 2  # 1 and 1.0 are the same JS number
    assert msgs("unmodelled item types leave no message") == []
    assert [m["codecMessageId"] for m in msgs("messages in first-touch order")] == ["m2", "u1", "m1"]
    assert msgs("regenerate and unknown inputs are no-ops") == []


def test_user_messages():
    m = only("user message parts merge into one item")
    assert m == {
        "role": "user",
        "items": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t} for t in "abc"]}
        ],
    }
    assert only("user message role follows the last fold")["role"] == "assistant"
    m = only("user parts merge into an assistant output message of the same id")
    assert m["items"][0]["id"] == "msg_1" and m["items"][0]["content"] == [
        {"type": "input_text", "text": "a"}
    ]
    m = only("user message with several items")
    assert [p["text"] for p in m["items"][0]["content"]] == ["1", "2"] and len(m["items"]) == 1


def test_get_messages_returns_codec_messages_and_copies_states():
    state = reducer.init()
    reducer.fold(state, "output", approval_request()["event"], "m1")
    got = reducer.get_messages(state)
    assert got == [
        CodecMessage(
            "m1",
            OpenAIMessage(
                "assistant", [], {"c1": {"approval": "pending", "name": "rm", "arguments": '{"p":"/"}'}}
            ),
        )
    ]
    got[0].message.tool_call_states["c1"]["approval"] = "mutated"
    assert reducer.get_messages(state)[0].message.tool_call_states["c1"]["approval"] == "pending"
    assert "toolCallStates" not in CodecMessage("x", OpenAIMessage("assistant", [])).to_dict()["message"]


def test_fold_returns_the_state_and_ignores_junk(caplog):
    state = reducer.init()
    assert reducer.fold(state, "output", {"type": "response.output_item.added"}, "m1") is state
    for junk in [
        None,
        5,
        "x",
        [],
        {"type": 5},
        {"kind": None},
        {"type": "response.output_item.done", "item": 3},
        {"type": "response.output_item.added", "item": {"type": ["message"], "id": "i1"}},  # unhashable type
        {"type": "response.output_item.added", "item": {"type": {}, "id": "i1"}},
    ]:
        assert reducer.fold(state, "output", junk, "m1") is state  # type: ignore[arg-type]
        assert reducer.fold(state, "input", junk, "m1") is state  # type: ignore[arg-type]
    for ev in [
        {"kind": "tool-result", "payload": None},
        {"kind": "user-message", "message": {"role": "user", "items": "nope"}},
        {"kind": "user-message"},
    ]:
        reducer.fold(state, "input", ev, "m1")
    assert [m.to_dict() for m in reducer.get_messages(state)] in (
        [],
        [{"codecMessageId": "m1", "message": {"role": "user", "items": []}}],
    )
    assert "skipping" in caplog.text
