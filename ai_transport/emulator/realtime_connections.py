"""The realtime side of the emulator, its connections: websockets, authentication, resume, expiry.

:class:`RealtimeConnections` serves a websocket upgrade, authenticates it (key or token, clientId
binding), opens or resumes a :class:`~ai_transport.emulator.connection.Connection` (CONNECTED),
re-authorises before the token expires, keeps heartbeats, and drops connections whose state TTL
passed; the frames they carry are handled by :class:`~ai_transport.emulator.realtime.RealtimeHandlers`.
"""

from __future__ import annotations

import asyncio
import secrets
import urllib.parse
from typing import Any

from aiohttp import WSMsgType, web

from .auth import Principal
from .connection import Connection, WsSession
from .core import MAX_WS_FRAME, log
from .limits import parse_rollup_window
from .presence import PresenceHandlers
from .protocol import Action, EmulatorError
from .store import now_ms

__all__ = ["REAUTH_LEAD_MS", "RealtimeConnections"]

#: How long before a connection's token expires the emulator sends AUTH (Ably: 30 s).
REAUTH_LEAD_MS = 30_000
#: Seconds a closing websocket waits for the peer's close frame (and its queue to be written).
CLOSE_TIMEOUT = 2.0
#: Unsent bytes of a connection's own replies past which its frames wait before more are read.
READ_PAUSE_BYTES = 64 * 1024


