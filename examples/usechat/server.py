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

The shared server and command line are ``examples/page_server.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # chat_agent.py
sys.path.insert(1, str(HERE.parent))  # examples/ (page_server)

from page_server import (  # noqa: E402
    NPM_CI,
    Handler,
    PageParser,
    PageServer,
    UsageError,
    ably_js_options,
    browser_token_request,
    conversation_channel,
    emulator_reachable,
    run_build,
    run_cli,
    serve_page,
)

__all__ = ["ChatServer", "UsageError", "ably_js_options", "browser_token_request", "conversation_channel",
           "emulator_reachable", "ensure_bundle", "main", "packages_installed", "serve", "worker_process"]

#: What the bundle is built from (a newer one rebuilds it; the browser example's live_hold.js too).
SOURCES = ("app.jsx", "package-lock.json", "../browser/live_hold.js")


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
    installed = packages_installed()
    if bundle.exists() and bundle.stat().st_mtime >= newest and installed:
        return bundle
    run_build(HERE, [
        *([("installing the page's npm packages (npm ci)…", NPM_CI)] if not installed else []),
        ("bundling app.jsx with esbuild…", ["npm", "run", "--silent", "build"]),
    ], shown=3)
    return bundle


class ChatServer(PageServer):
    """The useChat page's server: its files under ``examples/usechat`` and ``POST /api/chat``."""

    root = HERE
    invoke_path = "/api/chat"


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

    async def prepare() -> None:
        await asyncio.to_thread(ensure_bundle)

    await serve_page("usechat example", server, args, prepare)


def main() -> int:
    """Command line of the example server; returns the exit code."""
    p = PageParser("usechat example", (__doc__ or "").split("\n\n")[0], namespace="usechat",
                   stream_delay=0.02, stream_delay_help="seconds between the scripted model's chunks")
    p.add_argument("--worker-process", action="store_true",
                   help="run every wake-up as its own `python chat_agent.py` process (as a serverless "
                        "function would) instead of a fresh session in this process")
    return run_cli(p, serve)


if __name__ == "__main__":
    sys.exit(main())
