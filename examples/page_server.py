"""What the page examples' servers share (``browser/server.py``, ``usechat/server.py``).

An aiohttp server for one page on the local emulator: the page's own files and nothing else,
``GET /config.json`` (where the page connects), ``GET /health`` (whether the emulator answers),
``GET /token-request?channel=<namespace>:<id>`` (a signed least-privilege Ably ``TokenRequest`` for
the page's client id on that one conversation channel; the key stays in this process) and a
``POST`` route that takes a run's invocation (``{"inputEventId", "sessionName", ...}``), binds it to
the client id the tokens give the page and wakes the agent in the background (``202`` at once). Also
the command line both share: the options, their one-line refusals and exit codes, and serving until
interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, ClassVar, NoReturn
from urllib.parse import urlsplit

from aiohttp import web

log = logging.getLogger("page-example")

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
#: A conversation id: what follows ``<namespace>:`` in a conversation's channel name.
CONVERSATION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The files a page is made of (nothing else under its example's folder is served).
PAGE_FILES = {"index.html": "text/html", "style.css": "text/css", "dist/app.js": "text/javascript"}


class UsageError(Exception):
    """A bad option or an unusable environment: printed as one line, exit code 2 (1 for runtime)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def run_build(cwd: Path, steps: Sequence[tuple[str, list[str]]], shown: int = 2) -> None:
    """Run each ``(announcement, command)`` in ``cwd``; a missing npm or a failing step is a
    :class:`UsageError` (exit 1) naming the command by its first ``shown`` words."""
    try:
        for announcement, command in steps:
            print(announcement, file=sys.stderr)
            subprocess.run(command, cwd=cwd, check=True)
    except FileNotFoundError as e:
        raise UsageError("npm (Node.js 18+) is needed once to install and bundle the page's packages", 1) from e
    except subprocess.CalledProcessError as e:
        raise UsageError(f"building the page failed ({' '.join(map(str, e.cmd[:shown]))} exited {e.returncode})",
                         1) from e


#: ``npm ci``, quietly.
NPM_CI = ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"]


def conversation_channel(namespace: str, channel: Any) -> str | None:
    """``channel`` when it names a conversation of ``namespace`` (``<namespace>:<id>``), else None."""
    if not isinstance(channel, str) or not channel.startswith(namespace + ":"):
        return None
    return channel if CONVERSATION_ID.fullmatch(channel[len(namespace) + 1:]) else None


async def emulator_reachable(url: str, timeout: float = 1.0) -> bool:
    """Whether something accepts connections at the emulator's host and port."""
    parts = urlsplit(url)
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname or "127.0.0.1", parts.port or 80), timeout
        )
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


