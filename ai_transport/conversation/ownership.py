"""One ownership ledger for every identifier a wire claims (issue 21).

**The rule.** An identifier a wire claims belongs to its first publisher *in channel serial order*
— the same answer whether the wires arrive live, newest page first (history) or oldest first. A
wire of another publisher claiming it is refused and counted. The publisher is the identity Ably
verified (:func:`~.authority.author_of`: ``clientId``, or ``version.clientId`` for a mutation),
never anything the wire says about itself.

:class:`OwnershipLedger` keeps, per ``(kind, identifier)``, every claim seen (publisher, serial) and
answers the owner: the publisher of the claim with the lowest serial. A claim without a serial (a
session's own optimistic wire) sorts after every serial one, in arrival order, so the echo of the
wire (with its serial) or any older wire decides. Because wires arrive out of order, ownership can
move: a wire older than the owner's first claim, from another publisher, takes the identifier, and
every claim of the previous owner is **lost** (refused now; the caller drops or refolds what it
folded from them). The new owner's claims refused earlier (they arrived while another publisher
held the identifier) are **regained** (the caller folds them now), so what counts is exactly the
owner's claims, whatever the arrival order. A re-delivery (same publisher, same serial) is no new
claim; a same-serial claim of another publisher (a mutation of the owner's message) is refused,
unless the caller says the kind lets an admitted mutator stand for the message it mutates.

**When a claim is made.** A create claims at its serial. A client's mutated wire claims from its
mutation on (its ``version.serial``, :func:`claimed_at`), not from its message's serial: a member
may update its own older message (``message-update-own``) into a copy of someone's newer prompt, and
history shows only the aggregate, at the old serial — a create that never made those claims. (A
0.8.0 client publishes creates only; streams, and so updates, are the agents', whose run and step
claims are one party's.)

**Bounds.** The claims of a publisher that does not own an identifier are pending state (kept
only so they count if their publisher turns out to own it): at most ``pending_per_key`` of them per
identifier as they arrive (the lowest serials are kept: the lowest decides ownership) and
``pending_total`` in all per publisher (beyond, that publisher's oldest pending claim is forgotten).
The claims an owner loses are not trimmed per identifier (they were folded, and count again if their
publisher regains it), only by the per-publisher total. A publisher flooding
claims therefore forgets only its own; the owner's claims mirror what the caller folded.

**What each kind claims** (``KIND_*``):

* ``codec-message-id`` — a prompt (an ``ai-input`` without ``run-id``) or a client fork input
  claims its own ``codec-message-id``: the node keyed by it is its first publisher's (the tree).
  An agent output's message id is part of its run (the run's owner publishes it).
* ``event-id`` — every wire carrying a transport ``event-id`` claims it; the wire that owns it is
  the owner's first claim (``Tree.find_message_by_event_id``: how a worker finds its trigger).
* ``run-id`` — the agent wires of a run (``ai-run-start`` / ``-resume`` / ``-suspend`` / ``-end``,
  ``ai-step-*``, ``ai-output``) claim its run id for the trusted agents as one party
  (:data:`~.tree_owners.AGENT_PARTY`): only trusted identities may publish those at all (admission),
  and a run one worker opened is carried on by another — a fresh process, a fleet member with its own
  identity, a takeover — which the lease rules arbitrate (``run:<run-id>``, fenced), not this ledger.
  A client's continuation input (``ai-input`` with ``run-id``: an approval, a tool result) *names* a
  run but claims nothing: the run's input client is decided by admission (:mod:`.admission`), from
  the oldest run-start's wires.
* ``step-id`` — a step's ``ai-step-start`` / ``-end`` and the outputs attributed to it claim
  ``(run-id, step-id)`` for their publisher (within a run whose id they already own).
* ``input-codec-message-id`` — a reference, not a claim: many runs may bind the same prompt (a
  regenerate), so it is never exclusive. A *client* wire acting on a prompt by this id (a cancel, a
  steer) counts only from the prompt's owner: ask :meth:`OwnershipLedger.owns` with kind
  ``codec-message-id`` (``Tree.prompt_owner``).
* ``claim-key`` — an ``ai-claim`` key (a call id, ``trigger:…``, ``run:…``) belongs to the first
  claim naming it in serial order, and moves only by the lease rules of
  :mod:`ai_transport.lease.ledger` (a lapse or a hand-off), which fence the previous holder; a
  renewal counts only from the holder's own publisher. The lease ledger folds its wires in serial
  order itself, so it does not go through this class.

Pure (no I/O, no asyncio).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Any, Final, NamedTuple

__all__ = [
    "KIND_CLAIM_KEY",
    "KIND_CODEC_MESSAGE_ID",
    "KIND_EVENT_ID",
    "KIND_INPUT_CODEC_MESSAGE_ID",
    "KIND_RUN_ID",
    "KIND_STEP_ID",
    "PENDING_PER_KEY",
    "PENDING_TOTAL",
    "Claim",
    "OwnershipLedger",
    "Ruling",
    "claimed_at",
]

KIND_CODEC_MESSAGE_ID: Final = "codec-message-id"
KIND_EVENT_ID: Final = "event-id"
KIND_RUN_ID: Final = "run-id"
KIND_STEP_ID: Final = "step-id"
KIND_INPUT_CODEC_MESSAGE_ID: Final = "input-codec-message-id"
KIND_CLAIM_KEY: Final = "claim-key"

#: Pending claims (of a publisher that does not own the identifier) kept per identifier and publisher.
PENDING_PER_KEY: Final = 64
#: Pending claims kept per publisher in all; beyond, the publisher's oldest pending claim is forgotten.
PENDING_TOTAL: Final = 10_000

_Key = tuple[str, Hashable]
#: Sort key of a claim: its serial, or (a claim without one) :data:`_LATE` and its arrival number,
#: which sorts after every serial (Ably serials are printable ASCII); a claim made by a mutation:
#: its position, :data:`_OF` and the message's serial (what a :class:`Claim` reports).
_Order = str
_LATE: Final = "\U0010ffff"
_OF: Final = "\x00"


class Claim(NamedTuple):
    """One wire's claim of an identifier; ``payload`` is whatever the caller keeps with it."""

    kind: str
    ident: Hashable
    publisher: str | None
    serial: str | None
    payload: Any = None


