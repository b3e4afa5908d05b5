"""Run read models: :class:`RunInfo`, :class:`StepInfo`, :class:`PipeResult` (``RunInfo`` etc. of 0.8.0)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["TERMINAL_STATUSES", "PipeResult", "RunInfo", "RunStatus", "StepInfo"]

RunStatus = Literal["active", "suspended", "complete", "cancelled", "error"]

#: Statuses after which a run is read-only.
TERMINAL_STATUSES: frozenset[str] = frozenset({"complete", "cancelled", "error"})


@dataclass(frozen=True)
class StepInfo:
    """One step of a run: ``status`` is ``active`` or its end reason (complete/failed/cancelled)."""

    step_id: str
    status: str
    attempt_count: int = 1
    step_client_id: str | None = None


@dataclass(frozen=True)
class RunInfo:
    """A run as seen on the channel: who started it, its invocation, steps and status.

    ``status`` is ``active`` | ``suspended`` | ``complete`` | ``cancelled`` | ``error``;
    ``error`` (an :class:`~ai_transport.errors.AITransportError`) only for ``error``.
    """

    run_id: str
    client_id: str
    invocation_id: str
    steps: list[StepInfo] = field(default_factory=list)
    status: RunStatus = "active"
    error: Any = None


@dataclass(frozen=True)
class PipeResult:
    """How a ``pipe`` ended: ``reason`` complete | cancelled | error, and the error if any."""

    reason: Literal["complete", "cancelled", "error"]
    error: BaseException | None = None
