"""Signed run output: integrity of an agent's messages beyond what Ably enforces.

History returns one aggregate per message, so an append someone else made to the agent's stream is
merged into the text and, when the agent appended after it, not even visible in
``version.clientId``. With ``AgentSession(..., signing_key=...)`` the agent tags every message it
finishes — the closing append of a stream (``complete`` or ``cancelled``) and every discrete output —
with a keyed digest (HMAC-SHA256) of the content history will return for it: the name, the whole
data, and both header tiers (minus the tag itself). The tag rides the transport header
:data:`SIGNATURE_HEADER`, which ``@ably/ai-transport@0.8.0`` ignores: its decoder and tree read
transport headers by name only (``src/core/codec/decoder.ts`` reads ``stream`` / ``status`` /
``stream-id``, ``src/core/codec/define-codec.ts`` ``run-id``, ``src/core/transport/tree.ts`` the
lifecycle ids), and the codec tier is read field by field from the codec's own descriptors; an
unknown key is only ever copied along. ``tests/test_session_emulator.py`` shows a JS client's view
of a signed run equal to the Python client's.

A resuming agent verifies every ``ai-output`` it folds from history; one that fails (or carries no
tag: a tag can be stripped by whoever rewrote the extras) is not folded and is reported
(``AgentSession.tampered``), and the run's model input / owed calls raise
:data:`~ai_transport.errors.ErrorCode.TAMPERED_OUTPUT` naming it. Not covered: streams the agent
never finished (crashed mid-stream) and encoder recovery updates carry no tag, so they are reported
too; the key is symmetric (clients cannot verify, only agents holding the key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any, Final

from .._shapes import MAPPING
from ..codec.headers import NAME_OUTPUT, codec_headers, transport_headers
from ..errors import AITransportError, ErrorCode

__all__ = [
    "SIGNATURE_HEADER",
    "HistoryIntegrity",
    "OutputSigner",
    "content_digest",
    "missing_approved_calls",
    "verify_output",
]

#: Transport header carrying the digest (``v1.<base64url>``); unknown to 0.8.0, so ignored there.
SIGNATURE_HEADER: Final = "x-ait-sig"

_TERMINAL = ("complete", "cancelled")


def _data_form(data: Any) -> Any:
    if isinstance(data, (bytes, bytearray)):
        return {"b64": base64.b64encode(bytes(data)).decode()}
    return data


def content_digest(key: bytes, name: Any, data: Any, extras: Any) -> str:
    """``v1.`` + base64url(HMAC-SHA256(key, canonical JSON of [name, data, transport, codec])), the
    transport tier without :data:`SIGNATURE_HEADER`."""
    transport = {k: v for k, v in transport_headers(extras).items() if k != SIGNATURE_HEADER}
    payload = json.dumps(
        [name, _data_form(data), transport, dict(codec_headers(extras))],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    mac = hmac.new(key, payload.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()
    return "v1." + base64.urlsafe_b64encode(mac).decode().rstrip("=")


def verify_output(key: bytes, message: Mapping[str, Any]) -> bool:
    """True when ``message`` (a history aggregate of an ``ai-output``) carries a valid tag."""
    tag = transport_headers(message.get("extras")).get(SIGNATURE_HEADER)
    if not isinstance(tag, str):
        return False
    data = message.get("data")
    if data is None and transport_headers(message.get("extras")).get("stream") == "true":
        data = ""
    expected = content_digest(key, message.get("name"), data, message.get("extras"))
    return hmac.compare_digest(expected, tag)


class OutputSigner:
    """The encoder hook that tags finished messages (installed by :class:`~.agent_run.AgentRun`).

    Tracks each stream's fragments by serial, so the closing append carries the digest of the
    whole text history will hold.
    """

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._streams: dict[str, list[str]] = {}

    def on_message(self, message: dict[str, Any]) -> None:
        """Tag ``message`` in place when it finishes a message (see the module docstring)."""
        extras = message.get("extras")
        transport = transport_headers(extras)
        if not isinstance(transport, dict):
            return
        serial = message.get("serial")
        if isinstance(serial, str):  # an append to a stream
            fragments = self._streams.setdefault(serial, [])
            data = message.get("data")
            if isinstance(data, str):
                fragments.append(data)
            if transport.get("status") in _TERMINAL:
                transport[SIGNATURE_HEADER] = content_digest(self._key, NAME_OUTPUT, "".join(fragments), extras)
                del self._streams[serial]
            return
        if transport.get("stream") == "true":
            return  # a stream's create: tagged when it closes
        transport[SIGNATURE_HEADER] = content_digest(self._key, message.get("name"), message.get("data"), extras)


class HistoryIntegrity:
    """What a resuming agent checks before folding an ``ai-output`` aggregate from history.

    Without a key: an aggregate whose last mutator (``version.clientId``) is not a trusted agent is
    tampered. With a key: also one without a valid :data:`SIGNATURE_HEADER` tag. Tampered messages
    are kept in :attr:`tampered` (reported by the runs whose conversation they belong to).
    """

    def __init__(self, key: bytes | str | None, trusted_agent_ids: set[Any]) -> None:
        self.key = key.encode() if isinstance(key, str) else key
        #: The encoder hook that tags this agent's own finished messages (None without a key).
        self.signer = OutputSigner(self.key) if self.key else None
        self._trusted = trusted_agent_ids
        #: Agent messages from history that failed the check (most recent last).
        self.tampered: list[Mapping[str, Any]] = []
        self._reasons: list[str] = []

    def record(self, message: Mapping[str, Any], reason: str) -> None:
        """Keep a tampered message (and why) for the runs to report."""
        self.tampered.append(message)
        self._reasons.append(reason)

    def check_runs(self, run_ids: set[str], for_run: str) -> None:
        """Raise :data:`~ai_transport.errors.ErrorCode.TAMPERED_OUTPUT` when a tampered message
        belongs to one of ``run_ids`` (the conversation ``for_run`` answers), or to no known run (a
        rewrite can strip the headers: the whole conversation is then suspect)."""
        for message, reason in zip(self.tampered, self._reasons):
            headers = transport_headers(message.get("extras"))
            if headers.get("run-id") in run_ids or not isinstance(headers.get("run-id"), str):
                raise AITransportError(
                    f"unable to use the conversation of run {for_run}; agent message "
                    f"{headers.get('codec-message-id')!r} (serial {message.get('serial')!r}) of run "
                    f"{headers.get('run-id')!r} was tampered with: {reason}",
                    ErrorCode.TAMPERED_OUTPUT,
                    500,
                    serial=message.get("serial"),
                    run_id=headers.get("run-id"),
                )

    def problem(self, message: Mapping[str, Any]) -> str | None:
        """Why ``message`` (a history aggregate) must not be folded, or None."""
        if message.get("name") != NAME_OUTPUT or message.get("clientId") not in self._trusted:
            return None
        version = message.get("version")
        mutator = version.get("clientId") if isinstance(version, MAPPING) else None
        action = message.get("action")
        mutated = action not in (None, "message.create", 0)
        if mutated and mutator not in self._trusted:
            return f"agent message last modified by {mutator!r}, not a trusted agent identity"
        if self.key and not verify_output(self.key, message):
            return "agent message fails its signing_key check (content changed, or tag missing)"
        return None


def missing_approved_calls(tree: Any, run_id: str, messages: list[Any]) -> list[str]:
    """Call ids the owner approved in run ``run_id`` whose ``function_call`` is not among
    ``messages`` (codec messages of the run's view): the approval would otherwise be lost."""
    entry = tree._nodes.get(run_id)
    if entry is None:
        return []
    approved: list[str] = []
    for (direction, event), _serial, _mid in entry.log.replay():
        payload = event.get("payload") if direction == "input" else None
        if event.get("kind") == "tool-approval-response" and isinstance(payload, MAPPING):
            call_id = payload.get("call_id")
            if payload.get("approved") is True and isinstance(call_id, str) and call_id not in approved:
                approved.append(call_id)
    present = {
        item.get("call_id")
        for m in messages
        for item in getattr(m.message, "items", ())
        if isinstance(item, MAPPING) and item.get("type") == "function_call"
    }
    return [c for c in approved if c not in present]
