"""The OpenAI Agents SDK over ai_transport (``ai_transport.integrations.openai_agents``).

The real ``openai-agents`` package drives the local scripted Responses server through
``AsyncOpenAI(base_url=...)`` (no network); agent and client sessions share an in-process channel.
Every wake-up is a fresh ``AgentSession`` that knows only the channel.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("agents")

from agents import Agent, ModelSettings, OpenAIResponsesModel, RunConfig, function_tool
from agents.model_settings import Reasoning
from openai import AsyncOpenAI
from support_sessions import approval, open_session, shapes, user_message, wait_status

from ai_transport.channels.memory import InProcessHub
from ai_transport.integrations.openai_agents import run_agent
from ai_transport.responses.local_server import (
    ErrorReply,
    LocalResponsesServer,
    ScriptedFunctionCall,
    ScriptedReasoning,
    ScriptedText,
    StreamReply,
    build_response_events,
)
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

pytestmark = [pytest.mark.timeout(60)]  # async tests run in asyncio mode "auto"

NO_TRACING = RunConfig(tracing_disabled=True)
SETTINGS = ModelSettings(
    store=False,
    reasoning=Reasoning(effort="low", summary="auto"),
    response_include=["reasoning.encrypted_content"],
)


def current_turn(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's input from the last user message on."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    last = max((n for n, i in enumerate(items) if i.get("role") == "user"), default=0)
    return items[last:]


def outputs_of(body: dict[str, Any]) -> dict[str, str]:
    return {i["call_id"]: i["output"] for i in current_turn(body) if i.get("type") == "function_call_output"}


def calls_of(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [i for i in current_turn(body) if i.get("type") == "function_call" and i.get("name") == name]


@asynccontextmanager
async def scripted_model(
    script: Callable[[dict[str, Any]], list[Any]], delay: float = 0.0
) -> AsyncIterator[tuple[LocalResponsesServer, AsyncOpenAI]]:
    """The local Responses server answering each request with ``script(body)``'s outputs."""

    def responder(request: Any) -> Any:
        body = request.json()
        outputs = script(body)
        if isinstance(outputs, ErrorReply):
            return outputs
        return StreamReply.from_events(build_response_events(outputs, request=body), delay=delay)

    async with LocalResponsesServer(responder) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="local", max_retries=0)
        try:
            yield server, client
        finally:
            await client.close()


class Tools:
    """Function tools that record every execution."""

    def __init__(self) -> None:
        self.executed: list[tuple[str, dict[str, Any]]] = []

        @function_tool(needs_approval=True)
        def get_weather(city: str) -> str:
            """Current weather for a city (needs approval)."""
            self.executed.append(("get_weather", {"city": city}))
            return json.dumps({"city": city, "conditions": "showers"})

        @function_tool
        def get_time(city: str) -> str:
            """Local time in a city."""
            self.executed.append(("get_time", {"city": city}))
            return f"12:00 in {city}"

        self.get_weather = get_weather
        self.get_time = get_time


def weather_agent(client: AsyncOpenAI, tools: Tools, **kw: Any) -> Agent[Any]:
    return Agent(
        name="weather",
        instructions="You answer weather questions.",
        tools=[tools.get_weather, tools.get_time],
        model=OpenAIResponsesModel("scripted", client),
        model_settings=SETTINGS,
        **kw,
    )


async def wake(hub: InProcessHub, body: dict[str, Any], agent: Agent[Any]) -> tuple[Any, str]:
    """One stateless wake-up: a fresh agent session on the channel, the run started, the SDK run."""
    session = AgentSession(hub.client("agent").channel("chat"))
    await session.connect()
    try:
        run = await session.create_run(body)
        await run.start()
        await run.view.load_all()
        return run, await run_agent(run, agent, run_config=NO_TRACING)
    finally:
        await session.close()


def call_message(client: ClientSession, name: str, city: str | None = None) -> tuple[str, dict[str, Any]]:
    for m in reversed(client.view.get_messages()):
        for item in m.message.items:
            same = item.get("type") == "function_call" and item.get("name") == name
            if same and (city is None or json.loads(item["arguments"]).get("city") == city):
                return m.codec_message_id, item
    raise AssertionError(f"no {name} call in the view")


async def ask(client: ClientSession, text: str) -> Any:
    return await client.view.send(user_message(text))


