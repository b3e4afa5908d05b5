"""The lease ledger: every lease wire of a channel, and who holds each key (sans-I/O).

A **lease wire** is one plain Ably message, ``name: "ai-claim"``, ``data`` a JSON string::

    {"runId", "callIds": [key, ...], "claimant", "invocationId",
     "done": bool?, "handoff": bool?, "restates": serial?, "connectionId": str?}

A worker publishes one to claim keys (a call id, ``trigger:<event-id>``, ``run:<run-id>``), then one
every renewal interval while it works (a **renewal**: the same claimant naming the keys it still
holds), and a last one with ``done: true`` when the work is finished (the key can never be taken
over again), or with ``handoff: true`` when it leaves unfinished work to the next worker (a detach:
the next claim takes the key over at once, as after a lapse). ``restates`` names the serial of the claimant's first claim (see *Rewrites* below).

**The holder rule** (every worker that reads the same wires agrees; nothing but the channel is
consulted). For a key, fold the run's lease wires naming it in **channel serial order**, keeping
``holder`` (a claimant, the server ``timestamp`` ``renewed_at`` of its latest wire, ``done``):

* no holder yet: the wire's claimant becomes the holder;
* a wire of the holder itself: a renewal (``renewed_at`` moves to its timestamp; ``done`` closes the key);
* a wire of another claimant: a **takeover** when the holder's lease has *lapsed* at the wire's
  timestamp, i.e. ``wire.timestamp > renewed_at + lease`` (milliseconds, strictly greater: a lease
  renewed at ``t`` holds through ``t + lease`` inclusive), or the holder handed the key off;
  otherwise the wire is refused (its claimant does not hold the key);
* a key whose holder published ``done`` is closed: no later wire takes it.

Time is measured only with Ably's server ``timestamp`` of each wire, compared along serial order:
local clocks never decide who holds a key, so every reader, live or from history, in any page order,
computes the same holders. (A worker uses its own monotonic clock only to stop *itself* early: see
:mod:`.keeper`.)

**Authority.** A lease wire counts only when Ably says a trusted agent identity published it
(``clientId`` in the configured ``trusted_agent_ids``), and a key belongs to that identity as well as
to the claimant its data names: a renewal, release or hand-off counts only from the identity that
published the holder's claim (another trusted identity naming the same claimant is just another
claimant, which takes the key over only by the rules above). So a claim key belongs to its first
claim in serial order and moves only by a lapse or a hand-off (:mod:`ai_transport.conversation.ownership`). Lease wires are never mutated by their
authors, so every mutation (update / delete / append: a wire whose ``version.serial`` differs from
its ``serial``, or whose ``action`` is not a create) is refused and counted: live, the first wire
seen at a serial is kept and a later version of it is ignored. **Rewrites**: a worker folding
history sees only a message's latest version; when a trusted agent's lease wire was rewritten by a
client that is not a trusted agent (``version.clientId``; Ably's ``message-update-any`` /
``message-delete-any`` capabilities allow it), its content is unknown, so it is kept as a *poison*: an
unknown holder of **every** key from that serial, whose lease runs from the wire's timestamp, until the
real claimant's later renewal restates it (``restates`` equal to the poisoned serial) or its lease
lapses. A rewrite can thus delay a call by at most one lease (as a dead claimer does), never make it
run twice.
"""

from __future__ import annotations

import heapq
import json
from bisect import insort
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import msgspec

from .._shapes import MAPPING

__all__ = [
    "LEASE_NAME",
    "Holding",
    "LeaseLedger",
    "LeaseWire",
    "Poison",
    "TenureFold",
    "lapsed",
    "lease_body",
    "parse_lease_wire",
]

#: The message name of a lease wire (a claim, a renewal or a release).
LEASE_NAME: Final = "ai-claim"

_CREATE = "message.create"


