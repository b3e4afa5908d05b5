"""``ai-transport tail``: a live conversation followed as it streams, history, and clear errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support_emulator import emulator_thread  # noqa: F401  (fixture)

from ai_transport.cli.scenario import get_weather

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "AIT_EMULATOR_URL", "ABLY_KEY")}
ENV["PYTHONUNBUFFERED"] = "1"


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    if args[:1] == ("demo",) and "--delay" not in args:
        args = (*args, "--delay", "0.001")  # keep the suite fast; streaming itself is tested separately
    return subprocess.run([sys.executable, "-m", "ai_transport", *args], check=False, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=ENV)


@pytest.mark.slow
def test_tail_follows_a_run_live_as_it_streams(emulator_thread):
    url = emulator_thread.url
    channel = f"tail-live-{os.getpid()}"
    tail = subprocess.Popen([sys.executable, "-m", "ai_transport", "tail", channel, "--emulator", url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(tail.stdout.readline, "")), daemon=True)
    try:
        # Wait until tail has loaded the (empty) history and follows live.
        while "following live" not in (err := tail.stderr.readline()):
            assert err, "tail exited early"
        reader.start()
        demo = cli("demo", "--emulator", url, "--channel", channel)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        deadline = time.monotonic() + 15
        while not any("ended: complete" in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        tail.terminate()
        tail.wait(10)
    out = "".join(lines)
    weather = get_weather("Paris")
    order = [
        "you> What's the weather in Paris right now?",
        " started\n",
        "assistant> Let me look up the current weather in Paris for you.",
        "-- awaiting approval",
        " suspended\n",
        "-- approved, running",
        " resumed\n",
        "[result] get_weather",
        f"assistant> Right now in Paris it is {weather['temperature']}°C",
        " ended: complete",
    ]
    positions = [out.find(s) for s in order]
    assert -1 not in positions and positions == sorted(positions), out
    # The tail saw the same transcript lines as the demo printed (minus the demo's own notes).
    demo_lines = [ln for ln in demo.stdout.splitlines() if re.match(r"^(you|thinking|assistant)>|^  \[", ln)]
    tail_lines = [ln for ln in out.splitlines() if re.match(r"^(you|thinking|assistant)>|^  \[", ln)]
    assert tail_lines == demo_lines


def test_tail_errors_are_clear(emulator_thread):
    r = cli("tail", "x", "--no-follow")
    assert r.returncode == 1 and "say where CHANNEL lives" in r.stderr
    r = cli("tail", "x", "--key", "not-a-key", "--no-follow")
    assert r.returncode == 1 and "--key must be an Ably API key" in r.stderr
    r = cli("tail", "x", "--emulator", emulator_thread.url, "--key", "bad.key:nope", "--no-follow")
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(f"ai-transport: error: the emulator at {emulator_thread.url} rejected the credentials")
    assert "No key named 'bad.key' (code 40400)" in r.stderr and "Traceback" not in r.stderr
    secret = emulator_thread.key.partition(":")[0] + ":wrong-secret"
    r = cli("tail", "x", "--emulator", emulator_thread.url, "--key", secret, "--no-follow", timeout=20)
    assert r.returncode == 1 and "rejected the credentials: Invalid key in request (code 40101)" in r.stderr
    r = cli("tail", "x", "--emulator", "http://127.0.0.1:9", "--no-follow")
    assert r.returncode == 1 and "cannot reach the emulator at http://127.0.0.1:9" in r.stderr


def test_tail_of_an_empty_channel_prints_nothing(emulator_thread):
    r = cli("tail", f"empty-{os.getpid()}", "--emulator", emulator_thread.url, "--no-follow")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert "loading history" in r.stderr


def test_tail_with_the_emulators_key_reads_history(emulator_thread):
    channel = f"tail-key-{os.getpid()}"
    demo = cli("demo", "--emulator", emulator_thread.url, "--channel", channel, "--deny", "nope")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    r = cli("tail", channel, "--emulator", emulator_thread.url, "--key", emulator_thread.key, "--no-follow")
    assert r.returncode == 0, r.stderr
    assert "assistant> I did not check the live weather (nope)" in r.stdout
    assert re.search(r"^-- run [0-9a-f]{8}: complete$", r.stdout, re.MULTILINE)


@pytest.mark.js
def test_tail_renders_a_run_made_entirely_by_the_js_package_like_the_js_view_holds_it(emulator_thread, node):
    """A JS client and a JS agent (@ably/ai-transport 0.8.0 + ably-js) run the gated loop on the
    emulator; our ``tail`` reads the channel's history and renders exactly the conversation the JS
    client's view holds."""
    import json

    from ai_transport.cli.render import render_transcript
    from ai_transport.cli.scenario import run_tool, scripted_turn
    from ai_transport.emulator.client import connect_info

    channel = f"tail-js-{os.getpid()}"
    question = "What's the weather in Oslo?"
    def js(op, **kw):
        return node.call("session", op, **kw)
    jsc = js("clientOpen", options=connect_info(emulator_thread, client_id="alice"), channel=channel)
    agent_opts = connect_info(emulator_thread, client_id="agent")
    try:
        sent = js("clientSend", id=jsc["id"], text=question)
        user = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": question}]}]
        first = scripted_turn({"input": user})
        r1 = js("agentHandle", options=agent_opts, channel=channel, invocation=sent["invocation"],
                gated=["get_weather"], turns=[first])
        assert r1["outcome"] == "suspended"
        js("clientWait", id=jsc["id"], runId=r1["runId"], status="suspended")
        answer = js("clientApprove", id=jsc["id"], approved=True)
        call = next(e["item"] for e in first if e["type"] == "response.output_item.done"
                    and e["item"]["type"] == "function_call")
        output = run_tool("get_weather", call["arguments"])
        second = scripted_turn({"input": [*user, call, {"type": "function_call_output",
                                                       "call_id": call["call_id"], "output": output}]})
        r2 = js("agentHandle", options=agent_opts, channel=channel, invocation=answer["invocation"],
                gated=["get_weather"], turns=[second], toolOutputs={"get_weather": output})
        assert r2["outcome"] == "complete"
        js("clientWait", id=jsc["id"], runId=r1["runId"], status="complete")
        held = js("clientMessages", id=jsc["id"])
    finally:
        js("clientClose", id=jsc["id"])

    r = cli("tail", channel, "--emulator", emulator_thread.url, "--no-follow")
    assert r.returncode == 0, r.stderr
    expected = render_transcript(held["messages"])
    assert r.stdout == expected + f"-- run {r1['runId'][:8]}: complete\n"
    weather = json.loads(output)
    assert f"assistant> Right now in Oslo it is {weather['temperature']}°C" in r.stdout
    assert re.search(r"get_weather\(.*\) -- done$", r.stdout, re.MULTILINE)


