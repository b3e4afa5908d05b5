"""A ``useChat`` front end on a Python agent, over the emulator: 0.8.0's ``createChatTransport``
(``./vercel``, in node with ably-js, no browser) sends a message and POSTs the invocation; our agent
(:class:`UIMessageCodec` session, real ably SDK) streams an answer with a tool call needing approval
and suspends; the transport's stream shows it; the user approves through the transport; a fresh
Python worker (a new connection, nothing but the channel) resumes, runs the tool and finishes, and the
transport streams the rest."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support_emulator import emulator_thread, unique_channel  # noqa: F401
from test_session_vercel import first_pass, second_pass

from ai_transport import UIMessageCodec
from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.emulator.client import client_options, connect_info
from ai_transport.sessions.agent import AgentSession

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(90), pytest.mark.js]


async def js(node: Any, op: str, **args: Any) -> Any:
    return await asyncio.to_thread(node.call, "chat_transport", op, **args)


async def worker(emu: Any, name: str) -> tuple[AblyChannel, AgentSession]:
    channel = await asyncio.wait_for(AblyChannel.connect(name, **client_options(emu, client_id="agent")), 15)
    session = AgentSession(channel, codec=UIMessageCodec)
    await session.connect()
    return channel, session


async def test_use_chat_transport_on_a_python_agent_with_approval_and_a_fresh_worker(emulator_thread, node) -> None:
    name = unique_channel("vercel-chat")
    ui = await js(node, "ctOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
    try:
        sent = await js(node, "ctSend", id=ui["id"], text="Weather in Paris?", messageId="u-1")
        assert sent["post"]["url"] == "/api/chat"

        ch1, first = await worker(emulator_thread, name)
        run = await first.create_run(sent["post"]["body"])
        await run.start()
        await run.view.load_all()
        await run.pipe(first_pass())
        assert [c["toolCallId"] for c in run.unanswered_calls()] == ["call-1"]
        await run.suspend()
        await first.close()
        await ch1.close()

        streamed = await js(node, "ctStream", id=ui["id"], stream=sent["stream"])
        assert streamed["error"] is None
        types = [c["type"] for c in streamed["chunks"]]
        assert "tool-approval-request" in types and types[-1] == "finish"
        assert "".join(c["delta"] for c in streamed["chunks"] if c["type"] == "text-delta") == "Checking the weather."

        view = await js(node, "ctView", id=ui["id"])
        assert [m["message"]["role"] for m in view] == ["user", "assistant"]
        part = view[1]["message"]["parts"][-1]
        assert part["state"] == "approval-requested" and part["input"] == {"city": "Paris"}

        answer = await js(node, "ctApprove", id=ui["id"], toolCallId="call-1", approved=True)
        ch2, second = await worker(emulator_thread, name)  # a fresh worker: only the channel
        resumed = await second.create_run(answer["post"]["body"])
        await resumed.start()
        await resumed.view.load_all()
        assert resumed.run_id == run.run_id
        owed = await resumed.run_owed_calls(lambda call: {"tempC": 21})
        assert [c["toolCallId"] for c in owed or []] == ["call-1"]
        await resumed.pipe(second_pass())
        await resumed.end("complete")

        rest = await js(node, "ctStream", id=ui["id"], stream=answer["stream"])
        assert rest["error"] is None
        texts = "".join(c["delta"] for c in rest["chunks"] if c["type"] == "text-delta")
        assert texts == "It is 21°C in Paris."
        final = await js(node, "ctView", id=ui["id"])
        tool = next(p for m in final for p in m["message"]["parts"] if p.get("toolCallId") == "call-1")
        assert tool["state"] == "output-available" and tool["output"] == {"tempC": 21}
        await second.close()
        await ch2.close()
    finally:
        await js(node, "ctClose", id=ui["id"])


async def test_use_chat_transport_on_a_pydantic_ai_agent(emulator_thread, node) -> None:
    """The same with pydantic-ai behind it (``serve_pydantic_ai``, a scripted ``FunctionModel``)."""
    from test_pydantic_ai import make_agent

    from ai_transport.integrations.pydantic_ai import serve_pydantic_ai

    name = unique_channel("vercel-chat-pai")
    deleted: list[str] = []
    ui = await js(node, "ctOpen", options=connect_info(emulator_thread, client_id="alice"), channel=name)
    try:
        sent = await js(node, "ctSend", id=ui["id"], text="delete a.txt", messageId="u-1")
        ch1, first = await worker(emulator_thread, name)
        assert await serve_pydantic_ai(first, sent["post"]["body"], make_agent(deleted)) == "suspended"
        await first.close()
        await ch1.close()
        streamed = await js(node, "ctStream", id=ui["id"], stream=sent["stream"])
        assert "tool-approval-request" in [c["type"] for c in streamed["chunks"]]

        answer = await js(node, "ctApprove", id=ui["id"], toolCallId="call-1", approved=True)
        ch2, second = await worker(emulator_thread, name)
        assert await serve_pydantic_ai(second, answer["post"]["body"], make_agent(deleted)) == "complete"
        rest = await js(node, "ctStream", id=ui["id"], stream=answer["stream"])
        assert deleted == ["a.txt"]
        assert "".join(c["delta"] for c in rest["chunks"] if c["type"] == "text-delta") == "Done: deleted a.txt"
        await second.close()
        await ch2.close()
    finally:
        await js(node, "ctClose", id=ui["id"])
