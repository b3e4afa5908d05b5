"""``ai-transport demo``: the whole product, end to end, on this machine.

A user asks a question; the agent (:class:`~ai_transport.cli.agent.ToolAgent`) calls the model, which
answers with reasoning, text and a call to the gated ``get_weather`` tool; the agent streams all of it
over the channel and suspends the run; the client (a :class:`~ai_transport.sessions.client.ClientSession`)
sees the pending call and approves it (or denies it with ``--deny``); the agent is woken again,
resumes the run, executes the tool, calls the model again and streams the final answer.

Pieces used, all real: the Responses client over HTTP/SSE (against the local scripted model server,
or the OpenAI API with ``OPENAI_API_KEY`` + ``--model``), the codec, agent and client sessions, and
either the in-process channel (default) or the Ably adapter over the ``ably`` SDK talking to the
local emulator (``--emulator``). The client's view is rendered live as it streams.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from ..codec.inputs import create_tool_approval_response, create_user_message
from ..sessions.client import ClientSession
from .agent import ToolAgent
from .demo_transport import DemoResult, DemoStats, _transport
from .errors import CliError
from .render import LivePrinter
from .scenario import scripted_turn

ChannelFactory = Callable[[str], Awaitable[Any]]

SCRIPTED_MODEL = "scripted-weather-model"

#: Suspensions the demo answers before giving up (a real model may ask for a tool more than once).
MAX_ROUNDS = 4


REASONING_MODEL_PREFIXES = ("gpt-5", "o1", "o3", "o4", SCRIPTED_MODEL)


def reasoning_for(args: argparse.Namespace, model: str) -> dict[str, Any] | None:
    """The ``reasoning`` request option: ``--reasoning`` effort, or for ``auto`` low effort with a
    summary on reasoning models (``gpt-5*``, ``o*``, the scripted model) and nothing on others."""
    choice = getattr(args, "reasoning", "auto") or "auto"
    if choice == "off" or (choice == "auto" and not model.startswith(REASONING_MODEL_PREFIXES)):
        return None
    return {"effort": "low" if choice == "auto" else choice, "summary": "auto"}


@contextlib.asynccontextmanager
async def _model(args: argparse.Namespace, printer: LivePrinter) -> Any:
    """The Responses client: real API (key + --model) or the local scripted server."""
    from ..responses.client import ResponsesClient

    api_key = os.environ.get("OPENAI_API_KEY")
    if args.model and not api_key:
        raise CliError("--model talks to the OpenAI API and needs OPENAI_API_KEY; "
                       "without --model the demo uses its local scripted model")
    if args.model:
        client = ResponsesClient(api_key=api_key)
        printer.note(f"model: {args.model} via the OpenAI Responses API")
        try:
            yield client, args.model, reasoning_for(args, args.model)
        finally:
            await client.aclose()
        return
    from ..responses.local_server import LocalResponsesServer, StreamReply

    delay = max(0.0, float(args.delay))

    def responder(request: Any) -> StreamReply:
        return StreamReply.from_events(scripted_turn(request.json()), delay=delay)

    server = LocalResponsesServer(responder)
    await server.start()
    client = ResponsesClient(api_key="local-demo", base_url=server.base_url)
    printer.note(f"model: local scripted Responses server at {server.base_url} (no API key needed)")
    try:
        yield client, SCRIPTED_MODEL, reasoning_for(args, SCRIPTED_MODEL)
    finally:
        await client.aclose()
        await server.close()


def _check_extras(args: argparse.Namespace) -> None:
    """A :class:`CliError` naming the extra to install when ``--agents-sdk`` or ``--temporal`` cannot
    import what it needs (checked before anything starts)."""
    temporal = getattr(args, "temporal", None)
    if getattr(args, "agents_sdk", False) and temporal:
        raise CliError("--agents-sdk and --temporal cannot be combined (the Temporal agent is the demo's own)")
    if getattr(args, "agents_sdk", False):
        try:
            from . import agents_sdk  # noqa: F401
        except ImportError as e:
            raise CliError(
                f"--agents-sdk needs the OpenAI Agents SDK ({e}); pip install 'ai-transport[agents]'"
            ) from e
    if temporal:
        try:
            from . import temporal_demo  # noqa: F401
        except ImportError as e:
            raise CliError(
                f"--temporal needs the Temporal SDK ({e}); pip install 'ai-transport[temporal]'"
            ) from e


@contextlib.asynccontextmanager
async def _agent(
    args: argparse.Namespace, channel_for: ChannelFactory, responses: Any, model: str,
    reasoning: dict[str, Any] | None, printer: LivePrinter,
) -> Any:
    """The agent woken per input: :class:`ToolAgent` in this process, or with ``--temporal`` a
    Temporal workflow per wake-up (:mod:`.temporal_demo`)."""
    temporal = getattr(args, "temporal", None)
    _check_extras(args)
    if getattr(args, "agents_sdk", False):
        from .agents_sdk import AgentsSdkAgent

        printer.note("agent: written with the OpenAI Agents SDK (ai_transport.integrations.openai_agents)")
        yield AgentsSdkAgent(lambda: channel_for("agent"), responses, model, reasoning=reasoning)
        return
    if not temporal:
        yield ToolAgent(lambda: channel_for("agent"), responses, model, reasoning=reasoning)
        return
    from .temporal_demo import temporal_agent

    address = None if temporal == "start" else temporal

    async def agent_channel(_session_name: str) -> Any:  # the demo has one channel
        return await channel_for("agent")

    async with temporal_agent(address, agent_channel, responses, model, reasoning, printer.note) as agent:
        yield agent


def _pending_approvals(view: Any, run_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """``(codec_message_id, call_id, state)`` of calls of run ``run_id`` awaiting approval."""
    out = []
    for m in view.get_messages():
        info = view.run_of(m.codec_message_id)
        if info is None or info.run_id != run_id:
            continue
        for call_id, state in m.message.tool_call_states.items():
            if state.get("approval") == "pending":
                out.append((m.codec_message_id, call_id, state))
    return out


def _run_status(view: Any, run_id: str) -> str | None:
    info = view.run(run_id) if run_id else None
    return info.status if info is not None else None


async def _decide(args: argparse.Namespace, printer: LivePrinter, call_id: str, state: Any) -> dict[str, Any]:
    """The client's answer to one pending call: approve (default), ``--deny [REASON]``, or ``--ask``."""
    what = f"{state.get('name', '?')}({state.get('arguments', '')})"
    approve = args.deny is None
    if getattr(args, "ask", False):
        printer.close()
        try:
            reply = await asyncio.to_thread(input, f"approve {what}? [y/N] ")
        except EOFError:
            raise CliError(
                "--ask reads the answer from the terminal, but stdin is closed; "
                "leave --ask out to approve, or pass --deny [REASON]"
            ) from None
        approve = reply.strip().lower() in ("y", "yes")
    if approve:
        printer.note(f"client: approving {what}")
        return {"call_id": call_id, "approved": True}
    printer.note(f"client: denying {what}" + (f" ({args.deny})" if args.deny else ""))
    payload: dict[str, Any] = {"call_id": call_id, "approved": False}
    if args.deny:
        payload["reason"] = args.deny
    return payload


