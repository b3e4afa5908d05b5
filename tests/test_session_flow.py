"""End-to-end session flows on the in-process channel: real codec, real channel, scripted model.

A user asks → the agent streams a turn (reasoning, text, a gated ``get_weather`` call) and asks for
approval on the same pipe, then suspends → the client answers (approve / deny with a reason /
client-executed result) → a new invocation resumes the run: it runs what is owed, calls the model
again and completes → the client's view shows the whole conversation, and the agent's model input
is what the Responses API accepts.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from support_sessions import (
    C,
    Worker,
    approval,
    approve_call,
    as_dicts,
    assistant_with_call,
    open_session,
    shapes,
    text_delta,
    text_opening,
    user_message,
    wait_status,
)

from ai_transport.readers.calls import to_responses_input, unanswered_calls
from ai_transport.readers.preflight import preflight
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

pytestmark = pytest.mark.asyncio


def check_preflight(items: list[dict]) -> None:
    """to_responses_input of the final view is a replay input the Responses API accepts."""
    assert preflight(items) == []


async def first_turn(
    client: ClientSession, agent: AgentSession, worker: Worker, text: str = "Weather in Paris?"
):
    sent = await client.view.send(user_message(text))
    run = await worker.handle(agent, sent.invocation.to_json())
    assert run.status == "suspended"
    await wait_status(client.view, run.run_id, "suspended")
    assert sent.run_id == run.run_id
    return sent, run


async def test_approve_flow_resumes_runs_tool_and_completes() -> None:
    _, client, agent = await open_session()
    worker = Worker()
    _sent, run = await first_turn(client, agent, worker)

    # the suspended view: user prompt, then one assistant message holding the gated call (pending)
    msgs = client.view.get_messages()
    assert shapes(msgs) == [("user", ["message"]), ("assistant", ["reasoning", "message", "function_call"])]
    cmid, call = assistant_with_call(msgs)
    states = msgs[1].message.tool_call_states
    assert states[call["call_id"]]["approval"] == "pending"
    assert states[call["call_id"]]["arguments"] == call["arguments"]
    assert worker.executed == []
    # while suspended the call has no output: not yet a valid model input (the preflight says why)
    assert [p.kind for p in preflight(to_responses_input([m.message for m in msgs]))]

    answer = await client.view.send(approval(cmid, call), run_id=run.run_id)
    resumed = await worker.handle(agent, answer.invocation.to_json())
    assert resumed.run_id == run.run_id and resumed.continuation
    await wait_status(client.view, run.run_id, "complete")

    assert worker.executed == [("get_weather", call["arguments"])]
    final = client.view.get_messages()
    assert shapes(final) == [
        ("user", ["message"]),
        ("assistant", ["reasoning", "message", "function_call"]),
        ("assistant", ["function_call_output"]),
        ("assistant", ["reasoning", "message"]),
    ]
    assert final[1].message.tool_call_states[call["call_id"]]["approval"] == "approved"
    weather = json.loads(final[2].message.items[0]["output"])
    assert weather["city"] == "Paris"
    answer_text = final[3].message.items[1]["content"][0]["text"]
    assert "Paris" in answer_text and str(weather["temperature"]) in answer_text

    # agent and client agree; the model input pairs every call with its output
    assert as_dicts(resumed.view.get_messages()) == as_dicts(final)
    items = to_responses_input([m.message for m in final])
    assert unanswered_calls([m.message for m in final]) == []
    assert [i["type"] for i in items] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
        "reasoning",
        "message",
    ]
    check_preflight(items)

    info = client.view.run(run.run_id)
    assert info.status == "complete" and info.client_id == "alice"
    assert [s.status for s in info.steps] == ["complete", "complete", "complete"]
    await client.close()
    await agent.end()


async def test_deny_with_reason_answers_without_running_the_tool() -> None:
    _, client, agent = await open_session()
    worker = Worker()
    _, run = await first_turn(client, agent, worker)
    answer, call = await approve_call(client.view, run.run_id, False, reason="not now")
    await worker.handle(agent, answer.invocation.to_json())
    await wait_status(client.view, run.run_id, "complete")
    assert worker.executed == []
    final = client.view.get_messages()
    assert shapes(final) == [
        ("user", ["message"]),
        ("assistant", ["reasoning", "message", "function_call", "function_call_output"]),
        ("assistant", ["reasoning", "message"]),
    ]
    state = final[1].message.tool_call_states[call["call_id"]]
    assert state["approval"] == "denied" and state["reason"] == "not now"
    assert final[1].message.items[3] == {
        "type": "function_call_output",
        "call_id": call["call_id"],
        "output": "not now",
    }
    assert "not now" in final[2].message.items[1]["content"][0]["text"]
    check_preflight(to_responses_input([m.message for m in final]))
    await client.close()
    await agent.end()


async def test_client_executed_tool_result() -> None:
    _, client, agent = await open_session()
    worker = Worker(gated=(), client_tools=("get_weather",))
    _, run = await first_turn(client, agent, worker)
    msgs = client.view.get_messages()
    # no approval request: the call simply waits for the client's result
    assert msgs[1].message.tool_call_states == {}
    cmid, call = assistant_with_call(msgs)
    output = json.dumps(
        {
            "city": "Paris",
            "temperature": 21,
            "unit": "celsius",
            "conditions": "sunny",
            "humidity": 40,
            "rain_expected": False,
        }
    )
    answer = await client.view.send(
        C.create_tool_result(cmid, {"call_id": call["call_id"], "output": output}), run_id=run.run_id
    )
    # wire-only: nothing folded locally before the echo
    await worker.handle(agent, answer.invocation.to_json())
    await wait_status(client.view, run.run_id, "complete")
    assert worker.executed == []
    final = client.view.get_messages()
    assert shapes(final) == [
        ("user", ["message"]),
        ("assistant", ["reasoning", "message", "function_call", "function_call_output"]),
        ("assistant", ["reasoning", "message"]),
    ]
    assert final[1].message.tool_call_states[call["call_id"]] == {"result": "ok"}
    assert "21°C" in final[2].message.items[1]["content"][0]["text"]
    check_preflight(to_responses_input([m.message for m in final]))
    await client.close()
    await agent.end()


async def test_agent_restart_between_suspend_and_resume_rebuilds_from_history() -> None:
    hub, client, agent = await open_session()
    worker = Worker()
    _, run = await first_turn(client, agent, worker)
    await agent.close()  # the worker process goes away

    answer, call = await approve_call(client.view, run.run_id)
    fresh = AgentSession(hub.client("agent").channel("chat"))  # a new process: empty tree
    await fresh.connect()
    resumed = await worker.handle(fresh, answer.invocation.to_json())
    assert resumed.run_id == run.run_id
    await wait_status(client.view, run.run_id, "complete")
    assert worker.executed == [("get_weather", call["arguments"])]
    assert len(client.view.get_messages()) == 4
    assert as_dicts(resumed.view.get_messages()) == as_dicts(client.view.get_messages())
    await client.close()
    await fresh.end()


async def test_client_joining_later_sees_the_same_conversation() -> None:
    hub, client, agent = await open_session()
    worker = Worker()
    _, run = await first_turn(client, agent, worker)
    answer, _call = await approve_call(client.view, run.run_id)
    await worker.handle(agent, answer.invocation.to_json())
    await wait_status(client.view, run.run_id, "complete")

    late = ClientSession(hub.client("bob").channel("chat"))
    await late.connect()
    assert late.view.get_messages() == [] and late.view.has_older()
    revealed = await late.view.load_older(2)
    assert len(revealed) == 2  # exactly the newest two, oldest first
    assert as_dicts(revealed) == as_dicts(client.view.get_messages()[-2:])
    await late.view.load_all()
    assert as_dicts(late.view.get_messages()) == as_dicts(client.view.get_messages())
    assert [r.status for r in late.view.runs()] == ["complete"]
    await late.close()
    await client.close()
    await agent.end()


async def test_client_joins_mid_stream_and_converges() -> None:
    hub, client, agent = await open_session()
    gate = asyncio.Event()
    joined = asyncio.Event()

    async def slow_model(items):
        from support_sessions import model_stream

        n = 0
        async for event in model_stream(items):
            n += 1
            if n == 8:  # mid-way through the reasoning summary
                gate.set()
                await joined.wait()
            yield event

    worker = Worker(model=slow_model)
    sent = await client.view.send(user_message("Weather in Oslo?"))
    task = asyncio.ensure_future(worker.handle(agent, sent.invocation.to_json()))
    await gate.wait()
    late = ClientSession(hub.client("bob").channel("chat"))
    await late.connect()
    await late.view.load_all()
    live_only = ClientSession(hub.client("dave").channel("chat"))  # joins, never loads history
    await live_only.connect()
    joined.set()
    run = await task
    await wait_status(late.view, run.run_id, "suspended")
    await wait_status(client.view, run.run_id, "suspended")
    assert as_dicts(late.view.get_messages()) == as_dicts(client.view.get_messages())
    assert shapes(late.view.get_messages())[1] == ("assistant", ["reasoning", "message", "function_call"])
    # without history it still renders the in-flight run (0.8.0 would hide it: the prompt is unknown)
    await wait_status(live_only.view, run.run_id, "suspended")
    assert as_dicts(live_only.view.get_messages()) == as_dicts(client.view.get_messages())[1:]
    await live_only.close()
    await late.close()
    await client.close()
    await agent.end()


async def test_cancel_stops_the_pipe_and_ends_the_run_cancelled() -> None:
    _hub, client, agent = await open_session()
    started = asyncio.Event()

    async def endless(items):
        i = 0
        for event in text_opening():
            yield event
        while True:
            i += 1
            if i == 3:
                started.set()
            yield text_delta("word ")
            await asyncio.sleep(0.001)

    worker = Worker(model=endless)
    sent = await client.view.send(user_message("Talk forever"))
    task = asyncio.ensure_future(worker.handle(agent, sent.invocation.to_json()))
    await started.wait()
    await sent.started
    await client.cancel(sent.run_id)
    run = await asyncio.wait_for(task, 10)
    assert worker.results[-1].reason == "cancelled"
    await wait_status(client.view, run.run_id, "cancelled")
    # the open text stream was closed as cancelled: the client kept what was streamed
    text = client.view.get_messages()[1].message.items[0]["content"][0]["text"]
    assert text.startswith("word word")
    info = client.view.run(run.run_id)
    assert info.steps[-1].status == "cancelled"
    await client.close()
    await agent.end()


async def test_a_source_that_never_suspends_is_still_cancelled_within_a_burst() -> None:
    """The pipe yields to the loop every YIELD_AFTER_EVENTS events, so a cancel (and the agent's
    own echo) gets through even when the model source never awaits anything."""
    from ai_transport.sessions.pipe_loop import YIELD_AFTER_EVENTS

    _hub, client, agent = await open_session()
    produced = 0
    cancel_sent_at: list[int] = []

    async def endless(items):
        nonlocal produced
        for event in text_opening():
            yield event
        while True:  # never awaits: an in-memory source, or one network chunk holding many events
            produced += 1
            yield text_delta("word ")

    worker = Worker(model=endless)
    sent = await client.view.send(user_message("Talk forever, fast"))
    task = asyncio.ensure_future(worker.handle(agent, sent.invocation.to_json()))
    await sent.started
    while produced < 3 * YIELD_AFTER_EVENTS:
        await asyncio.sleep(0)
    cancel_sent_at.append(produced)
    await client.cancel(sent.run_id)
    run = await asyncio.wait_for(task, 10)
    assert worker.results[-1].reason == "cancelled"
    # the cancel travels client -> channel -> agent: a few bursts, not the whole (endless) stream
    assert produced - cancel_sent_at[0] <= 4 * YIELD_AFTER_EVENTS
    await wait_status(client.view, run.run_id, "cancelled")
    text = client.view.get_messages()[1].message.items[0]["content"][0]["text"]
    assert text == "word " * (len(text) // len("word "))
    await client.close()
    await agent.end()


async def test_pipe_error_ends_run_with_error_and_cancels_open_streams() -> None:
    hub, client, agent = await open_session()

    async def broken(items):
        for event in text_opening():
            yield event
        yield text_delta("partial")
        raise RuntimeError("upstream reset")

    worker = Worker(model=broken)
    sent = await client.view.send(user_message("hi"))
    run = await worker.handle(agent, sent.invocation.to_json())
    assert worker.results[-1].reason == "error"
    assert "upstream reset" in str(worker.results[-1].error)
    await wait_status(client.view, run.run_id, "error")
    info = client.view.run(run.run_id)
    assert info.error.code == 104008 and "upstream reset" in info.error.message
    # §15.3 improved: the text stream got a terminal status (cancelled), so readers are not left waiting
    history = await hub.client("x").channel("chat").history(limit=100)
    streams = [
        m
        for m in history.items
        if m.get("name") == "ai-output" and m["extras"]["ai"]["transport"].get("stream") == "true"
    ]
    assert streams and all(m["extras"]["ai"]["transport"]["status"] == "cancelled" for m in streams)
    assert client.view.get_messages()[1].message.items[0]["content"][0]["text"] == "partial"
    await client.close()
    await agent.end()
