"""The contract between the framing activities and the workflow side (``activity-types.ts`` of 0.8.0).

Plain JSON-shaped dicts with the JS package's camelCase keys, so a payload crosses Temporal's data
converter unchanged and a workflow written against ``@ably/ai-transport/temporal/workflow`` can call
these Python activities (and the reverse): same activity type names (:data:`ACTIVITY_NAMES`), same
inputs, same result. Sandbox-safe: this module imports nothing but ``typing``.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from typing_extensions import NotRequired

__all__ = [
    "ACTIVITY_NAMES",
    "CleanupRunInput",
    "EndRunInput",
    "InvocationData",
    "OpenRunInput",
    "RunEndReason",
    "RunIdentity",
    "SuspendRunInput",
]

#: Activity type names the plugin registers, as in 0.8.0 (Python function -> Temporal name).
ACTIVITY_NAMES = {
    "open_run": "openRun",
    "end_run": "endRun",
    "suspend_run": "suspendRun",
    "cleanup_run": "cleanupRun",
}

RunEndReason = Literal["complete", "cancelled", "error"]


class InvocationData(TypedDict):
    """The wake-up body a client hands the agent: ``{inputEventId, sessionName}``."""

    inputEventId: str
    sessionName: str


class RunIdentity(TypedDict):
    """An open run's identity, returned by ``openRun`` and threaded through every later activity."""

    runId: str
    invocationId: str


class OpenRunInput(TypedDict):
    """Input of ``openRun``: the invocation, and the invocation id the run id is pinned to."""

    invocation: InvocationData
    invocationId: str


class EndRunInput(TypedDict):
    """Input of ``endRun``: the run, its invocation, the terminal reason (and error message)."""

    ids: RunIdentity
    invocation: InvocationData
    reason: RunEndReason
    errorMessage: NotRequired[str]


class SuspendRunInput(TypedDict):
    """Input of ``suspendRun``: the run and its invocation."""

    ids: RunIdentity
    invocation: InvocationData


class CleanupRunInput(TypedDict):
    """Input of ``cleanupRun``: the run, its invocation, and the failure message (default given)."""

    ids: RunIdentity
    invocation: InvocationData
    errorMessage: NotRequired[str]
