"""``ai-transport tail CHANNEL``: print the runs on a channel as a conversation, then follow it live."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from typing import Any, TextIO

from ..errors import AITransportError
from .errors import CliError
from .render import LivePrinter

TAIL_CLIENT_ID = "ai-transport-tail"


async def open_channel(args: argparse.Namespace) -> Any:
    """An :class:`~ai_transport.channels.ably_channel.AblyChannel` on the emulator or on Ably."""
    from ..channels.ably_channel import AblyChannel

    emulator = args.emulator or (None if args.key else os.environ.get("AIT_EMULATOR_URL"))
    key = args.key or (None if emulator else os.environ.get("ABLY_KEY"))
    if not emulator and not key:
        raise CliError("say where CHANNEL lives: --emulator URL (a local emulator) or --key KEY (Ably); "
                       "or set AIT_EMULATOR_URL / ABLY_KEY")
    if key is not None and ":" not in key:
        raise CliError("--key must be an Ably API key of the form 'appId.keyId:secret'")
    if emulator:
        from ..emulator.client import client_options
        from .demo_transport import check_reachable

        check_reachable(emulator)
        options = client_options(emulator, client_id=TAIL_CLIENT_ID)
        where = f"the emulator at {emulator}"
        if key is not None:
            # The SDK refuses Basic auth over plain HTTP (40103): exchange the key for a token first,
            # which also reports a wrong key at once instead of as endless reconnect attempts.
            options["token"] = await _emulator_token(emulator, key, where)
    else:
        options = {"key": key, "client_id": TAIL_CLIENT_ID}
        where = "Ably"
    try:
        return await asyncio.wait_for(AblyChannel.connect(args.channel, **options), args.timeout)
    except asyncio.TimeoutError as e:
        raise CliError(f"timed out after {args.timeout:g} s connecting to {where}") from e
    except AITransportError as e:
        code = e.code if isinstance(e.code, int) else 0
        if 40100 <= code < 40200 or code in (40400, 40005) or "key" in e.message.lower():
            raise CliError(f"{where} rejected the credentials: {e.message} (code {e.code})") from e
        raise CliError(f"cannot connect to {where}: {e.message} (code {e.code})") from e
    except Exception as e:  # the ably SDK raises its own AblyException
        sdk_code = getattr(e, "code", None)
        message = getattr(e, "message", None) or str(e)
        if isinstance(sdk_code, int) and (40100 <= sdk_code < 40200 or sdk_code == 40400):
            raise CliError(f"{where} rejected the credentials: {message} (code {sdk_code})") from e
        raise CliError(f"cannot connect to {where}: {message}") from e


async def _emulator_token(url: str, key: str, where: str) -> str:
    import json
    import urllib.error

    from ..emulator.client import request_token

    try:
        details = await asyncio.to_thread(request_token, url, key=key, client_id=TAIL_CLIENT_ID)
    except urllib.error.HTTPError as e:
        try:
            err = json.loads(e.read()).get("error", {})
        except ValueError:
            err = {}
        raise CliError(f"{where} rejected the credentials: {err.get('message', e.reason)} "
                       f"(code {err.get('code', e.code)})") from e
    except OSError as e:
        raise CliError(f"cannot reach {where}: {e}") from e
    return str(details["token"])


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
