"""The emulator server: one aiohttp application on one port, Ably REST and realtime WebSocket.

A request with ``Upgrade: websocket`` at any path (ably-python and ably-js ask for ``GET /?…``)
becomes a realtime connection (:meth:`~.realtime_connections.RealtimeConnections._serve_websocket`);
every other request goes to the REST routes (:class:`~.rest.RestHandlers`). A browser ``Origin``
that is neither loopback nor allowed is refused first (403 / 40300) on both.

All state lives in one event loop: frames are handled synchronously, in arrival order, so a
channel's fan-out order is its serial order for every receiver.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from aiohttp import web
from typing_extensions import Self

from .core import log
from .guard import check_bind
from .realtime import RealtimeHandlers
from .rest import RestHandlers
from .serving import MAX_BODY, Serving

__all__ = ["Emulator", "EmulatorThread"]


class Emulator(Serving, RestHandlers, RealtimeHandlers):
    """A local Ably-compatible server (realtime + REST) on one port.

    ``async with Emulator(port=0) as emu: emu.port``. Options: ``keys`` (``["name:secret"]``,
    default :data:`~ai_transport.emulator.auth.DEFAULT_KEY`), ``strict_tokens`` (refuse tokens
    the emulator did not issue), ``max_message_size`` (65536), ``max_idle_interval`` (ms; 0 =
    no server heartbeats), ``connection_state_ttl`` (ms a dropped connection stays resumable),
    ``remain_present_for`` (ms a dropped connection's presence members stay; 15000),
    ``echo_before_ack`` (deliver a publish to subscribers, the publisher's echo included, before
    its ACK; default False: ACK first — real Ably does either, so consumers must handle both),
    ``key_capabilities`` (``{"keyName": capability JSON or map}``; a key without one grants
    everything), ``mutable_namespaces`` (namespaces whose channels allow update / delete /
    append, else 93002; default None: every channel), ``revocable_keys`` (key names whose tokens
    ``POST /keys/{keyName}/revokeTokens`` may revoke), ``allowed_origins`` (browser Origins accepted
    besides loopback ones; others get 403 / 40300 on websocket and REST), ``dev_tokens_on_any_host``
    (allow dev mode on a non-loopback bind, loudly logged; else that needs ``strict_tokens``),
    ``rate_limits`` (a :class:`~ai_transport.emulator.limits.RateLimits`: ``RateLimits()`` enforces
    Ably's inbound limits (50/s per connection and per channel, 42911 / 42913 / 42921) and its
    default ``appendRollupWindow`` of 40 ms; default :meth:`RateLimits.off`: no rate limits, no
    roll-up unless a connection asks for one; either way each subscriber's unsent bytes are bounded
    by ``max_outbound_bytes``, see :mod:`ai_transport.emulator.limits`).
    """

    # -- lifecycle ---------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        """One catch-all route: websocket upgrades and REST requests share the port."""
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{path:.*}", self._on_request)
        return app

    async def start(self) -> Emulator:
        """Bind and start serving (dev mode on a non-loopback host: see :func:`~.guard.check_bind`)."""
        check_bind(self.host, self.strict_tokens, self.dev_tokens_on_any_host)
        await self._listen()
        log.info("emulator listening on %s", self.url)
        return self

    async def stop(self) -> None:
        """Close every websocket (1001), then stop listening and close the HTTP connections."""
        sessions = list(self._sessions)
        for session in sessions:
            session.close(1001, "emulator stopping")
        if sessions:
            await asyncio.gather(*(s.finish(1.0) for s in sessions), return_exceptions=True)
        await self._close()

    async def _on_request(self, request: web.Request) -> web.StreamResponse:
        refused = self._refuse_origin(request)
        if refused is not None:
            return refused
        if "websocket" in request.headers.get("Upgrade", "").lower():
            return await self._serve_websocket(request)
        return await self._serve_rest(request)


class EmulatorThread:
    """An :class:`Emulator` on its own event loop in a daemon thread (for sync tests / node clients).

    ``with EmulatorThread() as emu: emu.port`` — or ``start()`` / ``stop()``.
    """

    def __init__(self, **options: Any) -> None:
        self.emulator = Emulator(**options)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="ai-transport-emulator", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.emulator.start())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.emulator.stop())
        self.loop.close()

    @property
    def port(self) -> int:
        """The bound port."""
        return self.emulator.port

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return self.emulator.url

    @property
    def key(self) -> str:
        """The first configured key."""
        return self.emulator.key

    def start(self) -> EmulatorThread:
        """Start the thread and wait until the port is bound."""
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        return self

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the emulator's loop and return its result."""

        async def run() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

