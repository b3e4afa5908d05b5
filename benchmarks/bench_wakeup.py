"""Wake-up -> first model request, against a run history of 10, 100, 1k and 10k channel messages.

A stateless worker woken by an input builds everything from the channel: connect, locate the
trigger, fold the conversation from history (``run.view.load_all()``), decide what it owes, build
the model input. This measures that path (from the wake-up to the moment the model stream is first
read) on the in-process channel, for conversations of increasing length (earlier turns: a prompt and
a streamed answer), and prints the figures, the per-message slope of a least-squares fit, and the
Python function calls per history message (constant when the work is linear, whatever the timing
noise of a shared machine).

Run: ``python benchmarks/bench_wakeup.py [--sizes 10,100,1000,10000] [--repeat 5]``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from support_sessions import user_message

from ai_transport.channels.memory import InProcessHub
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession


async def history_size(hub: InProcessHub) -> int:
    channel = hub.client("x").channel("chat")
    page: Any = await channel.history(limit=1000)
    total = len(page.items)
    while page.has_next():
        page = await page.next()
        total += len(page.items)
    await channel.close()
    return total


async def conversation(messages: int) -> tuple[InProcessHub, Any]:
    """A channel holding at least ``messages`` messages of earlier turns, plus the new prompt."""
    hub = InProcessHub()
    client = ClientSession(hub.client("alice").channel("chat"))
    await client.connect()
    agent = AgentSession(hub.client("agent").channel("chat"))
    await agent.connect()

    async def turn(i: int) -> None:
        sent = await client.view.send(user_message(f"question {i}"))
        run = await agent.create_run(sent.invocation.to_json())
        await run.start()
        await run.pipe(build_response_events([ScriptedText(f"Answer number {i}.")], seed=i))
        await run.end("complete")

    await turn(0)
    per_turn = await history_size(hub)
    for i in range(1, -(-messages // per_turn)):
        await turn(i)
    prompt = await client.view.send(user_message("And now?"))
    await client.close()
    await agent.close()
    await client.channel.close()
    await agent.channel.close()
    return hub, prompt.invocation.to_json()


async def wake(hub: InProcessHub, invocation: Any) -> float:
    """Seconds from the wake-up to the first read of the model stream."""
    first_request: list[float] = []

    async def model(items: list[dict[str, Any]]) -> Any:
        first_request.append(time.perf_counter())
        for event in build_response_events([ScriptedText("ok")], seed=1):
            yield event

    t0 = time.perf_counter()
    session = AgentSession(hub.client("agent").channel("chat"))
    await session.connect()
    run = await session.create_run(invocation)
    await run.start()
    await run.view.load_all()
    owed = await run.run_owed_calls(lambda call: "")
    assert owed == []
    await run.pipe(model(run.input_items()))
    elapsed = first_request[0] - t0
    await run.end("complete")
    await session.close()
    await session.channel.close()
    return elapsed


async def main(sizes: list[int], repeat: int) -> None:
    rows: list[tuple[int, float]] = []
    print(
        f"{'messages':>9} {'history':>8} {'wake-up -> first model request':>32} {'per message':>12}"
        f" {'calls/message':>14}"
    )
    for size in sizes:
        hub, invocation = await conversation(size)
        total = await history_size(hub)
        times = []
        for _ in range(repeat):
            gc.collect()
            times.append(await wake(hub, invocation))
        best = min(times)  # the least disturbed run (a shared machine adds noise, never removes it)
        rows.append((total, best))
        # the work done, free of timing noise: Python function calls of one more wake-up
        profile = cProfile.Profile()
        profile.enable()
        await wake(hub, invocation)
        profile.disable()
        calls = sum(entry.callcount for entry in profile.getstats())
        print(
            f"{size:>9} {total:>8} {best * 1000:>29.1f} ms {best / total * 1e6:>9.1f} us"
            f" {calls / total:>14.0f}"
        )
    n = len(rows)
    mx = sum(x for x, _ in rows) / n
    my = sum(y for _, y in rows) / n
    slope = sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x, _ in rows)
    intercept = my - slope * mx
    print(f"least-squares fit: {intercept * 1000:.1f} ms + {slope * 1e6:.1f} us per history message")
    worst = max(abs(y - (intercept + slope * x)) / y for x, y in rows if x >= 1000) if n > 2 else 0.0
    print(f"largest deviation from the linear fit (sizes >= 1000): {worst * 100:.0f}%")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.repeat))
