"""Parity features against the reference implementation (``@ably/ai-transport@0.8.0`` + ably-js in
node, ``tests/js/handlers/parity.mjs``) over the local emulator, in the directions users meet them:
a JS client with our Python agent, and our Python client with a JS agent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support_emulator import emulator_thread, unique_channel  # noqa: F401
from support_parity import gated_model, steer_loop, text_turn, texts
from support_sessions import as_dicts, eventually, user_message, wait_status

from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.emulator.client import client_options, connect_info
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession
from ai_transport.sessions.steer_client import SteerOutcome

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(90), pytest.mark.js]


async def open_channel(emu: Any, name: str, client_id: str) -> AblyChannel:
    return await asyncio.wait_for(AblyChannel.connect(name, **client_options(emu, client_id=client_id)), 15)


async def js(node: Any, op: str, **args: Any) -> Any:
    return await asyncio.to_thread(node.call, "parity", op, **args)


def js_texts(messages: list[dict]) -> list[str]:
    out = []
    for m in messages:
        msg = m["message"]
        if msg["role"] != "user":
            out.append("assistant")
            continue
        out.append(
            "".join(p.get("text", "") for it in msg["items"] if it["type"] == "message" for p in it["content"])
        )
    return out


# -- steering ------------------------------------------------------------------------------------


async def test_js_client_steers_a_running_python_agent(emulator_thread, node) -> None:
    """The JS client steers mid-stream; our agent's ``on_steer`` fires, its next ``has_input()`` pass
    answers the steer (the model input ends with it) and stamps ``steer-codec-message-ids``, so the
    JS ``SteerResult.outcome`` resolves ``consumed: true``."""
    name = unique_channel("steer-jsc")
    ach = await open_channel(emulator_thread, name, "agent")
    agent = AgentSession(ach)
    await agent.connect()
    jsc = await js(node, "pOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
    try:
        sent = await js(node, "pSend", id=jsc["id"], text="Write a poem")
        steered, streaming = asyncio.Event(), asyncio.Event()
        run = await agent.create_run(sent["invocation"], hooks={"on_steer": steered.set})
        await run.start()
        loop = asyncio.ensure_future(
            steer_loop(run, gated_model(steered, ["Roses are red", "Short: red."], 5, streaming))
        )
        await asyncio.wait_for(streaming.wait(), 15)
        steer = await js(
            node, "pSteer", id=jsc["id"], inputCodecMessageId=sent["inputCodecMessageId"], text="make it shorter"
        )
        inputs = await asyncio.wait_for(loop, 20)
        assert len(inputs) == 2
        assert inputs[1][-1]["content"][0]["text"] == "make it shorter"
        await run.end("complete")
        result = await js(node, "pSteerResult", id=jsc["id"], steerId=steer["steerId"])
        assert result["outcome"] == {"consumed": True, "runTerminalReason": "complete"}
        assert isinstance(result["published"]["serial"], str)
        await js(node, "pWait", id=jsc["id"], runId=run.run_id, status="complete")
        view = await js(node, "pView", id=jsc["id"])
        assert js_texts(view["messages"]) == ["Write a poem", "assistant", "make it shorter", "assistant"]
        assert view["messages"] == as_dicts(run.view.get_messages())
        # BaseRun.messages / status / error: this run's own turn, the same on both sides
        js_run = await js(node, "pRun", id=jsc["id"], inputCodecMessageId=sent["inputCodecMessageId"])
        assert js_run["messages"] == [m.to_dict() for m in run.messages]
        assert (js_run["status"], js_run["error"], run.status, run.error) == ("complete", None, "complete", None)
    finally:
        await js(node, "pClose", id=jsc["id"])
        await agent.end()
        await ach.close()


async def test_python_client_steers_a_js_agent(emulator_thread, node) -> None:
    """Our ``ClientRun.steer`` into a JS agent looping on ``hasInput()``: its ``onSteer`` fires once,
    its second pass answers the steer, and our outcome resolves consumed (from the JS agent's stamp)."""
    name = unique_channel("steer-jsa")
    pch = await open_channel(emulator_thread, name, "alice")
    client = ClientSession(pch)
    await client.connect()
    try:
        sent = await client.view.send(user_message("Write a poem"))
        agent = asyncio.ensure_future(
            js(
                node,
                "agentSteerLoop",
                options=connect_info(emulator_thread, client_id="agent"),
                channel=name,
                invocation=sent.invocation.to_json(),
                turns=[text_turn("Roses are red", 1), text_turn("Short: red.", 2)],
            )
        )
        await asyncio.wait_for(asyncio.shield(sent.started), 15)
        await eventually(lambda: len(client.view.get_messages()) >= 2, 15)  # the first answer streams
        result = sent.steer(user_message("make it shorter"))
        out = await asyncio.wait_for(agent, 30)
        assert await asyncio.wait_for(result.outcome, 10) == SteerOutcome(True, "complete")
        assert isinstance(result.published.result(), str)
        assert out["passes"] == 2 and out["steerHints"] == 1
        assert out["modelInputs"][1][-1]["content"][0]["text"] == "make it shorter"
        await wait_status(client.view, out["runId"], "complete")
        assert texts(client.view.get_messages()) == ["Write a poem", "assistant", "make it shorter", "assistant"]
        assert as_dicts(client.view.get_messages()) == out["messages"]
        # BaseRun.messages: this run's own turn, the same on both sides
        assert [m.to_dict() for m in sent.messages] == out["runMessages"]
        assert (sent.status, sent.error, out["status"]) == ("complete", None, "complete")
    finally:
        await client.close()
        await pch.close()


# -- branch selection, view events ---------------------------------------------------------------


def record_events(view: Any) -> list[dict]:
    events: list[dict] = []
    view.on("update", lambda: events.append({"event": "update"}))
    view.on("run", lambda e: events.append({"event": "run", "type": e.type, "runId": e.run_id}))
    return events


async def test_branches_and_view_events_match_a_js_client(emulator_thread, node) -> None:
    """A Python client (alice) talks to our agent; a JS client and a Python client watch. Both
    watchers fire the same ``update`` / ``run`` events, show the same branch handles (siblings are
    messages) for a regenerate of a message inside a run and for an edit, and select alike."""
    from support_sessions import Worker, approve_call

    name = unique_channel("branch-js")
    ach = await open_channel(emulator_thread, name, "agent")
    sch = await open_channel(emulator_thread, name, "alice")
    wch = await open_channel(emulator_thread, name, "watcher")
    agent, sender, watcher = AgentSession(ach), ClientSession(sch), ClientSession(wch)
    for s in (agent, sender, watcher):
        await s.connect()
    jsw = await js(node, "pOpen", options=connect_info(emulator_thread, client_id="jswatcher"), channel=name)
    py_events = record_events(watcher.view)
    worker = Worker()

    async def settled(run_id: str, status: str) -> None:
        # on the tree: a view fires nothing for a run on a branch it does not show (as 0.8.0)
        def folded() -> bool:
            info = watcher.tree.get_run_node(run_id)
            return info is not None and info.status == status

        await eventually(folded, 15)
        await js(node, "pWait", id=jsw["id"], runId=run_id, status=status)
        await eventually(lambda: (n := sender.tree.get_run_node(run_id)) is not None and n.status == status, 15)

    async def same_view() -> dict:
        view = await js(node, "pView", id=jsw["id"])
        assert view["messages"] == as_dicts(watcher.view.get_messages())
        return view

    async def same_handle(cmid: str, select: int | None = None) -> dict:
        handle = watcher.view.branch_selection(cmid)
        if select is not None:
            handle.select(select)
            handle = watcher.view.branch_selection(cmid)
        js_handle = await js(node, "pBranch", id=jsw["id"], codecMessageId=cmid, select=select)
        assert js_handle["siblings"] == [m.to_dict() for m in handle.siblings]
        assert (js_handle["index"], js_handle["hasSiblings"]) == (handle.index, handle.has_siblings)
        assert js_handle["messages"] == as_dicts(watcher.view.get_messages())
        return js_handle

    try:
        sent = await sender.view.send(user_message("Weather in Paris?"))
        run = await worker.handle(agent, sent.invocation.to_json())
        await settled(run.run_id, "suspended")
        approved, _call = await approve_call(sender.view, run.run_id)
        await worker.handle(agent, approved.invocation.to_json())
        await settled(run.run_id, "complete")
        await same_view()
        final = watcher.view.get_messages()[3].codec_message_id
        prompt = watcher.view.get_messages()[0].codec_message_id

        # regenerate the answer that follows the tool call (not the first message of its run)
        regen = await sender.view.regenerate(final)
        again = await agent.create_run(regen.invocation)
        await again.start()
        await again.pipe(text_turn("Paris: 24C and showers.", 9))
        await again.end("complete")
        await settled(again.run_id, "complete")
        await same_view()
        handle = await same_handle(final)
        assert handle["hasSiblings"] and len(handle["siblings"]) == 2 and handle["index"] == 1
        await same_handle(final, select=0)
        await same_handle(final, select=7)  # clamped

        # alice edits the prompt: both watchers showed Paris and stay there (pinned) ...
        edited = await sender.view.edit(prompt, user_message("Weather in Rome?"))
        rome = await agent.create_run(edited.invocation)
        await rome.start()
        await rome.pipe(text_turn("Rome: dry.", 10))
        await rome.end("complete")
        await settled(rome.run_id, "complete")
        assert texts(sender.view.get_messages()) == ["Weather in Rome?", "assistant"]
        view = await same_view()
        assert js_texts(view["messages"])[0] == "Weather in Paris?"
        # ... until they select it
        await same_handle(prompt, select=1)
        assert texts(watcher.view.get_messages()) == ["Weather in Rome?", "assistant"]
        await same_handle(prompt)

        # the same events, at the same moments (no update for a status change or a hidden branch)
        js_events = (await js(node, "pEvents", id=jsw["id"]))["events"]
        assert js_events == py_events
        assert {"event": "run", "type": "suspend", "runId": run.run_id} in py_events
    finally:
        await js(node, "pClose", id=jsw["id"])
        for s in (watcher, sender):
            await s.close()
        await agent.end()
        for ch in (ach, sch, wch):
            await ch.close()


# -- channel modes -------------------------------------------------------------------------------

_MODE_CASES: list[list[str] | None] = [
    None,
    [],
    ["OBJECT_SUBSCRIBE", "OBJECT_PUBLISH"],
    ["ANNOTATION_SUBSCRIBE"],
    ["PUBLISH"],
    ["ANNOTATION_SUBSCRIBE", "OBJECT_PUBLISH", "PRESENCE"],
]


async def test_channel_modes_resolve_and_attach_as_the_js_package(emulator_thread, node) -> None:
    """``channel_modes`` resolves to the modes 0.8.0's ``channelModes`` puts on the channel, and a
    Python and a JS session asking for the same extra mode attach with the same modes."""
    from ai_transport.channels.modes import resolve_channel_modes

    name = unique_channel("modes")
    opts = connect_info(emulator_thread, client_id="alice")
    js_cases = (await js(node, "pChannelModes", options=opts, channel=name, cases=_MODE_CASES))["cases"]
    assert [c["modes"] for c in js_cases] == [resolve_channel_modes(m) for m in _MODE_CASES]
    assert all(c["agent"].startswith("ai-transport-js/0.8.0") for c in js_cases)

    jsc = await js(node, "pAttachWithModes", options=opts, channel=name, channelModes=["ANNOTATION_SUBSCRIBE"])
    pch = await open_channel(emulator_thread, name, "bob")
    client = ClientSession(pch, channel_modes=["ANNOTATION_SUBSCRIBE"])
    try:
        await client.connect()
        agent_param = pch.raw.options["params"]["agent"]
        assert agent_param.startswith("ai-transport-python/") and "openai-responses/" in agent_param

        def attachments() -> dict[str, tuple[int, int]]:
            out = {}
            for conn in emulator_thread.emulator.connections.values():
                att = conn.attachments.get(name)
                if att is not None:
                    out[conn.id] = (att.requested, att.modes)
            return out

        seen = await asyncio.to_thread(emulator_thread.call, attachments)
        assert seen[jsc["connectionId"]] == seen[pch.connection_id]
        assert seen[pch.connection_id][0] & (1 << 22)  # ANNOTATION_SUBSCRIBE asked for, with the base modes
    finally:
        await js(node, "pClose", id=jsc["id"])
        await client.close()
        await pch.close()


async def test_python_client_branches_with_a_js_agent(emulator_thread, node) -> None:
    """Our client regenerates a message inside a run (after a tool call) and edits the prompt; a JS
    agent answers both; our client and a JS watcher show the same messages and handles."""
    from support_sessions import approve_call

    from ai_transport.cli.scenario import run_tool, scripted_turn
    from ai_transport.readers.calls import to_responses_input

    async def js_agent(invocation: dict, turns: list, **kw: Any) -> dict:
        return await asyncio.to_thread(
            node.call,
            "session",
            "agentHandle",
            options=connect_info(emulator_thread, client_id="js-agent"),
            channel=name,
            invocation=invocation,
            turns=turns,
            **kw,
        )

    name = unique_channel("branch-jsa")
    cch = await open_channel(emulator_thread, name, "alice")
    client = ClientSession(cch)
    await client.connect()
    jsw = await js(node, "pOpen", options=connect_info(emulator_thread, client_id="jswatcher"), channel=name)
    question = "Weather in Paris?"
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": question}]}
    first = scripted_turn({"input": [user]})
    try:
        sent = await client.view.send(user_message(question))
        r1 = await js_agent(sent.invocation.to_json(), [first], gated=["get_weather"])
        await wait_status(client.view, r1["runId"], "suspended")
        answer, call = await approve_call(client.view, r1["runId"])
        weather = run_tool("get_weather", call["arguments"])
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": weather}
        second = scripted_turn({"input": [*to_responses_input([m.message for m in client.view.get_messages()]), output]})
        await js_agent(answer.invocation.to_json(), [second], gated=["get_weather"], toolOutputs={"get_weather": weather})
        await wait_status(client.view, r1["runId"], "complete")
        assert len(client.view.get_messages()) == 4
        final = client.view.get_messages()[3].codec_message_id
        prompt = sent.input_codec_message_id

        regen = await client.view.regenerate(final)
        r3 = await js_agent(regen.invocation.to_json(), [text_turn("Paris: 24C, showers.", 9)])
        assert r3["outcome"] == "complete" and r3["runId"] != r1["runId"]
        await wait_status(client.view, r3["runId"], "complete")
        await js(node, "pWait", id=jsw["id"], runId=r3["runId"], status="complete")
        handle = client.view.branch_selection(final)
        assert handle.has_siblings and handle.index == 1 and len(handle.siblings) == 2
        js_handle = await js(node, "pBranch", id=jsw["id"], codecMessageId=final)
        assert js_handle["siblings"] == [m.to_dict() for m in handle.siblings] and js_handle["index"] == 1
        assert js_handle["messages"] == as_dicts(client.view.get_messages())
        assert as_dicts(client.view.get_messages())[:3] == js_handle["messages"][:3]

        edited = await client.view.edit(prompt, user_message("Weather in Rome?"))
        assert texts(client.view.get_messages()) == ["Weather in Rome?"]
        r4 = await js_agent(edited.invocation.to_json(), [text_turn("Rome: dry.", 10)])
        await wait_status(client.view, r4["runId"], "complete")
        await js(node, "pWait", id=jsw["id"], runId=r4["runId"], status="complete")
        assert texts(client.view.get_messages()) == ["Weather in Rome?", "assistant"]
        assert client.view.branch_selection(prompt).index == 1
        # the watcher showed Paris when the edit arrived: pinned there until it selects the edit
        pinned = await js(node, "pBranch", id=jsw["id"], codecMessageId=prompt)
        assert pinned["index"] == 0 and js_texts(pinned["messages"])[0] == question
        chosen = await js(node, "pBranch", id=jsw["id"], codecMessageId=prompt, select=1)
        assert chosen["messages"] == as_dicts(client.view.get_messages())
    finally:
        await js(node, "pClose", id=jsw["id"])
        await client.close()
        await cch.close()


# -- run hooks -----------------------------------------------------------------------------------


async def test_js_client_cancel_reaches_on_cancel_and_the_signal_hook_cancels(emulator_thread, node) -> None:
    """A JS client's ``ClientRun.cancel()`` (keyed by its input) reaches our ``on_cancel`` as a
    ``CancelRequest`` naming the run; an external ``signal`` cancels the next run the same way on the
    wire (the JS client sees the run and its step ``cancelled``)."""
    from support_sessions import text_delta, text_opening

    from ai_transport.sessions.hooks import CancelRequest

    name = unique_channel("hooks-jsc")
    ach = await open_channel(emulator_thread, name, "agent")
    agent = AgentSession(ach)
    await agent.connect()
    jsc = await js(node, "pOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
    started = asyncio.Event()

    async def endless():
        for event in text_opening():
            yield event
        while True:
            started.set()
            yield text_delta("la ")
            await asyncio.sleep(0.005)

    try:
        requests: list[CancelRequest] = []
        sent = await js(node, "pSend", id=jsc["id"], text="Sing")
        run = await agent.create_run(sent["invocation"], hooks={"on_cancel": lambda r: requests.append(r) or True})
        await run.start()
        pipe = asyncio.ensure_future(run.pipe(endless()))
        await asyncio.wait_for(started.wait(), 10)
        await js(node, "pCancel", id=jsc["id"], inputCodecMessageId=sent["inputCodecMessageId"])
        assert (await asyncio.wait_for(pipe, 10)).reason == "cancelled"
        assert len(requests) == 1 and requests[0].run_id == run.run_id
        assert requests[0].message["name"] == "ai-cancel" and requests[0].message["clientId"] == "alice"
        await run.end("cancelled")
        await js(node, "pWait", id=jsc["id"], runId=run.run_id, status="cancelled")

        started.clear()
        signal = asyncio.Event()
        sent = await js(node, "pSend", id=jsc["id"], text="Again")
        run2 = await agent.create_run(sent["invocation"], hooks={"signal": signal})
        await run2.start()
        pipe = asyncio.ensure_future(run2.pipe(endless()))
        await asyncio.wait_for(started.wait(), 10)
        signal.set()
        assert (await asyncio.wait_for(pipe, 10)).reason == "cancelled"
        await run2.end("cancelled")
        await js(node, "pWait", id=jsc["id"], runId=run2.run_id, status="cancelled")
        runs = (await js(node, "pView", id=jsc["id"]))["runs"]
        assert [s["status"] for s in runs[-1]["steps"]] == ["cancelled"]
    finally:
        await js(node, "pClose", id=jsc["id"])
        await agent.end()
        await ach.close()
