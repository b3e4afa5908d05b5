"""Leases with real worker processes over the emulator (real ``ably`` SDK) and a JS 0.8.0 client.

Each worker process (``tests/durable_worker.py``) holds a 1 s lease, renewed every ~0.33 s; a tool
appends a line per execution to a file, so executions are counted across processes.

* a claimer SIGKILLed before executing: the next wake-up runs the call, once, within the lease;
* a worker SIGKILLed mid-stream after running the tool: the platform's redelivery of the same
  invocation completes the run within the lease; the tool ran once; the JS view, live and
  reloaded, shows one final answer and nothing ``in_progress``;
* a tool running 3x the lease: several wake-ups during it all yield; it runs once;
* a worker SIGSTOPped in its tool past its lease, then SIGCONTed: another takes over and answers;
  the paused one publishes nothing more; one output in every view (the model's input too);
* ``ai-transport supervise`` ends a run whose worker was SIGKILLed mid-stream, within its bound.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support_durable import LEASE, fleet, spawn, suspended, tool_outputs  # noqa: F401  (fleet: a fixture)
from support_emulator import emulator_thread, unique_channel  # noqa: F401
from support_sessions import user_message, wait_status

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.emulator.client import ably_realtime, connect_info
from ai_transport.readers.calls import to_responses_input
from ai_transport.sessions.client import ClientSession

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parent.parent
SLACK = 1.5  # publishes, history reads and a loaded machine


def executions(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


async def test_a_claimer_killed_before_executing_is_replaced_by_the_next_wake_up(emulator_thread, fleet, tmp_path) -> None:
    realtime = ably_realtime(emulator_thread.url, client_id="alice")
    (doomed,) = spawn(emulator_thread.url, 1)
    log = tmp_path / "tool.log"
    try:
        client, channel, run_id, answer = await suspended(realtime, fleet, "lease")
        wake = {"op": "handle", "channel": channel.name, "invocation": answer.invocation.to_json(), "tool_log": str(log)}
        doomed.send({**wake, "op": "claim_and_hang"})
        assert await asyncio.to_thread(doomed.read) == {"claimed": True}
        doomed.kill()  # dies holding the claim, before running the tool
        killed = time.monotonic()
        woken = await fleet[1].call(wake)  # one wake-up, right away
        assert woken["executed"] == 1 and not woken["yielded"]
        await wait_status(client.view, run_id, "complete")
        assert time.monotonic() - killed <= LEASE + SLACK
        assert executions(log) == 1 and tool_outputs(client.view.get_messages()) == 1
        await client.close()
        await channel.close()
    finally:
        doomed.stop()
        await realtime.close()


async def test_a_crash_while_resuming_is_recovered_by_the_platforms_redelivery(
    emulator_thread, fleet, node, tmp_path
) -> None:
    name = unique_channel("lease-crash")
    (doomed,) = spawn(emulator_thread.url, 1)
    log = tmp_path / "tool.log"
    opts = connect_info(emulator_thread, client_id="alice")
    jsc = await asyncio.to_thread(node.call, "session", "clientOpen", options=opts, channel=name)
    reloaded = None
    try:
        sent = await asyncio.to_thread(node.call, "session", "clientSend", id=jsc["id"], text="Weather in Paris?")
        first = await fleet[0].call({"op": "handle", "channel": name, "invocation": sent["invocation"]})
        await asyncio.to_thread(
            node.call, "session", "clientWait", id=jsc["id"], runId=first["run_id"], status="suspended"
        )
        answer = await asyncio.to_thread(node.call, "session", "clientApprove", id=jsc["id"], approved=True)
        wake = {"channel": name, "invocation": answer["invocation"], "tool_log": str(log)}
        doomed.send({**wake, "op": "resume_and_die"})
        assert (await asyncio.to_thread(doomed.read))["streaming"]
        doomed.kill()  # SIGKILL mid-stream, after the tool ran: its lease and stream stay on the channel
        killed = time.monotonic()
        before = await asyncio.to_thread(node.call, "session", "clientMessages", id=jsc["id"])
        assert before["runs"][0]["status"] == "active" and "in_progress" in json.dumps(before["messages"])
        redelivered = await fleet[1].call({**wake, "op": "handle"})  # the platform retries the same invocation
        assert not redelivered["yielded"] and redelivered["executed"] == 0  # the call was answered: not owed
        await asyncio.to_thread(
            node.call, "session", "clientWait", id=jsc["id"], runId=first["run_id"], status="complete"
        )
        assert time.monotonic() - killed <= LEASE + SLACK
        assert executions(log) == 1
        reloaded = await asyncio.to_thread(node.call, "session", "clientOpen", options=opts, channel=name)
        await asyncio.to_thread(node.call, "session", "clientLoadAll", id=reloaded["id"])
        for view_id in (jsc["id"], reloaded["id"]):
            view = await asyncio.to_thread(node.call, "session", "clientMessages", id=view_id)
            assert "in_progress" not in json.dumps(view["messages"])
            assert [r["status"] for r in view["runs"]] == ["complete"]
            roles = [(m["message"]["role"], [i["type"] for i in m["message"]["items"]]) for m in view["messages"]]
            assert roles == [
                ("user", ["message"]),
                ("assistant", ["reasoning", "message", "function_call"]),
                ("assistant", ["function_call_output"]),
                ("assistant", ["reasoning", "message"]),  # one final answer: the dead attempt is replaced
            ]
    finally:
        doomed.stop()
        await asyncio.to_thread(node.call, "session", "clientClose", id=jsc["id"])
        if reloaded is not None:
            await asyncio.to_thread(node.call, "session", "clientClose", id=reloaded["id"])


async def test_a_tool_running_three_leases_runs_once_through_several_wake_ups(emulator_thread, fleet, tmp_path) -> None:
    realtime = ably_realtime(emulator_thread.url, client_id="alice")
    log = tmp_path / "tool.log"
    try:
        client, channel, run_id, answer = await suspended(realtime, fleet, "lease")
        wake = {"op": "handle", "channel": channel.name, "invocation": answer.invocation.to_json(), "tool_log": str(log)}
        holding = asyncio.ensure_future(fleet[0].call({**wake, "tool_seconds": 3 * LEASE}))
        await asyncio.sleep(0.3)
        duplicates = []
        for i in range(4):  # redeliveries while the tool runs: each sees a renewal and yields
            duplicates.append(await fleet[1 + i % 2].call(wake))
            await asyncio.sleep(0.4)
        held = await holding
        assert held["executed"] == 1 and not held["yielded"]
        assert all(d["executed"] == 0 and d["yielded"] for d in duplicates), duplicates
        await wait_status(client.view, run_id, "complete")
        assert executions(log) == 1 and tool_outputs(client.view.get_messages()) == 1
        await client.close()
        await channel.close()
    finally:
        await realtime.close()


async def test_a_worker_paused_past_its_lease_publishes_nothing_more(emulator_thread, fleet, node, tmp_path) -> None:
    realtime = ably_realtime(emulator_thread.url, client_id="alice")
    (paused,) = spawn(emulator_thread.url, 1)
    log = tmp_path / "tool.log"
    try:
        client, channel, run_id, answer = await suspended(realtime, fleet, "lease")
        jsc = await asyncio.to_thread(
            node.call, "session", "clientOpen",
            options=connect_info(emulator_thread, client_id="alice"), channel=channel.name,
        )
        wake = {"channel": channel.name, "invocation": answer.invocation.to_json(), "tool_log": str(log)}
        paused.send({**wake, "op": "pause_in_tool", "tool_seconds": 0.3})
        assert await asyncio.to_thread(paused.read) == {"in_tool": True}
        os.kill(paused.p.pid, signal.SIGSTOP)  # paused inside its tool, holding the call
        taker = await fleet[1].call({**wake, "op": "handle"})  # waits out the paused lease, takes over
        assert taker["executed"] == 1 and not taker["yielded"]
        await wait_status(client.view, run_id, "complete")
        history_before = (await channel.history(limit=1000)).items
        os.kill(paused.p.pid, signal.SIGCONT)
        late = await asyncio.to_thread(paused.read)
        assert late["executed"] == 1 and late["yielded"] and late["lost"]  # it ran, but published nothing
        history_after = (await channel.history(limit=1000)).items
        new = history_after[: len(history_after) - len(history_before)]
        assert [m.get("name") for m in new if m.get("name") != "ai-claim"] == []  # only its fence's renewal
        assert executions(log) == 2  # at-least-once execution across a pause; at-most-once output:
        assert tool_outputs(client.view.get_messages()) == 1
        view = await asyncio.to_thread(node.call, "session", "clientMessages", id=jsc["id"])
        outputs = [i for m in view["messages"] for i in m["message"]["items"] if i["type"] == "function_call_output"]
        assert len(outputs) == 1
        model_input = to_responses_input([m.message for m in client.view.get_messages()])  # the next turn's
        assert sum(1 for i in model_input if i.get("type") == "function_call_output") == 1
        await asyncio.to_thread(node.call, "session", "clientClose", id=jsc["id"])
        await client.close()
        await channel.close()
    finally:
        paused.stop()
        await realtime.close()


async def test_the_supervisor_command_ends_a_run_whose_worker_was_killed(emulator_thread, fleet) -> None:
    name = unique_channel("lease-sup")
    (doomed,) = spawn(emulator_thread.url, 1)
    realtime = ably_realtime(emulator_thread.url, client_id="alice")
    channel = AblyChannel(name, realtime)
    client = ClientSession(channel)
    await client.connect()
    grace, poll = 0.2, 0.1
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "ai_transport", "supervise", name, "--emulator", emulator_thread.url,
         "--lease", str(LEASE), "--grace", str(grace), "--poll", str(poll)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert supervisor.stderr is not None
        started = await asyncio.to_thread(supervisor.stderr.readline)
        assert started.startswith("# supervising"), started
        sent = await client.view.send(user_message("Tell me the weather"))
        doomed.send({"op": "stream_and_hang", "channel": name, "invocation": sent.invocation.to_json()})
        streaming = await asyncio.to_thread(doomed.read)
        doomed.kill()
        killed = time.monotonic()
        await wait_status(client.view, streaming["run_id"], "error", timeout=LEASE + grace + poll + 10)
        assert time.monotonic() - killed <= LEASE + grace + poll + SLACK + 1.0
        assert supervisor.stdout is not None
        line = json.loads(await asyncio.to_thread(supervisor.stdout.readline))
        assert line["run"] == streaming["run_id"] and line["action"] == "ended"
        assert "worker lost" in str(client.view.run(streaming["run_id"]).error)
        outputs = [m for m in (await channel.history(limit=1000)).items if m.get("name") == "ai-output"]
        assert any(m["extras"]["ai"]["transport"].get("status") == "cancelled" for m in outputs)
    finally:
        supervisor.terminate()
        supervisor.wait(10)
        doomed.stop()
        await client.close()
        await channel.close()
        await realtime.close()
