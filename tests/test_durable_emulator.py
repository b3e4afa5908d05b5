"""Durable runs over the emulator with the real ``ably`` SDK: continuity loss without resume
(``drop_transports(conn, forget=True, lose_continuity=True)``: a new connection and a re-attach that
cannot resume from its channelSerial, so nothing missed is replayed)."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest
from support_emulator import emulator_thread, unique_channel  # noqa: F401
from support_sessions import (
    Worker,
    approval,
    assistant_with_call,
    eventually,
    shapes,
    user_message,
    wait_status,
)

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.emulator.client import client_options
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(90)]


async def open_channel(emu: Any, name: str, client_id: str) -> AblyChannel:
    return await asyncio.wait_for(AblyChannel.connect(name, **client_options(emu, client_id=client_id)), 15)


@pytest.mark.parametrize("lose_continuity", [True, False], ids=["continuity-lost", "channel-serial-resumed"])
async def test_transports_dropped_without_resume_while_an_approval_is_published(
    emulator_thread, lose_continuity: bool
) -> None:
    """forget=True: the connections cannot be resumed. With lose_continuity the re-attach cannot
    resume from its channelSerial either (104006 once on each side, the tree refolded from history);
    without it the channelSerial re-attach replays the gap (RESUMED: no 104006). Either way the
    approval published in the gap is acted on."""
    name = unique_channel("durable-continuity")
    cch = await open_channel(emulator_thread, name, "alice")
    ach = await open_channel(emulator_thread, name, "agent")
    client, agent = ClientSession(cch), AgentSession(ach)
    await client.connect()
    await agent.connect()
    errors: dict[str, list[Any]] = {"client": [], "agent": []}
    client.on("error", errors["client"].append)
    agent.on("error", errors["agent"].append)
    worker = Worker()
    try:
        sent = await client.view.send(user_message("Weather in Paris?"))
        run = await worker.handle(agent, sent.invocation.to_json())
        await wait_status(client.view, run.run_id, "suspended")
        # The user answers the call they were shown before the gap; while continuity is restored the
        # tree is refolded from history in the background and the view keeps showing the conversation.
        cmid, call = assistant_with_call(client.view.get_messages())
        shown = len(client.view.get_messages())
        counts: list[int] = []
        client.view.on("update", lambda: counts.append(len(client.view.get_messages())))
        agent_counts: list[int] = []
        run.view.on("update", lambda: agent_counts.append(len(run.view.get_messages())))
        ids = [cch.connection_id, ach.connection_id]
        for conn_id in ids:
            drop = functools.partial(
                emulator_thread.emulator.drop_transports, conn_id, forget=True, lose_continuity=lose_continuity
            )
            assert await asyncio.to_thread(emulator_thread.call, drop) == 1
        answer = await client.view.send(approval(cmid, call), run_id=run.run_id)  # during the gap
        await eventually(lambda: cch.connection_id not in ids and ach.connection_id not in ids, 20)
        await eventually(lambda: cch.state == "attached" and ach.state == "attached", 20)
        if lose_continuity:
            await eventually(lambda: agent.continuity_losses == 1 and client.continuity_losses == 1, 20)
            assert len(client.view.get_messages()) >= shown and len(run.view.get_messages()) >= shown
        await asyncio.gather(client.rebuilt(), agent.rebuilt())
        assert counts and min(counts) >= shown and min(agent_counts, default=shown) >= shown  # never empty
        resumed = await worker.handle(agent, answer.invocation.to_json())
        assert resumed.run_id == run.run_id and len(worker.executed) == 1
        await wait_status(client.view, run.run_id, "complete", timeout=20)
        assert shapes(client.view.get_messages()) == [
            ("user", ["message"]),
            ("assistant", ["reasoning", "message", "function_call"]),
            ("assistant", ["function_call_output"]),
            ("assistant", ["reasoning", "message"]),
        ]
        for side in ("client", "agent"):
            assert [e.code for e in errors[side]] == ([104006] if lose_continuity else []), side
    finally:
        await client.close()
        await agent.end()
        await cch.close()
        await ach.close()
