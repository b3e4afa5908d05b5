"""Presence for the in-process channel (:class:`InProcessPresence`), semantics as :mod:`.presence`.

The member set of a channel name lives in the hub's channel state, shared by every connection;
events go to the presence listeners of every attached channel object of that name, the acting
connection's included (Ably's echo). Member ids are ``<connectionId>:<msgSerial>:0`` with the
connection's message serial counter, so Ably's newness order (RTP2b) holds. A channel object that
detaches or closes leaves its connection's members at once (the in-process hub has no transport to
drop).
"""

from __future__ import annotations

import copy
import time
from typing import Any, Protocol

from ..errors import AITransportError
from .memory_store import _ChannelState
from .presence import PresenceDelivery, PresenceListener, PresenceMember, check_presence_data

__all__ = ["InProcessPresence"]

#: Ably's "clientId must be specified" / "mismatched clientId".
CLIENT_ID_CODE = 40012


class _PresenceSet:
    """The members of one channel name: ``(connectionId, clientId)`` -> member (first-entry order)."""

    def __init__(self) -> None:
        self.members: dict[tuple[str, str], PresenceMember] = {}


class _MsgSerials(Protocol):
    def next_msg_serial(self) -> int: ...


class PresenceHost(Protocol):
    """What presence uses of its channel object (an ``InProcessChannel``, one layer up)."""

    @property
    def _state(self) -> _ChannelState:
        """``_state`` of the channel object (``InProcessChannel``)."""

    @property
    def _client(self) -> _MsgSerials:
        """``_client`` of the channel object (``InProcessChannel``)."""

    @property
    def name(self) -> str:
        """``name`` of the channel object (``InProcessChannel``)."""

    @property
    def client_id(self) -> str | None:
        """``client_id`` of the channel object (``InProcessChannel``)."""

    @property
    def connection_id(self) -> str:
        """``connection_id`` of the channel object (``InProcessChannel``)."""

    @property
    def state(self) -> str:
        """``state`` of the channel object (``InProcessChannel``)."""

    async def attach(self) -> None:
        """``attach`` of the channel object (``InProcessChannel``)."""

    def _check_open(self, op: str) -> None:
        """``_check_open`` of the channel object (``InProcessChannel``)."""


def _set_of(channel: PresenceHost) -> _PresenceSet:
    state = channel._state
    if state.presence is None:
        state.presence = _PresenceSet()
    found: _PresenceSet = state.presence
    return found


def _present(member: PresenceMember) -> PresenceMember:
    out = copy.copy(member)
    out["action"] = "present"
    return out


class InProcessPresence:
    """:class:`~ai_transport.channels.presence.Presence` of an :class:`~.memory.InProcessChannel`."""

    def __init__(self, channel: PresenceHost) -> None:
        self._channel = channel
        self._delivery = PresenceDelivery(channel.name)

    # -- operations -------------------------------------------------------------------------

    async def enter(self, data: Any = None) -> None:
        """Enter as the connection's ``clientId`` (an update if already present)."""
        await self._act("enter", data)

    async def update(self, data: Any = None) -> None:
        """Update this member's data (an enter if not present)."""
        await self._act("update", data)

    async def leave(self, data: Any = None) -> None:
        """Leave (no-op if not present); without ``data`` the leave carries the member's last data."""
        await self._act("leave", data)

    async def _act(self, action: str, data: Any) -> None:
        check_presence_data(data, action)
        ch = self._channel
        client_id = ch.client_id
        if client_id is None or client_id == "*":
            raise AITransportError(
                f"unable to {action} presence; the connection has no clientId", CLIENT_ID_CODE, 400
            )
        if action != "leave":
            await ch.attach()
        elif ch.state != "attached":
            return  # not attached: nothing of ours is present
        msg_serial = ch._client.next_msg_serial()
        event: PresenceMember = {
            "id": f"{ch.connection_id}:{msg_serial}:0",
            "clientId": client_id,
            "connectionId": ch.connection_id,
            "timestamp": int(time.time() * 1000),
        }
        if data is not None:
            event["data"] = bytes(data) if isinstance(data, bytearray) else copy.deepcopy(data)
        self._apply(event, action)

    def _apply(self, event: PresenceMember, action: str) -> None:
        members = _set_of(self._channel).members
        key = (event["connectionId"], event["clientId"])
        existing = members.get(key)
        if action == "leave":
            if existing is None:
                return
            del members[key]
            event["action"] = "leave"
            if "data" not in event and "data" in existing:
                event["data"] = existing["data"]
        else:
            event["action"] = "update" if existing is not None else "enter"
            members[key] = event
        for att in list(self._channel._state.attachments):
            presence = att._presence
            if presence is not None and not att._interrupted:  # a lost transport delivers nothing
                presence._delivery.push(event)

    def _leave_all(self) -> None:
        """This connection's members leave (the channel object detaches or closes)."""
        ch = self._channel
        members = _set_of(ch).members
        for conn_id, client_id in list(members):
            if conn_id != ch.connection_id:
                continue
            event: PresenceMember = {
                "id": f"synthetic:{ch._client.next_msg_serial()}:0",
                "clientId": client_id,
                "connectionId": conn_id,
                "timestamp": int(time.time() * 1000),
            }
            self._apply(event, "leave")

    # -- reading ----------------------------------------------------------------------------

    async def get(self, *, client_id: str | None = None, connection_id: str | None = None) -> list[PresenceMember]:
        """The current members (``action: "present"``), optionally filtered; attaches if needed."""
        await self._channel.attach()
        return [
            _present(m)
            for m in _set_of(self._channel).members.values()
            if (client_id is None or m["clientId"] == client_id)
            and (connection_id is None or m["connectionId"] == connection_id)
        ]

    async def subscribe(self, listener: PresenceListener) -> None:
        """Attach if needed and deliver every later event (``get()`` gives the current set)."""
        self._channel._check_open("subscribe to presence")
        self._delivery.add(listener)
        await self._channel.attach()

    def unsubscribe(self, listener: PresenceListener | None = None) -> None:
        """Remove one listener, or all."""
        self._delivery.remove(listener)

    async def _stop(self) -> None:
        await self._delivery.stop()