async def answer(client: ClientSession, run_id: str, *answers: tuple[str, dict[str, Any], bool, str | None]) -> Any:
    inputs = [approval(cmid, call, ok, **({"reason": reason} if reason else {})) for cmid, call, ok, reason in answers]
    return await client.view.send(inputs, run_id=run_id)


# ---------------------------------------------------------------------------------------------


def tool_loop_script(body: dict[str, Any]) -> list[Any]:
    """Turn 1: reasoning + an ungated get_time call; turn 2: text + a gated get_weather call;
    turn 3 (both answered): the answer quoting the outputs."""
    outs = outputs_of(body)
    if not calls_of(body, "get_time"):
        return [ScriptedReasoning(["I need the time first."]), ScriptedFunctionCall("get_time", {"city": "Paris"})]
    if not calls_of(body, "get_weather"):
        return [ScriptedReasoning(["Now the weather."]), ScriptedText("Checking the weather."),
                ScriptedFunctionCall("get_weather", {"city": "Paris"})]
    return [ScriptedText("Answer: " + " | ".join(outs.values()))]


async def test_approve_loop_multi_turn_with_encrypted_reasoning() -> None:
    tools = Tools()
    async with scripted_model(tool_loop_script) as (server, oai):
        agent = weather_agent(oai, tools)
        hub, client, _agent_session = await open_session()
        sent = await ask(client, "Weather and time in Paris?")
        run, outcome = await wake(hub, sent.invocation.to_json(), agent)
        assert outcome == "suspended"
        await wait_status(client.view, run.run_id, "suspended")
        assert tools.executed == [("get_time", {"city": "Paris"})]
        assert shapes(client.view.get_messages()) == [
            ("user", ["message"]),
            ("assistant", ["reasoning", "function_call"]),
            ("assistant", ["function_call_output"]),
            ("assistant", ["reasoning", "message", "function_call"]),
        ]
        cmid, call = call_message(client, "get_weather")
        states = client.view.get_messages()[3].message.tool_call_states
        assert states[call["call_id"]]["approval"] == "pending"
        assert len(server.requests) == 2

        answered = await answer(client, run.run_id, (cmid, call, True, None))
        resumed, outcome = await wake(hub, answered.invocation.to_json(), agent)
        assert outcome == "complete" and resumed.run_id == run.run_id
        await wait_status(client.view, run.run_id, "complete")
        # each tool ran exactly once; the replayed turn asked the model nothing
        assert tools.executed == [("get_time", {"city": "Paris"}), ("get_weather", {"city": "Paris"})]
        assert len(server.requests) == 3
        final = client.view.get_messages()
        assert shapes(final)[4:] == [("assistant", ["function_call_output"]), ("assistant", ["message"])]
        weather = json.dumps({"city": "Paris", "conditions": "showers"})
        assert final[-1].message.items[0]["content"][0]["text"] == f"Answer: 12:00 in Paris | {weather}"
        # stateless request: store false, encrypted reasoning asked for and replayed as streamed
        body = server.request_bodies()[2]
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
        streamed = [i for m in final for i in m.message.items if i.get("type") == "reasoning"]
        replayed = [i for i in body["input"] if i.get("type") == "reasoning"]
        assert [r["encrypted_content"] for r in replayed] == [r["encrypted_content"] for r in streamed]
        assert all(r["encrypted_content"].startswith("gAAAA") for r in replayed)
        assert [i.get("type") for i in body["input"]] == [
            "message", "reasoning", "function_call", "function_call_output",
            "reasoning", "message", "function_call", "function_call_output",
        ]
        assert len(client.view.runs()) == 1
        await client.close()


def deny_script(body: dict[str, Any]) -> list[Any]:
    outs = outputs_of(body)
    if not outs:
        return [ScriptedText("Let me check."), ScriptedFunctionCall("get_weather", {"city": "Paris"})]
    return [ScriptedText("Without the tool (" + next(iter(outs.values())) + "): bring an umbrella.")]


