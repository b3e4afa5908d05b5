"""Run / step lifecycle messages and transport headers of ``@ably/ai-transport@0.8.0`` (pure).

Every message a session publishes carries its bookkeeping in the *transport tier*
(``extras.ai.transport``), a flat string-to-string map. This module is the single place that
builds and parses those maps:

* :func:`build_transport_headers` — the caller headers of ``ai-output`` (agent) and ``ai-input``
  (client) messages; the codec encoder adds ``stream`` / ``status`` / ``stream-id`` on top.
* :func:`build_lifecycle_headers` / :func:`build_step_headers` — ``ai-run-*`` / ``ai-step-*``.
* :func:`build_cancel_message` / :func:`read_cancel_target` — ``ai-cancel``.
* :func:`parse_run_lifecycle` / :func:`parse_step_lifecycle` — inbound lifecycle messages to
  :class:`RunLifecycleEvent` / :class:`StepLifecycleEvent`.

Key order inside each map follows 0.8.0 (``JSON.stringify`` of the extras is byte-identical).
No I/O; uuid generation is the only side effect (``event-id`` of a cancel).
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..codec.headers import NAME_INPUT, NAME_OUTPUT, build_extras, read_str, transport_headers
from ..errors import AITransportError, ErrorCode

__all__ = [
    "EVENT_AI_INPUT",
    "EVENT_AI_OUTPUT",
    "EVENT_CANCEL",
    "EVENT_RUN_END",
    "EVENT_RUN_RESUME",
    "EVENT_RUN_START",
    "EVENT_RUN_SUSPEND",
    "EVENT_STEP_END",
    "EVENT_STEP_START",
    "OUTPUT_WIRE_NAMES",
    "RUN_LIFECYCLE_NAMES",
    "STEP_LIFECYCLE_NAMES",
    "CancelTarget",
    "RunEndReason",
    "RunLifecycleEvent",
    "StepEndReason",
    "StepLifecycleEvent",
    "build_cancel_message",
    "build_lifecycle_headers",
    "build_lifecycle_message",
    "build_run_end_error",
    "build_step_headers",
    "build_transport_headers",
    "is_run_lifecycle_name",
    "is_step_lifecycle_name",
    "parse_run_lifecycle",
    "parse_step_lifecycle",
    "read_cancel_target",
    "read_step_headers",
    "step_end_reason_for",
]

# Message names
EVENT_AI_INPUT: Final = NAME_INPUT
EVENT_AI_OUTPUT: Final = NAME_OUTPUT
#: The names an agent output's wires carry: ``ai-output``, or none (a name-less append / update of one).
OUTPUT_WIRE_NAMES: Final = (EVENT_AI_OUTPUT, None, "")
EVENT_CANCEL: Final = "ai-cancel"
EVENT_RUN_START: Final = "ai-run-start"
EVENT_RUN_SUSPEND: Final = "ai-run-suspend"
EVENT_RUN_RESUME: Final = "ai-run-resume"
EVENT_RUN_END: Final = "ai-run-end"
EVENT_STEP_START: Final = "ai-step-start"
EVENT_STEP_END: Final = "ai-step-end"

# Transport header keys
H_STREAM: Final = "stream"
H_STATUS: Final = "status"
H_STREAM_ID: Final = "stream-id"
H_DISCRETE: Final = "discrete"
H_RUN_ID: Final = "run-id"
H_INVOCATION_ID: Final = "invocation-id"
H_EVENT_ID: Final = "event-id"
H_CODEC_MESSAGE_ID: Final = "codec-message-id"
H_RUN_CLIENT_ID: Final = "run-client-id"
H_INPUT_CLIENT_ID: Final = "input-client-id"
H_ROLE: Final = "role"
H_PARENT: Final = "parent"
H_FORK_OF: Final = "fork-of"
H_MSG_REGENERATE: Final = "msg-regenerate"
H_SUPERSEDES: Final = "supersedes"
H_RUN_REASON: Final = "run-reason"
H_STEP_ID: Final = "step-id"
H_STEP_START_SERIAL: Final = "step-start-serial"
H_STEP_REASON: Final = "step-reason"
H_STEP_CLIENT_ID: Final = "step-client-id"
H_INPUT_CODEC_MESSAGE_ID: Final = "input-codec-message-id"
H_STEER_CODEC_MESSAGE_IDS: Final = "steer-codec-message-ids"
H_ERROR_CODE: Final = "error-code"
H_ERROR_MESSAGE: Final = "error-message"

RunEndReason = Literal["complete", "cancelled", "error"]
StepEndReason = Literal["complete", "failed", "cancelled"]

#: The run lifecycle wire names (:func:`is_run_lifecycle_name`).
RUN_LIFECYCLE_NAMES: Final = frozenset({EVENT_RUN_START, EVENT_RUN_SUSPEND, EVENT_RUN_RESUME, EVENT_RUN_END})
#: The step lifecycle wire names (:func:`is_step_lifecycle_name`).
STEP_LIFECYCLE_NAMES: Final = frozenset({EVENT_STEP_START, EVENT_STEP_END})
#: Message name -> :attr:`RunLifecycleEvent.type`.
_RUN_TYPES: Final[dict[str, Literal["start", "resume", "suspend", "end"]]] = {
    EVENT_RUN_START: "start",
    EVENT_RUN_SUSPEND: "suspend",
    EVENT_RUN_RESUME: "resume",
    EVENT_RUN_END: "end",
}


def step_end_reason_for(reason: str) -> StepEndReason:
    """The step-end reason that matches a run/pipe reason (``error`` -> ``failed``)."""
    if reason == "cancelled":
        return "cancelled"
    if reason == "error":
        return "failed"
    return "complete"


# ---------------------------------------------------------------------------------------------
# Builders


def build_transport_headers(
    *,
    role: str,
    codec_message_id: str,
    run_id: str | None = None,
    run_client_id: str | None = None,
    parent: str | None = None,
    fork_of: str | None = None,
    regenerates: str | None = None,
    supersedes: str | None = None,
    invocation_id: str | None = None,
    input_client_id: str | None = None,
    input_codec_message_id: str | None = None,
    input_event_id: str | None = None,
    step_id: str | None = None,
    step_start_serial: str | None = None,
    step_client_id: str | None = None,
) -> dict[str, str]:
    """Transport headers of an ``ai-input`` / ``ai-output`` message (``buildTransportHeaders``).

    ``role`` and ``codec-message-id`` always; ``run-id``, ``run-client-id``, ``input-client-id``,
    ``input-codec-message-id`` and the step fields whenever not None (an empty string is kept);
    ``parent``, ``fork-of``, ``msg-regenerate``, ``supersedes``, ``invocation-id``, ``event-id`` only
    when non-empty.
    """
    h: dict[str, str] = {H_ROLE: role, H_CODEC_MESSAGE_ID: codec_message_id}
    if run_id is not None:
        h[H_RUN_ID] = run_id
    if run_client_id is not None:
        h[H_RUN_CLIENT_ID] = run_client_id
    if parent:
        h[H_PARENT] = parent
    if fork_of:
        h[H_FORK_OF] = fork_of
    if regenerates:
        h[H_MSG_REGENERATE] = regenerates
    if supersedes:
        h[H_SUPERSEDES] = supersedes
    if invocation_id:
        h[H_INVOCATION_ID] = invocation_id
    if input_client_id is not None:
        h[H_INPUT_CLIENT_ID] = input_client_id
    if input_codec_message_id is not None:
        h[H_INPUT_CODEC_MESSAGE_ID] = input_codec_message_id
    if input_event_id:
        h[H_EVENT_ID] = input_event_id
    if step_id is not None:
        h[H_STEP_ID] = step_id
    if step_start_serial is not None:
        h[H_STEP_START_SERIAL] = step_start_serial
    if step_client_id is not None:
        h[H_STEP_CLIENT_ID] = step_client_id
    return h


def build_lifecycle_headers(
    *,
    run_id: str,
    run_client_id: str,
    parent: str | None = None,
    fork_of: str | None = None,
    regenerates: str | None = None,
    invocation_id: str | None = None,
    input_client_id: str | None = None,
    input_codec_message_id: str | None = None,
    reason: str | None = None,
    error_code: int | None = None,
    error_message: str | None = None,
) -> dict[str, str]:
    """Transport headers of ``ai-run-start/resume/suspend/end`` (``buildLifecycleHeaders``).

    ``run-id`` and ``run-client-id`` always, then each other field when not None, in 0.8.0's order
    (``run-reason`` right after the ids; ``error-code``/``error-message`` last).
    """
    h: dict[str, str] = {H_RUN_ID: run_id, H_RUN_CLIENT_ID: run_client_id}
    if reason is not None:
        h[H_RUN_REASON] = reason
    if parent is not None:
        h[H_PARENT] = parent
    if fork_of is not None:
        h[H_FORK_OF] = fork_of
    if regenerates is not None:
        h[H_MSG_REGENERATE] = regenerates
    if invocation_id is not None:
        h[H_INVOCATION_ID] = invocation_id
    if input_client_id is not None:
        h[H_INPUT_CLIENT_ID] = input_client_id
    if input_codec_message_id is not None:
        h[H_INPUT_CODEC_MESSAGE_ID] = input_codec_message_id
    if error_code is not None:
        h[H_ERROR_CODE] = str(error_code)
    if error_message is not None:
        h[H_ERROR_MESSAGE] = error_message
    return h


def build_step_headers(
    *,
    run_id: str,
    step_id: str,
    step_start_serial: str | None = None,
    invocation_id: str | None = None,
    run_client_id: str | None = None,
    invocation_client_id: str | None = None,
    step_client_id: str | None = None,
    reason: str | None = None,
) -> dict[str, str]:
    """Transport headers of ``ai-step-start`` / ``ai-step-end`` (``buildStepHeaders``).

    ``invocation_client_id`` rides the ``input-client-id`` header. ``step-start-serial`` and
    ``step-reason`` belong to step-end only.
    """
    h: dict[str, str] = {H_RUN_ID: run_id, H_STEP_ID: step_id}
    if step_start_serial is not None:
        h[H_STEP_START_SERIAL] = step_start_serial
    if invocation_id is not None:
        h[H_INVOCATION_ID] = invocation_id
    if run_client_id is not None:
        h[H_RUN_CLIENT_ID] = run_client_id
    if invocation_client_id is not None:
        h[H_INPUT_CLIENT_ID] = invocation_client_id
    if step_client_id is not None:
        h[H_STEP_CLIENT_ID] = step_client_id
    if reason is not None:
        h[H_STEP_REASON] = reason
    return h


def build_lifecycle_message(name: str, headers: Mapping[str, str]) -> dict[str, Any]:
    """A data-less lifecycle message: ``{"name": name, "extras": {"ai": {"transport": headers}}}``."""
    return {"name": name, "extras": build_extras(headers)}


@dataclass(frozen=True)
class CancelTarget:
    """What an ``ai-cancel`` targets: a run id and/or the triggering input's codec-message-id."""

    run_id: str | None = None
    input_codec_message_id: str | None = None


