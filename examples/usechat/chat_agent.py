"""The Python agent behind the ``useChat`` page: woken with an invocation, it starts or resumes a run
and streams Vercel AI SDK UI message chunks over Ably (``UIMessageCodec``).

    python examples/usechat/chat_agent.py --emulator http://127.0.0.1:8090 '{"inputEventId": "…", "sessionName": "…"}'

A plain worker, like a serverless function: it keeps nothing between wake-ups, everything it needs
is on the channel. One wake-up (:meth:`ChatAgent.handle_invocation`):

1. connects an ``AgentSession`` with the ``UIMessageCodec`` to the channel named by the invocation
   (``sessionName``) — the channel the page's ``createChatTransport`` session is on;
2. locates the input that woke it (``inputEventId``: the user's message, or the approval
   ``useChat``'s ``addToolApprovalResponse`` published) and starts the run, or resumes it;
3. folds the conversation from history into ``UIMessage`` s and executes the calls the user
   approved (``run_owed_calls``: a ``tool-output-available`` chunk each);
4. streams the (scripted) model's next pass: UI message chunks, exactly what
   ``streamText(...).toUIMessageStream()`` would send. A ``get_weather`` call ends with a
   ``tool-approval-request``; the run is then suspended until the page answers (and wakes a worker
   again); otherwise the run ends ``complete``.

The model is scripted (:func:`ai_transport.cli.vercel_scenario.scripted_ui_turn`): swap it for a
real one (e.g. pydantic-ai's Vercel AI adapter) and nothing else changes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from ai_transport import UIMessageCodec
from ai_transport.auth import agent_token_params, token_request_callback
from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.cli.vercel_scenario import execute_tool, scripted_ui_turn
from ai_transport.emulator.auth import DEFAULT_KEY
from ai_transport.errors import AITransportError
from ai_transport.sessions.agent import AgentSession

#: The agent's clientId (its token is issued for it; clients trust this identity's output).
AGENT_ID = "agent"


async def paced(chunks: Iterable[dict[str, Any]], delay: float) -> AsyncIterator[dict[str, Any]]:
    """``chunks`` one at a time, ``delay`` seconds apart (a model streams; so does this one)."""
    for chunk in chunks:
        if delay:
            await asyncio.sleep(delay)
        yield chunk


class ChatAgent:
    """Handles invocations for one Ably endpoint (the emulator, or Ably with a key)."""

    def __init__(self, open_channel: Callable[[str], Awaitable[Any]], stream_delay: float = 0.02) -> None:
        self.open_channel = open_channel
        #: Seconds between the scripted model's chunks.
        self.stream_delay = stream_delay
        #: Seconds to wait for the triggering input to show up on the channel.
        self.start_timeout = 30.0

    @classmethod
    def for_emulator(cls, url: str, key: str = DEFAULT_KEY, stream_delay: float = 0.02) -> ChatAgent:
        """An agent whose channels connect to the local emulator at ``url`` as client id ``agent``,
        with a least-privilege agent token (``ai_transport.auth``) signed with the emulator's ``key``."""
        from ai_transport.emulator.client import client_options

        async def open_channel(name: str) -> Any:
            callback = token_request_callback(key, agent_token_params(AGENT_ID, name))
            return await AblyChannel.connect(name, **client_options(url, client_id=AGENT_ID, auth_callback=callback))

        return cls(open_channel, stream_delay)

    async def handle_invocation(self, invocation: Mapping[str, Any]) -> str:
        """One wake-up; returns ``suspended`` or how the run ended."""
        channel = await self.open_channel(str(invocation["sessionName"]))
        session = AgentSession(channel, codec=UIMessageCodec)
        try:
            await session.connect()
            run = await session.create_run(dict(invocation))
            await run.start(self.start_timeout)   # ai-run-start, or ai-run-resume after an approval
            await run.view.load_all()           # the conversation so far, as UIMessages
            if await run.run_owed_calls(execute_tool) is None:
                await run.suspend()             # a call still waits for the user
                return "suspended"
            chunks = scripted_ui_turn(run.branch_messages())
            result = await run.pipe(paced(chunks, self.stream_delay))
            if result.reason != "complete":
                await run.end(result.reason, result.error)
                return result.reason
            if run.unanswered_calls():          # the gated call waits for a human
                await run.suspend()
                return "suspended"
            await run.end("complete")
            return "complete"
        finally:
            await session.close()
            await channel.close()


async def main() -> int:
    """Handle the invocation given on the command line (or on stdin), then exit."""
    p = argparse.ArgumentParser(description="Handle one useChat agent invocation and exit.")
    p.add_argument("invocation", nargs="?", help='{"inputEventId", "sessionName"} JSON (default: stdin)')
    p.add_argument("--emulator", required=True, help="URL of the local emulator")
    p.add_argument("--stream-delay", type=float, default=0.02, help="seconds between streamed chunks")
    args = p.parse_args()
    invocation = json.loads(args.invocation if args.invocation else sys.stdin.read())
    agent = ChatAgent.for_emulator(args.emulator, stream_delay=args.stream_delay)
    try:
        outcome = await agent.handle_invocation(invocation)
    except AITransportError as e:
        print(f"usechat agent: error: {e.message} (code {e.code})", file=sys.stderr)
        return 1
    print(json.dumps({"outcome": outcome}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