class Ruling(NamedTuple):
    """What one :meth:`OwnershipLedger.claim` decided.

    ``accepted``: the claim counts (its publisher owns the identifier now). ``owner``: the owner
    after it. ``lost``: claims that counted until now and no longer do (a previous owner's, oldest
    first). ``regained``: claims refused earlier that count now (the new owner's, oldest first; the
    claim just made is not among them).
    """

    accepted: bool
    owner: str | None
    lost: tuple[Claim, ...] = ()
    regained: tuple[Claim, ...] = ()

    @property
    def moved(self) -> bool:
        """True when the identifier changed owner."""
        return bool(self.lost or self.regained)


def claimed_at(serial: str | None, version_serial: str | None) -> str | None:
    """Where a client's wire claims its identifiers in serial order: at its ``serial``, or, for a
    mutated wire (its ``version.serial`` a later one), from its mutation on. A member may update its
    own earlier message (``message-update-own``) into a copy of someone's newer prompt; history shows
    only the aggregate, at the old serial, so its claims must not date from a create that never made
    them. (A client of 0.8.0 only publishes creates: streams, and so updates, are the agents'.)"""
    if isinstance(version_serial, str) and isinstance(serial, str) and version_serial > serial:
        return version_serial
    return serial


class _Entry:
    __slots__ = ("claims", "first", "mine", "owner")

    def __init__(self, owner: str | None, order: _Order, payload: Any) -> None:
        #: The owner's claims (sort key -> payload).
        self.mine: dict[_Order, Any] = {order: payload}
        #: publisher -> its claims, the owner's (:attr:`mine`) first; None while only the owner ever
        #: claimed (the commonest: an identifier held by one dict, not two, which the cyclic GC
        #: would track and scan for as long as the ledger keeps the identifier).
        self.claims: dict[str | None, dict[_Order, Any]] | None = None
        self.owner = owner
        #: The sort key of the owner's first claim (the lowest).
        self.first = order

    def every(self) -> dict[str | None, dict[_Order, Any]]:
        """publisher -> its claims (made on the first claim of another publisher than the owner)."""
        claims = self.claims
        if claims is None:
            claims = self.claims = {self.owner: self.mine}
        return claims

    def of(self, publisher: str | None) -> dict[_Order, Any] | None:
        """``publisher``'s claims, if any."""
        claims = self.claims
        if claims is not None:
            return claims.get(publisher)
        return self.mine if publisher == self.owner else None


def _held(payload: Any, hold: Callable[[Any], Any] | None) -> Any:
    """What a claim holds of ``payload`` (:meth:`OwnershipLedger.claim`'s ``hold``)."""
    return payload if hold is None else hold(payload)


def _serial_of(order: _Order) -> str | None:
    if order.startswith(_LATE):
        return None
    return order.rpartition(_OF)[2] if _OF in order else order


