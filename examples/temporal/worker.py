"""A Temporal worker for the weather agent: the plugin's framing activities, the inference and tool
activities, and the one-workflow-per-wake-up ``WeatherTurn``.

    python examples/temporal/worker.py --temporal 127.0.0.1:7233 --emulator http://127.0.0.1:8090

Run as many as you like on one task queue: Temporal hands each activity to one of them, and when a
worker dies mid-stream the inference activity is retried on another, under the same step id, so the
retry's output replaces the dead attempt's in every client's view. The worker keeps no state: every
activity opens its own channel connection (as client id ``agent``) and re-reads what it needs.

The activities and the workflow live in :mod:`ai_transport.cli.temporal_agent` (``ai-transport demo
--temporal`` runs the same code); the model is the local scripted Responses server (``--delay``
seconds between deltas), or the OpenAI API with ``OPENAI_API_KEY`` and ``--model``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.cli.scenario import scripted_turn
from ai_transport.cli.temporal_agent import WeatherActivities, WeatherTurn
from ai_transport.responses.client import ResponsesClient
from ai_transport.responses.local_server import LocalResponsesServer, StreamReply
from ai_transport.temporal import AblyTransportPlugin

TASK_QUEUE = "weather-agent"


def channel_factory(args: argparse.Namespace) -> Any:
    """``session_name -> Channel``: one new Ably connection per activity, always as ``agent``."""

    async def emulator(name: str) -> AblyChannel:
        from ai_transport.emulator.client import client_options

        return await AblyChannel.connect(name, **client_options(args.emulator, client_id="agent"))

    async def ably(name: str) -> AblyChannel:
        return await AblyChannel.connect(name, key=args.key, client_id="agent")

    return emulator if args.emulator else ably


async def main(args: argparse.Namespace) -> None:
    local_model = None
    if args.model and os.environ.get("OPENAI_API_KEY"):
        responses, model = ResponsesClient(), args.model
        reasoning = None
    else:
        local_model = LocalResponsesServer(
            lambda request: StreamReply.from_events(scripted_turn(request.json()), delay=args.delay)
        )
        await local_model.start()
        responses = ResponsesClient(api_key="local", base_url=local_model.base_url)
        model, reasoning = "scripted-weather-model", {"effort": "low", "summary": "auto"}
    create_channel = channel_factory(args)
    client = await Client.connect(args.temporal)
    activities = WeatherActivities(create_channel, responses, model, reasoning=reasoning)
    worker = Worker(
        client,
        task_queue=args.task_queue,
        workflows=[WeatherTurn],
        activities=activities.all,
        plugins=[AblyTransportPlugin(create_channel)],
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with worker:
            print(f"worker {os.getpid()} polling {args.task_queue} on {args.temporal}", flush=True)
            await stop.wait()
    finally:
        await responses.aclose()
        if local_model is not None:
            await local_model.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--temporal", default="127.0.0.1:7233", help="Temporal frontend (default %(default)s)")
    parser.add_argument("--task-queue", default=TASK_QUEUE, help="task queue (default %(default)s)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--emulator", metavar="URL", help="the local Ably emulator, e.g. http://127.0.0.1:8090")
    where.add_argument("--key", help="an Ably API key (real Ably)")
    parser.add_argument("--model", default=None, help="OpenAI model (with OPENAI_API_KEY); default: scripted")
    parser.add_argument("--delay", type=float, default=0.01, help="seconds between scripted deltas")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
