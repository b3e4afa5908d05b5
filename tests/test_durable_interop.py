"""Durable runs against the reference implementation (``@ably/ai-transport@0.8.0`` in node) on the
emulator: retried steps (both directions) and adopted runs.

* A Python agent's step fails mid-stream and is retried under the same step id: a live JS client and
  a fresh JS client reading history show only the final attempt.
* A JS agent does the same (``createStep()`` after a failed step): a live Python client and a fresh
  Python client reading history show only the final attempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from support_emulator import emulator_thread, unique_channel  # noqa: F401
from support_sessions import as_dicts, open_text_stream, text_delta, text_opening, user_message, wait_status

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.emulator.client import client_options, connect_info
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(90)]


async def js(node: Any, op: str, handler: str = "session", **args: Any) -> Any:
    return await asyncio.to_thread(node.call, handler, op, **args)


async def open_channel(emu: Any, name: str, client_id: str) -> AblyChannel:
    return await asyncio.wait_for(AblyChannel.connect(name, **client_options(emu, client_id=client_id)), 15)


def partial_events() -> list[dict[str, Any]]:
    return [*text_opening("msg_partial"), text_delta("Once ", "msg_partial"), text_delta("upon ", "msg_partial")]


async def broken(events: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for event in events:
        await asyncio.sleep(0)
        yield event
    raise ConnectionError("model stream reset")


def texts_of(messages: list[dict[str, Any]]) -> list[str]:
    """The text of every ``message`` item, in order, of JS-shaped messages."""
    out = []
    for m in messages:
        for item in m["message"]["items"]:
            if item.get("type") == "message":
                out.append("".join(p.get("text", "") for p in item.get("content", [])))
    return out


async def test_python_retry_shows_once_in_js_clients(emulator_thread, node) -> None:
    name = unique_channel("durable-pyretry")
    ach = await open_channel(emulator_thread, name, "agent")
    agent = AgentSession(ach)
    await agent.connect()
    jsc = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
    fresh: dict[str, Any] | None = None
    try:
        sent = await js(node, "clientSend", id=jsc["id"], text="Tell me a story")
        run = await agent.create_run(sent["invocation"])
        await run.start()
        first = run.create_step()
        await first.start()
        assert (await first.pipe(broken(partial_events()))).reason == "error"
        await first.end()
        retry = run.create_step()
        assert retry.step_id == first.step_id
        await retry.start()
        await retry.pipe(build_response_events([ScriptedText("The end.")], seed=5))
        await retry.end()
        await run.end("complete")
        await js(node, "clientWait", id=jsc["id"], runId=run.run_id, status="complete")
        live = await js(node, "clientMessages", id=jsc["id"])
        assert texts_of(live["messages"]) == ["Tell me a story", "The end."]
        assert live["messages"] == as_dicts(run.view.get_messages())
        steps = live["runs"][0]["steps"]
        assert [(s["stepId"], s["status"], s["attemptCount"]) for s in steps] == [(first.step_id, "complete", 2)]
        fresh = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="bob"), channel=name)
        await js(node, "clientLoadAll", id=fresh["id"])
        history = await js(node, "clientMessages", id=fresh["id"])
        assert history["messages"] == live["messages"]
    finally:
        await js(node, "clientClose", id=jsc["id"])
        if fresh is not None:
            await js(node, "clientClose", id=fresh["id"])
        await agent.end()
        await ach.close()


async def test_js_retry_shows_once_in_python_clients(emulator_thread, node) -> None:
    name = unique_channel("durable-jsretry")
    cch = await open_channel(emulator_thread, name, "alice")
    client = ClientSession(cch)
    await client.connect()
    bch: AblyChannel | None = None
    try:
        sent = await client.view.send(user_message("Tell me a story"))
        result = await js(
            node,
            "agentRetry",
            handler="durable",
            options=connect_info(emulator_thread, client_id="agent"),
            channel=name,
            invocation=sent.invocation.to_json(),
            failEvents=partial_events(),
            finalEvents=build_response_events([ScriptedText("The end.")], seed=5),
        )
        assert result["reasons"] == ["error", "complete"]
        assert result["stepIds"][0] == result["stepIds"][1]
        await wait_status(client.view, result["runId"], "complete")
        live = as_dicts(client.view.get_messages())
        assert texts_of(live) == ["Tell me a story", "The end."]
        assert live == result["messages"]
        info = client.view.run(result["runId"])
        assert [(s.step_id, s.status, s.attempt_count) for s in info.steps] == [
            (result["stepIds"][0], "complete", 2)
        ]
        bch = await open_channel(emulator_thread, name, "bob")
        fresh = ClientSession(bch)
        await fresh.connect()
        await fresh.view.load_all()
        assert as_dicts(fresh.view.get_messages()) == live
        await fresh.close()
    finally:
        await client.close()
        await cch.close()
        if bch is not None:
            await bch.close()


async def test_adopted_run_published_by_python_is_accepted_by_js_clients(emulator_thread, node) -> None:
    name = unique_channel("durable-adopt")
    jsc = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
    ach = await open_channel(emulator_thread, name, "agent")
    bch = await open_channel(emulator_thread, name, "agent")
    try:
        sent = await js(node, "clientSend", id=jsc["id"], text="Tell me a story")
        first = AgentSession(ach)
        await first.connect()
        run = await first.create_run(sent["invocation"])
        await run.start()
        # streamed, never closed: this worker then dies
        step, _ = await open_text_stream(run, "", "", events=partial_events())
        await first.detach()
        second = AgentSession(bch)
        await second.connect()
        adopted = second.adopt_run(sent["invocation"], run.run_id, run.invocation_id)
        await adopted.load(timeout=10)
        retry = adopted.create_step()
        assert retry.step_id == step.step_id
        await retry.start()
        await retry.pipe(build_response_events([ScriptedText("The end.")], seed=5))
        await retry.end()
        await adopted.end("complete")
        await js(node, "clientWait", id=jsc["id"], runId=run.run_id, status="complete")
        view = await js(node, "clientMessages", id=jsc["id"])
        assert texts_of(view["messages"]) == ["Tell me a story", "The end."]
        assert "in_progress" not in str(view["messages"])
        assert view["runs"][0]["clientId"] == "alice"
        assert [(s["status"], s["attemptCount"]) for s in view["runs"][0]["steps"]] == [("complete", 2)]
        assert view["messages"] == as_dicts(adopted.view.get_messages())
        await second.end()
    finally:
        await js(node, "clientClose", id=jsc["id"])
        await ach.close()
        await bch.close()


async def test_claims_leave_a_js_clients_view_unchanged(emulator_thread, node) -> None:
    from support_sessions import Worker

    name = unique_channel("durable-claims")
    channels = [await open_channel(emulator_thread, name, "agent") for _ in range(2)]
    agents = [AgentSession(ch) for ch in channels]
    for a in agents:
        await a.connect()
    jsc = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
    fresh: dict[str, Any] | None = None
    try:
        sent = await js(node, "clientSend", id=jsc["id"], text="Weather in Paris?")
        run = await Worker().handle(agents[0], sent["invocation"])
        await js(node, "clientWait", id=jsc["id"], runId=run.run_id, status="suspended")
        answer = await js(node, "clientApprove", id=jsc["id"], approved=True)
        workers = [Worker(), Worker()]
        runs = await asyncio.gather(*(w.handle(a, answer["invocation"]) for w, a in zip(workers, agents)))
        assert sum(len(w.executed) for w in workers) == 1 and sorted(r.yielded for r in runs) == [False, True]
        winner = next(r for r in runs if not r.yielded)
        await js(node, "clientWait", id=jsc["id"], runId=run.run_id, status="complete")
        view = await js(node, "clientMessages", id=jsc["id"])
        assert view["messages"] == as_dicts(winner.view.get_messages())
        shapes_js = [(m["message"]["role"], [i["type"] for i in m["message"]["items"]]) for m in view["messages"]]
        assert shapes_js == [
            ("user", ["message"]),
            ("assistant", ["reasoning", "message", "function_call"]),
            ("assistant", ["function_call_output"]),
            ("assistant", ["reasoning", "message"]),
        ]
        history = await channels[0].history(limit=1000)
        assert sum(1 for m in history.items if m.get("name") == "ai-claim") >= 3  # run lease, two claims (+ releases, renewals): on the wire, ignored
        fresh = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="bob"), channel=name)
        await js(node, "clientLoadAll", id=fresh["id"])
        assert (await js(node, "clientMessages", id=fresh["id"]))["messages"] == view["messages"]
    finally:
        await js(node, "clientClose", id=jsc["id"])
        if fresh is not None:
            await js(node, "clientClose", id=fresh["id"])
        for a, ch in zip(agents, channels):
            await a.end()
            await ch.close()
