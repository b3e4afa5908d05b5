"""Decoder + reducer throughput: Python vs @ably/ai-transport@0.8.0 in node.

Run: ``python benchmarks/bench_codec.py [--messages 100000] [--rounds 7] [--long 50000] [--scale 1000000]``
(the headline figure: ``--messages 100000 --rounds 7 --long 0 --scale 0``).

1. **Recorded wire.** The recorded Responses streams (``tests/fixtures/openai-responses``) are encoded
   by the reference encoder into a live Ably wire (creates + appends, serials minted in order), which
   is repeated (serials and codec message ids made unique per repetition) to ``--messages``
   messages. Both implementations decode the whole wire with one decoder and fold each repetition
   into its own projection (as the transport keeps one per run node), then ``getMessages``. Prints
   wire messages/s and decoded events/s for each, and the ratio (JS time / Python time; > 1 means
   Python is faster). The wire log itself is frozen out of Python's cyclic GC (it is input, not work).
2. **How it is measured.** The machine may be shared, so every round measures both the wall time
   and the **CPU time** of the measured section (Python ``time.process_time()``, node
   ``process.cpuUsage()`` user + system: the whole process, V8's GC and compiler threads included).
   Rounds interleave the two implementations (Python, JS, Python, JS, ...) after ``--warmup``
   unmeasured rounds of each, and the figures are **medians** over ``--rounds`` (with the range);
   the ratio is JS median / Python median, for CPU and for wall time. CPU time is the headline
   figure: load from other processes stretches wall time (and node's more than CPython's, since
   node runs several threads) far more than the CPU a round itself uses (shared caches still slow
   both under load, so compare figures taken at a like load). The load average is printed before
   and after.
3. **One long stream.** A single text stream of ``--long`` deltas (a long answer), decoded and
   folded by both: the accumulated text is kept as chunks on our side, so this stays linear (JS
   strings are ropes).
4. **Vercel codec.** The same measure for :class:`~ai_transport.codec.UIMessageCodec` against 0.8.0's
   ``./vercel`` codec: a wire written by the reference encoder from UI message chunk runs (a user
   message, an assistant turn with reasoning, text, tools, approvals, sources, files and data parts,
   client answers, a second pass; plus a long text answer), repeated to ``--messages``.
5. **Scaling.** One message growing to ``--scale`` items (``output_item.added`` + a text stream of
   one delta each), folded in Python at 1/100, 1/10 and all of ``--scale``: the time per event
   stays flat (every fold is O(1) amortised).

Not a test.
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from jsbridge import NodeBridge
from support_codec_decoder import recorded_runs

from ai_transport.codec import UIMessageCodec, reducer
from ai_transport.codec.decoder import Decoder


def replicate(base: list[dict], repeat: int) -> list[list[dict]]:
    """Exactly what the ``replicate`` of tests/js/handlers/codec_decoder.mjs does."""
    reps = []
    for r in range(repeat):
        p = f"{r:06d}-"
        rep = []
        for m in base:
            msg = dict(m)
            msg["serial"] = p + m["serial"]
            msg["version"] = {"serial": p + m["version"]["serial"]}
            ai = dict(m["extras"]["ai"])
            t = dict(ai["transport"])
            t["codec-message-id"] = f"{t['codec-message-id']}-{r}"
            ai["transport"] = t
            msg["extras"] = {"ai": ai}
            rep.append(msg)
        reps.append(rep)
    return reps


class Rounds:
    """The wall and CPU seconds of each measured round of one implementation."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def add(self, wall: float, cpu: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)

    def add_js(self, result: dict) -> None:
        """One round as a JS bench handler reports it (``timesMs`` / ``cpuMs``)."""
        self.add(result["timesMs"][0] / 1000, result["cpuMs"][0] / 1000)

    def median(self, kind: str) -> float:
        return statistics.median(getattr(self, kind))

    def line(self, name: str, n: int) -> str:
        def fig(kind: str) -> str:
            xs = getattr(self, kind)
            return f"{statistics.median(xs):7.3f} ({min(xs):.3f}-{max(xs):.3f})"

        return f"{name:8} {fig('cpu'):>22} {fig('wall'):>22} {n / self.median('cpu'):12,.0f}"


