"""Serve the ``useChat`` page and wake the Python agent when its chat transport asks.

    python examples/usechat/server.py --emulator http://127.0.0.1:8090 [--port 8000] [--namespace NAME]

Each conversation is one Ably channel, ``<namespace>:<id>`` (the page keeps its id in the URL,
``?c=<id>``; a reload reads the conversation back from channel history). Routes (aiohttp):

* ``GET /``, ``/style.css``, ``/dist/app.js``: the page and its bundle (React, ``@ai-sdk/react``,
  ``ai``, ``ably`` and ``@ably/ai-transport`` from npm, bundled by esbuild on first start: ``npm ci``
  + ``npm run build`` when missing or stale; by hand: ``cd examples/usechat && npm ci && npm run build``).
  Nothing comes from a CDN: the page works offline.
* ``GET /config.json``: where the page connects (the emulator's ably-js options, the namespace, the
  page's client id).
* ``GET /health``: whether the emulator answers.
* ``GET /token-request?channel=<namespace>:<id>``: the page's ``authUrl``: a signed Ably
  ``TokenRequest`` for the page's client id with the least-privilege browser capability on that one
  channel; ably-js exchanges it at the emulator. The key stays in this process.
* ``POST /api/chat``: where 0.8.0's ``createChatTransport`` POSTs a run's invocation
  (``{"inputEventId", "sessionName", ...}``; ``/api/chat`` is ``useChat``'s usual endpoint): wakes the
  agent of ``chat_agent.py`` (a fresh session per wake-up, nothing kept between them; with
  ``--worker-process`` a process of its own per wake-up), which loads the channel, starts or resumes
  the run and streams it. Answers ``202`` at once.
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
sys.path.insert(0, str(HERE))  # chat_agent.py

log = logging.getLogger("usechat-example")

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
#: A conversation id: what follows ``<namespace>:`` in a conversation's channel name.
CONVERSATION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The files the page is made of (nothing else under examples/usechat is served).
PAGE_FILES = {"index.html": "text/html", "style.css": "text/css", "dist/app.js": "text/javascript"}
#: What the bundle is built from (a newer one rebuilds it).
SOURCES = ("app.jsx", "package-lock.json")


class UsageError(Exception):
    """A bad option or an unusable environment: printed as one line, exit code 2 (1 for runtime)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def packages_installed() -> bool:
    """Whether ``node_modules`` holds the versions ``package-lock.json`` pins for every package
    ``package.json`` names (a changed lockfile means ``npm ci`` again)."""
    try:
        packages = json.loads((HERE / "package-lock.json").read_text(encoding="utf-8"))["packages"]
        root = packages[""]
        for name in {**root.get("dependencies", {}), **root.get("devDependencies", {})}:
            installed = json.loads((HERE / "node_modules" / name / "package.json").read_text(encoding="utf-8"))
            if installed.get("version") != packages[f"node_modules/{name}"]["version"]:
                return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return (HERE / "node_modules" / ".bin" / "esbuild").exists()


def ensure_bundle() -> Path:
    """Build ``dist/app.js`` with esbuild (``npm ci`` first when the packages are missing or the
    lockfile changed); a bundle newer than its sources is kept."""
    bundle = HERE / "dist" / "app.js"
    newest = max((HERE / s).stat().st_mtime for s in SOURCES)
    if bundle.exists() and bundle.stat().st_mtime >= newest and packages_installed():
        return bundle
    try:
        if not packages_installed():
            print("installing the page's npm packages (npm ci)…", file=sys.stderr)
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True)
        print("bundling app.jsx with esbuild…", file=sys.stderr)
        subprocess.run(["npm", "run", "--silent", "build"], cwd=HERE, check=True)
    except FileNotFoundError as e:
        raise UsageError("npm (Node.js 18+) is needed once to install and bundle the page's packages", 1) from e
    except subprocess.CalledProcessError as e:
        raise UsageError(f"building the page failed ({' '.join(map(str, e.cmd[:3]))} exited {e.returncode})", 1) from e
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


