"""``ai-transport demo --vercel``: the demo's conversation in Vercel AI SDK UI message chunks through
``UIMessageCodec``, printed live: the approval path on the in-process channel (as a subprocess, and
in-process to read the client's final ``UIMessage`` s), the deny path over the emulator with the real
ably SDK, and the flags it cannot be combined with."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ai_transport.cli import build_parser
from ai_transport.cli.demo import demo
from ai_transport.cli.scenario import get_weather
from ai_transport.cli.vercel_demo import tool_label, ui_blocks

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
CALL = re.escape('[tool] get_weather({"city":"Paris","unit":"celsius"})')
SUMMARY = (r"^done: run complete; \d+ messages published, \d+ appends, 1 run\(s\), 2 agent wake-ups, "
           r"2 model calls, [\d.]+ s$")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ai_transport", "demo", "--vercel", "--no-color", "--delay",
                           "0.001", *args], check=False, capture_output=True, text=True, timeout=90, cwd=ROOT,
                          env=ENV)


def in_order(out: str, *patterns: str) -> None:
    lines, at = out.splitlines(), 0
    for p in patterns:
        at = next((i + 1 for i in range(at, len(lines)) if re.search(p, lines[i])), -1)
        assert at > 0, f"{p!r} missing (in order) in:\n{out}"


def test_approve_streams_the_call_suspends_and_a_fresh_agent_answers() -> None:
    r = cli()
    assert r.returncode == 0, r.stdout + r.stderr
    weather = get_weather("Paris")
    in_order(
        r.stdout,
        r"^codec: UIMessageCodec",
        r"^channel: demo-[0-9a-f]{8} \(in-process\)",
        r"^you> What's the weather in Paris right now\? Should I take an umbrella\?$",
        r"^-- run [0-9a-f]{8} started$",
        r"^thinking> The user asks about the current weather in Paris\.",
        r"^assistant> Let me look up the current weather in Paris for you\.$",
        rf"^  {CALL} -- awaiting approval$",
        r"^-- run [0-9a-f]{8} suspended: waiting for the client$",
        r"^client: approving get_weather",
        r"^-- run [0-9a-f]{8} resumed$",
        rf"^  {CALL} -- done$",
        rf"^  \[result\] .*\"conditions\":\"{weather['conditions']}\"",
        rf"^assistant> Right now in Paris it is {weather['temperature']}°C with {weather['conditions']}",
        r"^-- run [0-9a-f]{8} ended: complete$",
        SUMMARY,
    )
    assert r.stderr == ""


@pytest.mark.asyncio
async def test_the_client_ends_with_ui_messages_folded_by_the_codec() -> None:
    args = build_parser().parse_args(["demo", "--vercel", "--no-color", "--delay", "0"])
    out = io.StringIO()
    result = await demo(args, out)
    assert result.exit_code == 0, out.getvalue()
    messages = [m.message for m in result.messages]
    assert [m["role"] for m in messages] == ["user", "assistant", "assistant"]  # the resumed pass: its own
    asked, answer = messages[1], messages[2]
    assert [p["type"] for p in asked["parts"]] == ["step-start", "reasoning", "text", "tool-get_weather"]
    tool = asked["parts"][-1]
    assert tool["state"] == "output-available" and tool["output"] == get_weather("Paris")
    assert [p["type"] for p in answer["parts"]] == ["step-start", "reasoning", "text"]
    assert answer["parts"][-1]["text"] in out.getvalue()
    assert [r.status for r in result.runs] == ["complete"]
    # Every streamed text delta went out as an append: the text streamed.
    assert result.stats.appends > 20


def test_deny_over_the_emulator_with_the_real_ably_sdk() -> None:
    r = cli("--emulator", "--deny", "not today")
    assert r.returncode == 0, r.stdout + r.stderr
    in_order(
        r.stdout,
        r"^emulator: started at http://127\.0\.0\.1:\d+",
        r"\(Ably emulator at http://127\.0\.0\.1:\d+, ably SDK\)",
        rf"^  {CALL} -- awaiting approval$",
        r"^client: denying get_weather\(.*\) \(not today\)$",
        rf"^  {CALL} -- denied$",
        r"^assistant> I did not check the live weather",
        SUMMARY,
    )
    assert "[result]" not in r.stdout  # the tool never ran


@pytest.mark.parametrize("flag", ["--agents-sdk", "--temporal", "--ask"])
def test_flags_it_cannot_be_combined_with_are_refused_on_one_line(flag: str) -> None:
    r = cli(flag)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"ai-transport: error: --vercel cannot be combined with {flag} " \
                       "(the Vercel demo's agent is scripted)\n"


def test_blocks_label_every_tool_state() -> None:
    states = {"input-streaming": "streaming", "input-available": "called", "approval-requested": "awaiting approval",
              "output-available": "done", "output-error": "failed", "output-denied": "denied"}
    for state, label in states.items():
        assert tool_label({"state": state}) == label
    assert tool_label({"state": "approval-responded", "approval": {"approved": True}}) == "approved"
    assert tool_label({"state": "approval-responded", "approval": {"approved": False}}) == "denied"
    blocks = ui_blocks([{"role": "assistant", "parts": [
        {"type": "text", "text": "hi"}, {"type": "dynamic-tool", "toolName": "x", "toolCallId": "c", "input": {},
                                         "state": "output-error", "errorText": "boom"}, "junk"]}])
    assert [(b.kind, b.text, b.status) for b in blocks] == [
        ("assistant", "hi", ""), ("call", "x({})", "failed"), ("result", "boom", "")]
