"""The emulator's presence state: each channel's member set and presence history (sans-I/O).

A member is keyed by ``(connectionId, clientId)`` (Ably's *memberKey*). The server applies
presence operations in arrival order, as Ably does:

* ENTER (2) for a member already present is recorded and broadcast as UPDATE (4); UPDATE for a
  member not present as ENTER ("entering when already entered is treated as an update");
* an ENTER / UPDATE that is not newer than the member it would replace (Ably's newness, RTP2b:
  by ``id`` — msgSerial, then index — or by timestamp when either is synthesized) changes nothing
  and is not broadcast: e.g. an SDK re-entering its members after a re-attach with the member's
  own ``id`` (RTP17g);
* LEAVE (3) removes the member; without ``data`` of its own the leave carries the member's last
  data; a LEAVE for a member that is not present is acknowledged and does nothing;
* members are delivered as PRESENT (1) in a SYNC and in REST ``GET …/presence``.

Every accepted operation is appended to the channel's presence history (REST
``GET …/presence/history``) with a global sequence number that orders it for paging.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

__all__ = ["MemberKey", "PresenceAction", "PresenceChannel", "PresenceStore", "newer_than"]


class PresenceAction(IntEnum):
    """PresenceMessage actions (``absent`` … ``update`` in ably-js)."""

    ABSENT = 0
    PRESENT = 1
    ENTER = 2
    LEAVE = 3
    UPDATE = 4


MemberKey = tuple[str, str]  # (connectionId, clientId)


def _is_synthesized(msg: dict[str, Any]) -> bool:
    mid, conn = msg.get("id"), msg.get("connectionId")
    return not isinstance(mid, str) or not isinstance(conn, str) or not mid.startswith(conn)


def _orderings(mid: str) -> tuple[int, int]:
    parts = mid.split(":")
    try:
        return int(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        return -1, -1


def newer_than(item: dict[str, Any], existing: dict[str, Any]) -> bool:
    """Ably's presence newness (RTP2b): by ``id`` orderings, by timestamp if either is synthesized."""
    if _is_synthesized(item) or _is_synthesized(existing):
        return int(item.get("timestamp") or 0) >= int(existing.get("timestamp") or 0)
    a, b = _orderings(item["id"]), _orderings(existing["id"])
    return a > b


@dataclass
class PresenceChannel:
    """One channel's presence: current members (insertion ordered) and history."""

    name: str
    members: dict[MemberKey, dict[str, Any]] = field(default_factory=dict)
    history: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


class PresenceStore:
    """Every channel's presence set and presence history."""

    def __init__(self) -> None:
        self.channels: dict[str, PresenceChannel] = {}
        self._seq = 0
        # connectionId -> {(channel, member key)}: a connection's members without a scan
        self._by_conn: dict[str, set[tuple[str, MemberKey]]] = {}

    def channel(self, name: str) -> PresenceChannel:
        """The presence state of ``name`` (created on first use)."""
        ch = self.channels.get(name)
        if ch is None:
            ch = self.channels[name] = PresenceChannel(name)
        return ch

    def members(self, name: str) -> list[dict[str, Any]]:
        """The current members of ``name`` as stored (their last ENTER/UPDATE), oldest entry first."""
        ch = self.channels.get(name)
        return list(ch.members.values()) if ch else []

    def present(self, name: str) -> list[dict[str, Any]]:
        """The current members as PRESENT (1) messages (what a SYNC and REST ``get`` carry)."""
        return [dict(m, action=int(PresenceAction.PRESENT)) for m in self.members(name)]

    def apply(self, name: str, message: dict[str, Any]) -> dict[str, Any] | None:
        """Apply one operation (``id``, ``connectionId``, ``clientId``, ``timestamp`` filled in).

        Returns the message to broadcast (its action normalised as described above), or None
        when nothing changes (a LEAVE for a member that is not present).
        """
        ch = self.channel(name)
        key: MemberKey = (message["connectionId"], message["clientId"])
        action = message["action"]
        existing = ch.members.get(key)
        out = dict(message)
        if action == PresenceAction.LEAVE:
            if existing is None:
                return None
            del ch.members[key]
            mine = self._by_conn.get(key[0])
            if mine is not None:
                mine.discard((name, key))
                if not mine:
                    del self._by_conn[key[0]]
            if "data" not in out:
                for k in ("data", "encoding"):
                    if k in existing:
                        out[k] = existing[k]
        else:
            if existing is not None and not newer_than(out, existing):
                return None  # not newer (RTP2b): e.g. a re-entry with the member's own id (RTP17g)
            out["action"] = int(PresenceAction.UPDATE if existing is not None else PresenceAction.ENTER)
            ch.members[key] = out  # an existing member keeps its place (first-entry order)
            self._by_conn.setdefault(key[0], set()).add((name, key))
        self._seq += 1
        ch.history.append((self._seq, out))
        return out

    def members_of(self, connection_id: str, name: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """``(channel, member)`` for every member entered by ``connection_id`` (on ``name`` only if given)."""
        out = []
        for channel, key in sorted(self._by_conn.get(connection_id, ())):
            if name is None or channel == name:
                out.append((channel, self.channels[channel].members[key]))
        return out

    def history_of(
        self, name: str, *, start: int | None = None, end: int | None = None
    ) -> list[tuple[int, dict[str, Any]]]:
        """``(sequence, message)`` of every accepted presence operation on ``name``, oldest first."""
        ch = self.channels.get(name)
        if ch is None:
            return []
        out = []
        for seq, msg in ch.history:
            ts = int(msg.get("timestamp") or 0)
            if start is not None and ts < start:
                continue
            if end is not None and ts > end:
                continue
            out.append((seq, msg))
        return out
