"""Approvals for calls the agent never made: ignored and counted, never fatal.

A ``tool-approval-response`` names a ``call_id`` (and the message holding the call); the agent runs
only ``function_call`` items of its own trusted output (:mod:`ai_transport.sessions.agent`), so an approval whose call is
not in the run's conversation runs nothing. Why it is missing decides what the agent does:

* the agent never published that call: a rogue ``ai-output`` declared it (0.8.0's JS view shows
  every publisher's output, so a user may approve it with the rest), or the owner's own client
  approved an id the run never made (a stale tab, a UI bug). The approval is **ignored and
  counted** (``session.skipped``, reason "approval of call … the agent never made"), once per wire;
  the run carries on with its other calls;
* the agent did publish it (a trusted, verified wire declared it: the ``function_call`` stream's
  codec ``item`` or a ``tool-approval-request``'s ``call_id``, seen live or in history), or the
  approval names an agent message that failed its integrity check, and the call is no longer in
  the conversation: the message was removed or rewritten. That is **reported as tampering**
  (104090 to the run's ``on_error`` hook / the session's ``error`` listeners, once per call) and the
  run still carries on with its other calls.

:class:`PublishedCalls` is the agent session's ledger of the call ids its trusted output declared.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .._shapes import MAPPING
from ..codec.headers import codec_headers, transport_headers
from ..errors import AITransportError, ErrorCode
from .lifecycle import OUTPUT_WIRE_NAMES

__all__ = ["PublishedCalls", "StrayApproval", "declared_call_id", "settle_stray_approvals", "stray_approvals"]

logger = logging.getLogger("ai_transport.sessions.agent")

_FN_ARGS: Final = "function_call_arguments"
_APPROVAL_REQUEST: Final = "tool-approval-request"


def declared_call_id(message: Mapping[str, Any]) -> str | None:
    """The ``call_id`` an ``ai-output`` wire declares: a ``function_call`` stream's codec ``item``
    (create, appends and aggregates repeat it), a ``tool-approval-request``'s codec ``call_id``, or
    (Vercel codec) a tool chunk's codec ``toolCallId``."""
    if message.get("name") not in OUTPUT_WIRE_NAMES:
        return None
    return _declared_call_id(message)


def _declared_call_id(message: Mapping[str, Any]) -> str | None:
    """:func:`declared_call_id` of a wire whose name was checked already (an output's)."""
    codec = codec_headers(message.get("extras"))
    kind = codec.get("kind")
    ui_call = codec.get("toolCallId")  # a UI message stream chunk of a tool call (Vercel codec)
    if isinstance(ui_call, str) and ui_call:
        return ui_call
    if kind == _APPROVAL_REQUEST:
        call_id = codec.get("call_id")
        return call_id if isinstance(call_id, str) and call_id else None
    if kind != _FN_ARGS:
        return None
    raw = codec.get("item")
    if not isinstance(raw, str):
        return None
    try:
        item = json.loads(raw)
    except (ValueError, RecursionError):  # (nested deeper than the parser goes: malformed too)
        return None
    call_id = item.get("call_id") if isinstance(item, dict) else None
    return call_id if isinstance(call_id, str) and call_id else None


class PublishedCalls:
    """Call ids declared by trusted agent output this session folded (live or from history), and
    the codec-message-ids of agent messages that failed the integrity check."""

    def __init__(self) -> None:
        self._calls: set[str] = set()
        self._tampered_messages: set[str] = set()

    def note(self, message: Mapping[str, Any]) -> None:
        """Record the call ``message`` (a trusted, folded agent output wire) declares, if any."""
        if message.get("name") not in OUTPUT_WIRE_NAMES:
            return  # (a lifecycle, lease or input wire declares no call: no further look)
        call_id = _declared_call_id(message)  # (the name checked above: not asked again)
        if call_id is not None:
            self._calls.add(call_id)

    def note_tampered(self, message: Mapping[str, Any]) -> None:
        """Record an agent message refused by the integrity check (its calls cannot be known)."""
        cmid = transport_headers(message.get("extras")).get("codec-message-id")
        if isinstance(cmid, str):
            self._tampered_messages.add(cmid)

    def published(self, call_id: str, codec_message_id: str | None) -> bool:
        """Whether the agent declared ``call_id``, or the approval names a tampered agent message."""
        return call_id in self._calls or (
            codec_message_id is not None and codec_message_id in self._tampered_messages
        )


