"""examples/client.py + examples/agent_worker.py over the emulator: the client asks, the worker is woken
in a fresh process per invocation and resumes the suspended run from the channel alone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support_emulator import emulator_thread  # noqa: F401  (fixture)

from ai_transport.cli.scenario import get_weather

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}

pytestmark = pytest.mark.slow


def client(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "examples" / "client.py"), "--emulator", url, *args],
                          check=False, capture_output=True, text=True, timeout=90, cwd=ROOT, env=ENV)


def test_client_approves_and_a_fresh_worker_resumes_the_run(emulator_thread):
    r = client(emulator_thread.url, "--approve", "--question", "Is it raining in Lyon?")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    weather = get_weather("Lyon")
    assert out.index("awaiting approval") < out.index("client: approved get_weather") < out.index(" -- done")
    assert f"assistant> Right now in Lyon it is {weather['temperature']}°C with {weather['conditions']}" in out
    assert re.search(r"^run [0-9a-f]{8}: complete$", out, re.MULTILINE)


def test_client_denies_and_the_tool_never_runs(emulator_thread):
    r = client(emulator_thread.url, "--deny", "not now")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "-- denied (not now)" in r.stdout and "[result]" not in r.stdout
    assert "assistant> I did not check the live weather (not now)" in r.stdout


def test_worker_with_an_unknown_invocation_fails_clearly(emulator_thread):
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent_worker.py"), "--emulator", emulator_thread.url,
         "--start-timeout", "1",
         '{"inputEventId": "no-such-event", "sessionName": "empty-channel-for-worker-test"}'],
        check=False, capture_output=True, text=True, timeout=90, cwd=ROOT, env=ENV,
    )
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("agent worker: error:") and "no-such-event" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
