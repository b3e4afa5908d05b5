"""Fencing on the reader's side: a late output of a holder whose lease was taken over is refused.

A worker checks its lease before every publish (:mod:`ai_transport.lease.keeper`), but an output can
still slip out between that check and the send (a worker paused right after its check, resumed after
another worker took its run over). JS 0.8.0 folds it; our views do not. The rule, a pure function of
the channel's wires in **serial order** (so every reader, live or from history in any page order,
agrees):

* every lease wire names the run and Ably's ``connectionId`` of its publisher; folding a run's lease
  wires by the holder rule (:class:`~ai_transport.lease.LeaseLedger`) gives, for each key, the serial
  at which each holder's tenure began and whom it took the key from;
* a connection **loses** run R at the serial where another connection's holder took one of R's keys
  over from it, and **regains** it at a serial where it begins a tenure of one of R's keys again;
* an agent output wire of run R (its ``run-id`` header) whose create was published by connection C
  at serial s is *fenced* when C lost R at a serial below s and had not regained it by then.

A stream is judged by its create: one begun before the takeover is kept whole, even a late append of
the superseded holder to it (history holds a stream as one aggregate, so no reader could cut it at
the takeover); the holder's own lease check stops its next append.

The scope is the run: a warm worker's connection publishing other runs is never refused, and a worker
that re-takes the run publishes again. A poisoned lease wire (an unknown holder, see the ledger)
never fences anyone. The tree (:mod:`.tree`) gates fenced wires like a superseded step attempt: logged,
not folded, reported once (``refused``), and a lease wire landing out of order refolds the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..lease import DEFAULT_LEASE, LeaseLedger, LeaseWire, Poison, parse_lease_wire

__all__ = ["Fence"]


class Fence:
    """The lease wires of every run a tree folded, and which connection lost which run when."""

    def __init__(self, lease_ms: float = DEFAULT_LEASE * 1000) -> None:
        #: The lease (ms) the agents use: a claim of another holder before it lapses is no takeover.
        self.lease_ms = lease_ms
        self.ledger = LeaseLedger()
        self._changes: dict[str, list[tuple[str, str, bool]]] = {}
        #: The connections named by each run's lease wires: a holder's tenure carries one of them
        #: (a poison's none), so a run whose wires name at most one was never lost by anyone and
        #: nothing of it is fenced — judged without folding the holder rule (the usual case).
        self._connections: dict[str, set[str]] = {}

    def note(self, message: Mapping[str, Any], parsed: LeaseWire | Poison | str | None = None) -> str | None:
        """Fold one lease wire (its publisher already admitted); returns its run id when it counts.
        ``parsed``: what ``parse_lease_wire(message, {its clientId})`` answered, when the caller has it."""
        trusted = {message.get("clientId")}
        if parsed is None:
            parsed = parse_lease_wire(message, trusted)
        if self.ledger.note(message, trusted, parsed) is not None:
            return None
        if not isinstance(parsed, LeaseWire):  # a poison: an unknown holder of every key
            self._changes.clear()
            return None
        self._changes.pop(parsed.run_id, None)
        if parsed.connection_id is not None:
            self._connections.setdefault(parsed.run_id, set()).add(parsed.connection_id)
        return parsed.run_id

    def _changes_of(self, run_id: str) -> list[tuple[str, str, bool]]:
        """``(serial, connection, lost)`` for run_id, in serial order (cached until a wire lands)."""
        changes = self._changes.get(run_id)
        if changes is None:
            changes = []
            for serial, before, after in self.ledger.tenures(run_id, self.lease_ms):
                if after.unknown or after.connection_id is None:
                    continue
                if before is not None and not before.unknown and before.connection_id not in (None, after.connection_id):
                    changes.append((serial, before.connection_id, True))
                changes.append((serial, after.connection_id, False))
            if not any(lost for _, _, lost in changes):
                changes = []  # no connection ever lost the run: nothing of it is fenced (the usual case)
            self._changes[run_id] = changes
        return changes

    def fenced(self, run_id: str, connection_id: str | None, serial: str) -> bool:
        """Whether an output of ``run_id`` published by ``connection_id`` at ``serial`` comes from a
        connection that lost the run's lease before it (and had not regained it)."""
        if connection_id is None:
            return False
        connections = self._connections.get(run_id)
        if connections is None or len(connections) < 2:
            return False  # no other connection ever held one of the run's keys
        lost = False
        for at, conn, is_loss in self._changes_of(run_id):
            if at >= serial:
                break
            if conn == connection_id:
                lost = is_loss
        return lost
