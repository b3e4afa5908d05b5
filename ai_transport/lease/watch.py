"""What a supervisor decides (sans-I/O): which active runs have lost their worker.

:func:`stalled_runs` is a pure function of the channel's lease wires (a
:class:`~.ledger.LeaseLedger`), the runs still ``active`` with the server timestamp of each one's
latest wire, the presence connections that left, and an estimate of the channel's clock
(:class:`ChannelClock`). A run is **stalled** when

* it has lease holders and every one of them is gone: its lease lapsed (no renewal for more than
  ``lease`` at the estimated channel time, plus ``grace``), or its connection left presence; or
* it has no lease at all (a run opened by a worker that takes none) and nothing of it was published
  for ``lease + grace``.

A run whose holder released its keys (``done``) and that is still ``active`` is stalled too (the
worker released and died before its last lifecycle message). The supervisor's bound: a worker that
died is noticed at most ``lease + grace`` after its last renewal, plus one poll interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .ledger import Holding, LeaseLedger, lapsed

__all__ = ["ChannelClock", "Stall", "stalled_runs"]


class ChannelClock:
    """An estimate of the channel's (Ably's) clock from the wires seen: never ahead of it.

    Each wire stamped ``s`` (server ms) that arrives at local time ``a`` (ms) shows that the server's
    clock is at least ``s - a`` ahead of the local one; the estimate keeps the largest such offset,
    so a lease is never judged lapsed early because of a local clock."""

    def __init__(self) -> None:
        self.offset: float | None = None

    def observe(self, server_ms: float, local_ms: float) -> None:
        """A wire stamped ``server_ms`` arrived at ``local_ms``."""
        seen = server_ms - local_ms
        if self.offset is None or seen > self.offset:
            self.offset = seen

    def now(self, local_ms: float) -> float | None:
        """The estimated channel time at local time ``local_ms`` (None before any wire)."""
        return None if self.offset is None else local_ms + self.offset


@dataclass(frozen=True)
class Stall:
    """An active run whose worker is gone."""

    run_id: str
    #: Why: ``lease lapsed`` / ``holder left presence`` / ``released, not ended`` / ``no activity``.
    reason: str
    #: The server time (ms) the run was last known alive.
    last_alive: float
    #: The run's keys and their holders (the supervisor takes them over before ending the run).
    holders: Mapping[str, Holding]


def stalled_runs(
    ledger: LeaseLedger,
    active: Mapping[str, float],
    now_ms: float,
    lease_ms: float,
    grace_ms: float = 0.0,
    left: Iterable[str] = (),
) -> list[Stall]:
    """The runs of ``active`` (run id -> server ms of its latest wire) whose worker is gone at
    channel time ``now_ms`` (see the module docstring); ``left``: connection ids that left presence."""
    gone = set(left)
    out: list[Stall] = []
    for run_id, last_wire in active.items():
        holders = ledger.holders(run_id, lease_ms)
        if not holders:
            if now_ms - last_wire > lease_ms + grace_ms:
                out.append(Stall(run_id, "no activity", last_wire, holders))
            continue
        live = [h for h in holders.values() if not h.done]
        if not live:
            latest = max(h.renewed_at for h in holders.values())
            if now_ms - max(latest, last_wire) > lease_ms + grace_ms:
                out.append(Stall(run_id, "released, not ended", max(latest, last_wire), holders))
            continue
        latest = max(h.renewed_at for h in live)
        if all(h.connection_id is not None and h.connection_id in gone for h in live):
            out.append(Stall(run_id, "holder left presence", latest, holders))
        elif all(lapsed(h, now_ms - grace_ms, lease_ms) for h in live):
            out.append(Stall(run_id, "lease lapsed", latest, holders))
    return out
