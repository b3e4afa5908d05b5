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

from collections.abc import Iterable, Iterator
from typing import Any

from .state import UIProjection, is_tool_part, tool_name

__all__ = [
    "approved_pending_tool_calls",
    "awaiting_approval_calls",
    "pending_tool_calls",
    "session_calls",
    "tool_output",
    "vouched_calls",
    "vouched_messages",
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


def _agent_messages(runs: Iterable[tuple[str | None, UIProjection]]) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """``(input client, message)`` of each agent message of ``runs``: an assistant entry no fork seed
    made (read as :meth:`UIProjection.messages` reads it: text flushed, a part may hold unread chunks)."""
    for run_owner, projection in runs:
        seeded = projection.seeded or ()
        for entry in projection.messages():
            message = entry.message
            if entry.codec_message_id not in seeded and message.get("role") == "assistant":
                yield run_owner, message


def vouched_calls(
    calls: list[dict[str, Any]], runs: Iterable[tuple[str | None, UIProjection]], owner: str | None
) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
    """``calls`` (:func:`session_calls`) split into the ones an agent may execute and the refused,
    each with why. ``runs``: ``(input client, projection)`` of each run of a conversation whose
    outputs came from trusted agents only; ``owner``: the input client of the run resuming.

    A call is executed only as the agent made it: a tool part of an agent message of a run of the
    same ``owner`` (the one whose approval counts), with that part's tool name and input. A fork
    seed's copy (``forkSeed``, :attr:`UIProjection.seeded`) is the client's word: a call only it
    holds, or a call of another member's run, is refused; a seeded copy of a real call runs with
    the agent's arguments, never the seed's.
    """
    made: dict[Any, list[tuple[str | None, dict[str, Any]]]] = {}
    for run_owner, message in _agent_messages(runs):
        parts = message.get("parts")
        for part in parts if isinstance(parts, list) else ():
            if is_tool_part(part) and type(part["toolCallId"]) is str:
                made.setdefault(part["toolCallId"], []).append((run_owner, part))
    kept: list[dict[str, Any]] = []
    refused: list[tuple[dict[str, Any], str]] = []
    for call in calls:
        call_id = call["toolCallId"]
        found = made.get(call_id, []) if type(call_id) is str else []
        part = next((p for o, p in found if o == owner), None)
        if part is None:
            why = "a call no agent message of this client's runs holds" if not found else "a call of another client's run"
            refused.append((call, why))
            continue
        name = tool_name(part)
        kept.append({**call, "toolName": name, "name": name, "input": part.get("input")})
    return kept, refused


def _signature(message: Any) -> tuple[Any, ...] | None:
    """What a copy of an agent message must keep: its metadata and every part as the agent made it
    (a tool call's type, id, tool name and input: its state and output are the client's
    resolutions; a text's or reasoning's streaming ``state`` and any ``providerMetadata`` are
    left out; a ``step-start`` marks a step boundary, no content); None: no parts list."""
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return None
    out: list[Any] = [repr(message.get("metadata"))]
    for part in parts:
        if not isinstance(part, dict):
            out.append(repr(part))
        elif is_tool_part(part):
            out.append((part.get("type"), part["toolCallId"], repr(part.get("toolName")), repr(part.get("input"))))
        elif part.get("type") != "step-start":
            out.append(tuple(sorted((k, repr(v)) for k, v in part.items() if k not in _CLIENT_KEYS)))
    return tuple(out)


#: Keys of a non-tool part that a client's copy may hold otherwise (streaming state, provider data).
_CLIENT_KEYS = frozenset({"state", "providerMetadata"})


def vouched_messages(
    messages: list[Any], seeded: Any, runs: Iterable[tuple[str | None, UIProjection]], owner: str | None
) -> tuple[list[Any], list[Any]]:
    """``messages`` (``CodecMessage`` s of one run) without the fork seed's entries (codec-message-ids
    in ``seeded``) that copy no agent message of a run of ``owner``: a seeded entry stays when an
    agent message of such a run (``runs``: ``(input client, projection)``, outputs from trusted agents
    only) has its ``id`` and the same parts (types, texts, tool calls and their inputs; a tool part's
    state and output may be the client's resolution). Returns ``(kept, dropped)``."""
    made: dict[Any, list[tuple[Any, ...] | None]] = {}
    for _owner, message in _agent_messages(r for r in runs if r[0] == owner):
        key = message.get("id")
        if isinstance(key, str):
            made.setdefault(key, []).append(_signature(message))
    kept: list[Any] = []
    dropped: list[Any] = []
    for m in messages:
        if m.codec_message_id not in seeded:
            kept.append(m)
            continue
        message = m.message
        key = message.get("id") if isinstance(message, dict) else None
        if isinstance(key, str) and message.get("role") == "assistant" and _signature(message) in made.get(key, ()):
            kept.append(m)
        else:
            dropped.append(m)
    return kept, dropped
