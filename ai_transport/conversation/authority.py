"""One authority rule: a wire's author is the identity Ably verified as its publisher — ``clientId``
for a message as created, ``version.clientId`` (the mutator) once someone updated, appended to or
deleted it. Nothing a wire *says* about itself (headers, data, a role) names its author, and trusted
agent identities come from the session's configuration only (:mod:`.admission`).

Every per-publisher rule reads the author here: ownership of identifiers (:mod:`.tree`), admission
of each kind, and the bounds of every buffer that holds wires (:mod:`.held`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._shapes import MAPPING
from ..channels.channel import action_name

__all__ = ["MUTATIONS", "author_of", "mutator_of"]

#: The actions by which an identity other than the creator may change a message.
MUTATIONS: Final = ("message.update", "message.append", "message.delete")


def mutator_of(message: Mapping[str, Any]) -> Any:
    """``version.clientId`` of ``message`` (the identity that updated / appended / deleted it), or None."""
    version = message.get("version")
    return version.get("clientId") if isinstance(version, MAPPING) else None


def author_of(message: Mapping[str, Any]) -> str | None:
    """Who Ably says wrote ``message`` as it stands: the mutator of a mutation (when Ably stamped
    one), else the publisher; None when neither is a string."""
    if action_name(message.get("action")) in MUTATIONS:
        mutator = mutator_of(message)
        if isinstance(mutator, str):
            return mutator
    client_id = message.get("clientId")
    return client_id if isinstance(client_id, str) else None
