"""Codec encoder throughput: Python vs @ably/ai-transport@0.8.0 in node.

Run: ``python benchmarks/bench_codec_encoder.py [--deltas 200000]``. Encodes one long response (a
reasoning summary, a text message and a function call, ``--deltas`` deltas in all) through a writer
that acknowledges at once, in both implementations, and prints events/s and the ratio (JS time /
Python time; > 1 means Python is faster), each the best of 7 runs. Also times the sans-I/O core
alone, and the same for the Vercel codec (``UIMessageCodec`` against 0.8.0's ``./vercel`` codec) on
the UI message chunks of a like answer (reasoning, text, a tool's input). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from jsbridge import JS_DIR, ensure_node_modules

from ai_transport.codec import EncoderCore, ResponsesCodec, UIMessageCodec

JS = r"""
import { ResponsesCodec } from '@ably/ai-transport/openai';
import fs from 'node:fs';
const events = JSON.parse(fs.readFileSync(0, 'utf8'));
let serial = 0;
const writer = {
  async publish(m) { return { serials: (Array.isArray(m) ? m : [m]).map(() => `s${++serial}`) }; },
  async appendMessage() { return { versionSerial: 'v' }; },
  async updateMessage() { return { versionSerial: 'u' }; },
};
let best = Infinity;
for (let r = 0; r < 7; r++) {
  const enc = ResponsesCodec.createEncoder(writer, { extras: { headers: { 'run-id': 'r' } } });
  const t = process.hrtime.bigint();
  for (const e of events) await enc.publishOutput(e, { messageId: 'm' });
  await enc.close();
  best = Math.min(best, Number(process.hrtime.bigint() - t) / 1e9);
}
console.log(JSON.stringify({ seconds: best }));
"""


JS_VERCEL = JS.replace(
    "import { ResponsesCodec } from '@ably/ai-transport/openai';",
    "import { createUIMessageCodec } from '@ably/ai-transport/vercel';\nconst ResponsesCodec = createUIMessageCodec();",
)


def ui_answer(n_deltas: int) -> list[dict]:
    """UI message chunks of an answer like :func:`response`'s: reasoning, text, a tool's input."""
    third = max(1, n_deltas // 3)
    evs: list[dict] = [{"type": "start", "messageId": "resp"}, {"type": "start-step"}, {"type": "reasoning-start", "id": "rs_1"}]
    evs += [{"type": "reasoning-delta", "id": "rs_1", "delta": "think "} for _ in range(third)]
    evs += [{"type": "reasoning-end", "id": "rs_1"}, {"type": "text-start", "id": "msg_1"}]
    evs += [{"type": "text-delta", "id": "msg_1", "delta": "word "} for _ in range(third)]
    evs += [{"type": "text-end", "id": "msg_1"}, {"type": "tool-input-start", "toolCallId": "call_1", "toolName": "f"}]
    evs += [{"type": "tool-input-delta", "toolCallId": "call_1", "inputTextDelta": "{}"} for _ in range(n_deltas - 2 * third)]
    evs += [
        {"type": "tool-input-available", "toolCallId": "call_1", "toolName": "f", "input": {}},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "tool-calls"},
    ]
    return evs


def response(n_deltas: int) -> list[dict]:
    third = max(1, n_deltas // 3)
    evs: list[dict] = [
        {"type": "response.created", "response": {"id": "resp"}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "rs_1", "type": "reasoning", "summary": []}},
        {"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "output_index": 0,
         "summary_index": 0, "part": {"type": "summary_text", "text": ""}},
    ]
    evs += [{"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0,
             "summary_index": 0, "delta": "think "} for _ in range(third)]
    evs += [
        {"type": "response.reasoning_summary_text.done", "item_id": "rs_1", "output_index": 0,
         "summary_index": 0, "text": "…"},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAA"}},
        {"type": "response.output_item.added", "output_index": 1,
         "item": {"id": "msg_1", "type": "message", "status": "in_progress", "content": [], "role": "assistant"}},
        {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 1, "content_index": 0,
         "part": {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}},
    ]
    evs += [{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0,
             "delta": "word ", "logprobs": [], "sequence_number": i} for i in range(third)]
    evs += [
        {"type": "response.output_text.done", "item_id": "msg_1", "output_index": 1, "content_index": 0,
         "text": "…"},
        {"type": "response.output_item.done", "output_index": 1,
         "item": {"id": "msg_1", "type": "message", "status": "completed", "content": [], "role": "assistant"}},
        {"type": "response.output_item.added", "output_index": 2,
         "item": {"id": "fc_1", "type": "function_call", "status": "in_progress", "arguments": "",
                  "call_id": "call_1", "name": "f"}},
    ]
    evs += [{"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2,
             "delta": "{}"} for _ in range(n_deltas - 2 * third)]
    evs += [
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 2,
         "arguments": "{}", "name": "f"},
        {"type": "response.output_item.done", "output_index": 2,
         "item": {"id": "fc_1", "type": "function_call", "status": "completed", "arguments": "{}",
                  "call_id": "call_1", "name": "f"}},
        {"type": "response.completed", "response": {"id": "resp"}},
    ]
    return evs


class NullWriter:
    def __init__(self) -> None:
        self.n = 0

    async def publish(self, msg):
        self.n += 1
        return [f"s{self.n}"]

    async def append_message(self, msg):
        return "v"

    async def update_message(self, msg):
        return "u"


async def py_shell(events: list[dict], codec: Any = ResponsesCodec) -> float:
    best = float("inf")
    for _ in range(7):
        enc = codec.create_encoder(NullWriter(), {"headers": {"run-id": "r"}})
        t = time.perf_counter()
        for e in events:
            await enc.publish_output(e, "m")
        await enc.close()
        best = min(best, time.perf_counter() - t)
    return best


def py_core(events: list[dict]) -> float:
    best = float("inf")
    for _ in range(7):
        core = EncoderCore({"headers": {"run-id": "r"}})
        t = time.perf_counter()
        n = 0
        for e in events:
            if core.encode_delta(e) is not None:  # the per-delta path, as the shell takes it
                continue
            for op in core.encode_output(e, message_id="m"):
                if op.stream_id is not None and op.action == "publish":
                    n += 1
                    core.stream_started(op.stream_id, [f"s{n}"])
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--deltas", type=int, default=200_000)
    args = ap.parse_args()
    events = response(args.deltas)
    ensure_node_modules()
    js = json.loads(subprocess.run(
        ["node", "--input-type=module", "-e", JS], cwd=JS_DIR, input=json.dumps(events),
        capture_output=True, text=True, check=True,
    ).stdout)["seconds"]
    shell = asyncio.run(py_shell(events))
    core = py_core(events)
    n = len(events)
    print(f"{n} events ({args.deltas} deltas)")
    print(f"JS  encoder          {n / js:12,.0f} events/s")
    print(f"Py  encoder (asyncio) {n / shell:11,.0f} events/s   ratio JS/Py {js / shell:5.2f}")
    print(f"Py  core (sans-I/O)   {n / core:11,.0f} events/s   ratio JS/Py {js / core:5.2f}")

    chunks = ui_answer(args.deltas)
    js_v = json.loads(subprocess.run(
        ["node", "--input-type=module", "-e", JS_VERCEL], cwd=JS_DIR, input=json.dumps(chunks),
        capture_output=True, text=True, check=True,
    ).stdout)["seconds"]
    shell_v = asyncio.run(py_shell(chunks, UIMessageCodec))
    n = len(chunks)
    print(f"\nvercel codec: {n} chunks ({args.deltas} deltas)")
    print(f"JS  encoder          {n / js_v:12,.0f} events/s")
    print(f"Py  encoder (asyncio) {n / shell_v:11,.0f} events/s   ratio JS/Py {js_v / shell_v:5.2f}")


if __name__ == "__main__":
    main()
