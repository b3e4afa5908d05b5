"""Readers a resuming Vercel-codec agent needs (``pendingToolCalls`` / ``approvedPendingToolCalls``
of 0.8.0's ``vercel/tool-registry.ts``).

Both read the *last assistant* message of a ``UIMessage`` list (a client's steering message may
trail it) and list its tool calls as ``{"toolCallId", "toolName", "input"}``:

- :func:`pending_tool_calls`: parts in ``input-available`` (the model asked, nobody answered);
- :func:`approved_pending_tool_calls`: parts in ``approval-responded`` whose approval is
  ``approved: true`` (a denial shares the state and is never executed).

Messages may be ``UIMessage`` dicts or :class:`~ai_transport.codec.CodecMessage` s of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .state import is_tool_part, tool_name

__all__ = [
    "approved_pending_tool_calls",
    "awaiting_approval_calls",
    "pending_tool_calls",
    "session_calls",
    "tool_output",
]


def pending_tool_calls(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """Tool calls of the last assistant message waiting for their output (``input-available``)."""
    return _calls_in_state(messages, "input-available")


def approved_pending_tool_calls(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """Approved tool calls of the last assistant message not executed yet (``approval-responded``)."""
    return _calls_in_state(messages, "approval-responded")


def _calls_in_state(messages: Iterable[Any], state: str) -> list[dict[str, Any]]:
    last = None
    for m in messages:
        message = getattr(m, "message", m)
        if isinstance(message, dict) and message.get("role") == "assistant":
            last = message
    parts = last.get("parts") if last is not None else None
    if not isinstance(parts, list):
        return []
    out: list[dict[str, Any]] = []
    for part in parts:
        if not is_tool_part(part) or part.get("state") != state or "input" not in part:
            continue
        if state == "approval-responded":
            approval = part.get("approval")
            if not isinstance(approval, dict) or approval.get("approved") is not True:
                continue
        out.append({"toolCallId": part["toolCallId"], "toolName": tool_name(part), "input": part.get("input")})
    return out


def awaiting_approval_calls(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """Tool calls of the last assistant message waiting for the user's approval (``approval-requested``)."""
    return _calls_in_state(messages, "approval-requested")


def session_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``calls`` with the keys the sessions' call ledger reads beside their own (``call_id``, ``name``)."""
    return [{**c, "call_id": c["toolCallId"], "name": c["toolName"]} for c in calls]


def tool_output(call: dict[str, Any], result: Any) -> dict[str, Any]:
    """The ``tool-output-available`` chunk answering ``call`` with ``result`` (an agent-run tool)."""
    return {"type": "tool-output-available", "toolCallId": call["toolCallId"], "output": result}
