"""The realtime side of the emulator: websocket connections speaking Ably's protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import urllib.parse
from typing import Any

from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol

from .attach import check_channel_name, echoed_params, granted_modes, requested_modes
from .auth import Principal
from .connection import Attachment, Connection, WsSession
from .core import MAX_WS_FRAME, log
from .guard import may_replay
from .limits import FatalRateError, parse_rollup_window
from .presence import PresenceHandlers
from .protocol import (
    Action,
    EmulatorError,
    Flag,
    decode_frame,
    render_message,
)
from .store import Event, now_ms

__all__ = ["REAUTH_LEAD_MS", "RealtimeHandlers"]

#: How long before a connection's token expires the emulator sends AUTH (Ably: 30 s).
REAUTH_LEAD_MS = 30_000

def _flag(frame: dict[str, Any], flag: int) -> bool:
    raw = frame.get("flags")
    return isinstance(raw, int) and not isinstance(raw, bool) and bool(raw & flag)


class RealtimeHandlers(PresenceHandlers):
    """The realtime side: websocket connections, the protocol's frames, attach / publish / detach."""

    # -- websocket ---------------------------------------------------------------------------

    async def _serve_websocket(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        proto = ServerProtocol(max_size=MAX_WS_FRAME)
        proto.receive_data(head)
        events = proto.events_received()
        if not events or not isinstance(events[0], Request):
            writer.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            return
        request = events[0]
        response = proto.accept(request)
        proto.send_response(response)
        for chunk in proto.data_to_send():
            writer.write(chunk)
        await writer.drain()
        if response.status_code != 101:
            return
        query = dict(
            urllib.parse.parse_qsl(urllib.parse.urlsplit(request.path).query, keep_blank_values=True)
        )
        fmt = "msgpack" if query.get("format") == "msgpack" else "json"
        session = WsSession(proto, writer, fmt)
        conn: Connection | None = None
        heartbeat: asyncio.Task[None] | None = None
        try:
            conn = self._open_connection(session, query)
            if conn is None:
                await writer.drain()
                await self._drain_close(session, reader)
                return
            self._presence_connected(conn, query)
            if self.max_idle_interval > 0:
                heartbeat = asyncio.create_task(self._heartbeat(session))
            self._watch_expiry(conn, session)
            await self._read_loop(conn, session, reader)
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

    async def _drain_close(self, session: WsSession, reader: asyncio.StreamReader) -> None:
        """After a fatal error: close and wait (briefly) for the peer's close."""
        session.close(1000, "")

        async def wait_peer_close() -> None:
            while session.proto.state is not State.CLOSED:
                data = await reader.read(65536)
                if not data:
                    break
                session.proto.receive_data(data)
                session.proto.events_received()
                session.flush()

        with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
            await asyncio.wait_for(wait_peer_close(), 2)

    async def _heartbeat(self, session: WsSession) -> None:
        interval = self.max_idle_interval / 2000
        while not session.closed:
            await asyncio.sleep(interval)
            session.send({"action": int(Action.HEARTBEAT)})

    async def _read_loop(self, conn: Connection, session: WsSession, reader: asyncio.StreamReader) -> None:
        proto = session.proto
        fragments: list[bytes] = []
        fragment_text = False
        while True:
            data = await reader.read(65536)
            if not data:
                proto.receive_eof()
                session.flush()
                return
            proto.receive_data(data)
            for event in proto.events_received():
                if not isinstance(event, Frame):
                    continue
                if event.opcode in (Opcode.TEXT, Opcode.BINARY):
                    if not event.fin:
                        fragments = [bytes(event.data)]
                        fragment_text = event.opcode is Opcode.TEXT
                        continue
                    self._on_payload(conn, session, bytes(event.data), event.opcode is Opcode.TEXT)
                elif event.opcode is Opcode.CONT:
                    fragments.append(bytes(event.data))
                    if event.fin:
                        self._on_payload(conn, session, b"".join(fragments), fragment_text)
                        fragments = []
            session.flush()
            if proto.state is State.CLOSED or session.closed:
                return
            await session.writer.drain()

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

    def _open_connection(self, session: WsSession, query: dict[str, str]) -> Connection | None:
        """Authenticate and send CONNECTED (resuming where asked); ERROR and None on failure."""
        self._sweep()
        try:
            principal, client_id = self._authenticate(query)
            window = parse_rollup_window(query.get("appendRollupWindow"), self.limits.append_rollup_window)
        except EmulatorError as err:
            session.send({"action": int(Action.ERROR), "error": err.to_dict()})
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
            if recover_key and not query.get("resume"):
                resume_error = EmulatorError(
                    "Unable to recover connection: invalid or unspecified connection key", 80018, 400
                )
            else:
                resume_error = EmulatorError("Unable to recover connection: connection key not found", 80008, 400)
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
        if session.closed:
            return
        try:
            frame = decode_frame(payload.decode("utf-8") if text else payload)
        except (EmulatorError, UnicodeDecodeError) as exc:
            err = (
                exc
                if isinstance(exc, EmulatorError)
                else EmulatorError("malformed frame: invalid UTF-8", 40000)
            )
            log.warning("emulator: %s (connection %s); closing it", err.message, conn.id)
            session.send({"action": int(Action.ERROR), "error": err.to_dict()})
            session.close(1000, "protocol error")
            return
        try:
            self._on_frame(conn, session, frame)
        except EmulatorError as err:
            log.warning("emulator: %s (connection %s); closing it", err.message, conn.id)
            session.send({"action": int(Action.ERROR), "error": err.to_dict()})
            session.close(1000, "protocol error")
        except Exception as exc:
            log.exception("emulator: frame handler failed")
            session.send(
                {
                    "action": int(Action.ERROR),
                    "error": EmulatorError(f"internal error: {exc}", 50000, 500).to_dict(),
                }
            )
            session.close(1011, "internal error")

    def _on_frame(self, conn: Connection, session: WsSession, frame: dict[str, Any]) -> None:
        action = frame["action"]
        channel = frame.get("channel")
        if action == Action.HEARTBEAT:
            reply: dict[str, Any] = {"action": int(Action.HEARTBEAT)}
            if frame.get("id") is not None:
                reply["id"] = frame["id"]
            session.send(reply)
        elif action == Action.CLOSE:
            session.send({"action": int(Action.CLOSED)})
            session.close(1000, "")
            self._drop_connection(conn)
        elif action == Action.DISCONNECT:
            session.send({"action": int(Action.DISCONNECTED)})
            session.close(1000, "")
        elif action == Action.ATTACH:
            self._on_attach(conn, session, frame)
        elif action == Action.DETACH:
            if not isinstance(channel, str):
                raise EmulatorError("DETACH without a channel", 40010, 400)
            conn.attachments.pop(channel, None)
            self._presence_leave_connection(conn, channel)
            subs = self._subs.get(channel)
            if subs is not None:
                subs.pop(conn.id, None)
            session.send({"action": int(Action.DETACHED), "channel": channel})
        elif action == Action.MESSAGE:
            self._on_message(conn, session, frame)
        elif action == Action.PRESENCE:
            self._on_presence(conn, session, frame)
        elif action == Action.SYNC:
            self._on_sync_request(conn, session, frame)
        elif action in (Action.ANNOTATION, Action.OBJECT):
            self._nack_unsupported(conn, session, frame)
        elif action == Action.AUTH:
            auth = frame.get("auth") if isinstance(frame.get("auth"), dict) else {}
            token = auth.get("accessToken") if auth else None
            try:
                if not isinstance(token, str) or not token:
                    raise EmulatorError("AUTH without auth.accessToken", 40101, 401)
                principal, client_id = self._authenticate({"clientId": conn.client_id or ""}, token)
                if client_id != conn.client_id:
                    # a connection keeps the identity it connected with (anonymous stays anonymous)
                    raise EmulatorError(
                        f"Incompatible clientId on re-authentication: the connection is {conn.client_id!r}, "
                        f"the new token is for {client_id!r}",
                        40102,
                        401,
                    )
            except EmulatorError as err:
                session.send({"action": int(Action.ERROR), "error": err.to_dict()})
                session.close(1000, "")
                return
            conn.principal = principal
            session.send(self._connected_frame(conn))
            self._watch_expiry(conn, session)
            self._recheck_attachments(conn, session)
        else:
            raise EmulatorError(f"unknown or unexpected ProtocolMessage action {action}", 40000, 400)

    def _recheck_attachments(self, conn: Connection, session: WsSession) -> None:
        """After re-authorisation: each attachment gets the modes the new capability allows; a
        channel it no longer allows at all fails (ERROR 40160 for that channel), as in Ably."""
        for name, att in list(conn.attachments.items()):
            if conn.principal.allows_any(name):
                att.modes = att.requested & granted_modes(conn.principal, name)
                att.subscribe = bool(att.modes & Flag.SUBSCRIBE)
                continue
            conn.attachments.pop(name, None)
            self._presence_leave_connection(conn, name)
            subs = self._subs.get(name)
            if subs is not None:
                subs.pop(conn.id, None)
            err = EmulatorError(
                f"Channel denied access based on given capability; channel {name!r}", 40160, 401
            )
            session.send({"action": int(Action.ERROR), "channel": name, "error": err.to_dict()})

    def _nack_unsupported(self, conn: Connection, session: WsSession, frame: dict[str, Any]) -> None:
        serial = frame.get("msgSerial")
        channel = frame.get("channel")
        if isinstance(channel, str) and channel and channel not in conn.attachments:
            err = EmulatorError(f"channel {channel!r} is not attached", 90001, 400)
        else:
            err = EmulatorError(
                f"{Action(frame['action']).name} is not supported by the emulator", 40000, 400
            )
        if isinstance(serial, int) and not isinstance(serial, bool):
            session.send(
                {"action": int(Action.NACK), "msgSerial": serial, "count": 1, "error": err.to_dict()}
            )
        else:
            session.send({"action": int(Action.ERROR), "channel": channel, "error": err.to_dict()})

    def _on_attach(self, conn: Connection, session: WsSession, frame: dict[str, Any]) -> None:
        channel = frame.get("channel")
        if not isinstance(channel, str):
            raise EmulatorError("ATTACH without a channel", 40010, 400)
        principal = conn.principal
        raw_params = frame.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        try:
            check_channel_name(channel)
            requested = requested_modes(frame.get("flags"), params)
            principal.check_expiry()
            if not principal.allows_any(channel):
                raise EmulatorError(
                    f"Channel denied access based on given capability; channel {channel!r}", 40160, 401
                )
            wants_rewind = params.get("rewind") not in (None, "")
            if wants_rewind and not _flag(frame, Flag.ATTACH_RESUME) and not may_replay(principal, channel):
                raise EmulatorError(
                    f"Channel denied access based on given capability; rewind on channel {channel!r} "
                    "retrieves history and needs the 'history' capability",
                    40160,
                    401,
                )
        except EmulatorError as err:
            session.send({"action": int(Action.ERROR), "channel": channel, "error": err.to_dict()})
            return
        raw_flags = frame.get("flags")
        flags = raw_flags if isinstance(raw_flags, int) and not isinstance(raw_flags, bool) else 0
        modes = requested & granted_modes(principal, channel)
        log_ = self.store.channel(channel)
        att = conn.attachments.get(channel)
        continuing = att is not None and att.live
        if att is None:
            att = conn.attachments[channel] = Attachment(channel, joined=log_.latest_serial)
        att.modes = modes
        att.requested = requested
        att.subscribe = bool(modes & Flag.SUBSCRIBE)
        self._subs.setdefault(channel, {})[conn.id] = att

        honoured = echoed_params(params)
        backlog: list[tuple[Event | None, dict[str, Any]]] = []
        channel_serial = frame.get("channelSerial")
        lost = getattr(self, "_continuity_lost", None)
        if lost and not continuing and (conn.client_id, channel) in lost:
            # drop_transports(lose_continuity=True): the client's channelSerial is past the
            # retention window, so nothing is replayed and the attach is not RESUMED
            lost.discard((conn.client_id, channel))
            channel_serial = None
        resumed = continuing
        if continuing:
            pass  # nothing was lost on this transport: frames after channelSerial are in flight
        elif isinstance(channel_serial, str) and channel_serial:
            # continuity from the client's channelSerial: everything after it is replayed below;
            # without 'history' nothing older than this connection's own first attach
            resumed = True
            if not may_replay(principal, channel) and att.joined is not None and channel_serial < att.joined:
                log.warning(
                    "emulator: connection %s re-attached %r from %s without the history capability; "
                    "replaying from %s only",
                    conn.id,
                    channel,
                    channel_serial,
                    att.joined,
                )
                channel_serial = att.joined
                resumed = False
            if att.base is None or channel_serial > att.base:
                att.base = channel_serial
            for ev in log_.events_after(channel_serial):
                seen = att.has_seen(ev.message_serial)
                att.seen.add(ev.message_serial)
                backlog.append((ev, ev.live if seen else ev.aggregate))
        elif params.get("rewind") not in (None, "") and not flags & Flag.ATTACH_RESUME:
            # ATTACH_RESUME: the client already had this attachment (it re-attaches after a
            # detach-less interruption), so a rewind is not replayed again
            rewind = str(params["rewind"])
            for agg in self._rewind(channel, rewind):
                att.seen.add(agg["serial"])
                backlog.append((None, agg))
        has_presence = self._presence_attached(conn, channel, modes, continuing)
        reply: dict[str, Any] = {
            "action": int(Action.ATTACHED),
            "channel": channel,
            "channelSerial": log_.latest_serial,
            "flags": int(
                modes
                | (Flag.HAS_BACKLOG if backlog else 0)
                | (Flag.RESUMED if resumed else 0)
                | (Flag.HAS_PRESENCE if has_presence else 0)
            ),
        }
        att.live = True
        if honoured:
            reply["params"] = honoured
        session.send(reply)
        if has_presence:
            self._presence_sync(conn, session, channel)
        if not att.subscribe:
            return
        for event, msg in backlog:
            session.send(
                {
                    "action": int(Action.MESSAGE),
                    "channel": channel,
                    # a replayed event carries its own serial; rewound aggregates are as of the
                    # attach point, so they carry the ATTACHED channelSerial
                    "channelSerial": event.serial if event is not None else reply["channelSerial"],
                    "timestamp": msg.get("timestamp", now_ms()),
                    "messages": [render_message(msg, conn.fmt)],
                }
            )

    def _rewind(self, channel: str, rewind: str) -> list[dict[str, Any]]:
        items = self.store.history(channel)
        try:
            if rewind[-1:] in ("s", "m"):
                span = int(rewind[:-1]) * (1000 if rewind[-1] == "s" else 60_000)
                cutoff = now_ms() - span
                return [m for m in items if m.get("timestamp", 0) >= cutoff][-100:]
            count = int(rewind)
        except ValueError:
            return []
        return items[-count:] if count > 0 else []

    def _on_message(self, conn: Connection, session: WsSession, frame: dict[str, Any]) -> None:
        msg_serial = frame.get("msgSerial")
        if isinstance(msg_serial, bool) or not isinstance(msg_serial, int):
            raise EmulatorError("MESSAGE without an integer msgSerial", 40000, 400)
        channel = ""
        messages = frame.get("messages")
        try:
            channel = check_channel_name(frame.get("channel"))
            att = conn.attachments.get(channel)
            if att is not None and not att.requested & Flag.PUBLISH and conn.principal.allows(channel, "publish"):
                raise EmulatorError(
                    f"channel {channel!r} was attached without the PUBLISH mode", 40165, 401
                )
            if not isinstance(messages, list):
                raise EmulatorError("MESSAGE without a messages array", 40000, 400)
            self.limiter.admit(conn.id, channel, messages)
            events = self._accept(
                conn.principal,
                conn.client_id,
                channel,
                messages,
                session.fmt,
                connection_id=conn.id,
                id_prefix=f"{conn.id}:{msg_serial}",
            )
        except FatalRateError as err:
            log.warning("emulator: %s (connection %s); closing it", err.message, conn.id)
            session.send({"action": int(Action.ERROR), "error": err.to_dict()})
            session.close(1000, "rate limit")
            session.closed = True  # frames already received on this transport are ignored
            return
        except EmulatorError as err:
            session.send(
                {"action": int(Action.NACK), "msgSerial": msg_serial, "count": 1, "error": err.to_dict()}
            )
            return
        ack = {
            "action": int(Action.ACK),
            "msgSerial": msg_serial,
            "count": 1,
            "res": [{"serials": [ev.serial for ev in events]}],
        }
        if not self.echo_before_ack:
            session.send(ack)
        self._fan_out(
            channel,
            self.limiter.route(conn.id, channel, events),
            publisher=conn,
            frame_id=f"{conn.id}:{msg_serial}",
            connection_id=conn.id,
        )
        if self.echo_before_ack:
            session.send(ack)

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
            session.closed = True
            with contextlib.suppress(Exception):
                session.writer.transport.abort()
            if forget:
                self._drop_connection(conn)
            n += 1
        return n


