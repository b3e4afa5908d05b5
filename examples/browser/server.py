"""Serve the browser example and wake the Python agent when the page asks.

    python examples/browser/server.py --emulator http://127.0.0.1:8090 [--port 8000] [--namespace NAME]

Each conversation is one Ably channel, ``<namespace>:<id>`` (the page keeps its id in the URL,
``?c=<id>``, and in localStorage, so a reload comes back to the same conversation; "New
conversation" picks a fresh id). Routes (aiohttp):

* ``GET /``, ``/style.css``, ``/dist/app.js``: the page and its bundle (built on first start with
  ``npm ci`` + esbuild when missing, or by hand: ``cd examples/browser && npm ci && npm run build``).
  Nothing comes from a CDN: the page works offline.
* ``GET /config.json``: where the page connects (the emulator's ably-js options, the namespace, the
  page's client id).
* ``GET /health``: whether the emulator answers (the page waits on this instead of letting ably-js
  retry a dead socket, and says so on screen).
* ``GET /token-request?channel=<namespace>:<id>``: the page's ``authUrl``: a signed Ably
  ``TokenRequest`` (``ai_transport.auth.create_token_request``) for the page's client id with the
  least-privilege browser capability on that one conversation channel (no ``message-update-*`` /
  ``message-delete-*``); ably-js exchanges it at the emulator. The key stays in this process.
* ``POST /invoke`` with ``{"inputEventId", "sessionName"}`` (a run's invocation, exactly what
  ``run.toInvocation().toJSON()`` gives in ably-js): wakes the agent worker of
  ``examples/agent_worker.py``, which loads the channel, starts or resumes the run and streams it.
  Answers ``202`` at once; the agent runs in the background.

The model behind the agent is the local scripted Responses server (no API key), or the real API
when ``OPENAI_API_KEY`` is set and ``--model`` is given.
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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from aiohttp import web

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # examples/ (agent_worker)

log = logging.getLogger("browser-example")

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
#: A conversation id: what follows ``<namespace>:`` in a conversation's channel name.
CONVERSATION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The files the page is made of (nothing else under examples/browser is served).
PAGE_FILES = {"index.html": "text/html", "style.css": "text/css", "dist/app.js": "text/javascript"}


class UsageError(Exception):
    """A bad option or an unusable environment: printed as one line, exit code 2 (1 for runtime)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def ensure_bundle() -> Path:
    """Build ``dist/app.js`` from ``app.js`` with esbuild (installing npm dependencies if needed)."""
    bundle = HERE / "dist" / "app.js"
    if bundle.exists() and bundle.stat().st_mtime >= (HERE / "app.js").stat().st_mtime:
        return bundle
    try:
        if not (HERE / "node_modules" / ".bin" / "esbuild").exists():
            print("installing the page's npm dependencies (npm ci)…", file=sys.stderr)
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True)
        print("bundling app.js with esbuild…", file=sys.stderr)
        subprocess.run(
            [str(HERE / "node_modules" / ".bin" / "esbuild"), "app.js", "--bundle", "--format=esm",
             "--target=es2020", "--outfile=dist/app.js", "--log-level=warning"],
            cwd=HERE,
            check=True,
        )
    except FileNotFoundError as e:
        raise UsageError("npm (Node.js 18+) is needed once to install and bundle the page's packages", 1) from e
    except subprocess.CalledProcessError as e:
        raise UsageError(f"building the page failed ({' '.join(map(str, e.cmd[:2]))} exited {e.returncode})", 1) from e
    return bundle


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


