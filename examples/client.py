"""A Python client that asks a question and answers the agent's approval requests.

    python examples/client.py --emulator http://127.0.0.1:8090 [--channel NAME] [--approve | --deny REASON]

It opens a ``ClientSession`` on the channel, sends the question, and wakes the agent by running
``examples/agent_worker.py`` with the run's invocation (standing in for an HTTP POST to a serverless
agent). The conversation is printed as it streams. When the run suspends on a gated tool call, the
client asks you (or follows ``--approve`` / ``--deny``), publishes the answer into the suspended run
and wakes the agent again, which resumes the run in a fresh process from the channel alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

from ai_transport.auth import browser_token_params, token_request_callback
from ai_transport.channels.ably_channel import AblyChannel
from ai_transport.cli.render import LivePrinter
from ai_transport.codec.codec import ResponsesCodec
from ai_transport.emulator.auth import DEFAULT_KEY
from ai_transport.emulator.client import client_options
from ai_transport.sessions.client import ClientSession

WORKER = Path(__file__).resolve().parent / "agent_worker.py"


async def wake_agent(where: list[str], invocation: dict[str, Any]) -> str:
    """Run the worker once for ``invocation`` (a stand-in for POSTing it to the agent's endpoint)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), *where, json.dumps(invocation), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"agent worker failed (exit {proc.returncode})")
    return str(json.loads(out.decode().strip().splitlines()[-1])["outcome"])


def pending_approvals(view: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """``(codec_message_id, call_id, state)`` of every call waiting for approval."""
    return [
        (m.codec_message_id, call_id, state)
        for m in view.get_messages()
        for call_id, state in m.message.tool_call_states.items()
        if state.get("approval") == "pending"
    ]


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--emulator", help="URL of the local emulator")
    where.add_argument("--key", help="Ably API key")
    p.add_argument("--channel", default=f"client-example-{uuid.uuid4().hex[:6]}")
    p.add_argument("--question", default="What's the weather in Paris right now? Should I take an umbrella?")
    decision = p.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve without asking")
    decision.add_argument("--deny", metavar="REASON", help="deny without asking, with this reason")
    args = p.parse_args()

    if args.emulator:
        # a least-privilege user token (ai_transport.auth): no message-update/delete rights
        callback = token_request_callback(DEFAULT_KEY, browser_token_params("user", args.channel))
        channel = await AblyChannel.connect(
            args.channel, **client_options(args.emulator, client_id="user", auth_callback=callback)
        )
        worker_args = ["--emulator", args.emulator]
    else:
        # in a real app the token request comes from your server (authUrl); the key stays there
        callback = token_request_callback(args.key, browser_token_params("user", args.channel))
        channel = await AblyChannel.connect(args.channel, auth_callback=callback, client_id="user")
        worker_args = ["--key", args.key]
    session = ClientSession(channel)
    await session.connect()
    view = session.view
    printer = LivePrinter(sys.stdout)
    view.on("update", lambda *_: printer.update(view.get_messages()))

    user_message = {
        "role": "user",
        "items": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": args.question}]}],
    }
    run = await view.send([ResponsesCodec.create_user_message(user_message)])
    outcome = await wake_agent(worker_args, run.to_invocation().to_json())
    run_id = await asyncio.wait_for(run.started, 15)

    while outcome == "suspended":
        await view.wait_for(lambda: bool(pending_approvals(view)) and view.run(run_id).status == "suspended", 15)
        answers = []
        for cmid, call_id, state in pending_approvals(view):
            printer.close()
            if args.approve or args.deny is not None:
                approved = args.approve
            else:
                reply = input(f"approve {state.get('name')}({state.get('arguments')})? [y/N] ")
                approved = reply.strip().lower().startswith("y")
            payload: dict[str, Any] = {"call_id": call_id, "approved": approved}
            if not approved and args.deny:
                payload["reason"] = args.deny
            printer.note(f"client: {'approved' if approved else 'denied'} {state.get('name')}")
            answers.append(ResponsesCodec.create_tool_approval_response(cmid, payload))
        answer = await view.send(answers, run_id=run_id)
        outcome = await wake_agent(worker_args, answer.to_invocation().to_json())

    await view.wait_for(lambda: view.run(run_id).status == outcome, 15)
    printer.close()
    print(f"run {run_id[:8]}: {outcome}")
    await session.close()
    await channel.close()
    return 0 if outcome == "complete" else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
