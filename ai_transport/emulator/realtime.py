"""The realtime side of the emulator: websocket connections speaking Ably's protocol.

:class:`RealtimeHandlers` handles the protocol's frames (attach with rewind / resume, publish,
detach, presence, sync, auth); the connections carrying them are in
:mod:`~ai_transport.emulator.realtime_connections`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .attach import check_channel_name, echoed_params, granted_modes, requested_modes
from .connection import Attachment, Connection, WsSession
from .core import log
from .guard import may_replay
from .limits import FatalRateError
from .protocol import (
    Action,
    EmulatorError,
    Flag,
    decode_frame,
    render_message,
)
from .realtime_connections import REAUTH_LEAD_MS, RealtimeConnections
from .store import Event, now_ms

__all__ = ["PING_REPLY_DELAY_S", "REAUTH_LEAD_MS", "RealtimeHandlers"]

#: A HEARTBEAT (ping) is answered after this delay, never within the same millisecond.
PING_REPLY_DELAY_S = 0.002


def _flag(frame: dict[str, Any], flag: int) -> bool:
    raw = frame.get("flags")
    return isinstance(raw, int) and not isinstance(raw, bool) and bool(raw & flag)


class RealtimeHandlers(RealtimeConnections):
    """The realtime side: websocket connections, the protocol's frames, attach / publish / detach."""

    # -- frames ------------------------------------------------------------------------------

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
            # Never answered within the same millisecond: Ably's ping has a network round trip, and
            # ably-js's own suite (connectionPingWithCallback) requires a response time above 0 ms.
            asyncio.get_running_loop().call_later(PING_REPLY_DELAY_S, session.send, reply)
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
        has_presence = self._presence_attached(conn, channel, modes)
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
