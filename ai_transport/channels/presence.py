"""Presence on a channel: who is attached and entered (Ably presence), as a small asyncio surface.

Every :class:`~ai_transport.channels.channel.Channel` implementation of this package has a
``presence`` attribute implementing :class:`Presence` (:class:`PresenceChannel` is the protocol of
such a channel): the in-process channel (:mod:`.presence_memory`) and :class:`AblyChannel`
(:mod:`.presence_ably`, the SDK's realtime presence; Ably's cloud or the local emulator).

Semantics (Ably's, features spec RTP*), followed by both:

* a member is one ``(connectionId, clientId)``; ``enter`` / ``update`` / ``leave`` act for the
  connection's own ``clientId`` (a connection without one cannot enter: error 40012) and attach
  the channel if needed;
* entering when already present is an update; updating when absent is an enter; a leave without
  data carries the member's last data; leaving when absent does nothing;
* ``get()`` lists the current members (``action: "present"``); ``subscribe(listener)`` delivers
  every later event (``"enter"``, ``"update"``, ``"leave"``), in order, one at a time (coroutine
  listeners are awaited). On Ably a (re)attach also synchronises the set, which may deliver
  ``"present"`` events for members already there (and ``"leave"`` for members gone meanwhile);
  use ``get()`` for the current set;
* a connection's members leave when it detaches the channel or closes; on Ably also when its
  transport drops and it does not come back within the disconnection grace (15 s), as a
  *synthesized* leave (its ``id`` does not start with the ``connectionId``).

Members and events are plain dicts of :class:`PresenceMember` shape; ``data`` is ``None``, a string,
bytes or a JSON object / array (anything else: error 40013).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from ..errors import ErrorCode, InvalidTypeError, type_name
from .channel import Channel

__all__ = [
    "PRESENCE_ACTIONS",
    "Presence",
    "PresenceActionName",
    "PresenceChannel",
    "PresenceListener",
    "PresenceMember",
    "presence_action_name",
]

logger = logging.getLogger("ai_transport.channels.presence")

PresenceActionName = Literal["absent", "present", "enter", "leave", "update"]

#: Index = Ably's numeric PresenceMessage action.
PRESENCE_ACTIONS: tuple[str, ...] = ("absent", "present", "enter", "leave", "update")


def presence_action_name(action: Any) -> str | None:
    """Normalise a presence action (ably-js string or Ably int) to its ably-js name."""
    if isinstance(action, str):
        return action if action in PRESENCE_ACTIONS else None
    try:
        i = int(action)
    except (TypeError, ValueError):
        return None
    return PRESENCE_ACTIONS[i] if 0 <= i < len(PRESENCE_ACTIONS) else None


class PresenceMember(TypedDict, total=False):
    """A presence member (``get``) or event (``subscribe``), in Ably's JSON shape."""

    action: PresenceActionName
    clientId: str
    connectionId: str
    id: str
    timestamp: int
    data: Any
    encoding: str
    extras: dict[str, Any]


PresenceListener = Callable[[PresenceMember], Awaitable[None] | None]


@runtime_checkable
class Presence(Protocol):
    """A channel's presence set: enter / update / leave for this connection, get, subscribe."""

    async def enter(self, data: Any = None) -> None:
        """Enter the set as this connection's ``clientId`` (an update if already present)."""
        ...

    async def update(self, data: Any = None) -> None:
        """Update this member's data (an enter if not present)."""
        ...

    async def leave(self, data: Any = None) -> None:
        """Leave the set (no-op if not present); without ``data`` the leave carries the last data."""
        ...

    async def get(self, *, client_id: str | None = None, connection_id: str | None = None) -> list[PresenceMember]:
        """The current members (``action: "present"``), optionally filtered."""
        ...

    async def subscribe(self, listener: PresenceListener) -> None:
        """Attach if needed and deliver every later presence event to ``listener``, in order."""
        ...

    def unsubscribe(self, listener: PresenceListener | None = None) -> None:
        """Remove one listener, or all."""
        ...


@runtime_checkable
class PresenceChannel(Channel, Protocol):
    """A :class:`~ai_transport.channels.channel.Channel` with a :class:`Presence` set."""

    @property
    def presence(self) -> Presence:
        """This channel's presence set."""
        ...


#: Ably's "invalid message data or encoding".
INVALID_DATA_CODE = 40013


def check_presence_data(data: Any, op: str) -> None:
    """Raise :class:`~ai_transport.errors.InvalidTypeError` (40013) unless ``data`` is ``None``, a
    string, bytes or a JSON object / array (what Ably carries)."""
    if data is not None and not isinstance(data, (str, bytes, bytearray, dict, list)):
        raise InvalidTypeError(
            f"unable to {op} presence; data must be str, bytes, dict, list or None, got {type_name(data)}",
            INVALID_DATA_CODE,
        )


class PresenceDelivery:
    """Listeners and an ordered delivery task for presence events (shared by the implementations)."""

    def __init__(self, channel_name: str) -> None:
        self._name = channel_name
        self._listeners: list[PresenceListener] = []
        self._queue: asyncio.Queue[tuple[PresenceMember, tuple[PresenceListener, ...]]] | None = None
        self._task: asyncio.Task[None] | None = None

    def add(self, listener: PresenceListener) -> bool:
        """Register ``listener`` (validated); True if it is the first one ever registered."""
        if not callable(listener):
            raise InvalidTypeError(
                f"unable to subscribe to presence; listener must be callable, got {type_name(listener)}",
                ErrorCode.INVALID_ARGUMENT,
            )
        first = self._task is None
        if first:
            self._queue = asyncio.Queue()
            self._task = asyncio.get_running_loop().create_task(self._loop())
        self._listeners.append(listener)
        return first

    def remove(self, listener: PresenceListener | None = None) -> None:
        """Remove one listener (every registration of it), or all."""
        if listener is None:
            self._listeners.clear()
        else:
            self._listeners = [x for x in self._listeners if x is not listener]

    def push(self, event: PresenceMember, only: PresenceListener | None = None) -> None:
        """Queue ``event`` for the current listeners (or only ``only``)."""
        if self._queue is None or not self._listeners:
            return
        targets = (only,) if only is not None else tuple(self._listeners)
        self._queue.put_nowait((event, targets))

    async def _loop(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            event, listeners = await queue.get()
            for listener in listeners:
                if not any(x is listener for x in self._listeners):
                    continue
                try:
                    result = listener(copy.copy(event))
                    if inspect.isawaitable(result):
                        await result
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("presence listener raised on channel %r", self._name)

    async def stop(self) -> None:
        """Drop the listeners and stop the delivery task."""
        self._listeners.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
