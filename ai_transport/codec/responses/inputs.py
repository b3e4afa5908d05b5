"""Codec inputs (client -> agent): the input factories and the input -> wire-part mapping (pure).

The factories build exactly the JS shapes of ``@ably/ai-transport@0.8.0``'s well-known inputs
(camelCase keys, e.g. ``codecMessageId``)::

    create_user_message({"role": "user", "items": [...]})
        -> {"kind": "user-message", "message": {...}}
    create_regenerate(target, parent)       -> {"kind": "regenerate", "target", "parent"}
    create_tool_result(id, payload)         -> {"kind": "tool-result", "codecMessageId", "payload"}
    create_tool_result_error(id, payload)   -> {"kind": "tool-result-error", ...}
    create_tool_approval_response(id, p)    -> {"kind": "tool-approval-response", ...}

:func:`input_parts` maps one input to the ``ai-input`` wire parts of reference §4 (one part per
user-message content part, published as one batch; one part for every other kind). The encoder adds
the transport tier (caller headers, ``codec-message-id``, ``stream``, ``discrete``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..._shapes import MAPPING
from ...errors import InvalidArgumentError, InvalidTypeError, type_name
from ..core.encoder_core import WirePart
from ..core.headers import MISSING, js_to_string, write_bool, write_str

__all__ = [
    "InputParts",
    "WirePart",
    "create_regenerate",
    "create_tool_approval_response",
    "create_tool_result",
    "create_tool_result_error",
    "create_user_message",
    "input_parts",
]


class InputParts(NamedTuple):
    """The wire parts of one input; ``batch`` parts are published together (``discrete: "true"``)."""

    parts: list[WirePart]
    batch: bool


# ---------------------------------------------------------------------------------------------
# Factories


def _message_dict(message: Any) -> Any:
    to_dict = getattr(message, "to_dict", None)
    if callable(to_dict) and not isinstance(message, MAPPING):
        return to_dict()
    return message


def create_user_message(message: Any) -> dict[str, Any]:
    """``{"kind": "user-message", "message": message}`` (``createUserMessage``).

    ``message`` is the JS shape ``{"role": "user", "items": [<one input message item>]}``; an
    :class:`~ai_transport.codec.types.OpenAIMessage` is converted with ``to_dict()``.
    """
    return {"kind": "user-message", "message": _message_dict(message)}


def create_regenerate(target: str, parent: str) -> dict[str, Any]:
    """``{"kind": "regenerate", "target": target, "parent": parent}`` (``createRegenerate``)."""
    return {"kind": "regenerate", "target": target, "parent": parent}


def create_tool_result(codec_message_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """``{"kind": "tool-result", "codecMessageId", "payload": {call_id, output}}`` (``createToolResult``)."""
    return {"kind": "tool-result", "codecMessageId": codec_message_id, "payload": payload}


def create_tool_result_error(codec_message_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """``{"kind": "tool-result-error", "codecMessageId", "payload": {call_id, message}}``."""
    return {"kind": "tool-result-error", "codecMessageId": codec_message_id, "payload": payload}


def create_tool_approval_response(codec_message_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """``{"kind": "tool-approval-response", "codecMessageId", "payload": {call_id, approved, reason?}}``."""
    return {"kind": "tool-approval-response", "codecMessageId": codec_message_id, "payload": payload}


# ---------------------------------------------------------------------------------------------
# Encoding


def _get(source: Mapping[str, Any], key: str) -> Any:
    return source.get(key, MISSING)


def _kind_headers(kind: str) -> dict[str, str]:
    return {"kind": kind}


def _payload_of(inp: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    payload = inp.get("payload")
    if not isinstance(payload, MAPPING):
        raise InvalidArgumentError(
            f"unable to encode input; event '{kind}' carries no payload object — declare it wireOnly or "
            "use an encode escape hatch"
        )
    return payload


def _user_message_parts(inp: Mapping[str, Any]) -> InputParts:
    message = _message_dict(inp.get("message"))
    if not isinstance(message, MAPPING):
        raise InvalidTypeError(
            f"unable to publish; user-message input.message must be an object, got {type_name(message)}"
        )
    items = message.get("items")
    if not isinstance(items, list):
        raise InvalidTypeError(
            f"unable to publish; user-message input.message.items must be an array, got {type_name(items)}"
        )
    item = items[0] if len(items) == 1 else None
    if not isinstance(item, MAPPING) or item.get("type") != "message":
        raise InvalidArgumentError(
            "unable to publish; a user message must be exactly one message item, "
            f"got {len(items)} item(s)"
        )
    content = item.get("content")
    if not isinstance(content, list):
        raise InvalidTypeError(
            "unable to publish; user-message input.message.items[0].content must be an array of "
            f"input_text parts, got {type_name(content)}"
        )
    texts: list[Any] = []
    for part in content:
        ptype = part.get("type", MISSING) if isinstance(part, MAPPING) else MISSING
        if ptype != "input_text":
            raise InvalidArgumentError(
                f"unable to publish; unsupported input content part type '{js_to_string(ptype)}'"
            )
        texts.append(_get(part, "text"))
    if not texts:
        texts = [""]  # >=1 encodable part so an empty prompt still round-trips
    transport: dict[str, Any] = {}
    if "role" in message:
        transport["role"] = message["role"]
    parts = [
        WirePart(text, {"kind": "user-message", "partType": "input_text"}, dict(transport)) for text in texts
    ]
    return InputParts(parts, True)


def input_parts(inp: Any) -> InputParts:
    """The ``ai-input`` wire parts of one input (reference §4).

    Raises :class:`~ai_transport.errors.InvalidArgumentError` (40003) with 0.8.0's message for an
    unknown kind, a user message that is not exactly one ``message`` item, a non-``input_text``
    content part, or a tool input without a ``payload`` object.
    """
    if not isinstance(inp, MAPPING):
        raise InvalidTypeError(f"unable to publish; input must be an object with a 'kind', got {type_name(inp)}")
    kind = inp.get("kind", MISSING)
    if kind == "user-message":
        return _user_message_parts(inp)
    if kind == "regenerate":
        return InputParts([WirePart("", _kind_headers("regenerate"), {})], False)
    if kind == "tool-result":
        payload = _payload_of(inp, kind)
        codec = _kind_headers(kind)
        write_str(codec, "call_id", payload.get("call_id"))
        data: dict[str, Any] = {}
        if "output" in payload:
            data["output"] = payload["output"]
        return InputParts([WirePart(data, codec, {})], False)
    if kind == "tool-result-error":
        payload = _payload_of(inp, kind)
        codec = _kind_headers(kind)
        write_str(codec, "call_id", payload.get("call_id"))
        data = {}
        if "message" in payload:
            data["message"] = payload["message"]
        return InputParts([WirePart(data, codec, {})], False)
    if kind == "tool-approval-response":
        payload = _payload_of(inp, kind)
        codec = _kind_headers(kind)
        write_str(codec, "call_id", payload.get("call_id"))
        write_bool(codec, "approved", payload.get("approved"))
        write_str(codec, "reason", payload.get("reason"))
        return InputParts([WirePart("", codec, {})], False)
    raise InvalidArgumentError(f"unable to publish; unsupported input kind '{js_to_string(kind)}'")
