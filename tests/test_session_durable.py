"""Adopting runs (``adopt_run`` + ``load``), crash recovery of dangling streams, bounded trigger
paging (``page_until_located``) and ``with_agent_session``, on the in-process channel."""

from __future__ import annotations

from typing import Any

import pytest
from support_sessions import (
    open_session,
    open_text_stream,
    user_message,
    wait_status,
)

from ai_transport.errors import AITransportError
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentRun, AgentSession
from ai_transport.sessions.durable import page_until_located, with_agent_session


async def dangling(run: AgentRun) -> str:
    """Leave what a worker killed mid-stream leaves: an open step and an open text stream."""
    step, _ = await open_text_stream(run, "msg_dead", "Half a sen")
    return str(step.step_id)


def item_statuses(view: Any) -> list[str]:
    return [str(i.get("status")) for m in view.get_messages() for i in m.message.items if "status" in i]


async def test_adopted_run_closes_dangling_streams_and_retries_the_dead_step() -> None:
    hub, client, agent_a = await open_session()
    sent = await client.view.send(user_message("Tell me something"))
    run_a = await agent_a.create_run(sent.invocation.to_json())
    await run_a.start()
    dead_step = await dangling(run_a)
    await client.view.wait_for(lambda: "in_progress" in item_statuses(client.view))
    await agent_a.detach()  # the worker is gone: nothing more is published

    b = AgentSession(hub.client("agent").channel("chat"))
    await b.connect()
    run_b = b.adopt_run(sent.invocation.to_json(), run_a.run_id, run_a.invocation_id)
    with pytest.raises(AITransportError) as err:
        await run_b.start()
    assert err.value.code == 40003
    await run_b.load(timeout=5)
    await run_b.load()  # idempotent
    # the dead stream is closed cancelled on the wire (as 0.8.0's cancellation closes a stream)
    history = await hub.client("x").channel("chat").history(limit=100)
    transports = [m["extras"]["ai"]["transport"] for m in history.items if m.get("name") == "ai-output"]
    streams = [t for t in transports if t.get("stream") == "true"]
    assert [t["status"] for t in streams] == ["cancelled"]
    assert client.view.run(run_a.run_id).steps[0].status == "failed"
    retry = run_b.create_step()
    assert retry.step_id == dead_step  # the next step re-attempts the dead one
    await retry.start()
    await retry.pipe(build_response_events([ScriptedText("Here it is.")], seed=2))
    await retry.end()
    await run_b.end("complete")
    await wait_status(client.view, run_a.run_id, "complete")
    assert "in_progress" not in item_statuses(client.view)  # the retry superseded the dead attempt
    texts = [i["content"][0]["text"] for m in client.view.get_messages() for i in m.message.items]
    assert texts == ["Tell me something", "Here it is."]
    info = client.view.run(run_a.run_id)
    assert [(s.step_id, s.status, s.attempt_count) for s in info.steps] == [(dead_step, "complete", 2)]
    await b.end()
    await client.close()


async def test_load_rejects_suspended_ended_and_invisible_runs() -> None:
    hub, client, agent = await open_session()
    sent = await client.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    await run.suspend()
    other = AgentSession(hub.client("agent").channel("chat"))
    await other.connect()
    adopted = other.adopt_run(sent.invocation.to_json(), run.run_id, run.invocation_id)
    with pytest.raises(AITransportError) as err:
        await adopted.load(timeout=5)
    assert err.value.code == 40003 and "suspended" in err.value.message
    resumed = await agent.create_run(sent.invocation.to_json(), run_id=run.run_id)
    await resumed.start()
    await resumed.end("complete")
    again = other.adopt_run(sent.invocation.to_json(), run.run_id, run.invocation_id)
    with pytest.raises(AITransportError) as err:
        await again.load(timeout=5)
    assert err.value.code == 40003 and "terminal" in err.value.message
    ghost = other.adopt_run(sent.invocation.to_json(), "no-such-run", "inv")
    with pytest.raises(AITransportError) as err:
        await ghost.load(timeout=0.2)
    assert err.value.code == 104010 and err.value.status_code == 504
    with pytest.raises(AITransportError) as err:
        other.adopt_run(sent.invocation.to_json(), "", "inv")
    assert err.value.code == 40003 and "run_id" in err.value.message
    created = await other.create_run(sent.invocation.to_json())
    with pytest.raises(AITransportError) as err:
        await created.load()
    assert err.value.code == 40003
    await other.close()
    await agent.end()
    await client.close()


async def test_page_until_located_bounds_history_paging() -> None:
    hub, client, agent = await open_session()
    for i in range(30):
        await client.view.send(user_message(f"note {i}"))
    sent = await client.view.send(user_message("the real question"))
    channel = hub.client("agent").channel("chat")
    pages: list[int] = []
    real_history = channel.history

    async def counting_history(**kw: Any) -> Any:
        pages.append(kw.get("limit", 0))
        return await real_history(**kw)

    channel.history = counting_history  # type: ignore[method-assign]
    fresh = AgentSession(channel, history_page_size=10)
    await fresh.connect()
    run = await fresh.create_run(sent.invocation.to_json())
    assert not run.located
    await page_until_located(run, sent.invocation.input_event_id, page_size=5)
    assert run.located and pages == [5]  # the trigger is the newest thing: one page, of page_size
    await run.start()
    await run.end()
    await fresh.close()
    lost_session = AgentSession(hub.client("agent").channel("chat"), history_page_size=5)
    await lost_session.connect()
    lost = await lost_session.create_run({"inputEventId": "nope", "sessionName": "chat"})
    with pytest.raises(AITransportError) as err:
        await page_until_located(lost, "nope", max_pages=2, page_size=5, trigger_wait=0.05)
    assert err.value.code == 104010 and "within 2 history pages" in err.value.message
    assert lost_session.hydrator.pages_folded == 2  # bounded: 10 of the 31 messages read
    with pytest.raises(AITransportError) as err:
        await page_until_located(lost, "nope", page_size=0)
    assert err.value.code == 40003 and "page_size" in err.value.message
    await lost_session.close()
    await agent.end()
    await client.close()


