"""``ai-transport demo --vercel``: the demo's conversation as a ``useChat`` front end sees it.

The same scenario as the default demo (a weather question, the gated ``get_weather`` tool), spoken
in Vercel AI SDK UI message chunks through :class:`~ai_transport.codec.vercel.UIMessageCodec`: the
agent (:class:`UIChatAgent`, a fresh ``AgentSession`` on every wake-up, as a serverless function)
streams the scripted model's chunks (:func:`.vercel_scenario.scripted_ui_turn`: reasoning, text, a
``get_weather`` call and its ``tool-approval-request``) and suspends; the client (a
``ClientSession`` with the same codec, i.e. what 0.8.0's ``createChatTransport`` runs under
``useChat``) sees the call awaiting approval and answers (``--deny [REASON]`` denies it); a fresh
agent resumes from the channel alone, runs the tool and streams the answer. The client's
``UIMessage`` s are printed live as they stream, one line per part.

On the in-process channel by default; ``--emulator`` runs it over the local Ably emulator and the
real ably SDK.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

from ..codec.vercel import UIMessageCodec
from ..codec.vercel.inputs import create_tool_approval_response, create_user_message
from ..sessions.agent import AgentSession
from ..sessions.client import ClientSession
from .demo_transport import DemoResult, DemoStats, _transport
from .errors import CliError
from .render import Block, LivePrinter, _short
from .vercel_scenario import execute_tool, scripted_ui_turn

__all__ = ["UIChatAgent", "tool_label", "ui_blocks", "vercel_demo"]

#: Suspensions answered before giving up.
MAX_ROUNDS = 4

_TOOL_LABELS = {
    "input-streaming": "streaming",
    "input-available": "called",
    "approval-requested": "awaiting approval",
    "approval-responded": "approved",
    "output-available": "done",
    "output-error": "failed",
    "output-denied": "denied",
}


def tool_label(part: Mapping[str, Any]) -> str:
    """The demo's label for a tool part's ``state``."""
    state = str(part.get("state", ""))
    if state == "approval-responded":
        approval = part.get("approval")
        return "approved" if isinstance(approval, Mapping) and approval.get("approved") else "denied"
    return _TOOL_LABELS.get(state, state)


def ui_blocks(messages: Iterable[Any]) -> list[Block]:
    """A conversation of ``UIMessage`` s (or ``CodecMessage`` s of them) as transcript blocks: one per
    text / reasoning part, one per tool call (with its state) and one per tool output."""
    blocks: list[Block] = []
    for m in messages:
        cmid = str(getattr(m, "codec_message_id", ""))
        message = getattr(m, "message", m)
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        parts = message.get("parts")
        for i, part in enumerate(parts if isinstance(parts, list) else []):
            if not isinstance(part, Mapping):
                continue
            kind = str(part.get("type", ""))
            key = f"{cmid}:{i}"
            if kind == "text":
                blocks.append(Block(key, "user" if role == "user" else "assistant", str(part.get("text", "")),
                                    message_id=cmid))
            elif kind == "reasoning":
                blocks.append(Block(key, "reasoning", str(part.get("text", "")), message_id=cmid))
            elif kind.startswith("tool-") or kind == "dynamic-tool":
                name = kind[len("tool-"):] if kind.startswith("tool-") else str(part.get("toolName", "?"))
                call_id = str(part.get("toolCallId", ""))
                blocks.append(Block(f"call:{call_id}", "call", f"{name}({_short(part.get('input', ''))})",
                                    tool_label(part), cmid))
                if part.get("state") == "output-available":
                    blocks.append(Block(f"result:{call_id}", "result", _short(part.get("output")), message_id=cmid))
                elif part.get("state") == "output-error":
                    blocks.append(Block(f"result:{call_id}", "result", str(part.get("errorText", "")),
                                        message_id=cmid))
    return blocks


class UIChatAgent:
    """The agent woken per input: a fresh :class:`AgentSession` with :class:`UIMessageCodec` on every
    wake-up (nothing kept between them but the channel), streaming the scripted UI chunk model."""

    def __init__(self, open_channel: Callable[[], Any], delay: float = 0.01) -> None:
        self.open_channel = open_channel
        self.delay = delay
        #: Passes of the scripted model (the summary's "model calls").
        self.model_calls = 0

    async def _chunks(self, chunks: list[dict[str, Any]]) -> Any:
        for chunk in chunks:
            if self.delay:
                await asyncio.sleep(self.delay)
            yield chunk

    async def handle_invocation(self, invocation: Mapping[str, Any]) -> str:
        """One wake-up: start or resume the run, stream one pass; ``suspended`` or how it ended."""
        channel = await self.open_channel()
        session = AgentSession(channel, codec=UIMessageCodec)
        try:
            await session.connect()
            run = await session.create_run(dict(invocation))
            await run.start(15)
            await run.view.load_all()
            if await run.run_owed_calls(execute_tool) is None:
                await run.suspend()
                return "suspended"
            self.model_calls += 1
            result = await run.pipe(self._chunks(scripted_ui_turn(run.branch_messages())))
            if result.reason != "complete":
                await run.end(result.reason, result.error)
                return result.reason
            if run.unanswered_calls():
                await run.suspend()
                return "suspended"
            await run.end("complete")
            return "complete"
        finally:
            await session.close()
            await channel.close()  # one connection per wake-up, like a serverless worker


def _awaiting(view: Any) -> list[tuple[str, Mapping[str, Any]]]:
    """``(codec_message_id, tool part)`` of the calls awaiting the user's approval."""
    out = []
    for m in view.get_messages():
        for part in m.message.get("parts", []):
            if isinstance(part, Mapping) and part.get("state") == "approval-requested":
                out.append((m.codec_message_id, part))
    return out


