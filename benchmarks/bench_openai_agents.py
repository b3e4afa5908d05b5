"""Cost of the OpenAI Agents SDK integration per wake-up, against our own ``AgentRun.pipe`` agent.

Run: ``python benchmarks/bench_openai_agents.py [--conversations 20]``.

The demo's approve loop (ask → the model streams reasoning, text and a gated call → suspend →
approve → resume: the tool runs, the model answers) on the in-process channel and the local scripted
Responses server (no delay), woken in-process. Once with the demo's agent written with the Agents SDK
(:class:`~ai_transport.cli.agents_sdk.AgentsSdkAgent`: ``run_agent``, with the suspended turn
replayed to the SDK on resume), once with :class:`~ai_transport.cli.agent.ToolAgent` (``run.pipe``).
Prints the median milliseconds of the first wake-up (start → suspended) and of the resume
(approval → complete) for each, after one warm-up conversation. Wall-clock on a shared machine:
compare the two columns, not absolute figures across runs.

Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ai_transport.channels.memory import InProcessHub
from ai_transport.cli.agent import ToolAgent
from ai_transport.cli.agents_sdk import AgentsSdkAgent
from ai_transport.cli.demo import SCRIPTED_MODEL
from ai_transport.cli.scenario import scripted_turn
from ai_transport.codec.inputs import create_tool_approval_response, create_user_message
from ai_transport.responses.client import ResponsesClient
from ai_transport.responses.local_server import LocalResponsesServer, StreamReply
from ai_transport.sessions.client import ClientSession

REASONING = {"effort": "low", "summary": "auto"}


async def conversation(agent: Any, hub: InProcessHub, name: str) -> tuple[float, float]:
    channel = hub.client("user").channel(name)
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
    m = client.view.get_messages()[1]
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


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--conversations", type=int, default=20)
    args = p.parse_args()
    async with LocalResponsesServer(lambda r: StreamReply.from_events(scripted_turn(r.json()))) as server:
        responses = ResponsesClient(api_key="local", base_url=server.base_url)
        print(f"{'agent':<28}{'first wake-up ms':>18}{'resume ms':>12}")
        for label, make in (
            ("Agents SDK (run_agent)", lambda f: AgentsSdkAgent(f, responses, SCRIPTED_MODEL, reasoning=REASONING)),
            ("ToolAgent (run.pipe)", lambda f: ToolAgent(f, responses, SCRIPTED_MODEL, reasoning=REASONING)),
        ):
            hub = InProcessHub()
            names = iter(range(10**6))
            current: list[str] = []

            async def factory(hub: InProcessHub = hub, current: list[str] = current) -> Any:
                return hub.client("agent").channel(current[-1])

            agent = make(factory)
            firsts, resumes = [], []
            for i in range(args.conversations + 1):
                current.append(f"bench-{next(names)}")
                first, resume = await conversation(agent, hub, current[-1])
                if i:  # the first conversation warms up imports and connections
                    firsts.append(first)
                    resumes.append(resume)
            print(f"{label:<28}{statistics.median(firsts) * 1000:>18.1f}{statistics.median(resumes) * 1000:>12.1f}")
            aclose = getattr(agent, "aclose", None)
            if aclose is not None:
                await aclose()
        await responses.aclose()


if __name__ == "__main__":
    asyncio.run(main())
