"""SSE decoding throughput: ai_transport.responses.SSEDecoder vs the openai SDK's SSEDecoder.

Decodes the recorded Responses streams (framed as the real wire) split into chunks of several sizes,
plus one 1 MB event split into 1 KB chunks (a large ``response.completed``). Prints events/s and the
ratio ours / openai (> 1 means we are faster). Run: ``python benchmarks/bench_responses_sse.py``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ai_transport.responses.sse import SSEDecoder

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "openai-responses" / "vercel-ai"


def wire() -> bytes:
    out = []
    for path in sorted(FIXTURES.glob("*.chunks.txt")):
        for line in path.read_bytes().split(b"\n"):
            if line.strip():
                out.append(b"event: " + json.loads(line)["type"].encode() + b"\ndata: " + line + b"\n\n")
    return b"".join(out)


def split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def ours(chunks: list[bytes]) -> int:
    decoder = SSEDecoder()
    n = 0
    for chunk in chunks:
        n += len(decoder.feed(chunk))
    return n + len(decoder.close())


def openai_sdk(chunks: list[bytes]) -> int:
    from openai._streaming import SSEDecoder as OpenAIDecoder

    return sum(1 for _ in OpenAIDecoder().iter_bytes(iter(chunks)))


def bench(fn, chunks: list[bytes], repeat: int) -> tuple[float, int]:
    best = float("inf")
    count = 0
    for _ in range(repeat):
        start = time.perf_counter()
        count = fn(chunks)
        best = min(best, time.perf_counter() - start)
    return best, count


def main() -> None:
    data = wire()
    big = b"event: response.completed\ndata: " + b'{"type":"response.completed","x":"' + b"a" * 1_000_000 + b'"}\n\n'
    cases = [(f"recorded wire, {size} B chunks", split(data, size), 20) for size in (64, 1024, 16384)]
    cases.append(("1 MB event, 1 KB chunks", split(big, 1024), 5))
    try:
        import openai._streaming  # noqa: F401

        have_openai = True
    except ImportError:
        have_openai = False
    for label, chunks, repeat in cases:
        t_ours, n_ours = bench(ours, chunks, repeat)
        line = f"{label:32s} ours {n_ours / t_ours:>12,.0f} events/s"
        if have_openai:
            t_sdk, n_sdk = bench(openai_sdk, chunks, repeat)
            assert n_sdk == n_ours, (n_sdk, n_ours)
            line += f"   openai {n_sdk / t_sdk:>12,.0f} events/s   ratio {t_sdk / t_ours:5.2f}x"
        print(line)


if __name__ == "__main__":
    main()
