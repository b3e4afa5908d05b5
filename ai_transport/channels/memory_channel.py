"""The in-process channel object: one connection's view of a hub channel (Ably semantics).

:class:`InProcessChannel` attaches, publishes / appends / updates / deletes (serials and versions
from the hub's per-channel counter), delivers to its listeners in channel order (a fragment per
append to a message the attachment has seen, the aggregate otherwise, appends rolled up inside the
hub's window) and reads history. See :mod:`ai_transport.channels.memory` for the semantics.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import AITransportError, ErrorCode, InvalidArgumentError, InvalidTypeError, type_name
from .budget import PublishBudget
from .channel import InboundMessage, Listener, OutboundMessage
from .channel_base import ListenerDelivery, check_message_fields, check_message_serial
from .history import check_history_args
from .memory_store import (
    InProcessHistoryPage,
    _ChannelState,
    _copy_message,
    _history_page,
    _json_copy,
    _now_ms,
    _Stored,
)
from .presence_memory import InProcessPresence
from .state import ChannelStateChange

__all__ = ["InProcessChannel"]


class _HubSettings(Protocol):
    @property
    def append_rollup_window(self) -> float: ...


class Connection(Protocol):
    """What a channel object uses of its connection (an ``InProcessClient``, one layer up)."""

    @property
    def hub(self) -> _HubSettings:
        """``hub`` of the connection (``InProcessClient``)."""

    @property
    def client_id(self) -> str | None:
        """``client_id`` of the connection (``InProcessClient``)."""

    @property
    def connection_id(self) -> str:
        """``connection_id`` of the connection (``InProcessClient``)."""

    @property
    def publish_budget(self) -> PublishBudget | None:
        """``publish_budget`` of the connection (``InProcessClient``)."""

    def next_msg_serial(self) -> int:
        """``next_msg_serial`` of the connection (``InProcessClient``)."""

logger = logging.getLogger("ai_transport.channels.memory")

#: Ably's "invalid message data or encoding" (publish of data that is not str/bytes/JSON).
INVALID_DATA_CODE = 40013
#: Ably's "not found" (operation on an unknown serial).
NOT_FOUND_CODE = 40400
#: Ably's "mismatched clientId".
MISMATCHED_CLIENT_ID_CODE = 40012
#: Ably's "channel operation failed: invalid channel state" (until_attach without attach).
INVALID_STATE_CODE = 90001


@dataclass
class _Held:
    """A held (rolled-up) append fragment for one message on one attachment."""

    fragment: dict[str, Any]
    timer: asyncio.TimerHandle | None = None


@dataclass
class _Attachment:
    """Per-attachment delivery state."""

    seen: set[str] = field(default_factory=set)
    last_fragment_at: dict[str, float] = field(default_factory=dict)
    held: dict[str, _Held] = field(default_factory=dict)


class InProcessChannel(ListenerDelivery):
    """A :class:`~ai_transport.channels.channel.Channel` on an :class:`InProcessHub`.

    Get one with ``hub.channel(name, client_id=...)`` or ``hub.client(client_id).channel(name)``.
    """

    _log = logger

    def __init__(self, client: Connection, state: _ChannelState) -> None:
        self.name = state.name
        self._client = client
        self._state = state
        self._listeners: list[Listener] = []
        self._attached = False
        self._interrupted = False
        self._attach_serial: str | None = None
        self._att = _Attachment()
        self._queue: asyncio.Queue[tuple[InboundMessage, tuple[Listener, ...]] | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._presence: InProcessPresence | None = None

    # -- identity ---------------------------------------------------------------------------

    @property
    def client_id(self) -> str | None:
        """The ``clientId`` this channel publishes as."""
        return self._client.client_id

    @property
    def connection_id(self) -> str:
        """The connection id stamped on this channel's messages."""
        return self._client.connection_id

    @property
    def presence(self) -> InProcessPresence:
        """This channel's presence set (:mod:`~ai_transport.channels.presence`)."""
        if self._presence is None:
            self._presence = InProcessPresence(self)
        return self._presence

    @property
    def publish_budget(self) -> PublishBudget | None:
        """The connection's publish budget (read by the codec encoder)."""
        return self._client.publish_budget

    @property
    def attach_serial(self) -> str | None:
        """The channel serial at the latest attach (None while detached / never attached)."""
        return self._attach_serial

    @property
    def state(self) -> str:
        """``"attached"``, ``"detached"`` or ``"initialized"`` (never attached)."""
        if self._attached:
            return "attached"
        return "detached" if self._attach_serial is not None else "initialized"

    # -- attach / detach --------------------------------------------------------------------

    async def attach(self) -> None:
        """Attach (idempotent): from now on, new messages are delivered to subscribers."""
        self._check_open("attach")
        if self._attached:
            return
        previous = self.state
        self._attached = True
        self._attach_serial = self._state.channel_serial
        self._att = _Attachment()
        self._state.attachments.append(self)
        self._emit_state(ChannelStateChange("attached", previous))

    def interrupt(self, state: str | None = None) -> None:
        """Fault injection: lose the transport. Nothing is delivered until :meth:`reattach`;
        messages published meanwhile are only in history (a resume that failed). ``state``
        (``"suspended"`` or ``"failed"``) also reports that channel state now, as Ably does when the
        connection stays down."""
        if state not in (None, "suspended", "failed"):
            raise InvalidArgumentError(f"unable to interrupt; state must be suspended or failed, got {state!r}")
        self._interrupted = True
        if state is not None:
            self._emit_state(ChannelStateChange(state, "attached"))

    async def reattach(self) -> None:
        """End an :meth:`interrupt`: re-attach without continuity (``attached``, ``resumed``
        false, a new attach serial), as Ably does when a connection could not be resumed."""
        self._check_open("reattach")
        self._interrupted = False
        if not self._attached:
            await self.attach()
            return
        self._attach_serial = self._state.channel_serial
        self._att = _Attachment()
        self._emit_state(ChannelStateChange("attached", "attaching", resumed=False))

    async def detach(self) -> None:
        """Detach: stop delivery (queued, not yet delivered messages are dropped)."""
        if not self._attached:
            return
        self._attached = False
        with contextlib.suppress(ValueError):  # pragma: no cover - defensive
            self._state.attachments.remove(self)
        if self._presence is not None:
            self._presence._leave_all()
        for held in self._att.held.values():
            if held.timer is not None:
                held.timer.cancel()
        self._att = _Attachment()
        if self._queue is not None:
            while not self._queue.empty():
                self._queue.get_nowait()
        self._emit_state(ChannelStateChange("detached", "attached"))

    async def close(self) -> None:
        """Detach and stop the delivery task."""
        await self.detach()
        self._listeners.clear()
        self._closed = True
        await self._stop_delivery()
        if self._presence is not None:
            await self._presence._stop()

    # -- subscribe --------------------------------------------------------------------------

    async def subscribe(self, listener: Listener) -> None:
        """Attach if needed and deliver every later message, in channel order, to ``listener``."""
        self._add_listener(listener)
        await self.attach()

    async def _deliver_loop(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            item = await queue.get()
            if item is None:
                return
            if isinstance(item, ChannelStateChange):
                self._call_state_listeners(item)
                continue
            msg, listeners = item
            await self._call_listeners(listeners, functools.partial(_copy_message, msg))

    # Called by the publishing side (synchronously, inside the publisher's operation).

    def _enqueue(self, msg: dict[str, Any]) -> None:
        if self._queue is None or not self._listeners or self._interrupted:
            return
        self._queue.put_nowait((msg, tuple(self._listeners)))  # type: ignore[arg-type]

    def _flush_held(self, serial: str | None = None) -> None:
        """Deliver held roll-up fragments (one serial, or all) now."""
        held_map = self._att.held
        keys = [serial] if serial is not None else list(held_map)
        for key in keys:
            held = held_map.pop(key, None)
            if held is None:
                continue
            if held.timer is not None:
                held.timer.cancel()
            self._att.last_fragment_at[key] = time.monotonic()
            self._enqueue(held.fragment)

    def _on_timer(self, serial: str) -> None:
        if serial in self._att.held:
            self._flush_held(serial)

    def _deliver_full(self, msg: dict[str, Any]) -> None:
        """Deliver a create / update / delete (or first-sight aggregate) in channel order."""
        self._flush_held()
        self._att.seen.add(msg["serial"])
        self._enqueue(msg)

    def _deliver_append(self, aggregate: dict[str, Any], fragment: dict[str, Any]) -> None:
        serial = aggregate["serial"]
        if serial not in self._att.seen:
            # First sight of the message on this attachment: the aggregate (as it is now), as an update.
            self._deliver_full(dict(aggregate))
            return
        window = self._client.hub.append_rollup_window
        if window <= 0:
            self._flush_held()
            self._enqueue(fragment)
            return
        held = self._att.held.get(serial)
        if held is not None:
            prev = held.fragment
            merged = dict(fragment)
            merged["data"] = prev.get("data", "") + fragment.get("data", "")  # same type (checked)
            held.fragment = merged
            return
        # Anything held for other messages was accepted before this append: deliver it first.
        self._flush_held()
        now = time.monotonic()
        last = self._att.last_fragment_at.get(serial)
        if last is None or now - last >= window:
            self._att.last_fragment_at[serial] = now
            self._enqueue(fragment)
            return
        loop = asyncio.get_running_loop()
        h = _Held(fragment=dict(fragment))
        h.timer = loop.call_later(window - (now - last), self._on_timer, serial)
        self._att.held[serial] = h

    # -- operations -------------------------------------------------------------------------

    def _check_open(self, op: str) -> None:
        if self._closed:
            raise AITransportError(
                f"unable to {op}; channel '{self.name}' is closed", INVALID_STATE_CODE, 400
            )

    def _check_outbound(self, msg: Any, op: str, *, need_serial: bool) -> dict[str, Any]:
        check_message_fields(msg, op)
        data = msg.get("data")
        if data is not None and not isinstance(data, (str, bytes, bytearray, dict, list, int, float, bool)):
            raise InvalidTypeError(
                f"unable to {op}; message.data must be str, bytes or JSON-shaped, got {type_name(data)}",
                INVALID_DATA_CODE,
            )
        cid = msg.get("clientId")
        if cid is not None and cid != self.client_id:
            raise AITransportError(
                f"unable to {op}; message.clientId '{cid}' does not match the connection's clientId "
                f"'{self.client_id}'",
                MISMATCHED_CLIENT_ID_CODE,
                400,
            )
        if need_serial:
            check_message_serial(msg, op)
        return msg

    @staticmethod
    def _norm_data(data: Any) -> Any:
        if isinstance(data, bytearray):
            return bytes(data)
        return _json_copy(data) if isinstance(data, (dict, list)) else data

    async def publish(self, messages: OutboundMessage | Sequence[OutboundMessage]) -> list[str]:
        """Publish one message or a list atomically; return the serials in order."""
        self._check_open("publish")
        batch = [messages] if isinstance(messages, dict) else list(messages) if isinstance(
            messages, (list, tuple)
        ) else None
        if batch is None:
            raise InvalidTypeError(
                f"unable to publish; messages must be a dict or a list of dicts, got {type_name(messages)}",
                ErrorCode.INVALID_ARGUMENT,
            )
        for m in batch:
            self._check_outbound(m, "publish", need_serial=False)
        state = self._state
        ts = _now_ms()
        msg_serial = self._client.next_msg_serial()
        stored: list[dict[str, Any]] = []
        for i, m in enumerate(batch):
            serial = state.next_serial()
            agg: dict[str, Any] = {"id": m.get("id") or f"{self.connection_id}:{msg_serial}:{i}"}
            if m.get("name") is not None:
                agg["name"] = m["name"]
            agg["data"] = self._norm_data(m.get("data"))
            if m.get("extras") is not None:
                agg["extras"] = _json_copy(m["extras"])
            agg["action"] = "message.create"
            agg["serial"] = serial
            agg["version"] = {"serial": serial, "timestamp": ts}
            agg["timestamp"] = ts
            if self.client_id is not None:
                agg["clientId"] = self.client_id
            agg["connectionId"] = self.connection_id
            entry = _Stored(agg)
            state.messages.append(entry)
            state.by_serial[serial] = entry
            stored.append(agg)
        for att in list(state.attachments):
            for agg in stored:
                att._deliver_full(dict(agg))  # listeners get their own copy at delivery
        return [a["serial"] for a in stored]

    def _lookup(self, serial: str, op: str) -> _Stored:
        entry = self._state.by_serial.get(serial)
        if entry is None:
            raise AITransportError(
                f"unable to {op}; no message with serial '{serial}' on channel '{self.name}'",
                NOT_FOUND_CODE,
                404,
            )
        return entry

    def _new_version(self) -> dict[str, Any]:
        version: dict[str, Any] = {"serial": self._state.next_serial(), "timestamp": _now_ms()}
        if self.client_id is not None:
            version["clientId"] = self.client_id
        return version

    async def append_message(self, message: OutboundMessage) -> str:
        """Append ``data`` to the message at ``message["serial"]``; return the new version serial."""
        self._check_open("append message")
        self._check_outbound(message, "append message", need_serial=True)
        entry = self._lookup(message["serial"], "append message")
        agg = entry.aggregate
        old = agg.get("data")
        frag = message.get("data")
        if isinstance(frag, bytearray):
            frag = bytes(frag)
        if frag is None:
            frag = b"" if isinstance(old, bytes) else ""
        if old is None:
            old = b"" if isinstance(frag, bytes) else ""
        joined: str | bytes
        if isinstance(old, str) and isinstance(frag, str):  # noqa: SIM114 - two branches narrow for mypy
            joined = old + frag
        elif isinstance(old, bytes) and isinstance(frag, bytes):
            joined = old + frag
        else:
            raise AITransportError(
                f"unable to append message; message.data is {type_name(frag)} but the message at serial "
                f"'{message['serial']}' holds {type_name(old)} (append needs string+string or bytes+bytes)",
                ErrorCode.INVALID_ARGUMENT,
                400,
            )
        version = self._new_version()
        agg["data"] = joined
        if message.get("name") is not None:
            agg["name"] = message["name"]
        if message.get("extras") is not None:
            agg["extras"] = _json_copy(message["extras"])
        else:
            agg.pop("extras", None)
        if agg["action"] != "message.delete":
            agg["action"] = "message.update"
        agg["version"] = version
        entry.changed()
        fragment: dict[str, Any] = {"id": agg["id"], "data": frag}
        if agg.get("name") is not None:
            fragment["name"] = agg["name"]
        if message.get("extras") is not None:
            fragment["extras"] = agg["extras"]  # the stored copy: replaced, never mutated
        fragment.update(
            action="message.append",
            serial=agg["serial"],
            version=dict(version),
            timestamp=agg["timestamp"],
            connectionId=agg["connectionId"],
        )
        if "clientId" in agg:
            fragment["clientId"] = agg["clientId"]
        for att in list(self._state.attachments):
            # the fragment is never mutated once built (a roll-up merges into a new dict) and every
            # listener gets its own copy at delivery; the aggregate is snapshotted only on first sight
            att._deliver_append(agg, fragment)
        return version["serial"]

    async def _replace(self, message: OutboundMessage, op: str, action: str) -> str:
        self._check_open(op)
        self._check_outbound(message, op, need_serial=True)
        entry = self._lookup(message["serial"], op)
        agg = entry.aggregate
        version = self._new_version()
        if action == "message.update":
            agg["data"] = self._norm_data(message.get("data"))
        elif message.get("data") is not None:  # a deleted message keeps only the delete's own data
            agg["data"] = self._norm_data(message["data"])
        else:  # (usually none), as in Ably
            agg.pop("data", None)
        if message.get("name") is not None:
            agg["name"] = message["name"]
        if message.get("extras") is not None:
            agg["extras"] = _json_copy(message["extras"])
        agg["action"] = action
        agg["version"] = version
        entry.changed()
        for att in list(self._state.attachments):
            att._deliver_full(dict(agg))  # listeners get their own copy at delivery
        return version["serial"]

    async def update_message(self, message: OutboundMessage) -> str:
        """Replace ``data`` and the supplied ``name`` / ``extras``; return the new version serial."""
        return await self._replace(message, "update message", "message.update")

    async def delete_message(self, message: OutboundMessage) -> str:
        """Mark the message at ``message["serial"]`` deleted; return the new version serial."""
        return await self._replace(message, "delete message", "message.delete")

    async def get_message(self, serial: str) -> InboundMessage:
        """The aggregate (latest version) of the message at ``serial``."""
        return self._lookup(serial, "get message").copy()

    async def history(
        self, *, limit: int = 100, direction: str = "backwards", until_attach: bool = False
    ) -> InProcessHistoryPage:
        """Stored aggregates, newest-first by default, paged by ``limit`` (1..1000).

        With ``until_attach`` only messages at or before the attach serial are returned (the
        channel must be attached).
        """
        check_history_args(limit, direction)
        bound = None
        if until_attach:
            if not self._attached or self._attach_serial is None:
                raise AITransportError(
                    "unable to get history; until_attach was specified but the channel is not attached",
                    ErrorCode.BAD_REQUEST,
                    400,
                )
            bound = self._attach_serial
        return _history_page(self._state, limit, direction, bound, None)

    def __repr__(self) -> str:
        return (
            f"InProcessChannel(name={self.name!r}, client_id={self.client_id!r}, "
            f"connection_id={self.connection_id!r}, state={self.state!r})"
        )
