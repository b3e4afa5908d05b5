"""ai_transport.sessions: agent and client sessions over any :class:`~ai_transport.channels.Channel`.

Agent side: :class:`AgentSession` → :class:`AgentRun` (→ :class:`RunStep`). Client side:
:class:`ClientSession` → :class:`ClientView` / :class:`ClientRun`. Both read the conversation
through a :class:`View` over the session's tree (:mod:`.tree`, :mod:`.nodes`); lifecycle headers
live in :mod:`.lifecycle`. Steering: :mod:`.steer` (agent), :mod:`.steer_client` (client); branch
selection: :mod:`.branch`; run hooks: :mod:`.hooks`; leases and fencing: :mod:`.claims`; runs whose
worker died: :class:`Supervisor`. Parity with 0.8.0: ``docs/PARITY.md``.
"""

from ..conversation.branch import BranchHandle
from ..conversation.lifecycle import CancelTarget
from ..conversation.run import PipeResult, RunInfo, StepInfo
from .agent import AgentSession
from .agent_run import AgentRun
from .client import ClientRun, ClientSession, ClientView
from .durable import page_until_located, with_agent_session
from .hooks import CancelRequest
from .invocation import Invocation
from .steer_client import SteerOutcome, SteerResult
from .step import RunStep
from .supervisor import StalledRun, Supervisor
from .tools import function_call_output, gate_calls
from .view import View

__all__ = [
    "AgentRun",
    "AgentSession",
    "BranchHandle",
    "CancelRequest",
    "CancelTarget",
    "ClientRun",
    "ClientSession",
    "ClientView",
    "Invocation",
    "PipeResult",
    "RunInfo",
    "RunStep",
    "StalledRun",
    "SteerOutcome",
    "SteerResult",
    "StepInfo",
    "Supervisor",
    "View",
    "function_call_output",
    "gate_calls",
    "page_until_located",
    "with_agent_session",
]
