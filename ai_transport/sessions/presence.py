"""Presence for sessions: ``session.presence`` and the agent's "online" member.

``session.presence`` (agent and client sessions, JS ``session.presence``) is the channel's own
presence set (:class:`~ai_transport.channels.presence.Presence`: ``enter`` / ``update`` /
``leave`` / ``get`` / ``subscribe``), with no session semantics added, as in the JS package.

Python-only: an :class:`~.agent.AgentSession` **enters presence while connected** (unless
``enter_presence=False``) with data ``{"role": "agent", ...presence_data}`` and leaves when it
closes or ends; when its worker dies, Ably (and the emulator) remove the member after the
disconnection grace (15 s), so a UI can show "agent online" and tell that a run's worker
vanished. :func:`present_agents` lists such members; :func:`is_agent_member` tests one event (the rule
lives in the core, :func:`ai_transport.conversation.authority.is_agent_member`).
Both take the agent role from the **trusted agent identities you configure** (the member's
``clientId``, which Ably sets from the token), never from the member's own data: any client may
enter presence with ``{"role": "agent"}``, and is not listed for it.
Entering is best effort: a failure (e.g. a token without the ``presence`` capability) is logged
and counted in :attr:`AgentPresence.failures`, never raised from ``connect``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..channels.presence import Presence, PresenceMember
from ..conversation.authority import is_agent_member, trusted_ids
from ..errors import AITransportError, ErrorCode, InvalidTypeError, type_name

__all__ = ["AGENT_ROLE", "AgentPresence", "is_agent_member", "presence_of", "present_agents"]

logger = logging.getLogger("ai_transport.sessions.presence")

#: The ``role`` an agent session's presence data carries.
AGENT_ROLE = "agent"


def presence_of(channel: Any) -> Presence:
    """``channel.presence``, or an :class:`~ai_transport.errors.AITransportError` (40000) naming
    the channel when its implementation has no presence set."""
    presence = getattr(channel, "presence", None)
    if presence is None:
        raise AITransportError(
            f"unable to use presence; channel {getattr(channel, 'name', channel)!r} has no presence set",
            ErrorCode.BAD_REQUEST,
            400,
        )
    found: Presence = presence
    return found


async def present_agents(
    presence: Presence, trusted_agent_ids: Iterable[str], *, client_id: str | None = None
) -> list[PresenceMember]:
    """The members of ``trusted_agent_ids`` present on the channel (optionally only ``client_id``'s)."""
    trusted = trusted_ids(trusted_agent_ids)
    return [m for m in await presence.get(client_id=client_id) if is_agent_member(m, trusted)]


class AgentPresence:
    """The agent session's own member: entered on connect, left on close (best effort)."""

    def __init__(self, channel: Any, data: Mapping[str, Any] | None, enabled: bool) -> None:
        if data is not None and not isinstance(data, Mapping):
            raise InvalidTypeError(
                f"unable to create session; presence_data must be a mapping, got {type_name(data)}",
                ErrorCode.INVALID_ARGUMENT,
            )
        if not isinstance(enabled, bool):
            raise InvalidTypeError(
                f"unable to create session; enter_presence must be a bool, got {type_name(enabled)}",
                ErrorCode.INVALID_ARGUMENT,
            )
        self._channel = channel
        self.data: dict[str, Any] = {**(data or {}), "role": AGENT_ROLE}
        self.enabled = enabled
        self.entered = False
        #: Presence operations that failed (logged, never raised).
        self.failures = 0

    async def enter(self) -> None:
        """Enter with :attr:`data` (skipped when disabled, or the channel or identity cannot)."""
        if not self.enabled:
            return
        presence = getattr(self._channel, "presence", None)
        if presence is None or getattr(self._channel, "client_id", None) in (None, "*"):
            logger.debug("agent presence skipped on %r: no presence set or no clientId", self._channel)
            return
        try:
            await presence.enter(self.data)
            self.entered = True
        except Exception as exc:
            self.failures += 1
            logger.warning("agent presence enter failed on %r: %s", getattr(self._channel, "name", "?"), exc)

    async def leave(self) -> None:
        """Leave if entered."""
        if not self.entered:
            return
        self.entered = False
        try:
            await presence_of(self._channel).leave()
        except Exception as exc:
            self.failures += 1
            logger.debug("agent presence leave failed: %s", exc)
