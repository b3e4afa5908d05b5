"""Who owns what in the conversation tree: a prompt's ``codec-message-id`` belongs to the client that
published it first, a ``supersedes`` counts only for the superseder's own node, and a node folded from
an impostor's wire is evicted (reported with the tree's ``refused`` event, counted by the session).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .nodes import Emitter, RunNode, _Internal, _sort_serial

__all__ = ["TreeOwnership"]


class TreeOwnership:
    """The ownership half of :class:`~ai_transport.sessions.tree.Tree` (a mixin of it)."""

    if TYPE_CHECKING:
        _nodes: dict[str, _Internal]
        _cmid_to_key: dict[str, str]
        _sorted: list[_Internal]
        _supersedes: dict[str, str | None]
        _superseded: set[str]
        emitter: Emitter

        def _changed(self) -> bool: ...

    def _sync_superseded(self) -> bool:
        """Recompute the superseded keys: a ``supersedes`` counts only for a node of the same client
        (the fork's creator or the run's input client), or one not folded yet."""
        hidden: set[str] = set()
        for key, claimant in self._supersedes.items():
            entry = self._nodes.get(key)
            if entry is None or claimant in (
                entry.owner,
                entry.node.input_client_id if isinstance(entry.node, RunNode) else entry.owner,
            ):
                hidden.add(key)
        if hidden == self._superseded:
            return False
        self._superseded = hidden
        return self._changed()

    def _evict(self, key: str, why: str) -> None:
        """Drop a node folded from an impostor's wire (reported as refused)."""
        entry = self._nodes.pop(key, None)
        if entry is None:
            return
        self._refuse({"serial": _sort_serial(entry.node), "clientId": entry.owner}, why)
        self._sorted.remove(entry)
        for k in [k for k, v in self._cmid_to_key.items() if v == key]:
            del self._cmid_to_key[k]
        self._changed()

    def _refuse(self, message: Mapping[str, Any], why: str) -> None:
        """Report a wire the tree will not fold (``refused`` event: the session counts it)."""
        self.emitter.emit("refused", message, why)

