"""The reducer's arms: how each output event type and each input kind folds into the state (pure).

:data:`_OUTPUT_ARMS` (keyed on a Responses event's ``type``) and :data:`_INPUT_ARMS` (keyed on a
decoded input's ``kind``); :func:`~ai_transport.codec.reducer.fold` routes every event to one.
Malformed events are skipped and logged on the ``ai_transport.codec.reducer`` logger.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from ...errors import quoted
from .js_values import _ABSENT, _clone, _get_slot, _key, _set_slot, _truthy
from .projection import ReducerState, _append_text, _replace_text

logger = logging.getLogger("ai_transport.codec.reducer")

#: The ``function_call_output`` a denied approval authors when the client gives no reason.
DENIED_TOOL_OUTPUT: Final = "Tool execution was not approved."

_MODELLED_ITEM_TYPES: Final = frozenset(("message", "reasoning", "function_call"))


# ---------------------------------------------------------------------------------------------
# Output arms (event dicts in the JS JSON shape)


def _out_item_added(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
    item = ev.get("item", _ABSENT)
    if type(item) is not dict:
        logger.warning("fold(); response.output_item.added without an item object, skipping")
        return
    typ = item.get("type")
    if type(typ) is not str or typ not in _MODELLED_ITEM_TYPES:  # (the type first: a list is unhashable)
        return
    # (state._ensure, its lookup inlined: the message exists already but for its first item)
    at = state._by_id.get(mid if type(mid) is str else _key(mid))
    entry = state._ensure("assistant", mid) if at is None else state[at]
    item_id = item.get("id", _ABSENT)
    if item_id is not _ABSENT:
        k = item_id if type(item_id) is str else _key(item_id)
        if k in entry.by_item_id:
            return
        if type(k) is not object:
            entry.by_item_id[k] = len(entry)
        entry.push(_clone(item))
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
    if typ == "message" or typ == "function_call" or typ == "reasoning":
        status = done.get("status", _ABSENT)  # each finalises its status first (undefined: removed)
        if status is _ABSENT:
            existing.pop("status", None)
        else:
            existing["status"] = status
    if typ == "message":
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
    elif typ == "reasoning":
        encrypted = done.get("encrypted_content")
        if type(encrypted) is str:
            existing["encrypted_content"] = encrypted


def _out_content_part_added(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
    at = state._by_id.get(mid if type(mid) is str else _key(mid))  # (state._item, inlined)
    if at is None:
        return
    entry = state[at]
    item_id = ev.get("item_id", _ABSENT)
    at = entry.by_item_id.get(item_id if type(item_id) is str else _key(item_id))
    if at is None:
        return
    item = entry[at]
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
            index = ev.get("content_index", _ABSENT)
            clone = _clone(part)
            if type(index) is int and 0 <= index <= len(content):  # (_set_slot of an index in reach, inlined)
                if index == len(content):
                    content.append(clone)
                else:
                    content[index] = clone
            else:
                _set_slot(content, index, clone)
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
        at = state._by_id.get(mid if type(mid) is str else _key(mid))
        if at is None:
            return
        entry = state[at]
        item_id = ev.get("item_id", _ABSENT)
        at = entry.by_item_id.get(item_id if type(item_id) is str else _key(item_id))
        if at is None:
            return
        item = entry[at]
        if item.get("type") != item_type:
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
        chunks = _append_text(state, part, value_key, ev.get("delta", _ABSENT))
        if chunks is not None and type(mid) is str:
            state._run = (ev["type"], mid, item_id, index_key, index, chunks)

    return arm


def _fn_args_arm(replace: bool):
    def arm(state: ReducerState, ev: dict[str, Any], mid: Any) -> None:
        item_id = ev.get("item_id", _ABSENT)
        item = state._item(mid, item_id)
        if item is None or item.get("type") != "function_call":
            return
        if replace:
            _replace_text(state, item, "arguments", ev.get("arguments", _ABSENT))
            return
        chunks = _append_text(state, item, "arguments", ev.get("delta", _ABSENT))
        if chunks is not None and type(mid) is str:
            state._run = (ev["type"], mid, item_id, None, None, chunks)

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
        logger.warning("fold(); %s input without a payload object, skipping", quoted(ev.get("kind")))
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