def report(py: Rounds, js: Rounds, n: int, what: str) -> None:
    """Print both implementations' medians (and ranges) and the JS / Python ratios."""
    print(f"{'':8} {'cpu s: median (range)':>22} {'wall s: median (range)':>22} {'msgs/cpu s':>12}")
    print(py.line("python", n))
    print(js.line("js", n))
    paired = sorted(j / p for j, p in zip(js.cpu, py.cpu))
    print(
        f"ratio (JS time / Python time), {what}: cpu {js.median('cpu') / py.median('cpu'):.2f} "
        f"(paired rounds {paired[0]:.2f}-{paired[-1]:.2f}), wall {js.median('wall') / py.median('wall'):.2f}"
    )


def timed(fn: Callable[[], dict]) -> tuple[dict, float, float]:
    """``fn()`` with the wall and CPU seconds it took."""
    w0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - w0, time.process_time() - c0


def decode_fold_python(reps: list[list[dict]]) -> dict:
    """One round of decode + fold with the Responses codec (as ``bench`` of codec_decoder.mjs)."""
    fold, get_messages, init = reducer.fold, reducer.get_messages, reducer.init
    decode = Decoder().decode
    events = messages = 0
    for rep in reps:
        state = init()
        for raw in rep:
            result = decode(raw)
            mid = raw["extras"]["ai"]["transport"]["codec-message-id"]
            serial = raw["serial"]
            for ev in result.inputs:
                fold(state, "input", ev, mid, serial)
            for ev in result.outputs:
                fold(state, "output", ev, mid, serial)
            events += len(result.inputs) + len(result.outputs)
        messages += len(get_messages(state))
    return {"events": events, "messages": messages}


def bench_vercel(reps: list[list[dict]]) -> dict:
    """One round of decode + fold with the Vercel codec (as ``benchDecodeFold`` of vercel_codec.mjs)."""
    fold, init = UIMessageCodec.fold, UIMessageCodec.init
    decode = UIMessageCodec.create_decoder().decode
    events = 0
    for rep in reps:
        state = init()
        for raw in rep:
            result = decode(raw)
            mid = raw["extras"]["ai"]["transport"]["codec-message-id"]
            for ev in result.inputs:
                fold(state, "input", ev, mid)
            for ev in result.outputs:
                fold(state, "output", ev, mid)
            events += len(result.inputs) + len(result.outputs)
        UIMessageCodec.get_messages(state)
    return {"events": events}


def vercel_runs() -> list[dict]:
    """The chunk runs of the Vercel wire: the conformance tests' full turn plus a long text answer."""
    from vercel_cases import FULL_TURN, agent, out

    words = [{"type": "text-delta", "id": "t9", "delta": f"word{i} "} for i in range(200)]
    answer = out({"type": "start"}, {"type": "start-step"}, {"type": "text-start", "id": "t9"}, *words)
    answer += out({"type": "text-end", "id": "t9"}, {"type": "finish-step"}, {"type": "finish"})
    return [*FULL_TURN, {"options": agent("a9"), "steps": answer}]


