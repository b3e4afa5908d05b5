"""An agent worker written with the OpenAI Agents SDK: woken with an invocation, it starts or resumes
a run and streams the SDK's run over Ably.

    python examples/openai_agents/worker.py --emulator http://127.0.0.1:8090 '{"inputEventId": "…", "sessionName": "…"}'

Like ``examples/agent_worker.py`` it keeps no state between wake-ups: each process handles one
invocation and exits. The agent is the weather assistant of the demo as an Agents SDK ``Agent``
(``ai_transport.cli.agents_sdk.weather_agent``: ``get_weather`` is a ``function_tool`` with
``needs_approval=True``). ``run_agent`` does the rest: it executes the calls the user approved,
replays the suspended turn to the SDK and applies the user's decisions to its approval flow, then
pipes ``Runner.run_streamed`` onto the run and suspends again if a new call needs approval.

The model is the local scripted Responses server (no key needed) or, with ``OPENAI_API_KEY`` and
``--model``, the OpenAI API. For real Ably pass ``--key`` instead of ``--emulator``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from agents import RunConfig
from openai import AsyncOpenAI

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.cli.agents_sdk import weather_agent
from ai_transport.cli.scenario import scripted_turn
from ai_transport.errors import AITransportError
from ai_transport.integrations.openai_agents import run_agent
from ai_transport.responses.local_server import LocalResponsesServer, StreamReply
from ai_transport.sessions.agent import AgentSession


async def open_channel(args: argparse.Namespace, name: str) -> AblyChannel:
    """The invocation's channel, as client id ``agent``, on the emulator or on Ably."""
    if args.emulator:
        from ai_transport.emulator.client import client_options

        return await AblyChannel.connect(name, **client_options(args.emulator, client_id="agent"))
    return await AblyChannel.connect(name, key=args.key, client_id="agent")


async def handle(args: argparse.Namespace, invocation: Mapping[str, Any], client: AsyncOpenAI, model: str) -> str:
    """One wake-up: start or resume the invocation's run with the Agents SDK agent."""
    reasoning = {"effort": "low", "summary": "auto"} if model.startswith(("gpt-5", "o1", "o3", "o4", "scripted")) else None
    agent = weather_agent(model, client, reasoning)
    channel = await open_channel(args, str(invocation["sessionName"]))
    session = AgentSession(channel)
    try:
        await session.connect()
        run = await session.create_run(invocation)
        await run.start(args.start_timeout)  # ai-run-start, or ai-run-resume after an approval
        await run.view.load_all()           # the conversation so far: the only state there is
        config = RunConfig(tracing_disabled=not os.environ.get("OPENAI_API_KEY"))
        return await run_agent(run, agent, run_config=config)
    finally:
        await session.close()
        await channel.close()


async def main() -> int:
    """Handle the invocation given on the command line (or on stdin), then exit."""
    p = argparse.ArgumentParser(description="Handle one agent invocation with the OpenAI Agents SDK and exit.")
    p.add_argument("invocation", nargs="?", help='{"inputEventId", "sessionName"} JSON (default: stdin)')
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--emulator", help="URL of the local emulator")
    where.add_argument("--key", help="Ably API key")
    p.add_argument("--model", default=None, help="with OPENAI_API_KEY: the OpenAI model to use")
    p.add_argument("--start-timeout", type=float, default=30.0, help="seconds to wait for the triggering input")
    args = p.parse_args()
    invocation = json.loads(args.invocation if args.invocation else sys.stdin.read())
    local: LocalResponsesServer | None = None
    if args.model and os.environ.get("OPENAI_API_KEY"):
        client, model = AsyncOpenAI(), args.model
    else:
        local = LocalResponsesServer(lambda request: StreamReply.from_events(scripted_turn(request.json())))
        await local.start()
        client, model = AsyncOpenAI(base_url=local.base_url, api_key="local"), "scripted-weather-model"
    try:
        outcome = await handle(args, invocation, client, model)
    except AITransportError as e:
        print(f"agents worker: error: {e.message} (code {e.code})", file=sys.stderr)
        return 1
    finally:
        await client.close()
        if local is not None:
            await local.close()
    print(json.dumps({"outcome": outcome}))
    return 0 if outcome in ("suspended", "complete", "yielded") else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
