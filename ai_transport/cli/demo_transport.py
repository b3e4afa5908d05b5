"""What the demos share: the channel transport (the in-process hub, or the emulator over the ``ably``
SDK with least-privilege tokens), the reachability check, and the run's counters and result.

Below :mod:`.demo` and :mod:`.vercel_demo`, which both use it (so neither imports the other back).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
from dataclasses import dataclass
from typing import Any

from .args import emulator_address
from .errors import CliError
from .render import LivePrinter

__all__ = ["DemoResult", "DemoStats", "check_reachable"]


@dataclass
class DemoStats:
    """Counters for the summary line (every message seen on the client's channel)."""

    published: int = 0
    appends: int = 0
    updates: int = 0

    def on_message(self, message: Any) -> None:
        """Count one channel delivery (publishes, appends) for the closing summary line."""
        action = message.get("action")
        if action == "message.create":
            self.published += 1
        elif action == "message.append":
            self.appends += 1
        elif action == "message.update":
            self.updates += 1


def check_reachable(url: str, timeout: float = 2.0) -> tuple[str, int]:
    """``(host, port)`` of ``url`` if a TCP connection succeeds, else a :class:`CliError` saying so."""
    try:
        host, port = emulator_address(url)
    except ValueError as e:
        raise CliError(str(e)) from None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as e:
        raise CliError(
            f"cannot reach the emulator at {url} ({e.strerror or e}); start one with "
            "`ai-transport emulator --port N`, or run `ai-transport demo --emulator` to start one for the demo"
        ) from e
    return host, port

@contextlib.asynccontextmanager
async def _transport(args: argparse.Namespace, channel_name: str, printer: LivePrinter) -> Any:
    """A factory ``client_id -> Channel`` on the in-process hub or on the emulator."""
    if not args.emulator:
        from ..channels.memory import InProcessHub

        hub = InProcessHub()

        async def in_process(client_id: str) -> Any:
            return hub.channel(channel_name, client_id=client_id)

        printer.note(f"channel: {channel_name} (in-process)")
        yield in_process
        return

    from ..auth import agent_token_params, browser_token_params, token_request_callback
    from ..channels.ably_channel import AblyChannel
    from ..emulator.auth import DEFAULT_KEY
    from ..emulator.client import client_options

    emulator: Any = None
    if args.emulator == "start":
        from ..emulator.server import Emulator

        emulator = Emulator(port=0)
        await emulator.start()
        url = emulator.url
        printer.note(f"emulator: started at {url}")
    else:
        url = args.emulator
        check_reachable(url)
    opened: list[Any] = []

    async def over_ably(client_id: str) -> Any:
        # least-privilege tokens (ai_transport.auth): the agent may update its own messages only,
        # the user none; both identified, so the emulator stamps who did what
        params = (
            agent_token_params(client_id, channel_name)
            if client_id == "agent"
            else browser_token_params(client_id, channel_name)
        )
        callback = token_request_callback(DEFAULT_KEY, params)
        try:
            ch = await asyncio.wait_for(
                AblyChannel.connect(
                    channel_name, **client_options(url, client_id=client_id, auth_callback=callback)
                ),
                15,
            )
        except asyncio.TimeoutError as e:
            raise CliError(f"timed out connecting to the emulator at {url}") from e
        opened.append(ch)
        return ch

    printer.note(f"channel: {channel_name} (Ably emulator at {url}, ably SDK)")
    try:
        yield over_ably
    finally:
        for ch in opened:
            with contextlib.suppress(Exception):
                await ch.close()
        if emulator is not None:
            await emulator.stop()

@dataclass
class DemoResult:
    """What a demo run left: exit code, the client's final conversation and run statuses, counters."""

    exit_code: int
    messages: list[Any]
    runs: list[Any]
    stats: DemoStats