async def test_with_agent_session_detaches_and_leaves_the_run_open() -> None:
    hub, client, agent = await open_session()
    sent = await client.view.send(user_message("long job"))
    holder: dict[str, Any] = {}
    async with with_agent_session(hub.client("agent").channel("chat")) as session:
        run = await session.create_run(sent.invocation.to_json())
        await run.start()
        holder["ids"] = (run.run_id, run.invocation_id)
    assert session._closed
    await wait_status(client.view, holder["ids"][0], "active")
    with pytest.raises(RuntimeError):
        async with with_agent_session({"channel": hub.client("agent").channel("chat")}) as session:
            adopted = session.adopt_run(sent.invocation.to_json(), *holder["ids"])
            await adopted.load(timeout=5)
            await adopted.end("complete")
            raise RuntimeError("body failed after ending")
    await wait_status(client.view, holder["ids"][0], "complete")
    with pytest.raises(AITransportError) as err:
        async with with_agent_session({"trusted_client_ids": ["x"]}):
            pass
    assert err.value.code == 40003 and "channel" in err.value.message
    await agent.end()
    await client.close()


async def test_resuming_worker_closes_what_the_dead_worker_left_before_the_trigger() -> None:
    from support_sessions import Worker, approve_call

    from ai_transport.responses.local_server import ScriptedFunctionCall

    hub, client, agent_a = await open_session()
    sent = await client.view.send(user_message("Weather in Rome?"))
    run_a = await agent_a.create_run(sent.invocation.to_json())
    await run_a.start()
    step = run_a.create_step()
    await step.start()
    assert step.step_id is not None
    encoder, _ = run_a._encoder(step.step_id, step._serial)
    events = build_response_events(
        [ScriptedText("Checking now."), ScriptedFunctionCall("get_weather", {"city": "Rome"})], seed=1
    )
    done_text = ("response.output_text.done", "response.content_part.done")
    for event in events:  # the text never closes: the worker dies right after asking for approval
        if event["type"] in done_text or (
            event["type"] == "response.output_item.done" and event["item"]["type"] == "message"
        ):
            continue
        if event["type"] == "response.completed":
            break
        await encoder.publish_output(event)
    call = next(e["item"] for e in events if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call")
    await encoder.publish_output(
        {"type": "tool-approval-request", "call_id": call["call_id"], "name": call["name"], "arguments": call["arguments"]}
    )
    await run_a.drain()
    await agent_a.detach()  # dies: the text stream and the step stay open, the run active
    answer, _ = await approve_call(client.view, run_a.run_id)
    b = AgentSession(hub.client("agent").channel("chat"))
    await b.connect()
    worker = Worker()
    resumed = await worker.handle(b, answer.invocation.to_json())
    assert resumed.run_id == run_a.run_id and len(worker.executed) == 1
    await wait_status(client.view, run_a.run_id, "complete")
    history = await hub.client("x").channel("chat").history(limit=1000)
    transports = [m["extras"]["ai"]["transport"] for m in history.items if m.get("name") == "ai-output"]
    assert "streaming" not in [t.get("status") for t in transports if t.get("stream") == "true"]
    steps = client.view.run(run_a.run_id).steps
    assert steps[0].step_id == step.step_id and steps[0].status == "failed"
    assert all(s.status == "complete" for s in steps[1:])
    await b.end()
    await client.close()


async def test_resume_never_closes_a_stream_or_ends_a_step_opened_after_its_trigger() -> None:
    # a duplicate wake-up (same approval) resumes while the first worker streams its answer: only
    # streams and step attempts opened before the trigger are a dead worker's; the live worker's
    # stream stays open and its step is not ended
    from support_sessions import Worker, approve_call, open_text_stream

    hub, client, agent = await open_session()
    worker = Worker()
    sent = await client.view.send(user_message("Weather in Rome?"))
    run = await worker.handle(agent, sent.invocation.to_json())
    await wait_status(client.view, run.run_id, "suspended")
    answer, _ = await approve_call(client.view, run.run_id)
    live = await agent.create_run(answer.invocation.to_json())
    await live.start()
    await live.view.load_all()
    step, _encoder = await open_text_stream(live, "msg_live", "Rome is")  # streaming, the worker very much alive
    duplicate_session = AgentSession(hub.client("agent").channel("chat"))
    await duplicate_session.connect()
    duplicate = await duplicate_session.create_run(answer.invocation.to_json())
    await duplicate.start()
    history = await hub.client("x").channel("chat").history(limit=1000)
    live_streams = [
        m["extras"]["ai"]["transport"]
        for m in history.items
        if m.get("name") == "ai-output" and m["extras"]["ai"].get("codec", {}).get("item_id") == "msg_live"
    ]
    assert [t.get("status") for t in live_streams] == ["streaming"]
    ends = [
        m["extras"]["ai"]["transport"]
        for m in history.items
        if m.get("name") == "ai-step-end" and m["extras"]["ai"]["transport"].get("step-id") == step.step_id
    ]
    assert ends == []  # the live worker's step stays open
    await duplicate_session.close()
    await agent.close()
    await client.close()
