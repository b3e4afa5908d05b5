"""The Vercel codec's input factories (``wellKnownInputs`` of 0.8.0, Vercel payloads).

Each returns the plain input dict :meth:`~ai_transport.codec.vercel.codec.UIMessageCodec`'s encoder
publishes on ``ai-input``; bad arguments raise a clear error naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._shapes import MAPPING
from ...errors import InvalidTypeError, type_name

__all__ = [
    "create_regenerate",
    "create_tool_approval_response",
    "create_tool_result",
    "create_tool_result_error",
    "create_user_message",
]


def _string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidTypeError(f"unable to create input; {name} must be a string, got {type_name(value)}")
    return value


def create_user_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """``createUserMessage(message)``: a ``UIMessage`` dict (``id``, ``role``, ``parts``)."""
    if not isinstance(message, MAPPING) or not isinstance(message.get("parts"), list):
        raise InvalidTypeError(
            f"unable to create input; message must be a UIMessage with a parts list, got {type_name(message)}"
        )
    return {"kind": "user-message", "message": dict(message)}


def create_regenerate(target: str, parent: str) -> dict[str, Any]:
    """``createRegenerate(target, parent)``."""
    return {"kind": "regenerate", "target": _string("target", target), "parent": _string("parent", parent)}


def _payload(name: str, payload: Mapping[str, Any], *required: str) -> dict[str, Any]:
    if not isinstance(payload, MAPPING):
        raise InvalidTypeError(f"unable to create input; {name} payload must be an object, got {type_name(payload)}")
    out = dict(payload)
    for key in required:
        _string(f"payload.{key}", out.get(key))
    return out


def create_tool_result(codec_message_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """``createToolResult(codecMessageId, {toolCallId, output})``: a client-executed tool's output,
    folded onto the tool part of the message ``codec_message_id``."""
    return {
        "kind": "tool-result",
        "codecMessageId": _string("codec_message_id", codec_message_id),
        "payload": _payload("tool-result", payload, "toolCallId"),
    }


def create_tool_result_error(codec_message_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """``createToolResultError(codecMessageId, {toolCallId, message})``."""
    return {
        "kind": "tool-result-error",
        "codecMessageId": _string("codec_message_id", codec_message_id),
        "payload": _payload("tool-result-error", payload, "toolCallId", "message"),
    }


def create_tool_approval_response(codec_message_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """``createToolApprovalResponse(codecMessageId, {toolCallId, approved, reason?})``."""
    out = _payload("tool-approval-response", payload, "toolCallId")
    if not isinstance(out.get("approved"), bool):
        raise InvalidTypeError(
            f"unable to create input; payload.approved must be a bool, got {type_name(out.get('approved'))}"
        )
    if "reason" in out:
        _string("payload.reason", out["reason"])
    return {
        "kind": "tool-approval-response",
        "codecMessageId": _string("codec_message_id", codec_message_id),
        "payload": out,
    }
