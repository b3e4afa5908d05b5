"""Parity features of 0.8.0 on the in-process channel: run read models (``BaseRun``), hooks, options,
view events, extra views. Interop with the JS package: ``test_session_parity_js.py``."""

from __future__ import annotations

import pytest
from support_parity import text_turn, texts
from support_sessions import Worker, approve_call, failed_run, open_session, user_message, wait_status

from ai_transport.errors import AITransportError


def _shape(messages: list) -> list[tuple[str, list[str]]]:
    return [(m.role, [i.get("type") for i in m.items]) for m in messages]


async def test_base_run_status_error_and_messages_are_this_runs_own_turn() -> None:
    _hub, client, agent = await open_session()
    worker = Worker()
    sent = await client.view.send(user_message("Weather in Paris?"))
    # before the agent's run-start: active, and the turn is the optimistic input
    assert (sent.run_id, sent.status, sent.error) == ("", "active", None)
    assert _shape(sent.messages) == [("user", ["message"])]
    run = await worker.handle(agent, sent.invocation.to_json())
    await wait_status(client.view, run.run_id, "suspended")
    answer, _call = await approve_call(client.view, run.run_id)
    resumed = await worker.handle(agent, answer.invocation.to_json())
    await wait_status(client.view, run.run_id, "complete")
    turn = [
        ("user", ["message"]),
        ("assistant", ["reasoning", "message", "function_call"]),
        ("assistant", ["function_call_output"]),
        ("assistant", ["reasoning", "message"]),
    ]
    # the whole run, across the suspend / resume, on both sides
    assert _shape(sent.messages) == turn and _shape(resumed.messages) == turn and _shape(run.messages) == turn
    assert sent.status == resumed.status == "complete"
    # a second turn: its run's messages hold that turn only; the view holds the conversation
    failed = await failed_run(client, agent, seed=7)
    assert failed.status == "error" and failed.error.code == 50000
    assert texts(client.view.get_messages())[-2] == "Weather in Rome?"
    assert _shape(failed.messages) == [("user", ["message"]), ("assistant", ["message", "function_call"])]
    assert len(failed.branch_messages()) > len(failed.messages)
    await client.close()
    await agent.end()


async def test_external_signal_cancels_the_run_like_a_client_cancel() -> None:
    import asyncio

    from support_sessions import text_delta, text_opening

    _hub, client, agent = await open_session()
    sent = await client.view.send(user_message("Sing"))
    signal = asyncio.Event()
    run = await agent.create_run(sent.invocation, hooks={"signal": signal})
    await run.start()
    started = asyncio.Event()

    async def endless():
        for event in text_opening():
            yield event
        while True:
            started.set()
            yield text_delta("la ")
            await asyncio.sleep(0.005)

    pipe = asyncio.ensure_future(run.pipe(endless()))
    await asyncio.wait_for(started.wait(), 5)
    signal.set()  # e.g. the HTTP request went away
    result = await asyncio.wait_for(pipe, 5)
    assert result.reason == "cancelled" and run.abort_signal.is_set() and not run.has_input()
    await run.end("cancelled")
    await wait_status(client.view, run.run_id, "cancelled")
    assert client.view.runs()[0].steps[0].status == "cancelled"
    # already set at creation: start() refuses (40033)
    done = asyncio.Event()
    done.set()
    late = await agent.create_run(sent.invocation, hooks={"signal": done})
    with pytest.raises(AITransportError) as err:
        await late.start()
    assert err.value.code == 40033
    await client.close()
    await agent.end()


@pytest.mark.parametrize(
    ("hooks", "field"),
    [({"signal": True}, "hooks['signal']"), ({"on_cancel": 3}, "hooks['on_cancel']"), ({"onCancel": print}, "onCancel")],
)
async def test_bad_hooks_are_40003_naming_the_hook(hooks: dict, field: str) -> None:
    _hub, client, agent = await open_session()
    sent = await client.view.send(user_message("hi"))
    with pytest.raises(AITransportError) as err:
        await agent.create_run(sent.invocation, hooks=hooks)
    assert err.value.code == 40003 and field in err.value.message
    await client.close()
    await agent.end()


async def test_deferred_cancels_are_bounded_oldest_first() -> None:
    from ai_transport.conversation.lifecycle import CancelTarget, build_cancel_message
    from ai_transport.sessions.agent import DEFERRED_CANCEL_LIMIT

    _hub, client, agent = await open_session()
    for i in range(DEFERRED_CANCEL_LIMIT + 5):
        agent._handle_cancel(build_cancel_message(CancelTarget(None, f"input-{i}")))
    assert len(agent._deferred_cancels) == DEFERRED_CANCEL_LIMIT
    assert next(iter(agent._deferred_cancels)) == "input-5"
    await client.close()
    await agent.end()


