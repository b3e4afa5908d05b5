"""Hand-written UI message chunk streams for the Vercel codec conformance tests (every chunk type,
client inputs, second-pass tool outputs, interleaved tools, aborts, errors, cancels, rejects)."""

from __future__ import annotations

from typing import Any


def agent(cmid: str, run_id: str = "r1", message_id: str | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {
        "extras": {"headers": {"role": "assistant", "run-id": run_id, "codec-message-id": cmid}}
    }
    if message_id is not None:
        options["messageId"] = message_id
    return options


def out(*chunks: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"op": "output", "value": c} for c in chunks]


def inp(value: dict[str, Any], cmid: str) -> dict[str, Any]:
    """An input step; a tool answer is published under its target's codec-message-id (as a client
    session does), which is what the decoder hands the reducer as the answer's target."""
    return {"op": "input", "value": value, "messageId": cmid, "extras": {"headers": {"run-id": "r1"}}}


USER = {
    "kind": "user-message",
    "message": {
        "id": "u-1",
        "role": "user",
        "parts": [
            {"type": "text", "text": "weather in Paris?"},
            {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA=="},
            {"type": "data-context", "id": "ctx", "data": {"city": "Paris", "n": [1, 2.5]}},
            {"type": "step-start"},
        ],
    },
}

FULL_TURN = [
    {"options": {}, "steps": [inp(USER, "u1")]},
    {
        "options": agent("a1", message_id="msg-fallback"),
        "steps": out(
            {"type": "start", "messageMetadata": {"model": "m", "t": 1.5}},
            {"type": "start-step"},
            {"type": "reasoning-start", "id": "r0", "providerMetadata": {"openai": {"itemId": "rs_1"}}},
            {"type": "reasoning-delta", "id": "r0", "delta": "thinking "},
            {"type": "reasoning-delta", "id": "r0", "delta": "hard"},
            {"type": "reasoning-end", "id": "r0"},
            {"type": "text-start", "id": "t0"},
            {"type": "text-delta", "id": "t0", "delta": "Let me "},
            {"type": "text-delta", "id": "t0", "delta": "check. ü"},
            {"type": "text-end", "id": "t0", "providerMetadata": {"openai": {"itemId": "msg_1"}}},
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "weather", "title": "Weather"},
            {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"city":'},
            {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '"Paris"}'},
            {"type": "tool-input-available", "toolCallId": "c1", "toolName": "weather", "input": {"city": "Paris"}},
            {"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "ap1"},
            {"type": "tool-input-start", "toolCallId": "c2", "toolName": "lookup", "dynamic": True},
            {"type": "tool-input-available", "toolCallId": "c2", "toolName": "lookup", "input": {"q": 1}, "dynamic": True},
            {"type": "source-url", "sourceId": "s1", "url": "https://example.com", "title": "Ex"},
            {"type": "source-document", "sourceId": "s2", "mediaType": "text/plain", "title": "Doc", "filename": "a.txt"},
            {"type": "file", "mediaType": "image/png", "url": "https://example.com/a.png"},
            {"type": "data-weather", "id": "d1", "data": {"status": "loading"}},
            {"type": "data-weather", "id": "d1", "data": {"status": "done", "temp": 21}},
            {"type": "data-status", "data": "transient", "transient": True},
            {"type": "data-log", "data": [1, None, "x"]},
            {"type": "message-metadata", "messageMetadata": {"tokens": 42}},
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "tool-calls", "messageMetadata": {"done": True}},
        ),
    },
    {
        "options": {},
        "steps": [
            inp({"kind": "tool-approval-response", "codecMessageId": "a1", "payload": {"toolCallId": "c1", "approved": True, "reason": "ok"}}, "a1"),
            inp({"kind": "tool-result", "codecMessageId": "a1", "payload": {"toolCallId": "c2", "output": {"hits": [1]}}}, "a1"),
        ],
    },
    {
        "options": agent("a2"),
        "steps": out(
            {"type": "start"},
            {"type": "start-step"},
            {"type": "tool-output-available", "toolCallId": "c1", "output": {"temp": 21}, "preliminary": False},
            {"type": "text-start", "id": "t0"},
            {"type": "text-delta", "id": "t0", "delta": "It is 21."},
            {"type": "text-end", "id": "t0"},
            {"type": "finish-step"},
            {"type": "finish"},
        ),
    },
]

EDGES = [
    {
        "options": agent("b1", run_id="r2"),
        "steps": [
            *out(
                {"type": "start", "messageId": "own-id"},
                {"type": "start-step"},
                {"type": "tool-input-start", "toolCallId": "x1", "toolName": "a"},
                {"type": "tool-input-start", "toolCallId": "x2", "toolName": "b"},
                {"type": "tool-input-delta", "toolCallId": "x2", "inputTextDelta": "[1,"},
                {"type": "tool-input-delta", "toolCallId": "x1", "inputTextDelta": "not json"},
                {"type": "tool-input-delta", "toolCallId": "x2", "inputTextDelta": "2]"},
                {"type": "tool-input-available", "toolCallId": "x2", "toolName": "b", "input": [1, 2]},
                {"type": "tool-input-error", "toolCallId": "x1", "toolName": "a", "input": "not json", "errorText": "bad input"},
                {"type": "tool-input-error", "toolCallId": "x3", "toolName": "c", "errorText": "unknown tool", "dynamic": True},
                # no stream for x4: 0.8.0 publishes it discretely
                {"type": "tool-input-available", "toolCallId": "x4", "toolName": "d", "input": {"k": "v"}, "title": "D"},
                {"type": "tool-output-error", "toolCallId": "x2", "errorText": "boom"},
                {"type": "tool-approval-request", "toolCallId": "x4", "approvalId": "ap4"},
                {"type": "tool-output-denied", "toolCallId": "x4"},
                {"type": "tool-output-available", "toolCallId": "nobody", "output": 1},
                {"type": "text-start", "id": "t1"},
                {"type": "text-delta", "id": "t1", "delta": "partial"},
                {"type": "text-delta", "id": "nope", "delta": "x"},
                {"type": "made-up-chunk", "x": 1},
                {"type": "error", "errorText": "model failed"},
                {"type": "abort", "reason": "user stop"},
                {"type": "abort"},
            ),
            {"op": "cancel"},
            *out({"type": "text-delta", "id": "t1", "delta": "after cancel"}),
            {"op": "close"},
            *out({"type": "start"}),
        ],
    },
    {
        "options": {},
        "steps": [
            inp({"kind": "tool-result-error", "codecMessageId": "b1", "payload": {"toolCallId": "x1", "message": "client failed"}}, "b1"),
            inp({"kind": "tool-approval-response", "codecMessageId": "b1", "payload": {"toolCallId": "x4", "approved": False}}, "b1"),
            inp({"kind": "regenerate", "target": "b1", "parent": "u1"}, "i5"),
            inp({"kind": "user-message", "message": {"id": "u-2", "role": "user", "parts": []}}, "u2"),
            inp({"kind": "unknown-kind"}, "i6"),
            inp({"kind": "tool-result", "codecMessageId": "b1"}, "i7"),
        ],
    },
    # a result that arrives before its assistant (pending), then the assistant
    {
        "options": {},
        "steps": [inp({"kind": "tool-result", "codecMessageId": "c1", "payload": {"toolCallId": "y1", "output": "early"}}, "c1")],
    },
    {
        "options": agent("c1", run_id="r3"),
        "steps": out(
            {"type": "start"},
            {"type": "tool-input-start", "toolCallId": "y1", "toolName": "z"},
            {"type": "tool-input-available", "toolCallId": "y1", "toolName": "z", "input": {}},
            {"type": "finish", "finishReason": "not-a-reason"},
        ),
    },
]

# Runs of text deltas (the fold's text-run fast path) broken by whatever may change their target:
# another text stream, other chunks, a restarted stream id, another message with the same ids.
TEXT_RUNS = [
    {
        "options": agent("t1", run_id="r3"),
        "steps": out(
            {"type": "start"},
            {"type": "text-start", "id": "a"},
            {"type": "text-delta", "id": "a", "delta": "a1 "},
            {"type": "text-delta", "id": "a", "delta": "a2 "},
            {"type": "text-start", "id": "b"},
            {"type": "text-delta", "id": "b", "delta": "b1 "},
            {"type": "text-delta", "id": "a", "delta": "a3 "},
            {"type": "reasoning-start", "id": "r"},
            {"type": "reasoning-delta", "id": "r", "delta": "hm"},
            {"type": "text-delta", "id": "a", "delta": "a4 "},
            {"type": "text-end", "id": "a"},
            {"type": "text-start", "id": "a"},
            {"type": "text-delta", "id": "a", "delta": "again"},
            {"type": "text-delta", "id": "a", "delta": "!"},
            {"type": "text-end", "id": "a"},
            {"type": "text-end", "id": "b"},
            {"type": "finish"},
        ),
    },
    {
        "options": agent("t2", run_id="r4"),
        "steps": out(
            {"type": "start"},
            {"type": "text-start", "id": "a"},
            {"type": "text-delta", "id": "a", "delta": "other "},
            {"type": "text-delta", "id": "a", "delta": "message"},
            {"type": "finish"},
        ),
    },
]

CASES = {"full-turn": FULL_TURN, "edges": EDGES, "text-runs": TEXT_RUNS}
