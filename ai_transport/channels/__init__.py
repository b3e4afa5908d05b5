"""ai_transport.channels: the ``Channel`` protocol and its implementations.

:class:`InProcessHub` / :class:`InProcessChannel` (the embedded default, no network) and
:class:`AblyChannel` (the ``ably`` SDK: real Ably or the local emulator); history paging helpers.
Nothing here knows about sessions: :mod:`ai_transport.sessions` builds on this package, never the
reverse.
"""

from .ably_channel import AblyChannel
from .channel import (
    ACTIONS,
    Channel,
    HistoryPage,
    InboundMessage,
    Listener,
    MessageVersion,
    OutboundMessage,
    Writer,
    action_name,
)
from .history import collect_history, iter_history
from .memory import InProcessChannel, InProcessClient, InProcessHub

__all__ = [
    "ACTIONS",
    "AblyChannel",
    "Channel",
    "HistoryPage",
    "InProcessChannel",
    "InProcessClient",
    "InProcessHub",
    "InboundMessage",
    "Listener",
    "MessageVersion",
    "OutboundMessage",
    "Writer",
    "action_name",
    "collect_history",
    "iter_history",
]