class LeaseWire(NamedTuple):
    """One lease wire as read from the channel (immutable; a named tuple: one is parsed for every
    lease wire folded, and a tuple is built far faster than a frozen dataclass)."""

    serial: str
    #: Ably's server timestamp (ms).
    timestamp: float
    run_id: str
    keys: tuple[str, ...]
    claimant: str
    done: bool = False
    restates: str | None = None
    connection_id: str | None = None
    handoff: bool = False
    #: Who Ably says published the wire (its ``clientId``, a trusted agent identity).
    publisher: str | None = None


@dataclass(frozen=True)
class Poison:
    """A trusted agent's lease wire rewritten by an untrusted mutator: content unknown."""

    serial: str
    timestamp: float
    #: The trusted identity that published the wire before it was rewritten.
    publisher: str | None = None


@dataclass(frozen=True)
class Holding:
    """Who holds a key after folding the wires up to some serial."""

    claimant: str
    #: Serial of the wire that began this holder's tenure (its claim or takeover).
    since: str
    #: Server timestamp (ms) of the holder's latest wire naming the key.
    renewed_at: float
    #: Serial of that latest wire.
    renewed_serial: str
    done: bool = False
    #: The holder took the key over from a lapsed holder.
    takeover: bool = False
    #: The holder handed the key off (a detach): the next claim takes it at once.
    handoff: bool = False
    #: The serial of the poisoned wire when the holder is unknown (a rewritten claim).
    poison: str | None = None
    connection_id: str | None = None
    #: The identity Ably says published the wire that began this tenure: only its wires renew it.
    publisher: str | None = None

    @property
    def unknown(self) -> bool:
        """True while the holder is a rewritten claim whose claimant is not known."""
        return self.poison is not None


def lapsed(holding: Holding, at_ms: float, lease_ms: float) -> bool:
    """Whether ``holding``'s lease has lapsed at server time ``at_ms`` (never for a done key).

    The boundary: a lease renewed at ``t`` holds through ``t + lease`` inclusive; it has lapsed only
    strictly after."""
    return not holding.done and (holding.handoff or at_ms - holding.renewed_at > lease_ms)


def lease_body(
    run_id: str,
    keys: Iterable[str],
    claimant: str,
    invocation_id: str,
    *,
    done: bool = False,
    handoff: bool = False,
    restates: str | None = None,
    connection_id: str | None = None,
) -> dict[str, Any]:
    """The ``data`` object of a lease wire (JSON-encode it to publish)."""
    body: dict[str, Any] = {"runId": run_id, "callIds": list(keys), "claimant": claimant, "invocationId": invocation_id}
    if done:
        body["done"] = True
    if handoff:
        body["handoff"] = True
    if restates is not None:
        body["restates"] = restates
    if connection_id is not None:
        body["connectionId"] = connection_id
    return body