def test_ctrl_c_stops_tail_cleanly(emulator_thread):
    import signal

    # A suite started from a non-interactive shell in the background inherits SIGINT ignored, and so
    # would the child: give it the default disposition a terminal's Ctrl-C meets.
    tail = subprocess.Popen([sys.executable, "-m", "ai_transport", "tail", f"ctrl-c-{os.getpid()}", "--emulator",
                             emulator_thread.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=ENV, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        while "following live" not in (line := tail.stderr.readline()):
            assert line, "tail exited early"
        tail.send_signal(signal.SIGINT)
        out, err = tail.communicate(timeout=30)
    finally:
        if tail.poll() is None:  # a failed run leaves no tail process behind
            tail.kill()
            tail.communicate()
    assert tail.returncode == 130
    assert "Traceback" not in err and out == ""


@pytest.mark.slow
def test_a_second_demo_continues_the_conversation_and_tail_shows_each_run_after_its_messages(emulator_thread):
    url, channel = emulator_thread.url, f"two-runs-{os.getpid()}"
    first = cli("demo", "--emulator", url, "--channel", channel)
    assert first.returncode == 0, first.stdout + first.stderr
    second = cli("demo", "--emulator", url, "--channel", channel, "--question", "And in Lyon?", "--deny", "no")
    assert second.returncode == 0, second.stdout + second.stderr
    # The second demo starts from the channel's history: the first exchange is printed first.
    assert second.stdout.index("you> What's the weather in Paris") < second.stdout.index("you> And in Lyon?")
    assert "2 run(s)" in second.stdout.splitlines()[-1]
    r = cli("tail", channel, "--emulator", url, "--no-follow")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    runs = [i for i, ln in enumerate(lines) if re.match(r"^-- run [0-9a-f]{8}: complete$", ln)]
    assert len(runs) == 2 and runs[1] == len(lines) - 1
    assert lines.index("you> And in Lyon?") == runs[0] + 1  # run 1's status closes the first exchange
    assert re.search(r"get_weather\(\{\"city\":\"Paris\".*-- done", "\n".join(lines[: runs[0]]))
    assert re.search(r"get_weather\(\{\"city\":\"Lyon\".*-- denied \(no\)", "\n".join(lines[runs[0]:]))
