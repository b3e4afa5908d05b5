"""The OpenAI Agents SDK integration over the emulator and the real ably SDKs.

* A JS client (``@ably/ai-transport@0.8.0`` + ably-js in node) asks the weather question and approves
  the gated call; the agent is the demo's weather agent written with the Agents SDK. Its view equals
  the JS client's view of the same conversation answered by our own ``AgentRun.pipe`` agent
  (:class:`~ai_transport.cli.agent.ToolAgent`), ids aside.
* A JS client cancels mid-stream: the SDK run is cancelled (no tool, no further model request) and the
  JS client sees the run and its step cancelled with the text streamed so far.
* A resume after a process restart: ``examples/openai_agents/worker.py`` handles each wake-up in a
  fresh process, so the approval is applied by a worker that knows only the channel; two processes
  woken by the same approval run the tool once (exactly-once claims).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import RunConfig
from openai import AsyncOpenAI
from support_emulator import emulator_thread, unique_channel  # noqa: F401  (fixture)
from support_sessions import approval, user_message, wait_status

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.cli.agent import ToolAgent
from ai_transport.cli.agents_sdk import AgentsSdkAgent, weather_agent
from ai_transport.cli.demo import SCRIPTED_MODEL
from ai_transport.cli.scenario import get_weather, scripted_turn
from ai_transport.emulator.client import client_options, connect_info
from ai_transport.integrations.openai_agents import run_agent
from ai_transport.responses.client import ResponsesClient
from ai_transport.responses.local_server import (
    LocalResponsesServer,
    ScriptedText,
    StreamReply,
    build_response_events,
)
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "examples" / "openai_agents" / "worker.py"
REASONING = {"effort": "low", "summary": "auto"}


async def js(node: Any, op: str, **args: Any) -> Any:
    return await asyncio.to_thread(node.call, "session", op, **args)


def normalized(view: Any) -> Any:
    """The JS view with every generated id / blob replaced by its order of first appearance."""
    text = json.dumps(view, sort_keys=True)
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"<id{len(names)}>")

    id_like = r"\b(?:resp|rs|msg|fc|call)_[0-9a-f]{16,}\b|gAAAA[\w-]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    return json.loads(re.sub(id_like, rename, text))


async def js_approve_loop(emu: Any, node: Any, agent_for: Any) -> dict[str, Any]:
    """A JS client asks, the agent suspends, the JS client approves, the agent resumes and
    completes; returns the JS client's final view (messages and runs)."""
    name = unique_channel("agents-js")
    channels: list[AblyChannel] = []

    async def channel_factory() -> AblyChannel:
        ch = await asyncio.wait_for(AblyChannel.connect(name, **client_options(emu, client_id="agent")), 15)
        channels.append(ch)
        return ch

    async with LocalResponsesServer(lambda r: StreamReply.from_events(scripted_turn(r.json()))) as server:
        responses = ResponsesClient(api_key="local", base_url=server.base_url)
        agent = agent_for(channel_factory, responses)
        jsc = await js(node, "clientOpen", options=connect_info(emu, client_id="alice"), channel=name)
        try:
            sent = await js(node, "clientSend", id=jsc["id"], text="What's the weather in Paris right now?")
            assert await agent.handle_invocation(sent["invocation"]) == "suspended"
            await js(node, "clientWait", id=jsc["id"], inputCodecMessageId=sent["inputCodecMessageId"],
                     status="suspended")
            answer = await js(node, "clientApprove", id=jsc["id"], approved=True)
            assert await agent.handle_invocation(answer["invocation"]) == "complete"
            await js(node, "clientWait", id=jsc["id"], runId=answer["runId"], status="complete")
            view = await js(node, "clientMessages", id=jsc["id"])
        finally:
            await js(node, "clientClose", id=jsc["id"])
            await responses.aclose()
            aclose = getattr(agent, "aclose", None)
            if aclose is not None:
                await aclose()
        assert len(server.requests) == 2
    return view


async def test_js_view_of_the_agents_sdk_run_equals_the_view_of_our_pipe_agent(emulator_thread, node) -> None:
    sdk_view = await js_approve_loop(
        emulator_thread, node,
        lambda factory, responses: AgentsSdkAgent(factory, responses, SCRIPTED_MODEL, reasoning=REASONING),
    )
    pipe_view = await js_approve_loop(
        emulator_thread, node,
        lambda factory, responses: ToolAgent(factory, responses, SCRIPTED_MODEL, reasoning=REASONING),
    )
    kinds = [[i["type"] for i in m["message"]["items"]] for m in sdk_view["messages"]]
    assert kinds == [["message"], ["reasoning", "message", "function_call"], ["function_call_output"],
                     ["reasoning", "message"]]
    assert sdk_view["messages"][1]["message"]["items"][0]["encrypted_content"].startswith("gAAAA")
    weather = get_weather("Paris")
    assert json.loads(sdk_view["messages"][2]["message"]["items"][0]["output"]) == weather
    assert normalized(sdk_view["messages"]) == normalized(pipe_view["messages"])
    for view in (sdk_view, pipe_view):
        assert [r["status"] for r in view["runs"]] == ["complete"]
    assert [s["status"] for s in sdk_view["runs"][0]["steps"]] == [s["status"] for s in pipe_view["runs"][0]["steps"]]


