"""ai_transport.sessions: agent and client sessions over any :class:`~ai_transport.channels.Channel`.

Agent side: :class:`AgentSession` → :class:`AgentRun` (→ :class:`RunStep`). Client side:
:class:`ClientSession` → :class:`ClientView` / :class:`ClientRun`. Both read the conversation
through a :class:`View` over the session's tree (:mod:`.tree`, :mod:`.nodes`); lifecycle headers
live in :mod:`.lifecycle`.
"""

from .agent import AgentSession
from .agent_run import AgentRun
from .client import ClientRun, ClientSession, ClientView
from .durable import page_until_located, with_agent_session
from .invocation import Invocation
from .lifecycle import CancelTarget
from .run import PipeResult, RunInfo, StepInfo
from .step import RunStep
from .tools import function_call_output, gate_calls
from .view import View

__all__ = [
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
    "page_until_located",
    "with_agent_session",
]
