"""``ai-transport supervise CHANNEL…``: end (or re-wake) the runs whose worker died.

Follows every CHANNEL on one connection as a trusted agent identity (``--client-id``, default
``agent``) with a :class:`~ai_transport.sessions.supervisor.Supervisor`. A run that is ``active``
but whose worker's lease lapsed (or whose connection left presence) is, with ``--wake-url``, first
re-woken by POSTing its last invocation (``{"inputEventId", "sessionName"}``) to that URL (your
serverless agent endpoint), then ended ``error`` if it is still stalled one lease later; without
``--wake-url`` it is ended ``error`` at once. One line per run handled goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import urllib.request
from typing import Any

from .args import channel_name, emulator_url, http_url, non_empty, non_negative_seconds, positive_seconds
from .connection import SDK_LOG, connect_failure, realtime_options, timed_out
from .errors import CliError

EPILOG = """\
examples:
  ai-transport supervise demo-chat --emulator http://127.0.0.1:8090
  ai-transport supervise chat-1 chat-2 --key "$ABLY_KEY" --lease 10 --wake-url https://agent.example/wake
"""


def add_parser(sub: Any) -> None:
    """Register ``supervise`` on the CLI's subparsers."""
    p = sub.add_parser(
        "supervise",
        help="end or re-wake the runs whose worker died (no run left streaming)",
        description=(
            "Follow CHANNEL(s) as the agents' identity; a run that is active but whose worker stopped "
            "renewing its lease (or left presence) is re-woken through --wake-url, or ended 'error'."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("channels", metavar="CHANNEL", nargs="+", type=channel_name, help="the channel names")
    p.add_argument("--emulator", metavar="URL", type=emulator_url, default=None,
                   help="URL of a running emulator (default: $AIT_EMULATOR_URL)")
    p.add_argument("--key", default=None, help="an Ably API key 'appId.keyId:secret' (default: $ABLY_KEY)")
    p.add_argument("--client-id", type=non_empty, default="agent",
                   help="the agents' identity to publish as (default: agent)")
    p.add_argument("--lease", type=positive_seconds, default=10.0, help="the agents' lease in seconds (default 10)")
    p.add_argument("--grace", type=non_negative_seconds, default=None,
                   help="extra seconds before a lapsed lease counts (default lease/5)")
    p.add_argument("--poll", type=positive_seconds, default=None, help="seconds between checks (default lease/5)")
    p.add_argument("--wake-url", type=http_url, default=None,
                   help="POST a stalled run's last invocation here before ending it")
    p.add_argument("--timeout", type=positive_seconds, default=10.0,
                   help="seconds to wait for the connection (default 10)")

def _post(url: str, body: dict[str, Any]) -> int:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(response.status)


async def _realtime(args: argparse.Namespace) -> Any:
    from ably import AblyRealtime

    from ..channels.ably_channel import wait_connected

    options, where = await realtime_options(args, args.client_id, "the channels live")
    with SDK_LOG.connecting():
        realtime = AblyRealtime(**options)
        try:
            await asyncio.wait_for(wait_connected(realtime), args.timeout)
        except BaseException as e:
            with contextlib.suppress(Exception):
                await realtime.close()
            if isinstance(e, asyncio.TimeoutError):
                raise timed_out(args.timeout, where) from e
            if isinstance(e, Exception):
                raise connect_failure(e, where) from e
            raise
    return realtime


async def run_supervise_command(args: argparse.Namespace) -> int:
    """``ai-transport supervise`` entry point: runs until interrupted."""
    from ..channels.ably_channel import AblyChannel
    from ..errors import InvalidArgumentError
    from ..sessions.supervisor import StalledRun, Supervisor

    realtime = await _realtime(args)
    channels = [AblyChannel(name, realtime) for name in args.channels]

    async def wake(stall: StalledRun) -> None:
        line: dict[str, Any] = {"run": stall.run_id, "channel": stall.channel, "reason": stall.reason, "action": "woken"}
        if stall.invocation is None:
            line["action"] = "no invocation to re-send"
        else:
            try:
                line["status"] = await asyncio.to_thread(_post, args.wake_url, stall.invocation.to_json())
            except Exception as exc:  # a failed wake-up: the run is ended after one lease
                line["error"] = str(exc)
        print(json.dumps(line), flush=True)

    try:
        supervisor = Supervisor(
            channels,
            on_stall=wake if args.wake_url else None,
            lease=args.lease,
            grace=args.grace,
            poll=args.poll,
        )
    except InvalidArgumentError as e:
        raise CliError(e.message) from e
    await supervisor.start()
    print(f"# supervising {', '.join(args.channels)} (lease {args.lease:g}s; Ctrl-C to stop)", file=sys.stderr, flush=True)
    reported = 0
    try:
        while True:
            await asyncio.sleep(0.1)
            for stall, action in supervisor.handled[reported:]:
                if action == "ended":
                    print(json.dumps({"run": stall.run_id, "channel": stall.channel, "reason": stall.reason,
                                      "action": "ended"}), flush=True)
            reported = len(supervisor.handled)
    finally:
        await supervisor.close()
        for channel in channels:
            await channel.close()
        await realtime.close()