async def run_demo(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the demo; returns the exit code (0 when the run completed as expected)."""
    return (await demo(args, out)).exit_code


async def demo(args: argparse.Namespace, out: TextIO | None = None) -> DemoResult:
    """Run the demo, printing the live transcript to ``out``; see :class:`DemoResult`."""
    if getattr(args, "vercel", False):  # the same conversation through UIMessageCodec
        from .vercel_demo import vercel_demo

        return await vercel_demo(args, out)
    out = out or sys.stdout
    printer = LivePrinter(out, color=args.color, show_reasoning=not args.no_reasoning)
    started = time.monotonic()
    channel_name = args.channel or f"demo-{uuid.uuid4().hex[:8]}"
    stats = DemoStats()
    wakes = 0
    _check_extras(args)  # before any server starts
    if getattr(args, "temporal", None) and not args.emulator:
        args.emulator = "start"  # Temporal workers reach the channel over Ably: the emulator
    async with _model(args, printer) as (responses, model, reasoning), _transport(
        args, channel_name, printer
    ) as channel_for, _agent(args, channel_for, responses, model, reasoning, printer) as agent:
        client_channel = await channel_for("user")
        session = ClientSession(client_channel)
        await client_channel.subscribe(stats.on_message)
        await session.connect()
        view = session.view
        await view.load_all()  # an existing channel (--channel): continue its conversation
        printer.update(view.get_messages())

        view.on("update", lambda *_: printer.update(view.get_messages()))

        def on_run(event: Any) -> None:
            short = event.run_id[:8]
            if event.type == "start":
                printer.note(f"-- run {short} started")
            elif event.type == "resume":
                printer.note(f"-- run {short} resumed")
            elif event.type == "suspend":
                printer.note(f"-- run {short} suspended: waiting for the client")
            elif event.type == "end":
                printer.note(f"-- run {short} ended: {event.reason or 'complete'}")

        view.on("run", on_run)

        async def wake(invocation: dict[str, Any]) -> str:
            nonlocal wakes
            wakes += 1
            return await agent.handle_invocation(invocation)

        # 1. The user asks; the app wakes the agent with the run's invocation (here: a direct call;
        #    in production, an HTTP POST of invocation.to_json() to the agent's endpoint).
        message = {
            "role": "user",
            "items": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": args.question}]}],
        }
        run = await view.send([create_user_message(message)])
        left = await wake(run.to_invocation().to_json())
        run_id = await asyncio.wait_for(asyncio.shield(run.started), 15)
        if left in ("error", "cancelled"):
            printer.close()
            raise CliError(f"the run ended {left!r} instead of waiting for approval{await _why(view, run_id, left)}")
        if left == "complete":  # a real model may answer without calling the tool
            printer.note("-- the model answered without calling a gated tool: nothing to approve")

        # 2. The client sees the pending call once the suspension reaches it, and answers; the agent
        #    is woken again, resumes the run, runs (or skips) the tool and answers. A real model may
        #    ask again: every suspension is answered the same way, up to MAX_ROUNDS.
        rounds = 0
        while left == "suspended":
            rounds += 1
            if rounds > MAX_ROUNDS:
                raise CliError(f"the model kept asking for approvals ({MAX_ROUNDS} rounds); giving up")
            await view.wait_for(
                lambda: _run_status(view, run_id) == "suspended" and bool(_pending_approvals(view, run_id)), 20
            )
            answers = []
            for cmid, call_id, state in _pending_approvals(view, run_id):
                answers.append(create_tool_approval_response(cmid, await _decide(args, printer, call_id, state)))
            answer_run = await view.send(answers, run_id=run_id)
            left = await wake(answer_run.to_invocation().to_json())
            if left in ("error", "cancelled"):
                printer.close()
                raise CliError(f"the resumed run ended {left!r}{await _why(view, run_id, left)}")
        await view.wait_for(lambda: _run_status(view, run_id) in ("complete", "cancelled", "error"), 20)
        status = _run_status(view, run_id)
        printer.close()
        final_messages = view.get_messages()
        final_runs = view.runs()
        await session.close()
        aclose = getattr(agent, "aclose", None)
        if aclose is not None:
            await aclose()
    elapsed = time.monotonic() - started
    ok = status == "complete" and left == "complete"
    summary = (
        f"{'done' if ok else 'FAILED'}: run {status}; {stats.published} messages published, "
        f"{stats.appends} appends, {len(final_runs)} run(s), {wakes} agent wake-ups, "
        f"{agent.model_calls} model calls, {elapsed:.2f} s"
    )
    printer.note(summary, style="note" if ok else "error")
    return DemoResult(0 if ok else 1, final_messages, final_runs, stats)


async def _why(view: Any, run_id: str, left: str) -> str:
    """``": <message> (code N)"`` of the run's error once the client's view has it, else ``""``."""
    with contextlib.suppress(asyncio.TimeoutError):
        await view.wait_for(lambda: _run_status(view, run_id) == left, 5)
    info = view.run(run_id)
    return f": {info.error.message} (code {info.error.code})" if info is not None and info.error else ""


#: Session log records that repeat a run's error: the demo prints that error itself, once.
_REPORTED_BY_THE_DEMO = frozenset({
    ("ai_transport.sessions.agent", "pipe for run %s failed: %s"),
    ("ai_transport.sessions.client", "run %s ended with an agent error: %s"),
})


class _RunErrorOnce(logging.Filter):
    """Drops the session records of :data:`_REPORTED_BY_THE_DEMO` (the demo's own error line says it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a record the demo reports itself."""
        return (record.name, record.msg) not in _REPORTED_BY_THE_DEMO


async def run_demo_command(args: argparse.Namespace) -> int:
    """``ai-transport demo`` entry point."""
    once = _RunErrorOnce()
    loggers = [logging.getLogger(name) for name in sorted({name for name, _ in _REPORTED_BY_THE_DEMO})]
    for logger in loggers:
        logger.addFilter(once)
    try:
        return await run_demo(args)
    except asyncio.TimeoutError as e:
        raise CliError("the demo timed out waiting for the run (see the transcript above)") from e
    finally:
        for logger in loggers:
            logger.removeFilter(once)
