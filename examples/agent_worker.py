"""An agent worker: woken with an invocation, it starts or resumes a run and streams it over Ably.

    python examples/agent_worker.py --emulator http://127.0.0.1:8090 '{"inputEventId": "…", "sessionName": "…"}'

Like a serverless function, the worker keeps no state between wake-ups: everything it needs is on the
channel. Each wake-up (one :meth:`AgentWorker.handle_invocation`):

1. connects an ``AgentSession`` to the channel named by the invocation (``sessionName``);
2. locates the input that woke it (``inputEventId``) and starts the run, or resumes it when that
   input answered a suspended run (an approval) — ``ai-run-start`` / ``ai-run-resume`` on the wire;
3. folds the conversation from history and executes the calls the user approved;
4. calls the model with the whole conversation and pipes its stream to the channel; a call to a
   gated tool is followed by a ``tool-approval-request`` and the run is suspended until a client
   answers (the client then wakes the worker again); otherwise the run ends ``complete``.

The model is the local scripted Responses server (no key needed) or, with ``OPENAI_API_KEY`` and
``--model``, the OpenAI API — the same code, only the base URL and key differ. For real Ably pass
``--key`` instead of ``--emulator``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from ai_transport.auth import agent_token_params, token_request_callback
from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.cli.scenario import GATED_TOOLS, INSTRUCTIONS, WEATHER_TOOL, run_tool, scripted_turn
from ai_transport.emulator.auth import DEFAULT_KEY
from ai_transport.errors import AITransportError
from ai_transport.readers.hygiene import sanitize_input
from ai_transport.responses.client import ResponsesClient
from ai_transport.sessions.agent import AgentSession, function_call_output

#: The agent's clientId (its token is issued for it; clients trust this identity's output).
AGENT_ID = "agent"


async def with_approval_requests(stream: Any) -> AsyncIterator[dict[str, Any]]:
    """The model's events, plus a ``tool-approval-request`` after every call to a gated tool."""
    async for event in stream:
        yield event
        item = event.get("item") or {}
        done = event.get("type") == "response.output_item.done"
        if done and item.get("type") == "function_call" and item.get("name") in GATED_TOOLS:
            yield {"type": "tool-approval-request", "call_id": item["call_id"], "name": item["name"],
                   "arguments": item.get("arguments", "")}


