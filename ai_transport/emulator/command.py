"""Running the emulator as a command (``python -m ai_transport.emulator`` and ``ai-transport emulator``).

:func:`serve` starts an :class:`~.server.Emulator` (or a :class:`~.sandbox.Sandbox`) as checked
:class:`~.options.EmulatorOptions` say, prints the one startup text both commands print (how to
connect ably-python, ably-js and ``ai-transport tail`` to it), and serves until cancelled. A bind
that fails (a port in use, a host that is not this machine's, dev mode on a public interface) is a
:class:`LaunchError` with a one-line message.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import sys
from typing import Any, TextIO

from .client import client_options, connect_info
from .options import EmulatorOptions
from .sandbox import Sandbox
from .server import Emulator

__all__ = ["LaunchError", "connection_help", "limits_line", "sandbox_help", "serve"]


class LaunchError(Exception):
    """The emulator could not start; the message is one line saying why and what to do."""


def connection_help(url: str, key: str) -> str:
    """How to point ably-python, ably-js and ``ai-transport tail`` at the emulator at ``url``."""
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


def _bind_error(options: EmulatorOptions, exc: OSError) -> LaunchError:
    where = f"{options.host}:{options.port}"
    if exc.errno == errno.EADDRINUSE:
        return LaunchError(
            f"port {options.port} on {options.host} is already in use; pick another with --port N "
            "(or --port 0 for any free port)"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return LaunchError(f"cannot listen on {where}: {options.host} is not an address of this machine (--host)")
    reason = exc.strerror or str(exc) or type(exc).__name__
    return LaunchError(f"cannot listen on {where}: {reason} (check --host and --port)")


async def serve(options: EmulatorOptions, out: TextIO | None = None) -> None:
    """Start as ``options`` say, print the startup text to ``out`` (stdout), serve until cancelled."""
    out = out or sys.stdout
    if options.verbose:
        logging.getLogger("ai_transport.emulator").setLevel(logging.DEBUG)
    server: Emulator | Sandbox
    try:
        if options.sandbox:
            server = Sandbox(options.host, options.port, **options.sandbox_kwargs())
        else:
            server = Emulator(options.host, options.port, **options.emulator_kwargs())
        await server.start()
    except ValueError as exc:  # dev mode on a non-loopback host, a malformed key
        raise LaunchError(str(exc)) from None
    except OverflowError as exc:
        raise LaunchError(f"cannot listen on {options.host}:{options.port}: {exc}") from None
    except OSError as exc:
        raise _bind_error(options, exc) from None
    try:
        if isinstance(server, Sandbox):
            print(sandbox_help(server.url), file=out, flush=True)
        else:
            print(connection_help(server.url, server.key), file=out, flush=True)
            print(limits_line(options.rate_limits), file=out, flush=True)
        await asyncio.Event().wait()
    finally:
        await server.stop()
