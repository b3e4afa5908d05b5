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

Each stored message keeps its versions (the aggregate: ``action`` 1 after update/append, 2 after
delete, 0 while unmodified); appends are kept in columns (:mod:`.appends`), so an append costs
a few bytes besides its data. Every accepted operation is also an :class:`Event` of the
channel's log (rebuilt from the messages on demand); a subscriber that already holds the message
receives ``Event.live`` (for an append: the fragment only, with the message's ``name``), one that
does not receives the aggregate as of that event.
"""

from __future__ import annotations

import heapq
import time
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from .appends import SERIAL_WIDTH, AppendRun, fmt_serial
from .protocol import EmulatorError, MessageAction

__all__ = ["FLOOR_SERIAL", "ChannelLog", "Entry", "Event", "Store", "Versions", "now_ms"]

#: The channel serial of a channel that has never had a message (sorts before every serial).
FLOOR_SERIAL = "0" * SERIAL_WIDTH

_OPS = (MessageAction.UPDATE, MessageAction.DELETE, MessageAction.APPEND)


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return int(time.time() * 1000)


class Entry:
    """One stored message: its versions, oldest first.

    A create, update or delete is kept as its aggregate (a dict, never mutated afterwards); the
    appends after it as one :class:`~.appends.AppendRun` (columns, about 3 bytes per append
    besides the appended data), so appends cost memory linear in the bytes appended.
    """

    __slots__ = ("segments", "serial")

    def __init__(self, serial: str, aggregate: dict[str, Any]) -> None:
        self.serial = serial
        self.segments: list[dict[str, Any] | AppendRun] = [aggregate]

    @property
    def aggregate(self) -> dict[str, Any]:
        """The current aggregate (do not mutate it)."""
        last = self.segments[-1]
        return last if isinstance(last, dict) else last.aggregate(len(last) - 1)

    def meta(self) -> dict[str, Any]:
        """The aggregate's fields an append does not change (``data`` may be stale)."""
        last = self.segments[-1]
        return last if isinstance(last, dict) else last.base

    def data_type(self) -> type | None:
        """The type of the current data (None when the message has none)."""
        last = self.segments[-1]
        if isinstance(last, AppendRun):
            return last.data_type()
        data = last.get("data")
        return type(data) if data is not None else None

    def run(self) -> AppendRun:
        """The run the next append goes to (a new one after a create / update / delete)."""
        last = self.segments[-1]
        if isinstance(last, AppendRun):
            return last
        run = AppendRun(last)
        self.segments.append(run)
        return run

    def versions(self) -> Versions:
        """Every version's aggregate, oldest first (built when indexed)."""
        return Versions(self.segments)

    def events_after(self, serial: str) -> Iterator[Event]:
        """This message's events whose serial sorts after ``serial``, in order."""
        for seg in self.segments:
            if isinstance(seg, dict):
                if seg["version"]["serial"] > serial:
                    yield Event(seg["version"]["serial"], self.serial, seg["action"], seg, seg)
            elif fmt_serial(seg.serials.last) > serial:
                start = seg.index_after(serial)
                for i, n in enumerate(seg.serials.iter_from(start), start):
                    yield Event(fmt_serial(n), self.serial, int(MessageAction.APPEND), None, None, run=(seg, i))


class Versions(Sequence[dict[str, Any]]):
    """A message's versions as a lazy sequence: an append's aggregate is built when indexed."""

    def __init__(self, segments: list[dict[str, Any] | AppendRun]) -> None:
        self._segments = list(segments)
        self._starts: list[int] = []
        n = 0
        for seg in self._segments:
            self._starts.append(n)
            n += 1 if isinstance(seg, dict) else len(seg)
        self._len = n

    def __len__(self) -> int:
        return self._len

    def _locate(self, i: int) -> tuple[dict[str, Any] | AppendRun, int]:
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(i)
        k = bisect_right(self._starts, i) - 1
        return self._segments[k], i - self._starts[k]

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._len))]
        seg, j = self._locate(i)
        return seg if isinstance(seg, dict) else seg.aggregate(j)

    def serial(self, i: int) -> str:
        """Version ``i``'s serial (without building it)."""
        seg, j = self._locate(i)
        return seg["version"]["serial"] if isinstance(seg, dict) else fmt_serial(seg.serials[j])


