"""The emulator's core: configuration, state, and the publish path shared by REST and realtime.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .auth import DEFAULT_KEY, Authority, Principal
from .connection import Attachment, Connection, WsSession
from .guard import check_operation_identity
from .limits import InboundLimiter, RateLimits
from .presence_store import PresenceStore
from .protocol import (
    Action,
    EmulatorError,
    MessageAction,
    encode_frame,
    ingest_data,
    message_size,
    render_message,
)
from .store import Event, Store, now_ms

__all__ = ["EmulatorCore"]

log = logging.getLogger("ai_transport.emulator")

MAX_WS_FRAME = 4 * 1024 * 1024


class EmulatorCore:
    """The emulator's state and its one publish path (validate, store, fan out); REST and realtime build on it."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        keys: list[str] | None = None,
        strict_tokens: bool = False,
        max_message_size: int = 65536,
        max_idle_interval: int = 0,
        connection_state_ttl: int = 120_000,
        remain_present_for: int = 15_000,
        echo_before_ack: bool = False,
        server_id: str = "ai-transport-emulator",
        key_capabilities: dict[str, Any] | None = None,
        mutable_namespaces: list[str] | None = None,
        revocable_keys: list[str] | None = None,
        allowed_origins: list[str] | None = None,
        dev_tokens_on_any_host: bool = False,
        rate_limits: RateLimits | None = None,
    ) -> None:
        self.host = host
        self._requested_port = port
        self.port = port
        self.keys = list(keys) if keys is not None else [DEFAULT_KEY]
        self.authority = Authority(self.keys, strict_tokens=strict_tokens, key_capabilities=key_capabilities)
        #: namespaces whose channels allow update / delete / append (None = every channel)
        self.mutable_namespaces = set(mutable_namespaces) if mutable_namespaces is not None else None
        #: key names whose tokens can be revoked (``POST /keys/{keyName}/revokeTokens``)
        self.revocable_keys = set(revocable_keys or ())
        self.store = Store()
        #: browser Origins accepted besides loopback ones (``"*"``: every origin)
        self.allowed_origins = list(allowed_origins or ())
        self.strict_tokens = strict_tokens
        self.dev_tokens_on_any_host = dev_tokens_on_any_host
        self.max_message_size = max_message_size
        self.max_idle_interval = max_idle_interval
        self.connection_state_ttl = connection_state_ttl
        self.echo_before_ack = echo_before_ack
        self.remain_present_for = remain_present_for
        self.presence = PresenceStore()
        self._presence_timers: dict[str, asyncio.TimerHandle] = {}
        self._remain_for: dict[str, int] = {}
        self.server_id = server_id
        self.connections: dict[str, Connection] = {}
        self._by_key: dict[str, Connection] = {}
        self._subs: dict[str, dict[str, Attachment]] = {}
        self._conn_counter = 0
        self._rest_counter = 0
        #: the live websockets (closed by ``stop()``)
        self._sessions: set[WsSession] = set()
        self.limits = rate_limits if rate_limits is not None else RateLimits.off()
        self.limiter = InboundLimiter(self.limits, self._deliver_rolled_up)
        #: Subscriber transports cut because their outbound queue passed the bound (80020).
        self.outbound_disconnects = 0

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def key(self) -> str:
        """The first configured key (``name:secret``)."""
        return self.keys[0]

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    # -- shared publish path -----------------------------------------------------------------

    def _accept(
        self,
        principal: Principal,
        client_id: str | None,
        channel: str,
        messages: list[Any],
        fmt: str,
        *,
        connection_id: str | None,
        id_prefix: str,
    ) -> list[Event]:
        """Validate (capability, clientId, size, shape), ingest and store a batch."""
        if not isinstance(channel, str) or not channel:
            raise EmulatorError("channel name is required", 40010, 400)
        principal.check_expiry()
        total = 0
        for i, msg in enumerate(messages):
            if not isinstance(msg, dict):
                raise EmulatorError(f"messages[{i}] is not a message object", 40000, 400)
            for field, code in (("name", 40016), ("id", 40000), ("connectionId", 40000), ("encoding", 40013)):
                value = msg.get(field)
                if value is not None and not isinstance(value, str):  # (as Ably: the SDKs cannot read one)
                    raise EmulatorError(f"messages[{i}].{field} must be a string", code, 400)
            ingest_data(msg, fmt)
            total += message_size(msg)
            action = msg.get("action")
            if action is None or action == MessageAction.CREATE:
                principal.check(channel, "publish")
            else:
                self._check_mutable(channel)
                if action == MessageAction.DELETE:
                    self._check_op(principal, client_id, channel, msg, "delete")
                else:
                    self._check_op(principal, client_id, channel, msg, "update")
            check_operation_identity(principal, client_id, msg, i)
            cid = msg.get("clientId")
            if cid is not None:
                if not isinstance(cid, str):
                    raise EmulatorError(f"messages[{i}].clientId must be a string", 40012, 400)
                if client_id not in (None, "*") and cid != client_id:
                    raise EmulatorError(
                        f"Mismatched clientId: messages[{i}].clientId {cid!r} differs from the connection's "
                        f"{client_id!r}",
                        40012,
                        400,
                    )
        if total > self.max_message_size:
            raise EmulatorError(
                f"Maximum message length exceeded (size {total} bytes, limit {self.max_message_size})",
                40009,
                400,
            )
        return self.store.apply(
            channel, messages, connection_id=connection_id, client_id=client_id, id_prefix=id_prefix
        )

    def _disconnect_revoked(self) -> None:
        """DISCONNECTED 40141 to every live connection whose token has been revoked."""
        for conn in list(self.connections.values()):
            if conn.session is None:
                continue
            try:
                conn.principal.check_expiry()
            except EmulatorError as err:
                if err.code == 40141:
                    conn.session.send({"action": int(Action.DISCONNECTED), "error": err.to_dict()})
                    conn.session.close(1000, "token revoked")

    def _check_mutable(self, channel: str) -> None:
        """93002 unless ``channel``'s namespace has the mutable-messages rule (when rules are configured)."""
        if self.mutable_namespaces is None:
            return
        namespace = channel.split(":", 1)[0] if ":" in channel else None
        if namespace not in self.mutable_namespaces:
            raise EmulatorError(
                f"Message updates, deletes and appends are not enabled on channel {channel!r} "
                "(its namespace has no mutable-messages rule)",
                93002,
                400,
            )

    def _check_op(
        self, principal: Principal, client_id: str | None, channel: str, msg: dict[str, Any], op: str
    ) -> None:
        """Ably (``messages/updates-deletes.mdx``, Capabilities): ``message-{op}-any`` for any message,
        ``message-{op}-own`` for one whose publisher's clientId is the (identified) caller's. The
        emulator also lets ``publish`` count as ``-own`` (lenient); never as ``-any``."""
        if principal.allows(channel, f"message-{op}-any"):
            return
        if principal.allows(channel, f"message-{op}-own") or principal.allows(channel, "publish"):
            serial = msg.get("serial")
            log_ = self.store.channels.get(channel)
            entry = log_.entries.get(serial) if log_ and isinstance(serial, str) else None
            if entry is None or (
                client_id and client_id != "*" and entry.meta().get("clientId") == client_id
            ):
                return
        principal.check(channel, f"message-{op}-any")

    def _deliver_rolled_up(self, conn_id: str, channel: str, events: list[Event]) -> None:
        """Fan out appends a connection's appendRollupWindow held (merged into one delivery)."""
        self._fan_out(
            channel, events, publisher=self.connections.get(conn_id), frame_id=None, connection_id=conn_id
        )

    def _fan_out(
        self,
        channel: str,
        events: list[Event],
        *,
        publisher: Connection | None,
        frame_id: str | None,
        connection_id: str | None,
    ) -> None:
        """Deliver one ProtocolMessage's events to every subscribed attachment, in order."""
        events = [e for e in events if not e.duplicate]
        if not events:
            return
        subs = self._subs.get(channel)
        if not subs:
            return
        cache: dict[tuple[str, tuple[bool, ...]], bytes] = {}
        ts = now_ms()
        for conn_id, att in list(subs.items()):
            conn = self.connections.get(conn_id)
            if conn is None or conn.session is None or not att.subscribe or not att.live:
                continue
            if conn is publisher and not conn.echo:
                continue
            choice = tuple(att.has_seen(ev.message_serial) for ev in events)
            for ev in events:
                att.seen.add(ev.message_serial)
            cache_key = (conn.fmt, choice)
            payload = cache.get(cache_key)
            if payload is None:
                frame: dict[str, Any] = {
                    "action": int(Action.MESSAGE),
                    "channel": channel,
                    "channelSerial": events[-1].serial,
                    "timestamp": ts,
                    "messages": [
                        render_message(ev.live if seen else ev.aggregate, conn.fmt)
                        for ev, seen in zip(events, choice)
                    ],
                }
                if frame_id:
                    frame["id"] = frame_id
                if connection_id:
                    frame["connectionId"] = connection_id
                payload = cache[cache_key] = encode_frame(frame, conn.fmt)
            assert conn.session is not None
            conn.session.send_raw(payload)
            if conn.session.queued() > self.limits.max_outbound_bytes:
                self._cut_slow_subscriber(conn)

    def _cut_slow_subscriber(self, conn: Connection) -> None:
        """A subscriber too far behind: drop its transport (80020, see :mod:`.limits`)."""
        session = conn.session
        if session is None:
            return
        self.outbound_disconnects += 1
        log.warning(
            "emulator: connection %s has more than %d bytes unsent; disconnecting it (80020)",
            conn.id,
            self.limits.max_outbound_bytes,
        )
        session.abort()

