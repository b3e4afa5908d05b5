"""The supervisor (``ai_transport.sessions.supervisor``) on the in-process channel: a run whose worker
died mid-stream is ended ``error`` within ``lease + grace + poll`` (its stream closed, the client's
stream is ``streaming`` no more), or woken through ``on_stall`` first and ended when the wake-up
did not help; a worker that stays alive through a long tool is left alone. Over the emulator with
real worker processes: ``tests/test_durable_fleet.py``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from support_sessions import model_stream, open_session, user_message, wait_status

from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.supervisor import StalledRun, Supervisor

pytestmark = pytest.mark.asyncio

LEASE = 0.3


async def stream_and_die(agent: AgentSession, body: dict[str, Any], *, leave: bool) -> tuple[Any, asyncio.Task[Any]]:
    """Start a run and stream part of an answer, then die: stop renewing and publishing for good
    (``leave``: and close the session, so its presence member leaves, as a clean exit does)."""
    run = await agent.create_run(body)
    await run.start()
    await run.view.load_all()
    streaming = asyncio.Event()

    async def dying(items: list[dict[str, Any]]) -> Any:
        deltas = 0
        async for event in model_stream(items):
            yield event
            deltas += event.get("type") == "response.output_text.delta"
            if deltas == 3:
                await run.drain()
                streaming.set()
                await asyncio.Event().wait()

    task = asyncio.ensure_future(run.pipe(dying(run.input_items())))
    await streaming.wait()
    run.lease.cancel()  # the process is gone: no renewal will come
    if leave:
        await agent.agent_presence.leave()
    return run, task


async def open_streams(hub: Any, run_id: str) -> list[Any]:
    """The run's streams still ``streaming`` on the channel, as a fresh worker folds them."""
    fresh = AgentSession(hub.client("agent").channel("chat"), enter_presence=False)
    await fresh.connect()
    await fresh.hydrator.fold_until(lambda: False)
    found = fresh.open_streams.open_streams(run_id)
    await fresh.close()
    return found


@pytest.mark.parametrize("leave", [False, True])
async def test_a_run_whose_worker_died_mid_stream_is_ended_error_within_the_bound(leave: bool) -> None:
    hub, client, agent = await open_session(lease=LEASE)
    sent = await client.view.send(user_message("Tell me the weather"))
    async with Supervisor([hub.client("agent").channel("chat")], lease=LEASE, grace=0.1, poll=0.05) as sup:
        run, task = await stream_and_die(agent, sent.invocation.to_json(), leave=leave)
        loop = asyncio.get_running_loop()
        died = loop.time()
        assert client.view.run(run.run_id).status == "active" and await open_streams(hub, run.run_id)
        await wait_status(client.view, run.run_id, "error", timeout=5)
        took = loop.time() - died
        assert took <= LEASE + 0.1 + 0.05 + 0.5  # lease + grace + poll, plus the adopt and two publishes
        ((stall, action),) = sup.handled
        assert action == "ended" and stall.run_id == run.run_id
        assert stall.reason == ("holder left presence" if leave else "lease lapsed")
    info = client.view.run(run.run_id)
    assert info.status == "error" and "worker lost" in json.dumps(info.error, default=str)
    assert await open_streams(hub, run.run_id) == []  # closed ``cancelled`` by the supervisor
    task.cancel()
    await client.close()


async def test_on_stall_wakes_first_then_the_run_is_ended_when_nobody_took_it_over() -> None:
    hub, client, agent = await open_session(lease=LEASE)
    sent = await client.view.send(user_message("Tell me the weather"))
    run, task = await stream_and_die(agent, sent.invocation.to_json(), leave=False)
    woken: list[StalledRun] = []
    async with Supervisor(
        [hub.client("agent").channel("chat")], on_stall=woken.append, lease=LEASE, grace=0.1, poll=0.05
    ) as sup:
        await wait_status(client.view, run.run_id, "error", timeout=5)
        assert [s.run_id for s in woken] == [run.run_id]
        assert [a for _, a in sup.handled] == ["woken", "ended"]
    task.cancel()
    await client.close()


async def test_a_live_worker_renewing_through_a_long_wait_is_left_alone() -> None:
    hub, client, agent = await open_session(lease=LEASE)
    sent = await client.view.send(user_message("Tell me the weather"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    async with Supervisor([hub.client("agent").channel("chat")], lease=LEASE, grace=0.1, poll=0.05) as sup:
        await asyncio.sleep(4 * LEASE)  # the run's worker thinks (renewing) for 4 leases
        assert sup.handled == [] and sup.stalled() == []
        await run.end("complete")
    assert client.view.run(run.run_id).status == "complete"
    await agent.end()
    await client.close()


@pytest.mark.parametrize(("name", "value"), [
    ("lease", float("nan")), ("lease", float("inf")), ("grace", float("nan")), ("poll", float("nan")),
    ("poll", float("inf")), ("grace", -1.0), ("lease", 0), ("poll", True), ("grace", "1"),
])
async def test_a_lease_grace_or_poll_that_is_not_a_finite_number_is_refused(name: str, value: Any) -> None:
    from ai_transport.channels.memory import InProcessHub
    from ai_transport.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=name):  # NaN: no run would ever count as stalled
        Supervisor([InProcessHub().channel("chat", client_id="agent")], **{name: value})
