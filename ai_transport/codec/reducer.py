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
"""

from __future__ import annotations

import logging
import math
from typing import Any, Final

from .headers import MISSING, js_to_string
from .types import CodecMessage, OpenAIMessage

__all__ = ["ReducerState", "fold", "get_messages", "init"]

logger = logging.getLogger("ai_transport.codec.reducer")

#: The ``function_call_output`` a denied approval authors when the client gives no reason.
DENIED_TOOL_OUTPUT: Final = "Tool execution was not approved."

_MODELLED_ITEM_TYPES: Final = frozenset(("message", "reasoning", "function_call"))

#: The largest positional gap a slot write may open (JS keeps arbitrarily sparse arrays; a slot
#: that far past the end could only surface after that many earlier slots fill in).
_MAX_SLOT_GAP: Final = 65536
_MAX_ARRAY_INDEX: Final = 4294967294


#: A missing property (JavaScript ``undefined``), distinct from ``None`` (``null``).
_ABSENT: Final = MISSING


class _Token:
    """A module-level singleton marker: copies, deep copies and pickles are the same object."""

    __slots__ = ("_global", "name")

    def __init__(self, name: str, global_name: str) -> None:
        self.name = name
        self._global = global_name

    def __repr__(self) -> str:
        return self.name

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self

    def __reduce__(self) -> str:
        return self._global


#: An unset slot of a positional array (a hole of a sparse JS array).
_HOLE: Final = _Token("HOLE", "_HOLE")


# ---------------------------------------------------------------------------------------------
# JavaScript value semantics used by the fold

# Tags in index keys.
_NULL_KEY: Final = _Token("null", "_NULL_KEY")
_UNDEF_KEY: Final = _Token("undefined", "_UNDEF_KEY")
_BOOL_TAG: Final = _Token("bool", "_BOOL_TAG")
_NUM_TAG: Final = _Token("number", "_NUM_TAG")


def _key(v: Any) -> Any:
    """A dict key with JS ``Map`` / ``===`` identity (``"1"`` != ``1`` != ``True``; objects never equal)."""
    t = type(v)
    if t is str:
        return v
    if v is None:
        return _NULL_KEY
    if v is _ABSENT:
        return _UNDEF_KEY
    if t is bool:
        return (_BOOL_TAG, v)
    if t is int or t is float:
        return (_NUM_TAG, float(v))
    return object()  # an object / array: identity, never equal to another value


def _js_to_number(v: Any) -> float:
    if v is None or v is False:
        return 0.0
    if v is True:
        return 1.0
    if isinstance(v, (int, float)):
        return float(v)
    return math.nan


def _js_plus(a: Any, b: Any) -> Any:
    """JavaScript ``a + b`` (string concatenation unless both sides are non-strings primitives)."""
    if type(a) is str and type(b) is str:
        return a + b
    if isinstance(a, (str, dict, list)) or isinstance(b, (str, dict, list)):
        return js_to_string(a) + js_to_string(b)
    if type(a) is int and type(b) is int:
        return a + b
    return _js_to_number(a) + _js_to_number(b)


def _truthy(v: Any) -> bool:
    if v is None or v is _ABSENT or v is False:
        return False
    if type(v) is str:
        return v != ""
    if isinstance(v, (int, float)):
        return v != 0 and not math.isnan(v)
    return True


def _slot_index(v: Any) -> int | None:
    """The array index a JS property key denotes, or None (a non-index property: invisible)."""
    t = type(v)
    if t is int:
        return v if 0 <= v <= _MAX_ARRAY_INDEX else None
    if t is float:
        return int(v) if v.is_integer() and 0 <= v <= _MAX_ARRAY_INDEX else None
    if t is str:
        if v.isascii() and v.isdigit() and (v == "0" or v[0] != "0"):
            i = int(v)
            return i if i <= _MAX_ARRAY_INDEX else None
        return None
    return None


def _get_slot(arr: list[Any], raw_index: Any) -> Any:
    i = _slot_index(raw_index)
    if i is None or i >= len(arr):
        return None
    v = arr[i]
    return None if v is _HOLE else v


def _set_slot(arr: list[Any], raw_index: Any, value: Any) -> None:
    i = _slot_index(raw_index)
    if i is None:
        return  # a non-index property on a JS array: never visible
    n = len(arr)
    if i < n:
        arr[i] = value
    elif i == n:
        arr.append(value)
    elif i - n <= _MAX_SLOT_GAP:
        arr.extend([_HOLE] * (i - n))
        arr.append(value)
    else:
        logger.warning("fold(); slot index %d is too far past the end (%d), ignoring", i, n)


def _clone(v: Any) -> Any:
    """``structuredClone`` of a JSON value."""
    t = type(v)
    if t is dict:
        return {k: (x if type(x) is str else _clone(x)) for k, x in v.items()}
    if t is list:
        return [x if type(x) is str else _clone(x) for x in v]
    return v


def _dense(slots: list[Any]) -> list[Any]:
    """The dense prefix of a positional array (the same list when it has no hole)."""
    for i, v in enumerate(slots):
        if v is _HOLE:
            return slots[:i]
    return slots


# ---------------------------------------------------------------------------------------------
# State


class _Entry:
    """One message in progress: its items plus the indexes that keep every fold O(1)."""

    __slots__ = (
        "by_item_id",
        "codec_message_id",
        "input_message",
        "items",
        "outputs_by_call",
        "role",
        "tool_states",
    )

    def __init__(self, codec_message_id: Any, role: Any) -> None:
        self.codec_message_id = codec_message_id
        self.role = role
        self.items: list[Any] = []
        self.by_item_id: dict[Any, dict[str, Any]] = {}
        #: key(call_id) -> (call_id, state); insertion-ordered like the JS Map.
        self.tool_states: dict[Any, tuple[Any, dict[str, Any]]] = {}
        #: key(call_id) -> index in ``items`` of the first ``function_call_output`` with that call_id.
        self.outputs_by_call: dict[Any, int] = {}
        #: The first item that is a ``message`` with an array ``content`` (user-message merge target).
        self.input_message: dict[str, Any] | None = None

    def push(self, item: dict[str, Any]) -> None:
        index = len(self.items)
        self.items.append(item)
        typ = item.get("type")
        if typ == "function_call_output":
            k = _key(item.get("call_id", _ABSENT))
            if k not in self.outputs_by_call and type(k) is not object:
                self.outputs_by_call[k] = index
        elif typ == "message" and self.input_message is None and type(item.get("content")) is list:
            self.input_message = item

    def upsert_output(self, item: dict[str, Any]) -> None:
        index = self.outputs_by_call.get(_key(item.get("call_id", _ABSENT)))
        if index is None:
            self.push(item)
        else:
            self.items[index] = item

    def merge_state(self, call_id: Any, patch: dict[str, Any]) -> None:
        k = _key(call_id)
        old = self.tool_states.get(k)
        state = dict(old[1]) if old is not None else {}
        for name, value in patch.items():
            if value is _ABSENT:
                state.pop(name, None)
            else:
                state[name] = value
        self.tool_states[k] = (call_id if old is None else old[0], state)


class ReducerState:
    """The projection of one conversation node (``OpenAIProjection`` of 0.8.0). Opaque; mutated by :func:`fold`.

    Streamed text (``text`` / ``refusal`` / ``arguments``) is accumulated as chunks and joined when
    :func:`get_messages` reads the state, so a long stream folds in linear time (JS strings are
    ropes; Python's are not).
    """

    __slots__ = ("_by_id", "_messages", "_pending")

    def __init__(self) -> None:
        self._messages: list[_Entry] = []
        self._by_id: dict[Any, _Entry] = {}
        #: (id(obj), key) -> (obj, key, chunks): text appended to ``obj[key]`` not yet joined.
        self._pending: dict[tuple[int, str], tuple[dict[str, Any], str, list[str]]] = {}

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        return f"ReducerState(messages={len(self._messages)})"

    def __getstate__(self) -> tuple[list[_Entry], dict[Any, _Entry]]:
        _flush(self)
        return (self._messages, self._by_id)

    def __setstate__(self, state: tuple[list[_Entry], dict[Any, _Entry]]) -> None:
        self._messages, self._by_id = state
        self._pending = {}

    def __deepcopy__(self, memo: dict[int, Any]) -> ReducerState:
        import copy

        _flush(self)
        new = ReducerState()
        memo[id(self)] = new
        new._messages = copy.deepcopy(self._messages, memo)
        new._by_id = copy.deepcopy(self._by_id, memo)
        return new

    def _ensure(self, role: Any, codec_message_id: Any) -> _Entry:
        k = codec_message_id if type(codec_message_id) is str else _key(codec_message_id)
        entry = self._by_id.get(k)
        if entry is None:
            entry = _Entry(codec_message_id, role)
            self._messages.append(entry)
            if type(k) is not object:
                self._by_id[k] = entry
        return entry

    def _item(self, codec_message_id: Any, item_id: Any) -> dict[str, Any] | None:
        entry = self._by_id.get(codec_message_id if type(codec_message_id) is str else _key(codec_message_id))
        if entry is None:
            return None
        return entry.by_item_id.get(item_id if type(item_id) is str else _key(item_id))


def _append_text(state: ReducerState, obj: dict[str, Any], key: str, value: Any) -> None:
    """JS ``obj[key] += value``, deferred: string chunks are joined by :func:`_flush`."""
    pk = (id(obj), key)
    pending = state._pending.get(pk)
    if pending is not None:
        if type(value) is str:
            pending[2].append(value)
            return
        obj[key] = "".join(pending[2])
        del state._pending[pk]
    cur = obj.get(key, _ABSENT)
    if type(cur) is str and type(value) is str:
        state._pending[pk] = (obj, key, [cur, value])
    else:
        obj[key] = _js_plus(cur, value)


def _replace_text(state: ReducerState, obj: dict[str, Any], key: str, value: Any) -> None:
    """JS ``obj[key] = value`` for a streamed field (drops pending chunks)."""
    if state._pending:
        state._pending.pop((id(obj), key), None)
    _assign(obj, key, value)


def _flush(state: ReducerState) -> None:
    """Join every pending streamed text into its object."""
    pending = state._pending
    if pending:
        for obj, key, chunks in pending.values():
            obj[key] = "".join(chunks)
        pending.clear()


def init() -> ReducerState:
    """A fresh, empty projection (``init()``)."""
    return ReducerState()


# ---------------------------------------------------------------------------------------------
# Output arms (event dicts in the JS JSON shape)


def _out_item_added(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
    item = ev.get("item", _ABSENT)
    if type(item) is not dict:
        logger.warning("fold(); response.output_item.added without an item object, skipping")
        return
    if item.get("type") not in _MODELLED_ITEM_TYPES or type(item.get("type")) is not str:
        return
    entry = state._ensure("assistant", mid)
    item_id = item.get("id", _ABSENT)
    if item_id is not _ABSENT:
        k = _key(item_id)
        if k in entry.by_item_id:
            return
        clone = _clone(item)
        entry.push(clone)
        if type(k) is not object:
            entry.by_item_id[k] = clone
        return
    entry.push(_clone(item))


def _out_item_done(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
    done = ev.get("item", _ABSENT)
    if type(done) is not dict:
        logger.warning("fold(); response.output_item.done without an item object, skipping")
        return
    done_id = done.get("id", _ABSENT)
    if done_id is _ABSENT:
        return
    existing = state._item(mid, done_id)
    if existing is None:
        return
    typ = existing.get("type")
    if typ != done.get("type"):
        return
    if typ == "message":
        _assign(existing, "status", done.get("status", _ABSENT))
        parts = done.get("content")
        if parts is None:
            return
        if type(parts) is not list:
            logger.warning("fold(); output_item.done content is not an array, skipping logprobs")
            return
        content = existing.get("content")
        if type(content) is not list:
            return
        for index, part in enumerate(parts):
            if type(part) is not dict:
                continue
            logprobs = part.get("logprobs", _ABSENT)
            if part.get("type") == "output_text" and logprobs is not _ABSENT:
                slot = content[index] if index < len(content) else None
                if type(slot) is dict and slot.get("type") == "output_text":
                    slot["logprobs"] = logprobs
    elif typ == "function_call":
        _assign(existing, "status", done.get("status", _ABSENT))
    elif typ == "reasoning":
        _assign(existing, "status", done.get("status", _ABSENT))
        encrypted = done.get("encrypted_content")
        if type(encrypted) is str:
            existing["encrypted_content"] = encrypted


def _assign(obj: dict[str, Any], key: str, value: Any) -> None:
    """``obj[key] = value`` where assigning ``undefined`` removes the key from the JSON view."""
    if value is _ABSENT:
        obj.pop(key, None)
    else:
        obj[key] = value


def _out_content_part_added(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
    item = state._item(mid, ev.get("item_id", _ABSENT))
    if item is None:
        return
    typ = item.get("type")
    if typ == "message":
        part = ev.get("part", _ABSENT)
        if type(part) is not dict:
            logger.warning("fold(); content_part.added without a part object, skipping")
            return
        if part.get("type") in ("output_text", "refusal"):
            content = item.get("content")
            if type(content) is not list:
                logger.warning("fold(); message item %r has no content array, skipping part", item.get("id"))
                return
            _set_slot(content, ev.get("content_index", _ABSENT), _clone(part))
    elif typ == "reasoning":
        part = ev.get("part", _ABSENT)
        if type(part) is not dict:
            logger.warning("fold(); content_part.added without a part object, skipping")
            return
        if part.get("type") == "reasoning_text":
            content = item.get("content")
            if content is None:
                content = item["content"] = []
            if type(content) is not list:
                logger.warning(
                    "fold(); reasoning item %r content is not an array, skipping part", item.get("id")
                )
                return
            _set_slot(content, ev.get("content_index", _ABSENT), _clone(part))


def _out_summary_part_added(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
    item = state._item(mid, ev.get("item_id", _ABSENT))
    if item is None or item.get("type") != "reasoning":
        return
    part = ev.get("part", _ABSENT)
    summary = item.get("summary")
    if type(part) is not dict or type(summary) is not list:
        logger.warning("fold(); reasoning_summary_part.added needs a part and a summary array, skipping")
        return
    slot: dict[str, Any] = {"type": "summary_text"}
    text = part.get("text", _ABSENT)
    if text is not _ABSENT:
        slot["text"] = text
    _set_slot(summary, ev.get("summary_index", _ABSENT), slot)


def _delta_arm(
    item_type: str, field: str, part_type: str | None, index_key: str, value_key: str, replace: bool
):
    def arm(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
        entry = state._by_id.get(mid if type(mid) is str else _key(mid))
        if entry is None:
            return
        item_id = ev.get("item_id", _ABSENT)
        item = entry.by_item_id.get(item_id if type(item_id) is str else _key(item_id))
        if item is None or item.get("type") != item_type:
            return
        arr = item.get(field)
        if type(arr) is not list:
            return
        index = ev.get(index_key, _ABSENT)
        part = arr[index] if type(index) is int and 0 <= index < len(arr) else _get_slot(arr, index)
        if type(part) is not dict or (part_type is not None and part.get("type") != part_type):
            return
        if replace:
            _replace_text(state, part, value_key, ev.get(value_key, _ABSENT))
            return
        delta = ev.get("delta", _ABSENT)
        pending = state._pending.get((id(part), value_key))
        if pending is not None and type(delta) is str:
            pending[2].append(delta)  # the common case, inlined
        else:
            _append_text(state, part, value_key, delta)

    return arm


def _fn_args_arm(replace: bool):
    def arm(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
        item = state._item(mid, ev.get("item_id", _ABSENT))
        if item is None or item.get("type") != "function_call":
            return
        if replace:
            _replace_text(state, item, "arguments", ev.get("arguments", _ABSENT))
        else:
            _append_text(state, item, "arguments", ev.get("delta", _ABSENT))

    return arm


def _out_function_call_output(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
    entry = state._ensure("assistant", mid)
    item = ev.get("item", _ABSENT)
    if type(item) is not dict:
        logger.warning("fold(); function_call_output without an item object, skipping")
        return
    entry.push(_clone(item))


def _out_tool_approval_request(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
    entry = state._ensure("assistant", mid)
    entry.merge_state(
        ev.get("call_id", _ABSENT),
        {"approval": "pending", "name": ev.get("name", _ABSENT), "arguments": ev.get("arguments", _ABSENT)},
    )


_OUTPUT_ARMS: Final = {
    "response.output_item.added": _out_item_added,
    "response.output_item.done": _out_item_done,
    "response.content_part.added": _out_content_part_added,
    "response.output_text.delta": _delta_arm(
        "message", "content", "output_text", "content_index", "text", False
    ),
    "response.output_text.done": _delta_arm(
        "message", "content", "output_text", "content_index", "text", True
    ),
    "response.refusal.delta": _delta_arm("message", "content", "refusal", "content_index", "refusal", False),
    "response.refusal.done": _delta_arm("message", "content", "refusal", "content_index", "refusal", True),
    "response.reasoning_text.delta": _delta_arm(
        "reasoning", "content", "reasoning_text", "content_index", "text", False
    ),
    "response.reasoning_text.done": _delta_arm(
        "reasoning", "content", "reasoning_text", "content_index", "text", True
    ),
    "response.reasoning_summary_part.added": _out_summary_part_added,
    "response.reasoning_summary_text.delta": _delta_arm(
        "reasoning", "summary", None, "summary_index", "text", False
    ),
    "response.reasoning_summary_text.done": _delta_arm(
        "reasoning", "summary", None, "summary_index", "text", True
    ),
    "response.function_call_arguments.delta": _fn_args_arm(False),
    "response.function_call_arguments.done": _fn_args_arm(True),
    "function_call_output": _out_function_call_output,
    "tool-approval-request": _out_tool_approval_request,
}


# ---------------------------------------------------------------------------------------------
# Input arms


def _payload(ev: dict[str, Any]) -> dict[str, Any] | None:
    payload = ev.get("payload")
    if type(payload) is not dict:
        logger.warning("fold(); %s input without a payload object, skipping", ev.get("kind"))
        return None
    return payload


def _in_user_message(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
    message = ev.get("message")
    if type(message) is not dict:
        logger.warning("fold(); user-message without a message object, skipping")
        return
    role = message.get("role", _ABSENT)
    entry = state._ensure(role, mid)
    entry.role = role
    items = message.get("items")
    if type(items) is not list:
        logger.warning("fold(); user-message without an items array, skipping")
        return
    for incoming in items:
        if type(incoming) is not dict or incoming.get("type") != "message":
            continue
        parts = incoming.get("content")
        if type(parts) is not list:
            continue
        target = entry.input_message
        if target is not None:
            target["content"].extend(parts)
        else:
            entry.push(_clone(incoming))


def _tool_result_arm(output_key: str, result: str):
    """``tool-result`` (output ``output``, result ``ok``) / ``tool-result-error`` (``message``, ``failed``)."""

    def arm(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
        payload = _payload(ev)
        if payload is None:
            return
        call_id = payload.get("call_id", _ABSENT)
        entry = state._ensure("assistant", mid)
        entry.upsert_output(_output_item(call_id, payload.get(output_key, _ABSENT)))
        entry.merge_state(call_id, {"result": result})

    return arm


def _in_tool_approval_response(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
    payload = _payload(ev)
    if payload is None:
        return
    call_id = payload.get("call_id", _ABSENT)
    reason = payload.get("reason", _ABSENT)
    entry = state._ensure("assistant", mid)
    if _truthy(payload.get("approved", _ABSENT)):
        patch: dict[str, Any] = {"approval": "approved"}
    else:
        entry.upsert_output(
            _output_item(call_id, DENIED_TOOL_OUTPUT if reason is None or reason is _ABSENT else reason)
        )
        patch = {"approval": "denied"}
    if reason is not _ABSENT:
        patch["reason"] = reason
    entry.merge_state(call_id, patch)


def _output_item(call_id: Any, output: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call_output"}
    if call_id is not _ABSENT:
        item["call_id"] = call_id
    if output is not _ABSENT:
        item["output"] = output
    return item


_INPUT_ARMS: Final = {
    "user-message": _in_user_message,
    "tool-result": _tool_result_arm("output", "ok"),
    "tool-result-error": _tool_result_arm("message", "failed"),
    "tool-approval-response": _in_tool_approval_response,
}


# ---------------------------------------------------------------------------------------------
# Public API


def fold(
    state: ReducerState,
    direction: str,
    event: dict[str, Any],
    message_id: str | None = None,
    serial: str = "",
) -> ReducerState:
    """Fold one decoded event into ``state`` (mutated) and return it.

    ``direction`` is ``"output"`` (a Responses stream event or codec output, keyed on ``type``) or
    ``"input"`` (a decoded input, keyed on ``kind``). ``message_id`` is the wire
    ``codec-message-id`` of the message the event came from; without one the event is dropped.
    ``serial`` is accepted for parity with 0.8.0's ``ReducerMeta`` and unused (the transport folds
    each event once, in serial order).
    """
    if message_id is None:
        return state
    if type(event) is not dict:
        logger.warning("fold(); event is not an object (%s), skipping", type(event).__name__)
        return state
    if direction == "output":
        typ = event.get("type")
        arm = _OUTPUT_ARMS.get(typ) if type(typ) is str else None
    else:
        kind = event.get("kind")
        arm = _INPUT_ARMS.get(kind) if type(kind) is str else None
    if arm is not None:
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
    for entry in state._messages:
        states: dict[str, Any] = {}
        for call_id, st in entry.tool_states.values():
            states[call_id if type(call_id) is str else js_to_string(call_id)] = dict(st)
        role = None if entry.role is _ABSENT else entry.role  # a user-message without a role (JS: no key)
        message = OpenAIMessage(role, [_compact(item) for item in entry.items], states)  # type: ignore[arg-type]
        out.append(CodecMessage(entry.codec_message_id, message))
    return out
