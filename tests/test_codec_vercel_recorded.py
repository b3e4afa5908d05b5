"""Recorded UI message chunk streams (``tests/fixtures/vercel-ui``: the real AI SDK's UI stream of
recorded OpenAI Responses streams) through :class:`UIMessageCodec` and the real ``./vercel`` codec:
the same publish log and wire, the same decode + fold both ways. Each stream is one turn: the user's
message, the agent's chunks, and for a turn that asks for approval the user's answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_codec_vercel_js import _check
from vercel_cases import agent, inp, out

UI = Path(__file__).resolve().parent / "fixtures" / "vercel-ui"
NAMES = sorted(p.name for p in UI.glob("*.ui.jsonl"))


def chunks_of(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (UI / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def turn(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    user = {"kind": "user-message", "message": {"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}}
    runs = [{"options": {}, "steps": [inp(user, "u1")]}, {"options": agent("a1"), "steps": out(*chunks)}]
    for c in chunks:
        if c["type"] == "tool-approval-request":
            answer = {"kind": "tool-approval-response", "codecMessageId": "a1", "payload": {"toolCallId": c["toolCallId"], "approved": True}}
            runs.append({"options": {}, "steps": [inp(answer, "a1")]})
    return runs


def test_every_recording_is_here() -> None:
    assert len(NAMES) >= 10
    kinds = {c["type"] for name in NAMES for c in chunks_of(name)}
    assert {"reasoning-delta", "text-delta", "tool-input-delta", "tool-approval-request", "error", "finish"} <= kinds


@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_matches_js(node: Any, name: str) -> None:
    ours = _check(node, turn(chunks_of(name)))
    assistant = next(m["message"] for m in ours["messages"] if m["codecMessageId"] == "a1")
    if any(c["type"] == "tool-approval-request" for c in chunks_of(name)):
        assert ours["approved"], "the approved call is owed"
    assert assistant["role"] == "assistant"
