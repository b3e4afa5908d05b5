"""The demo's agent as a durable Temporal workflow: one :class:`WeatherTurn` workflow per wake-up.

The same turn as :class:`~ai_transport.cli.agent.ToolAgent`, cut along Temporal's seams:

* ``openRun`` (the plugin's framing activity) opens or resumes the run;
* ``agentTurn`` (:meth:`WeatherActivities.agent_turn`, the inference activity) adopts the run, and
  either reports calls the client approved (owed), suspends on a call still waiting for the
  client, or calls the model and streams its turn through ``step.pipe`` under
  ``step_id_for(invocation_id)`` — so when Temporal retries it (a worker died mid-stream, the model
  failed) the retry replaces the failed attempt in every view; it ends or suspends the run itself
  (cheapest: it has the run loaded) or hands the ungated tool calls back to the workflow;
* ``runTool`` (:meth:`WeatherActivities.run_tool`) runs one call and publishes its output;
* a failure anywhere ends the run ``error`` (``with_run``'s ``cleanupRun``), so the client unsticks.

Nothing about the conversation lives in the workflow: each activity re-reads the channel. Used by
``ai-transport demo --temporal`` and ``examples/temporal``.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..temporal.workflow import RunHandle, with_run

__all__ = [
    "AGENT_TURN",
    "RUN_TOOL",
    "TURN_ACTIVITY_OPTIONS",
    "WeatherActivities",
    "WeatherTurn",
    "turn_workflow_id",
]

#: Activity type names of the demo agent's own activities.
AGENT_TURN = "agentTurn"
RUN_TOOL = "runTool"

#: Model turns per wake-up at most.
MAX_TURNS = 4

#: The inference activity heartbeats every second while it streams; a worker that dies mid-stream
#: misses its heartbeats and Temporal retries the activity elsewhere after ``heartbeat_timeout``.
TURN_ACTIVITY_OPTIONS: Mapping[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=5),
    "heartbeat_timeout": timedelta(seconds=5),
    "retry_policy": RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1)),
}
TOOL_ACTIVITY_OPTIONS: Mapping[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=1),
    "retry_policy": RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1)),
}


def turn_workflow_id(invocation: Mapping[str, Any]) -> str:
    """The workflow id of the wake-up for ``invocation``: ``turn-<inputEventId>``. Deterministic, so
    with ``WorkflowIDReusePolicy.REJECT_DUPLICATE`` a duplicate wake-up for the same input is refused
    by Temporal instead of running twice."""
    return f"turn-{invocation['inputEventId']}"


@workflow.defn(name="WeatherTurn")
class WeatherTurn:
    """One wake-up of the weather agent: open the run, loop inference / tools, leave it ended or
    suspended; returns how it was left (``suspended``, ``complete``, ``cancelled``), or ``yielded``
    when another workflow woken for the same run holds its calls and carries it on."""

    @workflow.run
    async def run(self, invocation: dict[str, Any]) -> str:
        """The workflow body (see the module docstring)."""

        async def turn(run: RunHandle) -> dict[str, Any]:
            result: dict[str, Any] = await workflow.execute_activity(
                AGENT_TURN, {"ids": run.ids, "invocation": run.invocation}, result_type=dict,
                **TURN_ACTIVITY_OPTIONS,
            )
            return result

        async def body(run: RunHandle) -> str:
            outcome = await turn(run)
            for _ in range(MAX_TURNS):
                if outcome["kind"] != "tools":
                    return str(outcome["kind"])
                for call in outcome["calls"]:
                    await workflow.execute_activity(
                        RUN_TOOL, {"ids": run.ids, "invocation": run.invocation, "call": call},
                        **TOOL_ACTIVITY_OPTIONS,
                    )
                outcome = await turn(run)
            await run.end("complete")
            return "complete"

        return await with_run(invocation, body)


class WeatherActivities:
    """The weather agent's inference and tool activities (register :attr:`all` on a worker).

    Args:
        create_channel: ``session_name -> Channel`` (or awaitable), one per activity, closed after;
            the same agent identity as the plugin's factory.
        responses: a :class:`~ai_transport.responses.ResponsesClient`; ``model`` its model name.
        reasoning: the ``reasoning`` request option, if any.
        tools / gated / execute / instructions: as :class:`~ai_transport.cli.agent.ToolAgent`.
        heartbeat_interval: seconds between heartbeats while a turn streams.
    """

    def __init__(
        self,
        create_channel: Callable[[str], Any],
        responses: Any,
        model: str,
        *,
        reasoning: Mapping[str, Any] | None = None,
        tools: Iterable[Mapping[str, Any]] | None = None,
        gated: Iterable[str] | None = None,
        execute: Callable[[str, str], str] | None = None,
        instructions: str | None = None,
        heartbeat_interval: float = 1.0,
    ) -> None:
        from .scenario import GATED_TOOLS, INSTRUCTIONS, WEATHER_TOOL, run_tool

        self.create_channel = create_channel
        self.responses = responses
        self.model = model
        self.reasoning = dict(reasoning) if reasoning else None
        self.tools = [dict(t) for t in (tools if tools is not None else (WEATHER_TOOL,))]
        self.gated = frozenset(gated if gated is not None else GATED_TOOLS)
        self.execute = execute or run_tool
        self.instructions = instructions if instructions is not None else INSTRUCTIONS
        self.heartbeat_interval = heartbeat_interval
        #: Model calls made by this process (for the demo's summary line).
        self.model_calls = 0

    @property
    def all(self) -> list[Callable[..., Any]]:
        """``agentTurn`` and ``runTool``, ready for ``Worker(activities=...)``."""

        @activity.defn(name=AGENT_TURN)
        async def agent_turn(input: dict[str, Any]) -> dict[str, Any]:
            return await self.agent_turn(input)

        @activity.defn(name=RUN_TOOL)
        async def run_tool(input: dict[str, Any]) -> None:
            await self.run_tool(input)

        return [agent_turn, run_tool]

    @contextlib.asynccontextmanager
    async def _adopted(self, input: Mapping[str, Any]) -> AsyncIterator[Any]:
        """The run, adopted and loaded on a fresh session; None when another worker has already
        suspended or ended it (``load()`` refuses such a run). Its claims are the workflow's: the
        claimant is the workflow's invocation id, the same in every activity and retry of it."""
        from ..conversation.run import TERMINAL_STATUSES
        from ..errors import InvalidArgumentError
        from ..sessions.agent import AgentSession
        from ..sessions.invocation import Invocation
        from ..temporal.activities import adopt_and_load

        inv = Invocation.from_json(input["invocation"])
        channel = self.create_channel(inv.session_name)
        if inspect.isawaitable(channel):
            channel = await channel
        session = AgentSession(channel)
        try:
            await session.connect()
            try:
                run = await adopt_and_load(session, inv, input["ids"])
            except InvalidArgumentError:
                node = session.tree.get_run_node(str(input["ids"]["runId"]))
                if node is None or (node.status != "suspended" and node.status not in TERMINAL_STATUSES):
                    raise
                run = None
            if run is not None:
                run.claimant = str(input["ids"]["invocationId"])
            yield run
        finally:
            await session.close()
            await channel.close()

    async def agent_turn(self, input: Mapping[str, Any]) -> dict[str, Any]:
        """One inference step; returns ``{"kind": "tools", "calls": [...]}`` (calls for the workflow
        to run), ``{"kind": "suspended" | "complete" | "cancelled"}`` (the run was left so), or
        ``{"kind": "yielded"}`` (another workflow holds the run's calls, see :mod:`..sessions.claims`)."""
        from ..readers.hygiene import sanitize_input
        from ..temporal.heartbeat import heartbeating
        from ..temporal.step_id import step_id_for
        from .agent import closing, gate_calls

        async with self._adopted(input) as run:
            if run is None:  # another worker carried the run on (a duplicate wake-up)
                return {"kind": "yielded"}
            await run.view.load_all()  # the whole conversation: the model's input
            owed = run.owed_calls()
            if owed is None:  # a call still waits for the client
                await run.suspend()
                return {"kind": "suspended"}
            # Claim the approved calls (and the input that woke a resumed run): of several workflows
            # woken for the same run, one executes each call and carries the run on.
            held = await run.claim_calls(owed)
            if run.yielded:
                return {"kind": "yielded"}
            if held:  # approved calls to execute first
                return {"kind": "tools", "calls": [_call(c) for c in held]}
            options: dict[str, Any] = {}
            if self.reasoning:
                options["reasoning"] = self.reasoning
                options["include"] = ["reasoning.encrypted_content"]
            self.model_calls += 1
            step = run.create_step(step_id=step_id_for(input["ids"]["invocationId"]))
            await step.start()
            async with closing(self.responses.stream(
                self.model, input=sanitize_input(run.input_items(), store=False).input,
                instructions=self.instructions, tools=self.tools, **options,
            )) as stream, heartbeating(interval=self.heartbeat_interval):
                result = await step.pipe(gate_calls(stream, self.gated))  # the stream closed even if cancelled
            await step.end()
            if result.reason == "error":
                # Let Temporal retry: the next attempt of this step replaces this one's output.
                raise ApplicationError(f"model turn failed: {result.error}", type="ModelTurnFailed")
            if result.reason == "cancelled":
                await run.end("cancelled")
                return {"kind": "cancelled"}
            unanswered = run.unanswered_calls()
            ungated = [c for c in unanswered if c.get("name") not in self.gated]
            if ungated:
                return {"kind": "tools", "calls": [_call(c) for c in ungated]}
            if unanswered:
                await run.suspend()
                return {"kind": "suspended"}
            await run.end("complete")
            return {"kind": "complete"}

    async def run_tool(self, input: Mapping[str, Any]) -> None:
        """Run one call (``input["call"]``: ``call_id``, ``name``, ``arguments``) and publish its
        output in a step of its own (a retry replaces a half-published attempt)."""
        from ..readers.calls import resolved_call_ids
        from ..sessions.tools import function_call_output
        from ..temporal.step_id import step_id_for

        call = dict(input["call"])
        async with self._adopted(input) as run:
            if run is None or call.get("call_id") in resolved_call_ids(run.branch_messages()):
                return  # finished elsewhere, or this activity's earlier attempt published the output
            try:
                output = self.execute(str(call.get("name", "")), str(call.get("arguments", "")))
            except Exception as e:
                output = f"error: {e}"
            step = run.create_step(step_id=step_id_for(input["ids"]["invocationId"]))
            await step.start()
            try:
                await step.send(function_call_output(call, output))
            finally:
                await step.end()


def _call(item: Mapping[str, Any]) -> dict[str, Any]:
    return {"call_id": item.get("call_id", ""), "name": item.get("name", ""), "arguments": item.get("arguments", "")}
