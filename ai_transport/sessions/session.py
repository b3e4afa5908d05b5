"""What the agent and client sessions share: the folded tree, history hydration, connect / close
plumbing and the publisher-trust predicates (see the trust notes of :mod:`.agent` and :mod:`.client`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from ..errors import AITransportError, ErrorCode
from .admission import AGENT_NAMES, MUTATIONS, is_untrusted_agent_mutation, mutator_of
from .tree import Emitter, Tree, WireApplier
from .view import HistoryHydrator
from .wire_check import wire_problem

__all__ = ["AGENT_NAMES", "MUTATIONS", "SessionCore", "is_untrusted_agent_mutation", "mutator_of"]


def default_codec() -> Any:
    """The default codec (:class:`~ai_transport.codec.codec.ResponsesCodec`), imported on demand."""
    from ..codec.codec import ResponsesCodec

    return ResponsesCodec


class SessionCore:
    """Base of :class:`~.agent.AgentSession` and :class:`~.client.ClientSession`: one channel folded
    into a :class:`~.tree.Tree` (live and from history), an event emitter, connect / close steps.

    A subclass provides ``_on_live`` (the channel listener) and ``_on_wire`` (folds one message) and
    sets ``_log`` (its module's logger).

    Untrusted input: every wire from the channel (live or history) is type-checked first
    (:func:`~.wire_check.wire_problem`); a malformed one, one the trust rules refuse and one the tree
    refuses (a ``codec-message-id`` another client owns) is skipped, logged as a warning and counted
    in :attr:`skipped`; ``on("skipped", handler)`` gets ``(message, reason)`` for each. Nothing anyone
    publishes makes a session raise.
    """

    _log: ClassVar[logging.Logger]

    def __init__(
        self,
        channel: Any,
        codec: Any,
        history_page_size: int,
        history_retries: int,
        history_backoff: float,
    ) -> None:
        self.channel = channel
        self.codec = codec if codec is not None else default_codec()
        self.tree = Tree(self.codec)
        self._applier = WireApplier(self.tree, self.codec.create_decoder())
        self.hydrator = HistoryHydrator(
            channel, self._applier, self._on_wire, history_page_size, history_retries, history_backoff
        )
        self._connected = False
        self._closed = False
        self._emitter = Emitter()
        self._skipped = 0
        self.tree.on("refused", self._skip)

    @property
    def skipped(self) -> int:
        """How many channel messages this session did not fold: malformed (a field of the wrong
        type), refused by the trust rules, or refused by the tree (see the class docstring)."""
        return self._skipped

    def _skip(self, message: Mapping[str, Any], why: str) -> None:
        self._skipped += 1
        self._log.warning(
            "skipped %s from client %r (serial %r): %s",
            message.get("name") if isinstance(message, Mapping) else None,
            message.get("clientId") if isinstance(message, Mapping) else None,
            message.get("serial") if isinstance(message, Mapping) else None,
            why,
        )
        self._emitter.emit("skipped", message, why)

    def _well_formed(self, message: Any) -> bool:
        """Type-check a wire; a malformed one is skipped (logged, counted) and False returned."""
        problem = wire_problem(message)
        if problem is None:
            return True
        self._skip(message if isinstance(message, Mapping) else {}, f"malformed: {problem}")
        return False

    def _on_live(self, message: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _on_wire(self, message: Mapping[str, Any]) -> None:
        raise NotImplementedError

    async def connect(self) -> None:
        """Subscribe to every message (unfiltered) and attach."""
        if self._closed:
            raise AITransportError("unable to connect; session is closed", ErrorCode.SESSION_CLOSED, 400)
        if self._connected:
            return
        await self.channel.subscribe(self._on_live)
        await self.channel.attach()
        self._connected = True

    def _unsubscribe_quietly(self) -> None:
        try:
            self.channel.unsubscribe(self._on_live)
        except Exception:
            self._log.debug("unsubscribe failed", exc_info=True)

    async def _detach_quietly(self) -> None:
        try:
            await self.channel.detach()
        except Exception:
            self._log.debug("detach failed", exc_info=True)
