"""The OpenAI Agents SDK over ai_transport: an Agents SDK agent streams to ``@ably/ai-transport``
clients, suspends on a tool that needs approval, and is resumed statelessly by any worker.

Install with ``pip install 'ai-transport[agents]'`` (``openai-agents>=0.13``: the first release whose
``RunState.reject`` takes a ``rejection_message``; tested on 0.13.0 with openai 2.26.0 and on 0.24.0
with openai 3.57.0).

One wake-up of a worker (the invocation a client's input produced)::

    session = AgentSession(channel)
    await session.connect()
    run = await session.create_run(invocation)
    await run.start()               # ai-run-start, or ai-run-resume after an approval
    await run.view.load_all()       # the conversation so far: the only state there is
    outcome = await run_agent(run, triage_agent)   # "suspended" | "complete" | "cancelled" | "error"

:func:`run_agent` does, for one wake-up:

1. **Stay suspended** while a call still waits for a client (``run.owed_calls()`` is None).
2. **Execute approved calls exactly once** through :meth:`AgentRun.run_owed_calls` (each output is
   published before the SDK continues), with the agent's own function tool, invoked the SDK's way.
   Where ``run_owed_calls`` claims the calls on the channel (durable runs), a worker that lost the
   claims stops here (``yielded``): the SDK never runs there, so no tool runs twice.
3. **Rebuild the SDK's input from the channel**: the conversation before the turn the run suspended
   on (:func:`~ai_transport.readers.to_responses_input` + replay hygiene for ``store: false``), and
   that turn itself, *replayed* to the SDK by a model that answers with the recorded items
   (:class:`~ai_transport.integrations.agents_replay.ReplayModel`; nothing is re-asked or re-published).
   The SDK stops on the same approval interruptions; the browser's decisions are applied to them with
   ``RunState.approve`` / ``RunState.reject(rejection_message=<the client's reason>)``, and the run
   continues from that state (``Runner.run_streamed(agent, state)``). Function tools answer from the
   channel whenever it already holds their output, so a resumed run never runs a tool twice.
4. **Pipe** ``Runner.run_streamed(...)`` onto the run (:func:`pipe_streamed`): each model turn's
   raw Responses events go through the codec as one message (the wire a JS client expects); the
   SDK's approval interruptions become ``tool-approval-request`` events on that same message; tool
   and handoff outputs the SDK produced are published after it, one message each.
5. **Leave the run** suspended (calls wait for approval), complete, cancelled (a client's
   ``ai-cancel``: the SDK run is cancelled and the open streams closed ``cancelled``) or error.

Handoffs are one conversation: the handoff call and its output are items of the run, the next
agent's turns are messages of the same run; on a later wake-up the agent holding the conversation
is found by following the handoff calls from the starting agent.

Reasoning models: give the agents ``ModelSettings(store=False, response_include=
["reasoning.encrypted_content"])`` so reasoning items carry their encrypted content and can be
replayed from the channel (``store: false``: nothing is kept by OpenAI between wake-ups either).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping, MutableSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents import Agent, RunConfig, Runner
from agents.items import ToolApprovalItem
from agents.result import RunResultStreaming

from ..conversation.run import PipeResult
from ..readers.calls import to_responses_input
from ..readers.hygiene import sanitize_input
from ..sessions.tools import function_call_output
from .agents_replay import (
    REPLAY_RESPONSE_PREFIX,
    AgentGraph,
    ChannelRecord,
    ReplayModel,
    execute_call,
    recorded_outputs,
)

if TYPE_CHECKING:
    from ..sessions.agent_run import AgentRun

__all__ = ["StreamedPipeResult", "pipe_streamed", "run_agent"]

logger = logging.getLogger("ai_transport.integrations.openai_agents")

_END = object()
_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


@dataclass
class StreamedPipeResult:
    """How :func:`pipe_streamed` left an SDK run: ``reason`` (``complete`` — the SDK run finished or
    stopped for approvals —, ``cancelled`` or ``error``), the ``error``, the SDK's ``interruptions``
    and, of those, the ``pending`` ones (no decision on the channel: a client must answer)."""

    reason: str
    error: BaseException | None = None
    interruptions: list[ToolApprovalItem] = field(default_factory=list)
    pending: list[ToolApprovalItem] = field(default_factory=list)


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        out: dict[str, Any] = dump(mode="json", exclude_unset=True, by_alias=True)
        return out
    return dict(vars(value))


def _call_id(item: ToolApprovalItem) -> str | None:
    raw = item.raw_item
    value = raw.get("call_id") if isinstance(raw, Mapping) else getattr(raw, "call_id", None)
    return value if isinstance(value, str) else None


class _Turn:
    """One model turn being piped onto the run: a queue feeding :meth:`AgentRun.pipe` in a task."""

    def __init__(self, run: AgentRun) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.call_ids: list[str] = []
        self.task: asyncio.Future[PipeResult] = asyncio.ensure_future(run.pipe(self._events()))

    async def _events(self) -> Any:
        while True:
            event = await self.queue.get()
            if event is _END:
                return
            if isinstance(event, BaseException):
                raise event
            yield event

    def put(self, event: dict[str, Any]) -> None:
        self.queue.put_nowait(event)
        if event.get("type") == "response.output_item.done":
            item = event.get("item") or {}
            if item.get("type") == "function_call" and isinstance(item.get("call_id"), str):
                self.call_ids.append(item["call_id"])

    async def close(self, error: BaseException | None = None) -> PipeResult:
        self.queue.put_nowait(error if error is not None else _END)
        return await self.task


async def pipe_streamed(
    run: AgentRun,
    result: RunResultStreaming,
    *,
    resolved: MutableSet[str] | None = None,
    decisions: Mapping[str, str] | None = None,
) -> StreamedPipeResult:
    """Pipe an Agents SDK streamed run (``Runner.run_streamed(...)``) onto ``run``.

    Every model turn's raw Responses events are published as one message (one step) through the
    codec; when the SDK stops for approvals, a ``tool-approval-request`` for each interrupted call
    of the last turn is added to that turn's message before it closes (calls already decided in
    ``decisions`` are not asked again). Tool and handoff outputs the SDK produced are published after
    their turn's message, one message each, unless their call id is in ``resolved`` (already on the
    channel; the set is updated). Events of a replayed turn are not published. A client's cancel
    (``run.abort_signal``) cancels the SDK run. Does not end or suspend the run.
    """
    resolved = resolved if resolved is not None else set()
    decisions = decisions or {}
    outputs: list[dict[str, Any]] = []
    turn: _Turn | None = None
    reason, error = "complete", None

    async def flush() -> None:
        while outputs:
            item = outputs.pop(0)
            await run.send(function_call_output(item, item.get("output", "")))

    async def close_turn(err: BaseException | None = None) -> None:
        nonlocal turn, reason, error
        if turn is None:
            return
        piped, turn = await turn.close(err), None
        if piped.reason != "complete" and reason == "complete":
            reason, error = piped.reason, piped.error

    stream = result.stream_events().__aiter__()
    abort: asyncio.Future[Any] = asyncio.ensure_future(run.abort_signal.wait())
    try:
        while reason == "complete":
            nxt: asyncio.Future[Any] = asyncio.ensure_future(stream.__anext__())
            done, _ = await asyncio.wait({nxt, abort}, return_when=asyncio.FIRST_COMPLETED)
            if nxt not in done:
                reason = "cancelled"
                nxt.cancel()
                break
            try:
                event = nxt.result()
            except StopAsyncIteration:
                break
            except Exception as exc:  # the SDK run failed (model error, max turns, guardrail ...)
                reason, error = "error", exc
                break
            if event.type == "raw_response_event":
                data = _as_dict(event.data)
                kind = data.get("type")
                response = data.get("response")
                if isinstance(response, Mapping) and str(response.get("id", "")).startswith(REPLAY_RESPONSE_PREFIX):
                    continue  # the recorded turn, replayed to the SDK: already on the channel
                if kind == "response.created" or turn is None:
                    await close_turn()
                    await flush()
                    if reason != "complete":
                        break
                    turn = _Turn(run)
                turn.put(data)
            elif event.type == "run_item_stream_event" and event.name in ("tool_output", "handoff_occured"):
                raw = _as_dict(event.item.raw_item)
                call_id = raw.get("call_id")
                if raw.get("type") == "function_call_output" and isinstance(call_id, str) and call_id not in resolved:
                    resolved.add(call_id)
                    outputs.append(raw)
    finally:
        abort.cancel()
    if reason != "complete":  # cancelled by the client, the SDK failed, or publishing failed
        result.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(_drain(stream), 10)
        await close_turn(error if reason == "error" else None)
    interruptions = list(result.interruptions) if reason == "complete" else []
    pending = [i for i in interruptions if decisions.get(_call_id(i) or "") in (None, "pending")]
    if turn is not None:
        for item in pending:
            call_id = _call_id(item)
            if call_id in turn.call_ids:
                raw = _as_dict(item.raw_item)
                turn.put({"type": "tool-approval-request", "call_id": call_id,
                          "name": raw.get("name", item.tool_name or ""), "arguments": raw.get("arguments", "")})
            else:
                logger.warning("approval for call %s is not on the last turn; it cannot be asked", call_id)
        await close_turn()
    if reason != "cancelled":
        await flush()
    return StreamedPipeResult(reason, error, interruptions, pending)


async def _drain(stream: Any) -> None:
    """Consume what a cancelled SDK run still yields (the SDK asks callers to keep reading)."""
    async for _ in stream:
        pass


async def run_agent(
    run: AgentRun,
    agent: Agent[Any],
    *,
    context: Any = None,
    run_config: RunConfig | None = None,
    max_turns: int = 10,
    hooks: Any = None,
) -> str:
    """Handle one wake-up of ``run`` (started, its view loaded) with the Agents SDK ``agent``.

    Returns how the run was left: ``suspended``, ``complete``, ``cancelled`` or ``error`` (the run's
    ``ai-run-suspend`` / ``ai-run-end`` is published), or ``yielded`` when another worker woken for
    the same input holds the run (exactly-once claims; this worker published nothing). ``context``, ``run_config``, ``max_turns`` and
    ``hooks`` are passed to ``Runner.run_streamed``. See the module docstring for the steps.
    """
    try:
        if run.owed_calls() is None:  # a call still waits for a client
            await run.suspend()
            return "suspended"
        graph = AgentGraph(agent)
        config = run_config if run_config is not None else RunConfig()
        record = ChannelRecord.read(run)
        current = graph.current(record.prior)
        await run.run_owed_calls(lambda call: execute_call(current, call, context, config))
        if getattr(run, "yielded", False):
            # Exactly-once claims (durable runs): another worker woken for the same input holds the
            # run's calls and carries the run on; this one neither runs the SDK nor publishes.
            return "yielded"
        record = ChannelRecord.read(run)
        prior: Any = sanitize_input(to_responses_input(record.prior), store=False).input
        resolved = set(record.outputs)
        token = recorded_outputs.set(record.outputs)
        try:
            source: Any = prior
            kwargs: dict[str, Any] = {"context": context, "max_turns": max_turns, "hooks": hooks}
            if record.turn:
                replay = dataclasses.replace(config, model=ReplayModel(record.turn, run.run_id))
                replayed = Runner.run_streamed(current, prior, run_config=replay, **kwargs)
                outcome = await pipe_streamed(run, replayed, resolved=resolved, decisions=record.decisions)
                if outcome.reason != "complete":
                    await run.end(outcome.reason, outcome.error)
                    return outcome.reason
                state = replayed.to_state()
                for item in outcome.interruptions:
                    call_id = _call_id(item) or ""
                    decision = record.decisions.get(call_id)
                    if decision == "approved":
                        state.approve(item)
                    elif decision == "denied":
                        state.reject(item, rejection_message=record.rejection_message(call_id))
                    else:
                        raise RuntimeError(f"call {call_id} of the suspended turn has no decision on the channel")
                source = state
            result = Runner.run_streamed(current, source, run_config=config, **kwargs)
            outcome = await pipe_streamed(run, result, resolved=resolved, decisions=record.decisions)
        finally:
            recorded_outputs.reset(token)
        if outcome.reason != "complete":
            await run.end(outcome.reason, outcome.error)
            return outcome.reason
        if outcome.pending:
            await run.suspend()
            return "suspended"
        await run.end("complete")
        return "complete"
    except Exception as exc:
        logger.exception("agents run %s failed", run.run_id)
        if not run.ended:
            await run.end("error", exc)
        return "error"