class PageServer:
    """The page, ``/config.json``, ``/health``, ``/token-request`` and ``POST <invoke_path>`` on aiohttp.

    A subclass names the page's folder (``root``) and the invocation route (``invoke_path``).
    ``token_request(channel)`` signs a TokenRequest for one conversation channel (without one,
    ``/token-request`` is 404); ``probe()`` says whether the emulator answers; ``config["namespace"]``
    bounds which channels either route accepts. The agent's failures are kept in ``errors``.
    """

    root: ClassVar[Path]
    invoke_path: ClassVar[str]

    def __init__(
        self,
        config: dict[str, Any],
        on_invoke: Handler,
        token_request: Callable[[str], dict[str, Any]] | None = None,
        probe: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.config = config
        self.namespace = str(config["namespace"])
        self.on_invoke = on_invoke
        self.token_request = token_request
        self.probe = probe
        self.tasks: set[asyncio.Task[None]] = set()
        self.errors: list[BaseException] = []
        self._runner: web.AppRunner | None = None
        self.app = web.Application()
        self.app.router.add_get("/config.json", self._config)
        self.app.router.add_get("/health", self._health)
        self.app.router.add_get("/token-request", self._token_request)
        self.app.router.add_post(self.invoke_path, self._invoke_route)
        self.app.router.add_get("/", self._static)
        for rel in PAGE_FILES:
            self.app.router.add_get(f"/{rel}", self._static)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen; return the bound port (``OSError`` when the port cannot be had)."""
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        return int(runner.addresses[0][1])

    async def close(self) -> None:
        """Stop listening and wait for running agent invocations."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)

    # -- routes ---------------------------------------------------------------------------------

    async def _config(self, request: web.Request) -> web.Response:
        return web.json_response(self.config, headers={"Cache-Control": "no-store"})

    async def _health(self, request: web.Request) -> web.Response:
        up = True if self.probe is None else await self.probe()
        return web.json_response({"emulator": "up" if up else "down"}, headers={"Cache-Control": "no-store"})

    async def _token_request(self, request: web.Request) -> web.Response:
        if self.token_request is None:
            raise web.HTTPNotFound(text="not found")
        channel = conversation_channel(self.namespace, request.query.get("channel"))
        if channel is None:
            raise web.HTTPBadRequest(text=f"channel must be {self.namespace}:<id> (id: letters, digits, _ or -)")
        return web.json_response(self.token_request(channel), headers={"Cache-Control": "no-store"})

    async def _invoke_route(self, request: web.Request) -> web.Response:
        try:
            invocation = json.loads(await request.read())
        except ValueError as e:
            raise web.HTTPBadRequest(text=f"invalid JSON: {e}") from e
        except RecursionError as e:  # nested deeper than the parser's stack
            raise web.HTTPBadRequest(text="invalid JSON: nested too deeply") from e
        if not isinstance(invocation, dict) or not isinstance(invocation.get("inputEventId"), str):
            raise web.HTTPBadRequest(text="expected a run invocation {inputEventId, sessionName}")
        if conversation_channel(self.namespace, invocation.get("sessionName")) is None:
            raise web.HTTPBadRequest(text=f"sessionName must be a conversation channel {self.namespace}:<id>")
        client_id = self.config.get("clientId")
        if isinstance(client_id, str):
            # The identity this server's tokens give the page: the worker acts only on that client's
            # wire with this event-id (a member copying the id into a prompt of theirs is never
            # answered), and it need not read history to its start to know the trigger is settled.
            invocation = {**invocation, "inputClientId": client_id}
        task = asyncio.create_task(self._invoke(invocation))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return web.json_response({"accepted": True}, status=202)

    async def _static(self, request: web.Request) -> web.StreamResponse:
        rel = request.path.lstrip("/") or "index.html"
        ctype = PAGE_FILES.get(rel)
        if ctype is None or not (self.root / rel).is_file():  # the bundle is not built yet
            raise web.HTTPNotFound(text="not found")
        return web.Response(body=(self.root / rel).read_bytes(), content_type=ctype,
                            headers={"Cache-Control": "no-store"})

    async def _invoke(self, invocation: dict[str, Any]) -> None:
        try:
            outcome = await self.on_invoke(invocation)
            log.info("run %s: %s", invocation.get("inputEventId"), outcome)
        except Exception as e:  # keep serving; report the failure
            self.errors.append(e)
            log.exception("agent invocation failed")
            print(f"agent error: {e}", file=sys.stderr, flush=True)


def ably_js_options(emulator_url: str, auth_url: str | None = None) -> dict[str, Any]:
    """ably-js client options for the local emulator without a shared token (the page authenticates
    through ``authUrl``: ``/token-request`` on this server; given here when ``auth_url`` is)."""
    from ai_transport.emulator.client import connect_info

    options = connect_info(emulator_url)
    options.pop("token", None)
    # The page asks /health whether the emulator answers; ably-js's own check, an XHR to the emulator
    # when a socket drops, logged a console error (ERR_CONNECTION_REFUSED) whenever it lost the race
    # with the page's teardown: the page's check is the one that counts.
    options["disableConnectivityCheck"] = True
    if auth_url is not None:
        options["authUrl"] = auth_url
    return options


def browser_token_request(client_id: str, key: str | None = None) -> Callable[[str], dict[str, Any]]:
    """What ``/token-request`` answers: a fresh signed TokenRequest for ``client_id`` on one channel."""
    from ai_transport.auth import browser_token_params, create_token_request
    from ai_transport.emulator.auth import DEFAULT_KEY

    return lambda channel: create_token_request(key or DEFAULT_KEY, browser_token_params(client_id, channel))


def check_args(args: argparse.Namespace) -> None:
    """Refuse bad options with one clear line (:class:`UsageError`)."""
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {args.port}")
    parts = urlsplit(args.emulator)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
        raise UsageError(f"--emulator must be a URL like http://127.0.0.1:8090, got {args.emulator!r}")
    if not CONVERSATION_ID.fullmatch(args.namespace):
        raise UsageError(f"--namespace must be letters, digits, _ or - (1-64 of them), got {args.namespace!r}")
    if args.stream_delay < 0:
        raise UsageError(f"--stream-delay must be 0 or more seconds, got {args.stream_delay}")


async def serve_page(
    label: str,
    server: PageServer,
    args: argparse.Namespace,
    prepare: Callable[[], Awaitable[None]],
    down_note: str = "",
) -> None:
    """Listen (a port in use or refused is a one-line :class:`UsageError`, exit 1, before anything is
    built or started), ``prepare()`` (build the page, start the agent), say where the page is, and
    serve until cancelled."""
    try:
        port = await server.start(args.host, args.port)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(f"port {args.port} on {args.host} is already in use; pick another with --port N "
                             "(or --port 0 for any free port)", 1) from e
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}", 1) from e
    try:
        await prepare()
        print(f"{label}: open http://{args.host}:{port}/  (conversations on channels "
              f"'{args.namespace}:<id>')", flush=True)
        if not await emulator_reachable(args.emulator):
            print(f"{label}: note: no emulator answers at {args.emulator} yet (start one with "
                  f"`ai-transport emulator`){down_note}", file=sys.stderr, flush=True)
        await asyncio.Event().wait()
    finally:
        await server.close()


