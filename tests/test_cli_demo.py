"""``ai-transport demo`` run as a subprocess: the transcript of the approval and deny paths, on the
in-process channel and over the emulator with the real ably SDK; ``--help``, errors, ``emulator``."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ai_transport.cli.scenario import get_weather

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
ENV["PYTHONUNBUFFERED"] = "1"


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    if args[:1] == ("demo",) and "--delay" not in args:
        args = (*args, "--delay", "0.001")  # keep the suite fast; streaming itself is tested separately
    return subprocess.run(
        [sys.executable, "-m", "ai_transport", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=ENV,
    )


def order_of(lines: list[str], *patterns: str) -> list[int]:
    """Index of the first line matching each pattern; asserts each is found after the previous one."""
    at, found = 0, []
    for p in patterns:
        for i in range(at, len(lines)):
            if re.search(p, lines[i]):
                found.append(i)
                at = i + 1
                break
        else:
            raise AssertionError(f"{p!r} not found after line {at} in:\n" + "\n".join(lines))
    return found


SUMMARY = re.compile(
    r"^done: run complete; (\d+) messages published, (\d+) appends, 1 run\(s\), 2 agent wake-ups, "
    r"2 model calls, [\d.]+ s$"
)


def check_approved(out: str) -> None:
    lines = out.splitlines()
    weather = get_weather("Paris")
    call = r'\[tool\] get_weather\(\{"city":"Paris","unit":"celsius"\}\)'
    order_of(
        lines,
        r"^you> What's the weather in Paris right now\? Should I take an umbrella\?$",
        r"^-- run [0-9a-f]{8} started$",
        r"^thinking> The user asks about the current weather in Paris\. I need the get_weather tool",
        r"^assistant> Let me look up the current weather in Paris for you\.$",
        call + r" -- awaiting approval$",
        r"^-- run [0-9a-f]{8} suspended: waiting for the client$",
        r"^client: approving get_weather",
        call + r" -- approved, running$",
        r"^-- run [0-9a-f]{8} resumed$",
        call + r" -- done$",
        r"^  \[result\] get_weather -> \{\"city\": \"Paris\"",
        rf"^assistant> Right now in Paris it is {weather['temperature']}°C with {weather['conditions']}",
        r"^-- run [0-9a-f]{8} ended: complete$",
    )
    # One run id throughout: the resume continues the suspended run.
    assert len(set(re.findall(r"-- run ([0-9a-f]{8})", out))) == 1
    m = SUMMARY.match(lines[-1])
    assert m, lines[-1]
    # streamed as appends, not one message per delta (over Ably the publish budget merges some)
    assert int(m.group(1)) > 10 and int(m.group(2)) > 5
    assert "denied" not in out


def check_denied(out: str, reason: str) -> None:
    lines = out.splitlines()
    call = r'\[tool\] get_weather\(\{"city":"Paris","unit":"celsius"\}\)'
    order_of(
        lines,
        call + r" -- awaiting approval$",
        r"^-- run [0-9a-f]{8} suspended",
        re.escape("client: denying get_weather") + r".*" + re.escape(f"({reason})"),
        call + re.escape(f" -- denied ({reason})") + "$",
        r"^-- run [0-9a-f]{8} resumed$",
        r"^assistant> I did not check the live weather \(" + re.escape(reason) + r"\)",
        r"^-- run [0-9a-f]{8} ended: complete$",
    )
    assert "[result]" not in out  # the tool never ran
    assert " -- done" not in out
    assert SUMMARY.match(lines[-1]), lines[-1]


def test_demo_approves_on_the_in_process_channel():
    r = cli("demo", "--no-color")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(in-process)" in r.stdout
    check_approved(r.stdout)


def test_demo_denies_with_a_reason():
    reason = "I'd rather not share my location"
    r = cli("demo", "--deny", reason)
    assert r.returncode == 0, r.stdout + r.stderr
    check_denied(r.stdout, reason)


def test_demo_deny_without_reason_uses_the_default_rejection():
    r = cli("demo", "--deny")
    assert r.returncode == 0, r.stdout + r.stderr
    # 0.8.0's reducer folds a reasonless denial as the output "Tool execution was not approved."
    assert re.search(r"-- denied$", r.stdout, re.MULTILINE), r.stdout
    assert "I did not check the live weather (Tool execution was not approved.)" in r.stdout


@pytest.mark.slow
def test_demo_approves_over_the_emulator_with_the_ably_sdk():
    r = cli("demo", "--emulator")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^emulator: started at http://127\.0\.0\.1:\d+$", r.stdout, re.MULTILINE)
    assert "(Ably emulator at http://127.0.0.1:" in r.stdout
    check_approved(r.stdout)


@pytest.mark.slow
def test_demo_denies_over_a_running_emulator():
    proc = subprocess.Popen(
        [sys.executable, "-m", "ai_transport", "emulator", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV,
    )
    try:
        first = proc.stdout.readline()
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", first)
        assert m, first + proc.stderr.read()
        url = m.group(1)
        r = cli("demo", "--emulator", url, "--deny", "no thanks", "--channel", "shared-demo")
        assert r.returncode == 0, r.stdout + r.stderr
        check_denied(r.stdout, "no thanks")
        assert f"channel: shared-demo (Ably emulator at {url}" in r.stdout
        # The conversation stays on the emulator's channel: `tail --no-follow` reads it from history.
        t = cli("tail", "shared-demo", "--emulator", url, "--no-follow")
        assert t.returncode == 0, t.stdout + t.stderr
        assert "you> What's the weather in Paris right now?" in t.stdout
        assert re.search(r"get_weather\(.*\) -- denied \(no thanks\)", t.stdout)
        assert "assistant> I did not check the live weather (no thanks)" in t.stdout
        assert re.search(r"run [0-9a-f]{8}: complete", t.stdout)
    finally:
        proc.terminate()
        proc.wait(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_demo_reports_an_unreachable_emulator_clearly():
    port = free_port()
    t0 = time.monotonic()
    r = cli("demo", "--emulator", f"http://127.0.0.1:{port}")
    assert r.returncode == 1
    assert r.stderr.startswith(f"ai-transport: error: cannot reach the emulator at http://127.0.0.1:{port}")
    assert "ai-transport emulator" in r.stderr and "Traceback" not in r.stderr
    assert time.monotonic() - t0 < 20


def test_model_without_api_key_is_a_clear_error():
    r = cli("demo", "--model", "gpt-5-mini")
    assert r.returncode == 1
    assert "needs OPENAI_API_KEY" in r.stderr and "Traceback" not in r.stderr


def test_help_texts():
    top = cli("--help")
    assert top.returncode == 0
    for cmd in ("demo", "emulator", "tail"):
        assert cmd in top.stdout
    demo = cli("demo", "--help")
    assert "--deny" in demo.stdout and "--emulator" in demo.stdout and "OPENAI_API_KEY" in demo.stdout
    tail = cli("tail", "--help")
    assert "CHANNEL" in tail.stdout and "--key" in tail.stdout and "--no-follow" in tail.stdout
    none = cli()
    assert none.returncode == 2 and "usage: ai-transport" in none.stdout
    bad = cli("frobnicate")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_emulator_command_prints_how_to_connect_and_refuses_a_busy_port():
    proc = subprocess.Popen(
        [sys.executable, "-m", "ai_transport", "emulator", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV,
    )
    try:
        head: list[str] = []
        while not head or "ai-transport demo --emulator" not in head[-1]:
            line = proc.stdout.readline()
            assert line, "".join(head) + proc.stderr.read()
            head.append(line)
        text = "".join(head)
        port = int(re.search(r"listening on http://127\.0\.0\.1:(\d+)", text).group(1))
        assert "AblyRealtime(" in text and "new Ably.Realtime(" in text
        js_opts = json.loads(re.search(r"new Ably\.Realtime\((\{.*\})\);", text).group(1))
        assert js_opts["port"] == port and js_opts["tls"] is False
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
        busy = cli("emulator", "--port", str(port), timeout=20)
        assert busy.returncode == 1
        assert f"port {port} on 127.0.0.1 is already in use" in busy.stderr
    finally:
        proc.terminate()
        proc.wait(10)


async def run_against_local_api(*demo_args: str) -> tuple[str, list[dict], list]:
    """Run the demo's OpenAI-API code path (key + --model) with OPENAI_BASE_URL on a local server that
    records what a real API would receive."""
    import asyncio

    from ai_transport.cli.scenario import scripted_turn
    from ai_transport.responses.local_server import LocalResponsesServer, StreamReply

    async with LocalResponsesServer(lambda req: StreamReply.from_events(scripted_turn(req.json()))) as server:
        env = dict(ENV, OPENAI_API_KEY="sk-test-123", OPENAI_BASE_URL=server.base_url)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ai_transport", "demo", *demo_args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode() + err.decode()
    return out.decode(), server.request_bodies(), server.requests


async def test_model_flag_uses_the_openai_api_path_with_key_and_base_url():
    text, bodies, requests = await run_against_local_api("--model", "gpt-5-test")
    assert "model: gpt-5-test via the OpenAI Responses API" in text
    check_approved(text)
    assert len(requests) == 2
    for req in requests:
        assert req.headers["authorization"] == "Bearer sk-test-123"
    first, second = bodies
    for body in (first, second):
        assert body["model"] == "gpt-5-test" and body["stream"] is True and body["store"] is False
        assert body["reasoning"] == {"effort": "low", "summary": "auto"}
        assert body["include"] == ["reasoning.encrypted_content"]
        assert [t["name"] for t in body["tools"]] == ["get_weather"]
    assert [i.get("type") for i in first["input"]] == ["message"]
    # The resumed turn resends the whole conversation, reasoning replayed with its encrypted content.
    kinds = [i.get("type") for i in second["input"]]
    assert kinds == ["message", "reasoning", "message", "function_call", "function_call_output"]
    assert second["input"][1]["encrypted_content"].startswith("gAAAAB")
    call, output = second["input"][-2], second["input"][-1]
    assert output["call_id"] == call["call_id"] and json.loads(output["output"]) == get_weather("Paris")


async def test_reasoning_option_follows_the_model_family_or_the_flag():
    _, bodies, _ = await run_against_local_api("--model", "gpt-4.1")
    assert all("reasoning" not in b and "include" not in b for b in bodies)
    # without reasoning blobs, the replay carries no reasoning items (store: false cannot resolve them)
    assert "reasoning" not in [i.get("type") for i in bodies[1]["input"]]
    _, bodies, _ = await run_against_local_api("--model", "gpt-4.1", "--reasoning", "high")
    assert all(b["reasoning"] == {"effort": "high", "summary": "auto"} for b in bodies)
    _, bodies, _ = await run_against_local_api("--model", "o4-mini", "--reasoning", "off")
    assert all("reasoning" not in b for b in bodies)


@pytest.mark.parametrize(("answer", "approved"), [("y\n", True), ("no\n", False)])
def test_ask_prompts_on_the_terminal(answer, approved):
    r = subprocess.run(
        [sys.executable, "-m", "ai_transport", "demo", "--ask"], input=answer, check=False,
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=ENV,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'approve get_weather({"city":"Paris","unit":"celsius"})? [y/N] ' in r.stdout
    if approved:
        check_approved(r.stdout.replace("[y/N] ", "[y/N]\n"))
    else:
        assert re.search(r"-- denied$", r.stdout, re.MULTILINE) and "[result]" not in r.stdout


def test_unreachable_model_endpoint_ends_the_run_with_a_clear_error():
    env = dict(ENV, OPENAI_API_KEY="sk-x", OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1")
    r = subprocess.run([sys.executable, "-m", "ai_transport", "demo", "--model", "m"], check=False,
                       capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert r.returncode == 1
    assert re.search(r"^-- run [0-9a-f]{8} ended: error$", r.stdout, re.MULTILINE), r.stdout
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ai-transport: error: the run ended 'error' instead of waiting for approval: "
                           "could not reach the Responses API"), r.stderr
    assert "(code 104008)" in last and "Traceback" not in r.stderr


def test_console_script_is_installed_and_matches_python_m():
    script = Path(sys.executable).with_name("ai-transport")
    if not script.exists():
        pytest.skip(f"package not installed as a script next to {sys.executable}")
    from ai_transport import __version__

    r = subprocess.run([str(script), "--version"], check=False, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout == f"ai-transport {__version__}\n"
    assert cli("--version").stdout == r.stdout


async def test_a_model_that_asks_twice_gets_both_approvals_in_one_run():
    """A real model may call a gated tool again after the first answer: each suspension is answered
    and the same run resumes until the model answers in text."""
    import asyncio

    from ai_transport.responses.local_server import (
        LocalResponsesServer,
        ScriptedFunctionCall,
        ScriptedText,
        scripted,
    )

    def model(body: dict) -> list:
        outputs = [i for i in body["input"] if i.get("type") == "function_call_output"]
        if len(outputs) == 0:
            return [ScriptedFunctionCall("get_weather", {"city": "Paris", "unit": "celsius"})]
        if len(outputs) == 1:
            return [ScriptedText("And Lyon too."), ScriptedFunctionCall("get_weather", {"city": "Lyon", "unit": "celsius"})]
        return [ScriptedText("Both cities: " + " / ".join(json.loads(o["output"])["conditions"] for o in outputs))]

    async with LocalResponsesServer(scripted(model)) as server:
        env = dict(ENV, OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ai_transport", "demo", "--model", "m",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode()
    assert proc.returncode == 0, text + err.decode()
    order_of(
        text.splitlines(),
        r'get_weather\(\{"city":"Paris","unit":"celsius"\}\) -- awaiting approval$',
        r"^client: approving get_weather\(\{\"city\":\"Paris\"",
        r'get_weather\(\{"city":"Paris","unit":"celsius"\}\) -- done$',
        r'get_weather\(\{"city":"Lyon","unit":"celsius"\}\) -- awaiting approval$',
        r"^client: approving get_weather\(\{\"city\":\"Lyon\"",
        r'get_weather\(\{"city":"Lyon","unit":"celsius"\}\) -- done$',
        "^assistant> Both cities: " + re.escape(
            f"{get_weather('Paris')['conditions']} / {get_weather('Lyon')['conditions']}") + "$",
        r"^-- run [0-9a-f]{8} ended: complete$",
    )
    assert len(set(re.findall(r"-- run ([0-9a-f]{8})", text))) == 1
    assert re.search(r"1 run\(s\), 3 agent wake-ups, 3 model calls", text.splitlines()[-1])
    assert len(server.requests) == 3


def test_the_answer_is_printed_while_it_streams():
    """The final answer reaches stdout in several pieces over time (live), not as one block at the end."""
    import select

    proc = subprocess.Popen([sys.executable, "-m", "ai_transport", "demo", "--delay", "0.03"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    pieces: list[tuple[float, bytes]] = []
    try:
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                pieces.append((time.monotonic(), chunk))
    finally:
        proc.wait(30)
    assert proc.returncode == 0
    text = b"".join(c for _, c in pieces).decode()
    start = text.index("assistant> Right now in Paris")
    end = text.index("\n", start)
    offsets, at = [], 0
    for t, chunk in pieces:
        if at < end and at + len(chunk) > start:
            offsets.append(t)
        at += len(chunk)
    assert len(offsets) >= 3, f"answer arrived in {len(offsets)} read(s)"
    assert offsets[-1] - offsets[0] > 0.1


@pytest.mark.js
def test_the_printed_connection_snippets_work_for_ably_python_and_ably_js(node):
    """Copy-paste the emulator's help: the ably-python and ably-js snippets publish and read back."""
    proc = subprocess.Popen([sys.executable, "-m", "ai_transport", "emulator", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)
    try:
        head: list[str] = []
        while not head or "ai-transport demo --emulator" not in head[-1]:
            line = proc.stdout.readline()
            assert line, "".join(head) + proc.stderr.read()
            head.append(line)
        text = "".join(head)
        py_ctor = re.search(r"^\s+client = (AblyRealtime\(.*\))$", text, re.MULTILINE).group(1)
        js_ctor = re.search(r"^\s+const client = (new Ably\.Realtime\(.*\));$", text, re.MULTILINE).group(1)
        py = f"""
import asyncio
from ably import AblyRealtime
async def main():
    client = {py_ctor}
    ch = client.channels.get("snippets")
    await ch.attach()
    await ch.publish("hello", "from python")
    page = await ch.history()
    print([m.data for m in page.items])
    await client.close()
asyncio.run(main())
"""
        r = subprocess.run([sys.executable, "-c", py], check=False, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "['from python']" in r.stdout, r.stdout + r.stderr
        js = f"""
import * as Ably from 'ably';
const client = {js_ctor};
const ch = client.channels.get('snippets');
await ch.attach();
await ch.publish('hello', 'from js');
const page = await ch.history();
console.log(JSON.stringify(page.items.map((m) => m.data)));
client.close();
"""
        r = subprocess.run(["node", "--input-type=module", "-e", js], check=False, capture_output=True, text=True,
                           timeout=60, cwd=ROOT / "tests" / "js")
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout.strip().splitlines()[-1]) == ["from js", "from python"]
    finally:
        proc.terminate()
        proc.wait(10)


async def test_a_model_that_answers_without_the_tool_needs_no_approval():
    import asyncio

    from ai_transport.responses.local_server import LocalResponsesServer, ScriptedText, scripted

    async with LocalResponsesServer(scripted(lambda body: [ScriptedText("It is usually mild.")])) as server:
        env = dict(ENV, OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ai_transport", "demo", "--model", "m",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode()
    assert proc.returncode == 0, text + err.decode()
    order_of(text.splitlines(), r"^assistant> It is usually mild\.$", r"nothing to approve$")
    assert re.search(r"^-- run [0-9a-f]{8} ended: complete$", text, re.MULTILINE)
    assert "client:" not in text and "[tool]" not in text
    assert re.search(r"1 run\(s\), 1 agent wake-ups, 1 model calls", text.splitlines()[-1])


async def test_a_cancelled_wake_up_closes_its_model_stream():
    """Ctrl-C while the model streams cancels the agent's task: the stream (and its HTTP response)
    is closed right there, not left to asyncio's shutdown, where closing it failed with "an error
    occurred during closing of asynchronous generator" and a traceback."""
    import asyncio
    import contextlib

    from ai_transport.channels.memory import InProcessHub
    from ai_transport.cli.agent import ToolAgent
    from ai_transport.cli.scenario import scripted_turn
    from ai_transport.codec.inputs import create_user_message
    from ai_transport.responses import ResponsesClient
    from ai_transport.responses.local_server import LocalResponsesServer, StreamReply
    from ai_transport.sessions.client import ClientSession

    hub = InProcessHub()
    streams: list = []
    writing = asyncio.Event()

    async def agent_channel():
        # Once the model streams, the agent's next write to the channel hangs: Ctrl-C finds the
        # stream suspended at an event it gave, the agent busy elsewhere (the common case).
        channel = hub.channel("chat", client_id="agent")
        for name in ("publish", "append_message", "update_message"):
            real = getattr(channel, name)

            async def write(*args, real=real, **kwargs):
                if streams and streams[0].response_id is not None:
                    writing.set()
                    await asyncio.Event().wait()
                return await real(*args, **kwargs)

            setattr(channel, name, write)
        return channel

    async with LocalResponsesServer(lambda r: StreamReply.from_events(scripted_turn(r.json()))) as server:
        responses = ResponsesClient(api_key="local", base_url=server.base_url)
        real_stream = responses.stream

        def recording(*args, **kwargs):
            streams.append(real_stream(*args, **kwargs))
            return streams[-1]

        responses.stream = recording  # type: ignore[method-assign]
        session = ClientSession(hub.channel("chat", client_id="user"))
        await session.connect()
        message = {"role": "user", "items": [{"type": "message", "role": "user",
                                              "content": [{"type": "input_text", "text": "Weather in Paris?"}]}]}
        run = await session.view.send([create_user_message(message)])
        task = asyncio.create_task(ToolAgent(agent_channel, responses, "m").handle_invocation(
            run.to_invocation().to_json()))
        try:
            await asyncio.wait_for(writing.wait(), 15)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            assert streams[0]._gen.ag_frame is None, "the cancelled wake-up left its model stream open"
        finally:
            task.cancel()
            await session.close()
            await responses.aclose()
