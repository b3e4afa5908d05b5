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

**Cost.** A run whose lease wires name one connection (the usual case) is judged without the holder
rule. Once a second connection appears, the run's tenures are kept incrementally
(:class:`~ai_transport.lease.TenureFold`: a newer wire steps the keys it names, an older one refolds
those keys), and each connection's losses and gains are kept in serial order, so judging an output
is a bisection and a flood of claims costs each reader linear work.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from typing import Any

from ..lease import DEFAULT_LEASE, LeaseLedger, LeaseWire, Poison, TenureFold, parse_lease_wire
from ..lease.ledger import Tenure

__all__ = ["Fence"]


class _Marks:
    """Where one connection lost or (re)gained one run, in serial order.

    At one serial a connection only loses or only gains: every tenure a lease wire begins is its
    own connection's, and a loss is another connection's. ``count``: how many tenures mark it there
    (a wire naming several keys marks it once per key)."""

    __slots__ = ("count", "lost", "serials")

    def __init__(self) -> None:
        self.serials: list[str] = []
        self.count: dict[str, int] = {}
        self.lost: dict[str, bool] = {}

    def add(self, serial: str, lost: bool) -> None:
        n = self.count.get(serial, 0)
        self.count[serial] = n + 1
        self.lost[serial] = lost
        if not n:
            if not self.serials or serial > self.serials[-1]:
                self.serials.append(serial)  # the usual case: a newer wire
            else:
                insort(self.serials, serial)

    def remove(self, serial: str) -> None:
        n = self.count[serial] - 1
        if n:
            self.count[serial] = n
            return
        del self.count[serial], self.lost[serial]
        self.serials.pop(bisect_left(self.serials, serial))

    def lost_before(self, serial: str) -> bool:
        """Whether the latest mark before ``serial`` is a loss."""
        i = bisect_left(self.serials, serial)
        return i > 0 and self.lost[self.serials[i - 1]]


def _marks_of(tenure: Tenure) -> list[tuple[str, bool]]:
    """``(connection, lost)`` a tenure marks at its serial: a takeover from another known connection
    is that connection's loss; a tenure of a known connection is its gain (a poison's: nothing)."""
    _, before, after = tenure
    after_conn = after.connection_id
    if after.unknown or after_conn is None:
        return []
    if before is not None and not before.unknown and before.connection_id not in (None, after_conn):
        return [(before.connection_id, True), (after_conn, False)]
    return [(after_conn, False)]


class Fence:
    """The lease wires of every run a tree folded, and which connection lost which run when."""

    def __init__(self, lease_ms: float = DEFAULT_LEASE * 1000) -> None:
        self.ledger = LeaseLedger()
        #: The connections named by each run's lease wires: a holder's tenure carries one of them
        #: (a poison's none), so a run whose wires name at most one was never lost by anyone and
        #: nothing of it is fenced — judged without folding the holder rule (the usual case). A run
        #: naming two or more (*contested*) has its tenures kept by :attr:`_fold`, incrementally.
        #: One connection is kept as itself, two or more as a set (a set per run would be one more
        #: object per run of the history that the cyclic GC tracks: the usual run names one).
        self._connections: dict[str, str | set[str]] = {}
        #: Per contested run, per connection: where it lost or regained the run.
        self._marks: dict[str, dict[str, _Marks]] = {}
        self._lease_ms = lease_ms
        #: The ledger's tenures, once a run is contested (until then no lease wire pays for them).
        self._fold: TenureFold | None = None

    @property
    def lease_ms(self) -> float:
        """The lease (ms) the agents use: a claim of another holder before it lapses is no takeover."""
        return self._lease_ms

    @lease_ms.setter
    def lease_ms(self, lease_ms: float) -> None:
        if lease_ms == self._lease_ms:
            return
        fold, self._lease_ms = self._fold, lease_ms
        if fold is not None:  # the tenures under the new lease, from scratch
            self.ledger.forget_tenures(fold.lease_ms)
            fold.on_change = None
            self._marks.clear()
            self._fold = self._follow_all()

    def _follow_all(self) -> TenureFold:
        """The fold under :attr:`lease_ms`, heard from now on, following every contested run."""
        fold = self.ledger.tenure_fold(self._lease_ms)
        fold.on_change = self._changed
        for run_id in fold.followed():  # followed already (someone asked the ledger): marked now
            self._changed(run_id, (), fold.tenures(run_id))
        for run_id, connections in self._connections.items():
            if isinstance(connections, set):
                self.ledger.follow_tenures(run_id, self._lease_ms)
        return fold

    def _changed(self, run_id: str, removed: Sequence[Tenure], added: Sequence[Tenure]) -> None:
        marks = self._marks.setdefault(run_id, {})
        for tenure in removed:
            for conn, _ in _marks_of(tenure):
                marks[conn].remove(tenure[0])
        for tenure in added:
            for conn, lost in _marks_of(tenure):
                found = marks.get(conn)
                if found is None:
                    found = marks[conn] = _Marks()
                found.add(tenure[0], lost)

    def note(self, message: Mapping[str, Any], parsed: LeaseWire | Poison | str | None = None) -> str | None:
        """Fold one lease wire (its publisher already admitted); returns its run id when it counts.
        ``parsed``: what ``parse_lease_wire(message, {its clientId})`` answered, when the caller has it."""
        if parsed is None:
            parsed = parse_lease_wire(message, {message.get("clientId")})
        if self.ledger.note(message, (), parsed) is not None:
            return None
        if not isinstance(parsed, LeaseWire):  # a poison: the tenures of contested runs follow it
            return None
        run_id, conn = parsed.run_id, parsed.connection_id
        if conn is not None:
            connections = self._connections.get(run_id)
            if connections is None:
                self._connections[run_id] = conn
            elif isinstance(connections, set):
                connections.add(conn)  # (contested already)
            elif conn != connections:
                self._connections[run_id] = {connections, conn}  # contested from now on: its tenures are kept
                if self._fold is None:
                    self._fold = self._follow_all()
                else:
                    self.ledger.follow_tenures(run_id, self._lease_ms)
        return run_id

    def contested(self, run_id: str) -> bool:
        """Whether the run's lease wires name two connections or more (else nothing of it is fenced)."""
        return isinstance(self._connections.get(run_id), set)

    def fenced(self, run_id: str, connection_id: str | None, serial: str) -> bool:
        """Whether an output of ``run_id`` published by ``connection_id`` at ``serial`` comes from a
        connection that lost the run's lease before it (and had not regained it)."""
        if connection_id is None:
            return False
        if not isinstance(self._connections.get(run_id), set):
            return False  # no other connection ever held one of the run's keys
        fold = self._fold
        if fold is not None:
            fold.flush(run_id)  # older lease wires of the run folded since the last read
        marks = self._marks.get(run_id)
        found = marks.get(connection_id) if marks is not None else None
        return found is not None and found.lost_before(serial)
