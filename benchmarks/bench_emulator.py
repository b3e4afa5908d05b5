"""Throughput of the emulator with the unmodified ably-python SDK: concurrent streams of appends.

``python benchmarks/bench_emulator.py [--streams 20] [--appends 500] [--latency 300] [--json] [--no-js]
[--process] [--frames]``

First the latency of one append on an idle emulator: one publisher awaits each of ``--latency``
appends in turn while another connection subscribes; it prints the median and 99th percentile of
the ACK round trip and of the publish-to-delivery time. Then the throughput: each stream is one publisher connection that publishes a message and pipelines ``--appends``
``append_message`` calls (the AI Transport pattern); one subscriber connection attached to every
stream's channel checks that nothing is lost or reordered within a message, and that history
returns each final aggregate. Prints elapsed time and appends per second, then runs the same
workload with ably-js 2.x clients in node (``tests/js/handlers/ably_js.mjs``, through the test
node bridge) and prints the Python/JS throughput ratio, and the emulator's CPU time in that run (the
clients are in node, so it is the emulator's own cost and little affected by machine load).
``--process`` runs the emulator in a process of its own, so its CPU per append is printed for the
ably-python run too (the figure to compare across versions on a busy machine).

``--frames`` only runs the frame codec micro-benchmark: the emulator's msgspec-based
``encode_frame`` / ``decode_frame`` against the stdlib ``json`` and ``msgpack`` calls they replaced,
on typical ProtocolMessages (an inbound append, a fan-out MESSAGE, an ACK), printing the speed-up.
Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
import timeit
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgpack  # type: ignore[import-untyped]
from ably.types.message import Message

from ai_transport.emulator import EmulatorThread, ably_realtime
from ai_transport.emulator.protocol import decode_frame, encode_frame, render_message

_HEADERS = {
    "ai": {
        "transport": {
            "stream": "true",
            "status": "streaming",
            "stream-id": "run_1:msg_1",
            "role": "assistant",
        },
        "codec": {"kind": "output_text", "item_id": "msg_0123456789abcdef", "output_index": "0"},
    }
}


def sample_frames() -> dict[str, dict[str, object]]:
    """Typical ProtocolMessages of the append workload (as the emulator sees and sends them)."""
    inbound = {
        "action": 15,
        "channel": "ai:session-1",
        "msgSerial": 42,
        "messages": [
            {"action": 5, "serial": "01700000000000-001@abc:0", "data": "tok0042 ", "extras": _HEADERS}
        ],
    }
    stored = {
        "id": "conn-1:42:0",
        "clientId": "agent-0",
        "connectionId": "conn-1",
        "timestamp": 1_700_000_000_123,
        "name": "ai-output",
        "action": 5,
        "serial": "01700000000000-001@abc:0",
        "data": "tok0042 ",
        "extras": _HEADERS,
        "version": {
            "serial": "01700000000000-043@abc:0",
            "timestamp": 1_700_000_000_456,
            "clientId": "agent-0",
        },
    }
    fan_out = {
        "action": 15,
        "channel": "ai:session-1",
        "channelSerial": "01700000000000-043@abc:0",
        "timestamp": 1_700_000_000_456,
        "id": "conn-1:42",
        "connectionId": "conn-1",
        "messages": [render_message(stored, "json")],
    }
    binary = dict(fan_out, messages=[dict(stored, data=bytes(range(64)))])
    ack = {"action": 1, "msgSerial": 42, "count": 1, "res": [{"serials": ["01700000000000-043@abc:0"]}]}
    return {
        "inbound append": inbound,
        "fan-out MESSAGE": fan_out,
        "fan-out MESSAGE (64 B bin)": binary,
        "ACK": ack,
    }


def _per_op(fn: object, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number  # type: ignore[arg-type]


def _old_json(frame: object) -> bytes:
    return json.dumps(frame, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _frame_cases(frame: dict[str, object]) -> list[tuple[str, object, object]]:
    """(name, stdlib call, msgspec call) for one frame; checks both give the same result first."""
    messages = frame.get("messages", [])
    json_frame = dict(frame, messages=[render_message(m, "json") for m in messages])  # type: ignore[union-attr]
    text = _old_json(json_frame).decode("utf-8")
    packed = msgpack.packb(frame, use_bin_type=True)
    assert encode_frame(frame, "msgpack") == packed  # byte-identical msgpack
    assert json.loads(encode_frame(json_frame, "json")) == json.loads(text)
    assert decode_frame(text) == json.loads(text)
    assert decode_frame(packed) == msgpack.unpackb(packed, raw=False, strict_map_key=False)
    return [
        ("json encode", lambda: _old_json(json_frame), lambda: encode_frame(json_frame, "json")),
        ("json decode", lambda: json.loads(text), lambda: decode_frame(text)),
        (
            "msgpack encode",
            lambda: msgpack.packb(frame, use_bin_type=True),
            lambda: encode_frame(frame, "msgpack"),
        ),
        (
            "msgpack decode",
            lambda: msgpack.unpackb(packed, raw=False, strict_map_key=False),
            lambda: decode_frame(packed),
        ),
    ]


def bench_frames(number: int = 20_000) -> None:
    """Print encode/decode time per frame: stdlib json/msgpack vs the emulator's msgspec codec."""
    totals = {"old": 0.0, "new": 0.0}
    print(f"frame codec, µs per frame (best of 5 x {number}); stdlib -> msgspec (speed-up)")
    for label, frame in sample_frames().items():
        rows = []
        for name, old, new in _frame_cases(frame):
            t_old, t_new = _per_op(old, number), _per_op(new, number)
            totals["old"] += t_old
            totals["new"] += t_new
            rows.append(f"{name} {t_old * 1e6:.2f} -> {t_new * 1e6:.2f} ({t_old / t_new:.2f}x)")
        print(f"  {label}: " + "; ".join(rows))
    print(f"  all cases: {totals['old'] / totals['new']:.2f}x faster with msgspec (ratio stdlib / msgspec)")


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


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(port: int, appends: int, binary: bool) -> dict[str, float]:
    """ACK round trip and publish-to-delivery time of one append at a time (ms: p50, p99)."""
    sub = ably_realtime(port, use_binary_protocol=binary)
    pub = ably_realtime(port, client_id="agent-latency", use_binary_protocol=binary)
    await asyncio.gather(wait_connected(sub), wait_connected(pub))
    name = f"latency-{time.time_ns()}"
    arrived: dict[str, float] = {}
    got = asyncio.Event()

    def listener(msg: object) -> None:
        arrived[msg.data] = time.perf_counter()  # type: ignore[attr-defined]
        got.set()

    await sub.channels.get(name).subscribe(listener)
    ch = pub.channels.get(name)
    await ch.attach()
    serial = (await ch.publish(Message(name="ai-output", data="start"))).serials[0]
    await asyncio.wait_for(got.wait(), 10)
    acks: list[float] = []
    deliveries: list[float] = []
    for i in range(appends):
        fragment = f"t{i:05d}"
        got.clear()
        t0 = time.perf_counter()
        await ch.append_message(Message(serial=serial, data=fragment))
        acks.append(time.perf_counter() - t0)
        while fragment not in arrived:
            await asyncio.wait_for(got.wait(), 10)
            got.clear()
        deliveries.append(arrived[fragment] - t0)
    await asyncio.gather(sub.close(), pub.close())
    ms = 1000.0
    return {
        "ack_p50_ms": _percentile(acks, 0.5) * ms,
        "ack_p99_ms": _percentile(acks, 0.99) * ms,
        "delivery_p50_ms": _percentile(deliveries, 0.5) * ms,
        "delivery_p99_ms": _percentile(deliveries, 0.99) * ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--latency", type=int, default=300, help="appends of the latency probe (0 = skip it)")
    parser.add_argument("--json", action="store_true", help="JSON wire format instead of msgpack")
    parser.add_argument("--no-js", action="store_true", help="skip the ably-js comparison")
    parser.add_argument("--frames", action="store_true", help="only the frame codec micro-benchmark")
    parser.add_argument(
        "--process", action="store_true",
        help="run the emulator in its own process and print its CPU per append for both clients (Linux)",
    )
    args = parser.parse_args()
    if args.frames:
        bench_frames()
        return
    with serving(args.process) as (port, emulator_cpu_s):
        fmt = "json" if args.json else "msgpack"
        if args.latency > 0:
            lat = asyncio.run(latency(port, args.latency, not args.json))
            print(
                f"ably-python via emulator ({fmt}), one append at a time x {args.latency}: ACK round trip "
                f"p50 {lat['ack_p50_ms']:.2f} ms, p99 {lat['ack_p99_ms']:.2f} ms; publish to delivery "
                f"p50 {lat['delivery_p50_ms']:.2f} ms, p99 {lat['delivery_p99_ms']:.2f} ms"
            )
        cpu0 = emulator_cpu_s()
        result = asyncio.run(run(port, args.streams, args.appends, not args.json))
        py_cpu = emulator_cpu_s() - cpu0
        cpu_note = f"; emulator CPU {py_cpu / result['appends'] * 1e6:.0f} µs per append" if args.process else ""
        print(
            f"ably-python via emulator ({fmt}): {args.streams} streams x {args.appends} appends = "
            f"{result['appends']} appends; all ACKed in {result['acked_s']:.2f}s, all delivered in "
            f"{result['delivered_s']:.2f}s ({result['appends_per_s']:.0f} appends/s); nothing lost or "
            f"reordered{cpu_note}"
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
        cpu0 = emulator_cpu_s()  # the clients run in node: the emulator's own CPU
        try:
            js = bridge.call(
                "ably_js",
                "benchStreams",
                options=connect_info(port, use_binary_protocol=not args.json),
                streams=args.streams,
                appends=args.appends,
            )
        finally:
            emulator_cpu = emulator_cpu_s() - cpu0
            bridge.close()
        js_rate = result["appends"] / (js["deliveredMs"] / 1000)
        print(
            f"ably-js via emulator ({fmt}): all ACKed in {js['ackedMs'] / 1000:.2f}s, all delivered in "
            f"{js['deliveredMs'] / 1000:.2f}s ({js_rate:.0f} appends/s); nothing lost or reordered; "
            f"emulator CPU {emulator_cpu:.2f}s ({emulator_cpu / result['appends'] * 1e6:.0f} µs per append)"
        )
        print(f"ratio ably-python / ably-js throughput: {result['appends_per_s'] / js_rate:.2f}")


@contextlib.contextmanager
def serving(process: bool) -> Iterator[tuple[int, Callable[[], float]]]:
    """The emulator's port and a clock of its CPU seconds: in a thread of this process (the clock is
    this process's CPU, the emulator's own only while the clients run in node), or with
    ``process`` in a child process (``python -m ai_transport.emulator``; its CPU from /proc)."""
    if not process:
        with EmulatorThread(port=0) as emu:
            yield emu.port, time.process_time
        return
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [sys.executable, "-m", "ai_transport.emulator", "--port", "0"], cwd=root, stdout=subprocess.PIPE,
        text=True, env=dict(os.environ, PYTHONPATH=str(root)),
    )
    try:
        assert proc.stdout is not None
        found = re.search(r"http://127\.0\.0\.1:(\d+)", proc.stdout.readline())
        assert found, "the emulator did not say where it listens"
        tick = os.sysconf("SC_CLK_TCK")

        def cpu() -> float:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick  # utime + stime

        yield int(found.group(1)), cpu
    finally:
        proc.terminate()
        proc.wait(10)

if __name__ == "__main__":
    main()
