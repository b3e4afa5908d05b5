"""Per-connection state: a realtime connection, its websocket session and its channel attachments.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from .auth import Principal
from .protocol import (
    DEFAULT_MODES,
    encode_frame,
)

__all__ = ["Attachment", "Connection", "WsSession"]



@dataclass
class Attachment:
    """One connection's attachment to one channel."""

    channel: str
    subscribe: bool = True
    modes: int = int(DEFAULT_MODES)
    requested: int = int(DEFAULT_MODES)  # the modes the ATTACH asked for (granted = requested & capability)
    seen: set[str] = field(default_factory=set)
    base: str | None = None  # the client holds every message with serial <= base
    # True while deliveries flow on the connection's current websocket. A dropped transport
    # pauses the attachment until the client re-attaches with its channelSerial, which replays
    # everything after it exactly once; a re-attach while live continues (RESUMED, no replay).
    live: bool = False
    # the channel's latest serial when this connection first attached: without the ``history``
    # capability a channelSerial re-attach replays nothing older (see guard.may_replay)
    joined: str | None = None

    def has_seen(self, serial: str) -> bool:
        """Whether this attachment already delivered (or the client already had) ``serial``."""
        return serial in self.seen or (self.base is not None and serial <= self.base)


class Connection:
    """A realtime connection; outlives its websocket for ``connection_state_ttl`` (resume)."""

    def __init__(
        self, conn_id: str, principal: Principal, client_id: str | None, fmt: str, echo: bool
    ) -> None:
        self.id = conn_id
        self.key = f"{conn_id}!{secrets.token_urlsafe(12)}"
        self.principal = principal
        self.client_id = client_id
        self.fmt = fmt
        self.echo = echo
        self.session: WsSession | None = None
        self.attachments: dict[str, Attachment] = {}
        self.expires_at: float | None = None  # set while detached from a websocket

    def send(self, frame: dict[str, Any]) -> None:
        """Send a ProtocolMessage if a websocket is live (dropped otherwise; replayed on re-attach)."""
        if self.session is not None:
            self.session.send(frame)


class WsSession:
    """One websocket carrying a connection: synchronous sends, written in order by one writer task.

    The emulator handles every frame synchronously (so a channel's fan-out order is its serial
    order for every receiver); :meth:`send` therefore only queues the encoded frame, and a writer
    task of the session hands the queue to aiohttp's websocket in order, awaiting its flow control
    (``drain``) when the peer reads slower than the emulator writes. :meth:`queued` counts what is
    unsent (queued here and in the transport's buffer), which the outbound bound (80020) reads.
    """

    def __init__(self, ws: web.WebSocketResponse, transport: asyncio.BaseTransport | None, fmt: str) -> None:
        self.ws = ws
        self.fmt = fmt
        self.closed = False
        self.expiry_task: asyncio.Task[None] | None = None
        self._transport = transport
        self._opcode = WSMsgType.BINARY if fmt == "msgpack" else WSMsgType.TEXT
        self._out: deque[bytes | tuple[int, str]] = deque()
        self._out_bytes = 0
        self._closing = False  # a close is queued: nothing more is sent
        self._stop = False  # the writer ends once the queue is written
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._writer = asyncio.create_task(self._write_loop())

    async def _write_loop(self) -> None:
        ws = self.ws
        out = self._out
        try:
            while True:
                if not out:
                    if self._stop:
                        return
                    self._idle.set()
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                item = out.popleft()
                if isinstance(item, tuple):
                    self._out_bytes = 0
                    out.clear()
                    await ws.close(code=item[0], message=item[1].encode("utf-8"))
                    return
                self._out_bytes -= len(item)
                await ws.send_frame(item, self._opcode)
        except (ConnectionError, RuntimeError):
            pass  # the peer went away (or aiohttp closed the websocket): nothing more to write
        finally:
            out.clear()  # unwritable now: the peer is gone
            self._out_bytes = 0
            self._idle.set()
            self.closed = True

    def queued(self) -> int:
        """Bytes sent but not yet taken by the peer (queued here and in the transport's buffer)."""
        transport = self._transport
        buffered = 0
        if isinstance(transport, asyncio.WriteTransport):
            with contextlib.suppress(AttributeError, RuntimeError):
                buffered = int(transport.get_write_buffer_size())
        return self._out_bytes + buffered

    def send(self, frame: dict[str, Any]) -> None:
        """Encode and send one ProtocolMessage (messages must already be rendered for ``fmt``)."""
        if self.closed or self._closing:
            return
        self.send_raw(encode_frame(frame, self.fmt))

    def send_raw(self, payload: bytes) -> None:
        """Send a frame encoded by :func:`encode_frame` for this session's format."""
        if self.closed or self._closing:
            return
        self._out.append(payload)
        self._out_bytes += len(payload)
        self._kick()

    def _kick(self) -> None:
        self._idle.clear()
        self._wake.set()

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Start the closing handshake once everything sent before it is written."""
        if self._closing or self._writer.done():
            return
        self._closing = True
        self._out.append((code, reason))
        self._kick()

    def abort(self) -> None:
        """Cut the transport at once (no closing handshake; what is queued is lost)."""
        self.closed = True
        self._stop = True
        self._out.clear()
        self._out_bytes = 0
        self._kick()
        if self._transport is not None:
            with contextlib.suppress(Exception):
                self._transport.abort()  # type: ignore[attr-defined]

    async def drained(self, limit: int = 0) -> None:
        """Wait until no more than ``limit`` bytes are queued here (or the writer stopped)."""
        while self._out_bytes > limit and not self._writer.done():
            await self._idle.wait()

    async def finish(self, timeout: float) -> None:
        """Let the writer write what is queued (the close included) for up to ``timeout`` s, then stop it."""
        self._stop = True
        self._kick()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._writer), timeout)
        if not self._writer.done():
            self._writer.cancel()
            with contextlib.suppress(BaseException):
                await self._writer
