"""Channel state changes: what a session needs to notice a loss of message continuity.

Every :class:`~ai_transport.channels.channel.Channel` reports its state changes to listeners added
with ``channel.on_state_change(listener)`` (returns an unsubscribe function), as
:class:`ChannelStateChange` values, delivered in order with the channel's messages (a change is
seen after every message delivered before it and before every message delivered after it).

Continuity is lost (:func:`is_continuity_lost`, as 0.8.0's ``isContinuityLost``) when the channel
becomes ``failed``, ``suspended`` or ``detached``, or re-attaches with ``resumed`` false: messages
published meanwhile may never be delivered live and must be read from history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ChannelStateChange", "StateListener", "is_continuity_lost"]


@dataclass(frozen=True)
class ChannelStateChange:
    """A channel state change: ``current`` / ``previous`` state names (``"attached"``,
    ``"suspended"`` …), ``resumed`` (an ``attached`` that kept continuity) and ``reason`` (the
    error that caused it, if any)."""

    current: str
    previous: str
    resumed: bool = False
    reason: Any = None


StateListener = Callable[[ChannelStateChange], None]


def is_continuity_lost(change: ChannelStateChange) -> bool:
    """True when ``change`` may have skipped messages (0.8.0's ``isContinuityLost``)."""
    return change.current in ("failed", "suspended", "detached") or (
        change.current == "attached" and not change.resumed
    )