async def run_worker(emu: Any, invocation: dict[str, Any]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), "--emulator", emu.url, json.dumps(invocation),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err.decode()
    return str(json.loads(out.decode().strip().splitlines()[-1])["outcome"])


async def test_fresh_worker_processes_apply_the_approval_exactly_once(emulator_thread) -> None:
    name = unique_channel("agents-restart")
    channel = await asyncio.wait_for(AblyChannel.connect(name, **client_options(emulator_thread, client_id="alice")), 15)
    client = ClientSession(channel)
    await client.connect()
    try:
        sent = await client.view.send(user_message("Is it raining in Lyon?"))
        assert await run_worker(emulator_thread, sent.invocation.to_json()) == "suspended"
        run_id = await asyncio.wait_for(asyncio.shield(sent.started), 15)
        await wait_status(client.view, run_id, "suspended")
        message = client.view.get_messages()[1]
        call = next(i for i in message.message.items if i.get("type") == "function_call")
        assert message.message.tool_call_states[call["call_id"]]["approval"] == "pending"

        # the worker process that suspended the run is gone; the approval wakes two fresh ones at once
        # (a retried trigger): the claims on the channel let exactly one run the tool and go on
        answered = await client.view.send(approval(message.codec_message_id, call, True), run_id=run_id)
        body = answered.invocation.to_json()
        outcomes = await asyncio.gather(run_worker(emulator_thread, body), run_worker(emulator_thread, body))
        assert sorted(outcomes) == ["complete", "yielded"]
        await wait_status(client.view, run_id, "complete")
        messages = client.view.get_messages()
        outputs = [i for m in messages for i in m.message.items if i.get("type") == "function_call_output"]
        assert [json.loads(o["output"]) for o in outputs] == [get_weather("Lyon")]
        text = messages[-1].message.items[-1]["content"][0]["text"]
        assert text.startswith(f"Right now in Lyon it is {get_weather('Lyon')['temperature']}°C")
        assert [r.status for r in client.view.runs()] == ["complete"]
    finally:
        await client.close()
        await channel.close()


async def test_a_js_client_cancels_the_sdk_run_mid_stream(emulator_thread, node) -> None:
    name = unique_channel("agents-cancel")
    chunks = build_response_events([ScriptedText("la " * 2000)])

    async with LocalResponsesServer(lambda r: StreamReply.from_events(chunks, delay=0.005)) as server:
        oai = AsyncOpenAI(base_url=server.base_url, api_key="local", max_retries=0)
        channel = await asyncio.wait_for(AblyChannel.connect(name, **client_options(emulator_thread, client_id="agent")), 15)
        session = AgentSession(channel)
        await session.connect()
        jsc = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
        try:
            sent = await js(node, "clientSend", id=jsc["id"], text="Sing")
            run = await session.create_run(sent["invocation"])
            await run.start()
            await run.view.load_all()
            task = asyncio.ensure_future(run_agent(run, weather_agent("scripted", oai), run_config=RunConfig(tracing_disabled=True)))

            async def streaming() -> None:
                while True:
                    view = await js(node, "clientMessages", id=jsc["id"])
                    if len(view["messages"]) > 1 and "la la la" in json.dumps(view["messages"][1]):
                        return
                    await asyncio.sleep(0.05)

            await asyncio.wait_for(streaming(), 20)
            await js(node, "clientCancel", id=jsc["id"], runId=run.run_id)
            assert await asyncio.wait_for(task, 20) == "cancelled"
            await js(node, "clientWait", id=jsc["id"], runId=run.run_id, status="cancelled")
            view = await js(node, "clientMessages", id=jsc["id"])
            text = view["messages"][1]["message"]["items"][0]["content"][0]["text"]
            assert text.startswith("la la la") and len(text) < len("la " * 2000)
            assert [s["status"] for s in view["runs"][0]["steps"]] == ["cancelled"]
            assert len(server.requests) == 1
        finally:
            await js(node, "clientClose", id=jsc["id"])
            await session.close()
            await channel.close()
            await oai.close()