class _Body(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A lease wire's body exactly as :func:`lease_body` writes it, each field of its wire type."""

    runId: str
    callIds: list[str]
    claimant: str
    invocationId: Any = None  # not read: decoded only so that its JSON is checked as json.loads does
    done: bool = False
    handoff: bool = False
    restates: str | None = None
    connectionId: str | None = None


#: The body of a well-formed lease wire, decoded and type-checked in C (:func:`parse_lease_wire`
#: tries it first); a refusal means "look closer" (the answer is then :func:`_checked_body`'s, never
#: "malformed").
#:
#: Equivalent where it answers: msgspec refuses every text ``json.loads`` refuses (and more:
#: ``NaN`` / ``Infinity``, numbers out of double range, lone-surrogate escapes, integers beyond
#: msgspec's own digit limit), keeps the last of duplicate keys as ``json.loads`` does, and decodes
#: strings, booleans and lists to the same values. Every field is decoded (an unknown one is
#: refused, not skipped unread: a skipped integer of more digits than ``json.loads`` takes would
#: pass here and fail there), and a body of another type, a missing field, a ``null`` where the
#: slow path wants a bool, a non-string key ... fail the typed decode and take the slow path.
_decode_body = msgspec.json.Decoder(_Body).decode


def _checked_body(data: Any) -> _Body | None:
    """The body of ``data`` (a JSON text, or an already decoded value) read by ``json.loads`` and
    checked field by field; None when malformed."""
    try:
        body: Any = json.loads(data) if isinstance(data, (str, bytes)) else data
    except (ValueError, RecursionError):  # (nested deeper than the parser goes: malformed too)
        return None
    if not isinstance(body, MAPPING):
        return None
    field_of = body.get
    run_id, keys, claimant = field_of("runId"), field_of("callIds"), field_of("claimant")
    done, restates, conn = field_of("done", False), field_of("restates"), field_of("connectionId")
    handoff = field_of("handoff", False)
    if (
        not isinstance(run_id, str)
        or not isinstance(claimant, str)
        or not isinstance(keys, list)
        or not all(isinstance(k, str) for k in keys)
        or not isinstance(done, bool)
        or not isinstance(handoff, bool)
        or not (restates is None or isinstance(restates, str))
        or not (conn is None or isinstance(conn, str))
    ):
        return None
    return _Body(run_id, keys, claimant, None, done, handoff, restates, conn)


def parse_lease_wire(message: Mapping[str, Any], trusted: Iterable[Any]) -> LeaseWire | Poison | str:
    """The lease wire ``message`` carries, a :class:`Poison`, or why it is refused (a reason)."""
    trusted_ids = trusted if isinstance(trusted, (set, frozenset)) else set(trusted)
    get = message.get
    serial, timestamp = get("serial"), get("timestamp")
    if not isinstance(serial, str) or not serial:
        return "lease wire without a serial"
    if not isinstance(timestamp, (int, float)) or isinstance(timestamp, bool):
        return "lease wire without a timestamp"
    try:
        at = float(timestamp)
    except OverflowError:  # (an integer past any float: no time)
        return "lease wire without a timestamp"
    publisher = get("clientId")
    if publisher not in trusted_ids:
        return f"lease wire from untrusted client {publisher!r}"
    # a mutation: an action other than a create, or a version serial other than the wire's own
    action, version = get("action"), get("version")
    mutated = action is not None and action != _CREATE
    mutator = None
    if isinstance(version, MAPPING):
        vserial, mutator = version.get("serial"), version.get("clientId")
        mutated = mutated or (isinstance(vserial, str) and vserial != serial)
    if mutated and not (mutator in trusted_ids and action == "message.update"):
        # rewritten by someone else than a trusted identity (whose rewrite stands: ours never do)
        return Poison(serial, at, publisher if isinstance(publisher, str) else None)
    data = get("data")
    body = None
    if type(data) is str:  # the typed decode first, in this frame (no helper's call a lease wire)
        try:
            body = _decode_body(data)
        except Exception:  # any refusal (DecodeError, ValidationError, UnicodeEncodeError ...): look closer
            body = None
    if body is None:
        body = _checked_body(data)
        if body is None:
            return "malformed lease wire"
    claimant, conn = body.claimant, body.connectionId
    if not claimant or claimant[0] == "?":
        return "malformed lease wire"
    stamped = get("connectionId")  # Ably's, not the body's: the connection that published it
    if isinstance(stamped, str) and stamped:
        conn = stamped
    return LeaseWire(
        serial,
        at,
        body.runId,
        tuple(body.callIds),
        claimant,
        body.done,
        body.restates,
        conn,
        body.handoff,
        publisher if isinstance(publisher, str) else None,
    )


def _renewed(holding: Holding, renewed_at: float, renewed_serial: str) -> Holding:
    """``holding`` renewed (``dataclasses.replace`` without its introspection: one a renewal)."""
    return Holding(
        holding.claimant,
        holding.since,
        renewed_at,
        renewed_serial,
        holding.done,
        holding.takeover,
        holding.handoff,
        holding.poison,
        holding.connection_id,
        holding.publisher,
    )


def _step(holding: Holding | None, w: LeaseWire | Poison, key: str, lease_ms: float) -> Holding | None:
    """One wire of the holder rule folded into ``holding`` (the key's holder before it)."""
    if isinstance(w, Poison):
        if holding is None or lapsed(holding, w.timestamp, lease_ms):
            holding = Holding("?" + w.serial, w.serial, w.timestamp, w.serial, poison=w.serial, publisher=w.publisher)
        elif not holding.done and w.timestamp > holding.renewed_at:  # perhaps the holder's own renewal:
            holding = _renewed(holding, w.timestamp, holding.renewed_serial)  # it may extend, never shorten
        return holding
    if key not in w.keys:
        return holding
    if holding is None:
        holding = Holding(
            w.claimant,
            w.serial,
            w.timestamp,
            w.serial,
            w.done,
            handoff=w.handoff,
            connection_id=w.connection_id,
            publisher=w.publisher,
        )
    elif holding.done:
        return holding
    elif holding.publisher == w.publisher and (
        holding.claimant == w.claimant or (holding.poison is not None and w.restates == holding.poison)
    ):
        # a renewal (or the restatement of a rewritten claim) counts only from the identity that
        # published the holder's claim: the claimant named in the data is the wire's own say
        holding = Holding(
            w.claimant,
            holding.since,
            max(holding.renewed_at, w.timestamp),
            w.serial,
            w.done,
            holding.takeover,
            w.handoff,
            None,
            w.connection_id or holding.connection_id,
            holding.publisher,
        )
    elif lapsed(holding, w.timestamp, lease_ms):
        holding = Holding(
            w.claimant,
            w.serial,
            w.timestamp,
            w.serial,
            w.done,
            takeover=True,
            handoff=w.handoff,
            connection_id=w.connection_id,
            publisher=w.publisher,
        )
    return holding


#: One change of a key's holder: ``(serial, before, after)`` at the wire that began ``after``'s tenure.
Tenure = tuple[str, Holding | None, Holding]


def _serial_of(w: LeaseWire | Poison) -> str:
    return w.serial


class _KeyFold:
    """The holder rule of one key of one run, folded so far: every wire naming the key and every
    poison, all of them with a serial at most ``last`` (the newest folded)."""

    __slots__ = ("events", "holding", "last", "wires")

    def __init__(self) -> None:
        #: The run's wires naming the key, in serial order.
        self.wires: list[LeaseWire] = []
        self.holding: Holding | None = None
        self.last = ""
        #: Every change of holder of the key, in serial order.
        self.events: list[Tenure] = []


class TenureFold:
    """The tenures of :meth:`LeaseLedger.tenures` under one lease, kept up to date as wires land.

    The holder rule of a key depends only on the wires naming it and on the poisons, so each key
    of a *followed* run is folded on its own: a wire (or poison) newer than everything folded for
    a key steps that key once and appends at most one tenure; an older one (history pages arrive
    newest page first) only marks the keys it names (a poison: every key) *stale*, and a stale key
    is refolded, from its own wires and the poisons, once something reads the run
    (:meth:`flush`, :meth:`tenures`): a page of older wires costs one refold of each key it names,
    not one per wire (a flood of renewals read newest page first was quadratic).
    ``on_change(run_id, removed, added)``, when set, hears every tenure that leaves or joins a
    followed run, at the step or at the refold that makes it (the reader's fence keeps its index
    with it and flushes the run before it reads the index)."""

    def __init__(self, lease_ms: float) -> None:
        #: The lease (ms) of the holder rule.
        self.lease_ms = lease_ms
        self._runs: dict[str, dict[str, _KeyFold]] = {}
        self._poisons: list[Poison] = []  # serial order
        #: The keys of each followed run an older wire or poison made stale (refolded on a read).
        self._stale: dict[str, set[str]] = {}
        #: Hears every tenure that leaves or joins a followed run.
        self.on_change: Callable[[str, Sequence[Tenure], Sequence[Tenure]], None] | None = None

    def following(self, run_id: str) -> bool:
        """Whether the run's tenures are kept (see :meth:`LeaseLedger.follow_tenures`)."""
        return run_id in self._runs

    def followed(self) -> list[str]:
        """The runs whose tenures are kept."""
        return list(self._runs)

    def follow(self, run_id: str, wires: Iterable[LeaseWire]) -> None:
        """Keep the run's tenures from now on, ``wires`` being every wire of it folded so far."""
        if run_id in self._runs:
            return
        keys: dict[str, _KeyFold] = {}
        for w in sorted(wires, key=_serial_of):
            for key in set(w.keys):
                fold = keys.get(key)
                if fold is None:
                    fold = keys[key] = _KeyFold()
                fold.wires.append(w)
        self._runs[run_id] = keys
        for key, fold in keys.items():
            self._refold(run_id, key, fold)

    def add_wire(self, w: LeaseWire) -> None:
        """Fold a wire the ledger has just counted (nothing when its run is not followed)."""
        keys = self._runs.get(w.run_id)
        if keys is None:
            return
        stale = self._stale.get(w.run_id)
        for key in set(w.keys) if len(w.keys) > 1 else w.keys:
            fold = keys.get(key)
            if fold is None:
                fold = keys[key] = _KeyFold()
                fold.wires.append(w)
                if self._poisons:  # the poisons before it hold the key already
                    self._refold(w.run_id, key, fold)
                else:
                    self._step(w.run_id, key, fold, w)
            elif stale is not None and key in stale:  # refolded on the next read, this wire too
                insort(fold.wires, w, key=_serial_of)
            elif w.serial > fold.last:
                fold.wires.append(w)
                self._step(w.run_id, key, fold, w)
            else:  # an older wire: this key's fold from its start, once the run is read
                insort(fold.wires, w, key=_serial_of)
                if stale is None:
                    stale = self._stale[w.run_id] = set()
                stale.add(key)

    def add_poison(self, p: Poison) -> None:
        """Fold a poison the ledger has just counted: an unknown holder of every key."""
        insort(self._poisons, p, key=_serial_of)
        for run_id, keys in self._runs.items():
            stale = self._stale.get(run_id)
            for key, fold in keys.items():
                if stale is not None and key in stale:
                    continue  # refolded on the next read, with this poison
                if p.serial > fold.last:
                    self._step(run_id, key, fold, p)
                else:
                    if stale is None:
                        stale = self._stale[run_id] = set()
                    stale.add(key)

    def reset(self) -> None:
        """Forget every wire (the ledger was cleared): every followed run's tenures leave."""
        runs, self._runs, self._poisons, self._stale = self._runs, {}, [], {}
        if self.on_change is not None:
            for run_id, keys in runs.items():
                for fold in keys.values():
                    self.on_change(run_id, fold.events, ())

    def tenures(self, run_id: str) -> list[Tenure]:
        """Every change of holder of every key of a followed run, in serial order (a wire naming
        several keys: in key order)."""
        self.flush(run_id)
        keys = self._runs.get(run_id, {})
        marked = [(e[0], key, e) for key, fold in keys.items() for e in fold.events]
        marked.sort(key=lambda m: (m[0], m[1]))
        return [e for _, _, e in marked]

    def flush(self, run_id: str) -> None:
        """Refold the keys of ``run_id`` older wires made stale (:attr:`on_change` hears what
        changed); nothing when none is."""
        stale = self._stale.pop(run_id, None)
        if stale:
            keys = self._runs[run_id]
            for key in sorted(stale):
                self._refold(run_id, key, keys[key])

    def _step(self, run_id: str, key: str, fold: _KeyFold, w: LeaseWire | Poison) -> None:
        previous = fold.holding
        h = fold.holding = _step(previous, w, key, self.lease_ms)
        fold.last = w.serial
        if h is not None and (previous is None or h.since != previous.since):
            event = (w.serial, previous, h)
            fold.events.append(event)
            if self.on_change is not None:
                self.on_change(run_id, (), (event,))

    def _refold(self, run_id: str, key: str, fold: _KeyFold) -> None:
        removed, fold.events, fold.holding, fold.last = fold.events, [], None, ""
        on_change, self.on_change = self.on_change, None  # heard once, as one replacement
        try:
            items: Iterable[LeaseWire | Poison] = fold.wires
            if self._poisons:
                items = heapq.merge(fold.wires, self._poisons, key=_serial_of)
            for w in items:
                self._step(run_id, key, fold, w)
        finally:
            self.on_change = on_change
        if on_change is not None and (removed or fold.events):
            on_change(run_id, removed, fold.events)


class LeaseLedger:
    """Every trusted lease wire a session has folded (live or history, any order), by run."""

    def __init__(self) -> None:
        #: Each run's lease wires, by serial (a dict per run, no record around it: a woken worker's
        #: ledger holds every run of the history, and each record would be one more object the
        #: cyclic GC tracks).
        self._runs: dict[str, dict[str, LeaseWire]] = {}
        #: A run's wires in serial order, once read (dropped when one more of the run lands).
        self._sorted: dict[str, list[LeaseWire]] = {}
        self._poisons: dict[str, Poison] = {}
        self._seen: set[str] = set()
        #: Wires refused (untrusted, malformed, a mutation of a known wire), by reason (counted).
        self.refused: dict[str, int] = {}
        #: The tenures kept up to date, by lease (ms): see :meth:`follow_tenures`.
        self._folds: dict[float, TenureFold] = {}

    def _refuse(self, why: str) -> str:
        self.refused[why] = self.refused.get(why, 0) + 1
        return why

    def note(
        self, message: Mapping[str, Any], trusted: Iterable[Any], parsed: LeaseWire | Poison | str | None = None
    ) -> str | None:
        """Fold one lease wire; returns why it was refused, or None when it counts. ``parsed``: what
        :func:`parse_lease_wire` answered for ``message`` and ``trusted``, when the caller has it."""
        if parsed is None:
            parsed = parse_lease_wire(message, trusted)
        if isinstance(parsed, str):
            return self._refuse(parsed)
        serial = parsed.serial
        if serial in self._seen:
            if isinstance(parsed, LeaseWire):
                known_run = self._runs.get(parsed.run_id)
                if known_run is not None and known_run.get(serial) == parsed:
                    return None  # the same wire again (live, then from history)
            elif serial in self._poisons:
                return None
            return self._refuse("mutation of a lease wire ignored (the first version seen stands)")
        self._seen.add(serial)
        if isinstance(parsed, Poison):
            self._poisons[serial] = parsed
            for fold in self._folds.values():
                fold.add_poison(parsed)
            self._refuse("lease wire rewritten by an untrusted mutator (held as an unknown claim)")
            return None
        run = self._runs.get(parsed.run_id)
        if run is None:
            run = self._runs[parsed.run_id] = {}
        run[serial] = parsed
        if self._sorted:
            self._sorted.pop(parsed.run_id, None)
        if self._folds:
            for fold in self._folds.values():
                fold.add_wire(parsed)
        return None

    def wires(self, run_id: str) -> list[LeaseWire]:
        """The run's lease wires in serial order."""
        return list(self._sorted_wires(run_id))

    def _sorted_wires(self, run_id: str) -> list[LeaseWire]:
        """The run's lease wires in serial order (the ledger's own list: cached until the next)."""
        ordered = self._sorted.get(run_id)
        if ordered is None:
            run = self._runs.get(run_id)
            if run is None:
                return []
            ordered = self._sorted[run_id] = sorted(run.values(), key=_serial_of)
        return ordered

    def keys(self, run_id: str) -> set[str]:
        """Every key a wire of the run names."""
        return {k for w in self.wires(run_id) for k in w.keys}

    def run_ids(self) -> list[str]:
        """Runs with at least one lease wire."""
        return list(self._runs)

    def holder(self, run_id: str, key: str, lease_ms: float, upto: str | None = None) -> Holding | None:
        """Who holds ``key`` of ``run_id`` once the wires up to serial ``upto`` (all if None) are
        folded, by the holder rule of the module docstring."""
        holding: Holding | None = None
        for serial, h in self._fold(run_id, key, lease_ms):
            if upto is not None and serial > upto:
                break
            holding = h
        return holding

    def tenures(self, run_id: str, lease_ms: float) -> list[Tenure]:
        """Every change of holder of every key of the run, in serial order: ``(serial, before,
        after)`` at the wire that began ``after``'s tenure (a claim, or a takeover from ``before``).
        The run's tenures are kept from then on (:meth:`follow_tenures`)."""
        return self.follow_tenures(run_id, lease_ms).tenures(run_id)

    def follow_tenures(self, run_id: str, lease_ms: float) -> TenureFold:
        """The tenures under ``lease_ms``, kept up to date from now on for ``run_id`` (besides the
        runs followed already): each later wire of it costs a step per key it names, not a refold
        of the run (:class:`TenureFold`)."""
        fold = self.tenure_fold(lease_ms)
        if not fold.following(run_id):
            run = self._runs.get(run_id)
            fold.follow(run_id, run.values() if run is not None else ())
        return fold

    def tenure_fold(self, lease_ms: float) -> TenureFold:
        """The :class:`TenureFold` under ``lease_ms`` (made, following no run yet, when there is none)."""
        fold = self._folds.get(lease_ms)
        if fold is None:
            fold = self._folds[lease_ms] = TenureFold(lease_ms)
            for poison in self._poisons.values():
                fold.add_poison(poison)
        return fold

    def forget_tenures(self, lease_ms: float) -> None:
        """Stop keeping the tenures under ``lease_ms`` (its :class:`TenureFold` hears no more)."""
        self._folds.pop(lease_ms, None)

    def _ordered(self, run_id: str) -> list[LeaseWire | Poison]:
        """The run's lease wires and every poison, in serial order."""
        wires: list[LeaseWire | Poison] = list(self._sorted_wires(run_id))
        if self._poisons:
            wires = sorted([*wires, *self._poisons.values()], key=lambda w: w.serial)
        return wires

    def _fold(self, run_id: str, key: str, lease_ms: float) -> Iterator[tuple[str, Holding | None]]:
        """The holder rule, one wire at a time: ``(serial, holder once that wire is folded)``."""
        holding: Holding | None = None
        for w in self._ordered(run_id):
            holding = _step(holding, w, key, lease_ms)
            yield w.serial, holding

    def holders(self, run_id: str, lease_ms: float) -> dict[str, Holding]:
        """Every key of the run and its holder (all wires folded)."""
        out: dict[str, Holding] = {}
        for key in sorted(self.keys(run_id)):
            h = self.holder(run_id, key, lease_ms)
            if h is not None:
                out[key] = h
        return out

    def latest_timestamp(self) -> float | None:
        """The newest server timestamp folded (an estimate of the channel's clock)."""
        stamps = [w.timestamp for r in self._runs.values() for w in r.values()]
        stamps += [p.timestamp for p in self._poisons.values()]
        return max(stamps) if stamps else None

    def clear(self) -> None:
        """Forget everything (a loss of continuity: the wires are refolded from history)."""
        self._runs.clear()
        self._sorted.clear()
        self._poisons.clear()
        self._seen.clear()
        for fold in self._folds.values():
            fold.reset()
