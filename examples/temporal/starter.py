"""The starter: turns channel inputs into workflow starts (what an app's "wake the agent" endpoint does).

    python examples/temporal/starter.py --temporal 127.0.0.1:7233 --emulator http://127.0.0.1:8090 --channel chat-1

It follows the channel and, for every input a client publishes (a question, an approval), starts one
``WeatherTurn`` workflow with the invocation ``{inputEventId, sessionName}``. The workflow id is
derived from the input (``turn-<inputEventId>``), so a second start for the same input is refused
by Temporal: the input is handled once however often it is seen. In a web app you would call
:func:`start_turn` from the endpoint the client POSTs its invocation to instead.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Mapping
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.channels.channel import action_name
from ai_transport.cli.temporal_agent import WeatherTurn, turn_workflow_id
from ai_transport.codec.headers import transport_headers

TASK_QUEUE = "weather-agent"


async def start_turn(client: Client, invocation: Mapping[str, Any], task_queue: str = TASK_QUEUE) -> WorkflowHandle | None:
    """Start the wake-up for ``invocation``; None when that input already has its workflow."""
    try:
        return await client.start_workflow(
            WeatherTurn.run, dict(invocation), id=turn_workflow_id(invocation), task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,  # not even after it finished
        )
    except WorkflowAlreadyStartedError:
        return None


def invocation_of(message: Mapping[str, Any], session_name: str, agent_ids: set[str]) -> dict[str, str] | None:
    """The invocation a channel message asks for: a client's ``ai-input`` with an ``event-id``."""
    if message.get("name") != "ai-input" or action_name(message.get("action")) != "message.create":
        return None
    if message.get("clientId") in agent_ids:
        return None
    event_id = transport_headers(message.get("extras")).get("event-id")
    if not isinstance(event_id, str) or not event_id:
        return None
    return {"inputEventId": event_id, "sessionName": session_name}


async def main(args: argparse.Namespace) -> None:
    client = await Client.connect(args.temporal)
    if args.emulator:
        from ai_transport.emulator.client import client_options

        channel = await AblyChannel.connect(args.channel, **client_options(args.emulator, client_id="starter"))
    else:
        channel = await AblyChannel.connect(args.channel, key=args.key, client_id="starter")
    started: list[asyncio.Task[Any]] = []

    def on_message(message: Mapping[str, Any]) -> None:
        invocation = invocation_of(message, args.channel, {"agent"})
        if invocation is not None:
            print(f"starting {turn_workflow_id(invocation)}", flush=True)
            started.append(asyncio.ensure_future(start_turn(client, invocation, args.task_queue)))

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await channel.subscribe(on_message)
    await channel.attach()
    print(f"starter following {args.channel}", flush=True)
    try:
        await stop.wait()
    finally:
        await asyncio.gather(*started, return_exceptions=True)
        await channel.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--temporal", default="127.0.0.1:7233", help="Temporal frontend (default %(default)s)")
    parser.add_argument("--task-queue", default=TASK_QUEUE, help="task queue (default %(default)s)")
    parser.add_argument("--channel", required=True, help="the channel (session) to follow")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--emulator", metavar="URL", help="the local Ably emulator, e.g. http://127.0.0.1:8090")
    where.add_argument("--key", help="an Ably API key (real Ably)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
