"""ai_transport.transport: channels (the ``Channel`` protocol and its implementations)."""

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
from .ably_channel import AblyChannel
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
