"""``ai-transport tail CHANNEL``: print the runs on a channel as a conversation, then follow it live."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import Any, TextIO

from .connection import SDK_LOG, connect_failure, realtime_options, timed_out
from .render import LivePrinter

TAIL_CLIENT_ID = "ai-transport-tail"


async def open_channel(args: argparse.Namespace) -> Any:
    """An :class:`~ai_transport.channels.ably_channel.AblyChannel` on the emulator or on Ably."""
    from ..channels.ably_channel import AblyChannel

    options, where = await realtime_options(args, TAIL_CLIENT_ID, "CHANNEL lives")
    with SDK_LOG.connecting():
        try:
            return await asyncio.wait_for(AblyChannel.connect(args.channel, **options), args.timeout)
        except asyncio.TimeoutError as e:
            raise timed_out(args.timeout, where) from e
        except Exception as e:
            raise connect_failure(e, where) from e


def render_history(view: Any, printer: LivePrinter) -> None:
    """Print the view's conversation, each run's status after the last message that belongs to it."""
    from .render import transcript_blocks

    messages = view.get_messages()
    blocks = transcript_blocks(messages)
    run_of = {m.codec_message_id: view.run_of(m.codec_message_id) for m in messages}
    shown: set[str] = set()
    for i, message in enumerate(messages):
        info = run_of[message.codec_message_id]
        following = run_of[messages[i + 1].codec_message_id] if i + 1 < len(messages) else None
        if info is None or (following is not None and following.run_id == info.run_id):
            continue
        ids = {m.codec_message_id for m in messages[: i + 1]}
        printer.update_blocks([b for b in blocks if b.message_id in ids])
        printer.note(f"-- run {info.run_id[:8]}: {info.status}")
        shown.add(info.run_id)
    printer.update_blocks(blocks)
    for info in view.runs():  # runs without messages (e.g. ended before any output)
        if info.run_id not in shown:
            printer.note(f"-- run {info.run_id[:8]}: {info.status}")


async def run_tail(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Render the channel's history, then follow live runs until interrupted (or not, ``--no-follow``)."""
    from ..sessions.client import ClientSession

    out = out or sys.stdout
    printer = LivePrinter(out, color=args.color, show_reasoning=not args.no_reasoning)
    channel = await open_channel(args)
    session = ClientSession(channel)
    try:
        await session.connect()
        view = session.view
        print(f"# {args.channel}: loading history…", file=sys.stderr, flush=True)
        await view.load_all()
        render_history(view, printer)
        if args.no_follow:
            printer.close()
            return 0
        print(f"# {args.channel}: following live (Ctrl-C to stop)", file=sys.stderr, flush=True)
        view.on("update", lambda *_: printer.update(view.get_messages()))

        def on_run(event: Any) -> None:
            label = {"start": "started", "resume": "resumed", "suspend": "suspended"}.get(
                event.type, f"ended: {event.reason or 'complete'}"
            )
            printer.note(f"-- run {event.run_id[:8]} {label}")

        view.on("run", on_run)
        await asyncio.Event().wait()
        return 0
    finally:
        printer.close()
        with contextlib.suppress(Exception):
            await session.close()
        with contextlib.suppress(Exception):
            await channel.close()


async def run_tail_command(args: argparse.Namespace) -> int:
    """``ai-transport tail`` entry point."""
    return await run_tail(args)
