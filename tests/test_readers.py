"""The four readers: conformance with @ably/ai-transport@0.8.0 in node, properties, bad input."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_transport import (
    AITransportError,
    OpenAIMessage,
    approved_unexecuted_calls,
    resolved_call_ids,
    to_responses_input,
    unanswered_calls,
)
from ai_transport.readers import CallIdSet

# ---------------------------------------------------------------------------------------------
# Builders


def call(call_id, name="get_weather", args='{"city":"Paris"}', item_id=None):
    item = {"type": "function_call", "call_id": call_id, "name": name, "arguments": args}
    if item_id:
        item["id"] = item_id
    return item


def output(call_id, text="ok"):
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def text(t="hi"):
    return {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": t, "annotations": []}],
    }


def user(t="hello"):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}


def msg(role, items, states=None):
    m = {"role": role, "items": items}
    if states is not None:
        m["toolCallStates"] = states
    return m


def positions(messages, found):
    where = {}
    for i, m in enumerate(messages):
        for j, it in enumerate(m["items"]):
            where[id(it)] = [i, j]
    return [where[id(x)] for x in found]


def ours(messages):
    return {
        "toResponsesInput": positions(messages, to_responses_input(messages)),
        "resolvedCallIds": list(resolved_call_ids(messages)),
        "unansweredCalls": positions(messages, unanswered_calls(messages)),
        "approvedUnexecutedCalls": positions(messages, approved_unexecuted_calls(messages)),
    }


# Every row of the reference's reader table (§7), plus the edge cases it names.
EDGE_CASES = {
    "output in same message": [msg("assistant", [call("c1"), output("c1")])],
    "output in a later user message": [
        msg("assistant", [call("c1")], {"c1": {"approval": "pending"}}),
        msg("user", [output("c1")]),
    ],
    "output before the call": [msg("user", [output("c1")]), msg("assistant", [call("c1")])],
    "orphan output (no call)": [msg("user", [output("zzz")])],
    "approved, no output": [msg("assistant", [call("c1")], {"c1": {"approval": "approved"}})],
    "denied with rejection output": [
        msg(
            "assistant",
            [call("c1"), output("c1", "Tool execution was not approved.")],
            {"c1": {"approval": "denied"}},
        )
    ],
    "denied, no output (hand-built)": [msg("assistant", [call("c1")], {"c1": {"approval": "denied"}})],
    "pending": [msg("assistant", [call("c1")], {"c1": {"approval": "pending", "name": "x"}})],
    "no state (client tool)": [msg("assistant", [call("c1")])],
    "result ok state but no output item": [msg("assistant", [call("c1")], {"c1": {"result": "ok"}})],
    "approval only on a different message": [
        msg("assistant", [call("c1")]),
        msg("assistant", [], {"c1": {"approval": "approved"}}),
    ],
    "same call id in two messages, approved in each": [
        msg("assistant", [call("c1")], {"c1": {"approval": "approved"}}),
        msg("assistant", [call("c1")], {"c1": {"approval": "approved"}}),
    ],
    "same call id in two messages, approved in one": [
        msg("assistant", [call("c1")], {"c1": {"approval": "approved"}}),
        msg("assistant", [call("c1")]),
    ],
    "states but no items": [msg("assistant", [], {"c1": {"approval": "approved"}})],
    "empty list": [],
    "empty message": [msg("assistant", [])],
    "deny then approve keeps the rejection output": [
        msg("assistant", [call("c1"), output("c1", "no")], {"c1": {"approval": "approved"}})
    ],
    "mixed parallel calls": [
        msg("user", [user()]),
        msg(
            "assistant",
            [text(), call("a"), call("b"), call("c"), call("d")],
            {"a": {"approval": "approved"}, "b": {"approval": "denied"}, "c": {"approval": "pending"}},
        ),
        msg("user", [output("b", "Tool execution was not approved.")]),
    ],
    "output without call_id": [msg("assistant", [call("c1"), {"type": "function_call_output", "output": "x"}])],
    "call without call_id resolved by id-less output": [
        msg("assistant", [{"type": "function_call", "name": "f", "arguments": "{}"}]),
        msg("user", [{"type": "function_call_output", "output": "x"}]),
    ],
    "unknown item types pass through": [
        msg("assistant", [{"type": "reasoning", "id": "rs_1", "summary": []}, {"type": "web_search_call", "id": "ws"}])
    ],
    "resolved order is insertion order": [
        msg("user", [output("z"), output("a"), output("m"), output("a")]),
    ],
}


@pytest.mark.js
@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_readers_match_js_on_edge_cases(node, name):
    messages = EDGE_CASES[name]
    assert ours(messages) == node.call("readers", "readers", messages=messages)


def test_reference_table_semantics():
    """The table in the reference, asserted directly (independent of node)."""
    e = EDGE_CASES
    assert unanswered_calls(e["approved, no output"]) == []
    assert approved_unexecuted_calls(e["approved, no output"]) == [e["approved, no output"][0]["items"][0]]
    assert unanswered_calls(e["denied, no output (hand-built)"]) == [call("c1")]
    assert unanswered_calls(e["result ok state but no output item"]) == [call("c1")]
    assert unanswered_calls(e["approval only on a different message"]) == [call("c1")]
    assert approved_unexecuted_calls(e["approval only on a different message"]) == []
    assert len(approved_unexecuted_calls(e["same call id in two messages, approved in each"])) == 2
    assert unanswered_calls(e["output before the call"]) == []
    assert list(resolved_call_ids(e["resolved order is insertion order"])) == ["z", "a", "m"]
    for reader in (unanswered_calls, approved_unexecuted_calls, to_responses_input):
        assert reader([]) == []
        assert reader(e["states but no items"]) == []


# ---------------------------------------------------------------------------------------------
# Generated conversations: a small call-id pool so collisions, outputs before calls, states on
# other messages and duplicate calls all occur.

CALL_IDS = st.sampled_from(["c1", "c2", "c3", "c4"])

items_st = st.one_of(
    st.builds(call, CALL_IDS),
    st.builds(output, CALL_IDS),
    st.just(None).map(lambda _: text()),
    st.just(None).map(lambda _: user()),
    st.just(None).map(lambda _: {"type": "reasoning", "id": "rs_x", "summary": []}),
)
state_st = st.fixed_dictionaries(
    {},
    optional={
        "approval": st.sampled_from(["pending", "approved", "denied"]),
        "result": st.sampled_from(["ok", "failed"]),
        "reason": st.text(max_size=5),
    },
)
message_st = st.builds(
    lambda role, items, states: msg(role, items, states or None),
    st.sampled_from(["user", "assistant"]),
    st.lists(items_st, max_size=6),
    st.dictionaries(CALL_IDS, state_st, max_size=3),
)
conversation_st = st.lists(message_st, max_size=6)


@pytest.mark.js
@given(st.lists(conversation_st, min_size=1, max_size=8))
def test_readers_match_js_on_generated_conversations(node, conversations):
    theirs = node.call("readers", "readersBatch", cases=conversations)
    assert [ours(c) for c in conversations] == theirs


@given(conversation_st)
def test_every_call_is_in_exactly_one_bucket(messages):
    resolved = resolved_call_ids(messages)
    unanswered = {id(x) for x in unanswered_calls(messages)}
    approved = {id(x) for x in approved_unexecuted_calls(messages)}
    for m in messages:
        for it in m["items"]:
            if it["type"] != "function_call":
                continue
            buckets = [it["call_id"] in resolved, id(it) in unanswered, id(it) in approved]
            assert sum(buckets) == 1, (it, buckets)


@given(conversation_st)
def test_to_responses_input_preserves_identity_and_order(messages):
    flat = to_responses_input(messages)
    expected = [it for m in messages for it in m["items"]]
    assert len(flat) == len(expected)
    assert all(a is b for a, b in zip(flat, expected))


@given(conversation_st, st.data())
def test_readers_invariant_to_splitting_and_merging_stateless_messages(messages, data):
    """Messages without tool call states can be split or merged without changing any reader."""
    stateless = [msg(m["role"], m["items"]) for m in messages]
    merged = [msg("assistant", [it for m in stateless for it in m["items"]])]
    # split every message at a random point
    split = []
    for m in stateless:
        k = data.draw(st.integers(0, len(m["items"])))
        split += [msg(m["role"], m["items"][:k]), msg(m["role"], m["items"][k:])]
    base = ours(stateless)
    for variant in (merged, split):
        assert to_responses_input(variant) == to_responses_input(stateless)
        assert list(resolved_call_ids(variant)) == base["resolvedCallIds"]
        assert [id(x) for x in unanswered_calls(variant)] == [id(x) for x in unanswered_calls(stateless)]
        assert approved_unexecuted_calls(variant) == []


@given(conversation_st)
def test_readers_accept_openai_message_objects_and_dicts_alike(messages):
    objs = [OpenAIMessage.from_dict(m) for m in messages]
    assert ours_objs(objs) == ours(messages)
    # from_dict keeps the very item objects, and to_dict round-trips
    for m, o in zip(messages, objs):
        assert o.items is m["items"]
        d = o.to_dict()
        assert d["items"] == m["items"]
        if m.get("toolCallStates"):
            assert d["toolCallStates"] == m["toolCallStates"]
        else:
            assert "toolCallStates" not in d


def ours_objs(objs):
    as_dicts = [o.to_dict() for o in objs]
    return {
        "toResponsesInput": positions(as_dicts, to_responses_input(objs)),
        "resolvedCallIds": list(resolved_call_ids(objs)),
        "unansweredCalls": positions(as_dicts, unanswered_calls(objs)),
        "approvedUnexecutedCalls": positions(as_dicts, approved_unexecuted_calls(objs)),
    }


@given(conversation_st)
def test_readers_do_not_mutate_input(messages):
    before = copy.deepcopy(messages)
    ours(messages)
    assert messages == before


def test_resolved_call_ids_is_an_insertion_ordered_set():
    ids = resolved_call_ids([msg("user", [output("b"), output("a"), output("b")])])
    assert isinstance(ids, set)
    assert ids == {"a", "b"}
    assert list(ids) == ["b", "a"]
    ids.add("c")
    ids.discard("b")
    assert list(ids) == ["a", "c"] and ids == {"a", "c"}
    assert CallIdSet(["x", "y"]) == {"y", "x"}


def test_large_conversation_is_linear():
    """200k items across 20k messages complete (a quadratic reader would not in this suite's time)."""
    messages = []
    for i in range(20_000):
        cid = f"call_{i}"
        items = [text(), call(cid)] + [output(cid)] * (i % 2) + [user()] * 7
        states = {cid: {"approval": "approved"}} if i % 3 == 0 else None
        messages.append(msg("assistant", items, states))
    assert len(to_responses_input(messages)) == sum(len(m["items"]) for m in messages)
    assert len(resolved_call_ids(messages)) == 10_000
    n_open = len(unanswered_calls(messages)) + len(approved_unexecuted_calls(messages))
    assert n_open == 10_000


# ---------------------------------------------------------------------------------------------
# Bad input: a clear error naming the field, subclass of both the library error and the builtin.


@pytest.mark.parametrize(
    "messages, field, exc",
    [
        (None, "messages", TypeError),
        ("abc", "messages", TypeError),
        ({"role": "user", "items": []}, "messages", TypeError),
        ([42], "messages[0]", TypeError),
        ([msg("user", [])] + [{"role": "user"}], "messages[1].items", TypeError),
        ([{"role": "user", "items": "x"}], "messages[0].items", TypeError),
        ([msg("user", [output("a"), 7])], "messages[0].items[1]", TypeError),
        ([{"role": "user", "items": [], "toolCallStates": []}], "messages[0].toolCallStates", TypeError),
    ],
)
@pytest.mark.parametrize(
    "reader", [to_responses_input, resolved_call_ids, unanswered_calls, approved_unexecuted_calls]
)
def test_bad_input_raises_clear_error(reader, messages, field, exc):
    with pytest.raises(exc) as info:
        reader(messages)
    assert isinstance(info.value, AITransportError)
    assert info.value.code == 40003
    assert field in str(info.value)


@pytest.mark.parametrize(
    "d, field, exc",
    [
        ([], "message", TypeError),
        ({"role": 3, "items": []}, "message.role", TypeError),
        ({"role": "system", "items": []}, "message.role", ValueError),
        ({"role": "user"}, "message.items", TypeError),
        ({"role": "user", "items": [1]}, "message.items[0]", TypeError),
        ({"role": "user", "items": [], "toolCallStates": {"c": 1}}, "message.toolCallStates['c']", TypeError),
    ],
)
def test_openai_message_from_dict_rejects_bad_shapes(d, field, exc):
    with pytest.raises(exc) as info:
        OpenAIMessage.from_dict(d)
    assert isinstance(info.value, AITransportError)
    assert field in str(info.value)


def test_openai_message_round_trip_is_json_identical():
    d = {"role": "assistant", "items": [call("c1"), {"type": "x", "future_field": [1, {"a": None}]}],
         "toolCallStates": {"c1": {"approval": "pending", "name": "get_weather", "arguments": "{}"}}}
    assert json.dumps(OpenAIMessage.from_dict(d).to_dict()) == json.dumps(d)