class PageParser(argparse.ArgumentParser):
    """The options every page example takes, with argparse's errors on one line."""

    def __init__(self, label: str, description: str, namespace: str, stream_delay: float,
                 stream_delay_help: str) -> None:
        super().__init__(description=description)
        self.label = label
        self.add_argument("--emulator", default=os.environ.get("AIT_EMULATOR_URL", "http://127.0.0.1:8090"),
                          help="URL of a running emulator (start one with `ai-transport emulator`)")
        self.add_argument("--host", default="127.0.0.1")
        self.add_argument("--port", type=int, default=8000, help="0 picks a free port")
        self.add_argument("--namespace", default=namespace,
                          help=f"conversations live on channels NAMESPACE:<id> (default {namespace})")
        self.add_argument("--stream-delay", type=float, default=stream_delay,
                          help=f"{stream_delay_help} (default {stream_delay})")

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.label}: error: {message} (see --help)\n")


def sdk_line(record: logging.LogRecord) -> bool:
    """A log filter: what the ``ably`` SDK logs (a dropped or refused connection while the emulator
    is away, retried on its own) is its one line, never its traceback; the page says the rest."""
    if record.name == "ably" or record.name.startswith("ably."):
        record.exc_info = record.exc_text = record.stack_info = None
    return True


def run_cli(parser: PageParser, serve: Callable[[argparse.Namespace], Coroutine[Any, Any, None]]) -> int:
    """Parse, check and serve until interrupted; returns the exit code (a :class:`UsageError` is one
    line on stderr)."""
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    for handler in logging.getLogger().handlers:
        handler.addFilter(sdk_line)
    try:
        check_args(args)
        asyncio.run(serve(args))
    except UsageError as e:
        print(f"{parser.label}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        pass
    return 0