async def test_deny_loop_reason_reaches_the_model_and_the_tool_never_runs() -> None:
    tools = Tools()
    async with scripted_model(deny_script) as (server, oai):
        agent = weather_agent(oai, tools)
        hub, client, _ = await open_session()
        sent = await ask(client, "Weather in Paris?")
        run, outcome = await wake(hub, sent.invocation.to_json(), agent)
        assert outcome == "suspended"
        await wait_status(client.view, run.run_id, "suspended")
        cmid, call = call_message(client, "get_weather")
        answered = await answer(client, run.run_id, (cmid, call, False, "not today, thanks"))
        _, outcome = await wake(hub, answered.invocation.to_json(), agent)
        assert outcome == "complete"
        await wait_status(client.view, run.run_id, "complete")
        assert tools.executed == []
        last = server.request_bodies()[-1]
        assert outputs_of(last) == {call["call_id"]: "not today, thanks"}
        text = client.view.get_messages()[-1].message.items[0]["content"][0]["text"]
        assert text == "Without the tool (not today, thanks): bring an umbrella."
        assert shapes(client.view.get_messages()) == [
            ("user", ["message"]),
            ("assistant", ["message", "function_call", "function_call_output"]),
            ("assistant", ["message"]),
        ]
        await client.close()


def two_calls_script(body: dict[str, Any]) -> list[Any]:
    outs = outputs_of(body)
    if not outs:
        return [ScriptedFunctionCall("get_weather", {"city": "Paris"}),
                ScriptedFunctionCall("get_weather", {"city": "Lyon"})]
    return [ScriptedText("Got: " + json.dumps(outs, sort_keys=True))]


async def test_two_gated_calls_in_one_turn_one_approved_one_denied() -> None:
    tools = Tools()
    async with scripted_model(two_calls_script) as (server, oai):
        agent = weather_agent(oai, tools)
        hub, client, _ = await open_session()
        sent = await ask(client, "Weather in Paris and Lyon?")
        run, outcome = await wake(hub, sent.invocation.to_json(), agent)
        assert outcome == "suspended"
        await wait_status(client.view, run.run_id, "suspended")
        paris, lyon = call_message(client, "get_weather", "Paris"), call_message(client, "get_weather", "Lyon")
        assert paris[0] == lyon[0]  # one message holds both calls and both approval requests
        states = client.view.get_messages()[1].message.tool_call_states
        assert {s["approval"] for s in states.values()} == {"pending"} and len(states) == 2

        # the first answer alone: the run stays suspended, nothing runs, the model is not asked
        first = await answer(client, run.run_id, (*paris, True, None))
        _, outcome = await wake(hub, first.invocation.to_json(), agent)
        assert outcome == "suspended" and tools.executed == [] and len(server.requests) == 1

        second = await answer(client, run.run_id, (*lyon, False, "not Lyon"))
        _, outcome = await wake(hub, second.invocation.to_json(), agent)
        assert outcome == "complete"
        await wait_status(client.view, run.run_id, "complete")
        assert tools.executed == [("get_weather", {"city": "Paris"})]
        last = server.request_bodies()[-1]
        assert outputs_of(last) == {
            paris[1]["call_id"]: json.dumps({"city": "Paris", "conditions": "showers"}),
            lyon[1]["call_id"]: "not Lyon",
        }
        assert len(server.requests) == 2
        await client.close()


def handoff_script(body: dict[str, Any]) -> list[Any]:
    if body.get("instructions") == "You route questions.":
        return [ScriptedText("Passing you to the weather desk."), ScriptedFunctionCall("transfer_to_weather", {})]
    if not calls_of(body, "get_weather"):
        return [ScriptedReasoning(["Weather desk here."]), ScriptedFunctionCall("get_weather", {"city": "Oslo"})]
    return [ScriptedText("Weather desk: " + outputs_of(body)[calls_of(body, "get_weather")[0]["call_id"]])]


async def test_handoff_is_one_conversation_and_the_resume_continues_with_the_new_agent() -> None:
    tools = Tools()
    async with scripted_model(handoff_script) as (server, oai):
        weather = weather_agent(oai, tools)
        triage = Agent(name="triage", instructions="You route questions.", handoffs=[weather],
                       model=OpenAIResponsesModel("scripted", oai), model_settings=SETTINGS)
        hub, client, _ = await open_session()
        sent = await ask(client, "Weather in Oslo?")
        run, outcome = await wake(hub, sent.invocation.to_json(), triage)
        assert outcome == "suspended"
        await wait_status(client.view, run.run_id, "suspended")
        assert shapes(client.view.get_messages()) == [
            ("user", ["message"]),
            ("assistant", ["message", "function_call"]),
            ("assistant", ["function_call_output"]),
            ("assistant", ["reasoning", "function_call"]),
        ]
        handoff_output = client.view.get_messages()[2].message.items[0]
        assert json.loads(handoff_output["output"]) == {"assistant": "weather"}
        cmid, call = call_message(client, "get_weather")
        answered = await answer(client, run.run_id, (cmid, call, True, None))
        # the new wake-up starts from the triage agent and finds the weather agent on the channel
        _, outcome = await wake(hub, answered.invocation.to_json(), triage)
        assert outcome == "complete"
        await wait_status(client.view, run.run_id, "complete")
        assert tools.executed == [("get_weather", {"city": "Oslo"})]
        last = server.request_bodies()[-1]
        assert last["instructions"] == "You answer weather questions."
        text = client.view.get_messages()[-1].message.items[0]["content"][0]["text"]
        assert text.startswith("Weather desk: ")
        runs = client.view.runs()
        assert len(runs) == 1 and runs[0].status == "complete"
        assert {client.view.run_of(m.codec_message_id).run_id for m in client.view.get_messages()} == {run.run_id}
        await client.close()


