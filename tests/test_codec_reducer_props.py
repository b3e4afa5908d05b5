"""Reducer properties (Hypothesis), independent of the reference.

* reading the projection (``get_messages``) at any point changes nothing: folding with reads in
  between gives what a fresh fold of the same prefix gives (streamed text is joined lazily);
* a deep copy of a state is independent of the original;
* the fold is linear: the same fold over a message of N items touches O(1) per event (checked by
  counting, not timing: the per-message indexes stay in step with ``items``).
"""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st
from support_codec_decoder import fold_sequences

from ai_transport.codec import reducer


def _fold(steps):
    state = reducer.init()
    for s in steps:
        reducer.fold(state, s["direction"], s["event"], s.get("messageId"))
    return state


def _dicts(state):
    return [m.to_dict() for m in reducer.get_messages(state)]


@given(fold_sequences(), st.data())
def test_reading_between_folds_changes_nothing(steps, data):
    reads = sorted(data.draw(st.sets(st.integers(0, len(steps)), max_size=5), label="read points"))
    state = reducer.init()
    for i, s in enumerate(steps):
        if i in reads:
            assert copy.deepcopy(_dicts(state)) == _dicts(_fold(steps[:i]))
        reducer.fold(state, s["direction"], s["event"], s.get("messageId"))
    assert _dicts(state) == _dicts(_fold(steps))


@given(fold_sequences(), st.data())
def test_deep_copied_state_is_independent(steps, data):
    k = data.draw(st.integers(0, len(steps)), label="copy point")
    state = _fold(steps[:k])
    clone = copy.deepcopy(state)
    for s in steps[k:]:
        reducer.fold(clone, s["direction"], s["event"], s.get("messageId"))
    assert _dicts(state) == _dicts(_fold(steps[:k]))
    assert _dicts(clone) == _dicts(_fold(steps))


def test_long_stream_accumulates_every_delta():
    state = reducer.init()
    fold = reducer.fold
    fold(
        state,
        "output",
        {"type": "response.output_item.added", "item": {"id": "m", "type": "message", "content": []}},
        "m1",
    )
    fold(
        state,
        "output",
        {
            "type": "response.content_part.added",
            "item_id": "m",
            "content_index": 0,
            "part": {"type": "output_text", "text": ""},
        },
        "m1",
    )
    for i in range(50_000):
        fold(
            state,
            "output",
            {"type": "response.output_text.delta", "item_id": "m", "content_index": 0, "delta": str(i % 10)},
            "m1",
        )
        if i == 25_000:
            assert len(reducer.get_messages(state)[0].message.items[0]["content"][0]["text"]) == 25_001
    text = reducer.get_messages(state)[0].message.items[0]["content"][0]["text"]
    assert text == "".join(str(i % 10) for i in range(50_000))
    fold(
        state,
        "output",
        {"type": "response.output_text.done", "item_id": "m", "content_index": 0, "text": "final"},
        "m1",
    )
    assert reducer.get_messages(state)[0].message.items[0]["content"][0]["text"] == "final"


def test_indexes_stay_in_step_with_items():
    state = reducer.init()
    n = 20_000
    for i in range(n):
        reducer.fold(
            state,
            "output",
            {
                "type": "response.output_item.added",
                "item": {"id": f"fc{i}", "type": "function_call", "arguments": ""},
            },
            "m1",
        )
        reducer.fold(
            state, "input", {"kind": "tool-result", "payload": {"call_id": f"c{i}", "output": i}}, "m1"
        )
    entry = state._messages[state._by_id["m1"]]
    assert len(entry.by_item_id) == n and len(entry.outputs_by_call) == n and len(entry.items) == 2 * n
    # an upsert lands on the indexed item, wherever it is
    reducer.fold(
        state, "input", {"kind": "tool-result-error", "payload": {"call_id": "c7", "message": "boom"}}, "m1"
    )
    assert entry.items[15] == {"type": "function_call_output", "call_id": "c7", "output": "boom"}


