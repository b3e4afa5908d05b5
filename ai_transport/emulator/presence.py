"""Presence in the emulator: PRESENCE / SYNC frames, leaves on detach / close / drop, REST routes.

Realtime (Ably protocol, features spec RTP*):

* a client sends ``PRESENCE`` ``{msgSerial, channel, presence: [{action: 2|3|4, clientId?, data?,
  encoding?, extras?, id?}]}`` on an attached channel; each message needs the ``presence``
  capability and the PRESENCE channel mode, and a ``clientId`` (the connection's, or — for a key or
  wildcard connection — any explicit one: ``enterClient``); one ``PRESENCE`` frame to every
  attachment holding the PRESENCE_SUBSCRIBE mode (the publisher included), then the ACK. Each message gets
  ``id`` ``<connectionId>:<msgSerial>:<index>`` (a client-supplied ``id`` is kept: RTP17g
  re-entry), ``connectionId`` and ``timestamp``. Member-set rules: :mod:`.presence_store`;
* ATTACHED carries HAS_PRESENCE whenever the channel has members and the attachment may see them,
  RESUMED or not, a re-attach over a live transport included (RTP1: an ATTACHED without it says
  the set is empty, and ably-python, which re-attaches every channel after each in-band AUTH,
  clears its members on it, RTP19a); SYNC frames follow (``channelSerial`` ``<syncId>:<cursor>``, the last with an empty cursor),
  each member as PRESENT; a client's own ``SYNC`` request is answered with the whole set;
* a DETACH leaves the connection's members of that channel, a CLOSE all its members, at once; a
  transport that drops leaves them after ``remain_present_for`` ms (default 15000, per connection
  the ``remainPresentFor`` connect parameter) unless the connection resumes first. A leave made
  by the server is *synthesized*: its ``id`` does not start with the ``connectionId``.

REST: ``GET /channels/<ch>/presence`` (``subscribe`` capability; ``limit``, ``clientId``,
``connectionId``) lists members as PRESENT; ``GET /channels/<ch>/presence/history``
(``history`` capability; ``start``, ``end``, ``limit``, ``direction``) lists every operation;
``GET /presence?channels=a,b`` (batch presence) answers ``{successCount, failureCount, results}``
with each channel's members or its error.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

from .auth import Principal
from .connection import Connection, WsSession
from .core import EmulatorCore
from .http_io import _int_param, _page
from .presence_store import PresenceAction
from .protocol import (
    Action,
    EmulatorError,
    Flag,
    encode_frame,
    ingest_data,
    message_size,
    render_message,
)
from .store import now_ms

__all__ = ["PresenceHandlers"]

SYNC_PAGE = 100  # members per SYNC frame
#: The longest remainPresentFor (ms) honoured: a JS number's largest safe integer.
MAX_REMAIN_PRESENT_FOR = 2**53 - 1
_ACTIONS = (PresenceAction.ENTER, PresenceAction.LEAVE, PresenceAction.UPDATE)
_FIELDS = ("data", "encoding", "extras")


class PresenceHandlers(EmulatorCore):
    """Presence for the realtime and REST sides (state in ``self.presence``)."""

    # -- connection lifecycle hooks ----------------------------------------------------------

    def _presence_connected(self, conn: Connection, query: dict[str, str]) -> None:
        """A websocket now carries ``conn`` (new or resumed): cancel a pending leave."""
        timer = self._presence_timers.pop(conn.id, None)
        if timer is not None:
            timer.cancel()
        raw = query.get("remainPresentFor")
        if raw is not None:
            with contextlib.suppress(ValueError):
                # (bounded: past ~1e308 ms the delay in seconds is no float, and the leave timer
                # raised OverflowError out of the websocket handler when the transport dropped)
                self._remain_for[conn.id] = max(0, min(int(raw), MAX_REMAIN_PRESENT_FOR))

    def _presence_transport_lost(self, conn: Connection) -> None:
        """The transport dropped: leave ``conn``'s members unless it resumes in time."""
        if not self.presence.members_of(conn.id):
            return
        old = self._presence_timers.pop(conn.id, None)
        if old is not None:
            old.cancel()
        delay = self._remain_for.get(conn.id, self.remain_present_for) / 1000

        def expire() -> None:
            self._presence_timers.pop(conn.id, None)
            if conn.session is None:
                self._presence_leave_connection(conn)

        self._presence_timers[conn.id] = asyncio.get_running_loop().call_later(delay, expire)

    def _presence_leave_connection(self, conn: Connection, channel: str | None = None) -> None:
        """Leave ``conn``'s members now (of ``channel`` only if given), broadcast as synthesized leaves."""
        if channel is None:
            timer = self._presence_timers.pop(conn.id, None)
            if timer is not None:
                timer.cancel()
            self._remain_for.pop(conn.id, None)
        by_channel: dict[str, list[dict[str, Any]]] = {}
        for name, member in self.presence.members_of(conn.id, channel):
            leave = {
                "id": f"synthetic-{secrets.token_hex(4)}:0:0",
                "action": int(PresenceAction.LEAVE),
                "clientId": member["clientId"],
                "connectionId": conn.id,
                "timestamp": now_ms(),
            }
            out = self.presence.apply(name, leave)
            if out is not None:
                by_channel.setdefault(name, []).append(out)
        for name, messages in by_channel.items():
            self._presence_fan_out(name, messages, frame_id=None)

    # -- realtime frames ---------------------------------------------------------------------

    def _on_presence(self, conn: Connection, session: WsSession, frame: dict[str, Any]) -> None:
        msg_serial = frame.get("msgSerial")
        if isinstance(msg_serial, bool) or not isinstance(msg_serial, int):
            raise EmulatorError("PRESENCE without an integer msgSerial", 40000, 400)
        channel = frame.get("channel")
        try:
            messages = self._presence_accept(conn, session, channel, frame.get("presence"), msg_serial)
        except EmulatorError as err:
            session.send({"action": int(Action.NACK), "msgSerial": msg_serial, "count": 1, "error": err.to_dict()})
            return
        assert isinstance(channel, str)
        applied = [out for m in messages if (out := self.presence.apply(channel, m)) is not None]
        if applied:
            self._presence_fan_out(channel, applied, frame_id=f"{conn.id}:{msg_serial}")
        # the echo goes out before the ACK: a member is in the client's own presence set by the
        # time its enter() resolves (ably-python's get() right after enter() reads that set)
        session.send({"action": int(Action.ACK), "msgSerial": msg_serial, "count": 1})

    def _presence_accept(
        self, conn: Connection, session: WsSession, channel: Any, items: Any, msg_serial: int
    ) -> list[dict[str, Any]]:
        """Validate a PRESENCE frame's messages and complete them (id, connectionId, timestamp)."""
        if not isinstance(channel, str) or not channel:
            raise EmulatorError("PRESENCE without a channel", 40010, 400)
        att = conn.attachments.get(channel)
        if att is None:
            raise EmulatorError(f"channel {channel!r} is not attached", 90001, 400)
        if not isinstance(items, list) or not items:
            raise EmulatorError("PRESENCE without a presence array", 40000, 400)
        conn.principal.check_expiry()
        conn.principal.check(channel, "presence")
        if not att.modes & Flag.PRESENCE:
            raise EmulatorError(
                f"Unable to enter presence: channel {channel!r} attached without the presence mode", 40160, 401
            )
        ts = now_ms()
        out: list[dict[str, Any]] = []
        total = 0
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise EmulatorError(f"presence[{i}] is not a presence message", 40000, 400)
            action = item.get("action")
            if isinstance(action, bool) or action not in _ACTIONS:
                raise EmulatorError(f"presence[{i}].action must be 2 (enter), 3 (leave) or 4 (update)", 40000, 400)
            ingest_data(item, session.fmt)
            client_id = self._presence_client_id(conn.client_id, item.get("clientId"), i)
            msg: dict[str, Any] = {
                "id": item["id"] if isinstance(item.get("id"), str) and item["id"] else f"{conn.id}:{msg_serial}:{i}",
                "action": int(action),
                "clientId": client_id,
                "connectionId": conn.id,
                "timestamp": ts,
            }
            for k in _FIELDS:
                if item.get(k) is not None:
                    msg[k] = item[k]
            total += message_size(msg)
            out.append(msg)
        if total > self.max_message_size:
            raise EmulatorError(
                f"Maximum message length exceeded (size {total} bytes, limit {self.max_message_size})", 40009, 400
            )
        return out

    @staticmethod
    def _presence_client_id(bound: str | None, given: Any, i: int) -> str:
        if given is not None and (not isinstance(given, str) or not given):
            raise EmulatorError(f"presence[{i}].clientId must be a non-empty string", 40012, 400)
        if bound not in (None, "*"):
            if given is not None and given != bound:
                raise EmulatorError(
                    f"Mismatched clientId: presence[{i}].clientId {given!r} differs from the connection's {bound!r}",
                    40012,
                    400,
                )
            return bound
        if given is None:
            raise EmulatorError("clientId must be specified to enter a presence channel", 40012, 400)
        return str(given)

    def _presence_fan_out(self, channel: str, messages: list[dict[str, Any]], *, frame_id: str | None) -> None:
        """One PRESENCE frame to every live attachment holding the PRESENCE_SUBSCRIBE mode."""
        subs = self._subs.get(channel)
        if not subs:
            return
        log_ = self.store.channels.get(channel)
        frame: dict[str, Any] = {
            "action": int(Action.PRESENCE),
            "channel": channel,
            "channelSerial": log_.latest_serial if log_ is not None else None,
            "timestamp": now_ms(),
        }
        if frame_id:
            frame["id"] = frame_id
        cache: dict[str, bytes] = {}
        for conn_id, att in list(subs.items()):
            conn = self.connections.get(conn_id)
            if conn is None or conn.session is None or not att.live or not att.modes & Flag.PRESENCE_SUBSCRIBE:
                continue
            payload = cache.get(conn.fmt)
            if payload is None:
                body = dict(frame, presence=[render_message(m, conn.fmt) for m in messages])
                if body["channelSerial"] is None:
                    del body["channelSerial"]
                payload = cache[conn.fmt] = encode_frame(body, conn.fmt)
            conn.session.send_raw(payload)

    def _presence_attached(self, conn: Connection, channel: str, modes: int) -> bool:
        """Whether the ATTACHED about to be sent carries HAS_PRESENCE (then call :meth:`_presence_sync`)."""
        # RTP1: without HAS_PRESENCE an ATTACHED says the set is empty, and an SDK that moved
        # through ATTACHING (ably-python re-attaches every channel after each in-band AUTH, which
        # it sends before each REST request) clears its members (RTP19a): say it on every attach.
        return bool(modes & Flag.PRESENCE_SUBSCRIBE and self.presence.members(channel))

    def _presence_sync(self, conn: Connection, session: WsSession, channel: str) -> None:
        """Send the member set as SYNC frames (``<syncId>:<cursor>``; an empty cursor ends it)."""
        members = self.presence.present(channel)
        sync_id = f"sync{secrets.token_hex(4)}"
        pages = [members[i : i + SYNC_PAGE] for i in range(0, len(members), SYNC_PAGE)] or [[]]
        for n, page in enumerate(pages):
            cursor = "" if n == len(pages) - 1 else str(n + 1)
            session.send(
                {
                    "action": int(Action.SYNC),
                    "channel": channel,
                    "channelSerial": f"{sync_id}:{cursor}",
                    "presence": [render_message(m, conn.fmt) for m in page],
                }
            )

    def _on_sync_request(self, conn: Connection, session: WsSession, frame: dict[str, Any]) -> None:
        channel = frame.get("channel")
        if not isinstance(channel, str) or channel not in conn.attachments:
            return  # nothing to sync (the SDK only asks on attached channels)
        self._presence_sync(conn, session, channel)

    # -- fixtures ----------------------------------------------------------------------------

    def seed_presence(
        self, channel: str, members: list[dict[str, Any]], *, connection_id: str | None = None
    ) -> str:
        """Enter ``members`` (``{clientId, data?, encoding?, extras?}``) on ``channel`` from one
        server-side connection that never drops (the appspec's presence fixtures); returns its id.
        """
        conn_id = connection_id or f"fixture-{secrets.token_hex(3)}"
        ts = now_ms()
        entered = []
        for i, member in enumerate(members):
            client_id = member.get("clientId")
            if not isinstance(client_id, str) or not client_id:
                raise ValueError(f"members[{i}].clientId must be a non-empty string")
            msg: dict[str, Any] = {
                "id": f"{conn_id}:0:{i}",
                "action": int(PresenceAction.ENTER),
                "clientId": client_id,
                "connectionId": conn_id,
                "timestamp": ts,
            }
            msg.update({k: member[k] for k in _FIELDS if member.get(k) is not None})
            out = self.presence.apply(channel, msg)
            if out is not None:
                entered.append(out)
        if entered:
            self._presence_fan_out(channel, entered, frame_id=None)
        return conn_id

    # -- REST --------------------------------------------------------------------------------

    def _rest_presence(
        self, principal: Principal, channel: str, rest: list[str], query: dict[str, str], fmt: str
    ) -> tuple[list[dict[str, Any]], str] | None:
        """``GET …/presence`` and ``…/presence/history``: (rendered page, Link header), None if no route."""
        if rest == ["presence"]:
            principal.check_expiry()
            principal.check(channel, "subscribe")
            client_id, connection_id = query.get("clientId"), query.get("connectionId")
            members = [
                m
                for m in self.presence.present(channel)
                if (not client_id or m["clientId"] == client_id)
                and (not connection_id or m["connectionId"] == connection_id)
            ]
            rows = [{"cursor": f"{i:012d}", "m": m} for i, m in enumerate(members)]
            page, link = _page(rows, dict(query, direction="forwards"), "cursor", "presence")
        elif rest == ["presence", "history"]:
            principal.check_expiry()
            principal.check(channel, "history")
            history = self.presence.history_of(
                channel, start=_int_param(query, "start"), end=_int_param(query, "end")
            )
            rows = [{"cursor": f"{seq:012d}", "m": m} for seq, m in history]
            page, link = _page(rows, query, "cursor", "history")
        else:
            return None
        return [render_message(row["m"], fmt) for row in page], link

    def _rest_batch_presence(self, principal: Principal, query: dict[str, str], fmt: str) -> dict[str, Any]:
        """``GET /presence?channels=a,b``: each channel's members, or its error (e.g. capability)."""
        names = [n for n in (query.get("channels") or "").split(",") if n]
        if not names:
            raise EmulatorError("channels parameter is required", 40000, 400)
        results: list[dict[str, Any]] = []
        for name in names:
            try:
                principal.check_expiry()
                principal.check(name, "subscribe")
            except EmulatorError as err:
                results.append({"channel": name, "error": err.to_dict()})
                continue
            results.append({"channel": name, "presence": [render_message(m, fmt) for m in self.presence.present(name)]})
        failures = sum(1 for r in results if "error" in r)
        return {"successCount": len(results) - failures, "failureCount": failures, "results": results}

    def _presence_occupancy(self, channel: str) -> dict[str, int]:
        """``presenceConnections`` / ``presenceMembers`` / ``presenceSubscribers`` for channel details."""
        members = self.presence.members(channel)
        subs = self._subs.get(channel, {})
        return {
            "presenceConnections": len({m["connectionId"] for m in members}),
            "presenceMembers": len(members),
            "presenceSubscribers": sum(1 for a in subs.values() if a.modes & Flag.PRESENCE_SUBSCRIBE),
        }
