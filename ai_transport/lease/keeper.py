"""One claimant's lease (sans-I/O): when to renew, when it may publish, when it lost, when to wait.

A :class:`LeaseKeeper` is driven by its shell (:mod:`ai_transport.sessions.claims`) with the local
monotonic clock (``now``, seconds) and the :class:`~.ledger.LeaseLedger` of the channel; it never
sleeps or publishes itself. Its life:

1. :meth:`LeaseKeeper.wire` — the body of a claim (then of each renewal); the shell publishes it and
   notes the local time it sent it;
2. :meth:`LeaseKeeper.confirm` — once the channel is folded up to that wire's serial, the ledger says
   which keys this claimant holds (:meth:`.held`); the keys it holds are valid from the wire's send time;
3. :meth:`LeaseKeeper.may_publish` — **the fence**, checked before every publish: true only while
   every key the publish is for is held and the local time since the send of the latest confirmed
   wire is at most ``lease - safety``. A takeover needs a wire stamped more than ``lease`` after the
   holder's latest renewal, and that renewal was stamped after it was sent, so a publish that leaves
   within ``lease - safety`` of the send lands before any takeover whenever a publish takes less than
   ``safety`` to reach Ably. A worker paused past its lease (SIGSTOP, a GC pause, a partition) finds
   its lease expired when it runs again and publishes nothing more. The fence holds at the source
   (JS 0.8.0 clients fold whatever arrives); the ledger can tell whether a wire's publisher held
   its key at the wire's serial, but the session views do not yet use that to refuse a wire that
   slipped out between the check and the send;
4. :meth:`LeaseKeeper.renew_due` — every ``renew_every`` seconds the shell publishes a renewal and
   confirms it; a renewal that shows another holder means the lease was lost (:attr:`lost`);
5. :meth:`LeaseKeeper.wait_for` — a claimant that lost to another live holder: how long to watch
   for the holder's next renewal before claiming again (a takeover if the holder is gone).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .ledger import Holding, LeaseLedger, lapsed, lease_body

__all__ = ["DEFAULT_LEASE", "LeaseKeeper", "LeasePolicy"]

#: Default lease (seconds): a claim whose holder stopped renewing is taken over after this.
DEFAULT_LEASE = 10.0


@dataclass(frozen=True)
class LeasePolicy:
    """Timing of leases: ``lease`` seconds, renewed every ``renew_every`` (default ``lease / 3``);
    a holder stops publishing ``safety`` seconds (default ``lease / 5``) before its lease could lapse."""

    lease: float = DEFAULT_LEASE
    renew_every: float | None = None
    safety: float | None = None

    @property
    def lease_ms(self) -> float:
        """The lease in milliseconds (Ably's timestamps are)."""
        return self.lease * 1000.0

    @property
    def renew_interval(self) -> float:
        """Seconds between renewals."""
        return self.renew_every if self.renew_every is not None else self.lease / 3

    @property
    def margin(self) -> float:
        """Seconds before a possible lapse at which the holder stops publishing."""
        return self.safety if self.safety is not None else self.lease / 5

    def check(self) -> None:
        """Raise ValueError naming the field when the timings cannot work."""
        for name, value in (("lease", self.lease), ("renew_every", self.renew_every), ("safety", self.safety)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a number > 0, got {value!r}")
        if self.renew_interval >= self.lease - self.margin:
            raise ValueError(
                f"renew_every ({self.renew_interval:g}s) must be shorter than lease - safety "
                f"({self.lease - self.margin:g}s), or the holder fences itself between renewals"
            )


class LeaseKeeper:
    """A claimant's lease on ``keys`` of ``run_id`` (see the module docstring)."""

    def __init__(
        self,
        run_id: str,
        keys: Iterable[str],
        claimant: str,
        invocation_id: str,
        policy: LeasePolicy,
        connection_id: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.keys = tuple(dict.fromkeys(keys))
        self.claimant = claimant
        self.invocation_id = invocation_id
        self.policy = policy
        self.connection_id = connection_id
        #: The keys this claimant holds (after the last :meth:`confirm`).
        self.held: set[str] = set()
        #: Keys it held and then lost to a takeover (or let expire).
        self.lost: set[str] = set()
        #: Serial of its first confirmed wire (later renewals restate it).
        self.first_serial: str | None = None
        self._valid_from: float | None = None
        self._last_sent: float | None = None
        self._claiming = True
        self._tenure: dict[str, str] = {}
        self.released = False

    # -- wires -----------------------------------------------------------------------------------

    def wire(self, now: float, *, done: bool = False, claim: bool = False, handoff: bool = False) -> dict[str, Any]:
        """The body of the next wire: a claim of every key (the first wire, or ``claim=True`` to try
        again after a rival's lease lapsed), else a renewal of the keys held (``done``: the last one,
        a release); ``now`` is when the shell sends it."""
        self._claiming = claim or self.first_serial is None
        keys = self.keys if self._claiming else tuple(k for k in self.keys if k in self.held)
        self._last_sent = now
        if done or handoff:
            self.released = True
        return lease_body(
            self.run_id,
            keys,
            self.claimant,
            self.invocation_id,
            done=done,
            handoff=handoff,
            restates=self.first_serial,
            connection_id=self.connection_id,
        )

    def confirm(self, ledger: LeaseLedger, serial: str, sent_at: float) -> set[str]:
        """The wire sent at ``sent_at`` is folded at ``serial``: recompute the keys held; returns them."""
        lease_ms = self.policy.lease_ms
        claiming = self._claiming
        held = set()
        for key in self.keys if claiming else tuple(self.held):
            h = ledger.holder(self.run_id, key, lease_ms, upto=serial)
            if h is None or h.claimant != self.claimant:
                continue
            if key in self.held and self._tenure.get(key) != h.since:
                # held again only by taking it back after another holder's tenure: what that holder
                # did in between is unknown here, so the key counts as lost (claim it afresh)
                continue
            self._tenure[key] = h.since
            held.add(key)
        if self.first_serial is None:
            self.first_serial = serial
        self.lost |= self.held - held
        self._claiming = False
        self.held = held
        if held:
            self._valid_from = sent_at
        return held

    # -- the fence ---------------------------------------------------------------------------------

    def expired(self, now: float) -> bool:
        """True once the local time since the latest confirmed send exceeds ``lease - safety``."""
        return self._valid_from is None or now - self._valid_from > self.policy.lease - self.policy.margin

    def may_publish(self, now: float, keys: Iterable[str] | None = None) -> bool:
        """Whether a publish for ``keys`` (default: every key held) may leave now (the fence)."""
        if self.released or self.expired(now):
            return False
        wanted = set(self.held if keys is None else keys)
        return bool(self.held) and wanted <= self.held

    def renew_due(self, now: float) -> bool:
        """Whether the shell should publish a renewal now."""
        if self.released or not self.held or self._last_sent is None:
            return False
        return now - self._last_sent >= self.policy.renew_interval

    def next_renewal(self, now: float) -> float:
        """Seconds until :meth:`renew_due` (0 when due)."""
        if self._last_sent is None:
            return 0.0
        return max(0.0, self._last_sent + self.policy.renew_interval - now)

    # -- a claimant that lost ----------------------------------------------------------------------

    def rival(self, ledger: LeaseLedger, key: str, upto: str | None = None) -> Holding | None:
        """The other holder of ``key`` (None when this claimant holds it or nobody does)."""
        h = ledger.holder(self.run_id, key, self.policy.lease_ms, upto=upto)
        return None if h is None or h.claimant == self.claimant else h

    def wait_for(self, rival: Holding, my_timestamp: float) -> float | None:
        """Seconds to watch for ``rival``'s next renewal before claiming again (None: never, the key
        is done). The rival's lease lapses ``lease`` after its latest renewal; ``my_timestamp`` is
        the server timestamp (ms) of this claimant's latest wire."""
        if rival.done:
            return None
        if lapsed(rival, my_timestamp, self.policy.lease_ms):
            return 0.0
        return max(0.0, (rival.renewed_at + self.policy.lease_ms - my_timestamp) / 1000.0) + 0.05
