"""What an agent run uses of its session: :class:`AgentSessionHost`, the protocol
:class:`~ai_transport.sessions.agent.AgentSession` (one layer up) provides.

The run sits below the session that creates it; it names the session through this protocol, never
by class, so the layers import only downward.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..conversation.core import Conversation
from ..conversation.held import HeldWires
from ..conversation.lifecycle import RunLifecycleEvent
from ..conversation.live_integrity import LiveVerifier
from ..conversation.nodes import Emitter, RunNode
from ..conversation.open_streams import OpenStreams
from ..conversation.own_streams import OwnStreams
from ..conversation.signing import HistoryIntegrity
from ..conversation.tree import Tree
from ..lease import LeasePolicy
from .claims import ClaimLedger
from .view import HistoryHydrator

__all__ = ["AgentSessionHost"]


class AgentSessionHost(Protocol):
    """The members of an agent session its runs (and their parts) read and call."""

    @property
    def channel(self) -> Any:
        """``channel`` of the agent session (``AgentSession``)."""

    @property
    def codec(self) -> Any:
        """``codec`` of the agent session (``AgentSession``)."""

    @property
    def core(self) -> Conversation:
        """``core`` of the agent session (``AgentSession``): the sans-I/O conversation core."""

    @property
    def tree(self) -> Tree:
        """``tree`` of the agent session (``AgentSession``)."""

    @property
    def hydrator(self) -> HistoryHydrator:
        """``hydrator`` of the agent session (``AgentSession``)."""

    @property
    def integrity(self) -> HistoryIntegrity:
        """``integrity`` of the agent session (``AgentSession``)."""

    @property
    def live_verifier(self) -> LiveVerifier | None:
        """``live_verifier`` of the agent session (``AgentSession``)."""

    @property
    def claims(self) -> ClaimLedger:
        """``claims`` of the agent session (``AgentSession``)."""

    @property
    def lease_policy(self) -> LeasePolicy:
        """``lease_policy`` of the agent session (``AgentSession``)."""

    @property
    def open_streams(self) -> OpenStreams:
        """``open_streams`` of the agent session (``AgentSession``)."""

    @property
    def own_streams(self) -> OwnStreams:
        """``own_streams`` of the agent session (``AgentSession``)."""

    @property
    def _connected(self) -> bool:
        """``_connected`` of the agent session (``AgentSession``)."""

    @property
    def _emitter(self) -> Emitter:
        """``_emitter`` of the agent session (``AgentSession``)."""

    @property
    def _run_by_input_cmid(self) -> dict[str, str]:
        """``_run_by_input_cmid`` of the agent session (``AgentSession``)."""

    @property
    def _deferred_cancels(self) -> HeldWires:
        """``_deferred_cancels`` of the agent session (``AgentSession``)."""

    @property
    def trusted_agent_ids(self) -> set[Any]:
        """``trusted_agent_ids`` of the agent session (``AgentSession``)."""

    def _defer_cancel(self, input_codec_message_id: str, message: Mapping[str, Any]) -> None:
        """``_defer_cancel`` of the agent session (``AgentSession``)."""

    def subscribe(self, kind: type[Any], handler: Callable[[Any], None]) -> Callable[[], None]:
        """``subscribe`` of the agent session (``AgentSession``): the core's changes of ``kind``."""

    def _require_connected(self, method: str) -> None:
        """``_require_connected`` of the agent session (``AgentSession``)."""

    def _apply_local_lifecycle(self, event: RunLifecycleEvent) -> None:
        """``_apply_local_lifecycle`` of the agent session (``AgentSession``)."""

    def _input_accepted(self, client_id: Any, run: RunNode | None) -> bool:
        """``_input_accepted`` of the agent session (``AgentSession``)."""

    def _reject(self, message: Mapping[str, Any], why: str) -> None:
        """``_reject`` of the agent session (``AgentSession``)."""

    def _skip(self, message: Mapping[str, Any], why: str) -> None:
        """``_skip`` of the agent session (``AgentSession``): count and log a wire not acted on."""

    def _forget(self, run: Any) -> None:
        """``_forget`` of the agent session (``AgentSession``)."""

    def _rekey(self, run: Any, old: str) -> None:
        """``_rekey`` of the agent session (``AgentSession``)."""

    async def wait_seen(self, serial: str, timeout: float = 10.0) -> bool:
        """``wait_seen`` of the agent session (``AgentSession``)."""
