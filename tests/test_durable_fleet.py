"""A fleet of real worker processes over the emulator (``tests/durable_worker.py``).

* Exactly once: 2-3 long-lived worker processes are woken together with the same approval, with a
  tool of 0 ms and of 200 ms, 30 trials each: the tool runs once in every trial and the run completes.
* (A claimer killed before running the tool, a crash while resuming, long tools, pauses, the
  supervisor: ``test_durable_leases.py``.)
* Crash recovery: an agent process holding a ``signing_key`` is SIGKILLed mid-stream; a recovery
  worker with the same key adopts the run (once the dead worker's lease lapsed): no tamper report (the dead agent's half stream verifies,
  the close is signed), every agent message in history verifies, and a JS client's
  (``@ably/ai-transport@0.8.0``) view shows no ``in_progress`` item and the run ended (the tags on
  every stream wire change nothing for it).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from support_durable import fleet, spawn, suspended, tool_outputs  # noqa: F401  (fleet: a fixture)
from support_emulator import emulator_thread, unique_channel  # noqa: F401
from support_sessions import wait_status

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.conversation.signing import verify_output
from ai_transport.emulator.client import ably_realtime, connect_info

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(180)]

SIGNING_KEY = "fleet-signing-key-0123456789abcd"


@pytest.mark.parametrize("tool_ms", [0, 200])
async def test_workers_woken_together_run_the_tool_exactly_once(emulator_thread, fleet, tool_ms: int) -> None:
    realtime = ably_realtime(emulator_thread.url, client_id="alice")
    try:
        for trial in range(30):
            workers = fleet[: 2 + trial % 2]
            client, channel, run_id, answer = await suspended(realtime, fleet, "fleet")
            wake = {"op": "handle", "invocation": answer.invocation.to_json(), "tool_seconds": tool_ms / 1000}
            results = await asyncio.gather(*(w.call({**wake, "channel": channel.name}) for w in workers))
            assert sum(r["executed"] for r in results) == 1, (trial, results)
            assert sum(not r["yielded"] for r in results) == 1, (trial, results)
            await wait_status(client.view, run_id, "complete")
            assert tool_outputs(client.view.get_messages()) == 1
            await client.close()
            await channel.close()
    finally:
        await realtime.close()


async def test_sigkill_mid_stream_recovery_worker_adopts_and_js_client_sees_it_finish(
    emulator_thread, fleet, node
) -> None:
    name = unique_channel("fleet-crash")
    (doomed,) = spawn(emulator_thread.url, 1)
    jsc = await asyncio.to_thread(
        node.call, "session", "clientOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name
    )
    try:
        sent = await asyncio.to_thread(node.call, "session", "clientSend", id=jsc["id"], text="Tell me the weather")
        doomed.send(
            {"op": "stream_and_hang", "channel": name, "invocation": sent["invocation"], "signing_key": SIGNING_KEY}
        )
        streaming = await asyncio.to_thread(doomed.read)
        assert streaming["streaming"]
        doomed.kill()  # SIGKILL mid-stream: the stream and its step stay open on the channel
        before = await asyncio.to_thread(node.call, "session", "clientMessages", id=jsc["id"])
        assert before["runs"][0]["status"] == "active" and "in_progress" in json.dumps(before["messages"])
        adopted = await fleet[0].call(
            {
                "op": "adopt",
                "channel": name,
                "invocation": sent["invocation"],
                "run_id": streaming["run_id"],
                "invocation_id": streaming["invocation_id"],
                "signing_key": SIGNING_KEY,
            }
        )
        assert adopted["run_id"] == streaming["run_id"] and adopted["tampered"] == 0
        await asyncio.to_thread(
            node.call, "session", "clientWait", id=jsc["id"], runId=streaming["run_id"], status="complete"
        )
        after = await asyncio.to_thread(node.call, "session", "clientMessages", id=jsc["id"])
        assert "in_progress" not in json.dumps(after["messages"])
        texts = [
            part.get("text")
            for m in after["messages"]
            for item in m["message"]["items"]
            if item.get("type") == "message"
            for part in item.get("content", [])
        ]
        assert texts[-1] == "Recovered answer."
        steps = after["runs"][0]["steps"]
        assert [(s["stepId"], s["status"], s["attemptCount"]) for s in steps] == [(adopted["step_id"], "complete", 2)]
        realtime = ably_realtime(emulator_thread.url, client_id="auditor")
        channel = AblyChannel(name, realtime)
        try:
            page = await channel.history(limit=1000, direction="forwards")
            outputs = [m for m in page.items if m.get("name") == "ai-output"]
            statuses = [m["extras"]["ai"]["transport"].get("status") for m in outputs]
            assert "cancelled" in statuses and all(verify_output(SIGNING_KEY.encode(), m, channel=name) for m in outputs)
        finally:
            await channel.close()
            await realtime.close()
    finally:
        doomed.stop()
        await asyncio.to_thread(node.call, "session", "clientClose", id=jsc["id"])
