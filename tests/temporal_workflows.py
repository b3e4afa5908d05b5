"""Workflows the Temporal tests run (a module of their own: the workflow sandbox re-imports it)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ai_transport.temporal.workflow import RunHandle, with_run


@workflow.defn(name="WithRunProbe")
class WithRunProbe:
    """``with_run`` around a body chosen by ``args["mode"]``: ``ok`` returns, ``fail`` runs an activity
    that fails for good, ``wait`` waits until cancelled."""

    def __init__(self) -> None:
        self._stage = "opening"

    @workflow.query
    def stage(self) -> str:
        """``opening`` until the run is open, then ``body``."""
        return self._stage

    @workflow.run
    async def run(self, args: dict[str, Any]) -> str:
        async def body(run: RunHandle) -> str:
            self._stage = "body"
            mode = args["mode"]
            if mode == "fail":
                await workflow.execute_activity(
                    "boom", "model unavailable", start_to_close_timeout=timedelta(seconds=10),
                    retry_policy=RetryPolicy(maximum_attempts=1),
                )
            elif mode == "wait":
                await workflow.wait_condition(lambda: False)
            return f"done:{run.ids['runId']}"

        return await with_run(
            args["invocation"], body,
            invocation_id=args.get("invocationId"),
            activity_options=(
                {"default": {"start_to_close_timeout": timedelta(seconds=args["timeoutSeconds"])}}
                if "timeoutSeconds" in args
                else {args["badOptions"]: {}}
                if "badOptions" in args
                else None
            ),
        )


@workflow.defn(name="FramingProbe")
class FramingProbe:
    """The framing activities from workflow code: ``end`` publishes ``ai-run-end``, ``suspend``
    ``ai-run-suspend``; ``suspend_then_fail`` suspends and then fails the body (cleanup is gated)."""

    @workflow.run
    async def run(self, args: dict[str, Any]) -> str:
        async def body(run: RunHandle) -> str:
            mode = args["mode"]
            if mode == "end":
                await run.end("complete")
            else:
                await run.suspend()
            if mode == "suspend_then_fail":
                raise ApplicationError("failed after suspending", non_retryable=True)
            return str(mode)

        return await with_run(
            args["invocation"], body,
            activity_options={"default": {"start_to_close_timeout": timedelta(seconds=30)}},
        )


@workflow.defn(name="WithRunProbe")
class SkipsCleanupProbe:
    """``WithRunProbe`` as it would be if ``with_run`` forgot its cleanup (the replay test's control):
    opens the run, fails the body, schedules no ``cleanupRun``."""

    @workflow.run
    async def run(self, args: dict[str, Any]) -> str:
        ids = await workflow.execute_activity(
            "openRun", {"invocation": args["invocation"], "invocationId": workflow.info().workflow_id},
            result_type=dict, start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
        await workflow.execute_activity(
            "boom", "model unavailable", start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
        return str(ids)