async def test_cancel_from_the_client_cancels_the_sdk_run_and_closes_the_stream() -> None:
    tools = Tools()

    def long_answer(body: dict[str, Any]) -> list[Any]:
        return [ScriptedText("word " * 3000), ScriptedFunctionCall("get_time", {"city": "Paris"})]

    async with scripted_model(long_answer, delay=0.005) as (server, oai):
        agent = weather_agent(oai, tools)
        hub, client, _ = await open_session()
        sent = await ask(client, "Talk for a long time")
        task = asyncio.ensure_future(wake(hub, sent.invocation.to_json(), agent))

        def streaming() -> bool:
            messages = client.view.get_messages()
            return len(messages) > 1 and "word word" in json.dumps(messages[1].message.items)

        await client.view.wait_for(streaming, 20)
        await client.cancel(sent.run_id)
        run, outcome = await asyncio.wait_for(task, 20)
        assert outcome == "cancelled"
        await wait_status(client.view, run.run_id, "cancelled")
        info = client.view.run(run.run_id)
        assert info.steps[-1].status == "cancelled"
        text = client.view.get_messages()[1].message.items[0]["content"][0]["text"]
        assert text.startswith("word word") and len(text) < len("word " * 3000)
        history = await hub.client("x").channel("chat").history(limit=200)
        streams = [m for m in history.items
                   if m.get("name") == "ai-output" and m["extras"]["ai"]["transport"].get("stream") == "true"]
        assert streams and all(m["extras"]["ai"]["transport"]["status"] == "cancelled" for m in streams)
        # the SDK run stopped: no tool ran, the model was asked once
        assert tools.executed == [] and len(server.requests) == 1
        await client.close()


