"""What the encoder writes for output events (reference §3): reduced items and streamed groups (sans-I/O).

:func:`wire_item` is the reduced item an ``output_item.done`` carries on the wire; the streamed
groups (``output_text``, ``refusal``, ``reasoning_text``, ``reasoning_summary_text``,
``function_call_arguments``) say which events start, extend and end a stream, the codec headers a
stream's create carries and how its stream id is formed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..._shapes import MAPPING
from ...errors import InvalidArgumentError
from ..core.headers import MISSING, js_to_string, write_json, write_str

__all__ = ["wire_item"]


# ---------------------------------------------------------------------------------------------
# wireItem (reference §3)


def _has_logprobs(part: Any) -> bool:
    if not isinstance(part, MAPPING) or part.get("type") != "output_text":
        return False
    lp = part.get("logprobs")
    return isinstance(lp, list) and len(lp) > 0


def _pick(item: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: item[k] for k in keys if k in item}


def _unsupported_item(item: Any) -> InvalidArgumentError:
    itype = item.get("type", MISSING) if isinstance(item, MAPPING) else MISSING
    return InvalidArgumentError(
        f"unable to publish; unsupported output item type '{js_to_string(itype)}'", status_code=400
    )


def wire_item(item: Any) -> dict[str, Any]:
    """The reduced item an ``output_item.done`` carries on the wire (``toWireItem`` of 0.8.0).

    ``{type, id, status}`` for message / function_call / reasoning (absent keys stay absent);
    reasoning adds ``encrypted_content`` when it is a string; a message adds ``content`` only when
    some ``output_text`` part has non-empty ``logprobs`` — then one entry per part, index-aligned:
    ``{type: "output_text", logprobs}`` where present, ``{type}`` elsewhere. Any other item type
    raises 40003 ``unable to publish; unsupported output item type '<type>'``.
    """
    if not isinstance(item, MAPPING):
        raise _unsupported_item(item)
    itype = item.get("type")
    if itype == "message":
        out = {"type": "message", **_pick(item, "id", "status")}
        content = item.get("content")
        if isinstance(content, list) and any(_has_logprobs(p) for p in content):
            out["content"] = [
                {"type": "output_text", "logprobs": p["logprobs"]}
                if _has_logprobs(p)
                else (_pick(p, "type") if isinstance(p, MAPPING) else {})
                for p in content
            ]
        return out
    if itype == "function_call":
        return {"type": "function_call", **_pick(item, "id", "status")}
    if itype == "reasoning":
        out = {"type": "reasoning", **_pick(item, "id", "status")}
        if isinstance(item.get("encrypted_content"), str):
            out["encrypted_content"] = item["encrypted_content"]
        return out
    raise _unsupported_item(item)


# ---------------------------------------------------------------------------------------------
# Streamed groups (reference §3)


class _Group(NamedTuple):
    kind: str
    fields: tuple[tuple[str, str], ...]  # (key, "str" | "json")
    delta_type: str
    end_type: str


_CONTENT_FIELDS = (("item_id", "str"), ("output_index", "json"), ("content_index", "json"), ("part", "json"))
_GROUPS = {
    "output_text": _Group("output_text", _CONTENT_FIELDS, "response.output_text.delta", "response.output_text.done"),
    "refusal": _Group("refusal", _CONTENT_FIELDS, "response.refusal.delta", "response.refusal.done"),
    "reasoning_text": _Group(
        "reasoning_text", _CONTENT_FIELDS, "response.reasoning_text.delta", "response.reasoning_text.done"
    ),
    "reasoning_summary_text": _Group(
        "reasoning_summary_text",
        (("item_id", "str"), ("output_index", "json"), ("summary_index", "json"), ("part", "json")),
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
    ),
    "function_call_arguments": _Group(
        "function_call_arguments",
        (("item", "json"), ("output_index", "json")),
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
    ),
}
_DELTA_OR_END: dict[str, tuple[_Group, str]] = {}
for _g in _GROUPS.values():
    _DELTA_OR_END[_g.delta_type] = (_g, "delta")
    _DELTA_OR_END[_g.end_type] = (_g, "end")


def _group_headers(group: _Group, event: Mapping[str, Any]) -> dict[str, str]:
    rec: dict[str, str] = {"kind": group.kind}
    for key, binding in group.fields:
        if binding == "str":
            write_str(rec, key, event.get(key))
        else:
            write_json(rec, key, event.get(key))
    return rec


def _stream_id(group: _Group, event: Mapping[str, Any], phase: str) -> str:
    if group.kind == "function_call_arguments":
        if phase != "start":
            return js_to_string(event.get("item_id", MISSING))
        item = event.get("item")
        item_id = item.get("id") if isinstance(item, MAPPING) else None
        if item_id is None:
            raise InvalidArgumentError(
                "unable to stream function-call arguments; item has no id", status_code=400
            )
        return js_to_string(item_id)
    item_id = js_to_string(event.get("item_id", MISSING))
    if group.kind == "reasoning_summary_text":
        return f"{item_id}:summary:{js_to_string(event.get('summary_index', MISSING))}"
    return f"{item_id}:{js_to_string(event.get('content_index', MISSING))}"


def _start_group(event: Mapping[str, Any]) -> _Group | None:
    etype = event.get("type")
    if etype == "response.content_part.added":
        part = event.get("part")
        ptype = part.get("type") if isinstance(part, MAPPING) else None
        if ptype in ("output_text", "refusal", "reasoning_text"):
            return _GROUPS[ptype]
        return None
    if etype == "response.reasoning_summary_part.added":
        return _GROUPS["reasoning_summary_text"]
    if etype == "response.output_item.added":
        item = event.get("item")
        if isinstance(item, MAPPING) and item.get("type") == "function_call":
            return _GROUPS["function_call_arguments"]
    return None