class ExampleServer:
    """The page, ``/config.json``, ``/health``, ``/token-request`` and ``POST /invoke`` on aiohttp.

    ``token_request(channel)`` signs a TokenRequest for one conversation channel; ``probe()`` says
    whether the emulator answers; ``namespace`` bounds which channels either route accepts.
    """

    def __init__(
        self,
        config: dict[str, Any],
        on_invoke: Handler,
        token_request: Callable[[str], dict[str, Any]] | None = None,
        probe: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.config = config
        self.namespace = str(config.get("namespace", "browser-demo"))
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
        self.app.router.add_post("/invoke", self._invoke_route)
        self.app.router.add_get("/", self._static)
        for rel in PAGE_FILES:
            self.app.router.add_get(f"/{rel}", self._static)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen; return the bound port (``OSError`` when the port cannot be had)."""
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
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
        if not isinstance(invocation, dict) or not isinstance(invocation.get("inputEventId"), str):
            raise web.HTTPBadRequest(text="expected {inputEventId, sessionName}")
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
        if ctype is None or not (HERE / rel).is_file():  # the bundle is not built yet
            raise web.HTTPNotFound(text="not found")
        return web.Response(body=(HERE / rel).read_bytes(), content_type=ctype,
                            headers={"Cache-Control": "no-store"})

    async def _invoke(self, invocation: dict[str, Any]) -> None:
        try:
            await self.on_invoke(invocation)
        except Exception as e:  # keep serving; report the failure
            self.errors.append(e)
            log.exception("agent invocation failed")
            print(f"agent error: {e}", file=sys.stderr, flush=True)


def ably_js_options(emulator_url: str) -> dict[str, Any]:
    """ably-js client options for the local emulator, authenticated through ``authUrl``
    (``/token-request`` on this server) instead of a shared token."""
    from ai_transport.emulator.client import connect_info

    options = connect_info(emulator_url)
    options.pop("token", None)
    options["authUrl"] = "/token-request"
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
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", args.namespace):
        raise UsageError(f"--namespace must be letters, digits, _ or - (1-64 of them), got {args.namespace!r}")
    if args.stream_delay < 0:
        raise UsageError(f"--stream-delay must be 0 or more seconds, got {args.stream_delay}")


async def serve(args: argparse.Namespace) -> None:
    """Run the example until interrupted."""
    from agent_worker import AgentWorker

    worker = AgentWorker.for_emulator(args.emulator, model=args.model)
    worker.stream_delay = args.stream_delay
    client_id = "browser-user"
    config = {"ably": ably_js_options(args.emulator), "namespace": args.namespace, "clientId": client_id,
              "emulator": args.emulator}
    server = ExampleServer(config, worker.handle_invocation, browser_token_request(client_id),
                           probe=lambda: emulator_reachable(args.emulator))
    try:  # the port first: a bad one is refused before anything is built or started
        port = await server.start(args.host, args.port)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(f"port {args.port} on {args.host} is already in use; pick another with --port N "
                             "(or --port 0 for any free port)", 1) from e
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}", 1) from e
    try:
        ensure_bundle()
        await worker.start()
        print(f"browser example: open http://{args.host}:{port}/  (conversations on channels "
              f"'{args.namespace}:<id>')", flush=True)
        if not await emulator_reachable(args.emulator):
            print(f"browser example: note: no emulator answers at {args.emulator} yet (start one with "
                  "`ai-transport emulator`); the page says so until one does", file=sys.stderr, flush=True)
        await asyncio.Event().wait()
    finally:
        await server.close()
        await worker.close()


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"browser example: error: {message} (see --help)\n")


def main() -> int:
    """Command line of the example server; returns the exit code."""
    p = _Parser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--emulator", default=os.environ.get("AIT_EMULATOR_URL", "http://127.0.0.1:8090"),
                   help="URL of a running emulator (start one with `ai-transport emulator`)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--namespace", default="browser-demo",
                   help="conversations live on channels NAMESPACE:<id> (default browser-demo)")
    p.add_argument("--model", default=None, help="with OPENAI_API_KEY: use the real API with this model")
    p.add_argument("--stream-delay", type=float, default=0.01,
                   help="seconds between the scripted model's stream events (default 0.01)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    try:
        check_args(args)
        asyncio.run(serve(args))
    except UsageError as e:
        print(f"browser example: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
