"""What the Responses reducer keeps per message that the cyclic GC tracks (issue 21).

A woken worker folds its whole history into one projection per node and keeps them for the
session: every GC-tracked object of that state is scanned by each collection the wake-up runs.
So the state private to the reducer holds its indexes as dicts of atoms (positions, not the
objects), which the GC does not track. Structural checks (timings: ``benchmarks/``); what a caller
reads is checked by the reducer's case and property tests.
"""

from __future__ import annotations

import gc
from typing import Any

from ai_transport.codec.responses.reducer import fold, get_messages, init


def _usual_turn() -> tuple[Any, Any]:
    """A prompt's projection and its answer's (one streamed output_text message)."""
    prompt = init()
    fold(
        prompt,
        "input",
        {"kind": "user-message", "message": {"role": "user", "items": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ]}},
        "m-in",
    )
    answer = init()
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    for event in (
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0, "part": part},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "He"},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "llo"},
        {"type": "response.output_item.done", "output_index": 0, "item": dict(item, status="completed")},
    ):
        fold(answer, "output", event, "m-out")
    return prompt, answer


def test_the_message_and_item_indexes_are_untracked() -> None:
    prompt, answer = _usual_turn()
    gc.collect()
    for state in (prompt, answer):
        assert state._by_id and not gc.is_tracked(state._by_id)  # positions in _messages
        for entry in state._messages:
            assert not gc.is_tracked(entry.by_item_id)
    assert answer._messages[0].by_item_id  # the answer's item is indexed (by its position)
    [message] = get_messages(answer)
    assert message.message.items[0]["status"] == "completed"
    assert message.message.items[0]["content"][0]["text"] == "Hello"


def _stream(state: Any, *deltas: str, done: bool = False) -> None:
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []}
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    ids = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    fold(state, "output", {"type": "response.output_item.added", "output_index": 0, "item": item}, "m")
    fold(state, "output", {"type": "response.content_part.added", **ids, "part": part}, "m")
    for delta in deltas:
        fold(state, "output", {"type": "response.output_text.delta", **ids, "delta": delta}, "m")
    if done:
        fold(state, "output", {"type": "response.output_text.done", **ids, "text": "".join(deltas)}, "m")


def test_a_parts_first_delta_is_assigned_not_kept_pending() -> None:
    state = init()
    _stream(state, "He")
    assert not state._pending  # nothing to join: the part's text is the delta
    assert state._messages[0].items[0]["content"][0]["text"] == "He"
    _stream(state, "llo")  # (re-added: the first copy is kept, the part re-seeded) then one more delta
    _stream(state, "", "He", "llo")
    assert get_messages(state)[0].message.items[0]["content"][0]["text"] == "Hello"


def test_the_emptied_pending_text_index_is_a_fresh_untracked_dict() -> None:
    # (no gc.collect(): a full collection untracks an emptied dict, but a wake-up runs young ones)
    replaced = init()
    _stream(replaced, "He", "llo", done=True)  # chunks pending, then dropped by the .done
    assert not replaced._pending and not gc.is_tracked(replaced._pending)
    flushed = init()
    _stream(flushed, "He", "llo")
    assert flushed._pending and gc.is_tracked(flushed._pending)
    get_messages(flushed)  # joins them
    assert not flushed._pending and not gc.is_tracked(flushed._pending)
    assert get_messages(flushed)[0].message.items[0]["content"][0]["text"] == "Hello"


def test_a_message_in_progress_is_one_tracked_object_with_its_items() -> None:
    prompt, answer = _usual_turn()
    for state in (prompt, answer):
        [entry] = state._messages
        tracked = [o for o in gc.get_referents(entry) if gc.is_tracked(o) and not isinstance(o, type)]
        # its items and (the prompt) the input message it merges into: no separate list of them
        assert all(type(o) is dict for o in tracked)
        assert list(entry) == get_messages(state)[0].message.items
    first, second = init(), init()
    for state in (first, second):
        _stream(state, "same")
    # identity, as a record: two messages with equal items are not one
    assert first._messages[0] == first._messages[0] and first._messages[0] != second._messages[0]
    assert len({first._messages[0], second._messages[0]}) == 2  # (hashed by identity too)


def test_a_projection_is_one_tracked_object_with_its_messages() -> None:
    import copy
    import pickle

    prompt, answer = _usual_turn()
    for state in (prompt, answer):
        get_messages(state)  # (joins the answer's pending text: nothing left beside the messages)
        tracked = [o for o in gc.get_referents(state) if gc.is_tracked(o) and not isinstance(o, type)]
        assert tracked == list(state._messages)  # its messages, no list of them beside it
        for again in (copy.deepcopy(state), pickle.loads(pickle.dumps(state))):
            assert [m.to_dict() for m in get_messages(again)] == [m.to_dict() for m in get_messages(state)]
            assert again != state and again == again  # compared by identity, as a record is
    assert len(prompt) == len(answer) == 1 and len({prompt, answer}) == 2
    assert not init() and repr(answer) == "ReducerState(messages=1)"


def test_a_vercel_projection_keeps_its_index_and_idle_buffers_untracked() -> None:
    from ai_transport.codec.vercel import UIMessageCodec

    state = UIMessageCodec.init()
    fold = UIMessageCodec.fold
    for chunk in (
        {"type": "start"},
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "He"},
        {"type": "text-delta", "id": "t1", "delta": "llo"},
        {"type": "text-end", "id": "t1"},
        {"type": "finish"},
    ):
        fold(state, "output", chunk, "m1", author="agent")
    [message] = UIMessageCodec.get_messages(state)  # (joins the pending text)
    assert message.message["parts"][0]["text"] == "Hello"
    # (no gc.collect(): a full collection untracks an emptied dict, but a wake-up runs young ones)
    assert state._by_id == {"m1": 0} and not gc.is_tracked(state._by_id)  # a position, not the entry
    assert not state._pending_text and not gc.is_tracked(state._pending_text)
    assert not state.pending_resolutions and not gc.is_tracked(state.pending_resolutions)
    # an answer waiting for its tool part is still held, and applied when the part arrives
    fold(state, "input", UIMessageCodec.create_tool_result("m2", {"toolCallId": "c", "output": 1}), "u", author="a")
    assert len(state.pending_resolutions) == 1
    fold(state, "output", {"type": "tool-input-start", "toolCallId": "c", "toolName": "w"}, "m2", author="agent")
    assert not state.pending_resolutions and state.pending_by_author == {}
    assert UIMessageCodec.get_messages(state)[1].message["parts"][0]["output"] == 1


def test_the_usual_turns_projections_track_only_what_a_caller_reads() -> None:
    from support_gc import tracked_from

    prompt, answer = _usual_turn()
    get_messages(answer)
    # the state, its message, and the item dicts / lists get_messages hands out (by reference):
    # the prompt's message item and its content; the answer's item, content, part and the part's
    # two lists (annotations, logprobs). Before: 7 and 11 (a list of entries, a list of items
    # per entry, an index dict of entries and one of items).
    assert tracked_from(prompt) == 4
    assert tracked_from(answer) == 7