def run_vercel(node: NodeBridge, messages: int, rounds: int, warmup: int) -> None:
    base = node.call("vercel_codec", "encode", runs=vercel_runs())["wire"]
    repeat = max(1, -(-messages // len(base)))
    reps = replicate(copy.deepcopy(base), repeat)
    gc.collect()
    gc.freeze()
    py_r, js_r = Rounds(), Rounds()
    for i in range(warmup + rounds):
        py, wall, cpu = timed(lambda: bench_vercel(reps))
        js = node.call("vercel_codec", "benchDecodeFold", wire=base, repeat=repeat, rounds=1)
        if i >= warmup:
            py_r.add(wall, cpu)
            js_r.add_js(js)
    assert js["events"] == py["events"], (js, py)
    n = len(base) * repeat
    print(f"\nvercel codec wire: {len(base)} messages per repetition x {repeat} = {n} messages")
    report(py_r, js_r, n, f"Vercel decode + fold, {py['events']} events")


def long_stream(n: int) -> list[dict]:
    """The live wire of one message: item added, a text stream of ``n`` deltas, its close, item done."""
    from support_codec_decoder import added_item_message, append, create, stream_transport, text_codec

    t, c = stream_transport("msg_1:0", "m1"), text_codec()
    wire = [added_item_message("s0000000000", "msg_1"), create("s0000000001", "ai-output", "", t, c)]
    for i in range(n):
        wire.append(append("s0000000001", f"s{i + 2:010d}", "token ", t, c))
    wire.append(append("s0000000001", f"s{n + 2:010d}", "", {**t, "status": "complete"}, c))
    return wire


def scaling(n_items: int) -> float:
    """Seconds per folded event for one message of ``n_items`` items (added + part + delta + done)."""
    state = reducer.init()
    fold = reducer.fold
    events = []
    for i in range(n_items):
        item_id = f"msg_{i}"
        events.append(
            {
                "type": "response.output_item.added",
                "item": {
                    "id": item_id,
                    "type": "message",
                    "role": "assistant",
                    "status": "in_progress",
                    "content": [],
                },
                "output_index": i,
            }
        )
        events.append(
            {
                "type": "response.content_part.added",
                "item_id": item_id,
                "output_index": i,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
            }
        )
        events.append(
            {"type": "response.output_text.delta", "item_id": item_id, "content_index": 0, "delta": "x"}
        )
        events.append(
            {
                "type": "response.output_item.done",
                "item": {"type": "message", "id": item_id, "status": "completed"},
            }
        )
    t0 = time.perf_counter()
    for ev in events:
        fold(state, "output", ev, "m1")
    (msg,) = reducer.get_messages(state)
    elapsed = time.perf_counter() - t0
    assert len(msg.message.items) == n_items
    return elapsed / len(events)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=100_000, help="wire messages to decode (approximately)")
    ap.add_argument("--rounds", type=int, default=7, help="measured rounds of each implementation")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured rounds of each before them")
    ap.add_argument("--long", type=int, default=50_000, help="deltas in the long-stream run (0 to skip)")
    ap.add_argument("--scale", type=int, default=1_000_000, help="items in the scaling run (0 to skip)")
    ap.add_argument("--vercel", type=int, default=1, help="1: also measure the Vercel codec (0 to skip)")
    args = ap.parse_args()

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    node = NodeBridge()
    try:
        runs = [
            run
            for stem_runs in recorded_runs(ROOT / "tests" / "fixtures" / "openai-responses").values()
            for run in stem_runs
        ]
        base = node.call("codec_decoder", "encodeWire", runs=runs)["wire"]
        repeat = max(1, -(-args.messages // len(base)))
        n = len(base) * repeat
        print(f"wire: {len(base)} messages per repetition x {repeat} = {n} messages")

        reps = replicate(copy.deepcopy(base), repeat)
        # The wire log is input, not work: keep the cyclic GC from re-scanning it on every pass.
        gc.collect()
        gc.freeze()
        # Interleave the two implementations round by round (a shared machine's load then weighs on
        # both alike); the first ``--warmup`` rounds of each are not measured.
        py_r, js_r = Rounds(), Rounds()
        for i in range(args.warmup + args.rounds):
            py, wall, cpu = timed(lambda: decode_fold_python(reps))
            js = node.call("codec_decoder", "bench", base=base, repeat=repeat, rounds=1)
            if i >= args.warmup:
                py_r.add(wall, cpu)
                js_r.add_js(js)
        assert js["events"] == py["events"] and js["messages"] == py["messages"], (js, py)
        report(py_r, js_r, n, f"Responses decode + fold, {py['events']} events, {py['messages']} messages")
        if args.vercel:
            run_vercel(node, args.messages, args.rounds, args.warmup)
        if args.long:
            long_wire = long_stream(args.long)
            py_l, js_l = Rounds(), Rounds()
            for i in range(args.warmup + args.rounds):
                _, wall, cpu = timed(lambda: decode_fold_python([long_wire]))
                js = node.call("codec_decoder", "bench", base=long_wire, repeat=1, rounds=1)
                if i >= args.warmup:
                    py_l.add(wall, cpu)
                    js_l.add_js(js)
            print(f"\none stream of {args.long:,} deltas:")
            report(py_l, js_l, len(long_wire), "one long stream")
    finally:
        node.close()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    if args.scale:
        print("\nscaling (Python fold, one message): time per event")
        for n in sorted({max(1, args.scale // 100), max(1, args.scale // 10), args.scale}):
            print(f"  {n:>9,} items: {scaling(n) * 1e6:6.2f} us/event")


if __name__ == "__main__":
    main()