class AgentWorker:
    """Handles invocations for one Ably endpoint (emulator or Ably) and one model endpoint."""

    def __init__(self, open_channel: Callable[[str], Awaitable[Any]], model: str | None = None) -> None:
        self.open_channel = open_channel
        self.model = model
        #: Seconds to wait for the triggering input to show up on the channel.
        self.start_timeout = 30.0
        #: Seconds between the local scripted model's stream events (no effect on the real API).
        self.stream_delay = 0.01
        self.responses: ResponsesClient | None = None
        self._local_model: Any = None

    @classmethod
    def for_emulator(cls, url: str, model: str | None = None, key: str = DEFAULT_KEY) -> AgentWorker:
        """A worker whose channels connect to the local emulator at ``url`` as client id ``agent``,
        with a least-privilege agent token (``ai_transport.auth``) signed with the emulator's ``key``."""
        from ai_transport.emulator.client import client_options

        async def open_channel(name: str) -> Any:
            callback = token_request_callback(key, agent_token_params(AGENT_ID, name))
            return await AblyChannel.connect(name, **client_options(url, client_id=AGENT_ID, auth_callback=callback))

        return cls(open_channel, model)

    @classmethod
    def for_ably(cls, key: str, model: str | None = None) -> AgentWorker:
        """A worker on real Ably (the namespace needs the mutable-messages channel rule)."""

        async def open_channel(name: str) -> Any:
            # token auth scoped to this channel (the key never reaches the connection)
            callback = token_request_callback(key, agent_token_params(AGENT_ID, name))
            return await AblyChannel.connect(name, auth_callback=callback, client_id=AGENT_ID)

        return cls(open_channel, model)

    async def start(self) -> None:
        """Pick the model endpoint: the OpenAI API (key + model) or the local scripted server."""
        if self.model and os.environ.get("OPENAI_API_KEY"):
            self.responses = ResponsesClient()
            return
        from ai_transport.responses.local_server import LocalResponsesServer, StreamReply

        self._local_model = LocalResponsesServer(
            lambda request: StreamReply.from_events(scripted_turn(request.json()), delay=self.stream_delay)
        )
        await self._local_model.start()
        self.responses = ResponsesClient(api_key="local", base_url=self._local_model.base_url)
        self.model = "scripted-weather-model"

    def reasoning_options(self) -> dict[str, Any]:
        """Reasoning models get a summary and their encrypted reasoning back (replayed next turn)."""
        if not str(self.model).startswith(("gpt-5", "o1", "o3", "o4", "scripted")):
            return {}
        return {"reasoning": {"effort": "low", "summary": "auto"}, "include": ["reasoning.encrypted_content"]}

    async def close(self) -> None:
        """Release the model client (and the local model server)."""
        if self.responses is not None:
            await self.responses.aclose()
        if self._local_model is not None:
            await self._local_model.close()

    async def handle_invocation(self, invocation: Mapping[str, Any]) -> str:
        """One wake-up; returns ``suspended`` or how the run ended."""
        assert self.responses is not None, "call start() first"
        channel = await self.open_channel(str(invocation["sessionName"]))
        session = AgentSession(channel)
        try:
            await session.connect()
            run = await session.create_run(invocation)
            await run.start(self.start_timeout)  # ai-run-start, or ai-run-resume after an approval
            await run.view.load_all()         # the conversation so far, from history
            owed = run.owed_calls()           # None: a call still waits for the user
            if owed is None:
                await run.suspend()
                return "suspended"
            for call in owed:                 # approved calls: run them now
                await run.send(function_call_output(call, run_tool(call["name"], call["arguments"])))
            for _ in range(4):
                # store: false, so the input is the whole conversation, with replay hygiene applied
                model_input = sanitize_input(run.input_items(), store=False).input
                stream = self.responses.stream(
                    self.model, input=model_input, instructions=INSTRUCTIONS, tools=[WEATHER_TOOL],
                    **self.reasoning_options(),
                )
                result = await run.pipe(with_approval_requests(stream))
                if result.reason != "complete":
                    await run.end(result.reason, result.error)
                    return result.reason
                if run.unanswered_calls():    # a gated call waits for a human
                    await run.suspend()
                    return "suspended"
                if not run.approved_unexecuted_calls():
                    await run.end("complete")
                    return "complete"
            await run.end("complete")
            return "complete"
        finally:
            await session.close()
            await channel.close()


async def main() -> int:
    """Handle the invocation given on the command line (or on stdin), then exit."""
    p = argparse.ArgumentParser(description="Handle one agent invocation and exit.")
    p.add_argument("invocation", nargs="?", help='{"inputEventId", "sessionName"} JSON (default: stdin)')
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--emulator", help="URL of the local emulator")
    where.add_argument("--key", help="Ably API key")
    p.add_argument("--model", default=None, help="with OPENAI_API_KEY: the OpenAI model to use")
    p.add_argument("--start-timeout", type=float, default=30.0, help="seconds to wait for the triggering input")
    args = p.parse_args()
    invocation = json.loads(args.invocation if args.invocation else sys.stdin.read())
    worker = AgentWorker.for_emulator(args.emulator, args.model) if args.emulator else AgentWorker.for_ably(
        args.key, args.model
    )
    worker.start_timeout = args.start_timeout
    await worker.start()
    try:
        outcome = await worker.handle_invocation(invocation)
    except AITransportError as e:
        print(f"agent worker: error: {e.message} (code {e.code})", file=sys.stderr)
        return 1
    finally:
        await worker.close()
    print(json.dumps({"outcome": outcome}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
