"""The refold after a loss of channel continuity, against 100, 1k and 10k channel messages.

A client session that has loaded the whole conversation loses continuity (the in-process channel's
``interrupt`` + ``reattach``: ``attached``, ``resumed`` false). The session refolds history into a
shadow tree while its view keeps answering with the pre-loss conversation, then swaps it in. For
each size this prints the refold's wall time (loss to swap), what the view showed meanwhile (a task
reads ``get_messages()`` at every turn of the event loop: reads, fewest messages seen, updates
emitted) and the memory the shadow costs (``tracemalloc``: the tree's size before the loss, and the
peak above it during the refold — about one more tree, freed at the swap).

Run: ``python benchmarks/bench_refold.py [--sizes 100,1000,10000]``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from bench_wakeup import conversation, history_size

from ai_transport.channels.memory import InProcessHub
from ai_transport.sessions.client import ClientSession


async def loaded(hub: InProcessHub) -> ClientSession:
    session = ClientSession(hub.client("reader").channel("chat"))
    await session.connect()
    await session.view.load_all()
    return session


async def lose(session: ClientSession) -> None:
    session.channel.interrupt()
    await session.channel.reattach()
    while session.continuity_losses == 0:  # the state change is delivered with the messages
        await asyncio.sleep(0)


async def timed_refold(hub: InProcessHub) -> tuple[float, int, int, int, int]:
    """(seconds, messages before, reads during, fewest messages read, updates) of one refold."""
    session = await loaded(hub)
    before = len(session.view.get_messages())
    updates: list[int] = []
    session.view.on("update", lambda: updates.append(len(session.view.get_messages())))
    reads: list[int] = []
    done = asyncio.Event()

    async def reader() -> None:
        while not done.is_set():
            reads.append(len(session.view.get_messages()))
            await asyncio.sleep(0)

    gc.collect()
    polling = asyncio.ensure_future(reader())
    t0 = time.perf_counter()
    await lose(session)
    await session.rebuilt()
    elapsed = time.perf_counter() - t0
    done.set()
    await polling
    await session.close()
    await session.channel.close()
    return elapsed, before, len(reads), min(reads), len(updates)


async def shadow_memory(hub: InProcessHub) -> tuple[int, int]:
    """(bytes the session holds after loading, peak bytes above that during the refold)."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    session = await loaded(hub)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    await lose(session)
    await session.rebuilt()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    await session.close()
    await session.channel.close()
    return held - base, peak - held


async def main(sizes: list[int]) -> None:
    print(
        f"{'messages':>9} {'history':>8} {'refold':>10} {'view reads':>11} {'fewest shown':>13}"
        f" {'updates':>8} {'session':>9} {'shadow peak':>12}"
    )
    for size in sizes:
        hub, _invocation = await conversation(size)
        total = await history_size(hub)
        elapsed, before, reads, fewest, updates = await timed_refold(hub)
        held, peak = await shadow_memory(hub)
        print(
            f"{size:>9} {total:>8} {elapsed * 1000:>7.1f} ms {reads:>11} {fewest:>6} of {before:<5}"
            f" {updates:>8} {held / 1e6:>6.1f} MB {peak / 1e6:>9.1f} MB"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    args = parser.parse_args()
    logging.getLogger("ai_transport").setLevel(logging.CRITICAL)  # the 104006 of every loss
    asyncio.run(main([int(s) for s in args.sizes.split(",")]))