class RealtimeConnections(PresenceHandlers):
    """The realtime side's connections: websockets, authentication, resume, token expiry, drops."""

    # -- websocket ---------------------------------------------------------------------------

    async def _serve_websocket(self, request: web.Request) -> web.StreamResponse:
        """A websocket upgrade at any path (as Ably: ably-python and ably-js ask for ``GET /?…``)."""
        ws = web.WebSocketResponse(
            compress=False, max_msg_size=MAX_WS_FRAME, decode_text=False, timeout=CLOSE_TIMEOUT
        )
        await ws.prepare(request)
        query = dict(urllib.parse.parse_qsl(request.query_string, keep_blank_values=True))
        fmt = "msgpack" if query.get("format") == "msgpack" else "json"
        session = WsSession(ws, request.transport, fmt)
        self._sessions.add(session)
        conn: Connection | None = None
        heartbeat: asyncio.Task[None] | None = None
        try:
            conn = self._open_connection(session, query)
            if conn is None:
                # after a fatal error: the ERROR, the close, and (briefly) the peer's close
                session.close(1000, "")
                await session.finish(CLOSE_TIMEOUT)
                return ws
            self._presence_connected(conn, query)
            if self.max_idle_interval > 0:
                heartbeat = asyncio.create_task(self._heartbeat(session))
            self._watch_expiry(conn, session)
            await self._read_loop(conn, session, ws)
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            if session.expiry_task is not None:
                session.expiry_task.cancel()
            session.closed = True
            if conn is not None and conn.session is session:
                conn.session = None
                self._pause(conn)
                conn.expires_at = asyncio.get_running_loop().time() + self.connection_state_ttl / 1000
                self._presence_transport_lost(conn)
            await session.finish(CLOSE_TIMEOUT)
            self._sessions.discard(session)
        return ws

    def _watch_expiry(self, conn: Connection, session: WsSession) -> None:
        """Send AUTH :data:`REAUTH_LEAD_MS` before the connection's token expires (the SDK
        re-authorises), and DISCONNECTED 40142 if it still expires (the SDK renews and resumes)."""
        if session.expiry_task is not None:
            session.expiry_task.cancel()
            session.expiry_task = None
        expires = conn.principal.expires
        if expires is None:
            return

        async def expire() -> None:
            if expires - now_ms() > REAUTH_LEAD_MS:
                # as Ably: ask the client to re-authorise before its token expires (AUTH frame)
                await asyncio.sleep((expires - REAUTH_LEAD_MS - now_ms()) / 1000)
                if session.closed or conn.session is not session:
                    return
                session.send({"action": int(Action.AUTH)})
            await asyncio.sleep(max(0.0, (expires - now_ms()) / 1000))
            if session.closed or conn.session is not session:
                return
            err = EmulatorError("Token expired", 40142, 401)
            session.send({"action": int(Action.DISCONNECTED), "error": err.to_dict()})
            session.close(1000, "token expired")

        session.expiry_task = asyncio.create_task(expire())

    async def _heartbeat(self, session: WsSession) -> None:
        interval = self.max_idle_interval / 2000
        while not session.closed:
            await asyncio.sleep(interval)
            session.send({"action": int(Action.HEARTBEAT)})

    async def _read_loop(self, conn: Connection, session: WsSession, ws: web.WebSocketResponse) -> None:
        """Handle each websocket message in arrival order until the websocket closes (aiohttp
        reassembles fragments, answers pings and the peer's close); a reader whose own replies
        are backed up waits for them before reading on."""
        while True:
            msg = await ws.receive()
            kind = msg.type
            if kind is WSMsgType.BINARY or kind is WSMsgType.TEXT:
                self._on_payload(conn, session, msg.data, kind is WSMsgType.TEXT)
            elif kind in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return
            if session.closed:
                return
            if session.queued() > READ_PAUSE_BYTES:
                await session.drained(READ_PAUSE_BYTES)

    @staticmethod
    def _pause(conn: Connection) -> None:
        """The transport went away: hold deliveries until each channel is re-attached."""
        for att in conn.attachments.values():
            att.live = False

    def _sweep(self) -> None:
        now = asyncio.get_running_loop().time()
        for conn in list(self.connections.values()):
            if conn.session is None and conn.expires_at is not None and conn.expires_at < now:
                self._drop_connection(conn)

    def _drop_connection(self, conn: Connection) -> None:
        self._presence_leave_connection(conn)
        self.connections.pop(conn.id, None)
        self._by_key.pop(conn.key, None)
        for name in conn.attachments:
            subs = self._subs.get(name)
            if subs is not None:
                subs.pop(conn.id, None)
        conn.attachments.clear()
        self.limiter.close(conn.id)

    def _connected_frame(self, conn: Connection, error: EmulatorError | None = None) -> dict[str, Any]:
        frame: dict[str, Any] = {
            "action": int(Action.CONNECTED),
            "connectionId": conn.id,
            "connectionKey": conn.key,
            "connectionDetails": {
                "connectionKey": conn.key,
                "clientId": conn.client_id,
                "connectionStateTtl": self.connection_state_ttl,
                "maxIdleInterval": self.max_idle_interval,
                "maxMessageSize": self.max_message_size,
                "maxInboundRate": int(self.limits.connection_rate or 1000),
                "maxFrameSize": MAX_WS_FRAME,
                "serverId": self.server_id,
            },
        }
        if error is not None:
            frame["error"] = error.to_dict()
        return frame

    def _authenticate(
        self, query: dict[str, str], token_override: str | None = None
    ) -> tuple[Principal, str | None]:
        requested = query.get("clientId") or None
        token = token_override or query.get("accessToken") or query.get("access_token")
        if token:
            principal = self.authority.by_token(token)
        elif query.get("key"):
            principal = self.authority.by_key(query["key"], requested)
        else:
            raise EmulatorError("No authentication information provided", 40101, 401)
        bound = principal.client_id
        if bound == "*" and requested in (None, "*") and principal.key_name is not None:
            # an issued wildcard token: CONNECTED says "*", as Ably does (a dev-mode token stays
            # anonymous, which ably-python 3.1.4 needs to enter presence on behalf of others)
            return principal, "*"
        if bound in (None, "*"):
            return principal, requested if requested != "*" else None
        if requested is not None and requested != bound:
            raise EmulatorError(
                f"Incompatible clientId: the credentials are for {bound!r}, the connection asked for {requested!r}",
                40102,
                401,
            )
        return principal, bound

    def _issued_here(self, key: str) -> bool:
        """Whether ``key`` has the form of a connection key this server issued
        (``emu-<n>-<hex6>!<secret>``, n at most the connections opened so far)."""
        conn_id, sep, secret = key.partition("!")
        parts = conn_id.split("-")
        return bool(
            sep
            and secret
            and len(parts) == 3
            and parts[0] == "emu"
            and parts[1].isascii()
            and parts[1].isdigit()  # (ASCII: int("²") raises; and no more digits than int() takes)
            and len(parts[1]) <= 20
            and 0 < int(parts[1]) <= self._conn_counter
            and len(parts[2]) == 6
            and all(c in "0123456789abcdef" for c in parts[2])
        )

    def _open_connection(self, session: WsSession, query: dict[str, str]) -> Connection | None:
        """Authenticate and send CONNECTED (resuming where asked); ERROR and None on failure."""
        self._sweep()
        try:
            principal, client_id = self._authenticate(query)
            window = parse_rollup_window(query.get("appendRollupWindow"), self.limits.append_rollup_window)
        except EmulatorError as err:
            session.send({"action": int(Action.ERROR), "error": err.to_dict()})
            return None
        except Exception as exc:  # (a bug: answered as REST answers one, never out of the handler)
            log.exception("emulator: websocket authentication failed")
            session.send({"action": int(Action.ERROR), "error": EmulatorError(f"internal error: {exc}", 50000, 500).to_dict()})
            return None
        echo = query.get("echo", "true").lower() != "false"
        recover_key = query.get("recover")
        resume_key = query.get("resume") or recover_key
        resume_error: EmulatorError | None = None
        if resume_key:
            old = self._by_key.get(resume_key)
            if old is not None and old.client_id == client_id:
                if old.session is not None:
                    old.session.close(1000, "superseded by a resumed transport")
                    old.session.closed = True
                self._pause(old)
                if recover_key and not query.get("resume"):
                    # a recovered connection gets a fresh key: the old one (still held by the
                    # client recovered from) no longer resumes it, so the two never alternate
                    self._by_key.pop(old.key, None)
                    old.key = f"{old.id}!{secrets.token_urlsafe(12)}"
                    self._by_key[old.key] = old
                old.session = session
                old.expires_at = None
                old.principal = principal
                old.fmt = session.fmt
                old.echo = echo
                self.limiter.open(old.id, window)
                session.send(self._connected_frame(old))
                return old
            if self._issued_here(resume_key):
                # a key this server issued whose connection is gone (expired, forgotten, retired)
                resume_error = EmulatorError("Unable to recover connection: connection expired", 80008, 400)
            else:
                resume_error = EmulatorError("Unable to recover connection: invalid connection key", 80018, 400)
        self._conn_counter += 1
        conn = Connection(
            f"emu-{self._conn_counter}-{secrets.token_hex(3)}", principal, client_id, session.fmt, echo
        )
        conn.session = session
        self.connections[conn.id] = conn
        self._by_key[conn.key] = conn
        self.limiter.open(conn.id, window)
        session.send(self._connected_frame(conn, resume_error))
        return conn

    def _on_payload(self, conn: Connection, session: WsSession, payload: bytes, text: bool) -> None:
        """One complete websocket message from ``conn`` (handled by the frames' side)."""
        raise NotImplementedError

    # -- introspection -----------------------------------------------------------------------

    def drop_transports(
        self, connection_id: str | None = None, *, forget: bool = False, lose_continuity: bool = False
    ) -> int:
        """Abruptly cut live websockets (all, or one connection's); return how many were cut.

        The connections stay resumable for ``connection_state_ttl``: an SDK reconnects with
        ``resume`` and re-attaches with its last ``channelSerial``, and the emulator replays every
        event it missed. ``forget=True`` also discards the connection state, so the resume fails
        (CONNECTED with error 80008 and a new connectionId) and only the ``channelSerial``
        re-attach restores continuity. ``lose_continuity=True`` also makes each cut connection's
        next re-attach (per clientId and channel) ignore its ``channelSerial``, as Ably does past
        its retention window: nothing missed is replayed and ATTACHED has no RESUMED flag. Call on
        the emulator's loop (or through :meth:`EmulatorThread.call`).
        """
        n = 0
        for conn in list(self.connections.values()):
            if conn.session is None or (connection_id is not None and conn.id != connection_id):
                continue
            session = conn.session
            if lose_continuity:
                lost: set[tuple[str | None, str]] = self.__dict__.setdefault("_continuity_lost", set())
                lost.update((conn.client_id, name) for name in conn.attachments)
            session.abort()
            if forget:
                self._drop_connection(conn)
            n += 1
        return n
