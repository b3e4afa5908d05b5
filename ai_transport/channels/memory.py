"""The in-process channel: Ably's mutable-message channel semantics inside one asyncio process.

This is the embedded default transport: an agent and its clients that live in one process share
named channels through an :class:`InProcessHub`. It follows Ably for everything ``ai_transport``
relies on (see ``ably-protocol.md`` §5-§7):

* every accepted message gets a ``serial`` from a per-channel counter, zero-padded so that serials
  sort lexicographically in acceptance order; version serials of updates / deletes / appends come
  from the same counter, so a new version always sorts after the message and its earlier versions;
* ``publish`` of a list is atomic: the messages get consecutive serials and are delivered together;
* every publish is echoed to the publisher's own subscription (Ably's default ``echo``);
* an attachment that has already received a message gets each later append as a *fragment*
  (``action: "message.append"``, only the appended ``data``, the append's ``extras``, the
  message's ``name`` (as Ably), the original ``serial``, the new ``version``); an attachment seeing the message for the first
  time (it attached after the create) and history get the *aggregate* as ``message.update``;
* an append concatenates ``data`` (``str`` + ``str`` or ``bytes`` + ``bytes`` only, else error
  40003), replaces ``extras`` wholesale (an append without ``extras`` leaves none) and ``name``
  when one is supplied; an update replaces ``data`` (always) and ``name`` / ``extras`` (when
  supplied); a delete marks the message deleted (``action: "message.delete"``) and, as in Ably,
  leaves it only the delete's own ``data`` (usually none); ``name`` / ``extras`` are replaced
  when supplied, as on an update;
* listeners of one channel object are called one message at a time, in channel order; coroutine
  listeners are awaited before the next delivery. Each attachment has its own queue and delivery
  task, so a slow listener never blocks publishers or other subscribers.

**Append roll-up.** Ably can conflate appends to one message that arrive within its
``appendRollupWindow`` (40 ms by default on Ably). Here roll-up is *off by default*
(``append_rollup_window=0``) so that delivery is exact and deterministic; pass e.g.
``InProcessHub(append_rollup_window=0.04)`` to get Ably-like conflation. With a window, the first
append to a message is delivered at once; later appends inside the window are merged (data
concatenated, latest ``extras`` and ``version``) into one fragment delivered when the window
closes, or earlier if anything else must be delivered to that attachment first (channel order is
kept). History and first-sight aggregates are never affected.

The hub is not thread-safe: use it from one event loop.

Here: the hub and its clients; the channel object is in :mod:`.memory_channel`, what the hub
stores per channel (serials, history pages) in :mod:`.memory_store`.
"""

from __future__ import annotations

import itertools
import uuid

from .._channel_names import INVALID_CHANNEL_NAME, channel_name_problem
from ..errors import ErrorCode, InvalidArgumentError, InvalidTypeError, type_name
from .budget import PublishBudget
from .memory_channel import InProcessChannel
from .memory_store import SERIAL_WIDTH, InProcessHistoryPage, _ChannelState

__all__ = [
    "SERIAL_WIDTH",
    "InProcessChannel",
    "InProcessClient",
    "InProcessHistoryPage",
    "InProcessHub",
]


# --------------------------------------------------------------------------------------------
# Hub and clients
# --------------------------------------------------------------------------------------------


class InProcessHub:
    """Holds named in-process channels shared by every client of this hub.

    Args:
        append_rollup_window: seconds within which consecutive appends to one message are
            conflated for live subscribers (Ably's ``appendRollupWindow``); ``0`` (default) = off.
        publish_rate: each client's :class:`~ai_transport.channels.budget.PublishBudget`
            (operations/s its encoders may publish, appends merged to stay under it); ``0``
            (default) = no budget.
    """

    def __init__(self, *, append_rollup_window: float = 0.0, publish_rate: float = 0.0) -> None:
        if not isinstance(append_rollup_window, (int, float)) or append_rollup_window < 0:
            raise InvalidArgumentError(
                "unable to create hub; append_rollup_window must be a non-negative number of seconds",
                ErrorCode.INVALID_ARGUMENT,
            )
        self.append_rollup_window = float(append_rollup_window)
        PublishBudget(publish_rate)  # validates
        self.publish_rate = float(publish_rate)
        self._channels: dict[str, _ChannelState] = {}
        self._connection_ids = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:8]

    def _state(self, name: str) -> _ChannelState:
        state = self._channels.get(name)
        if state is None:
            state = self._channels[name] = _ChannelState(name)
        return state

    def client(self, client_id: str | None = None, *, connection_id: str | None = None) -> InProcessClient:
        """A new client (one connection) with an optional ``client_id``."""
        if client_id is not None and not isinstance(client_id, str):
            raise InvalidTypeError(
                f"unable to create client; client_id must be a string, got {type_name(client_id)}",
                ErrorCode.INVALID_ARGUMENT,
            )
        if connection_id is None:
            connection_id = f"{self._prefix}-{next(self._connection_ids)}"
        return InProcessClient(self, client_id, connection_id)

    def channel(
        self, name: str, *, client_id: str | None = None, connection_id: str | None = None
    ) -> InProcessChannel:
        """Shortcut: a channel object on a fresh client (own connection)."""
        return self.client(client_id, connection_id=connection_id).channel(name)

    def channel_names(self) -> list[str]:
        """Names of every channel used so far."""
        return list(self._channels)


class InProcessClient:
    """One connection to an :class:`InProcessHub` (its ``client_id`` and ``connection_id``)."""

    def __init__(self, hub: InProcessHub, client_id: str | None, connection_id: str) -> None:
        self.hub = hub
        self.client_id = client_id
        self.connection_id = connection_id
        self._msg_serial = itertools.count(0)
        self._channels: dict[str, InProcessChannel] = {}
        #: The connection's publish budget (None unless the hub has a ``publish_rate``).
        self.publish_budget = PublishBudget(hub.publish_rate) if hub.publish_rate else None

    def channel(self, name: str) -> InProcessChannel:
        """The channel object for ``name`` on this connection (one per name, like Ably)."""
        problem = channel_name_problem(name)
        if problem is not None:  # as Ably refuses it (the emulator shares the rule)
            raise InvalidArgumentError(f"unable to get channel; {problem}", INVALID_CHANNEL_NAME)
        ch = self._channels.get(name)
        if ch is None:
            ch = self._channels[name] = InProcessChannel(self, self.hub._state(name))
        return ch

    def next_msg_serial(self) -> int:
        """The next connection-level message serial (Ably's ``msgSerial``), for message ids."""
        return next(self._msg_serial)

    async def close(self) -> None:
        """Close every channel of this connection."""
        for ch in list(self._channels.values()):
            await ch.close()
