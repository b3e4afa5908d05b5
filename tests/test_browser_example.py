"""The browser example in headless Chromium: ably-js + @ably/ai-transport (npm) on the page, a Python
agent on the other side, both on the local emulator.

The page sends a question and wakes the agent through the example server; it must show the streamed
reasoning and text and the pending gated call with Approve / Deny buttons while the run is suspended;
a click makes the Python agent resume the run (in the server process) and the page shows the final
answer. Chromium is Debian's ``chromium`` (installed here with apt-get when missing), driven by
``playwright-core`` from npm with ``executablePath`` (no browser download).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support_emulator import emulator_thread  # noqa: F401  (fixture)

from ai_transport.cli.scenario import get_weather

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "browser"
DRIVER = ROOT / "tests" / "js" / "handlers" / "browser_e2e.mjs"
CHROMIUM = Path("/usr/bin/chromium")

# Installing Chromium on a fresh machine (apt-get) can take minutes: allow it in the fixture.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _install_chromium() -> str | None:
    """Install Debian's chromium if missing; the reason it cannot be had, or None when available."""
    if CHROMIUM.exists():
        return None
    if shutil.which("apt-get") is None:
        return "Chromium is not installed and apt-get is not available to install it"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "Chromium is not installed and installing it with apt-get needs root"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, capture_output=True, timeout=300)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], env=env, check=True, capture_output=True,
                       timeout=600)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        out = getattr(e, "stderr", b"") or b""
        return f"apt-get could not install chromium: {out.decode(errors='replace')[-400:]}"
    return None if CHROMIUM.exists() else "apt-get ran but /usr/bin/chromium is still missing"


def _load_server_module():
    spec = importlib.util.spec_from_file_location("browser_example_server", EXAMPLE / "server.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def browser_ready() -> Path:
    """Chromium installed, the page's npm dependencies installed, the bundle built."""
    reason = _install_chromium()
    if reason:
        pytest.skip(reason)
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("node and npm are needed for the browser example (they install the page's packages)")
    if not (EXAMPLE / "node_modules" / "playwright-core").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=EXAMPLE, check=True,
                       timeout=300)
    _load_server_module().ensure_bundle()
    return CHROMIUM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def example_server(emulator_thread, request) -> Iterator[str]:
    """``examples/browser/server.py`` (with its Python agent) on a free port; yields the page URL."""
    port = _free_port()
    channel = f"browser-{request.node.name[-20:]}-{os.getpid()}"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE / "server.py"), "--emulator", emulator_thread.url, "--port", str(port),
         "--channel", channel],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
    )
    try:
        line = proc.stdout.readline()
        assert f"open http://127.0.0.1:{port}/" in line, line + proc.stderr.read()
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        assert "agent error" not in (err or ""), err


def drive(url: str, decision: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="ait-chromium-") as profile:
        r = subprocess.run(["node", str(DRIVER), url, str(CHROMIUM), profile, decision],
                           check=False, capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["ok"], json.dumps(result, indent=1)
    assert not [c for c in result["console"] if c.startswith("pageerror")], result["console"]
    return result

QUESTION = "What's the weather in Paris right now? Should I take an umbrella?"


def test_page_streams_the_run_and_approve_makes_the_python_agent_finish(browser_ready, example_server):
    result = drive(example_server, "approve")
    pending = result["pending"]
    assert pending["user"] == [QUESTION]
    assert pending["reasoning"][0].startswith("The user asks about the current weather in Paris.")
    assert pending["assistant"] == ["Let me look up the current weather in Paris for you."]
    assert [(c["state"], c["desc"]) for c in pending["calls"]] == [
        ("awaiting approval", 'get_weather({"city":"Paris","unit":"celsius"})')
    ]
    assert pending["runStatus"] == "suspended"
    # The text arrived in many increments (appends rendered live), not in one piece at the end.
    growth = sorted(set(pending["shownTextLengths"]))
    assert growth[-1] == len(pending["reasoning"][0]) + len(pending["assistant"][0])
    assert len(growth) >= 5, growth

    final = result["final"]
    weather = get_weather("Paris")
    assert final["assistant"][0] == "Let me look up the current weather in Paris for you."
    assert final["assistant"][-1].startswith(
        f"Right now in Paris it is {weather['temperature']}°C with {weather['conditions']}"
    )
    assert [c["state"] for c in final["calls"]] == ["done"]
    assert len(final["results"]) == 1 and json.loads(final["results"][0][len("result: "):]) == weather
    assert final["buttons"] == 0
    assert re.fullmatch(r"[0-9a-f]{8}: complete", final["runs"]), final["runs"]  # one run, resumed


def test_deny_in_the_page_reaches_the_agent(browser_ready, example_server):
    result = drive(example_server, "deny")
    final = result["final"]
    assert [c["state"] for c in final["calls"]] == ["denied (Denied in the browser)"]
    assert final["results"] == []  # the tool never ran
    assert final["assistant"][-1].startswith("I did not check the live weather (Denied in the browser)")
    assert re.fullmatch(r"[0-9a-f]{8}: complete", final["runs"]), final["runs"]
