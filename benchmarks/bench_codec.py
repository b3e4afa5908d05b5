"""Decoder + reducer throughput: Python vs @ably/ai-transport@0.8.0 in node.

Run: ``python benchmarks/bench_codec.py [--messages 100000] [--rounds 3] [--scale 1000000]``.

1. **Recorded wire.** The recorded Responses streams (``tests/fixtures/openai-responses``) are encoded
   by the reference encoder into a live Ably wire (creates + appends, serials minted in order), which
   is repeated (serials and codec message ids made unique per repetition) to ``--messages``
   messages. Both implementations decode the whole wire with one decoder and fold each repetition
   into its own projection (as the transport keeps one per run node), then ``getMessages``. Prints
   wire messages/s and decoded events/s for each, and the ratio (JS time / Python time; > 1 means
   Python is faster). Rounds alternate between the two; each keeps its best of ``--rounds``. The wire
   log itself is frozen out of Python's cyclic GC (it is input, not work).
2. **One long stream.** A single text stream of ``--long`` deltas (a long answer), decoded and
   folded by both: the accumulated text is kept as chunks on our side, so this stays linear (JS
   strings are ropes).
3. **Vercel codec.** The same measure for :class:`~ai_transport.codec.UIMessageCodec` against 0.8.0's
   ``./vercel`` codec: a wire written by the reference encoder from UI message chunk runs (a user
   message, an assistant turn with reasoning, text, tools, approvals, sources, files and data parts,
   client answers, a second pass; plus a long text answer), repeated to ``--messages``.
4. **Scaling.** One message growing to ``--scale`` items (``output_item.added`` + a text stream of
   one delta each), folded in Python at 1/100, 1/10 and all of ``--scale``: the time per event
   stays flat (every fold is O(1) amortised).

Not a test.
"""

from __future__ import annotations

import argparse
import copy
import gc
import sys
import time
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


def bench_python(reps: list[list[dict]], rounds: int) -> dict:
    times = []
    events = messages = 0
    fold, get_messages, init = reducer.fold, reducer.get_messages, reducer.init
    for _ in range(rounds):
        t0 = time.perf_counter()
        decoder = Decoder()
        decode = decoder.decode
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
        times.append(time.perf_counter() - t0)
    return {"events": events, "messages": messages, "seconds": min(times)}


def bench_vercel(reps: list[list[dict]]) -> dict:
    """One round of decode + fold with the Vercel codec (as ``benchDecodeFold`` of vercel_codec.mjs)."""
    fold, init = UIMessageCodec.fold, UIMessageCodec.init
    t0 = time.perf_counter()
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
    return {"events": events, "seconds": time.perf_counter() - t0}


def vercel_runs() -> list[dict]:
    """The chunk runs of the Vercel wire: the conformance tests' full turn plus a long text answer."""
    from vercel_cases import FULL_TURN, agent, out

    words = [{"type": "text-delta", "id": "t9", "delta": f"word{i} "} for i in range(200)]
    answer = out({"type": "start"}, {"type": "start-step"}, {"type": "text-start", "id": "t9"}, *words)
    answer += out({"type": "text-end", "id": "t9"}, {"type": "finish-step"}, {"type": "finish"})
    return [*FULL_TURN, {"options": agent("a9"), "steps": answer}]


def run_vercel(node: NodeBridge, messages: int, rounds: int) -> None:
    base = node.call("vercel_codec", "encode", runs=vercel_runs())["wire"]
    repeat = max(1, -(-messages // len(base)))
    reps = replicate(copy.deepcopy(base), repeat)
    gc.collect()
    gc.freeze()
    py_s, js_s = [], []
    for _ in range(rounds):
        py = bench_vercel(reps)
        py_s.append(py["seconds"])
        js = node.call("vercel_codec", "benchDecodeFold", wire=base, repeat=repeat, rounds=1)
        js_s.append(js["seconds"])
    assert js["events"] == py["events"], (js, py)
    n = len(base) * repeat
    print(f"\nvercel codec wire: {len(base)} messages per repetition x {repeat} = {n} messages")
    print(f"{'':8} {'seconds':>9} {'messages/s':>12} {'events/s':>12}")
    print(f"{'python':8} {min(py_s):9.3f} {n / min(py_s):12,.0f} {py['events'] / min(py_s):12,.0f}")
    print(f"{'js':8} {min(js_s):9.3f} {n / min(js_s):12,.0f} {js['events'] / min(js_s):12,.0f}")
    print(f"ratio (JS time / Python time): {min(js_s) / min(py_s):.2f}  ({py['events']} events)")


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
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--long", type=int, default=50_000, help="deltas in the long-stream run (0 to skip)")
    ap.add_argument("--scale", type=int, default=1_000_000, help="items in the scaling run (0 to skip)")
    ap.add_argument("--vercel", type=int, default=1, help="1: also measure the Vercel codec (0 to skip)")
    args = ap.parse_args()

    node = NodeBridge()
    try:
        runs = [
            run
            for stem_runs in recorded_runs(ROOT / "tests" / "fixtures" / "openai-responses").values()
            for run in stem_runs
        ]
        base = node.call("codec_decoder", "encodeWire", runs=runs)["wire"]
        repeat = max(1, -(-args.messages // len(base)))
        print(f"wire: {len(base)} messages per repetition x {repeat} = {len(base) * repeat} messages")

        reps = replicate(copy.deepcopy(base), repeat)
        # The wire log is input, not work: keep the cyclic GC from re-scanning it on every pass.
        gc.collect()
        gc.freeze()
        # Alternate the two implementations round by round (a shared machine's load then weighs on
        # both alike) and keep each one's best round.
        py_runs, js_times = [], []
        for _ in range(args.rounds):
            py_runs.append(bench_python(reps, 1))
            js = node.call("codec_decoder", "bench", base=base, repeat=repeat, rounds=1)
            js_times.append(js["timesMs"][0] / 1000)
        py = min(py_runs, key=lambda r: r["seconds"])
        js_s = min(js_times)
        assert js["events"] == py["events"] and js["messages"] == py["messages"], (js, py)
        n = len(base) * repeat
        print(f"{'':8} {'seconds':>9} {'messages/s':>12} {'events/s':>12}")
        print(
            f"{'python':8} {py['seconds']:9.3f} {n / py['seconds']:12,.0f} {py['events'] / py['seconds']:12,.0f}"
        )
        print(f"{'js':8} {js_s:9.3f} {n / js_s:12,.0f} {js['events'] / js_s:12,.0f}")
        print(
            f"ratio (JS time / Python time): {js_s / py['seconds']:.2f}  ({py['events']} events, {py['messages']} messages)"
        )
        if args.vercel:
            run_vercel(node, args.messages, args.rounds)
        if args.long:
            long_wire = long_stream(args.long)
            py_l, js_l = [], []
            for _ in range(args.rounds):
                py_l.append(bench_python([long_wire], 1)["seconds"])
                js_l.append(
                    node.call("codec_decoder", "bench", base=long_wire, repeat=1, rounds=1)["timesMs"][0]
                    / 1000
                )
            print(
                f"\none stream of {args.long:,} deltas: python {min(py_l):.3f}s, js {min(js_l):.3f}s, "
                f"ratio {min(js_l) / min(py_l):.2f}"
            )
    finally:
        node.close()

    if args.scale:
        print("\nscaling (Python fold, one message): time per event")
        for n in sorted({max(1, args.scale // 100), max(1, args.scale // 10), args.scale}):
            print(f"  {n:>9,} items: {scaling(n) * 1e6:6.2f} us/event")


if __name__ == "__main__":
    main()
