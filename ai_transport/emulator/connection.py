"""Per-connection state: a realtime connection, its websocket session and its channel attachments.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from dataclasses import dataclass, field
from typing import Any

from websockets.protocol import State
from websockets.server import ServerProtocol

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
    """One websocket carrying a connection."""

    def __init__(self, proto: ServerProtocol, writer: asyncio.StreamWriter, fmt: str) -> None:
        self.proto = proto
        self.writer = writer
        self.fmt = fmt
        self.closed = False
        self.expiry_task: asyncio.Task[None] | None = None

    def flush(self) -> None:
        """Write whatever the protocol has queued."""
        for chunk in self.proto.data_to_send():
            if chunk:
                self.writer.write(chunk)
            else:
                with contextlib.suppress(Exception):
                    if self.writer.can_write_eof():
                        self.writer.write_eof()

    def queued(self) -> int:
        """Bytes written but not yet taken by the peer (the transport's buffer)."""
        try:
            return int(self.writer.transport.get_write_buffer_size())
        except (AttributeError, RuntimeError):
            return 0

    def send(self, frame: dict[str, Any]) -> None:
        """Encode and send one ProtocolMessage (messages must already be rendered for ``fmt``)."""
        if self.closed or self.proto.state is not State.OPEN:
            return
        self.send_raw(encode_frame(frame, self.fmt))

    def send_raw(self, payload: bytes) -> None:
        """Send a frame encoded by :func:`encode_frame` for this session's format."""
        if self.closed or self.proto.state is not State.OPEN:
            return
        if self.fmt == "msgpack":
            self.proto.send_binary(payload)
        else:
            self.proto.send_text(payload)
        self.flush()

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Start the closing handshake."""
        if self.proto.state is State.OPEN:
            self.proto.send_close(code, reason)
            self.flush()


