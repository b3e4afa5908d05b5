"""The Responses codec reducer: fold decoded events into per-message projections (pure).

Mirrors ``init`` / ``fold`` / ``getMessages`` of ``@ably/ai-transport@0.8.0``
(``openai/codec/reducer.ts``):

* every event routes to the message keyed by its codec message id (the wire ``codec-message-id``);
  an event without one is dropped. Messages are created lazily, in first-touch order, by the arms
  that add something;
* ``response.output_item.added`` finds-or-creates by item id, keeping the first (deep-cloned) copy;
  id-less items are pushed every time; unmodelled item types are skipped;
* ``content_part.added`` / ``reasoning_summary_part.added`` seed positional slots; deltas append to
  an existing slot of the right type only, ``*.done`` replaces; nothing ever fabricates a slot;
* ``output_item.done`` finalises ``status``, copies ``logprobs`` onto existing ``output_text`` slots
  and sets a reasoning item's ``encrypted_content``;
* ``function_call_output`` outputs are appended; ``tool-approval-request`` merges a pending state;
* inputs: ``user-message`` merges its parts into the message's one input message; ``tool-result`` /
  ``tool-result-error`` / denied ``tool-approval-response`` upsert a ``function_call_output`` by
  ``call_id``; tool-call states merge shallowly, last fold wins.

:func:`get_messages` compacts positional arrays to their dense prefix (a join that saw index 1 but
not 0 shows ``content: []``) and carries ``toolCallStates`` only when a state exists.

Every per-event step is O(1) amortised (messages, items and ``call_id`` outputs are indexed by
dicts), so folding a million events stays linear. Malformed events are skipped and logged on the
``ai_transport.codec.reducer`` logger; :func:`fold` never raises on event content.

Its parts: :mod:`.projection` (the state), :mod:`.fold_arms` (one arm per event type / input
kind) and :mod:`.js_values` (the JavaScript value semantics the arms reproduce).
"""

from __future__ import annotations

from typing import Any

from ..core.headers import js_to_string
from .fold_arms import _INPUT_ARMS, _OUTPUT_ARMS, DENIED_TOOL_OUTPUT, logger
from .js_values import _ABSENT, _dense
from .projection import ReducerState, _flush, init
from .types import CodecMessage, OpenAIMessage

__all__ = ["DENIED_TOOL_OUTPUT", "ReducerState", "fold", "get_messages", "init"]


# ---------------------------------------------------------------------------------------------
# Public API


def fold(
    state: ReducerState,
    direction: str,
    event: dict[str, Any],
    message_id: str | None = None,
    serial: str = "",
    author: str | None = None,
) -> ReducerState:
    """Fold one decoded event into ``state`` (mutated) and return it.

    ``direction`` is ``"output"`` (a Responses stream event or codec output, keyed on ``type``) or
    ``"input"`` (a decoded input, keyed on ``kind``). ``message_id`` is the wire
    ``codec-message-id`` of the message the event came from; without one the event is dropped.
    ``serial`` is accepted for parity with 0.8.0's ``ReducerMeta`` and unused (the transport folds
    each event once, in serial order). ``author`` (the wire's verified publisher) is accepted as
    the Vercel codec's fold takes it and unused: this reducer keeps nothing waiting on another
    publisher's behalf (a tool answer folds at once, whoever sent it), so it has no buffer to bound.
    """
    if message_id is None:
        return state
    if type(event) is not dict:
        logger.warning("fold(); event is not an object (%s), skipping", type(event).__name__)
        return state
    if direction == "output":
        typ = event.get("type")
        run = state._run
        if run is not None and typ is run[0]:
            # The commonest event: one more delta of the text the last fold appended to (nothing
            # else folded since, so the same message, item and slot resolve to the same part).
            delta = event.get("delta")
            if (
                type(delta) is str
                and event.get("item_id", _ABSENT) is run[2]
                and (run[3] is None or event.get(run[3], _ABSENT) is run[4])
                and (message_id is run[1] or (type(message_id) is str and message_id == run[1]))
            ):
                run[5].append(delta)
                return state
        arm = _OUTPUT_ARMS.get(typ) if type(typ) is str else None
    else:
        kind = event.get("kind")
        arm = _INPUT_ARMS.get(kind) if type(kind) is str else None
    if arm is not None:
        state._run = None  # every arm may change what a delta run resolves to; a delta arm sets it anew
        arm(state, event, message_id)
    return state


def _compact(item: Any) -> Any:
    if type(item) is not dict:
        return item
    typ = item.get("type")
    if typ == "reasoning":
        summary = item.get("summary", _ABSENT)
        content = item.get("content", _ABSENT)
        new_summary = _dense(summary) if type(summary) is list else summary
        new_content = _dense(content) if type(content) is list else content
        if new_summary is summary and new_content is content:
            return item
        out = dict(item)
        out["summary"] = new_summary
        if new_content is not _ABSENT:
            out["content"] = new_content
        return out
    if typ == "message" and "id" in item:
        content = item.get("content")
        if type(content) is list:
            dense = _dense(content)
            if dense is not content:
                out = dict(item)
                out["content"] = dense
                return out
    return item


def get_messages(state: ReducerState) -> list[CodecMessage]:
    """The node's messages in first-touch order, each with its codec message id (``getMessages``).

    Positional arrays (an output message's ``content``, a reasoning item's ``content`` /
    ``summary``) are cut to their dense prefix. Items without a hole are returned by reference, as
    in 0.8.0: later folds keep mutating them, except that streamed text (``text`` / ``refusal`` /
    ``arguments`` deltas) folded after this call is joined into them on the next call.
    ``tool_call_states`` is a fresh copy (states only when the message has any).
    """
    _flush(state)
    out: list[CodecMessage] = []
    for entry in state:
        states: dict[str, Any] = {}
        for call_id, st in entry.tool_states.values():
            states[call_id if type(call_id) is str else js_to_string(call_id)] = dict(st)
        role = None if entry.role is _ABSENT else entry.role  # a user-message without a role (JS: no key)
        message = OpenAIMessage(role, [_compact(item) for item in entry], states)  # type: ignore[arg-type]
        out.append(CodecMessage(entry.codec_message_id, message))
    return out
