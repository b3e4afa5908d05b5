"""ai_transport.channels: the ``Channel`` protocol and its implementations.

:class:`InProcessHub` / :class:`InProcessChannel` (the embedded default, no network) and
:class:`AblyChannel` (the ``ably`` SDK: real Ably or the local emulator); history paging helpers;
presence (:mod:`.presence`: the :class:`Presence` protocol, in-process and Ably implementations).
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
from .modes import OBJECT_MODES, resolve_channel_modes
from .presence import (
    PRESENCE_ACTIONS,
    Presence,
    PresenceChannel,
    PresenceListener,
    PresenceMember,
    presence_action_name,
)
from .presence_ably import AblyPresence
from .presence_memory import InProcessPresence
from .state import ChannelStateChange, StateListener, is_continuity_lost

__all__ = [
    "ACTIONS",
    "OBJECT_MODES",
    "PRESENCE_ACTIONS",
    "AblyChannel",
    "AblyPresence",
    "Channel",
    "ChannelStateChange",
    "HistoryPage",
    "InProcessChannel",
    "InProcessClient",
    "InProcessHub",
    "InProcessPresence",
    "InboundMessage",
    "Listener",
    "MessageVersion",
    "OutboundMessage",
    "Presence",
    "PresenceChannel",
    "PresenceListener",
    "PresenceMember",
    "StateListener",
    "Writer",
    "action_name",
    "collect_history",
    "is_continuity_lost",
    "iter_history",
    "presence_action_name",
    "resolve_channel_modes",
]