def build_cancel_message(target: CancelTarget, *, event_id: str | None = None) -> dict[str, Any]:
    """The ``ai-cancel`` message: a fresh ``event-id`` then ``run-id`` / ``input-codec-message-id``."""
    if target.run_id is None and target.input_codec_message_id is None:
        raise AITransportError(
            "unable to cancel; a cancel needs a run_id or an input_codec_message_id",
            ErrorCode.INVALID_ARGUMENT,
        )
    h: dict[str, str] = {H_EVENT_ID: event_id or str(uuid.uuid4())}
    if target.run_id is not None:
        h[H_RUN_ID] = target.run_id
    if target.input_codec_message_id is not None:
        h[H_INPUT_CODEC_MESSAGE_ID] = target.input_codec_message_id
    return build_lifecycle_message(EVENT_CANCEL, h)


def read_cancel_target(message: Mapping[str, Any]) -> CancelTarget:
    """The target of an inbound ``ai-cancel`` (``event-id`` is not read: cancels are idempotent)."""
    h = transport_headers(message.get("extras"))
    return CancelTarget(read_str(h, H_RUN_ID), read_str(h, H_INPUT_CODEC_MESSAGE_ID))


# ---------------------------------------------------------------------------------------------
# Parsers


def is_run_lifecycle_name(name: Any) -> bool:
    """True for ``ai-run-start`` / ``-resume`` / ``-suspend`` / ``-end``."""
    return name in RUN_LIFECYCLE_NAMES


