"""AgentSession / AgentRun API: misuse errors, cancels (early, vetoed), session end, trigger lookup."""

from __future__ import annotations

import asyncio

import pytest
from support_sessions import eventually, open_session, text_delta, text_opening, user_message, wait_status

from ai_transport.errors import AITransportError
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.invocation import Invocation

pytestmark = pytest.mark.asyncio


async def slow_text(n: int = 1000):
    for event in text_opening():
        yield event
    for _ in range(n):
        yield text_delta("x")
        await asyncio.sleep(0.002)


async def test_misuse_raises_40003() -> None:
    _hub, client, agent = await open_session()
    sent = await client.view.send(user_message("hi"))
    with pytest.raises(AITransportError) as err:
        await agent.create_run(sent.invocation.to_json(), run_id="")
    assert err.value.code == 40003 and "run_id" in err.value.message
    run = await agent.create_run(sent.invocation)
    for call in (run.pipe([]), run.send({"type": "x"}), run.suspend(), run.end("complete")):
        with pytest.raises(AITransportError) as err:
            await call
        assert err.value.code == 40003 and "start()" in err.value.message
    await run.start()
    await run.start()  # idempotent
    with pytest.raises(AITransportError) as err:
        await run.end("done")  # type: ignore[arg-type]
    assert err.value.code == 40003
    result = await run.pipe(build_response_events([ScriptedText("ok")], seed=1))
    assert result.reason == "complete"
    await run.end("complete")
    await run.end("complete")  # idempotent
    with pytest.raises(AITransportError) as err:
        await run.pipe([])
    assert err.value.code == 40003 and "ended" in err.value.message
    bad = await run.session.create_run(Invocation("no-such-event", "chat"))
    with pytest.raises(AITransportError) as err:
        await bad.start(timeout=0.2)
    assert err.value.code == 104010
    await client.close()
    await agent.end()


async def test_unsupported_event_makes_the_pipe_fail_with_the_codec_error() -> None:
    _hub, client, agent = await open_session()
    agent_errors, client_errors = [], []
    agent.on("error", agent_errors.append)
    client.on("error", client_errors.append)
    sent = await client.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    result = await run.pipe([{"type": "response.web_search_call.searching", "item_id": "ws_1"}])
    assert result.reason == "error" and getattr(result.error, "code", None) == 40003
    assert [e.code for e in agent_errors] == [104008] and "web_search_call" in agent_errors[0].message
    await run.end("error", result.error)
    await wait_status(client.view, run.run_id, "error")
    assert client.view.run(run.run_id).error.code == 40003
    assert [(e.code, e.status_code) for e in client_errors] == [(40003, 400)]
    await client.close()
    await agent.end()


async def test_cancel_before_the_run_starts_is_honoured_at_start() -> None:
    _hub, client, agent = await open_session()
    sent = await client.view.send(user_message("hi"))
    await sent.cancel()  # the agent has not even been invoked: cancel by input codec-message-id
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    assert run.abort_signal.is_set()
    result = await run.pipe(slow_text())
    assert result.reason == "cancelled"
    await run.end("cancelled")
    await wait_status(client.view, run.run_id, "cancelled")
    await client.close()
    await agent.end()


async def test_on_cancel_can_veto_and_on_cancelled_can_write() -> None:
    _hub, client, agent = await open_session()
    sent = await client.view.send(user_message("hi"))
    asked = []

    def on_cancel(request):
        assert request.run_id == run.run_id and request.message["extras"]["ai"]["transport"]["run-id"] == run.run_id
        asked.append(request.message["name"])
        return len(asked) > 1  # refuse the first cancel, accept the second

    async def on_cancelled(write):
        await write(
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {
                    "id": "msg_1",
                    "type": "message",
                    "status": "incomplete",
                    "content": [],
                    "role": "assistant",
                },
            }
        )

    run = await agent.create_run(
        sent.invocation.to_json(), hooks={"on_cancel": on_cancel, "on_cancelled": on_cancelled}
    )
    await run.start()
    pipe = asyncio.ensure_future(run.pipe(slow_text()))
    await asyncio.sleep(0.05)
    await client.cancel(run.run_id)
    await eventually(lambda: len(asked) == 1)
    await asyncio.sleep(0.01)
    assert not run.abort_signal.is_set() and not pipe.done()
    await client.cancel(run.run_id)
    result = await asyncio.wait_for(pipe, 5)
    assert result.reason == "cancelled" and asked == ["ai-cancel", "ai-cancel"]
    await run.end("cancelled")
    await wait_status(client.view, run.run_id, "cancelled")
    item = client.view.get_messages()[1].message.items[0]
    assert item["status"] == "incomplete" and item["content"][0]["text"].startswith("x")
    await client.close()
    await agent.end()


