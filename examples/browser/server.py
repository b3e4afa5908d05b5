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

The shared server and command line are ``examples/page_server.py``.

The model behind the agent is the local scripted Responses server (no API key), or the real API
when ``OPENAI_API_KEY`` is set and ``--model`` is given.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # examples/ (agent_worker, page_server)

from page_server import (  # noqa: E402
    NPM_CI,
    PageParser,
    PageServer,
    UsageError,
    browser_token_request,
    conversation_channel,
    emulator_reachable,
    run_build,
    run_cli,
    serve_page,
)
from page_server import ably_js_options as emulator_options  # noqa: E402

__all__ = ["ExampleServer", "UsageError", "ably_js_options", "browser_token_request", "conversation_channel",
           "emulator_reachable", "ensure_bundle", "main", "serve"]


#: What the bundle is built from (a newer one rebuilds it).
SOURCES = ("app.js", "live_hold.js")


def ensure_bundle() -> Path:
    """Build ``dist/app.js`` from ``app.js`` (and the modules it imports, :data:`SOURCES`) with
    esbuild (installing npm dependencies if needed); a bundle newer than its sources is kept."""
    bundle = HERE / "dist" / "app.js"
    newest = max((HERE / s).stat().st_mtime for s in SOURCES)
    if bundle.exists() and bundle.stat().st_mtime >= newest:
        return bundle
    esbuild = HERE / "node_modules" / ".bin" / "esbuild"
    run_build(HERE, [
        *([("installing the page's npm dependencies (npm ci)…", NPM_CI)] if not esbuild.exists() else []),
        ("bundling app.js with esbuild…", [str(esbuild), "app.js", "--bundle", "--format=esm", "--target=es2020",
                                          "--outfile=dist/app.js", "--log-level=warning"]),
    ])
    return bundle


def ably_js_options(emulator_url: str) -> dict[str, Any]:
    """ably-js client options for the local emulator, authenticated through ``authUrl``
    (``/token-request`` on this server) instead of a shared token."""
    return emulator_options(emulator_url, "/token-request")


class ExampleServer(PageServer):
    """The browser page's server: its files under ``examples/browser`` and ``POST /invoke``."""

    root = HERE
    invoke_path = "/invoke"


async def serve(args: argparse.Namespace) -> None:
    """Run the example until interrupted."""
    from agent_worker import AgentWorker

    worker = AgentWorker.for_emulator(args.emulator, model=args.model)
    worker.stream_delay = args.stream_delay
    client_id = "browser-user"
    config = {"ably": ably_js_options(args.emulator), "namespace": args.namespace,
              "clientId": client_id, "emulator": args.emulator}
    server = ExampleServer(config, worker.handle_invocation, browser_token_request(client_id),
                           probe=lambda: emulator_reachable(args.emulator))

    async def prepare() -> None:
        ensure_bundle()
        await worker.start()

    try:  # the worker is closed however far it got (closing one never started is a no-op)
        await serve_page("browser example", server, args, prepare, "; the page says so until one does")
    finally:
        await worker.close()


def main() -> int:
    """Command line of the example server; returns the exit code."""
    p = PageParser("browser example", (__doc__ or "").split("\n\n")[0], namespace="browser-demo",
                   stream_delay=0.01, stream_delay_help="seconds between the scripted model's stream events")
    p.add_argument("--model", default=None, help="with OPENAI_API_KEY: use the real API with this model")
    return run_cli(p, serve)


if __name__ == "__main__":
    sys.exit(main())
