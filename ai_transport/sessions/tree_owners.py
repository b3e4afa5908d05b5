"""Who owns what in the conversation tree (and the client-fork bookkeeping): a prompt's ``codec-message-id`` belongs to the client that
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

    # -- optimistic client forks -------------------------------------------------------------

    def _rekey_fork_run(self, fork_cmid: str | None, run_id: str) -> _Internal | None:
        if fork_cmid is None or fork_cmid == run_id:
            return None
        entry = self._nodes.get(fork_cmid)
        if entry is None or not isinstance(entry.node, RunNode) or entry.node.run_id != fork_cmid:
            return None
        other = self._nodes.get(run_id)
        if other is not None and other is not entry:
            return None
        del self._nodes[fork_cmid]
        entry.node.run_id = run_id
        self._nodes[run_id] = entry
        for k, v in list(self._cmid_to_key.items()):
            if v == fork_cmid:
                self._cmid_to_key[k] = run_id
        self._cmid_to_key[fork_cmid] = run_id
        self._changed()
        return entry

    def _link_fork_input(self, fork_cmid: str | None, run_id: str) -> bool:
        if fork_cmid is None or fork_cmid == run_id:
            return False
        if self._rekey_fork_run(fork_cmid, run_id) is not None:
            return True
        if fork_cmid not in self._cmid_to_key:
            self._cmid_to_key[fork_cmid] = run_id
            self._changed()
        return False