class OwnershipLedger:
    """Who owns each ``(kind, identifier)``: see the module docstring for the rule and bounds."""

    def __init__(self, pending_per_key: int = PENDING_PER_KEY, pending_total: int = PENDING_TOTAL) -> None:
        self._pending_per_key = pending_per_key
        self._pending_total = pending_total
        self._entries: dict[_Key, _Entry] = {}
        #: publisher -> its pending claims (key, order) in arrival order.
        self._pending: dict[str | None, dict[tuple[_Key, _Order], None]] = {}
        self._arrivals = itertools.count()
        #: Claims refused (on arrival, or lost to an older claim of another publisher), by kind.
        self.refused: dict[str, int] = {}
        self._accepted_rulings: dict[str | None, Ruling] = {}

    def __len__(self) -> int:
        return len(self._entries)

    # -- queries -------------------------------------------------------------------------------

    def owner(self, kind: str, ident: Hashable) -> str | None:
        """The publisher owning ``ident`` of ``kind`` (None when unclaimed, or owned by a wire
        without a publisher: see :meth:`claimed`)."""
        entry = self._entries.get((kind, ident))
        return entry.owner if entry is not None else None

    def claimed(self, kind: str, ident: Hashable) -> bool:
        """True once some wire claimed ``ident`` of ``kind``."""
        return (kind, ident) in self._entries

    def owns(self, kind: str, ident: Hashable, publisher: str | None) -> bool:
        """True when ``publisher`` owns ``ident`` of ``kind`` (False when unclaimed)."""
        entry = self._entries.get((kind, ident))
        return entry is not None and entry.owner == publisher

    def first(self, kind: str, ident: Hashable) -> Claim | None:
        """The owner's first claim (the lowest serial): the wire that owns ``ident``."""
        entry = self._entries.get((kind, ident))
        if entry is None:
            return None
        return Claim(kind, ident, entry.owner, _serial_of(entry.first), entry.mine[entry.first])

    def claims(self, kind: str, ident: Hashable) -> list[Claim]:
        """The owner's claims of ``ident``, in serial order (those that count)."""
        entry = self._entries.get((kind, ident))
        if entry is None:
            return []
        return self._listed((kind, ident), entry.owner, entry.mine)

    def contested(self, kind: str, ident: Hashable) -> bool:
        """True while another publisher than the owner has claims of ``ident`` held: folding more
        history (older wires) could still move it."""
        entry = self._entries.get((kind, ident))
        return entry is not None and entry.claims is not None and len(entry.claims) > 1

    def pending_of(self, publisher: str | None) -> int:
        """How many claims of ``publisher`` are held without counting (it does not own them)."""
        return len(self._pending.get(publisher, ()))

    @staticmethod
    def _listed(key: _Key, publisher: str | None, mine: dict[_Order, Any]) -> list[Claim]:
        return [Claim(key[0], key[1], publisher, _serial_of(o), mine[o]) for o in sorted(mine)]

    # -- claims --------------------------------------------------------------------------------

    def claim(
        self,
        kind: str,
        ident: Hashable,
        publisher: str | None,
        serial: str | None,
        payload: Any = None,
        *,
        mutation: bool = False,
        keep: bool = True,
        hold: Callable[[Any], Any] | None = None,
        position: str | None = None,
    ) -> Ruling:
        """``publisher``'s wire at ``serial`` claims ``ident`` of ``kind`` (see the module docstring).

        ``position``: where the claim stands in serial order when not at ``serial`` (a client's
        mutated wire claims from its mutation on, :func:`claimed_at`); ``serial`` still names the
        message, for a re-delivery or a mutation standing for its message's claim.
        ``mutation``: the wire is an update / append / delete of the message at ``serial``
        (``publisher`` its mutator, whom admission already judged): when that message's claim is
        known the mutation stands for it (accepted iff it counts) instead of claiming anew.
        ``keep``: hold ``payload`` for a claim that counts too (else only for a refused one, which
        may count later: a caller that keeps what it folded from the owner's claims itself).
        ``hold``: what of ``payload`` is held, when it is (default: ``payload`` itself)."""
        key: _Key = (kind, ident)
        entry = self._entries.get(key)
        order: _Order = (
            serial if type(serial) is str or isinstance(serial, str) else f"{_LATE}{next(self._arrivals):012d}"
        )
        # where a new claim stands: at the wire's serial, or from its mutation on (``position``)
        at: _Order = order if position is None or position == serial else f"{position}{_OF}{order}"
        if entry is None:
            self._entries[key] = _Entry(publisher, at, (payload if hold is None else hold(payload)) if keep else None)
            return self._accepted_rulings.get(publisher) or self._accepted(publisher)
        owner = entry.owner
        claims = entry.claims
        # (:meth:`_Entry.of` inlined; no ``claims``: only the owner claimed it)
        mine = (entry.mine if publisher == owner else None) if claims is None else claims.get(publisher)
        if mine is not None and (order in mine or (at is not order and at in mine)):
            # a re-delivery of the same wire (an update or append of it): no new claim
            return Ruling(owner == publisher, owner)
        if mutation and serial is not None:
            # a mutation of a wire claimed already stands for that claim
            if claims is None:
                if order in entry.mine:
                    return Ruling(True, owner)
            else:
                for who, theirs in claims.items():
                    if order in theirs:
                        return Ruling(who == owner, owner)
        if mine is not None and publisher == owner:
            mine[at] = (payload if hold is None else hold(payload)) if keep else None
            if at < entry.first:
                entry.first = at
            return self._accepted_rulings.get(publisher) or self._accepted(publisher)
        if at < entry.first:
            return self._take(key, entry, publisher, at, _held(payload, hold) if keep else None)
        # refused: kept pending (it counts if its publisher turns out to own the identifier)
        entry.every().setdefault(publisher, {})[at] = _held(payload, hold)
        self._index_pending(publisher, key, at)
        self._trim(key, entry, publisher)
        self._count(kind)
        return Ruling(False, owner)

    def _accepted(self, publisher: str | None) -> Ruling:
        """``Ruling(True, publisher)``, one shared instance per publisher (a ruling is immutable):
        an identifier claimed once allocates no ruling per wire."""
        ruling = self._accepted_rulings.get(publisher)
        if ruling is None:
            ruling = self._accepted_rulings[publisher] = Ruling(True, publisher)
        return ruling

    def _take(self, key: _Key, entry: _Entry, publisher: str | None, order: _Order, payload: Any) -> Ruling:
        previous = entry.owner
        claims = entry.every()
        entry.owner = publisher
        entry.first = order
        lost_claims = claims[previous]
        lost = self._listed(key, previous, lost_claims)
        for k in sorted(lost_claims):  # (not trimmed per key: they were folded, and may count again)
            self._index_pending(previous, key, k)
        regained_claims = entry.mine = claims.setdefault(publisher, {})
        regained = self._listed(key, publisher, regained_claims)
        theirs = self._pending.get(publisher)
        if theirs is not None:
            for k in regained_claims:
                theirs.pop((key, k), None)
            if not theirs:
                del self._pending[publisher]
        regained_claims[order] = payload
        for _ in lost:
            self._count(key[0])
        return Ruling(True, publisher, tuple(lost), tuple(regained))

    def _index_pending(self, publisher: str | None, key: _Key, order: _Order) -> None:
        theirs = self._pending.setdefault(publisher, {})
        theirs[(key, order)] = None
        while len(theirs) > self._pending_total:
            (old_key, old_order) = next(iter(theirs))
            self._forget_pending(old_key, publisher, old_order)

    def _trim(self, key: _Key, entry: _Entry, publisher: str | None) -> None:
        """At most ``pending_per_key`` pending claims of ``publisher`` under ``key``: the highest
        serials go (the lowest decides who owns it)."""
        mine = entry.of(publisher)
        if mine is None or len(mine) <= self._pending_per_key:
            return
        for order in sorted(mine)[self._pending_per_key :]:
            self._forget_pending(key, publisher, order)

    def _forget_pending(self, key: _Key, publisher: str | None, order: _Order) -> None:
        theirs = self._pending.get(publisher)
        if theirs is not None:
            theirs.pop((key, order), None)
            if not theirs:
                del self._pending[publisher]
        entry = self._entries.get(key)
        if entry is None or entry.owner == publisher:
            return
        claims = entry.claims
        mine = claims.get(publisher) if claims is not None else None
        if claims is not None and mine is not None:
            mine.pop(order, None)
            if not mine:
                del claims[publisher]

    def _count(self, kind: str) -> None:
        self.refused[kind] = self.refused.get(kind, 0) + 1

    # -- forgetting ----------------------------------------------------------------------------

    def forget(self, kind: str, ident: Hashable) -> None:
        """Drop every claim of ``ident`` (the caller dropped what it folded under it)."""
        key: _Key = (kind, ident)
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        for publisher, mine in (entry.claims or {entry.owner: entry.mine}).items():
            theirs = self._pending.get(publisher)
            if theirs is None:
                continue
            for order in mine:
                theirs.pop((key, order), None)
            if not theirs:
                del self._pending[publisher]

    def clear(self) -> None:
        """Forget everything (a refold from history claims it all again)."""
        self._entries.clear()
        self._pending.clear()
