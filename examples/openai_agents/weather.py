"""The weather demo written with the OpenAI Agents SDK, end to end on this machine.

    python examples/openai_agents/weather.py                 # approve the gated call
    python examples/openai_agents/weather.py --deny "no"     # deny it, with a reason

Two Agents SDK agents: ``triage`` hands the question off to ``weather desk``, whose ``get_weather``
tool needs the user's approval (``function_tool(needs_approval=True)``). They run over an in-process
channel with :func:`ai_transport.integrations.openai_agents.run_agent`; a client session (what a
browser on ``@ably/ai-transport`` does) asks, sees the pending call, answers it, and wakes the agent
again. Every wake-up is a fresh ``AgentSession``: the channel is the only state. The model is the
local scripted Responses server, reached through the SDK's own ``AsyncOpenAI`` client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from agents import Agent, ModelSettings, OpenAIResponsesModel, RunConfig, function_tool
from agents.model_settings import Reasoning
from openai import AsyncOpenAI

from ai_transport.channels.memory import InProcessHub
from ai_transport.cli.scenario import INSTRUCTIONS, get_weather, scripted_turn
from ai_transport.codec.inputs import create_tool_approval_response, create_user_message
from ai_transport.integrations.openai_agents import run_agent
from ai_transport.responses.local_server import (
    LocalResponsesServer,
    ScriptedFunctionCall,
    ScriptedText,
    StreamReply,
    build_response_events,
)
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

TRIAGE = "You route each question to the right desk."
HANDOFF = "transfer_to_weather_desk"


def build_agents(client: AsyncOpenAI) -> Agent[Any]:
    """The triage agent (the starting agent) and the weather desk it hands off to."""

    @function_tool(needs_approval=True)
    def get_weather_tool(city: str, unit: str) -> str:
        """Current weather for a city. Needs the user's approval (it reveals their location).

        Args:
            city: City name, e.g. Paris.
            unit: celsius or fahrenheit.
        """
        return json.dumps(get_weather(city, unit))

    get_weather_tool.name = "get_weather"
    model = OpenAIResponsesModel(model="scripted-weather-model", openai_client=client)
    stateless = ModelSettings(  # store: false; reasoning comes back encrypted, replayed from the channel
        store=False, reasoning=Reasoning(effort="low", summary="auto"),
        response_include=["reasoning.encrypted_content"],
    )
    desk = Agent(name="weather desk", instructions=INSTRUCTIONS, tools=[get_weather_tool], model=model,
                 model_settings=stateless)
    return Agent(name="triage", instructions=TRIAGE, handoffs=[desk], model=model, model_settings=stateless)


def scripted_model(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The local model: triage hands off; the weather desk answers like the demo's scripted model."""
    if body.get("instructions") == TRIAGE:
        outputs = [ScriptedText("Let me pass you to our weather desk."), ScriptedFunctionCall(HANDOFF, {})]
        return build_response_events(outputs, request=body)
    handoffs = {i.get("call_id") for i in body.get("input", []) if i.get("name") == HANDOFF}
    rest = [i for i in body.get("input", []) if i.get("call_id") not in handoffs]
    return scripted_turn(dict(body, input=rest))


def show(client: ClientSession) -> None:
    """Print the conversation as the client sees it."""
    for m in client.view.get_messages():
        for item in m.message.items:
            kind = item.get("type")
            if kind == "message":
                text = "".join(p.get("text", "") for p in item.get("content", []))
                print(f"{'you' if item.get('role') == 'user' else 'assistant'}> {text}")
            elif kind == "reasoning":
                print("thinking> " + " ".join(s.get("text", "") for s in item.get("summary", [])))
            elif kind == "function_call":
                state = m.message.tool_call_states.get(item["call_id"], {}).get("approval", "")
                print(f"  [call] {item['name']}({item['arguments']}) {state}".rstrip())
            elif kind == "function_call_output":
                print(f"  [output] {item['output']}")


async def demo(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns the exit code."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--deny", default=None, metavar="REASON", help="deny the gated call with this reason")
    p.add_argument("--question", default="Is it raining in Lyon right now?")
    args = p.parse_args(argv)
    hub = InProcessHub()
    async with LocalResponsesServer(lambda r: StreamReply.from_events(scripted_model(r.json()))) as server:
        oai = AsyncOpenAI(base_url=server.base_url, api_key="local")
        triage = build_agents(oai)

        async def wake(invocation: dict[str, Any]) -> str:
            """One stateless wake-up of the agent (in production: an HTTP POST to a worker)."""
            session = AgentSession(hub.client("agent").channel("weather-chat"))
            await session.connect()
            try:
                run = await session.create_run(invocation)
                await run.start()
                await run.view.load_all()
                return await run_agent(run, triage, run_config=RunConfig(tracing_disabled=True))
            finally:
                await session.close()

        client = ClientSession(hub.client("user").channel("weather-chat"))
        await client.connect()
        question = {"role": "user", "items": [{"type": "message", "role": "user",
                                               "content": [{"type": "input_text", "text": args.question}]}]}
        sent = await client.view.send([create_user_message(question)])
        outcome = await wake(sent.invocation.to_json())
        run_id = await sent.started
        while outcome == "suspended":
            await client.view.wait_for(lambda: client.view.run(run_id).status == "suspended", 10)
            show(client)
            answers = []
            for m in client.view.get_messages():
                for call_id, state in m.message.tool_call_states.items():
                    if state.get("approval") == "pending":
                        decision: dict[str, Any] = {"call_id": call_id, "approved": args.deny is None}
                        if args.deny:
                            decision["reason"] = args.deny
                        print(f"-- client: {'approve' if args.deny is None else 'deny'} {state.get('name')}")
                        answers.append(create_tool_approval_response(m.codec_message_id, decision))
            answered = await client.view.send(answers, run_id=run_id)
            outcome = await wake(answered.invocation.to_json())
        await client.view.wait_for(lambda: client.view.run(run_id).status == outcome, 10)
        print("-- after the answer:")
        show(client)
        print(f"-- run {outcome}; {len(client.view.runs())} run, {len(server.requests)} model calls")
        await client.close()
        await oai.close()
    return 0 if outcome == "complete" else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(demo()))
