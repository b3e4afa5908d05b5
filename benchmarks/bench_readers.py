"""Readers on a 1M-item conversation: Python vs @ably/ai-transport@0.8.0 in node.

Run: ``python benchmarks/bench_readers.py [--items 1000000]``. Prints items/s for each reader in
both implementations and the ratio (JS time / Python time; > 1 means Python is faster). Not a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from jsbridge import JS_DIR, ensure_node_modules

from ai_transport.readers import (
    approved_unexecuted_calls,
    resolved_call_ids,
    to_responses_input,
    unanswered_calls,
)

JS = r"""
import { toResponsesInput, resolvedCallIds, unansweredCalls, approvedUnexecutedCalls } from '@ably/ai-transport/openai';
import fs from 'node:fs';
const messages = JSON.parse(fs.readFileSync(0, 'utf8'));
const out = {};
for (const [name, fn] of Object.entries({ toResponsesInput, resolvedCallIds, unansweredCalls, approvedUnexecutedCalls })) {
  let best = Infinity, n = 0;
  for (let r = 0; r < 5; r++) { const t = process.hrtime.bigint(); const x = fn(messages); best = Math.min(best, Number(process.hrtime.bigint() - t) / 1e9); n = x.length ?? x.size; }
  out[name] = { seconds: best, size: n };
}
console.log(JSON.stringify(out));
"""


def conversation(n_items: int) -> list[dict]:
    messages = []
    i = 0
    while sum(len(m["items"]) for m in messages[-1:]) >= 0 and i * 10 < n_items:
        cid = f"call_{i}"
        items = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
            {"type": "reasoning", "id": f"rs_{i}", "summary": []},
            {"type": "function_call", "call_id": cid, "name": "f", "arguments": "{}"},
        ] + [{"type": "function_call_output", "call_id": cid, "output": "ok"}] * (i % 2) + [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]}
        ] * (7 - i % 2)
        states = {cid: {"approval": "approved"}} if i % 3 == 0 else {}
        messages.append({"role": "assistant", "items": items, "toolCallStates": states})
        i += 1
    return messages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--items", type=int, default=1_000_000)
    args = ap.parse_args()
    messages = conversation(args.items)
    n = sum(len(m["items"]) for m in messages)
    ensure_node_modules()
    js = json.loads(
        subprocess.run(
            ["node", "--input-type=module", "-e", JS], cwd=JS_DIR, input=json.dumps(messages),
            capture_output=True, text=True, check=True,
        ).stdout
    )
    readers = {
        "toResponsesInput": to_responses_input,
        "resolvedCallIds": resolved_call_ids,
        "unansweredCalls": unanswered_calls,
        "approvedUnexecutedCalls": approved_unexecuted_calls,
    }
    print(f"{n} items in {len(messages)} messages")
    print(f"{'reader':26} {'python items/s':>15} {'js items/s':>15} {'js_time/py_time':>16}")
    for name, fn in readers.items():
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            res = fn(messages)
            best = min(best, time.perf_counter() - t)
        assert len(res) == js[name]["size"], (name, len(res), js[name]["size"])
        print(f"{name:26} {n / best:15,.0f} {n / js[name]['seconds']:15,.0f} {js[name]['seconds'] / best:16.2f}")


if __name__ == "__main__":
    main()
