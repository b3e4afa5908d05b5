"""ai_transport.transport: channels (the ``Channel`` protocol and its implementations) and sessions.

Agent side: :class:`AgentSession` → :class:`AgentRun`. Client side: :class:`ClientSession` →
:class:`ClientView`. Both read the conversation through a :class:`View`.
"""

from .ably_channel import AblyChannel
from .agent import AgentRun, AgentSession, RunStep, function_call_output, gate_calls
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
from .client import ClientRun, ClientSession, ClientView
from .history import collect_history, iter_history
from .invocation import Invocation
from .lifecycle import CancelTarget
from .memory import InProcessChannel, InProcessClient, InProcessHub
from .run import PipeResult, RunInfo, StepInfo
from .view import View

__all__ = [
    "ACTIONS",
    "AblyChannel",
    "AgentRun",
    "AgentSession",
    "CancelTarget",
    "Channel",
    "ClientRun",
    "ClientSession",
    "ClientView",
    "HistoryPage",
    "InProcessChannel",
    "InProcessClient",
    "InProcessHub",
    "InboundMessage",
    "Invocation",
    "Listener",
    "MessageVersion",
    "OutboundMessage",
    "PipeResult",
    "RunInfo",
    "RunStep",
    "StepInfo",
    "View",
    "Writer",
    "action_name",
    "collect_history",
    "function_call_output",
    "gate_calls",
    "iter_history",
]
