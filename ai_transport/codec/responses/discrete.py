"""Discrete (not streamed) messages: the ``ai-input`` and ``ai-output`` decode tables (sans-I/O).

A user message, a tool result / error / approval response (``ai-input``), a whole output item or a
tool-approval request (``ai-output``) decode to one event each; regenerate and unknown kinds decode
to nothing. An item event without data (where 0.8.0 throws) raises :class:`_Malformed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..core.headers import NAME_INPUT, NAME_OUTPUT
from ..core.inbound import _ABSENT, _bool_field, _is_map, _Malformed, _nullish, _prop, _str_field

_ITEM_EVENTS: Final = frozenset(
    ("response.output_item.added", "response.output_item.done", "function_call_output")
)


def _decode_discrete(
    name: Any, transport: Mapping[str, Any], codec: Mapping[str, Any], data: Any, publisher: str | None = None
) -> list[dict[str, Any]]:
    """The events of one discrete message (the decoder's ``_discrete`` hook; ``publisher`` unused:
    this codec keeps no state off a discrete wire)."""
    kind = codec.get("kind")
    if type(kind) is not str:
        return []  # (a missing kind reads as "", which neither table has: nothing either)
    if name == NAME_OUTPUT:
        if kind in _ITEM_EVENTS:  # a whole output item: the commonest discrete wire
            if data is None or data is _ABSENT:
                # 0.8.0 reads ``data.item`` unguarded and throws here.
                raise _Malformed(f"'{kind}' without data")
            ev: dict[str, Any] = {}
            item = data.get("item", _ABSENT) if type(data) is dict else _prop(data, "item")
            if item is not _ABSENT:
                ev["item"] = item
            ev["type"] = kind
            return [ev]
        return _decode_output(kind, codec, data)
    if name == NAME_INPUT:
        return _decode_input(kind, transport, codec, data)
    return []


def _decode_output(kind: str, codec: Mapping[str, Any], data: Any) -> list[dict[str, Any]]:
    """An ``ai-output`` of a kind that is no item event (those :func:`_decode_discrete` reads)."""
    if kind == "tool-approval-request":
        return [
            {
                "call_id": _str_field(codec, "call_id", ""),
                "name": _str_field(codec, "name", ""),
                "arguments": data if type(data) is str else "",
                "type": kind,
            }
        ]
    return []


def _decode_input(
    kind: str, transport: Mapping[str, Any], codec: Mapping[str, Any], data: Any
) -> list[dict[str, Any]]:
    if kind == "user-message":
        part_type = codec.get("partType")  # (a missing one reads as "": not input_text either)
        if part_type != "input_text" or type(part_type) is not str:
            return []
        part = {"text": data if type(data) is str else "", "type": "input_text"}
        role = transport.get("role")
        if role is None or role is _ABSENT:  # (_nullish, inlined)
            role = "user"
        return [
            {
                "kind": kind,
                "message": {"role": role, "items": [{"type": "message", "role": "user", "content": [part]}]},
            }
        ]
    payload: dict[str, Any]
    if kind == "tool-result":
        payload = {"call_id": _str_field(codec, "call_id", "")}
        if _is_map(data):
            output = data.get("output", _ABSENT)
            if output is not _ABSENT:
                payload["output"] = output
        elif not isinstance(data, list):
            payload["output"] = ""
    elif kind == "tool-result-error":
        message = data.get("message") if _is_map(data) else None
        payload = {
            "call_id": _str_field(codec, "call_id", ""),
            "message": message if type(message) is str else "",
        }
    elif kind == "tool-approval-response":
        payload = {
            "call_id": _str_field(codec, "call_id", ""),
            "approved": _bool_field(codec, "approved", False),
        }
        reason = _str_field(codec, "reason")
        if reason is not _ABSENT:
            payload["reason"] = reason
    else:  # regenerate is wire-only; unknown kinds decode to nothing
        return []
    return [
        {"kind": kind, "codecMessageId": _nullish(transport.get("codec-message-id"), ""), "payload": payload}
    ]
