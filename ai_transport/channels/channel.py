"""The ``Channel`` protocol: the small asyncio surface of an Ably channel that ai_transport uses.

Implementations: the in-process channel (the embedded default), the Ably adapter over the real
``ably`` SDK (Ably's cloud or the local emulator). The codec encoder's *writer* is any object with
``publish`` / ``append_message`` / ``update_message``, which every ``Channel`` is.

Messages are plain dicts in Ably's JSON shape.

Outbound (what callers pass): ``{"name"?, "data"?, "extras"?, "serial"?}`` (``serial`` required for
append / update / delete).

Inbound (what subscribers and history get), :class:`InboundMessage`::

    {"id", "name"?, "data", "encoding"?, "extras"?, "action", "serial",
     "version": {"serial", "timestamp", "clientId"?}, "timestamp", "clientId"?, "connectionId"?}

``action`` is the ably-js string: ``"message.create"``, ``"message.update"``, ``"message.delete"``,
``"message.append"`` (also ``"meta"``, ``"message.summary"``). Semantics follow Ably's mutable
messages: a live subscriber that already saw a message gets each append as a fragment
(``message.append``, fragment ``data``, the append's ``extras``, no ``name``); a first sight of a
mutated message (late attach, history) is its aggregate as ``message.update``.

Operation semantics every implementation follows (checked by ``tests/test_channel_behaviour.py``
on the in-process channel, ``AblyChannel`` on the emulator and the raw SDK on the emulator):

* serials are strings that sort in acceptance order; a version serial sorts after the message's
  serial and its earlier versions; a published list gets consecutive serials, in order;
* append: ``data`` concatenated (``str`` + ``str`` or ``bytes`` + ``bytes``, else 40003), ``extras``
  replaced wholesale by the append's (none if it has none), ``name`` replaced when supplied;
* update: ``data`` always replaced (absent -> ``None``), ``name`` / ``extras`` when supplied;
* delete: the message is marked deleted (``action: "message.delete"``) and stays in history;
* every publish is echoed to the publisher's own subscription;
* history pages hold aggregates ordered by original serial; ``until_attach`` keeps messages at or
  before :attr:`Channel.attach_serial`.

State changes: ``on_state_change(listener)`` reports every channel state change as a
:class:`~ai_transport.channels.state.ChannelStateChange` (``attached`` with ``resumed``,
``suspended``, ``failed``, ``detached`` …) in order with message delivery; sessions use it to notice
a loss of continuity (:func:`~ai_transport.channels.state.is_continuity_lost`).

Implementations also offer ``get_message(serial)`` (the aggregate); it is not part of the protocol.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

ActionName = Literal[
    "message.create", "message.update", "message.delete", "meta", "message.summary", "message.append"
]

#: Index = Ably's numeric Message action.
ACTIONS: tuple[str, ...] = (
    "message.create",
    "message.update",
    "message.delete",
    "meta",
    "message.summary",
    "message.append",
)


def action_name(action: Any) -> str | None:
    """Normalise an action (ably-js string, Ably int, or the ably-python ``MessageAction`` enum)."""
    if type(action) is str or isinstance(action, str):
        return action if action in ACTIONS else None
    try:
        i = int(action)
    except (TypeError, ValueError, OverflowError):  # e.g. float('inf') from an untrusted wire
        return None
    return ACTIONS[i] if 0 <= i < len(ACTIONS) else None


class MessageVersion(TypedDict, total=False):
    """``version`` of an inbound message."""

    serial: str
    timestamp: int
    clientId: str
    description: str
    metadata: dict[str, str]


class InboundMessage(TypedDict, total=False):
    """A message as delivered to subscribers or read from history."""

    id: str
    name: str
    data: Any
    encoding: str
    extras: dict[str, Any]
    action: ActionName
    serial: str
    version: MessageVersion
    timestamp: int
    clientId: str
    connectionId: str


class OutboundMessage(TypedDict, total=False):
    """A message to publish (or, with ``serial``, to append / update / delete)."""

    name: str
    data: Any
    extras: dict[str, Any]
    serial: str
    clientId: str


Listener = Callable[[InboundMessage], Awaitable[None] | None]


@runtime_checkable
class HistoryPage(Protocol):
    """One page of history: ``items`` newest-first (``direction="backwards"``)."""

    items: list[InboundMessage]

    def has_next(self) -> bool:
        """True when an older page exists."""
        ...

    async def next(self) -> HistoryPage | None:
        """The next (older) page, or None."""
        ...


@runtime_checkable
class Writer(Protocol):
    """What the codec encoder writes to (every :class:`Channel` is one)."""

    async def publish(self, messages: OutboundMessage | Sequence[OutboundMessage]) -> list[str]:
        """Publish one or many messages atomically; return their serials in order."""
        ...

    async def append_message(self, message: OutboundMessage) -> str:
        """Append ``data`` to the message at ``message["serial"]``; return the new version serial."""
        ...

    async def update_message(self, message: OutboundMessage) -> str:
        """Replace the message at ``message["serial"]``; return the new version serial."""
        ...


@runtime_checkable
class Channel(Writer, Protocol):
    """A realtime channel with mutable messages, history and ordered subscription."""

    name: str

    @property
    def client_id(self) -> str | None:
        """The identity this connection publishes as (Ably ``clientId``), if any."""
        ...

    @property
    def attach_serial(self) -> str | None:
        """The channel serial at the latest attach (history with ``until_attach`` stops there)."""
        ...

    async def attach(self) -> None:
        """Attach (idempotent)."""
        ...

    async def detach(self) -> None:
        """Detach; subscribers stop receiving."""
        ...

    async def delete_message(self, message: OutboundMessage) -> str:
        """Delete the message at ``message["serial"]``; return the new version serial."""
        ...

    async def subscribe(self, listener: Listener) -> None:
        """Attach if needed and deliver every message, in channel order, to ``listener``.

        Listeners are called in order, one message at a time; a coroutine listener is awaited
        before the next delivery.
        """
        ...

    def unsubscribe(self, listener: Listener | None = None) -> None:
        """Remove one listener, or all."""
        ...

    async def history(
        self, *, limit: int = 100, direction: str = "backwards", until_attach: bool = False
    ) -> HistoryPage:
        """Stored messages (aggregates), newest-first by default, paged by ``limit``."""
        ...

    async def close(self) -> None:
        """Release the channel (and its connection where it owns one)."""
        ...

    def on_state_change(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``listener`` with every :class:`~ai_transport.channels.state.ChannelStateChange`
        (``attached`` with ``resumed``, ``suspended``, ``failed``, ``detached`` …), in order with
        message delivery; returns a function that removes it."""
        ...
