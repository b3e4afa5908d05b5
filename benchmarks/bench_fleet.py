"""Fleet-scale publishing: many concurrent streams through one connection under Ably's limits.

Run: ``python benchmarks/bench_fleet.py [--streams 1 10 50] [--seconds 3] [--rate 150]
[--skip-js] [--in-process-only [--repeat N]] [--signing-key KEY]``. Not a test. Prints:

* for each stream count, through one ``AblyChannel`` (its default publish budget) on the emulator
  with Ably's limits on (``RateLimits()``: 50/s per connection and channel, appendRollupWindow 40):
  the Ably operations/s the connection sent (mean and the busiest 1 s window; target: the budget,
  ``rate+burst`` operations in any 1 s, under Ably's 50; the mean of a short run includes the burst),
  the 42911 / 42913 count (target 0), text intact at a subscriber on another connection (target
  100%), the agent's CPU us per model delta (the publishing thread only; the emulator and the
  subscriber run in other threads) and the p50 / p99 latency from a model delta to its delivery,
  beside its floor: N streams sharing ``rate`` operations/s get one append each per N/rate s at
  best, so a delta can wait that long (``floor ms``; Ably's own 50/s per channel makes it N/50 s
  for any client: 200 ms at 10 streams, 1 s at 50);
* the in-process path: an AgentSession piping a long text answer on an in-process channel, CPU us
  per model delta (the whole process: encoder, channel, the agent's own echo); with
  ``--signing-key`` also with ``AgentSession(signing_key=KEY)`` (every stream wire tagged, the
  echo's text hashed by the recovery ledger) beside it;
* the encoder shell vs the JS encoder, and the readers at 1M items vs JS (``bench_codec_encoder.py``
  and ``bench_readers.py``, run as they are; ``--skip-js`` leaves them out).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.channels.memory import InProcessHub
from ai_transport.codec import ResponsesCodec
from ai_transport.emulator import EmulatorThread, RateLimits, ably_realtime


def response_events(i: int, n_deltas: int) -> tuple[list[dict[str, Any]], list[str]]:
    item = f"msg_{i}"
    deltas = [f"w{j % 97} " for j in range(n_deltas)]
    head: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": item, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}},
        {"type": "response.content_part.added", "item_id": item, "output_index": 0, "content_index": 0,
         "part": {"type": "output_text", "annotations": [], "text": ""}},
    ]
    text = "".join(deltas)
    tail: list[dict[str, Any]] = [
        {"type": "response.output_text.done", "item_id": item, "output_index": 0, "content_index": 0,
         "text": text},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"id": item, "type": "message", "status": "completed", "role": "assistant",
                  "content": [{"type": "output_text", "text": text, "annotations": []}]}},
    ]
    return head + [{"type": "response.output_text.delta", "item_id": item, "output_index": 0,
                    "content_index": 0, "delta": d, "logprobs": []} for d in deltas] + tail, deltas


class CountingChannel(AblyChannel):
    """An AblyChannel that records when each Ably operation was sent."""

    stamps: list[float]

    async def publish(self, messages: Any) -> list[str]:
        self.stamps.append(time.monotonic())
        return await super().publish(messages)

    async def append_message(self, message: Any) -> str:
        self.stamps.append(time.monotonic())
        return await super().append_message(message)

    async def update_message(self, message: Any) -> str:
        self.stamps.append(time.monotonic())
        return await super().update_message(message)


class Viewer(threading.Thread):
    """A subscriber on its own connection, loop and thread: decodes text, stamps each arrival."""

    def __init__(self, emu: EmulatorThread, channel: str) -> None:
        super().__init__(daemon=True)
        self.emu, self.channel = emu, channel
        self.text: dict[str, str] = {}
        self.arrivals: dict[str, list[tuple[int, float]]] = {}
        self.done: set[str] = set()
        self.ready = threading.Event()
        self.stop_evt: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.stop_evt = asyncio.Event()
        rt = ably_realtime(self.emu, client_id="viewer")
        ch = AblyChannel(self.channel, rt)
        decoder = ResponsesCodec.create_decoder()

        def on_message(msg: Any) -> None:
            now = time.monotonic()
            for out in decoder.decode(msg).outputs:
                ev = out.get("event", out)
                if ev.get("type") == "response.output_text.delta":
                    t = self.text[ev["item_id"]] = self.text.get(ev["item_id"], "") + ev["delta"]
                    self.arrivals.setdefault(ev["item_id"], []).append((len(t), now))
                elif ev.get("type") == "response.output_item.done":
                    self.done.add(ev["item"]["id"])

        await ch.subscribe(on_message)
        self.ready.set()
        await self.stop_evt.wait()
        await rt.close()

    def stop(self) -> None:
        if self.loop is not None and self.stop_evt is not None:
            self.loop.call_soon_threadsafe(self.stop_evt.set)
        self.join(10)


async def fleet_run(emu: EmulatorThread, streams: int, seconds: float, rate: float) -> dict[str, Any]:
    name = f"fleet-{streams}-{time.time_ns()}"
    viewer = Viewer(emu, name)
    viewer.start()
    viewer.ready.wait(10)
    rt = ably_realtime(emu, client_id="agent")
    while str(getattr(rt.connection.state, "value", rt.connection.state)) != "connected":
        await asyncio.sleep(0.01)
    agent = CountingChannel(name, rt)
    agent.stamps = []
    n_deltas = int(seconds * rate)
    emitted: dict[str, list[tuple[int, float]]] = {}
    expected: dict[str, str] = {}
    before = dict(emu.emulator.limiter.rejected)

    async def stream(i: int) -> None:
        events, _ = response_events(i, n_deltas)
        item = f"msg_{i}"
        encoder = ResponsesCodec.create_encoder(agent)
        marks = emitted[item] = []
        text_len = 0
        t0 = time.monotonic()
        k = 0
        for ev in events:
            if ev["type"] == "response.output_text.delta":
                k += 1
                delay = t0 + k / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                text_len += len(ev["delta"])
                marks.append((text_len, time.monotonic()))
            await encoder.publish_output(ev)
        await encoder.close()
        expected[item] = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")

    cpu0, wall0 = time.thread_time(), time.monotonic()
    await asyncio.gather(*(stream(i) for i in range(streams)))
    cpu = time.thread_time() - cpu0
    wall = time.monotonic() - wall0
    deadline = time.monotonic() + 60
    while len(viewer.done) < streams and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await rt.close()
    viewer.stop()
    rejected = {k: v - before.get(k, 0) for k, v in emu.emulator.limiter.rejected.items()}
    stamps = agent.stamps
    busiest, j = 0, 0
    for i, t in enumerate(stamps):
        while stamps[j] <= t - 1.0:
            j += 1
        busiest = max(busiest, i - j + 1)
    latencies: list[float] = []
    for item, marks in emitted.items():
        arrivals = viewer.arrivals.get(item, [])
        a = 0
        for length, t_emit in marks:
            while a < len(arrivals) and arrivals[a][0] < length:
                a += 1
            if a < len(arrivals):
                latencies.append(arrivals[a][1] - t_emit)
    latencies.sort()
    intact = sum(1 for item, text in expected.items() if viewer.text.get(item) == text)
    return {
        "streams": streams,
        "ops_mean": len(stamps) / wall,
        "ops_busiest": busiest,
        "budget": agent.publish_budget.rate,
        "burst": agent.publish_budget.burst,
        "rejected": rejected,
        "intact": 100.0 * intact / streams,
        "cpu_us": 1e6 * cpu / (streams * n_deltas),
        "p50": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "p99": 1000 * latencies[int(0.99 * (len(latencies) - 1))] if latencies else float("nan"),
        "deltas": streams * n_deltas,
        "wall": wall,
    }


async def in_process_cpu_per_delta(n_deltas: int, signing_key: str | None = None) -> float:
    from support_sessions import text_delta, text_opening, user_message

    from ai_transport.sessions.agent import AgentSession
    from ai_transport.sessions.client import ClientSession

    hub = InProcessHub()
    client = ClientSession(hub.client("alice").channel("chat"))
    await client.connect()
    agent = AgentSession(hub.client("agent").channel("chat"), signing_key=signing_key)
    await agent.connect()
    sent = await client.view.send(user_message("Go"))
    await client.close()  # only the agent's side is measured
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    text = "".join(f"w{j % 97} " for j in range(n_deltas))
    events = [*text_opening(), *(text_delta(f"w{j % 97} ") for j in range(n_deltas)),
              {"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0,
               "content_index": 0, "text": text},
              {"type": "response.output_item.done", "output_index": 0,
               "item": {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}}]

    async def model() -> Any:
        for ev in events:
            yield ev

    cpu0 = time.process_time()
    await run.pipe(model())
    for _ in range(1000):  # let the agent's own echo drain
        await asyncio.sleep(0)
    cpu = time.process_time() - cpu0
    await run.end("complete")
    await agent.end()
    return 1e6 * cpu / n_deltas


def run_script(script: str, *args: str) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                         capture_output=True, text=True, check=False)
    return (out.stdout + out.stderr).strip()


def in_process_rows(n_deltas: int, repeat: int, signing_key: str | None) -> None:
    """Agent CPU per delta without a key (and with ``signing_key``), runs interleaved."""
    keys: list[str | None] = [None] if signing_key is None else [None, signing_key]
    runs: dict[str | None, list[float]] = {k: [] for k in keys}
    for _ in range(repeat):
        for key in keys:
            runs[key].append(asyncio.run(in_process_cpu_per_delta(n_deltas, key)))
    for key in keys:
        us = runs[key]
        label = "agent CPU per model delta" + (", signing_key" if key else "")
        print(f"{label}: {' '.join(f'{u:.1f}' for u in us)} us "
              f"(min {min(us):.1f}, median {statistics.median(us):.1f}; {n_deltas} deltas)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 10, 50])
    ap.add_argument("--seconds", type=float, default=3.0, help="model time per stream")
    ap.add_argument("--rate", type=float, default=150.0, help="deltas/s per stream")
    ap.add_argument("--in-process-deltas", type=int, default=20_000)
    ap.add_argument("--skip-js", action="store_true")
    ap.add_argument("--in-process-only", action="store_true",
                    help="run only the in-process path (agent CPU per delta)")
    ap.add_argument("--repeat", type=int, default=1, help="in-process runs (figures of each)")
    ap.add_argument("--signing-key", default=None,
                    help="also measure the in-process path with AgentSession(signing_key=KEY)")
    args = ap.parse_args()

    if args.in_process_only:
        print("== in-process path (AgentSession on InProcessHub) ==")
        in_process_rows(args.in_process_deltas, args.repeat, args.signing_key)
        return

    print("== through one AblyChannel on the emulator, Ably's limits on (RateLimits()) ==")
    print(f"{'streams':>7} {'ops/s mean':>10} {'busiest 1s':>10} {'budget':>6} {'42911':>5} {'42913':>5} "
          f"{'intact':>6} {'cpu us/delta':>12} {'p50 ms':>7} {'p99 ms':>7} {'floor ms':>8}")
    with EmulatorThread(port=0, rate_limits=RateLimits()) as emu:
        for n in args.streams:
            r = asyncio.run(fleet_run(emu, n, args.seconds, args.rate))
            budget = f"{r['budget']:.0f}+{r['burst']:.0f}"
            print(f"{r['streams']:>7} {r['ops_mean']:>10.1f} {r['ops_busiest']:>10} {budget:>6} "
                  f"{r['rejected'][42911]:>5} {r['rejected'][42913]:>5} {r['intact']:>5.0f}% "
                  f"{r['cpu_us']:>12.1f} {r['p50']:>7.1f} {r['p99']:>7.1f} {1000 * n / r['budget']:>8.0f}")

    print("\n== in-process path (AgentSession on InProcessHub) ==")
    in_process_rows(args.in_process_deltas, args.repeat, args.signing_key)

    if not args.skip_js:
        print("\n== encoder shell vs JS (bench_codec_encoder.py) ==")
        print(run_script("bench_codec_encoder.py"))
        print("\n== readers at 1M items vs JS (bench_readers.py) ==")
        print(run_script("bench_readers.py"))


if __name__ == "__main__":
    main()