class ChatServer:
    """The page, ``/config.json``, ``/health``, ``/token-request`` and ``POST /api/chat`` on aiohttp."""

    def __init__(
        self,
        config: dict[str, Any],
        on_invoke: Handler,
        token_request: Callable[[str], dict[str, Any]],
        probe: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.config = config
        self.namespace = str(config["namespace"])
        self.on_invoke = on_invoke
        self.token_request = token_request
        self.probe = probe
        self.tasks: set[asyncio.Task[None]] = set()
        self._runner: web.AppRunner | None = None
        self.app = web.Application()
        self.app.router.add_get("/config.json", self._config)
        self.app.router.add_get("/health", self._health)
        self.app.router.add_get("/token-request", self._token_request)
        self.app.router.add_post("/api/chat", self._chat)
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
        """Stop listening and wait for running agent wake-ups."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _config(self, request: web.Request) -> web.Response:
        return web.json_response(self.config, headers={"Cache-Control": "no-store"})

    async def _health(self, request: web.Request) -> web.Response:
        up = True if self.probe is None else await self.probe()
        return web.json_response({"emulator": "up" if up else "down"}, headers={"Cache-Control": "no-store"})

    async def _token_request(self, request: web.Request) -> web.Response:
        channel = conversation_channel(self.namespace, request.query.get("channel"))
        if channel is None:
            raise web.HTTPBadRequest(text=f"channel must be {self.namespace}:<id> (id: letters, digits, _ or -)")
        return web.json_response(self.token_request(channel), headers={"Cache-Control": "no-store"})

    async def _chat(self, request: web.Request) -> web.Response:
        try:
            invocation = json.loads(await request.read())
        except ValueError as e:
            raise web.HTTPBadRequest(text=f"invalid JSON: {e}") from e
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
        task = asyncio.create_task(self._wake(invocation))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return web.json_response({"accepted": True}, status=202)

    async def _static(self, request: web.Request) -> web.StreamResponse:
        rel = request.path.lstrip("/") or "index.html"
        ctype = PAGE_FILES.get(rel)
        if ctype is None or not (HERE / rel).is_file():
            raise web.HTTPNotFound(text="not found")
        return web.Response(body=(HERE / rel).read_bytes(), content_type=ctype, headers={"Cache-Control": "no-store"})

    async def _wake(self, invocation: dict[str, Any]) -> None:
        try:
            outcome = await self.on_invoke(invocation)
            log.info("run %s: %s", invocation.get("inputEventId"), outcome)
        except Exception as e:  # keep serving; report the failure
            log.exception("agent wake-up failed")
            print(f"agent error: {e}", file=sys.stderr, flush=True)


def ably_js_options(emulator_url: str) -> dict[str, Any]:
    """ably-js client options for the local emulator, without a token (the page uses ``authUrl``)."""
    from ai_transport.emulator.client import connect_info

    options = connect_info(emulator_url)
    options.pop("token", None)
    return options


def browser_token_request(client_id: str) -> Callable[[str], dict[str, Any]]:
    """What ``/token-request`` answers: a fresh signed TokenRequest for ``client_id`` on one channel."""
    from ai_transport.auth import browser_token_params, create_token_request
    from ai_transport.emulator.auth import DEFAULT_KEY

    return lambda channel: create_token_request(DEFAULT_KEY, browser_token_params(client_id, channel))


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


def worker_process(emulator_url: str, stream_delay: float) -> Handler:
    """A wake-up as its own process (``python chat_agent.py``), as a serverless function would run
    it: the outcome it prints, or an error with its last stderr line."""

    async def wake(invocation: dict[str, Any]) -> str:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(HERE / "chat_agent.py"), "--emulator", emulator_url,
            "--stream-delay", str(stream_delay), json.dumps(invocation),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError((err.decode(errors="replace").strip().splitlines() or ["no output"])[-1])
        return str(json.loads(out.decode().strip().splitlines()[-1])["outcome"])

    return wake


async def serve(args: argparse.Namespace) -> None:
    """Run the example until interrupted."""
    from chat_agent import ChatAgent

    if args.worker_process:
        on_invoke = worker_process(args.emulator, args.stream_delay)
    else:
        on_invoke = ChatAgent.for_emulator(args.emulator, stream_delay=args.stream_delay).handle_invocation
    client_id = "browser-user"
    config = {"ably": ably_js_options(args.emulator), "namespace": args.namespace, "clientId": client_id}
    server = ChatServer(config, on_invoke, browser_token_request(client_id),
                        probe=lambda: emulator_reachable(args.emulator))
    try:  # the port first: a bad one is refused before anything is built
        port = await server.start(args.host, args.port)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(f"port {args.port} on {args.host} is already in use; pick another with --port N "
                             "(or --port 0 for any free port)", 1) from e
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}", 1) from e
    try:
        await asyncio.to_thread(ensure_bundle)
        print(f"usechat example: open http://{args.host}:{port}/  (conversations on channels "
              f"'{args.namespace}:<id>')", flush=True)
        if not await emulator_reachable(args.emulator):
            print(f"usechat example: note: no emulator answers at {args.emulator} yet (start one with "
                  "`ai-transport emulator`)", file=sys.stderr, flush=True)
        await asyncio.Event().wait()
    finally:
        await server.close()


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"usechat example: error: {message} (see --help)\n")


def main() -> int:
    """Command line of the example server; returns the exit code."""
    p = _Parser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--emulator", default=os.environ.get("AIT_EMULATOR_URL", "http://127.0.0.1:8090"),
                   help="URL of a running emulator (start one with `ai-transport emulator`)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    p.add_argument("--namespace", default="usechat",
                   help="conversations live on channels NAMESPACE:<id> (default usechat)")
    p.add_argument("--stream-delay", type=float, default=0.02,
                   help="seconds between the scripted model's chunks (default 0.02)")
    p.add_argument("--worker-process", action="store_true",
                   help="run every wake-up as its own `python chat_agent.py` process (as a serverless "
                        "function would) instead of a fresh session in this process")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    try:
        check_args(args)
        asyncio.run(serve(args))
    except UsageError as e:
        print(f"usechat example: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