def test_pickled_state_round_trips_mid_stream():
    import pickle

    state = reducer.init()
    reducer.fold(
        state,
        "output",
        {"type": "response.output_item.added", "item": {"id": 1, "type": "message", "content": []}},
        "m1",
    )
    reducer.fold(
        state,
        "output",
        {
            "type": "response.content_part.added",
            "item_id": 1,
            "content_index": 2,
            "part": {"type": "output_text", "text": ""},
        },
        "m1",
    )
    reducer.fold(
        state,
        "output",
        {"type": "response.output_text.delta", "item_id": 1, "content_index": 2, "delta": "a"},
        "m1",
    )
    reducer.fold(
        state,
        "output",
        {"type": "response.output_text.delta", "item_id": 1, "content_index": 2, "delta": "b"},
        "m1",
    )
    copy_ = pickle.loads(pickle.dumps(state))
    for s in (state, copy_):
        reducer.fold(
            s,
            "output",
            {
                "type": "response.content_part.added",
                "item_id": 1,
                "content_index": 0,
                "part": {"type": "refusal", "refusal": ""},
            },
            "m1",
        )
        reducer.fold(
            s,
            "output",
            {
                "type": "response.content_part.added",
                "item_id": 1.0,
                "content_index": 1,
                "part": {"type": "output_text", "text": ""},
            },
            "m1",
        )
        reducer.fold(
            s,
            "output",
            {"type": "response.output_text.delta", "item_id": 1, "content_index": 2, "delta": "c"},
            "m1",
        )
    assert _dicts(copy_) == _dicts(state)
    assert _dicts(state)[0]["message"]["items"][0]["content"][2]["text"] == "abc"


# ---------------------------------------------------------------------------------------------
# Loosely-shaped events vs the reference (where the reference does not throw)

_IDS = st.sampled_from(["a", "b", 1, None])
_INDEX = st.sampled_from([0, 1, 2, "0", "1", -1, 1.5, None, True, "x"])
_TEXTISH = st.one_of(st.sampled_from(["", "x", "yz"]), st.integers(0, 3), st.none())
_PART = st.fixed_dictionaries(
    {"type": st.sampled_from(["output_text", "refusal", "reasoning_text", "summary_text", "other"])},
    optional={"text": _TEXTISH, "refusal": _TEXTISH},
)
_ITEM = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["message", "reasoning", "function_call", "function_call_output", "web_search_call"]
        )
    },
    optional={
        "id": _IDS,
        "content": st.one_of(st.just([]), st.lists(_PART, max_size=2), st.none()),
        "summary": st.one_of(st.just([]), st.lists(_PART, max_size=2)),
        "arguments": _TEXTISH,
        "status": st.sampled_from(["in_progress", "completed"]),
        "call_id": st.sampled_from(["c1", "c2"]),
        "encrypted_content": st.one_of(st.just("blob"), st.none()),
    },
)
_OUTPUT_TYPES = [
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.refusal.delta",
    "response.refusal.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "function_call_output",
    "tool-approval-request",
]


@st.composite
def loose_output(draw):
    ev = {"type": draw(st.sampled_from(_OUTPUT_TYPES))}
    for key, strat in (
        ("item", _ITEM),
        ("item_id", _IDS),
        ("content_index", _INDEX),
        ("summary_index", _INDEX),
        ("part", _PART),
        ("delta", _TEXTISH),
        ("text", _TEXTISH),
        ("refusal", _TEXTISH),
        ("arguments", _TEXTISH),
        ("call_id", st.sampled_from(["c1", "c2"])),
        ("name", st.just("tool")),
    ):
        if draw(st.booleans()):
            ev[key] = draw(strat)
    return {"direction": "output", "event": ev, "messageId": draw(st.sampled_from(["m1", "m2"]))}


@st.composite
def loose_input(draw):
    kind = draw(
        st.sampled_from(
            ["user-message", "tool-result", "tool-result-error", "tool-approval-response", "regenerate"]
        )
    )
    ev: dict = {"kind": kind}
    if kind == "user-message":
        ev["message"] = {
            "role": draw(st.sampled_from(["user", "assistant"])),
            "items": draw(
                st.lists(
                    st.fixed_dictionaries(
                        {"type": st.just("message"), "content": st.lists(_PART, max_size=2)}
                    ),
                    max_size=2,
                )
            ),
        }
    else:
        payload = {"call_id": draw(st.sampled_from(["c1", "c2"]))}
        for key, strat in (
            ("output", _TEXTISH),
            ("message", _TEXTISH),
            ("approved", st.sampled_from([True, False, 0, 1, "", "x"])),
            ("reason", _TEXTISH),
        ):
            if draw(st.booleans()):
                payload[key] = draw(strat)
        ev["payload"] = payload
    return {"direction": "input", "event": ev, "messageId": draw(st.sampled_from(["m1", "m2"]))}


@given(st.lists(st.one_of(loose_output(), loose_input()), max_size=14))
def test_loose_events_fold_like_reference(node, steps):
    from support_codec_decoder import fold_events

    js = node.call("codec_decoder", "foldEvents", events=steps)
    ours = fold_events(steps)  # never raises
    if "error" not in js:
        assert ours == js["messages"]
