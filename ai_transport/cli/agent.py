"""The demo's agent: a worker woken once per invocation that runs the model/tool loop of one run.

Each :meth:`ToolAgent.handle_invocation` is what one HTTP request to an agent endpoint would do: open
an :class:`~ai_transport.sessions.agent.AgentSession` on the channel, locate the triggering input,
start (or resume) the run, fold the conversation from history, then

1. execute the calls the client approved (``owed_calls``) and publish their outputs;
2. call the model with the whole conversation (``to_responses_input``) and pipe its stream to the
   channel — a call to a *gated* tool is followed, on the same pipe, by a ``tool-approval-request``;
3. run ungated calls at once and loop; when a gated call waits for a human, suspend the run;
   when the model answers without calls, end the run ``complete``.

The model is any Responses endpoint: the real API or the local scripted server (same code; only
``base_url`` / key differ).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from ..readers.hygiene import sanitize_input
from ..sessions.agent import AgentSession, function_call_output
from .scenario import GATED_TOOLS, INSTRUCTIONS, WEATHER_TOOL, run_tool

logger = logging.getLogger("ai_transport.cli.agent")

ChannelFactory = Callable[[], Awaitable[Any]]


@contextlib.asynccontextmanager
async def closing(stream: Any) -> AsyncIterator[Any]:
    """``stream`` (a :class:`~ai_transport.responses.ResponsesStream`, or any async iterator) closed
    when the block ends, also when its task is cancelled (Ctrl-C): left to asyncio's shutdown, an
    open HTTP response failed to close ("generator didn't stop after athrow()") with a traceback."""
    try:
        yield stream
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def gate_calls(stream: Any, gated: frozenset[str] | set[str]) -> AsyncIterator[dict[str, Any]]:
    """Pass a Responses stream through, adding a ``tool-approval-request`` after each gated call item."""
    async for event in stream:
        yield event
        if event.get("type") == "response.output_item.done":
            item = event.get("item") or {}
            if item.get("type") == "function_call" and item.get("name") in gated:
                yield {
                    "type": "tool-approval-request",
                    "call_id": item.get("call_id", ""),
                    "name": item.get("name", ""),
                    "arguments": item.get("arguments", ""),
                }


class ToolAgent:
    """A model + tools agent over a channel; one :meth:`handle_invocation` per wake-up.

    Args:
        channel_factory: ``async () -> Channel`` giving a fresh channel connection for one wake-up
            (closed when the wake-up ends).
        responses: a :class:`~ai_transport.responses.ResponsesClient`.
        model: the model name sent to the Responses endpoint.
        tools: function tool definitions; ``gated``: names that need a human's approval.
        execute: ``(name, arguments_json) -> output string`` running a tool.
        max_turns: model calls per invocation at most.
    """

    def __init__(
        self,
        channel_factory: ChannelFactory,
        responses: Any,
        model: str,
        *,
        tools: Iterable[Mapping[str, Any]] = (WEATHER_TOOL,),
        gated: Iterable[str] = GATED_TOOLS,
        execute: Callable[[str, str], str] = run_tool,
        instructions: str = INSTRUCTIONS,
        reasoning: Mapping[str, Any] | None = None,
        max_turns: int = 4,
    ) -> None:
        self.channel_factory = channel_factory
        self.responses = responses
        self.model = model
        self.tools = [dict(t) for t in tools]
        self.gated = frozenset(gated)
        self.execute = execute
        self.instructions = instructions
        self.reasoning = dict(reasoning) if reasoning else None
        self.max_turns = max_turns
        self.model_calls = 0

    async def handle_invocation(self, invocation: Mapping[str, Any]) -> str:
        """Handle one wake-up: start or resume the run of ``invocation``; returns how it was left
        (``suspended``, ``complete``, ``cancelled`` or ``error``)."""
        channel = await self.channel_factory()
        session = AgentSession(channel)
        try:
            await session.connect()
            run = await session.create_run(invocation)
            await run.start()
            await run.view.load_all()
            return await self._loop(run)
        finally:
            await session.close()
            await channel.close()  # one connection per wake-up, like a serverless worker

    async def _loop(self, run: Any) -> str:
        owed = run.owed_calls()
        if owed is None:  # a call still waits for the client: nothing to do yet
            await run.suspend()
            return "suspended"
        for call in owed:
            await run.send(function_call_output(call, self._execute(call)))
        for _ in range(self.max_turns):
            options: dict[str, Any] = {}
            if self.reasoning:
                # Stateless (store: false): reasoning is replayed through its encrypted content.
                options["reasoning"] = self.reasoning
                options["include"] = ["reasoning.encrypted_content"]
            self.model_calls += 1
            async with closing(self.responses.stream(
                self.model, input=self.model_input(run), instructions=self.instructions, tools=self.tools,
                **options,
            )) as stream:
                result = await run.pipe(gate_calls(stream, self.gated))
            if result.reason != "complete":
                await run.end(result.reason, result.error)
                return result.reason
            # Ungated calls of this turn run now; gated ones wait for a human.
            ran = False
            for call in run.unanswered_calls():
                if call.get("name") not in self.gated:
                    await run.send(function_call_output(call, self._execute(call)))
                    ran = True
            if run.unanswered_calls():
                await run.suspend()
                return "suspended"
            if not ran:
                await run.end("complete")
                return "complete"
        await run.end("complete")
        return "complete"

    @staticmethod
    def model_input(run: Any) -> list[dict[str, Any]]:
        """The conversation as the next request's ``input``: ``to_responses_input`` of the run's view,
        with replay hygiene for ``store: false`` (unpaired or blob-less reasoning dropped, interrupted
        items repaired, every call paired with an output)."""
        return sanitize_input(run.input_items(), store=False).input

    def _execute(self, call: Mapping[str, Any]) -> str:
        try:
            return self.execute(str(call.get("name", "")), str(call.get("arguments", "")))
        except Exception as e:
            logger.warning("tool %s failed: %s", call.get("name"), e)
            return f"error: {e}"
