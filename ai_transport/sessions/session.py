"""What the agent and client sessions share: the folded tree, history hydration, connect / close
plumbing and the publisher-trust predicates (see the trust notes of :mod:`.agent` and :mod:`.client`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ..channels.channel import action_name
from ..errors import AITransportError, ErrorCode
from .lifecycle import (
    EVENT_AI_OUTPUT,
    EVENT_RUN_END,
    EVENT_RUN_RESUME,
    EVENT_RUN_START,
    EVENT_RUN_SUSPEND,
    EVENT_STEP_END,
    EVENT_STEP_START,
)
from .tree import Emitter, Tree, WireApplier
from .view import HistoryHydrator

__all__ = ["AGENT_NAMES", "MUTATIONS", "SessionCore", "is_untrusted_agent_mutation", "mutator_of"]

#: Message names only an agent publishes: ``ai-output`` and the run / step lifecycle.
AGENT_NAMES: Final = frozenset(
    {
        EVENT_AI_OUTPUT,
        EVENT_RUN_START,
        EVENT_RUN_RESUME,
        EVENT_RUN_SUSPEND,
        EVENT_RUN_END,
        EVENT_STEP_START,
        EVENT_STEP_END,
    }
)

#: The actions that change a message already on the channel.
MUTATIONS: Final = ("message.update", "message.append", "message.delete")


def mutator_of(message: Mapping[str, Any]) -> Any:
    """``version.clientId`` of ``message`` (the identity that updated / appended / deleted it), or None."""
    version = message.get("version")
    return version.get("clientId") if isinstance(version, Mapping) else None


def is_untrusted_agent_mutation(message: Mapping[str, Any], trusted_agent_ids: set[Any]) -> bool:
    """True for an update / append / delete of an agent message (named in :data:`AGENT_NAMES`, or
    name-less) whose mutator is not in ``trusted_agent_ids``."""
    name = message.get("name")
    mutator = mutator_of(message)
    return (
        action_name(message.get("action")) in MUTATIONS
        and (mutator if isinstance(mutator, str) else None) not in trusted_agent_ids
        and (not name or name in AGENT_NAMES)
    )


def default_codec() -> Any:
    """The default codec (:class:`~ai_transport.codec.codec.ResponsesCodec`), imported on demand."""
    from ..codec.codec import ResponsesCodec

    return ResponsesCodec


class SessionCore:
    """Base of :class:`~.agent.AgentSession` and :class:`~.client.ClientSession`: one channel folded
    into a :class:`~.tree.Tree` (live and from history), an event emitter, connect / close steps.

    A subclass provides ``_on_live`` (the channel listener) and ``_on_wire`` (folds one message) and
    sets ``_log`` (its module's logger).
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
