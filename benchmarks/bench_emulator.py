"""Throughput of the emulator with the unmodified ably-python SDK: concurrent streams of appends.

``python benchmarks/bench_emulator.py [--streams 20] [--appends 500] [--json] [--no-js]``

Each stream is one publisher connection that publishes a message and pipelines ``--appends``
``append_message`` calls (the AI Transport pattern); one subscriber connection attached to every
stream's channel checks that nothing is lost or reordered within a message, and that history
returns each final aggregate. Prints elapsed time and appends per second, then runs the same
workload with ably-js 2.x clients in node (``tests/js/handlers/ably_js.mjs``, through the test
node bridge) and prints the Python/JS throughput ratio. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ably.types.message import Message

from ai_transport.emulator import EmulatorThread, ably_realtime


async def wait_connected(client: object) -> None:
    while client.connection.state.value != "connected":  # type: ignore[attr-defined]
        await asyncio.sleep(0.01)


async def run(port: int, streams: int, appends: int, binary: bool) -> dict[str, float]:
    sub = ably_realtime(port, use_binary_protocol=binary)
    pubs = [ably_realtime(port, client_id=f"agent-{i}", use_binary_protocol=binary) for i in range(streams)]
    await asyncio.gather(wait_connected(sub), *(wait_connected(p) for p in pubs))
    names = [f"bench-{time.time_ns()}-{i}" for i in range(streams)]
    received: dict[str, list[object]] = {n: [] for n in names}
    done = asyncio.Event()
    total = streams * (appends + 1)
    count = 0

    # one listener per channel (keeps per-channel order; SDK listeners are synchronous)
    for name in names:
        box = received[name]

        def listener(msg: object, box: list[object] = box) -> None:
            nonlocal count
            box.append(msg)
            count += 1
            if count == total:
                done.set()

        await sub.channels.get(name).subscribe(listener)

    fragments = [f"tok{j:04d} " for j in range(appends)]

    async def stream(pub: object, name: str) -> None:
        ch = pub.channels.get(name)  # type: ignore[attr-defined]
        await ch.attach()
        serial = (await ch.publish(Message(name="ai-output", data=""))).serials[0]
        tasks = [asyncio.ensure_future(ch.append_message(Message(serial=serial, data=f))) for f in fragments]
        await asyncio.gather(*tasks)

    t0 = time.perf_counter()
    await asyncio.gather(*(stream(p, n) for p, n in zip(pubs, names)))
    acked = time.perf_counter() - t0
    await asyncio.wait_for(done.wait(), 120)
    delivered = time.perf_counter() - t0

    expected = "".join(fragments)
    for name in names:
        msgs = received[name]
        assert len(msgs) == appends + 1, (name, len(msgs))
        assert int(msgs[0].action) == 0  # type: ignore[attr-defined]
        text = "".join(m.data for m in msgs[1:])  # type: ignore[attr-defined]
        assert text == expected, f"{name}: fragments lost or reordered"
        versions = [m.version.serial for m in msgs[1:]]  # type: ignore[attr-defined]
        assert versions == sorted(versions)
        page = await sub.channels.get(name).history(limit=1)
        assert page.items[0].data == expected
    await asyncio.gather(sub.close(), *(p.close() for p in pubs))
    n = streams * appends
    return {"acked_s": acked, "delivered_s": delivered, "appends": n, "appends_per_s": n / delivered}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--json", action="store_true", help="JSON wire format instead of msgpack")
    parser.add_argument("--no-js", action="store_true", help="skip the ably-js comparison")
    args = parser.parse_args()
    with EmulatorThread(port=0) as emu:
        result = asyncio.run(run(emu.port, args.streams, args.appends, not args.json))
        fmt = "json" if args.json else "msgpack"
        print(
            f"ably-python via emulator ({fmt}): {args.streams} streams x {args.appends} appends = "
            f"{result['appends']} appends; all ACKed in {result['acked_s']:.2f}s, all delivered in "
            f"{result['delivered_s']:.2f}s ({result['appends_per_s']:.0f} appends/s); nothing lost or reordered"
        )
        if args.no_js:
            return
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from jsbridge import NodeBridge, node_available

        from ai_transport.emulator import connect_info

        if not node_available():
            print("node not available: skipping the ably-js comparison")
            return
        bridge = NodeBridge()
        try:
            js = bridge.call(
                "ably_js",
                "benchStreams",
                options=connect_info(emu.port, use_binary_protocol=not args.json),
                streams=args.streams,
                appends=args.appends,
            )
        finally:
            bridge.close()
        js_rate = result["appends"] / (js["deliveredMs"] / 1000)
        print(
            f"ably-js via emulator ({fmt}): all ACKed in {js['ackedMs'] / 1000:.2f}s, all delivered in "
            f"{js['deliveredMs'] / 1000:.2f}s ({js_rate:.0f} appends/s); nothing lost or reordered"
        )
        print(f"ratio ably-python / ably-js throughput: {result['appends_per_s'] / js_rate:.2f}")


if __name__ == "__main__":
    main()
