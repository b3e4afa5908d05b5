"""Who owns what in the conversation tree (and the client-fork bookkeeping), by the one ownership
rule of :mod:`.ownership`: a prompt's (or client fork's) ``codec-message-id``, a wire's ``event-id``,
a run id and a step id belong to their first publisher in channel serial order. A wire of another
publisher is refused (to the tree's ``refused`` hook, counted by the session); when an older wire of
another publisher arrives later (history folds newest page first), the node folded from the previous
owner's wires is set aside (restored if that owner regains the id with a still older wire) and the
new owner's wires refused meanwhile are folded again, with the inputs into a run that claim nothing.
So what the tree shows is the same in every arrival order. A ``supersedes`` counts only for the
superseder's own node.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from .changes import TREE_CHANGED, Report
from .nodes import InputNode, RunNode, _Internal, _sort_serial
from .ownership import (
    KIND_CODEC_MESSAGE_ID,
    KIND_RUN_ID,
    KIND_STEP_ID,
    Claim,
    OwnershipLedger,
    Ruling,
    claimed_at,
)

__all__ = ["AGENT_PARTY", "UNJUDGED", "Replay", "TreeOwnership", "held", "slim_wire"]

#: A fold call that names no publisher (a direct API call, not a wire): it claims nothing.
UNJUDGED: Final[Any] = object()


class _AgentParty:
    """The publisher a run's agent wires claim its run id and step ids for: every trusted agent
    identity is one party (see :data:`AGENT_PARTY`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "the trusted agents"


#: Who a run id and its step ids belong to in a tree that judges them (:attr:`TreeOwnership.judge_runs`:
#: only trusted agents' run wires are admitted there). The trusted identities come from configuration
#: and are one authority: a run one worker opened is carried on by another — a fresh process, a
#: fleet member with its own identity, a takeover after a crash — and which worker may publish for it
#: is the lease's question (``run:<run-id>``, fenced by :mod:`ai_transport.lease`), not ownership's.
#: Judging the agent identities apart would refuse a legitimate hand-off (a resuming worker that no
#: longer sees its own outputs loops).
AGENT_PARTY: Final[Any] = _AgentParty()
#: Wires kept per run to fold again when the run changes owner (inputs that claim nothing).
REPLAYS_HELD: Final = 1000
#: Nodes set aside (their owner lost the id to an older wire; they count again if it regains it).
SET_ASIDE_HELD: Final = 1000


class Replay(NamedTuple):
    """A fold the tree can make again: ``method`` of the tree called with ``args``.

    ``wire``: the wire folded (the last of ``args`` too, or None there); ``slim``: whether it is
    only what a replay keeps of it (:func:`slim_wire`), else the whole message, which the tree
    never holds: what it keeps is :func:`held` (most folds are never kept, so they never copy)."""

    method: str
    args: tuple[Any, ...]
    serial: str | None
    wire: Mapping[str, Any]
    slim: bool = True


#: The fields of a wire a replay keeps (what folding and reporting read besides the decoded
#: events): the rest of the message is not held.
_KEPT: Final = ("serial", "clientId", "name", "action", "connectionId", "timestamp", "version", "id")


def slim_wire(wire: Mapping[str, Any]) -> dict[str, Any]:
    """What a :class:`Replay` keeps of ``wire``."""
    return {k: wire[k] for k in _KEPT if k in wire}


def held(replay: Replay) -> Replay:
    """What the tree keeps of ``replay``: the same fold, its wire slimmed (:func:`slim_wire`)."""
    if replay.slim:
        return replay
    kept = slim_wire(replay.wire)
    return Replay(replay.method, (*replay.args[:-1], kept), replay.serial, kept)


def _replay_order(replay: Replay) -> tuple[int, str]:
    return (1, "") if replay.serial is None else (0, replay.serial)


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
        _on_refused: Callable[[Mapping[str, Any], str], None]
        _report: Report

        def _changed(self) -> bool: ...
        def _insert_sorted(self, entry: _Internal) -> bool: ...

    owners: OwnershipLedger
    judge_runs: bool
    _replays: list[Replay]
    _replaying: bool
    _moved: bool
    _set_aside: dict[tuple[str, str | None], tuple[_Internal, list[str]]]

    def run_owner(self, run_id: str) -> str | None:
        """The agent identity that owns ``run_id`` (its first publisher of a run wire in serial order)."""
        return self.owners.owner(KIND_RUN_ID, run_id)

    def run_contested(self, run_id: str) -> bool:
        """True while another agent identity than the run's owner has claimed ``run_id`` too: an
        older wire still unread (history folds newest first) could move the run, so what the run's
        current wires decide (who may put inputs into it) is not settled yet."""
        return self.owners.contested(KIND_RUN_ID, run_id)

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

    # -- the ledger --------------------------------------------------------------------------

    def _claim(
        self,
        kind: str,
        ident: Hashable,
        publisher: Any,
        serial: str | None,
        payload: Any,
        *,
        mutation: bool = False,
        position: str | None = None,
    ) -> Ruling | None:
        """Claim ``ident`` for the wire being folded (``payload``: a :class:`Replay` of it, or the
        message; ``position``: :meth:`OwnershipLedger.claim`'s); None when refused (reported)."""
        replay = type(payload) is Replay or (type(payload) is not dict and isinstance(payload, Replay))  # the tree keeps what it folded from counted claims itself
        ruling = self.owners.claim(
            kind, ident, publisher, serial, payload,
            mutation=mutation, keep=not replay, hold=held if replay else None, position=position,
        )
        if ruling.accepted and not ruling.lost:  # (the common case: an identifier claimed by its owner)
            return ruling
        if not ruling.accepted:
            # the wire being folded, as it came (a kept replay is only part of it)
            self._refuse(self._wire if replay else payload, f"{kind} {ident!r} belongs to {ruling.owner!r}")
            return None
        for claim in ruling.lost:
            self._refuse_claim(claim, f"{kind} {ident!r} belongs to {ruling.owner!r}")
        return ruling

    def _refuse_claim(self, claim: Claim, why: str) -> None:
        payload = claim.payload
        wire = payload.wire if isinstance(payload, Replay) else payload
        if not isinstance(wire, Mapping):
            wire = self._wire if claim.serial == self._wire.get("serial") else {}
        if not wire:
            wire = {"serial": claim.serial, "clientId": claim.publisher}
        self._refuse(wire, why)

    def _claim_run(self, run_id: str, publisher: Any, serial: str | None, replay: Replay,
                   *, mutation: bool = False) -> bool:
        """An agent wire of ``run_id`` (lifecycle, step, output): may it fold? A run taken over by an
        older wire of another identity is folded again from the new owner's wires. Judged only in a
        tree that admits run wires from trusted agents alone (:attr:`judge_runs`)."""
        if publisher is UNJUDGED or not self.judge_runs:
            return True
        ruling = self.owners.claim(KIND_RUN_ID, run_id, AGENT_PARTY, serial, replay, mutation=mutation, keep=False, hold=held)
        if ruling.accepted and not ruling.lost and not ruling.regained:
            return True  # (the run's own again, the common case: :meth:`_claim_folded` inlined)
        return self._settle(KIND_RUN_ID, run_id, ruling, run_id, run=True)

    def _claim_step(self, run_id: str, step_id: str, publisher: Any, serial: str | None, replay: Replay,
                    *, mutation: bool = False) -> bool:
        """A wire of step ``step_id`` of ``run_id``: may it fold?"""
        if publisher is UNJUDGED or not self.judge_runs:
            return True
        ident = (run_id, step_id)
        ruling = self.owners.claim(KIND_STEP_ID, ident, AGENT_PARTY, serial, replay, mutation=mutation, keep=False, hold=held)
        if ruling.accepted and not ruling.lost and not ruling.regained:
            return True  # (the step's own again, the common case: :meth:`_claim_folded` inlined)
        return self._settle(KIND_STEP_ID, ident, ruling, run_id, run=True)

    def _claim_folded(
        self,
        kind: str,
        ident: Hashable,
        publisher: Any,
        serial: str | None,
        replay: Replay,
        mutation: bool,
        key: str,
        *,
        run: bool,
        position: str | None = None,
    ) -> bool:
        """:meth:`_claim` for the fold ``replay`` of the node ``key``, which changes owner with the
        identifier (:meth:`_move`); False when refused (reported). An identifier claimed by its
        owner again (the common case) costs the ledger's claim and nothing else."""
        ruling = self.owners.claim(
            kind, ident, publisher, serial, replay, mutation=mutation, keep=False, hold=held, position=position
        )
        if ruling.accepted and not ruling.lost and not ruling.regained:
            return True
        return self._settle(kind, ident, ruling, key, run=run)

    def _settle(self, kind: str, ident: Hashable, ruling: Ruling, key: str, *, run: bool) -> bool:
        """The rest of :meth:`_claim_folded` when the claim was refused or moved the identifier."""
        why = f"{kind} {ident!r} belongs to {ruling.owner!r}"
        if not ruling.accepted:
            self._refuse(self._wire, why)  # the wire being folded, as it came (a kept replay is only part of it)
            return False
        for claim in ruling.lost:
            self._refuse_claim(claim, why)
        self._move(key, ruling, run=run)  # (ruling.moved)
        return True

    def _move(self, key: str, ruling: Ruling, *, run: bool) -> None:
        """The node ``key`` changed owner: set the previous owner's node aside (it counts again if
        that owner regains the id), restore the new owner's if it was set aside, fold again the new
        owner's wires refused meanwhile and (a run) the inputs that claimed nothing."""
        previous = ruling.lost[0].publisher if ruling.lost else None
        entry = self._nodes.get(key)
        if entry is not None:
            mapped = self._evict(key)
            if run:
                for step_id in {*entry.steps, *entry.output_attempts}:
                    self.owners.forget(KIND_STEP_ID, (key, step_id))
                self._replays.extend(entry.replays or ())
            self._set_aside[(key, previous)] = (entry, mapped)
            while len(self._set_aside) > SET_ASIDE_HELD:
                del self._set_aside[next(iter(self._set_aside))]
        aside = self._set_aside.pop((key, ruling.owner), None)
        if aside is not None and key not in self._nodes:
            restored, mapped = aside
            self._nodes[key] = restored
            self._insert_sorted(restored)
            for k in mapped:
                self._cmid_to_key.setdefault(k, key)
        self._replays.extend(c.payload for c in ruling.regained if isinstance(c.payload, Replay))
        self._moved = True

    def _keep_replay(self, entry: _Internal, replay: Replay) -> None:
        """Remember a wire folded into ``entry`` that claims nothing (folded again on a change of owner)."""
        if entry.replays is None:
            entry.replays = [held(replay)]
        elif len(entry.replays) < REPLAYS_HELD:
            entry.replays.append(held(replay))

    def _flush_replays(self) -> None:
        """Fold again the wires a change of owner let count (oldest first); announce the change."""
        if self._replaying or not (self._replays or self._moved):
            return
        self._replaying = True
        saved = self._wire, self._client
        try:
            while self._replays:
                batch = sorted(self._replays, key=_replay_order)
                self._replays = []
                for replay in batch:
                    getattr(self, replay.method)(*replay.args)
        finally:
            self._wire, self._client = saved
            self._replaying = False
        if self._moved:
            self._moved = False
            self._changed()
            self._report(TREE_CHANGED)

    def _claim_fork_id(
        self, cmid: str, serial: str | None, version: str | None, replay: Replay
    ) -> tuple[bool, _Internal | None]:
        """May the wire being folded (publisher ``self._client``) hold the codec-message-id ``cmid``
        of a prompt or a client fork? (False, None) when refused (reported), else (True, the node
        keyed by ``cmid`` if any). A node an older wire of another publisher takes the id from is
        evicted (it came from an impostor); the new owner's wires refused meanwhile fold again. A
        mutated wire (``version``: its version serial) claims from its mutation on (:func:`claimed_at`)."""
        position = claimed_at(serial, version)
        if not self._claim_folded(
            KIND_CODEC_MESSAGE_ID, cmid, self._client, serial, replay, False, cmid, run=False, position=position
        ):
            return False, None
        return True, self._nodes.get(cmid)

    def _claim_prompt_id(
        self, cmid: str, serial: str | None, version: str | None, replay: Replay
    ) -> tuple[bool, _Internal | None]:
        """May the wire being folded (publisher ``self._client``) hold the prompt id ``cmid``?
        Returns (False, None) when refused (reported), else (True, the node to fold into or None)."""
        ok, entry = self._claim_fork_id(cmid, serial, version, replay)  # the same claim as a client fork's
        if not ok:
            return False, None
        if (entry is not None and not isinstance(entry.node, InputNode)) or (
            entry is None and cmid in self._run_message_ids
        ):
            self._refuse(self._wire, f"prompt codec-message-id {cmid!r} names a run or its message")
            return False, None
        return True, entry

    def _evict(self, key: str, why: str | None = None) -> list[str]:
        """Drop a node folded from an impostor's wire (reported as refused when ``why`` is given);
        returns the message ids that mapped to it."""
        entry = self._nodes.pop(key, None)
        if entry is None:
            return []
        if why is not None:
            self._refuse({"serial": _sort_serial(entry.node), "clientId": entry.owner}, why)
        self._sorted.remove(entry)
        mapped = [k for k, v in self._cmid_to_key.items() if v == key]
        for k in mapped:
            del self._cmid_to_key[k]
        self._changed()
        return mapped

    def _refuse(self, message: Mapping[str, Any], why: str) -> None:
        """Report a wire the tree will not fold (to ``refused``: the core counts it)."""
        self._on_refused(message, why)

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
        entry.node.rekey(run_id)
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
        held = self._nodes.get(fork_cmid)  # (the prompt an output names, as a rule: no fork run to rekey)
        if held is not None and held.node.kind == "run" and self._rekey_fork_run(fork_cmid, run_id) is not None:
            return True
        if fork_cmid not in self._cmid_to_key:
            self._cmid_to_key[fork_cmid] = run_id
            self._changed()
        return False
