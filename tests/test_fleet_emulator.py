"""Fleet-scale publishing over the emulator with Ably's limits on and the real ``ably`` SDK.

Twenty responses stream at once through one ``AblyChannel`` connection (its default publish budget),
each at ~150 deltas/s: the emulator rejects nothing (no 42911 / 42913 / 42921) and a subscriber on
another connection decodes every response's text exactly as the model produced it. Nothing here
asserts speed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from support_emulator import unique_channel, wait_connected

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.codec import ResponsesCodec
from ai_transport.emulator import Emulator, RateLimits, ably_realtime

STREAMS = 20
DELTAS = 40


def model_events(i: int) -> tuple[list[dict[str, Any]], str]:
    """One response: a message item whose text streams as ``DELTAS`` deltas of varying size."""
    item = f"msg_{i}"
    deltas = [f"s{i}d{j}" + "x" * (j % 4) + " " for j in range(DELTAS)]
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": item, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}},
        {"type": "response.content_part.added", "item_id": item, "output_index": 0, "content_index": 0,
         "part": {"type": "output_text", "annotations": [], "text": ""}},
    ]
    events += [
        {"type": "response.output_text.delta", "item_id": item, "output_index": 0, "content_index": 0,
         "delta": d, "logprobs": []}
        for d in deltas
    ]
    text = "".join(deltas)
    events += [
        {"type": "response.output_text.done", "item_id": item, "output_index": 0, "content_index": 0,
         "text": text},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"id": item, "type": "message", "status": "completed", "role": "assistant",
                  "content": [{"type": "output_text", "text": text, "annotations": []}]}},
    ]
    return events, text


async def test_twenty_streams_on_one_connection_no_rate_limit_and_text_intact() -> None:
    name = unique_channel("fleet")
    async with Emulator(port=0, rate_limits=RateLimits()) as emu:
        agent_rt = ably_realtime(emu, client_id="agent")
        viewer_rt = ably_realtime(emu, client_id="viewer")
        try:
            await wait_connected(agent_rt)
            await wait_connected(viewer_rt)
            viewer = AblyChannel(name, viewer_rt)
            decoder = ResponsesCodec.create_decoder()
            texts: dict[str, str] = {}
            done: set[str] = set()

            def on_message(msg: Any) -> None:
                for out in decoder.decode(msg).outputs:
                    ev = out.get("event", out) if isinstance(out, dict) else out
                    if ev.get("type") == "response.output_text.delta":
                        texts[ev["item_id"]] = texts.get(ev["item_id"], "") + ev["delta"]
                    elif ev.get("type") == "response.output_item.done":
                        done.add(ev["item"]["id"])

            await viewer.subscribe(on_message)
            agent = AblyChannel(name, agent_rt)
            assert agent.publish_budget.enabled
            expected: dict[str, str] = {}

            async def stream(i: int) -> None:
                events, text = model_events(i)
                expected[f"msg_{i}"] = text
                encoder = ResponsesCodec.create_encoder(agent)
                for ev in events:
                    await encoder.publish_output(ev)
                    if ev["type"] == "response.output_text.delta":
                        await asyncio.sleep(1 / 150)
                await encoder.close()

            await asyncio.gather(*(stream(i) for i in range(STREAMS)))
            for _ in range(3000):
                if len(done) == STREAMS:
                    break
                await asyncio.sleep(0.01)
            assert emu.limiter.rejected == {42911: 0, 42913: 0, 42921: 0}
            assert agent.publish_budget.rejections == 0
            assert texts == expected
            assert done == set(expected)
        finally:
            await agent_rt.close()
            await viewer_rt.close()


async def test_concurrent_agent_runs_on_one_connection_share_its_budget() -> None:
    """Six conversations, one agent connection (every AgentSession's encoder and lifecycle writes
    share its budget), a model streaming as fast as it can: nothing rejected, every client sees
    its answer exactly."""
    from support_sessions import Worker, user_message, wait_status

    from ai_transport.responses.local_server import ScriptedText, build_response_events
    from ai_transport.sessions.agent import AgentSession
    from ai_transport.sessions.client import ClientSession

    texts = [f"answer {i}: " + " ".join(f"w{j}" for j in range(150)) for i in range(6)]

    async def fast_model(text: str) -> Any:
        for ev in build_response_events([ScriptedText(text)]):
            await asyncio.sleep(0)
            yield ev

    async with Emulator(port=0, rate_limits=RateLimits()) as emu:
        agent_rt = ably_realtime(emu, client_id="agent")
        viewer_rt = ably_realtime(emu, client_id="alice")
        sessions: list[Any] = []
        try:
            await wait_connected(agent_rt)
            await wait_connected(viewer_rt)

            async def conversation(i: int) -> str:
                name = unique_channel("fleet-run")
                client = ClientSession(AblyChannel(name, viewer_rt))
                agent = AgentSession(AblyChannel(name, agent_rt))
                sessions.extend([client, agent])
                await client.connect()
                await agent.connect()
                worker = Worker(gated=(), model=lambda items: fast_model(texts[i]))
                sent = await client.view.send(user_message("go"))
                run = await worker.handle(agent, sent.invocation.to_json())
                await wait_status(client.view, run.run_id, "complete", timeout=60)
                last = client.view.get_messages()[-1].message
                return "".join(
                    part.get("text", "")
                    for item in last.items
                    if item.get("type") == "message"
                    for part in item.get("content", [])
                )

            got = await asyncio.gather(*(conversation(i) for i in range(len(texts))))
            assert got == texts
            assert emu.limiter.rejected == {42911: 0, 42913: 0, 42921: 0}
        finally:
            for s in sessions:
                await (s.end() if isinstance(s, AgentSession) else s.close())
            await agent_rt.close()
            await viewer_rt.close()