async def test_the_weather_example_hands_off_and_resumes(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "openai_agents" / "weather.py"
    spec = importlib.util.spec_from_file_location("agents_weather_example", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert await example.demo(["--deny", "rather not"]) == 0
    out = capsys.readouterr().out
    assert "  [call] transfer_to_weather_desk({})" in out and '[output] {"assistant": "weather desk"}' in out
    assert "-- client: deny get_weather" in out and "  [output] rather not" in out
    assert "assistant> I did not check the live weather (rather not)." in out
    assert out.rstrip().endswith("-- run complete; 1 run, 3 model calls")


async def test_a_model_error_after_an_approval_ends_the_run_with_the_error() -> None:
    tools = Tools()

    def script(body: dict[str, Any]) -> Any:
        if not outputs_of(body):
            return [ScriptedFunctionCall("get_weather", {"city": "Paris"})]
        return ErrorReply.from_error("The model is overloaded.", type="server_error", status=400)

    async with scripted_model(script) as (_server, oai):
        agent = weather_agent(oai, tools)
        hub, client, _ = await open_session()
        sent = await ask(client, "Weather in Paris?")
        run, outcome = await wake(hub, sent.invocation.to_json(), agent)
        await wait_status(client.view, run.run_id, "suspended")
        cmid, call = call_message(client, "get_weather")
        answered = await answer(client, run.run_id, (cmid, call, True, None))
        _, outcome = await wake(hub, answered.invocation.to_json(), agent)
        assert outcome == "error"
        await wait_status(client.view, run.run_id, "error")
        info = client.view.run(run.run_id)
        assert info.error is not None and "The model is overloaded." in info.error.message
        # the approved call ran once and its output stays on the channel for the next attempt
        assert tools.executed == [("get_weather", {"city": "Paris"})]
        assert shapes(client.view.get_messages())[-1] == ("assistant", ["function_call_output"])
        await client.close()


CITIES = ["Paris", "Lyon", "Oslo"]


def gated_calls_script(body: dict[str, Any]) -> list[Any]:
    n = int(body["input"][0]["content"][0]["text"].split()[1])
    if not outputs_of(body):
        return [ScriptedFunctionCall("get_weather", {"city": c}) for c in CITIES[:n]]
    return [ScriptedText("Done.")]


async def decisions_scenario(decisions: list[bool], waves: list[int]) -> None:
    """``len(decisions)`` gated calls in one turn, answered in ``waves`` (one wake-up per wave)."""
    tools = Tools()
    async with scripted_model(gated_calls_script) as (server, oai):
        agent = weather_agent(oai, tools)
        hub, client, _ = await open_session()
        sent = await ask(client, f"Check {len(decisions)} cities")
        run, outcome = await wake(hub, sent.invocation.to_json(), agent)
        assert outcome == "suspended"
        await wait_status(client.view, run.run_id, "suspended")
        calls = [call_message(client, "get_weather", c) for c in CITIES[: len(decisions)]]
        todo = list(zip(calls, decisions, range(len(decisions))))
        for i, size in enumerate(waves):
            if not todo:
                break
            wave, todo = todo[:size], todo[size:]
            if i == len(waves) - 1:
                wave, todo = wave + todo, []
            answered = await answer(
                client, run.run_id, *[(*c, ok, None if ok else f"no {n}") for c, ok, n in wave]
            )
            _, outcome = await wake(hub, answered.invocation.to_json(), agent)
            assert outcome == ("complete" if not todo else "suspended")
            if todo:  # a call still waits: nothing ran, the model was not asked again
                assert tools.executed == [] and len(server.requests) == 1
        await wait_status(client.view, run.run_id, "complete")
        approved = [CITIES[n] for ok, n in zip(decisions, range(len(decisions))) if ok]
        assert sorted(c["city"] for _, c in tools.executed) == sorted(approved)  # each exactly once
        assert len(server.requests) == 2
        last = outputs_of(server.request_bodies()[-1])
        assert len(last) == len(decisions)
        for ((_, call), ok, n) in zip(calls, decisions, range(len(decisions))):
            expected = json.dumps({"city": CITIES[n], "conditions": "showers"}) if ok else f"no {n}"
            assert last[call["call_id"]] == expected
        await client.close()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    decisions=st.lists(st.booleans(), min_size=1, max_size=3),
    waves=st.lists(st.integers(min_value=1, max_value=2), min_size=1, max_size=3),
)
def test_any_decisions_in_any_waves_run_each_approved_call_once(decisions: list[bool], waves: list[int]) -> None:
    asyncio.run(decisions_scenario(decisions, waves))


def two_rounds_script(body: dict[str, Any]) -> list[Any]:
    done = calls_of(body, "get_weather")
    if not done:
        return [ScriptedReasoning(["Paris first."]), ScriptedFunctionCall("get_weather", {"city": "Paris"})]
    if len(done) == 1:
        return [ScriptedReasoning(["Now Lyon."]), ScriptedFunctionCall("get_weather", {"city": "Lyon"})]
    return [ScriptedText("Both checked.")]


async def test_a_second_approval_round_in_the_same_run_replays_the_latest_turn() -> None:
    tools = Tools()
    async with scripted_model(two_rounds_script) as (server, oai):
        agent = weather_agent(oai, tools)
        hub, client, _ = await open_session()
        sent = await ask(client, "Paris, then Lyon")
        run, outcome = await wake(hub, sent.invocation.to_json(), agent)
        for city, expected in (("Paris", "suspended"), ("Lyon", "complete")):
            assert outcome == "suspended"
            await wait_status(client.view, run.run_id, "suspended")
            answered = await answer(client, run.run_id, (*call_message(client, "get_weather", city), True, None))
            _, outcome = await wake(hub, answered.invocation.to_json(), agent)
            assert outcome == expected
        await wait_status(client.view, run.run_id, "complete")
        assert tools.executed == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Lyon"})]
        assert len(server.requests) == 3 and len(client.view.runs()) == 1
        last = server.request_bodies()[-1]["input"]
        assert [i.get("type") for i in last] == [
            "message", "reasoning", "function_call", "function_call_output",
            "reasoning", "function_call", "function_call_output",
        ]
        await client.close()


async def test_two_workers_woken_by_the_same_approval_run_the_tool_once() -> None:
    tools = Tools()
    async with scripted_model(deny_script) as (server, oai):
        agent = weather_agent(oai, tools)
        hub, client, _ = await open_session()
        sent = await ask(client, "Weather in Paris?")
        run, _ = await wake(hub, sent.invocation.to_json(), agent)
        await wait_status(client.view, run.run_id, "suspended")
        answered = await answer(client, run.run_id, (*call_message(client, "get_weather"), True, None))
        body = answered.invocation.to_json()
        outcomes = await asyncio.gather(wake(hub, body, agent), wake(hub, body, agent))
        assert sorted(o for _, o in outcomes) == ["complete", "yielded"]
        await wait_status(client.view, run.run_id, "complete")
        assert tools.executed == [("get_weather", {"city": "Paris"})]
        assert len(server.requests) == 2  # the loser never asked the model
        assert shapes(client.view.get_messages())[1:] == [
            ("assistant", ["message", "function_call"]),
            ("assistant", ["function_call_output"]),
            ("assistant", ["message"]),
        ]
        await client.close()


@pytest.mark.parametrize("stray", ["stale-tab", "rogue-output"])
async def test_an_approval_of_a_call_the_run_never_made_does_not_end_it_error(stray: str) -> None:
    # the owner's own stale tab approves a call id the run never made, or approves a call a rogue
    # ai-output declared: the approved call runs once and the run completes (never 104090 / error)
    from test_session_approvals import forge_call

    tools = Tools()
    async with scripted_model(deny_script) as (_server, oai):
        agent = weather_agent(oai, tools)
        hub, client, _ = await open_session()
        sent = await ask(client, "Weather in Paris?")
        run, _ = await wake(hub, sent.invocation.to_json(), agent)
        await wait_status(client.view, run.run_id, "suspended")
        cmid, call = call_message(client, "get_weather")
        if stray == "rogue-output":
            await forge_call(hub.client("mallory").channel("chat"), run.run_id, "rogue-msg", "call_rogue")
            stray_answer = (cmid, call, True, None), ("rogue-msg", {"call_id": "call_rogue"}, True, None)
        else:
            stray_answer = (cmid, call, True, None), (cmid, {"call_id": "call_from_a_stale_tab"}, True, None)
        answered = await answer(client, run.run_id, *stray_answer)
        resumed, outcome = await wake(hub, answered.invocation.to_json(), agent)
        assert outcome == "complete" and resumed.status == "complete"
        await wait_status(client.view, run.run_id, "complete")
        assert tools.executed == [("get_weather", {"city": "Paris"})]
        await client.close()


async def test_dynamic_approval_in_one_turn_the_allowed_call_is_not_run_again_on_resume() -> None:
    executed: list[str] = []

    async def outside_paris(_ctx: Any, params: dict[str, Any], _call_id: str) -> bool:
        return bool(params.get("city") != "Paris")

    @function_tool(needs_approval=outside_paris)
    def get_weather(city: str) -> str:
        """Current weather; only Paris needs no approval."""
        executed.append(city)
        return f"showers in {city}"

    async with scripted_model(two_calls_script) as (server, oai):
        agent = Agent(name="weather", instructions="You answer weather questions.", tools=[get_weather],
                      model=OpenAIResponsesModel("scripted", oai), model_settings=SETTINGS)
        hub, client, _ = await open_session()
        sent = await ask(client, "Weather in Paris and Lyon?")
        run, outcome = await wake(hub, sent.invocation.to_json(), agent)
        assert outcome == "suspended" and executed == ["Paris"]
        await wait_status(client.view, run.run_id, "suspended")
        lyon = call_message(client, "get_weather", "Lyon")
        states = client.view.get_messages()[1].message.tool_call_states
        assert list(states) == [lyon[1]["call_id"]] and states[lyon[1]["call_id"]]["approval"] == "pending"
        assert shapes(client.view.get_messages())[1:] == [
            ("assistant", ["function_call", "function_call"]),
            ("assistant", ["function_call_output"]),
        ]
        answered = await answer(client, run.run_id, (*lyon, True, None))
        _, outcome = await wake(hub, answered.invocation.to_json(), agent)
        assert outcome == "complete"
        # the replayed turn's allowed call answered from the channel: each call ran once
        assert executed == ["Paris", "Lyon"]
        last = outputs_of(server.request_bodies()[-1])
        assert sorted(last.values()) == ["showers in Lyon", "showers in Paris"]
        await client.close()
