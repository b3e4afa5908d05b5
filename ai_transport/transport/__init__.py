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
from .memory import InProcessChannel, InProcessClient, InProcessHub

__all__ = [
    "ACTIONS",
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
]
