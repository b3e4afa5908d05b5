"""The Temporal worker plugin (``createAblyTransportPlugin`` of 0.8.0).

Registers the four framing activities so an application never writes or names them, and lets
``ai_transport`` through the workflow sandbox (its workflow half, :mod:`ai_transport.temporal.workflow`,
is imported by your workflow module; passing it through means it is imported once, outside the
sandbox, instead of once per workflow run)::

    worker = Worker(
        client,
        task_queue="agent",
        workflows=[MyTurn],
        activities=[my_inference, my_tool],
        plugins=[AblyTransportPlugin(lambda name: AblyChannel.connect(name, key=KEY, client_id="agent"))],
    )
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from ..sessions.view import DEFAULT_HISTORY_PAGE_SIZE
from .activities import (
    DEFAULT_MAX_HISTORY_PAGES,
    ChannelFactory,
    FramingActivities,
    create_framing_activities,
)

__all__ = ["PLUGIN_NAME", "AblyTransportPlugin"]

#: The plugin's name in Temporal's worker diagnostics.
PLUGIN_NAME = "ai_transport.AblyTransportPlugin"


def _pass_through(runner: WorkflowRunner | None) -> WorkflowRunner:
    runner = runner or SandboxedWorkflowRunner()
    if isinstance(runner, SandboxedWorkflowRunner):
        restrictions = runner.restrictions.with_passthrough_modules("ai_transport")
        return dataclasses.replace(runner, restrictions=restrictions)
    return runner


class AblyTransportPlugin(SimplePlugin):
    """A ``temporalio`` worker plugin registering ``openRun``, ``endRun``, ``suspendRun``, ``cleanupRun``.

    Args:
        create_channel: ``session_name -> Channel`` (or awaitable) — called once per activity, the
            channel closed before it returns; every channel must carry the agent's one identity.
        codec: the codec (default: the Responses codec).
        heartbeat: heartbeat while framing activities run (default off).
        max_history_pages / history_page_size: how far ``openRun`` pages history for its trigger.
        session_options: extra ``AgentSession`` keyword arguments (trust settings).

    Your own activities go in ``Worker(activities=...)`` as usual; the plugin appends its four. A
    name clash with them is an error from the worker (0.8.0 silently prefers the plugin's).
    """

    def __init__(
        self,
        create_channel: ChannelFactory,
        *,
        codec: Any = None,
        heartbeat: bool = False,
        max_history_pages: int = DEFAULT_MAX_HISTORY_PAGES,
        history_page_size: int = DEFAULT_HISTORY_PAGE_SIZE,
        session_options: Mapping[str, Any] | None = None,
    ) -> None:
        #: The framing activities this plugin registers.
        self.framing: FramingActivities = create_framing_activities(
            create_channel,
            codec=codec,
            heartbeat=heartbeat,
            max_history_pages=max_history_pages,
            history_page_size=history_page_size,
            session_options=session_options,
        )
        framing = self.framing.all

        def add_activities(existing: Sequence[Callable[..., Any]] | None) -> Sequence[Callable[..., Any]]:
            return [*(existing or ()), *framing]

        super().__init__(PLUGIN_NAME, activities=add_activities, workflow_runner=_pass_through)
