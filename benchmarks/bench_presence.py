"""Presence cost: the emulator with the unmodified ably-python SDK, and the in-process channel.

``python benchmarks/bench_presence.py [--members 1000] [--json]``

* emulator, enter: one wildcard connection enters ``--members`` members with ``enter_client``
  (pipelined, every ACK awaited); members per second;
* emulator, SYNC: a fresh connection attaches and ``presence.get()`` waits for the SYNC of the
  whole set (100 members per SYNC frame); milliseconds;
* emulator, leave on close: the entering connection closes and a subscriber waits for every
  synthesized leave; milliseconds;
* in-process: the same enters (one connection per member, the hub's member set) and ``get()``.

Not a test: prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ai_transport.channels import InProcessHub
from ai_transport.emulator import Emulator, ably_realtime


async def _connected(client: Any) -> None:
    while getattr(client.connection.state, "value", client.connection.state) != "connected":
        await asyncio.sleep(0.01)


async def bench_emulator(members: int) -> dict[str, float]:
    """Enter, SYNC and leave-on-close figures over the emulator."""
    out: dict[str, float] = {}
    async with Emulator(port=0) as emu:
        name = "bench-presence"
        enterer = ably_realtime(emu, use_binary_protocol=True)
        watcher = ably_realtime(emu, client_id="watcher")
        late = ably_realtime(emu, client_id="late")
        try:
            for c in (enterer, watcher, late):
                await _connected(c)
            ch = enterer.channels.get(name)
            await ch.attach()
            left = 0
            all_left = asyncio.get_running_loop().create_future()

            def on_presence(msg: Any) -> None:
                nonlocal left
                if msg.action == 3:
                    left += 1
                    if left == members and not all_left.done():
                        all_left.set_result(None)

            await watcher.channels.get(name).presence.subscribe(on_presence)
            t0 = time.perf_counter()
            await asyncio.gather(*(ch.presence.enter_client(f"m{i}", "x") for i in range(members)))
            out["enter_per_s"] = members / (time.perf_counter() - t0)
            t0 = time.perf_counter()
            got = await late.channels.get(name).presence.get()
            out["sync_ms"] = (time.perf_counter() - t0) * 1000
            assert len(got) == members, len(got)
            t0 = time.perf_counter()
            await enterer.close()
            await asyncio.wait_for(all_left, 60)
            out["leave_on_close_ms"] = (time.perf_counter() - t0) * 1000
        finally:
            for c in (enterer, watcher, late):
                await c.close()
    return out


async def bench_in_process(members: int) -> dict[str, float]:
    """Enter and get figures on the in-process hub."""
    hub = InProcessHub()
    chans = [hub.channel("p", client_id=f"m{i}") for i in range(members)]
    t0 = time.perf_counter()
    for ch in chans:
        await ch.presence.enter("x")
    enter = members / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    got = await chans[0].presence.get()
    get_ms = (time.perf_counter() - t0) * 1000
    assert len(got) == members
    for ch in chans:
        await ch.close()
    return {"enter_per_s": enter, "get_ms": get_ms}


async def main() -> None:
    """Run both and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = {"emulator": await bench_emulator(args.members), "in_process": await bench_in_process(args.members)}
    if args.json:
        print(json.dumps(figures))
        return
    e, p = figures["emulator"], figures["in_process"]
    print(f"members: {args.members}")
    print(f"emulator   enter: {e['enter_per_s']:8.0f} members/s   SYNC to a new attach: {e['sync_ms']:7.1f} ms   "
          f"leaves after close: {e['leave_on_close_ms']:7.1f} ms")
    print(f"in-process enter: {p['enter_per_s']:8.0f} members/s   get: {p['get_ms']:7.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
