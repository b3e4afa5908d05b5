"""Serve the browser example and wake the Python agent when the page asks.

    python examples/browser/server.py --emulator http://127.0.0.1:8090 [--port 8000] [--channel NAME]

* ``GET /`` and static files: ``index.html`` and the bundle ``dist/app.js`` (built on first start
  with ``npm ci`` + esbuild when missing, or by hand: ``cd examples/browser && npm ci && npm run build``).
* ``GET /config.json``: where the page connects (the emulator, the channel, a client id).
* ``GET /token-request``: the page's ``authUrl``: a signed Ably ``TokenRequest``
  (``ai_transport.auth.create_token_request``) for the page's client id with the least-privilege
  browser capability on the channel only (no ``message-update-*`` / ``message-delete-*``); ably-js
  exchanges it at the emulator. The key stays in this process.
* ``POST /invoke`` with ``{"inputEventId", "sessionName"}`` (a run's invocation, exactly what
  ``run.toInvocation().toJSON()`` gives in ably-js): wakes the agent worker of
  ``examples/agent_worker.py``, which loads the channel, starts or resumes the run and streams it.
  Answers ``202`` at once; the agent runs in the background.

The model behind the agent is the local scripted Responses server (no API key), or the real API
when ``OPENAI_API_KEY`` is set and ``--model`` is given.

A deliberately tiny HTTP/1.1 server on asyncio (no framework): one request per connection.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import mimetypes
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # examples/ (agent_worker)

log = logging.getLogger("browser-example")

Handler = Callable[[dict[str, Any]], Awaitable[None]]


def ensure_bundle() -> Path:
    """Build ``dist/app.js`` from ``app.js`` with esbuild (installing npm dependencies if needed)."""
    bundle = HERE / "dist" / "app.js"
    if bundle.exists() and bundle.stat().st_mtime >= (HERE / "app.js").stat().st_mtime:
        return bundle
    if not (HERE / "node_modules" / ".bin" / "esbuild").exists():
        print("installing the page's npm dependencies (npm ci)…", file=sys.stderr)
        try:
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True)
        except FileNotFoundError as e:
            raise SystemExit("npm (Node.js 18+) is needed once to install and bundle the page's packages") from e
    print("bundling app.js with esbuild…", file=sys.stderr)
    subprocess.run(
        [str(HERE / "node_modules" / ".bin" / "esbuild"), "app.js", "--bundle", "--format=esm",
         "--target=es2020", "--outfile=dist/app.js", "--log-level=warning"],
        cwd=HERE,
        check=True,
    )
    return bundle


class ExampleServer:
    """Static files + ``/config.json`` + ``POST /invoke`` on one asyncio server."""

    def __init__(
        self,
        config: dict[str, Any],
        on_invoke: Handler,
        token_request: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.config = config
        self.on_invoke = on_invoke
        self.token_request = token_request
        self.tasks: set[asyncio.Task[None]] = set()
        self.errors: list[BaseException] = []
        self._server: asyncio.base_events.Server | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen; return the bound port."""
        self._server = await asyncio.start_server(self._handle, host, port)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening and wait for running agent invocations."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            status, ctype, payload = await self._route(method, urlsplit(target).path, body)
        except (asyncio.IncompleteReadError, ValueError, ConnectionError):
            writer.close()
            return
        reason = {200: "OK", 202: "Accepted", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
        writer.write(
            f"HTTP/1.1 {status} {reason.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(payload)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n".encode()
            + payload
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    async def _route(self, method: str, path: str, body: bytes) -> tuple[int, str, bytes]:
        if path == "/invoke":
            if method != "POST":
                return 405, "text/plain", b"POST only"
            try:
                invocation = json.loads(body)
            except ValueError as e:
                return 400, "text/plain", f"invalid JSON: {e}".encode()
            if not isinstance(invocation, dict) or not isinstance(invocation.get("inputEventId"), str):
                return 400, "text/plain", b"expected {inputEventId, sessionName}"
            task = asyncio.create_task(self._invoke(invocation))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            return 202, "application/json", b'{"accepted":true}'
        if method != "GET":
            return 405, "text/plain", b"GET only"
        if path == "/token-request" and self.token_request is not None:
            return 200, "application/json", json.dumps(self.token_request()).encode()
        if path == "/config.json":
            return 200, "application/json", json.dumps(self.config).encode()
        rel = "index.html" if path in ("", "/") else path.lstrip("/")
        file = (HERE / rel).resolve()
        if HERE not in file.parents or not file.is_file() or "node_modules" in file.parts:
            return 404, "text/plain", b"not found"
        ctype = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if file.suffix in (".js", ".mjs"):
            ctype = "text/javascript"
        return 200, ctype, file.read_bytes()

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


def browser_token_request(client_id: str, channel: str, key: str | None = None) -> Callable[[], dict[str, Any]]:
    """What ``/token-request`` answers: a fresh signed TokenRequest for ``client_id`` on ``channel``."""
    from ai_transport.auth import browser_token_params, create_token_request
    from ai_transport.emulator.auth import DEFAULT_KEY

    params = browser_token_params(client_id, channel)
    return lambda: create_token_request(key or DEFAULT_KEY, params)


async def serve(args: argparse.Namespace) -> None:
    """Run the example until interrupted."""
    from agent_worker import AgentWorker

    ensure_bundle()
    worker = AgentWorker.for_emulator(args.emulator, model=args.model)
    await worker.start()
    client_id = "browser-user"
    config = {"ably": ably_js_options(args.emulator), "channel": args.channel, "clientId": client_id}
    server = ExampleServer(config, worker.handle_invocation, browser_token_request(client_id, args.channel))
    port = await server.start(args.host, args.port)
    print(f"browser example: open http://{args.host}:{port}/  (channel {args.channel!r})", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()
        await worker.close()


def main() -> None:
    """Command line of the example server."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--emulator", default=os.environ.get("AIT_EMULATOR_URL", "http://127.0.0.1:8090"),
                   help="URL of a running emulator (start one with `ai-transport emulator`)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--channel", default="browser-demo")
    p.add_argument("--model", default=None, help="with OPENAI_API_KEY: use the real API with this model")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args))


if __name__ == "__main__":
    main()