class Event:
    """One accepted operation on a channel, in channel order.

    ``serial`` is the event's own serial (the message serial for a create, the version serial
    otherwise); ``live`` is what a receiver already holding the message gets; ``aggregate`` is
    the message as of this event (action 1/2 once mutated) for first-time receivers. An append's
    dicts are built on demand from its :class:`~.appends.AppendRun`; events are not stored (the
    channel log rebuilds them), and two events with the same serials are equal.
    """

    __slots__ = ("_agg", "_live", "_run", "action", "duplicate", "message_serial", "serial")

    def __init__(
        self,
        serial: str,
        message_serial: str,
        action: int,
        live: dict[str, Any] | None,
        aggregate: dict[str, Any] | None,
        duplicate: bool = False,
        run: tuple[AppendRun, int] | None = None,
    ) -> None:
        self.serial = serial
        self.message_serial = message_serial
        self.action = action
        self._live = live
        self._agg = aggregate
        self._run = run
        #: A create whose client-supplied ``id`` was already published (idempotent publishing):
        #: acknowledged with the original serial, not stored or delivered again.
        self.duplicate = duplicate

    @property
    def live(self) -> dict[str, Any]:
        """The event as delivered to a receiver already holding the message."""
        if self._live is None:
            assert self._run is not None
            self._live = self._run[0].live(self._run[1])
        return self._live

    @property
    def aggregate(self) -> dict[str, Any]:
        """The message as of this event."""
        if self._agg is None:
            assert self._run is not None
            self._agg = self._run[0].aggregate(self._run[1])
        return self._agg

    def with_live(self, live: dict[str, Any]) -> Event:
        """This event delivering ``live`` instead (a rolled-up append), aggregate unchanged."""
        return Event(self.serial, self.message_serial, self.action, live, self._agg, run=self._run)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.serial, self.message_serial, self.action, self.duplicate) == (
            other.serial,
            other.message_serial,
            other.action,
            other.duplicate,
        )

    def __hash__(self) -> int:
        return hash((self.serial, self.message_serial))

    def __repr__(self) -> str:
        return f"Event({self.serial!r}, {self.message_serial!r}, action={self.action})"


@dataclass
class ChannelLog:
    """A channel: entries by serial (in serial order); its event log is rebuilt from them."""

    name: str
    entries: dict[str, Entry] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)  # client-supplied message id -> serial
    #: message serial -> the serial of its latest event, least recently changed first
    touched: dict[str, str] = field(default_factory=dict)
    latest_serial: str = FLOOR_SERIAL
    """The serial of the latest event, or :data:`FLOOR_SERIAL`."""

    def touch(self, message_serial: str, serial: str) -> None:
        """Record an event ``serial`` on message ``message_serial`` (the channel's latest)."""
        touched = self.touched
        if touched and next(reversed(touched)) != message_serial:
            touched.pop(message_serial, None)
        touched[message_serial] = serial
        self.latest_serial = serial

    @property
    def events(self) -> list[Event]:
        """Every event, in serial order."""
        return self.events_after(FLOOR_SERIAL)

    def events_after(self, serial: str) -> list[Event]:
        """Events whose serial sorts after ``serial``."""
        changed = []
        for message_serial, last in reversed(self.touched.items()):
            if last <= serial:
                break
            changed.append(self.entries[message_serial].events_after(serial))
        if len(changed) == 1:
            return list(changed[0])
        return list(heapq.merge(*changed, key=lambda ev: ev.serial))


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
                old, new = entry.data_type(), msg.get("data")
                if new is not None and old is not None and old is not type(new):
                    raise EmulatorError(
                        f"messages[{i}].data: an append must have the same type as the message data "
                        f"({old.__name__}, got {type(new).__name__})",
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
            log.touch(events[-1].message_serial, events[-1].serial)
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
        log.entries[serial] = Entry(serial, agg)
        log.order.append(serial)
        return Event(serial, serial, int(MessageAction.CREATE), agg, agg)

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
        vserial = self.next_serial()
        version: dict[str, Any] = {"serial": vserial, "timestamp": ts}
        version.update(_clean_version(msg.get("version")))
        op_client = msg.get("clientId") or client_id
        if client_id and client_id != "*":
            version["clientId"] = client_id  # an identified client: Ably stamps who did it
        elif op_client and op_client != "*" and "clientId" not in version:
            version["clientId"] = op_client
        if action == MessageAction.APPEND:
            run = entry.run()
            del version["serial"], version["timestamp"]
            i = run.add(self._counter, ts, msg, version)
            live = run.live(i, msg.get("data"))
            return Event(vserial, entry.serial, action, live, None, run=(run, i))
        agg = dict(entry.aggregate)
        agg["version"] = version
        agg.pop("data", None)
        agg.pop("encoding", None)
        for key in ("data", "encoding", "name", "extras"):
            if msg.get(key) is not None:
                agg[key] = msg[key]
        agg["action"] = int(action)
        entry.segments.append(agg)
        return Event(vserial, entry.serial, action, agg, agg)

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
        return list(entry.versions())

    def versions_view(self, channel: str, serial: str) -> Versions:
        """:meth:`versions` as a lazy sequence (an append's aggregate is built when indexed)."""
        log = self.channels.get(channel)
        entry = log.entries.get(serial) if log else None
        if entry is None:
            raise EmulatorError(f"message {serial} not found on channel {channel}", 40400, 404)
        return entry.versions()

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
