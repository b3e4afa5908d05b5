"""``ai-transport emulator``: run the local Ably-compatible server and say how to connect to it."""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import sys
from typing import Any, TextIO

from . import CliError


def connection_help(url: str, key: str) -> str:
    """How to point ably-python, ably-js and ``ai-transport tail`` at the emulator at ``url``."""
    from ..emulator.client import client_options, connect_info

    py_opts = {k: v for k, v in client_options(url).items() if k in ("endpoint", "tls", "port", "token")}
    js_opts = {k: v for k, v in connect_info(url).items() if k in ("endpoint", "port", "tls", "token")}
    py_args = ", ".join(f"{k}={v!r}" for k, v in py_opts.items())
    return f"""\
Ably emulator listening on {url}   (in memory; Ctrl-C to stop)
  API key:  {key}   (any token string is also accepted as a dev token)

ably-python (ably>=3.1.4):
    from ably import AblyRealtime
    client = AblyRealtime({py_args}, client_id="me")
  or, with ai_transport:
    from ai_transport.emulator.client import ably_realtime
    client = ably_realtime("{url}", client_id="me")

ably-js (ably@2):
    const client = new Ably.Realtime({json.dumps({**js_opts, "clientId": "me"})});

Least-privilege tokens (what a deployment should hand out; see docs/SECURITY.md):
    from ai_transport.auth import browser_token_params, create_token_request
    create_token_request("{key}", browser_token_params("user-1", "CHANNEL"))   # serve from your authUrl

Follow a channel as a conversation:
    ai-transport tail CHANNEL --emulator {url}
Run the demo over it:
    ai-transport demo --emulator {url}
"""


def limits_line(limits: Any) -> str:
    """One line saying which of Ably's limits the emulator enforces."""
    if limits is None:
        return "Rate limits: off (--rate-limits enforces Ably's 50 messages/s per connection and channel)"
    return (
        f"Rate limits: {limits.connection_rate:g} messages/s per connection (42911) and "
        f"{limits.channel_rate:g}/s per channel (42913); appendRollupWindow {limits.append_rollup_window} ms "
        "unless a publisher's transport params say otherwise"
    )


def sandbox_help(url: str) -> str:
    """How to run an Ably SDK test suite against the local sandbox at ``url``."""
    return f"""\
Ably local sandbox listening on {url}   (in memory; Ctrl-C to stop)
  POST {url}/apps          provision an app (appspec body) on its own emulator
  DELETE {url}/apps/<id>   tear it down (Basic auth with one of its keys)

ably-js's node test suite:
    ABLY_LOCAL_SANDBOX_URL={url} ABLY_TEST_TRANSPORTS=web_socket npx mocha --exit test/realtime/channel.test.js
"""


async def run_emulator_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Start the emulator on ``args.host:args.port``, print connection help, serve until cancelled."""
    out = out or sys.stdout
    from ..emulator.options import rate_limits_from_args
    from ..emulator.sandbox import Sandbox
    from ..emulator.server import Emulator

    sandbox = bool(getattr(args, "sandbox", False))
    try:
        rate_limits = rate_limits_from_args(args)
    except ValueError as e:
        raise CliError(str(e)) from e
    if sandbox and rate_limits is not None:
        raise CliError("--sandbox provisions emulators without rate limits; drop --rate-limits / --inbound-rate / --append-rollup-window")
    emulator: Any = (
        Sandbox(host=args.host, port=args.port)
        if sandbox
        else Emulator(
            host=args.host,
            port=args.port,
            strict_tokens=bool(getattr(args, "strict_tokens", False)),
            dev_tokens_on_any_host=bool(getattr(args, "dev_tokens_on_any_host", False)),
            allowed_origins=list(getattr(args, "allow_origin", None) or []),
            rate_limits=rate_limits,
        )
    )
    try:
        await emulator.start()
    except ValueError as e:
        raise CliError(str(e)) from e
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise CliError(f"port {args.port} on {args.host} is already in use; pick another with --port N "
                           "(or --port 0 for any free port)") from e
        raise CliError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from e
    if sandbox:
        print(sandbox_help(emulator.url), file=out, flush=True)
    else:
        print(connection_help(emulator.url, emulator.key), file=out, flush=True)
        print(limits_line(rate_limits), file=out, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await emulator.stop()
    return 0
