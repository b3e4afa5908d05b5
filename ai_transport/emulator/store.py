"""The emulator's in-memory message store: channels, serials, mutable-message semantics, history.

Sans-I/O: every method is synchronous and returns plain data; the server decides who receives
what. Serials come from one process-wide counter per :class:`Store`, zero-padded, so every
``serial`` and ``version.serial`` sorts lexicographically in acceptance order across channels.

Mutations (Ably "mutable messages"):

* update (1): ``data``/``encoding`` replaced; ``name``, ``extras`` replaced when supplied;
* delete (2): marked deleted; like an update, ``data``/``encoding`` become the delete's own
  (usually none: a deleted message's data is empty, as in Ably), ``name``/``extras`` kept
  unless supplied;
* append (5): ``data`` = old + fragment (text+text or bytes+bytes), ``extras`` replaced by the
  append's ``extras``, ``name`` replaced when supplied.

Each stored message keeps its aggregate (``action`` 1 after update/append, 2 after delete, 0 while
unmodified) and the list of versions. Every accepted operation is also an :class:`Event` in the
channel's log; a subscriber that already holds the message receives ``Event.live`` (for an
append: the fragment only, with the message's ``name``), one that does not receives the
aggregate as of that event.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .protocol import EmulatorError, MessageAction

__all__ = ["FLOOR_SERIAL", "ChannelLog", "Entry", "Event", "Store", "now_ms"]

SERIAL_WIDTH = 20
#: The channel serial of a channel that has never had a message (sorts before every serial).
FLOOR_SERIAL = "0" * SERIAL_WIDTH

_OPS = (MessageAction.UPDATE, MessageAction.DELETE, MessageAction.APPEND)


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return int(time.time() * 1000)


#: Appended fragments held before they are joined into the aggregate's data (bounds the parts
#: list; joining is amortised over this many appends).
JOIN_EVERY = 256


class Entry:
    """One stored message: its current aggregate and every version (oldest first).

    Appends cost memory linear in the bytes appended: fragments are kept as parts and joined into
    ``aggregate["data"]`` only when read (or every :data:`JOIN_EVERY` appends), and an append's
    version and event keep the length of the data at that point instead of a copy of it.
    """

    __slots__ = ("_agg", "_old", "_parts", "generation", "length", "serial", "versions")

    def __init__(
        self, serial: str, aggregate: dict[str, Any], versions: list[Any] | None = None
    ) -> None:
        self.serial = serial
        self._agg = aggregate
        self._parts: list[Any] = []
        #: Bumped whenever ``data`` is replaced (update / delete): as-of snapshots of appends name it.
        self.generation = 0
        self._old: dict[int, Any] = {}  # generation -> its final data (kept only once replaced)
        self.length = _data_len(aggregate.get("data"))
        #: Version aggregates (dicts) or append :class:`Event` s (materialised by ``Store.versions``).
        self.versions: list[Any] = versions if versions is not None else []

    @property
    def aggregate(self) -> dict[str, Any]:
        """The current aggregate (appended parts joined into ``data`` first)."""
        if self._parts:
            self._join()
        return self._agg

    @aggregate.setter
    def aggregate(self, agg: dict[str, Any]) -> None:
        if self.versions and isinstance(self.versions[-1], Event):  # appends point at this data
            self._old[self.generation] = self.aggregate.get("data")
        self._agg = agg
        self._parts = []
        self.generation += 1
        self.length = _data_len(agg.get("data"))

    def _join(self) -> None:
        base = self._agg.get("data")
        parts = self._parts if base is None else [base, *self._parts]
        self._agg["data"] = b"".join(parts) if isinstance(parts[0], bytes) else "".join(parts)
        self._parts = []

    def meta(self) -> dict[str, Any]:
        """The aggregate without joining pending parts (``data`` may be stale: use :meth:`data_upto`)."""
        return self._agg

    def add(self, frag: Any) -> None:
        """Append a fragment (same type as the data; checked by ``Store.validate``)."""
        self._parts.append(frag)
        self.length += _data_len(frag)
        if len(self._parts) >= JOIN_EVERY:
            self._join()

    def data_upto(self, generation: int, length: int) -> Any:
        """The data as it was when it had ``length`` units in ``generation`` (None if replaced since)."""
        data = self.aggregate.get("data") if generation == self.generation else self._old.get(generation)
        return data[:length] if data is not None and len(data) != length else data


def _data_len(data: Any) -> int:
    return len(data) if isinstance(data, (str, bytes)) else 0


class Event:
    """One accepted operation on a channel, in channel order.

    ``serial`` is the event's own serial (the message serial for a create, the version serial
    otherwise); ``live`` is what a receiver already holding the message gets; ``aggregate`` is
    the message as of this event (action 1/2 once mutated) for first-time receivers. An append's
    aggregate is rebuilt on demand from the message (its data as of the append), so the event log
    holds no copy of the growing data.
    """

    __slots__ = ("_agg", "_snap", "action", "duplicate", "live", "message_serial", "serial")

    def __init__(
        self,
        serial: str,
        message_serial: str,
        action: int,
        live: dict[str, Any],
        aggregate: dict[str, Any] | None,
        duplicate: bool = False,
        snapshot: tuple[Entry, int, int, int] | None = None,
    ) -> None:
        self.serial = serial
        self.message_serial = message_serial
        self.action = action
        self.live = live
        self._agg = aggregate
        self._snap = snapshot
        #: A create whose client-supplied ``id`` was already published (idempotent publishing):
        #: acknowledged with the original serial, not stored or delivered again.
        self.duplicate = duplicate

    @property
    def aggregate(self) -> dict[str, Any]:
        """The message as of this event."""
        if self._agg is not None:
            return self._agg
        assert self._snap is not None
        entry, generation, length, action = self._snap
        agg = dict(entry.meta())
        live = self.live
        agg["action"] = action
        agg["version"] = live["version"]
        if live.get("extras") is not None:
            agg["extras"] = live["extras"]
        else:
            agg.pop("extras", None)
        if live.get("name") is not None:
            agg["name"] = live["name"]
        data = entry.data_upto(generation, length)
        if data is not None:
            agg["data"] = data
        return agg

    def with_live(self, live: dict[str, Any]) -> Event:
        """This event delivering ``live`` instead (a rolled-up append), aggregate unchanged."""
        return Event(self.serial, self.message_serial, self.action, live, self._agg, snapshot=self._snap)


@dataclass
class ChannelLog:
    """A channel: entries by serial (in serial order) and the event log."""

    name: str
    entries: dict[str, Entry] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)  # client-supplied message id -> serial

    @property
    def latest_serial(self) -> str:
        """The serial of the latest event, or :data:`FLOOR_SERIAL`."""
        return self.events[-1].serial if self.events else FLOOR_SERIAL

    def events_after(self, serial: str) -> list[Event]:
        """Events whose serial sorts after ``serial``."""
        lo, hi = 0, len(self.events)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.events[mid].serial <= serial:
                lo = mid + 1
            else:
                hi = mid
        return self.events[lo:]


def _clean_version(v: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(v, dict):
        for key in ("clientId", "description", "metadata"):
            if v.get(key) is not None:
                out[key] = v[key]
    return out


class Store:
    """All channels of one emulator."""

    def __init__(self) -> None:
        self.channels: dict[str, ChannelLog] = {}
        self._counter = 0

    def next_serial(self) -> str:
        """A fresh serial, greater than every serial handed out before."""
        self._counter += 1
        return f"{self._counter:0{SERIAL_WIDTH}d}"

    def channel(self, name: str) -> ChannelLog:
        """The channel ``name`` (created empty on first use)."""
        log = self.channels.get(name)
        if log is None:
            log = self.channels[name] = ChannelLog(name)
        return log

    # -- writes ------------------------------------------------------------------------------

    def validate(self, channel: str, messages: list[dict[str, Any]]) -> None:
        """Check a batch before applying anything (all-or-nothing); raise :class:`EmulatorError`."""
        log = self.channels.get(channel)
        for i, msg in enumerate(messages):
            if not isinstance(msg, dict):
                raise EmulatorError(f"messages[{i}] is not a message object", 40000, 400)
            action = msg.get("action")
            if action is None or action == MessageAction.CREATE:
                continue
            if isinstance(action, bool) or action not in _OPS:
                raise EmulatorError(f"messages[{i}].action {action!r} is not supported", 40000, 400)
            serial = msg.get("serial")
            if not isinstance(serial, str) or not serial:
                raise EmulatorError(f"messages[{i}].serial is required for this action", 40003, 400)
            entry = log.entries.get(serial) if log else None
            if entry is None:
                raise EmulatorError(f"message {serial} not found on channel {channel}", 40400, 404)
            if action == MessageAction.APPEND:
                old, new = entry.meta().get("data"), msg.get("data")
                if new is not None and old is not None and type(old) is not type(new):
                    raise EmulatorError(
                        f"messages[{i}].data: an append must have the same type as the message data "
                        f"({type(old).__name__}, got {type(new).__name__})",
                        40003,
                        400,
                    )
                if new is not None and not isinstance(new, (str, bytes)):
                    raise EmulatorError(
                        f"messages[{i}].data: append data must be a string or binary", 40003, 400
                    )

    def apply(
        self,
        channel: str,
        messages: list[dict[str, Any]],
        *,
        connection_id: str | None,
        client_id: str | None,
        id_prefix: str,
    ) -> list[Event]:
        """Apply a validated batch; return one :class:`Event` per message, serials 1:1.

        A create whose client-supplied ``id`` is already on the channel is a duplicate (Ably's
        idempotent publishing): its event carries the original serial and ``duplicate=True``.
        """
        self.validate(channel, messages)
        log = self.channel(channel)
        ts = now_ms()
        events: list[Event] = []
        for index, msg in enumerate(messages):
            action = msg.get("action")
            if action is None or action == MessageAction.CREATE:
                known = log.ids.get(msg["id"]) if isinstance(msg.get("id"), str) else None
                if known is not None:
                    agg = log.entries[known].aggregate
                    events.append(Event(known, known, int(MessageAction.CREATE), agg, agg, duplicate=True))
                    continue
                events.append(self._create(log, msg, ts, connection_id, client_id, f"{id_prefix}:{index}"))
                if isinstance(msg.get("id"), str) and msg["id"]:
                    log.ids[msg["id"]] = events[-1].serial
            else:
                events.append(self._mutate(log, msg, int(action), ts, connection_id, client_id))
        log.events.extend(e for e in events if not e.duplicate)
        return events

    def _create(
        self,
        log: ChannelLog,
        msg: dict[str, Any],
        ts: int,
        connection_id: str | None,
        client_id: str | None,
        default_id: str,
    ) -> Event:
        serial = self.next_serial()
        agg: dict[str, Any] = {"id": msg.get("id") or default_id}
        for key in ("name", "data", "encoding", "extras"):
            if msg.get(key) is not None:
                agg[key] = msg[key]
        cid = msg.get("clientId") or client_id
        if cid and cid != "*":
            agg["clientId"] = cid
        if connection_id:
            agg["connectionId"] = connection_id
        agg["timestamp"] = ts
        agg["serial"] = serial
        agg["action"] = int(MessageAction.CREATE)
        agg["version"] = {"serial": serial, "timestamp": ts}
        entry = Entry(serial, agg, [dict(agg)])
        log.entries[serial] = entry
        log.order.append(serial)
        return Event(serial, serial, int(MessageAction.CREATE), dict(agg), dict(agg))

    def _mutate(
        self,
        log: ChannelLog,
        msg: dict[str, Any],
        action: int,
        ts: int,
        connection_id: str | None,
        client_id: str | None,
    ) -> Event:
        entry = log.entries[msg["serial"]]
        old = entry.meta()  # appended parts are not joined for an append
        vserial = self.next_serial()
        version: dict[str, Any] = {"serial": vserial, "timestamp": ts}
        version.update(_clean_version(msg.get("version")))
        op_client = msg.get("clientId") or client_id
        if client_id and client_id != "*":
            version["clientId"] = client_id  # an identified client: Ably stamps who did it
        elif op_client and op_client != "*" and "clientId" not in version:
            version["clientId"] = op_client
        if action == MessageAction.APPEND:
            return self._append(entry, msg, version, vserial)
        old = entry.aggregate
        agg = dict(old)
        agg["version"] = version
        if action in (MessageAction.UPDATE, MessageAction.DELETE):
            agg.pop("data", None)
            agg.pop("encoding", None)
            for key in ("data", "encoding"):
                if msg.get(key) is not None:
                    agg[key] = msg[key]
            for key in ("name", "extras"):
                if msg.get(key) is not None:
                    agg[key] = msg[key]
            agg["action"] = int(action)
        else:  # APPEND
            frag = msg.get("data")
            if frag is not None:
                base = old.get("data")
                agg["data"] = frag if base is None else base + frag
                if base is None and msg.get("encoding"):
                    agg["encoding"] = msg["encoding"]
            if msg.get("extras") is not None:
                agg["extras"] = msg["extras"]
            else:
                agg.pop("extras", None)
            if msg.get("name") is not None:
                agg["name"] = msg["name"]
            agg["action"] = (
                int(MessageAction.UPDATE)
                if old.get("action") != MessageAction.DELETE
                else int(MessageAction.DELETE)
            )
        entry.aggregate = agg
        entry.versions.append(agg)
        if action == MessageAction.APPEND:
            live: dict[str, Any] = {"id": old.get("id")}
            if agg.get("name") is not None:
                live["name"] = agg["name"]
            if msg.get("data") is not None:
                live["data"] = msg["data"]
                if msg.get("encoding"):
                    live["encoding"] = msg["encoding"]
            if msg.get("extras") is not None:
                live["extras"] = msg["extras"]
            for key in ("clientId", "connectionId", "timestamp"):
                if old.get(key) is not None:
                    live[key] = old[key]
            live["serial"] = entry.serial
            live["action"] = int(MessageAction.APPEND)
            live["version"] = version
        else:
            live = dict(agg)
            live["action"] = action
        return Event(vserial, entry.serial, action, live, dict(agg))

    @staticmethod
    def _append(entry: Entry, msg: dict[str, Any], version: dict[str, Any], vserial: str) -> Event:
        """An append: the aggregate is updated in place, data kept as parts (linear memory)."""
        agg = entry.meta()
        frag = msg.get("data")
        if frag is not None:
            if agg.get("data") is None and not entry._parts:
                agg["data"] = frag
                entry.length = _data_len(frag)
                if msg.get("encoding"):
                    agg["encoding"] = msg["encoding"]
            else:
                entry.add(frag)
        extras = msg.get("extras")
        if extras is not None:
            if extras == agg.get("extras"):  # a stream's appends repeat their extras: keep one copy
                extras = agg["extras"]
            agg["extras"] = extras
        else:
            agg.pop("extras", None)
        if msg.get("name") is not None:
            agg["name"] = msg["name"]
        if agg.get("action") != MessageAction.DELETE:
            agg["action"] = int(MessageAction.UPDATE)
        agg["version"] = version
        live: dict[str, Any] = {"id": agg.get("id")}
        if agg.get("name") is not None:
            live["name"] = agg["name"]
        if frag is not None:
            live["data"] = frag
            if msg.get("encoding"):
                live["encoding"] = msg["encoding"]
        if extras is not None:
            live["extras"] = extras
        for key in ("clientId", "connectionId", "timestamp"):
            if agg.get(key) is not None:
                live[key] = agg[key]
        live["serial"] = entry.serial
        live["action"] = int(MessageAction.APPEND)
        live["version"] = version
        snapshot = (entry, entry.generation, entry.length, agg["action"])
        event = Event(vserial, entry.serial, int(MessageAction.APPEND), live, None, snapshot=snapshot)
        entry.versions.append(event)
        return event

    # -- reads -------------------------------------------------------------------------------

    def get(self, channel: str, serial: str) -> dict[str, Any]:
        """The aggregate of message ``serial``; 40400 when unknown."""
        log = self.channels.get(channel)
        entry = log.entries.get(serial) if log else None
        if entry is None:
            raise EmulatorError(f"message {serial} not found on channel {channel}", 40400, 404)
        return entry.aggregate

    def versions(self, channel: str, serial: str) -> list[dict[str, Any]]:
        """Every version of message ``serial``, oldest first (appends as aggregates, action 1)."""
        log = self.channels.get(channel)
        entry = log.entries.get(serial) if log else None
        if entry is None:
            raise EmulatorError(f"message {serial} not found on channel {channel}", 40400, 404)
        return [v.aggregate if isinstance(v, Event) else v for v in entry.versions]

    def history(
        self,
        channel: str,
        *,
        start: int | None = None,
        end: int | None = None,
        until_serial: str | None = None,
    ) -> list[dict[str, Any]]:
        """Aggregates of ``channel`` in serial order (oldest first), filtered.

        ``start``/``end`` bound the original timestamp (inclusive); ``until_serial`` keeps
        messages whose serial is at or before it (ably-js ``untilAttach``).
        """
        log = self.channels.get(channel)
        if log is None:
            return []
        out = []
        for serial in log.order:
            if until_serial is not None and serial > until_serial:
                break
            agg = log.entries[serial].aggregate
            ts = agg.get("timestamp", 0)
            if start is not None and ts < start:
                continue
            if end is not None and ts > end:
                continue
            out.append(agg)
        return out
