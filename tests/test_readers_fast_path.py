"""The call readers' plain-input fast paths against the general path and a naive reference.

``resolved_call_ids``/``unanswered_calls``/``approved_unexecuted_calls`` take a fast path when every
message is a plain ``dict`` or an ``OpenAIMessage`` and fall back to the general (message by
message) path otherwise, or when an item is bad. Both must give the same result or raise the same
error for any input, including mixed, odd and invalid shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ai_transport import OpenAIMessage, approved_unexecuted_calls, resolved_call_ids, unanswered_calls
from ai_transport.readers import calls as calls_module

CALL_IDS = st.one_of(st.sampled_from(["c1", "c2", "c3"]), st.just(None), st.just(7))
ODD_CALL_IDS = st.one_of(CALL_IDS, st.just(["unhashable"]))


class DictSub(dict):
    """A dict subclass: not the plain fast-path type, still a valid message or item."""


def _item(kind: str, call_id: Any, with_id: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"type": kind}
    if with_id:
        item["call_id"] = call_id
    return item


item_st = st.one_of(
    st.builds(_item, st.sampled_from(["function_call", "function_call_output"]), CALL_IDS, st.booleans()),
    st.builds(lambda: {"type": "message", "role": "user", "content": []}),
    st.builds(lambda: {"id": "no type"}),
)
odd_item_st = st.one_of(
    item_st,
    st.builds(_item, st.sampled_from(["function_call", "function_call_output"]), ODD_CALL_IDS, st.just(True)),
    item_st.map(DictSub),
    item_st.map(MappingProxyType),
    st.sampled_from([None, 3, "x", ["a"]]),
)
state_st = st.one_of(
    st.fixed_dictionaries({}, optional={"approval": st.sampled_from(["pending", "approved", "denied"])}),
    st.just(MappingProxyType({"approval": "approved"})),
    st.sampled_from([None, "approved", 1]),
)
states_st = st.dictionaries(st.sampled_from(["c1", "c2", "c3"]), state_st, max_size=3)


def _message(kind: str, items: list[Any], states: dict[str, Any], key: str) -> Any:
    if kind == "object":
        return OpenAIMessage("assistant", items, states)
    m: dict[str, Any] = {"role": "assistant", "items": items}
    if key:
        m[key] = states
    if kind == "proxy":
        return MappingProxyType(m)
    if kind == "sub":
        return DictSub(m)
    return m


KEYS = st.sampled_from(["toolCallStates", "tool_call_states", ""])
plain_message_st = st.builds(
    _message, st.sampled_from(["dict", "dict", "object"]), st.lists(item_st, max_size=6), states_st, KEYS
)
odd_message_st = st.one_of(
    st.builds(
        _message,
        st.sampled_from(["dict", "object", "proxy", "sub"]),
        st.lists(odd_item_st, max_size=6),
        states_st,
        KEYS,
    ),
    st.sampled_from([None, 5, "msg"]),
    st.builds(lambda: {"items": "not a list"}),
    st.builds(lambda: {"items": [], "toolCallStates": ["not", "a", "map"]}),
    st.builds(lambda: {"items": ({"type": "function_call", "call_id": "c1"},)}),
)


def _outcome(fn: Any, messages: list[Any], by_identity: bool = True) -> Any:
    try:
        result = fn(messages)
    except Exception as e:  # the error itself is the outcome compared
        return ("raised", type(e), str(e))
    return ("ok", [id(x) for x in result] if by_identity else list(result))


def _general(approved: bool | None) -> Any:
    if approved is None:
        return lambda ms: list(calls_module._resolved_general(ms))
    return lambda ms: calls_module._open_calls_general(ms, approved)


@given(st.lists(st.one_of(plain_message_st, odd_message_st), max_size=6))
def test_fast_paths_equal_the_general_path_on_any_input(messages):
    assert _outcome(resolved_call_ids, messages, False) == _outcome(_general(None), messages, False)
    assert _outcome(unanswered_calls, messages) == _outcome(_general(False), messages)
    assert _outcome(approved_unexecuted_calls, messages) == _outcome(_general(True), messages)


def _naive(messages: list[Any]) -> tuple[list[Any], list[int], list[int]]:
    """The 0.8.0 semantics written plainly, for valid input only."""
    parts = []
    for m in messages:
        if isinstance(m, OpenAIMessage):
            parts.append((m.items, m.tool_call_states))
        else:
            states = m.get("toolCallStates")
            parts.append((m["items"], states if states is not None else m.get("tool_call_states") or {}))
    resolved = []
    for items, _ in parts:
        for it in items:
            if it.get("type") == "function_call_output" and it.get("call_id") not in resolved:
                resolved.append(it.get("call_id"))
    unanswered, approved = [], []
    for items, states in parts:
        for it in items:
            if it.get("type") != "function_call" or it.get("call_id") in resolved:
                continue
            cid = it.get("call_id")
            state = states.get(cid) if isinstance(cid, str) else None
            ok = isinstance(state, Mapping) and state.get("approval") == "approved"
            (approved if ok else unanswered).append(id(it))
    return resolved, unanswered, approved


@given(st.lists(plain_message_st, max_size=8))
def test_fast_paths_equal_a_naive_reference_on_plain_input(messages):
    resolved, unanswered, approved = _naive(messages)
    assert list(resolved_call_ids(messages)) == resolved
    assert [id(x) for x in unanswered_calls(messages)] == unanswered
    assert [id(x) for x in approved_unexecuted_calls(messages)] == approved