@dataclass(frozen=True)
class StrayApproval:
    """An approval in a run whose call is not in the run's conversation."""

    call_id: str
    #: The codec-message-id the approval names (the message said to hold the call).
    codec_message_id: str | None
    #: Serial of the approval's wire.
    serial: str


def stray_approvals(tree: Any, run_id: str, messages: Iterable[Any]) -> list[StrayApproval]:
    """Approvals (``approved: true``) in run ``run_id`` whose ``function_call`` is not among
    ``messages`` (codec messages of the run's view), first approval of each call id."""
    entry = tree._nodes.get(run_id)
    if entry is None:
        return []
    approved: dict[str, StrayApproval] = {}
    for (direction, event), serial, _mid in entry.log.replay():
        payload = event.get("payload") if direction == "input" else None
        if event.get("kind") == "tool-approval-response" and isinstance(payload, MAPPING):
            call_id = payload.get("call_id", payload.get("toolCallId"))  # Responses / Vercel codec
            if payload.get("approved") is True and isinstance(call_id, str) and call_id not in approved:
                cmid = event.get("codecMessageId")
                approved[call_id] = StrayApproval(call_id, cmid if isinstance(cmid, str) else None, serial)
    if not approved:
        return []
    messages = list(messages)
    present = {
        item.get("call_id")
        for m in messages
        if not isinstance(m.message, MAPPING)
        for item in getattr(m.message, "items", ())
        if isinstance(item, MAPPING) and item.get("type") == "function_call"
    }
    present.update(  # a UIMessage (Vercel codec): its tool parts
        part.get("toolCallId")
        for m in messages
        if isinstance(m.message, MAPPING) and isinstance(m.message.get("parts"), list)
        for part in m.message["parts"]
        if isinstance(part, MAPPING) and "toolCallId" in part
    )
    return [a for c, a in approved.items() if c not in present]


def settle_stray_approvals(run: Any, messages: Iterable[Any]) -> None:
    """Handle each approval of ``run`` (an :class:`~ai_transport.sessions.agent_run.AgentRun`) whose call is not among
    ``messages`` once: ignored and counted (``session.skipped``) when the agent never made the call,
    reported as tampering (104090 to the run's ``on_error`` hook / the session's ``error``
    listeners, and :attr:`~ai_transport.sessions.agent_run.AgentRun.tampered_approvals`) when it did. Never raises."""
    session = run.session
    for stray in stray_approvals(session.tree, run.run_id, messages):
        if stray.call_id in run.strays_seen:
            continue
        run.strays_seen.add(stray.call_id)
        if not session.published_calls.published(stray.call_id, stray.codec_message_id):
            transport = {"run-id": run.run_id}
            session._skip(
                {"name": "ai-input", "serial": stray.serial, "extras": {"ai": {"transport": transport}}},
                f"approval of call {stray.call_id!r} the agent never made in run {run.run_id} (ignored)",
            )
            continue
        err = AITransportError(
            f"unable to execute approved call {stray.call_id} of run {run.run_id}; its function_call is "
            "not in the conversation (the agent's message was removed or rewritten); the run carries on "
            "without it",
            ErrorCode.TAMPERED_OUTPUT,
            500,
            run_id=run.run_id,
        )
        logger.error("%s", err.message)
        run.tampered_approvals.append(stray)
        run._report(err)
