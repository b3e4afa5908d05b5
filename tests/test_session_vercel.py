"""Sessions with the Vercel codec (:class:`UIMessageCodec`) on the in-process channel: a client asks,
the agent streams UI message chunks with a tool call needing approval and suspends; the client
approves; a fresh agent session (another worker, nothing kept but the channel) resumes, executes the
approved call, answers and completes. The client's view shows ``UIMessage`` dicts throughout."""

from __future__ import annotations

from typing import Any

import pytest
from support_sessions import wait_status

from ai_transport import UIMessageCodec
from ai_transport.channels import InProcessHub
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

pytestmark = pytest.mark.asyncio


def first_pass() -> list[dict[str, Any]]:
    return [
        {"type": "start", "messageId": "resp-1"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "Checking "},
        {"type": "text-delta", "id": "t1", "delta": "the weather."},
        {"type": "text-end", "id": "t1"},
        {"type": "tool-input-start", "toolCallId": "call-1", "toolName": "weather"},
        {"type": "tool-input-delta", "toolCallId": "call-1", "inputTextDelta": '{"city":"Paris"}'},
        {"type": "tool-input-available", "toolCallId": "call-1", "toolName": "weather", "input": {"city": "Paris"}},
        {"type": "tool-approval-request", "toolCallId": "call-1", "approvalId": "ap-1"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "tool-calls"},
    ]


def second_pass() -> list[dict[str, Any]]:
    return [
        {"type": "start"},
        {"type": "start-step"},
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "It is 21°C in Paris."},
        {"type": "text-end", "id": "t1"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


async def agent_session(hub: InProcessHub, name: str) -> AgentSession:
    agent = AgentSession(hub.client(name).channel("chat"), codec=UIMessageCodec)
    await agent.connect()
    return agent


def tool_parts(messages: list[Any]) -> list[dict[str, Any]]:
    return [p for m in messages for p in m.message["parts"] if p["type"].startswith("tool-")]


async def test_suspend_on_approval_then_a_fresh_worker_resumes_from_the_channel() -> None:
    hub = InProcessHub()
    client = ClientSession(hub.client("alice").channel("chat"), codec=UIMessageCodec)
    await client.connect()
    user = UIMessageCodec.create_user_message(
        {"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "Weather in Paris?"}]}
    )
    sent = await client.view.send(user)

    first = await agent_session(hub, "agent")
    run = await first.create_run(sent.invocation.to_json())
    await run.start()
    await run.view.load_all()
    await run.pipe(first_pass())
    assert [c["toolCallId"] for c in run.unanswered_calls()] == ["call-1"]
    assert run.owed_calls() is None  # waiting for the user: stay suspended
    await run.suspend()
    await wait_status(client.view, run.run_id, "suspended")

    msgs = client.view.get_messages()
    assert [m.message["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[0].message["parts"] == [{"type": "text", "text": "Weather in Paris?"}]
    assistant = msgs[1]
    assert assistant.message["id"] == "resp-1"
    assert [p["type"] for p in assistant.message["parts"]] == ["step-start", "text", "tool-weather"]
    assert assistant.message["parts"][1]["text"] == "Checking the weather."
    (part,) = tool_parts(msgs)
    assert part["state"] == "approval-requested" and part["approval"] == {"id": "ap-1"}

    answer = await client.view.send(
        UIMessageCodec.create_tool_approval_response(
            assistant.codec_message_id, {"toolCallId": "call-1", "approved": True}
        ),
        run_id=run.run_id,
    )
    await first.close()

    second = await agent_session(hub, "agent")  # a fresh worker: it knows only the channel
    resumed = await second.create_run(answer.invocation.to_json())
    await resumed.start()
    await resumed.view.load_all()
    assert resumed.run_id == run.run_id
    assert [c["toolCallId"] for c in resumed.approved_unexecuted_calls()] == ["call-1"]
    executed: list[Any] = []
    owed = await resumed.run_owed_calls(lambda call: executed.append(call["input"]) or {"tempC": 21})
    assert [c["toolCallId"] for c in owed or []] == ["call-1"] and executed == [{"city": "Paris"}]
    assert resumed.approved_unexecuted_calls() == []
    await resumed.pipe(second_pass())
    await resumed.end("complete")
    await wait_status(client.view, run.run_id, "complete")

    final = client.view.get_messages()
    (done,) = tool_parts(final)
    assert done["state"] == "output-available" and done["output"] == {"tempC": 21}
    assert final[-1].message["parts"][-1] == {"type": "text", "text": "It is 21°C in Paris."}
    await second.close()
    await client.close()


async def test_a_denied_call_is_never_owed() -> None:
    hub = InProcessHub()
    client = ClientSession(hub.client("alice").channel("chat"), codec=UIMessageCodec)
    await client.connect()
    sent = await client.view.send(
        UIMessageCodec.create_user_message({"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    )
    agent = await agent_session(hub, "agent")
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    await run.pipe(first_pass())
    await run.suspend()
    await wait_status(client.view, run.run_id, "suspended")
    cmid = client.view.get_messages()[1].codec_message_id
    answer = await client.view.send(
        UIMessageCodec.create_tool_approval_response(cmid, {"toolCallId": "call-1", "approved": False, "reason": "no"}), run_id=run.run_id
    )
    resumed = await agent.create_run(answer.invocation.to_json())
    await resumed.start()
    await resumed.view.load_all()
    assert resumed.owed_calls() == []  # nothing waits, nothing is owed: call the model again
    (part,) = tool_parts(client.view.get_messages())
    assert part["state"] == "output-denied"
    await agent.close()
    await client.close()


async def test_a_stale_tab_approving_a_call_id_the_run_never_made_is_counted_not_fatal() -> None:
    # issue 21 #7 with the Vercel codec: the stray approval (toolCallId) is ignored and counted, the
    # real approved call runs; one naming a call the agent declared is not counted as a stray
    hub = InProcessHub()
    client = ClientSession(hub.client("alice").channel("chat"), codec=UIMessageCodec)
    await client.connect()
    sent = await client.view.send(
        UIMessageCodec.create_user_message({"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    )
    first = await agent_session(hub, "agent")
    run = await first.create_run(sent.invocation.to_json())
    await run.start()
    await run.pipe(first_pass())
    await run.suspend()
    await wait_status(client.view, run.run_id, "suspended")
    cmid = client.view.get_messages()[1].codec_message_id
    answer = await client.view.send(
        [
            UIMessageCodec.create_tool_approval_response(cmid, {"toolCallId": "call-stale", "approved": True}),
            UIMessageCodec.create_tool_approval_response(cmid, {"toolCallId": "call-1", "approved": True}),
        ],
        run_id=run.run_id,
    )
    await first.close()
    second = await agent_session(hub, "agent")
    skipped: list[str] = []
    second.on("skipped", lambda _m, why: skipped.append(why))
    errors: list[Any] = []
    resumed = await second.create_run(answer.invocation.to_json(), hooks={"on_error": errors.append})
    await resumed.start()
    await resumed.view.load_all()
    owed = await resumed.run_owed_calls(lambda call: {"tempC": 21})
    assert [c["toolCallId"] for c in owed or []] == ["call-1"] and errors == []
    assert [why for why in skipped if "never made" in why] == [
        f"approval of call 'call-stale' the agent never made in run {run.run_id} (ignored)"
    ]
    await second.close()
    await client.close()
