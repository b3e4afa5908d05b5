"""ai_transport.transport: channels (the ``Channel`` protocol and its implementations) and sessions.

Agent side: :class:`AgentSession` → :class:`AgentRun`. Client side: :class:`ClientSession` →
:class:`ClientView`. Both read the conversation through a :class:`View`.
"""

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
from .agent import AgentRun, AgentSession, RunStep, function_call_output, gate_calls
from .client import ClientRun, ClientSession, ClientView
from .invocation import Invocation
from .lifecycle import CancelTarget
from .run import PipeResult, RunInfo, StepInfo
from .view import View
from .history import collect_history, iter_history
from .memory import InProcessChannel, InProcessClient, InProcessHub

__all__ = [
    "ACTIONS",
    "AblyChannel",
    "AgentRun",
    "AgentSession",
    "CancelTarget",
    "ClientRun",
    "ClientSession",
    "ClientView",
    "Invocation",
    "PipeResult",
    "RunInfo",
    "RunStep",
    "StepInfo",
    "View",
    "function_call_output",
    "gate_calls",
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
