"""A worker process woken while its Ably connection is still connecting (a serverless cold start).

ably-python knows a realtime client's ``clientId`` only once CONNECTED; an agent session made at
once trusted no identity (``{None}``), so it skipped its own run start, claims and output: a resumed
run's trigger (an approval into a run it could not see) was not found for 30 s, and a fresh run
never saw its own answer. Here the wire is published first; a fresh worker process is spawned and
handed the invocation at once (before its connection is up): it must act promptly, well under the
30 s trigger timeout.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support_durable import Proc
from support_emulator import emulator_thread, unique_channel  # noqa: F401
from support_sessions import approve_call, user_message, wait_status

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.emulator.client import ably_realtime, request_token
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]


async def cold_call(url: str, cmd: dict[str, Any]) -> dict[str, Any]:
    """Spawn a worker and hand it ``cmd`` as soon as it is up (its connection still connecting)."""
    worker = Proc(url)
    try:
        assert worker.read() == {"ready": True}
        return await asyncio.wait_for(worker.call(cmd), 15)
    finally:
        worker.kill()


async def test_cold_workers_find_the_prompt_and_the_approval(emulator_thread: Any) -> None:
    realtime = ably_realtime(emulator_thread.url, client_id="alice")
    name = unique_channel("cold")
    channel = AblyChannel(name, realtime)
    client = ClientSession(channel)
    await client.connect()
    try:
        sent = await client.view.send(user_message("Weather in Paris?"))
        first = await cold_call(emulator_thread.url, {"op": "handle", "channel": name, "invocation": sent.invocation.to_json()})
        await wait_status(client.view, first["run_id"], "suspended")
        answer, _ = await approve_call(client.view, first["run_id"])
        wake = {"op": "handle", "channel": name, "invocation": answer.invocation.to_json()}
        second = await cold_call(emulator_thread.url, wake)
        assert second["run_id"] == first["run_id"] and second["executed"] == 1 and not second["yielded"]
        await wait_status(client.view, first["run_id"], "complete")
    finally:
        await client.close()
        await channel.close()
        await realtime.close()


async def test_ably_channel_client_id_is_the_configured_one_while_connecting(emulator_thread: Any) -> None:
    realtime = ably_realtime(emulator_thread.url, client_id="agent")
    try:
        channel = AblyChannel(unique_channel("cold-id"), realtime)
        assert channel.client_id == "agent"
        await channel.attach()
        assert channel.client_id == "agent"
        await channel.close()
    finally:
        await realtime.close()


async def test_agent_session_on_a_token_only_client_trusts_its_identity_once_connected(emulator_thread: Any) -> None:
    # a bare token string: nothing names the clientId until Ably's CONNECTED does
    token = await asyncio.to_thread(request_token, emulator_thread.url, client_id="agent")
    realtime = ably_realtime(emulator_thread.url, token=token["token"])
    channel = AblyChannel(unique_channel("cold-token"), realtime)
    session = AgentSession(channel, enter_presence=False)
    try:
        assert channel.client_id is None
        await session.connect()
        assert session.trusted_agent_ids == {"agent"}
    finally:
        await session.close()
        await channel.close()
        await realtime.close()
