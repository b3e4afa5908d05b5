"""What an agent run uses of its session: :class:`AgentSessionHost`, the protocol
:class:`~ai_transport.sessions.agent.AgentSession` (one layer up) provides.

The run sits below the session that creates it; it names the session through this protocol, never
by class, so the layers import only downward.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..conversation.held import HeldWires
from ..conversation.lifecycle import RunLifecycleEvent
from ..conversation.nodes import Emitter, RunNode
from ..conversation.tree import Tree
from ..lease import LeasePolicy
from .claims import ClaimLedger
from .live_integrity import LiveVerifier
from .own_streams import OwnStreams
from .recovery import OpenStreams
from .signing import HistoryIntegrity
from .view import HistoryHydrator

__all__ = ["AgentSessionHost"]


class AgentSessionHost(Protocol):
    """The members of an agent session its runs (and their parts) read and call."""

    @property
    def channel(self) -> Any: ...

    @property
    def codec(self) -> Any: ...

    @property
    def tree(self) -> Tree: ...

    @property
    def hydrator(self) -> HistoryHydrator: ...

    @property
    def integrity(self) -> HistoryIntegrity: ...

    @property
    def live_verifier(self) -> LiveVerifier | None: ...

    @property
    def claims(self) -> ClaimLedger: ...

    @property
    def lease_policy(self) -> LeasePolicy:
        """``lease_policy`` of the agent session (``AgentSession``)."""

    @property
    def open_streams(self) -> OpenStreams: ...

    @property
    def own_streams(self) -> OwnStreams: ...

    @property
    def _connected(self) -> bool: ...

    @property
    def _emitter(self) -> Emitter: ...

    @property
    def _run_by_input_cmid(self) -> dict[str, str]: ...

    @property
    def _deferred_cancels(self) -> HeldWires: ...

    def _require_connected(self, method: str) -> None: ...

    def _apply_local_lifecycle(self, event: RunLifecycleEvent) -> None: ...

    def _input_accepted(self, client_id: Any, run: RunNode | None) -> bool: ...

    def _reject(self, message: Mapping[str, Any], why: str) -> None: ...

    def _forget(self, run: Any) -> None: ...

    def _rekey(self, run: Any, old: str) -> None: ...

    async def wait_seen(self, serial: str, timeout: float = 10.0) -> bool: ...
