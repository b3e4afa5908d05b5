"""The ``useChat`` example (``examples/usechat``) in headless Chromium: a React page with the AI SDK's
``useChat`` over 0.8.0's ``createChatTransport``, its server, and the Python agent (``UIMessageCodec``),
all on the local emulator.

The page asks; the answer streams in (reasoning, text) and the ``get_weather`` call shows Approve /
Deny; a click makes ``useChat`` send the answer and the server wake a fresh agent (on the approval
path a process of its own, ``--worker-process``), which resumes the run from the channel alone and
streams the final answer into the same bubble. A reload (same
``?c=``) shows the conversation again, read from channel history. Screenshots of each point are saved
(``AIT_SCREENSHOTS`` to keep them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support_chromium import CHROMIUM, page_built, stop_server
from support_emulator import emulator_thread  # noqa: F401  (fixture)

from ai_transport.cli.scenario import get_weather

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "usechat"
DRIVER = ROOT / "tests" / "js" / "handlers" / "usechat_browser.mjs"
QUESTION = "What's the weather in Paris right now? Should I take an umbrella?"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def page_built_once() -> Path:
    """Chromium installed, the page's npm packages installed (``npm ci``, once per checkout), the bundle
    built (again only when ``app.jsx`` or the lockfile is newer)."""
    return page_built("usechat", "useChat example")


@pytest.fixture
def page_url(page_built_once, emulator_thread, decision) -> Iterator[str]:
    """``examples/usechat/server.py`` (with its Python agent) on a free port; yields the page URL. For
    the approval, every wake-up is its own agent process (``--worker-process``)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE / "server.py"), "--emulator", emulator_thread.url, "--port", "0",
         "--namespace", f"uc{os.getpid()}", "--stream-delay", "0.01",
         *(["--worker-process"] if decision == "approve" else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert "usechat example: open http://" in line, line + (proc.stderr.read() if proc.stderr else "")
        yield line.split("open ", 1)[1].split()[0]
    finally:
        err = stop_server(proc)
        assert "agent error" not in err, err


def drive(url: str, decision: str) -> dict[str, Any]:
    keep = os.environ.get("AIT_SCREENSHOTS")
    with tempfile.TemporaryDirectory(prefix="ait-chromium-") as profile, \
            tempfile.TemporaryDirectory(prefix="ait-shots-") as tmp:
        shots = Path(keep) / decision if keep else Path(tmp)
        shots.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["node", str(DRIVER), url, str(CHROMIUM), profile, str(shots), decision],
                           check=False, capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert r.returncode == 0, r.stdout + r.stderr
        result = json.loads(r.stdout.strip().splitlines()[-1])
        assert result["ok"], json.dumps(result, indent=1)
        assert sorted(p.name for p in shots.glob("*.png")) == ["final.png", "pending.png", "reloaded.png"]
    assert not [c for c in result["console"] if c.startswith(("pageerror", "error"))], result["console"]
    return result


def assistant(shown: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in shown["messages"] if m["role"] == "assistant"]


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_the_page_asks_streams_and_an_answer_resumes_the_python_agent(page_url, decision) -> None:
    result = drive(page_url, decision)
    assert result["empty"]["messages"] == [] and "?c=" in result["empty"]["url"]

    pending = result["pending"]
    assert pending["status"] == "waiting for your approval" and pending["errors"] == []
    assert [m["role"] for m in pending["messages"]] == ["user", "assistant"]
    assert pending["messages"][0]["text"] == [QUESTION]
    (first,) = assistant(pending)
    assert first["reasoning"][0].startswith("The user asks about the current weather in Paris.")
    assert first["text"] == ["Let me look up the current weather in Paris for you."]
    assert first["tools"] == [{
        "state": "approval-requested", "name": "get_weather", "label": "needs your approval",
        "input": '{"city":"Paris","unit":"celsius"}', "output": None, "buttons": ["Approve", "Deny"],
    }]
    # The answer was rendered as it streamed: many growing lengths, not one piece at the end.
    growth = sorted(set(pending["shownTextLengths"]))
    assert len(growth) >= 5 and growth[-1] == len(first["reasoning"][0]) + len(first["text"][0]), growth

    final = result["final"]
    assert final["status"] == "ready" and final["errors"] == []
    (answer,) = assistant(final)  # useChat continues the suspended message in place
    (tool,) = answer["tools"]
    assert tool["buttons"] == []
    if decision == "approve":
        weather = get_weather("Paris")
        assert (tool["state"], tool["label"]) == ("output-available", "done")
        assert json.loads(tool["output"]) == weather
        assert answer["text"][-1].startswith(
            f"Right now in Paris it is {weather['temperature']}°C with {weather['conditions']}"
        )
    else:
        assert (tool["state"], tool["label"], tool["output"]) == ("output-denied", "denied", None)
        assert answer["text"][-1].startswith("I did not check the live weather")
    assert answer["text"][0] == "Let me look up the current weather in Paris for you."

    # A reload reads the conversation back from the channel: the same question, call and answer
    # (the resumed pass is its own message there).
    reloaded = result["reloaded"]
    assert reloaded["url"] == final["url"] and reloaded["status"] == "ready"
    assert [m["role"] for m in reloaded["messages"]] == ["user", "assistant", "assistant"]
    assert reloaded["messages"][0]["text"] == [QUESTION]
    assert [t["state"] for m in assistant(reloaded) for t in m["tools"]] == [tool["state"]]
    assert [t for m in assistant(reloaded) for t in m["text"]] == answer["text"]
