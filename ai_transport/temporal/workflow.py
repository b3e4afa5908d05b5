"""The workflow half (``@ably/ai-transport/temporal/workflow`` of 0.8.0): :func:`open_run`, :func:`with_run`.

Import this from workflow code. It only schedules the framing activities the
:class:`~ai_transport.temporal.plugin.AblyTransportPlugin` registers (by their type names), so it is
deterministic and sandbox-safe: it imports ``temporalio`` and ``ai_transport.errors`` only, never the
channel or session code::

    @workflow.defn
    class Turn:
        @workflow.run
        async def run(self, invocation: dict) -> str:
            async def body(run: RunHandle) -> str:
                return await workflow.execute_activity(
                    my_inference, {"ids": run.ids, "invocation": invocation},
                    start_to_close_timeout=timedelta(minutes=5),
                )
            return await with_run(invocation, body)

Activity options: every framing activity gets the defaults (2 minutes, 3 attempts; cleanup: 30 s,
1 attempt), then ``activity_options["default"]``, then its own entry (``open_run``, ``end_run``,
``suspend_run``, ``cleanup_run``), each a dict of ``workflow.execute_activity`` keyword arguments.
They come from workflow code, not from the plugin, because the sandbox cannot read worker state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any, TypedDict, TypeVar, cast

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, FailureError

from ..errors import ErrorCode
from .types import ACTIVITY_NAMES, InvocationData, RunEndReason, RunIdentity

__all__ = [
    "CLEANUP_ACTIVITY_OPTIONS",
    "DEFAULT_ACTIVITY_OPTIONS",
    "RunActivityOptions",
    "RunHandle",
    "activity_options_for",
    "error_message_of",
    "open_run",
    "with_run",
]

T = TypeVar("T")


class RunActivityOptions(TypedDict, total=False):
    """Per-activity ``execute_activity`` keyword arguments, each merged over ``default``."""

    default: Mapping[str, Any]
    open_run: Mapping[str, Any]
    end_run: Mapping[str, Any]
    suspend_run: Mapping[str, Any]
    cleanup_run: Mapping[str, Any]


#: Applied to ``openRun``, ``endRun`` and ``suspendRun`` (0.8.0: 2 minutes, 3 attempts).
DEFAULT_ACTIVITY_OPTIONS: Mapping[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=2),
    "retry_policy": RetryPolicy(maximum_attempts=3),
}

#: Cleanup is best-effort and must not hold up a cancel: one attempt, 30 s.
CLEANUP_ACTIVITY_OPTIONS: Mapping[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=30),
    "retry_policy": RetryPolicy(maximum_attempts=1),
}


def activity_options_for(name: str, overrides: RunActivityOptions | None = None) -> dict[str, Any]:
    """The ``execute_activity`` keyword arguments of framing activity ``name`` (``open_run`` …):
    the SDK default, then ``overrides["default"]``, then ``overrides[name]``."""
    base = CLEANUP_ACTIVITY_OPTIONS if name == "cleanup_run" else DEFAULT_ACTIVITY_OPTIONS
    merged = dict(base)
    if overrides:
        given = cast("dict[str, Mapping[str, Any] | None]", dict(overrides))
        merged.update(given.get("default") or {})
        merged.update(given.get(name) or {})
    return merged


def error_message_of(error: BaseException) -> str:
    """The message to publish for a failed workflow body: the innermost cause's message (an
    ``ActivityError`` says only "Activity task failed"; its cause says why)."""
    if isinstance(error, asyncio.CancelledError):
        return "workflow cancelled"
    seen = error
    for _ in range(32):  # FailureError.cause / WorkflowFailureError.cause / __cause__, innermost
        cause = getattr(seen, "cause", None)
        if not isinstance(cause, BaseException):
            cause = seen.__cause__
        if cause is None:
            break
        seen = cause
    message = seen.message if isinstance(seen, FailureError) else str(seen)
    return message or type(seen).__name__


def _bad_argument(message: str) -> ApplicationError:
    """A caller's mistake fails the workflow at once (a plain exception would fail the workflow
    *task*, which Temporal retries forever)."""
    return ApplicationError(
        message, int(ErrorCode.INVALID_ARGUMENT), type="InvalidArgumentError", non_retryable=True
    )


def _invocation(invocation: Any) -> InvocationData:
    data = invocation
    if not isinstance(data, Mapping) and callable(getattr(invocation, "to_json", None)):
        data = invocation.to_json()
    if not isinstance(data, Mapping):
        raise _bad_argument(
            f"unable to open run; invocation must be a mapping {{inputEventId, sessionName}}, "
            f"got {type(invocation).__name__}"
        )
    for key in ("inputEventId", "sessionName"):
        if not isinstance(data.get(key), str) or not data.get(key):
            raise _bad_argument(f"unable to open run; invocation.{key} must be a non-empty string")
    return {"inputEventId": data["inputEventId"], "sessionName": data["sessionName"]}


_OPTION_KEYS = frozenset({"default", "open_run", "end_run", "suspend_run", "cleanup_run"})


def _check_options(options: RunActivityOptions | None) -> None:
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise _bad_argument(f"unable to open run; activity_options must be a mapping, got {type(options).__name__}")
    for key in options:
        if key not in _OPTION_KEYS:
            raise _bad_argument(
                f"unable to open run; activity_options[{key!r}] is not one of {sorted(_OPTION_KEYS)}"
            )


class RunHandle:
    """An open run held in workflow state: plain data (:attr:`ids`) plus calls that schedule the
    framing activities. It never holds a session; each activity builds and tears down its own."""

    def __init__(
        self, ids: RunIdentity, invocation: InvocationData, activity_options: RunActivityOptions | None
    ) -> None:
        #: ``{runId, invocationId}``: thread it through your own activities.
        self.ids: RunIdentity = ids
        #: The invocation this run serves.
        self.invocation: InvocationData = invocation
        self._options = activity_options

    async def _call(self, name: str, arg: Mapping[str, Any]) -> None:
        await workflow.execute_activity(ACTIVITY_NAMES[name], arg, **activity_options_for(name, self._options))

    async def end(self, reason: RunEndReason, error_message: str | None = None) -> None:
        """Publish ``ai-run-end`` (``endRun``: a fresh adopt + load; ending inside your inference
        activity, which has the run loaded already, is cheaper)."""
        arg: dict[str, Any] = {"ids": self.ids, "invocation": self.invocation, "reason": reason}
        if error_message is not None:
            arg["errorMessage"] = error_message
        await self._call("end_run", arg)

    async def suspend(self) -> None:
        """Publish ``ai-run-suspend`` (``suspendRun``; fails while a step is open)."""
        await self._call("suspend_run", {"ids": self.ids, "invocation": self.invocation})

    async def cleanup(self, error_message: str | None = None) -> None:
        """Best-effort: end the run ``error`` unless it already finished or is suspended (``cleanupRun``)."""
        arg: dict[str, Any] = {"ids": self.ids, "invocation": self.invocation}
        if error_message is not None:
            arg["errorMessage"] = error_message
        await self._call("cleanup_run", arg)


async def open_run(
    invocation: Any,
    *,
    invocation_id: str | None = None,
    activity_options: RunActivityOptions | None = None,
) -> RunHandle:
    """Open the run of ``invocation`` (``openRun``): a fresh turn publishes ``ai-run-start``, a
    continuation ``ai-run-resume``; returns a :class:`RunHandle`.

    ``invocation_id`` (default: the workflow id) is also the run id, so a retry re-enters the same
    run. It must be stable across retries and distinct per turn: a workflow serving several turns
    must pass a per-turn id, or every turn folds onto the first one's run.
    """
    data = _invocation(invocation)
    _check_options(activity_options)
    if invocation_id is not None and (not isinstance(invocation_id, str) or not invocation_id):
        raise _bad_argument("unable to open run; invocation_id must be a non-empty string")
    inv_id = invocation_id if invocation_id is not None else workflow.info().workflow_id
    ids = await workflow.execute_activity(
        ACTIVITY_NAMES["open_run"],
        {"invocation": data, "invocationId": inv_id},
        result_type=dict,
        **activity_options_for("open_run", activity_options),
    )
    return RunHandle({"runId": ids["runId"], "invocationId": ids["invocationId"]}, data, activity_options)


async def with_run(
    invocation: Any,
    body: Callable[[RunHandle], Awaitable[T]],
    *,
    invocation_id: str | None = None,
    activity_options: RunActivityOptions | None = None,
) -> T:
    """Open the run, run ``body(run)``, and if ``body`` raises (or the workflow is cancelled) make
    one best-effort attempt to close the run ``error`` so a waiting client unsticks; re-raise.

    The open is outside the ``try``: if it fails there is no run to clean up. The cleanup is
    shielded from cancellation, and its own failure is swallowed so ``body``'s error reaches
    Temporal unmasked. On success nothing is published: the application publishes its terminal
    (cheapest inside the activity that already has the run loaded).
    """
    run = await open_run(invocation, invocation_id=invocation_id, activity_options=activity_options)
    try:
        return await body(run)
    except BaseException as error:
        try:
            await asyncio.shield(asyncio.ensure_future(run.cleanup(error_message_of(error))))
        except BaseException:
            workflow.logger.warning("cleanupRun failed for run %s", run.ids["runId"])
        raise