def _status(view: Any, run_id: str | None) -> str | None:
    info = view.run(run_id) if run_id else None
    return info.status if info is not None else None


async def vercel_demo(args: argparse.Namespace, out: TextIO | None = None) -> Any:
    """Run the Vercel-codec demo, printing the live transcript to ``out``; a ``DemoResult``."""

    for flag in ("temporal", "agents_sdk", "model", "ask"):
        if getattr(args, flag, None):
            raise CliError(f"--vercel cannot be combined with --{flag.replace('_', '-')} "
                           "(the Vercel demo's agent is scripted)", 2)
    out = out or sys.stdout
    printer = LivePrinter(out, color=args.color, show_reasoning=not args.no_reasoning)
    started = time.monotonic()
    channel_name = args.channel or f"demo-{uuid.uuid4().hex[:8]}"
    stats = DemoStats()
    wakes = 0
    printer.note("codec: UIMessageCodec (Vercel AI SDK UI message chunks, what useChat reads)")
    async with _transport(args, channel_name, printer) as channel_for:
        agent = UIChatAgent(lambda: channel_for("agent"), delay=max(0.0, float(args.delay)))
        client_channel = await channel_for("user")
        await client_channel.subscribe(stats.on_message)
        session = ClientSession(client_channel, codec=UIMessageCodec)
        await session.connect()
        view = session.view
        await view.load_all()
        view.on("update", lambda *_: printer.update_blocks(ui_blocks(view.get_messages())))

        def on_run(event: Any) -> None:
            what = {"start": "started", "resume": "resumed", "suspend": "suspended: waiting for the client",
                    "end": f"ended: {event.reason or 'complete'}"}.get(event.type)
            if what:
                printer.note(f"-- run {event.run_id[:8]} {what}")

        view.on("run", on_run)

        async def wake(invocation: dict[str, Any]) -> str:
            nonlocal wakes
            wakes += 1
            return await agent.handle_invocation(invocation)

        # 1. The user asks (useChat's sendMessage); the transport POSTs the invocation (here: a call).
        user = {"id": f"user-{uuid.uuid4().hex[:8]}", "role": "user", "parts": [{"type": "text", "text": args.question}]}
        sent = await view.send(create_user_message(user))
        left = await wake(sent.to_invocation().to_json())
        run_id = await asyncio.wait_for(asyncio.shield(sent.started), 15)

        # 2. The call awaits approval (useChat shows Approve / Deny); the answer resumes the run.
        rounds = 0
        while left == "suspended":
            rounds += 1
            if rounds > MAX_ROUNDS:
                raise CliError(f"the agent kept asking for approvals ({MAX_ROUNDS} rounds); giving up")
            await view.wait_for(lambda: _status(view, run_id) == "suspended" and bool(_awaiting(view)), 20)
            answers = []
            for cmid, part in _awaiting(view):
                what = f"{str(part.get('type'))[len('tool-'):]}({_short(part.get('input', ''))})"
                if args.deny is None:
                    printer.note(f"client: approving {what}")
                    answers.append(create_tool_approval_response(cmid, {"toolCallId": part["toolCallId"],
                                                                         "approved": True}))
                else:
                    printer.note(f"client: denying {what}" + (f" ({args.deny})" if args.deny else ""))
                    denial = {"toolCallId": part["toolCallId"], "approved": False}
                    answers.append(create_tool_approval_response(
                        cmid, {**denial, "reason": args.deny} if args.deny else denial))
            answer = await view.send(answers, run_id=run_id)
            left = await wake(answer.to_invocation().to_json())
        await view.wait_for(lambda: _status(view, run_id) in ("complete", "cancelled", "error"), 20)
        status = _status(view, run_id)
        printer.close()
        final_messages = view.get_messages()
        final_runs = view.runs()
        await session.close()
    elapsed = time.monotonic() - started
    ok = status == "complete" and left == "complete"
    printer.note(
        f"{'done' if ok else 'FAILED'}: run {status}; {stats.published} messages published, "
        f"{stats.appends} appends, {len(final_runs)} run(s), {wakes} agent wake-ups, "
        f"{agent.model_calls} model calls, {elapsed:.2f} s",
        style="note" if ok else "error",
    )
    return DemoResult(0 if ok else 1, final_messages, final_runs, stats)
