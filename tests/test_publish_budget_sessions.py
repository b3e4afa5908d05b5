"""One publish budget for everything a connection publishes (issue 22): presence enters, run
lifecycle, inputs, claims and renewals share it with the encoder's appends.

Twenty conversations start at once: the users' prompts go out on one ``AblyRealtime`` connection,
twenty agent sessions on another (one ``AgentSession`` per channel, all on that connection) enter
presence, start a run (``ai-run-start`` + its lease), stream a short answer and end. The emulator
runs with Ably's rate limits; every ProtocolMessage each connection sends (messages and presence)
is counted as the SDK writes it to the connection's websocket: nothing is rejected (no 42911 / 42913 / 42921) and no 1 s window of
either connection holds more than 50 messages. The budget's idle burst cap: after 2 s idle, at most
``burst`` operations leave back to back.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest
from support_emulator import unique_channel, wait_connected
from support_sessions import Worker, user_message, wait_status

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.channels.budget import PublishBudget
from ai_transport.emulator import Emulator, RateLimits, ably_realtime
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

SESSIONS = 20
LIMIT = 50


def busiest_second(stamps: list[tuple[float, int]]) -> int:
    """The most messages in any 1 s window (sliding) of ``(time, count)`` sends."""
    stamps = sorted(stamps)
    best = total = lo = 0
    for hi in range(len(stamps)):
        total += stamps[hi][1]
        while stamps[hi][0] - stamps[lo][0] >= 1.0:
            total -= stamps[lo][1]
            lo += 1
        best = max(best, total)
    return best


async def test_twenty_sessions_started_at_once_stay_within_the_connection_limit(monkeypatch: Any) -> None:
    from ably.transport.websockettransport import WebSocketTransport

    sent: dict[int, list[tuple[float, int]]] = defaultdict(list)
    send = WebSocketTransport.send

    async def counting(self: Any, message: dict[str, Any]) -> None:
        items = message.get("messages") if message.get("action") == 15 else message.get("presence")
        if message.get("action") in (14, 15) and isinstance(items, list):  # MESSAGE / PRESENCE
            sent[id(self.connection_manager)].append((asyncio.get_running_loop().time(), len(items)))
        await send(self, message)

    monkeypatch.setattr(WebSocketTransport, "send", counting)
    async with Emulator(port=0, rate_limits=RateLimits()) as emu:
        agent_rt = ably_realtime(emu, client_id="agent")
        users_rt = ably_realtime(emu, client_id="alice")
        sessions: list[Any] = []
        try:
            await wait_connected(agent_rt)
            await wait_connected(users_rt)

            async def conversation(i: int) -> None:
                name = unique_channel("budget")
                client = ClientSession(AblyChannel(name, users_rt))
                agent = AgentSession(AblyChannel(name, agent_rt))
                sessions.extend([client, agent])
                await asyncio.gather(client.connect(), agent.connect())
                prompt = await client.view.send(user_message(f"hello {i}"))
                answer = [ScriptedText(f"answer {i}: " + " ".join(f"w{j}" for j in range(20)))]
                worker = Worker(gated=(), model=lambda _items: _stream(build_response_events(answer)))
                run = await worker.handle(agent, prompt.invocation.to_json())
                await wait_status(client.view, run.run_id, "complete", timeout=60)

            await asyncio.gather(*(conversation(i) for i in range(SESSIONS)))
            assert emu.limiter.rejected == {42911: 0, 42913: 0, 42921: 0}
            busiest = {conn: busiest_second(stamps) for conn, stamps in sent.items()}
            assert len(busiest) == 2 and all(n > 0 for n in busiest.values())
            assert max(busiest.values()) <= LIMIT, busiest
        finally:
            for s in sessions:
                await s.close()
            await agent_rt.close()
            await users_rt.close()


async def _stream(events: list[dict[str, Any]]) -> Any:
    for ev in events:
        await asyncio.sleep(0)
        yield ev


async def test_after_an_idle_spell_only_the_burst_leaves_back_to_back() -> None:
    """The bucket is capped at ``burst`` tokens: idle for 2 s, 87 operations take >= (87 - 8) / 40 s."""
    budget = PublishBudget(40.0, burst=8)
    await budget.acquire()
    await asyncio.sleep(2.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    stamps = []
    for _ in range(87):
        await budget.acquire()
        stamps.append(loop.time() - started)
    assert sum(1 for t in stamps if t < 0.01) <= 8 + 1
    assert stamps[-1] >= (87 - 8) / 40 - 0.05