async def test_writes_before_connect_are_40003() -> None:
    from ai_transport.channels.memory import InProcessHub
    from ai_transport.sessions.agent import AgentSession
    from ai_transport.sessions.client import ClientSession

    hub, client, agent = await open_session()
    sent = await client.view.send(user_message("hi"))
    cold_client = ClientSession(hub.client("carol").channel("chat"))
    cold_agent = AgentSession(hub.client("agent").channel("chat"))
    run = await cold_agent.create_run(sent.invocation)
    for call, method in (
        (cold_client.view.send(user_message("x")), "send"),
        (cold_client.cancel("some-run"), "cancel"),
        (run.start(), "start"),
    ):
        with pytest.raises(AITransportError) as err:
            await call
        assert err.value.code == 40003 and f"connect() must be called before {method}()" in err.value.message
    assert isinstance(hub, InProcessHub)
    await client.close()
    await agent.end()
    await cold_agent.close()
    await cold_client.close()


async def test_client_error_event_is_live_only() -> None:
    from ai_transport.sessions.client import ClientSession

    hub, client, agent = await open_session()
    live_errors: list = []
    client.on("error", live_errors.append)
    await failed_run(client, agent, seed=3)
    assert [e.code for e in live_errors] == [50000]
    late = ClientSession(hub.client("dora").channel("chat"))
    late_errors: list = []
    late.on("error", late_errors.append)
    await late.connect()
    await late.view.load_all()
    assert late.view.runs()[0].status == "error" and late_errors == []  # history is not news
    await late.close()
    await client.close()
    await agent.end()


async def test_step_client_id_is_sticky_across_steps() -> None:
    from ai_transport.sessions.agent import AgentSession, function_call_output

    hub, client, agent = await open_session()
    sent = await client.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation)
    await run.start()
    await run.pipe(text_turn("first", 1))  # the first step: the triggering input's publisher
    step = run.create_step(step_client_id="bob")
    await step.start()
    await step.send(function_call_output({"call_id": "c1"}, "ok"))
    await step.end()
    await run.send(function_call_output({"call_id": "c2"}, "ok"))  # inherits bob
    await run.suspend()
    await wait_status(client.view, run.run_id, "suspended")
    assert [s.step_client_id for s in client.view.runs()[0].steps] == ["alice", "bob", "bob"]
    # a fresh worker continuing the run inherits it from the channel
    answer = await client.view.send(user_message("go on"), run_id=run.run_id)
    fresh = AgentSession(hub.client("agent").channel("chat"))
    await fresh.connect()
    again = await fresh.create_run(answer.invocation)
    await again.start()
    await again.view.load_all()
    await again.pipe(text_turn("more", 2))
    await again.end("complete")
    await wait_status(client.view, run.run_id, "complete")
    assert [s.step_client_id for s in client.view.runs()[0].steps][-1] == "bob"
    await fresh.close()
    await client.close()
    await agent.end()


async def test_load_until_settles_with_one_update_and_honours_its_signal() -> None:
    import asyncio

    from ai_transport.sessions.client import ClientSession

    hub, client, agent = await open_session()
    for i in range(4):
        sent = await client.view.send(user_message(f"question {i}"))
        run = await agent.create_run(sent.invocation)
        await run.start()
        await run.pipe(text_turn(f"answer {i}", i + 1))
        await run.end("complete")
        await wait_status(client.view, run.run_id, "complete")
    fresh = ClientSession(hub.client("erin").channel("chat"))
    await fresh.connect()
    updates: list[int] = []
    fresh.view.on("update", lambda: updates.append(1))
    stop = asyncio.Event()
    stop.set()
    assert await fresh.view.load_until(lambda m: False, signal=stop) == []

    def is_q1(m) -> bool:
        return m.message.role == "user" and m.message.items[0]["content"][0]["text"] == "question 1"

    # two walks at once run one after the other; each emits a single settled update
    tails = await asyncio.gather(fresh.view.load_until(is_q1), fresh.view.load_until(is_q1))
    assert texts(tails[0]) == ["assistant", "question 2", "assistant", "question 3", "assistant"]
    assert tails[1] == tails[0] and len(updates) == 2
    await fresh.close()
    await client.close()
    await agent.end()
