"""Presence for :class:`~ai_transport.channels.ably_channel.AblyChannel` (:class:`AblyPresence`).

Wraps the ``ably`` SDK's realtime presence (``channel.presence``; Ably's cloud or the emulator):
the SDK keeps the member map (SYNC, newness by id, re-entry of our own members after a re-attach)
and we only adapt it to :mod:`.presence`: SDK ``PresenceMessage`` objects become plain dicts, the
SDK's synchronous listener pushes into a queue drained by one task (events in order, coroutine
listeners awaited), SDK exceptions become :class:`~ai_transport.errors.AITransportError` with
Ably's code.

One SDK behaviour is changed, for the process (:mod:`.sdk_decoding`, applied on import): a presence message whose data the SDK cannot decode (another member entered with
``encoding: "vcdiff"``, or ``json`` over text that is not JSON) raised inside the SDK's transport
handler, so the PRESENCE / SYNC frame holding it was dropped: the SYNC never completed and
``presence.get()`` hung for every ably-python client of the channel. Such a message is now kept
with its data undecoded and its ``encoding``, as ably-js keeps one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from .presence import (
    PresenceActionName,
    PresenceDelivery,
    PresenceListener,
    PresenceMember,
    check_presence_data,
    presence_action_name,
)
from .sdk_decoding import tolerate_sdk_decoding

__all__ = ["AblyPresence", "from_ably_presence"]

logger = logging.getLogger("ai_transport.channels.presence_ably")


tolerate_sdk_decoding()  # (see the module docstring)


def _ms(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    stamp = getattr(value, "timestamp", None)  # datetime
    return int(stamp() * 1000) if callable(stamp) else None


def from_ably_presence(msg: Any) -> PresenceMember:
    """An SDK ``PresenceMessage`` (decoded) as our :class:`~.presence.PresenceMember` dict."""
    action = cast(PresenceActionName, presence_action_name(msg.action) or "present")
    out: PresenceMember = {"action": action}
    if getattr(msg, "client_id", None) is not None:
        out["clientId"] = msg.client_id
    if getattr(msg, "connection_id", None) is not None:
        out["connectionId"] = msg.connection_id
    if getattr(msg, "id", None) is not None:
        out["id"] = msg.id
    ts = _ms(getattr(msg, "timestamp", None))
    if ts is not None:
        out["timestamp"] = ts
    data = getattr(msg, "data", None)
    if isinstance(data, bytearray):
        data = bytes(data)
    if data is not None:
        out["data"] = data
    extras = getattr(msg, "extras", None)
    if extras is not None:
        out["extras"] = extras
    return out


def _to_sdk_data(data: Any) -> Any:
    return bytearray(data) if isinstance(data, bytes) else data


class AblyPresence:
    """:class:`~ai_transport.channels.presence.Presence` of an ``AblyChannel`` (the SDK's presence)."""

    def __init__(
        self,
        raw_channel: Any,
        channel_name: str,
        wrap_error: Callable[[BaseException, str], Exception],
        pace: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._raw = raw_channel
        #: Waits for the connection's publish budget (an enter / update / leave is a message too).
        self._pace = pace
        self._wrap_error = wrap_error
        self._delivery = PresenceDelivery(channel_name)
        self._sdk_subscribed = False
        self._entered = False

    async def enter(self, data: Any = None) -> None:
        """Enter as the connection's ``clientId`` (an update if already present)."""
        await self._call("enter", data)

    async def update(self, data: Any = None) -> None:
        """Update this member's data (an enter if not present)."""
        await self._call("update", data)

    async def leave(self, data: Any = None) -> None:
        """Leave (no-op if not present); without ``data`` the leave carries the member's last data."""
        await self._call("leave", data)

    async def _call(self, op: str, data: Any) -> None:
        check_presence_data(data, op)
        if self._pace is not None:
            await self._pace()
        try:
            await getattr(self._raw.presence, op)(_to_sdk_data(data))
        except Exception as exc:
            raise self._wrap_error(exc, f"{op} presence") from exc
        self._entered = op != "leave"

    async def get(self, *, client_id: str | None = None, connection_id: str | None = None) -> list[PresenceMember]:
        """The current members (``action: "present"``), optionally filtered; attaches if needed."""
        try:
            members = await self._raw.presence.get(client_id=client_id, connection_id=connection_id)
        except Exception as exc:
            raise self._wrap_error(exc, "get presence") from exc
        out = []
        for m in members:
            member = from_ably_presence(m)
            member["action"] = "present"
            out.append(member)
        return out

    def _on_sdk_presence(self, message: Any) -> None:
        try:
            event = from_ably_presence(message)
        except Exception:
            logger.exception("skipping an undecodable presence message on channel %r", self._raw.name)
            return
        self._delivery.push(event)

    async def subscribe(self, listener: PresenceListener) -> None:
        """Attach if needed and deliver every later presence event, in order, to ``listener``."""
        self._delivery.add(listener)
        if not self._sdk_subscribed:
            self._sdk_subscribed = True
            try:
                await self._raw.presence.subscribe(self._on_sdk_presence)
            except Exception as exc:
                self._sdk_subscribed = False
                raise self._wrap_error(exc, "subscribe to presence") from exc

    def unsubscribe(self, listener: PresenceListener | None = None) -> None:
        """Remove one listener, or all."""
        self._delivery.remove(listener)

    async def _stop(self) -> None:
        """The channel closes: leave if we entered (best effort), stop delivery."""
        if self._entered:
            self._entered = False
            try:
                await asyncio.wait_for(self._raw.presence.leave(), 5)
            except Exception:
                logger.debug("presence leave on close failed", exc_info=True)
        if self._sdk_subscribed:
            self._sdk_subscribed = False
            try:
                self._raw.presence.unsubscribe(self._on_sdk_presence)
            except Exception:
                logger.debug("presence unsubscribe failed", exc_info=True)
        await self._delivery.stop()
