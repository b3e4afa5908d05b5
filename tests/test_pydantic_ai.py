"""pydantic-ai over Ably on its real package (a scripted ``FunctionModel``): the agent streams through
the Vercel codec, an approval-required tool suspends the run, and a fresh worker (a new session that
knows only the channel) resumes it from the user's answer: approve runs the tool, deny tells the model."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from support_sessions import wait_status

from ai_transport import UIMessageCodec
from ai_transport.channels import InProcessHub
from ai_transport.errors import InvalidArgumentError
from ai_transport.integrations.pydantic_ai import serve_pydantic_ai
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

pytestmark = pytest.mark.asyncio


def make_agent(deleted: list[str]) -> Any:
    async def model(messages: list[Any], info: AgentInfo) -> Any:
        returns = [p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
        if not returns:
            yield "Let me delete it."
            yield {0: DeltaToolCall(name="delete_file", json_args='{"path": "a.txt"}', tool_call_id="call-1")}
        else:
            yield f"Done: {returns[-1].content}"

    agent = Agent(FunctionModel(stream_function=model), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def delete_file(path: str) -> str:
        deleted.append(path)
        return f"deleted {path}"

    return agent


CONNECTIONS: list[Any] = []


def connection(hub: InProcessHub, client_id: str) -> Any:
    conn = hub.client(client_id)
    CONNECTIONS.append(conn)
    return conn


@pytest.fixture(autouse=True)
async def _close_connections() -> Any:
    yield
    while CONNECTIONS:
        await CONNECTIONS.pop().close()


async def worker(hub: InProcessHub) -> AgentSession:
    session = AgentSession(connection(hub, "agent").channel("chat"), codec=UIMessageCodec)
    await session.connect()
    return session


def tool_part(client: ClientSession) -> dict[str, Any]:
    (part,) = [p for m in client.view.get_messages() for p in m.message["parts"] if p["type"].startswith("tool-")]
    return part


async def suspended_turn(hub: InProcessHub, deleted: list[str]) -> tuple[ClientSession, Any, str]:
    client = ClientSession(connection(hub, "alice").channel("chat"), codec=UIMessageCodec)
    await client.connect()
    sent = await client.view.send(
        UIMessageCodec.create_user_message({"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "delete a.txt"}]})
    )
    first = await worker(hub)
    assert await serve_pydantic_ai(first, sent.invocation.to_json(), make_agent(deleted)) == "suspended"
    await first.close()
    await wait_status(client.view, sent.run_id, "suspended")
    part = tool_part(client)
    assert part["type"] == "tool-delete_file" and part["state"] == "approval-requested"
    assert part["input"] == {"path": "a.txt"} and deleted == []
    assistant = next(m for m in client.view.get_messages() if m.message["role"] == "assistant")
    assert assistant.message["parts"][1] == {"type": "text", "text": "Let me delete it."}
    return client, sent, assistant.codec_message_id


@pytest.mark.parametrize("approved", [True, False])
async def test_approval_suspends_and_a_fresh_worker_resumes(approved: bool) -> None:
    hub = InProcessHub()
    deleted: list[str] = []
    client, sent, cmid = await suspended_turn(hub, deleted)
    answer = await client.view.send(
        UIMessageCodec.create_tool_approval_response(
            cmid, {"toolCallId": "call-1", "approved": approved, **({} if approved else {"reason": "keep it"})}
        ),
        run_id=sent.run_id,
    )
    second = await worker(hub)  # a new worker: nothing but the channel
    assert await serve_pydantic_ai(second, answer.invocation.to_json(), make_agent(deleted)) == "complete"
    await wait_status(client.view, sent.run_id, "complete")
    part = tool_part(client)
    texts = [p["text"] for m in client.view.get_messages() for p in m.message["parts"] if p["type"] == "text"]
    if approved:
        assert deleted == ["a.txt"]
        assert part["state"] == "output-available" and part["output"] == "deleted a.txt"
        assert texts[-1] == "Done: deleted a.txt"
    else:
        assert deleted == []
        assert part["state"] == "output-denied"
        # the model is told of the denial (0.8.0's reducer keeps no reason on a denied part)
        assert texts[-1].startswith("Done: ") and "denied" in texts[-1]
    await second.close()
    await client.close()


async def test_a_responses_session_is_refused() -> None:
    hub = InProcessHub()
    client = ClientSession(connection(hub, "alice").channel("chat"))
    await client.connect()
    from ai_transport.codec import create_user_message

    sent = await client.view.send(
        create_user_message({"role": "user", "items": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]})
    )
    session = AgentSession(connection(hub, "agent").channel("chat"))
    await session.connect()
    with pytest.raises(InvalidArgumentError, match="UIMessageCodec"):
        await serve_pydantic_ai(session, sent.invocation.to_json(), make_agent([]))
    await session.close()
    await client.close()