def is_step_lifecycle_name(name: Any) -> bool:
    """True for ``ai-step-start`` / ``ai-step-end``."""
    return name in STEP_LIFECYCLE_NAMES


def _js_to_number(raw: Any) -> int | float | None:
    """JS ``Number(raw)`` for a header string; None when missing or not finite."""
    if not isinstance(raw, str):
        return None
    text = raw.strip()
    if not text:
        return 0
    try:
        if re.fullmatch(r"[+-]?0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+", text):
            return int(text, 0)
        if "_" in text or not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
            return None
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return int(value) if value.is_integer() else value


def build_run_end_error(headers: Mapping[str, str]) -> AITransportError:
    """The error of a run that ended ``error``: ``error-code`` (default 104008), ``error-message``.

    The message defaults to ``agent reported an error``; status = code // 100 for 5-digit codes
    (below 60000), else 500 — as 0.8.0's ``buildRunEndError``.
    """
    code = _js_to_number(headers.get(H_ERROR_CODE))
    if code is None:
        code = int(ErrorCode.STREAM_ERROR)
    message = headers.get(H_ERROR_MESSAGE)
    if not isinstance(message, str):
        message = "agent reported an error"
    status = int(code // 100) if 10000 <= code < 60000 else 500
    return AITransportError(message, code, status_code=status)  # type: ignore[arg-type]


@dataclass
class RunLifecycleEvent:
    """A parsed run lifecycle message: ``type`` is ``start``/``resume``/``suspend``/``end``."""

    type: Literal["start", "resume", "suspend", "end"]
    run_id: str
    client_id: str = ""
    serial: str | None = None
    invocation_id: str = ""
    timestamp: int | None = None
    parent: str | None = None
    fork_of: str | None = None
    regenerates: str | None = None
    input_codec_message_id: str | None = None
    input_client_id: str | None = None
    reason: str | None = None
    error: AITransportError | None = None


@dataclass
class StepLifecycleEvent:
    """A parsed ``ai-step-start`` (``type="step-start"``) or ``ai-step-end`` (``"step-end"``)."""

    type: Literal["step-start", "step-end"]
    run_id: str
    step_id: str
    invocation_id: str = ""
    run_client_id: str = ""
    invocation_client_id: str = ""
    step_client_id: str = ""
    serial: str | None = None
    step_start_serial: str | None = None
    reason: str | None = None
    timestamp: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def parse_run_lifecycle(
    name: str, headers: Mapping[str, Any], serial: str | None = None, timestamp: int | None = None
) -> RunLifecycleEvent | None:
    """Parse a run lifecycle message (``parseRunLifecycle``); None without a ``run-id``.

    ``input_client_id`` is carried too (0.8.0 does not parse it; our agent uses it for trust).
    A missing ``run-reason`` reads as ``complete``. Each header is read once; a non-string value
    reads as missing.
    """
    get = headers.get
    run_id = get(H_RUN_ID)
    if not run_id or not isinstance(run_id, str):
        return None
    kind = _RUN_TYPES.get(name)
    if kind is None:
        return None
    client_id = get(H_RUN_CLIENT_ID)
    invocation_id = get(H_INVOCATION_ID)
    input_client_id = get(H_INPUT_CLIENT_ID)
    input_cmid = get(H_INPUT_CODEC_MESSAGE_ID)
    parent = fork_of = regenerates = reason = None
    error: AITransportError | None = None
    if kind == "start":
        parent, fork_of, regenerates = get(H_PARENT), get(H_FORK_OF), get(H_MSG_REGENERATE)
        parent = parent if isinstance(parent, str) else None
        fork_of = fork_of if isinstance(fork_of, str) else None
        regenerates = regenerates if isinstance(regenerates, str) else None
    elif kind == "end":
        reason = get(H_RUN_REASON)
        if not reason or not isinstance(reason, str):
            reason = "complete"
        elif reason == "error":
            error = build_run_end_error(headers)
    return RunLifecycleEvent(
        kind,
        run_id,
        client_id if isinstance(client_id, str) else "",
        serial,
        invocation_id if isinstance(invocation_id, str) else "",
        timestamp,
        parent,
        fork_of,
        regenerates,
        input_cmid if isinstance(input_cmid, str) else None,
        input_client_id if isinstance(input_client_id, str) else None,
        reason,
        error,
    )


def parse_step_lifecycle(
    name: str, headers: Mapping[str, Any], serial: str | None = None, timestamp: int | None = None
) -> StepLifecycleEvent | None:
    """Parse a step lifecycle message (``parseStepLifecycle``).

    None without ``run-id``/``step-id``, or for a step-end without ``step-start-serial``; a missing
    ``step-reason`` reads as ``complete`` (:func:`read_step_headers`).
    """
    read = read_step_headers(name, headers)
    if read is None:
        return None
    start, run_id, step_id, sss, reason = read
    get = headers.get
    invocation_id, run_client_id = get(H_INVOCATION_ID), get(H_RUN_CLIENT_ID)
    invocation_client_id, step_client_id = get(H_INPUT_CLIENT_ID), get(H_STEP_CLIENT_ID)
    return StepLifecycleEvent(
        "step-start" if start else "step-end",
        run_id,
        step_id,
        invocation_id if invocation_id and isinstance(invocation_id, str) else "",
        run_client_id if run_client_id and isinstance(run_client_id, str) else "",
        invocation_client_id if invocation_client_id and isinstance(invocation_client_id, str) else "",
        step_client_id if step_client_id and isinstance(step_client_id, str) else "",
        serial,
        sss,
        reason,
        timestamp,
    )


def read_step_headers(
    name: str, headers: Mapping[str, Any]
) -> tuple[bool, str, str, str | None, str | None] | None:
    """What the tree folds of a step lifecycle message, each header read once:
    ``(is step-start, run id, step id, step-start-serial, reason)`` — for a step-start the last
    two are None, for a step-end the reason defaults to ``complete`` — or None when
    :func:`parse_step_lifecycle` answers None."""
    if name == EVENT_STEP_START:
        start = True
    elif name == EVENT_STEP_END:
        start = False
    else:
        return None
    get = headers.get
    run_id, step_id = get(H_RUN_ID), get(H_STEP_ID)
    if not run_id or not step_id or not isinstance(run_id, str) or not isinstance(step_id, str):
        return None
    if start:
        return True, run_id, step_id, None, None
    sss = get(H_STEP_START_SERIAL)
    if not sss or not isinstance(sss, str):
        return None
    reason = get(H_STEP_REASON)
    return False, run_id, step_id, sss, reason if reason and isinstance(reason, str) else "complete"
