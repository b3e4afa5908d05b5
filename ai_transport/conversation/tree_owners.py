"""Who owns what in the conversation tree (and the client-fork bookkeeping): a prompt's ``codec-message-id`` belongs to the client that
published it first, a ``supersedes`` counts only for the superseder's own node, and a node folded from
an impostor's wire is evicted (reported with the tree's ``refused`` event, counted by the session).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .nodes import Emitter, InputNode, RunNode, _Internal, _sort_serial

__all__ = ["TreeOwnership"]


class TreeOwnership:
    """The ownership half of :class:`~ai_transport.conversation.tree.Tree` (a mixin of it)."""

    if TYPE_CHECKING:
        _nodes: dict[str, _Internal]
        _cmid_to_key: dict[str, str]
        _sorted: list[_Internal]
        _supersedes: dict[str, str | None]
        _superseded: set[str]
        _run_message_ids: set[str]
        _wire: Mapping[str, Any]
        _client: str | None
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

    def _claim_prompt_id(self, cmid: str, serial: str | None) -> tuple[bool, _Internal | None]:
        """May the wire being folded (publisher ``self._client``) hold the prompt id ``cmid``?
        Returns (False, None) when refused (reported), else (True, the node to fold into or None)."""
        entry = self._nodes.get(cmid)
        if (
            entry is not None
            and isinstance(entry.node, RunNode)
            and entry.node.run_id == cmid
            and entry.owner is not None
            and entry.owner != self._client
            and serial is not None
            and entry.node.start_serial is not None
            and serial < entry.node.start_serial
        ):
            # a later client fork took this prompt's id (history folds newest first): it was an impostor
            self._evict(cmid, f"client fork {cmid!r} took the id of an older prompt")
            entry = None
        if (entry is not None and not isinstance(entry.node, InputNode)) or (
            entry is None and cmid in self._run_message_ids
        ):
            self._refuse(self._wire, f"prompt codec-message-id {cmid!r} names a run or its message")
            return False, None
        if entry is not None and isinstance(entry.node, InputNode) and entry.owner != self._client:
            held = entry.node.serial
            if serial is None or held is None or serial >= held:
                self._refuse(self._wire, f"codec-message-id {cmid!r} belongs to client {entry.owner!r}")
                return False, None
            # the older wire owns the id: what was folded under it came from an impostor
            self._evict(cmid, f"codec-message-id {cmid!r} taken over by its first publisher")
            entry = None
        return True, entry

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
