"""One authority rule: a wire's author is the identity Ably verified as its publisher — ``clientId``
for a message as created, ``version.clientId`` (the mutator) once someone updated, appended to or
deleted it. Nothing a wire *says* about itself (headers, data, a role) names its author, and trusted
agent identities come from the session's configuration only (:mod:`.admission`).

Every per-publisher rule reads the author here: ownership of identifiers (:mod:`.tree`), admission
of each kind, the bounds of every buffer that holds wires (:mod:`.held`), and who counts as an
agent in presence (:func:`is_agent_member`: the member's ``clientId`` among the configured ids,
never its own data).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from .._shapes import MAPPING
from ..channels.channel import action_name
from ..errors import ErrorCode, InvalidTypeError, type_name

__all__ = ["MUTATIONS", "author_of", "is_agent_member", "mutator_of", "trusted_ids"]

#: The actions by which an identity other than the creator may change a message.
MUTATIONS: Final = ("message.update", "message.append", "message.delete")


def mutator_of(message: Mapping[str, Any]) -> Any:
    """``version.clientId`` of ``message`` (the identity that updated / appended / deleted it), or None."""
    version = message.get("version")
    return version.get("clientId") if isinstance(version, MAPPING) else None


def author_of(message: Mapping[str, Any]) -> str | None:
    """Who Ably says wrote ``message`` as it stands: the mutator of a mutation (when Ably stamped
    one), else the publisher; None when neither is a string."""
    action = message.get("action")
    # a str action is its own name (one outside ACTIONS is no mutation either): no call for the usual create
    if (action if type(action) is str else action_name(action)) in MUTATIONS:
        mutator = mutator_of(message)
        if isinstance(mutator, str):
            return mutator
    client_id = message.get("clientId")
    return client_id if type(client_id) is str or isinstance(client_id, str) else None


def trusted_ids(trusted_agent_ids: Iterable[str]) -> frozenset[str]:
    """The configured trusted agent identities as a set (the string ones); 40003 naming the
    argument unless it is an iterable of ids (a lone ``str`` is not)."""
    if isinstance(trusted_agent_ids, str) or not isinstance(trusted_agent_ids, Iterable):
        raise InvalidTypeError(
            "unable to list agents; trusted_agent_ids must be an iterable of client ids, got "
            f"{type_name(trusted_agent_ids)}",
            ErrorCode.INVALID_ARGUMENT,
        )
    return frozenset(i for i in trusted_agent_ids if isinstance(i, str))


def is_agent_member(member: Mapping[str, Any], trusted_agent_ids: Iterable[str]) -> bool:
    """Whether a presence member / event is a trusted agent's: its ``clientId`` (Ably-verified) is
    one of ``trusted_agent_ids`` (from configuration). The member's own data (``role``) is never
    consulted: anyone can write it."""
    trusted = trusted_ids(trusted_agent_ids)
    client_id = member.get("clientId") if isinstance(member, MAPPING) else None
    return isinstance(client_id, str) and client_id in trusted
