"""Emulator memory: appends to one message, and stalled subscribers (issue #11, item 6).

Run: ``python benchmarks/bench_emulator_memory.py [--appends 20000 100000] [--stream-mb 50]``.
Each measurement runs in a fresh subprocess (its RSS is the emulator's plus a raw websocket
client's). Prints:

* the RSS growth for N appends of 10 bytes (each with a small AI Transport ``extras``) to one
  message, next to the bytes appended (target: within 2x the bytes appended + a constant), the
  marginal RSS per append between the sizes (target: about 20 bytes for a 10-byte append), and
  the store's own bytes per append (tracemalloc of ``Store.apply``: the data plus its columns);
* the RSS growth while ``--stream-mb`` MB are published to a channel with 10 subscribers that
  attached and never read again, next to the bytes the store keeps and the documented bound
  (``RateLimits.max_outbound_bytes`` per subscriber, 8 MiB).
Not a test.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def appends(n: int) -> dict[str, float]:
    from websockets.sync.client import connect

    from ai_transport.emulator import EmulatorThread

    extras = {"ai": {"transport": {"stream": "true", "status": "streaming", "stream-id": "msg_1:0"},
                     "codec": {"kind": "output_text"}}}
    with EmulatorThread(port=0) as emu, connect(f"ws://127.0.0.1:{emu.port}/?accessToken=x&v=6") as ws:
        json.loads(ws.recv())  # CONNECTED
        ws.send(json.dumps({"action": 15, "msgSerial": 0, "channel": "mem",
                            "messages": [{"name": "ai-output", "data": "", "extras": extras}]}))
        serial = json.loads(ws.recv())["res"][0]["serials"][0]
        base = rss()
        t0 = time.perf_counter()
        batch = 500
        for start in range(1, n + 1, batch):
            count = min(batch, n + 1 - start)
            for i in range(start, start + count):
                ws.send(json.dumps({"action": 15, "msgSerial": i, "channel": "mem", "messages": [
                    {"action": 5, "serial": serial, "data": "0123456789", "extras": extras}]}))
            for _ in range(count):
                ws.recv()
        seconds = time.perf_counter() - t0
        grown = rss() - base
        agg = emu.call(lambda: emu.emulator.store.get("mem", serial))
        assert len(agg["data"]) == 10 * n
    return {"appends": n, "bytes": 10 * n, "rss": grown, "seconds": seconds}


def store_bytes(n: int) -> float:
    """Bytes per append the store holds (tracemalloc), appends applied directly."""
    import tracemalloc

    from ai_transport.emulator.store import Store

    extras = {"ai": {"transport": {"stream": "true", "status": "streaming"}}}
    store = Store()
    (create,) = store.apply("mem", [{"name": "ai-output", "data": ""}], connection_id="c", client_id=None,
                            id_prefix="p")
    tracemalloc.start()
    for _ in range(n):
        msg = {"action": 5, "serial": create.serial, "data": "0123456789", "extras": dict(extras)}
        store.apply("mem", [msg], connection_id="c", client_id=None, id_prefix="p")
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return held / n


def stalled(stream_mb: int, subscribers: int = 10) -> dict[str, float]:
    import httpx

    from ai_transport.emulator import EmulatorThread, RateLimits

    limits = RateLimits.off()
    with EmulatorThread(port=0, rate_limits=limits) as emu:
        socks = []
        for _ in range(subscribers):
            s = socket.create_connection(("127.0.0.1", emu.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(b"GET /?accessToken=x&v=6 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                      b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                      b"Sec-WebSocket-Version: 13\r\n\r\n")
            attach = json.dumps({"action": 10, "channel": "big"}).encode()
            s.sendall(bytes([0x81, 0x80 | len(attach)]) + b"\0\0\0\0" + attach)
            socks.append(s)
        time.sleep(0.3)
        base = rss()
        payload = "x" * 60_000
        sent = 0
        with httpx.Client(base_url=emu.url, auth=tuple(emu.key.split(":", 1))) as http:
            while sent < stream_mb * 1_000_000:
                http.post("/channels/big/messages", json={"name": "m", "data": payload}).raise_for_status()
                sent += len(payload)
        time.sleep(0.3)
        grown = rss() - base
        cut = emu.emulator.outbound_disconnects
        for s in socks:
            s.close()
    return {"sent": sent, "rss": grown, "cut": cut, "bound": limits.max_outbound_bytes * subscribers}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--appends", type=int, nargs="+", default=[20_000, 100_000])
    ap.add_argument("--stream-mb", type=int, default=50)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, value = args.child.split(":")
        out = appends(int(value)) if kind == "appends" else stalled(int(value))
        print(json.dumps(out))
        return

    def child(spec: str) -> dict[str, float]:
        res = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True, text=True,
                             check=True)
        return json.loads(res.stdout.strip().splitlines()[-1])

    print("== appends of 10 bytes to one message ==")
    runs = []
    for n in args.appends:
        r = child(f"appends:{n}")
        runs.append(r)
        per = (r["rss"] - 2 * r["bytes"]) / n
        print(f"{n:>7} appends: bytes appended {r['bytes'] / 1e6:6.2f} MB, RSS +{r['rss'] / 1e6:7.2f} MB "
              f"({r['rss'] / max(1, r['bytes']):5.1f}x; beyond 2x bytes: {per:6.0f} B/append), "
              f"{n / r['seconds']:,.0f} appends/s")
    if len(runs) > 1:
        a, b = runs[0], runs[-1]
        marginal = (b["rss"] - a["rss"]) / max(1, b["appends"] - a["appends"])
        print(f"marginal RSS per append ({a['appends']:.0f} -> {b['appends']:.0f}): {marginal:.1f} B "
              f"(target ~{2 * 10} B: 2x the 10 bytes appended)")
    print(f"store bytes per append (tracemalloc, 100k appends): {store_bytes(100_000):.1f} B "
          "(10 B of data + columns)")
    print(f"\n== 10 stalled subscribers while {args.stream_mb} MB are published ==")
    r = child(f"stalled:{args.stream_mb}")
    print(f"RSS +{r['rss'] / 1e6:.1f} MB for {r['sent'] / 1e6:.1f} MB published (the store keeps it all: "
          f"{r['sent'] / 1e6:.1f} MB); beyond the store {max(0, r['rss'] - r['sent']) / 1e6:.1f} MB; "
          f"bound for the queues 10 x 8 MiB = {r['bound'] / 1e6:.1f} MB; subscribers cut: {r['cut']:.0f}")


if __name__ == "__main__":
    main()