async def test_session_end_ends_open_runs_cancelled() -> None:
    _hub, client, agent = await open_session()
    sent = await client.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    await agent.end()
    await wait_status(client.view, run.run_id, "cancelled")
    assert run.abort_signal.is_set()
    with pytest.raises(AITransportError) as err:
        await agent.connect()
    assert err.value.code == 104004
    await client.close()


async def test_explicit_step_holds_several_messages() -> None:
    hub, client, agent = await open_session()
    sent = await client.view.send(user_message("Two tools please"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    step = run.create_step()
    with pytest.raises(AITransportError):
        await step.send({"type": "x"})  # not started
    await step.start()
    with pytest.raises(AITransportError) as err:
        await run.pipe([])  # one step at a time
    assert err.value.code == 40003
    outputs = [
        {
            "type": "function_call_output",
            "item": {"type": "function_call_output", "call_id": f"c{i}", "output": str(i)},
        }
        for i in range(2)
    ]
    ids = [await step.send(o) for o in outputs]
    result = await step.pipe(build_response_events([ScriptedText("Both done.")], seed=1))
    assert result.reason == "complete" and len(set(ids)) == 2
    with pytest.raises(AITransportError):
        await step.end("done")
    await step.end()
    await step.end()  # idempotent
    # a second explicit step left open is closed by run.end
    other = run.create_step()
    await other.start()
    await run.end("complete")
    await wait_status(client.view, run.run_id, "complete")
    info = client.view.run(run.run_id)
    assert [s.status for s in info.steps] == ["complete", "complete"]
    messages = client.view.get_messages()
    assert [m.codec_message_id for m in messages[1:3]] == ids
    assert len(messages) == 4
    history = await hub.client("x").channel("chat").history(limit=100, direction="forwards")
    names = [m.get("name") for m in history.items]
    assert names.count("ai-step-start") == 2 and names.count("ai-step-end") == 2
    first_step = [m for m in history.items if m.get("name") == "ai-output"]
    step_ids = {m["extras"]["ai"]["transport"]["step-id"] for m in first_step}
    assert step_ids == {step.step_id}
    await client.close()
    await agent.end()


async def test_start_waits_for_a_trigger_published_after_the_wake_up() -> None:
    """An invocation can reach a worker before its input reaches the channel: ``start()`` folds the
    history (no match), then waits for a live wire claiming the event-id, and answers it."""
    hub, client, agent = await open_session()
    await client.view.send(user_message("earlier"))  # some history to fold first
    event_id = "evt-late"
    run = await agent.create_run(Invocation(event_id, "chat", "alice"))
    starting = asyncio.ensure_future(run.start(timeout=60.0))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not starting.done()  # history folded, no match: waiting for the input
    await hub.client("alice").channel("chat").publish({
        "name": "ai-input",
        "data": "late",
        "extras": {"ai": {
            "transport": {"role": "user", "codec-message-id": "cm-late", "run-client-id": "alice",
                          "event-id": event_id, "stream": "false", "discrete": "true"},
            "codec": {"kind": "user-message", "partType": "input_text"},
        }},
    })
    await asyncio.wait_for(starting, 5.0)  # woken by the wire, not by the timeout
    assert run.trigger is not None and run.trigger.get("clientId") == "alice"
    await run.end("complete")
    await client.close()
    await agent.end()
