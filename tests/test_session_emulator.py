
"""Sessions over real Ably SDKs on the local emulator.

* Python agent + Python client through :class:`~ai_transport.channels.ably_channel.AblyChannel`
  (ably-python 3.1.4): the approval flow, and a transport drop mid-stream that the client survives.
* Interop with the reference implementation in node (``@ably/ai-transport@0.8.0`` + ably-js):
  a JS client (``createClientSession``) with our Python agent, and a JS agent
  (``createAgentSession``) with our Python client. Both sides must render the same messages.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import pytest
from support_emulator import emulator_thread, unique_channel  # noqa: F401
from support_sessions import (
    C,
    Worker,
    approval,
    approve_call,
    as_dicts,
    assistant_with_call,
    failed_run,
    shapes,
    text_delta,
    text_opening,
    user_message,
    wait_status,
)

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.cli.scenario import run_tool, scripted_turn
from ai_transport.emulator.client import client_options, connect_info
from ai_transport.errors import AITransportError
from ai_transport.readers.calls import to_responses_input
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]


async def open_channel(emu: Any, name: str, client_id: str) -> AblyChannel:
    return await asyncio.wait_for(AblyChannel.connect(name, **client_options(emu, client_id=client_id)), 15)


async def open_sessions(emu: Any, name: str) -> tuple[AblyChannel, AblyChannel, ClientSession, AgentSession]:
    """Channels and connected sessions of client ``alice`` and agent ``agent`` on ``name``."""
    cch = await open_channel(emu, name, "alice")
    ach = await open_channel(emu, name, "agent")
    client = ClientSession(cch)
    await client.connect()
    agent = AgentSession(ach)
    await agent.connect()
    return cch, ach, client, agent


async def close_sessions(client: ClientSession, agent: AgentSession, *channels: AblyChannel | None) -> None:
    """Close the client, end the agent, close the channels (None: never opened)."""
    await client.close()
    await agent.end()
    for ch in channels:
        if ch is not None:
            await ch.close()


def paused_model(pause_at: int, paused: asyncio.Event, resume: asyncio.Event, delay: float | None = None):
    """The scripted model that, before its event ``pause_at``, sets ``paused`` and waits for
    ``resume`` (``delay``: a sleep after each event)."""

    async def model(items):
        for i, event in enumerate(scripted_turn({"input": items})):
            if i == pause_at:
                paused.set()
                await resume.wait()
            yield event
            if delay is not None:
                await asyncio.sleep(delay)

    return model


def strip_ids(messages: list[dict]) -> list[dict]:
    """Messages without their codec-message-ids (each side mints its own for optimistic keys)."""
    return [m["message"] for m in messages]


async def test_python_agent_and_client_over_ably_sdk(emulator_thread) -> None:
    name = unique_channel("sess")
    cch, ach, client, agent = await open_sessions(emulator_thread, name)
    worker = Worker()
    try:
        sent = await client.view.send(user_message("Weather in Paris?"))
        run = await worker.handle(agent, sent.invocation.to_json())
        await wait_status(client.view, run.run_id, "suspended")
        answer, call = await approve_call(client.view, run.run_id)
        # the resume lands on a fresh worker process: it rebuilds the run from history (REST, until_attach)
        await agent.close()
        await ach.close()
        ach = await open_channel(emulator_thread, name, "agent")
        agent = AgentSession(ach)
        await agent.connect()
        resumed = await worker.handle(agent, answer.invocation.to_json())
        await wait_status(client.view, run.run_id, "complete")
        assert worker.executed == [("get_weather", call["arguments"])]
        assert as_dicts(resumed.view.get_messages()) == as_dicts(client.view.get_messages())
        assert shapes(client.view.get_messages()) == [
            ("user", ["message"]),
            ("assistant", ["reasoning", "message", "function_call"]),
            ("assistant", ["function_call_output"]),
            ("assistant", ["reasoning", "message"]),
        ]
    finally:
        await close_sessions(client, agent, cch, ach)


@pytest.mark.parametrize("forget", [False, True], ids=["resumed", "connection-state-lost"])
async def test_connection_drop_mid_stream_client_converges(emulator_thread, forget: bool) -> None:
    """Every transport is cut mid-stream. Resumed: the SDKs resume their connections. State lost:
    the resume fails (new connection id) and the channels re-attach from their last channelSerial."""
    name = unique_channel("drop")
    cch, ach, client, agent = await open_sessions(emulator_thread, name)
    halfway = asyncio.Event()
    resume = asyncio.Event()

    worker = Worker(model=paused_model(10, halfway, resume))
    try:
        sent = await client.view.send(user_message("Weather in Lisbon?"))
        task = asyncio.ensure_future(worker.handle(agent, sent.invocation.to_json()))
        await halfway.wait()
        # drop every transport (both SDK connections reconnect and resume)
        drop = functools.partial(emulator_thread.emulator.drop_transports, forget=forget)
        dropped = await asyncio.to_thread(emulator_thread.call, drop)
        assert dropped >= 2
        await asyncio.sleep(0.5)
        resume.set()
        run = await asyncio.wait_for(task, 30)
        await wait_status(client.view, run.run_id, "suspended", timeout=20)
        # converged: the client's view equals a fresh reader's view of the channel history
        fresh_ch = await open_channel(emulator_thread, name, "carol")
        fresh = ClientSession(fresh_ch)
        await fresh.connect()
        await fresh.view.load_all()

        async def converged() -> bool:
            return as_dicts(client.view.get_messages()) == as_dicts(fresh.view.get_messages())

        for _ in range(100):
            if await converged():
                break
            await asyncio.sleep(0.1)
        assert as_dicts(client.view.get_messages()) == as_dicts(fresh.view.get_messages())
        assert shapes(client.view.get_messages())[1] == (
            "assistant",
            ["reasoning", "message", "function_call"],
        )
        await fresh.close()
        await fresh_ch.close()
    finally:
        await close_sessions(client, agent, cch, ach)


async def test_clients_join_mid_stream_and_converge(emulator_thread, node) -> None:
    """A Python client (ably-python) and a JS client (ably-js + 0.8.0) attach while the agent is in
    the middle of streaming: each sees the in-flight stream's aggregate first, then its appends,
    and ends with the same conversation as the client that was there from the start."""
    name = unique_channel("midjoin")
    cch, ach, client, agent = await open_sessions(emulator_thread, name)
    halfway = asyncio.Event()
    resume = asyncio.Event()

    worker = Worker(model=paused_model(12, halfway, resume, delay=0.002))  # pauses inside the text stream
    jsc = None
    late_ch = None
    try:
        sent = await client.view.send(user_message("Weather in Berlin?"))
        task = asyncio.ensure_future(worker.handle(agent, sent.invocation.to_json()))
        await halfway.wait()
        late_ch = await open_channel(emulator_thread, name, "bob")
        late = ClientSession(late_ch)
        await late.connect()
        await late.view.load_all()
        jsc = await js(
            node, "clientOpen", options=connect_info(emulator_thread, client_id="carol"), channel=name
        )
        await js(
            node, "clientLoadAll", id=jsc["id"]
        )  # as an app does on open (0.8.0 hides a run whose prompt it never saw)
        resume.set()
        run = await asyncio.wait_for(task, 30)
        await wait_status(client.view, run.run_id, "suspended")
        await wait_status(late.view, run.run_id, "suspended")
        await js(node, "clientWait", id=jsc["id"], runId=run.run_id, status="suspended")
        expected = as_dicts(client.view.get_messages())
        assert shapes(client.view.get_messages())[1] == (
            "assistant",
            ["reasoning", "message", "function_call"],
        )
        assert as_dicts(late.view.get_messages()) == expected
        js_view = await js(node, "clientMessages", id=jsc["id"])
        assert js_view["messages"] == expected
        await late.close()
    finally:
        if jsc is not None:
            await js(node, "clientClose", id=jsc["id"])
        await close_sessions(client, agent, cch, ach, late_ch)


# ---------------------------------------------------------------------------------------------
# Interop with @ably/ai-transport 0.8.0 in node


async def js(node: Any, op: str, **args: Any) -> Any:
    return await asyncio.to_thread(node.call, "session", op, **args)


@pytest.mark.parametrize("decision", ["approve", "deny", "client-result"])
async def test_js_client_with_python_agent(emulator_thread, node, decision: str) -> None:
    await flow_js_client_python_agent(emulator_thread, node, decision)


async def flow_js_client_python_agent(emulator_thread: Any, node: Any, decision: str = "approve") -> str:
    name = unique_channel("interop-jsc")
    ach = await open_channel(emulator_thread, name, "agent")
    agent = AgentSession(ach)
    await agent.connect()
    pch = await open_channel(emulator_thread, name, "observer")
    observer = ClientSession(pch)
    await observer.connect()
    worker = Worker() if decision != "client-result" else Worker(gated=(), client_tools=("get_weather",))
    jsc = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
    try:
        sent = await js(node, "clientSend", id=jsc["id"], text="Weather in Paris?")
        run = await worker.handle(agent, sent["invocation"])
        assert run.status == "suspended" and run.input_client_id == "alice"
        waited = await js(
            node,
            "clientWait",
            id=jsc["id"],
            inputCodecMessageId=sent["inputCodecMessageId"],
            status="suspended",
        )
        assert waited["runId"] == run.run_id

        js_view = await js(node, "clientMessages", id=jsc["id"])
        await wait_status(observer.view, run.run_id, "suspended")
        assert js_view["messages"] == as_dicts(run.view.get_messages())
        assert js_view["messages"] == as_dicts(observer.view.get_messages())
        call = js_view["messages"][1]["message"]["items"][2]
        states = js_view["messages"][1]["message"].get("toolCallStates", {})
        if decision == "client-result":
            assert states == {}
            answer = await js(
                node, "clientToolResult", id=jsc["id"], output=run_tool("get_weather", call["arguments"])
            )
        else:
            assert states[call["call_id"]]["approval"] == "pending"
            answer = await js(
                node, "clientApprove", id=jsc["id"], approved=decision == "approve", reason="not today"
            )
        assert answer["runId"] == run.run_id
        resumed = await worker.handle(agent, answer["invocation"])
        assert resumed.run_id == run.run_id
        await js(node, "clientWait", id=jsc["id"], runId=run.run_id, status="complete")
        await wait_status(observer.view, run.run_id, "complete")
        assert worker.executed == ([("get_weather", call["arguments"])] if decision == "approve" else [])

        final = await js(node, "clientMessages", id=jsc["id"])
        assert final["messages"] == as_dicts(observer.view.get_messages())
        assert final["messages"] == as_dicts(resumed.view.get_messages())
        shapes_js = [
            (m["message"]["role"], [i["type"] for i in m["message"]["items"]]) for m in final["messages"]
        ]
        if decision == "approve":
            assert shapes_js == [
                ("user", ["message"]),
                ("assistant", ["reasoning", "message", "function_call"]),
                ("assistant", ["function_call_output"]),
                ("assistant", ["reasoning", "message"]),
            ]
        else:  # the denial's rejection text / the client's result sits next to the call
            assert shapes_js == [
                ("user", ["message"]),
                ("assistant", ["reasoning", "message", "function_call", "function_call_output"]),
                ("assistant", ["reasoning", "message"]),
            ]
        if decision == "deny":
            assert final["messages"][1]["message"]["items"][3]["output"] == "not today"
        assert final["runs"][0]["status"] == "complete" and final["runs"][0]["clientId"] == "alice"
        steps = ["complete"] * (3 if decision == "approve" else 2)
        assert [s["status"] for s in final["runs"][0]["steps"]] == steps
    finally:
        await js(node, "clientClose", id=jsc["id"])
        await observer.close()
        await agent.end()
        await ach.close()
        await pch.close()
    return name


async def test_js_client_cancels_and_sees_errors_of_python_agent(emulator_thread, node) -> None:
    name = unique_channel("interop-cancel")
    ach = await open_channel(emulator_thread, name, "agent")
    agent = AgentSession(ach)
    await agent.connect()
    jsc = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
    started = asyncio.Event()

    async def endless(items):
        for event in text_opening():
            yield event
        for i in range(10_000):
            if i == 5:
                started.set()
            yield text_delta("la ")
            await asyncio.sleep(0.005)

    try:
        sent = await js(node, "clientSend", id=jsc["id"], text="Sing")
        run = await agent.create_run(sent["invocation"])
        await run.start()
        pipe = asyncio.ensure_future(run.pipe(endless(run.input_items())))
        await started.wait()
        await js(node, "clientCancel", id=jsc["id"], runId=run.run_id)
        result = await asyncio.wait_for(pipe, 10)
        assert result.reason == "cancelled" and run.abort_signal.is_set()
        await run.end("cancelled")
        await js(node, "clientWait", id=jsc["id"], runId=run.run_id, status="cancelled")
        view = await js(node, "clientMessages", id=jsc["id"])
        assert view["messages"][1]["message"]["items"][0]["content"][0]["text"].startswith("la la")
        assert view["runs"][0]["steps"][0]["status"] == "cancelled"

        # next turn fails: the JS client reads our error code and message off ai-run-end
        sent = await js(node, "clientSend", id=jsc["id"], text="Again")
        run2 = await agent.create_run(sent["invocation"])
        await run2.start()
        await run2.end("error", AITransportError("model unavailable", 50300))
        await js(node, "clientWait", id=jsc["id"], runId=run2.run_id, status="error")
        runs = (await js(node, "clientMessages", id=jsc["id"]))["runs"]
        err = runs[-1]["error"]
        assert (err["code"], err["statusCode"], err["message"]) == (50300, 503, "model unavailable")
    finally:
        await js(node, "clientClose", id=jsc["id"])
        await agent.end()
        await ach.close()


def _turns_for(question: str) -> tuple[list[dict], Any]:
    first = scripted_turn(
        {
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": question}]}
            ]
        }
    )
    call = next(
        e["item"]
        for e in first
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    )
    return first, call


@pytest.mark.parametrize("decision", ["approve", "deny", "client-result"])
async def test_js_agent_with_python_client(emulator_thread, node, decision: str) -> None:
    await flow_js_agent_python_client(emulator_thread, node, decision)


async def flow_js_agent_python_client(emulator_thread: Any, node: Any, decision: str) -> str:
    name = unique_channel("interop-jsa")
    cch = await open_channel(emulator_thread, name, "alice")
    client = ClientSession(cch)
    await client.connect()
    opts = connect_info(emulator_thread, client_id="js-agent")
    question = "Weather in Paris?"
    first, call = _turns_for(question)
    gated = ["get_weather"] if decision != "client-result" else []
    client_tools = ["get_weather"] if decision == "client-result" else []
    try:
        sent = await client.view.send(user_message(question))
        r1 = await js(
            node,
            "agentHandle",
            options=opts,
            channel=name,
            invocation=sent.invocation.to_json(),
            gated=gated,
            clientTools=client_tools,
            turns=[first],
        )
        assert r1["outcome"] == "suspended"
        assert r1["modelInputs"] == [to_responses_input([m.message for m in client.view.get_messages()][:1])]
        await wait_status(client.view, r1["runId"], "suspended")
        assert as_dicts(client.view.get_messages()) == r1["messages"]
        assert sent.run_id == r1["runId"]

        cmid, py_call = assistant_with_call(client.view.get_messages())
        assert py_call == call | {"status": "completed"} or py_call["call_id"] == call["call_id"]
        weather = run_tool("get_weather", call["arguments"])
        if decision == "approve":
            inp = approval(cmid, call)
        elif decision == "deny":
            inp = approval(cmid, call, False, reason="no")
        else:
            inp = C.create_tool_result(cmid, {"call_id": call["call_id"], "output": weather})
        answer = await client.view.send(inp, run_id=r1["runId"])

        expected_input = to_responses_input([m.message for m in client.view.get_messages()])
        # what the JS agent will send the model after answering: the call paired with its output
        if decision == "approve":
            expected_input = expected_input + [
                {"type": "function_call_output", "call_id": call["call_id"], "output": weather}
            ]
        second_input = [dict(i) for i in expected_input]
        if decision == "deny":
            second_input.append({"type": "function_call_output", "call_id": call["call_id"], "output": "no"})
        elif decision == "client-result":
            second_input.append(
                {"type": "function_call_output", "call_id": call["call_id"], "output": weather}
            )
        second = scripted_turn({"input": second_input})
        r2 = await js(
            node,
            "agentHandle",
            options=opts,
            channel=name,
            invocation=answer.invocation.to_json(),
            gated=gated,
            clientTools=client_tools,
            turns=[second],
            toolOutputs={"get_weather": weather},
        )
        assert r2["runId"] == r1["runId"] and r2["outcome"] == "complete"
        assert r2["executed"] == ([["get_weather", call["arguments"]]] if decision == "approve" else [])
        await wait_status(client.view, r1["runId"], "complete")
        final = client.view.get_messages()
        assert as_dicts(final) == r2["messages"]
        # the JS agent's model input is exactly our reader's view of the conversation so far
        assert r2["modelInputs"][0] == json.loads(
            json.dumps(to_responses_input([m.message for m in final][: len(final) - 1]))
        )
        roles = [m.message.role for m in final]
        assert roles[0] == "user" and roles[-1] == "assistant"
        info = client.view.run(r1["runId"])
        assert info.status == "complete" and info.client_id == "alice"
    finally:
        await client.close()
        await cch.close()
    return name


#: Transport / codec header values that do not depend on minted ids or model output.
_STABLE = {
    "role",
    "stream",
    "status",
    "discrete",
    "run-client-id",
    "run-reason",
    "step-reason",
    "input-client-id",
    "step-client-id",
    "kind",
    "partType",
    "approved",
    "name",
    "content_index",
    "output_index",
    "summary_index",
}


def _signature(message: dict, ids: dict[str, str]) -> tuple:
    """Name, publisher, has-data, and both header tiers with minted values replaced by ``#n`` — the
    index of the value's first appearance on the channel — so id *relations* (a run's ``parent`` is
    the prompt's ``codec-message-id``, a step-end names its step-start's serial…) are compared too."""
    ai = (message.get("extras") or {}).get("ai") or {}
    tiers = []
    for tier in ("transport", "codec"):
        headers = ai.get(tier)
        if headers is None:
            tiers.append(None)
            continue
        tiers.append(
            tuple((k, v if k in _STABLE else ids.setdefault(v, f"#{len(ids)}")) for k, v in headers.items())
        )
    return (
        message.get("name"),
        message.get("clientId"),
        "data" in message and message["data"] not in (None, ""),
        *tiers,
    )


async def _wire(emulator_thread: Any, name: str) -> list[tuple]:
    ch = await open_channel(emulator_thread, name, "reader")
    try:
        page = await ch.history(limit=1000)
        items = list(page.items)
        while page.has_next():
            page = await page.next()
            items.extend(page.items)
    finally:
        await ch.close()
    items.sort(key=lambda m: m["serial"])
    items = [m for m in items if m.get("name") != "ai-claim"]  # see the test's docstring
    ids: dict[str, str] = {}
    for m in items:  # serials are ids too (step-start-serial refers to one)
        ids.setdefault(m["serial"], f"#{len(ids)}")
    return [_signature(m, ids) for m in items]


async def test_wire_of_python_sessions_matches_the_js_sessions(emulator_thread, node) -> None:
    """Same conversation, sides swapped: (JS client, Python agent) vs (Python client, JS agent).

    Every message on the channel — lifecycle, outputs, inputs — has the same name, publisher, the
    same transport and codec header keys in the same order, and the same id-independent values.
    The Python agent's claims (``ai-claim``, exactly-once tool execution; no AI envelope, ignored by
    0.8.0) are its one deliberate addition and are left out.
    """
    ours = await _wire(emulator_thread, await flow_js_client_python_agent(emulator_thread, node))
    theirs = await _wire(emulator_thread, await flow_js_agent_python_client(emulator_thread, node, "approve"))
    rename = {"agent": "AGENT", "js-agent": "AGENT"}
    ours = [(s[0], rename.get(s[1], s[1]), *s[2:]) for s in ours]
    theirs = [(s[0], rename.get(s[1], s[1]), *s[2:]) for s in theirs]
    assert [s[0] for s in ours] == [s[0] for s in theirs]
    for a, b in zip(ours, theirs):
        assert a == b


async def test_regenerate_across_implementations(emulator_thread, node) -> None:
    """A regenerate published by one implementation is understood by the other's agent: the new run
    is a sibling reply to the same prompt, its model input stops before the regenerated answer, and
    both clients switch to the new answer."""
    # Python client, JS agent
    name = unique_channel("regen-jsa")
    cch = await open_channel(emulator_thread, name, "alice")
    client = ClientSession(cch)
    await client.connect()
    opts = connect_info(emulator_thread, client_id="js-agent")
    try:
        sent = await client.view.send(user_message("Name a colour"))
        first = await js(
            node,
            "agentHandle",
            options=opts,
            channel=name,
            invocation=sent.invocation.to_json(),
            turns=[build_response_events([ScriptedText("Blue.")], seed=1)],
        )
        await wait_status(client.view, first["runId"], "complete")
        regen = await client.view.regenerate(client.view.get_messages()[1].codec_message_id)
        second = await js(
            node,
            "agentHandle",
            options=opts,
            channel=name,
            invocation=regen.invocation.to_json(),
            turns=[build_response_events([ScriptedText("Green.")], seed=2)],
        )
        assert second["runId"] != first["runId"] and second["outcome"] == "complete"
        assert second["modelInputs"] == [first["modelInputs"][0]]  # the prompt only, not "Blue."
        await wait_status(client.view, second["runId"], "complete")
        assert [m.message.items[-1]["content"][0]["text"] for m in client.view.get_messages()] == [
            "Name a colour",
            "Green.",
        ]
        assert client.tree.get_run_node(second["runId"]).parent == sent.input_codec_message_id
    finally:
        await client.close()
        await cch.close()

    # JS client, Python agent
    name = unique_channel("regen-pya")
    ach = await open_channel(emulator_thread, name, "agent")
    agent = AgentSession(ach)
    await agent.connect()
    jsc = await js(node, "clientOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
    try:
        sent = await js(node, "clientSend", id=jsc["id"], text="Name a colour")
        run = await agent.create_run(sent["invocation"])
        await run.start()
        await run.pipe(build_response_events([ScriptedText("Blue.")], seed=1))
        await run.end("complete")
        await js(node, "clientWait", id=jsc["id"], runId=run.run_id, status="complete")
        regen = await js(node, "clientRegenerate", id=jsc["id"])
        run2 = await agent.create_run(regen["invocation"])
        await run2.start()
        await run2.view.load_all()
        assert run2.input_items() == [
            {"type": "message", "role": "user", "content": [{"text": "Name a colour", "type": "input_text"}]}
        ]
        assert run2.run_id != run.run_id
        await run2.pipe(build_response_events([ScriptedText("Green.")], seed=2))
        await run2.end("complete")
        await js(node, "clientWait", id=jsc["id"], runId=run2.run_id, status="complete")
        view = await js(node, "clientMessages", id=jsc["id"])
        texts = [m["message"]["items"][-1]["content"][0]["text"] for m in view["messages"]]
        assert texts == ["Name a colour", "Green."]
        assert [r["runId"] for r in view["runs"]] == [run2.run_id]
    finally:
        await js(node, "clientClose", id=jsc["id"])
        await agent.end()
        await ach.close()


async def test_python_client_cancels_a_js_agent(emulator_thread, node) -> None:
    name = unique_channel("cancel-jsa")
    cch = await open_channel(emulator_thread, name, "alice")
    client = ClientSession(cch)
    await client.connect()
    try:
        sent = await client.view.send(user_message("Tell me a long story"))
        story = " ".join(f"word{i}" for i in range(400))
        handle = asyncio.ensure_future(
            js(
                node,
                "agentHandle",
                options=connect_info(emulator_thread, client_id="js-agent"),
                channel=name,
                invocation=sent.invocation.to_json(),
                turns=[build_response_events([ScriptedText(story)], seed=5)],
                delayMs=5,
            )
        )
        run_id = await asyncio.wait_for(sent.started, 15)

        def streaming() -> bool:
            msgs = client.view.get_messages()
            return len(msgs) > 1 and "word3" in json.dumps(msgs[1].to_dict())

        await client.view.wait_for(streaming, 15)
        await client.cancel(run_id)
        result = await asyncio.wait_for(handle, 30)
        assert result["outcome"] == "cancelled" and result["runId"] == run_id
        await wait_status(client.view, run_id, "cancelled")
        text = client.view.get_messages()[1].message.items[-1]["content"][0]["text"]
        assert text.startswith("word0 word1") and len(text) < len(story)
    finally:
        await client.close()
        await cch.close()


async def test_history_paging_matches_the_js_view(emulator_thread, node) -> None:
    """A late Python client and a late JS client page the same history: load_older(n) reveals the
    same messages, in the same order, with the same has_older()."""
    name = unique_channel("paging")
    cch, ach, client, agent = await open_sessions(emulator_thread, name)
    late_ch = None
    jsc = None
    try:
        for i in range(4):
            sent = await client.view.send(user_message(f"question {i}"))
            run = await agent.create_run(sent.invocation.to_json())
            await run.start()
            await run.pipe(build_response_events([ScriptedText(f"answer {i}")], seed=i))
            await run.end("complete")
        await wait_status(client.view, run.run_id, "complete")
        late_ch = await open_channel(emulator_thread, name, "bob")
        late = ClientSession(late_ch, history_page_size=3)
        await late.connect()
        jsc = await js(
            node, "clientOpen", options=connect_info(emulator_thread, client_id="carol"), channel=name
        )
        for limit in (3, 1, 2, 10, 5):
            ours = await late.view.load_older(limit)
            theirs = await js(node, "clientLoadOlder", id=jsc["id"], limit=limit)
            assert as_dicts(ours) == theirs["revealed"], limit
            assert as_dicts(late.view.get_messages()) == theirs["messages"]
            assert late.view.has_older() == theirs["hasOlder"]
        assert as_dicts(late.view.get_messages()) == as_dicts(client.view.get_messages())
        await late.close()

        # load_until: page back to a message, show only what is newer than it
        def has_text(text: str):
            def match(m) -> bool:
                return any(
                    p.get("text") == text
                    for it in m.message.items
                    if it.get("type") == "message"
                    for p in it.get("content", [])
                )

            return match

        for text in ("answer 2", "question 1", "nowhere"):
            fresh = ClientSession(
                await open_channel(emulator_thread, name, f"dan-{text}"), history_page_size=2
            )
            await fresh.connect()
            other = await js(
                node, "clientOpen", options=connect_info(emulator_thread, client_id="erin"), channel=name
            )
            shown = await fresh.view.load_until(has_text(text))
            theirs = await js(node, "clientLoadUntil", id=other["id"], text=text)
            assert as_dicts(shown) == theirs["shown"], text
            assert as_dicts(fresh.view.get_messages()) == theirs["messages"]
            assert fresh.view.has_older() == theirs["hasOlder"]
            await js(node, "clientClose", id=other["id"])
            await fresh.close()
            await fresh.channel.close()
    finally:
        if jsc is not None:
            await js(node, "clientClose", id=jsc["id"])
        await close_sessions(client, agent, cch, ach, late_ch)


async def test_failed_run_is_left_out_of_the_model_input_like_js(emulator_thread, node) -> None:
    """After a run ends in error with a dangling call, the next run's model input leaves that run and
    its prompt out — for the JS agent exactly as for ours."""
    name = unique_channel("failed-run")
    cch, ach, client, agent = await open_sessions(emulator_thread, name)
    try:
        await failed_run(client, agent, seed=7)

        # the JS agent answers the next prompt
        second = await client.view.send(user_message("Never mind, tell me a joke"))
        r2 = await js(
            node,
            "agentHandle",
            options=connect_info(emulator_thread, client_id="agent"),
            channel=name,
            invocation=second.invocation.to_json(),
            turns=[build_response_events([ScriptedText("A joke.")], seed=8)],
        )
        expected = [
            {
                "type": "message",
                "role": "user",
                "content": [{"text": "Never mind, tell me a joke", "type": "input_text"}],
            }
        ]
        assert r2["modelInputs"] == [expected]
        # and so does ours, for a third prompt after a second failure
        await wait_status(client.view, r2["runId"], "complete")
        third = await client.view.send(user_message("Another one"))
        run3 = await agent.create_run(third.invocation.to_json())
        await run3.start()
        await run3.view.load_all()
        items = run3.input_items()
        assert [i.get("role") for i in items] == ["user", "assistant", "user"]
        assert "Rome" not in json.dumps(items) and "A joke." in json.dumps(items)
        await run3.end("complete")
    finally:
        await close_sessions(client, agent, cch, ach)
