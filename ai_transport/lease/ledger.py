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

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from .._shapes import MAPPING

__all__ = [
    "LEASE_NAME",
    "Holding",
    "LeaseLedger",
    "LeaseWire",
    "Poison",
    "lapsed",
    "lease_body",
    "parse_lease_wire",
]

#: The message name of a lease wire (a claim, a renewal or a release).
LEASE_NAME: Final = "ai-claim"

_CREATE = "message.create"


@dataclass(frozen=True)
class LeaseWire:
    """One lease wire as read from the channel."""

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


def _mutated(message: Mapping[str, Any]) -> tuple[bool, Any]:
    version = message.get("version")
    action = message.get("action")
    mutator = version.get("clientId") if isinstance(version, MAPPING) else None
    vserial = version.get("serial") if isinstance(version, MAPPING) else None
    mutated = (action not in (None, _CREATE)) or (
        isinstance(vserial, str) and vserial != message.get("serial")
    )
    return mutated, mutator


def parse_lease_wire(message: Mapping[str, Any], trusted: Iterable[Any]) -> LeaseWire | Poison | str:
    """The lease wire ``message`` carries, a :class:`Poison`, or why it is refused (a reason)."""
    trusted_ids = trusted if isinstance(trusted, (set, frozenset)) else set(trusted)
    serial, timestamp = message.get("serial"), message.get("timestamp")
    if not isinstance(serial, str) or not serial:
        return "lease wire without a serial"
    if not isinstance(timestamp, (int, float)) or isinstance(timestamp, bool):
        return "lease wire without a timestamp"
    if message.get("clientId") not in trusted_ids:
        return f"lease wire from untrusted client {message.get('clientId')!r}"
    mutated, mutator = _mutated(message)
    if mutated:
        if mutator in trusted_ids and message.get("action") == "message.update":
            pass  # a trusted identity rewrote it: its content stands (ours never do)
        else:
            publisher = message.get("clientId")
            return Poison(serial, float(timestamp), publisher if isinstance(publisher, str) else None)
    data = message.get("data")
    try:
        body: Any = json.loads(data) if isinstance(data, (str, bytes)) else data
    except ValueError:
        return "malformed lease wire"
    if not isinstance(body, MAPPING):
        return "malformed lease wire"
    run_id, keys, claimant = body.get("runId"), body.get("callIds"), body.get("claimant")
    done, restates, conn = body.get("done", False), body.get("restates"), body.get("connectionId")
    handoff = body.get("handoff", False)
    if (
        not isinstance(run_id, str)
        or not isinstance(claimant, str)
        or not claimant
        or claimant.startswith("?")
        or not isinstance(keys, list)
        or not all(isinstance(k, str) for k in keys)
        or not isinstance(done, bool)
        or not isinstance(handoff, bool)
        or not (restates is None or isinstance(restates, str))
        or not (conn is None or isinstance(conn, str))
    ):
        return "malformed lease wire"
    stamped = message.get("connectionId")  # Ably's, not the body's: the connection that published it
    conn = stamped if isinstance(stamped, str) and stamped else conn
    publisher = message.get("clientId")
    return LeaseWire(
        serial,
        float(timestamp),
        run_id,
        tuple(keys),
        claimant,
        done,
        restates,
        conn,
        handoff,
        publisher if isinstance(publisher, str) else None,
    )


def _step(holding: Holding | None, w: LeaseWire | Poison, key: str, lease_ms: float) -> Holding | None:
    """One wire of the holder rule folded into ``holding`` (the key's holder before it)."""
    if isinstance(w, Poison):
        if holding is None or lapsed(holding, w.timestamp, lease_ms):
            holding = Holding("?" + w.serial, w.serial, w.timestamp, w.serial, poison=w.serial, publisher=w.publisher)
        elif not holding.done:  # perhaps the holder's own renewal: it may extend, never shorten
            holding = replace(holding, renewed_at=max(holding.renewed_at, w.timestamp))
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
        holding = replace(
            holding,
            claimant=w.claimant,
            renewed_at=max(holding.renewed_at, w.timestamp),
            renewed_serial=w.serial,
            done=w.done,
            handoff=w.handoff,
            poison=None,
            connection_id=w.connection_id or holding.connection_id,
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


@dataclass
class _Run:
    wires: dict[str, LeaseWire] = field(default_factory=dict)
    ordered: list[LeaseWire] | None = None

    def sorted(self) -> list[LeaseWire]:
        if self.ordered is None:
            self.ordered = sorted(self.wires.values(), key=lambda w: w.serial)
        return self.ordered


class LeaseLedger:
    """Every trusted lease wire a session has folded (live or history, any order), by run."""

    def __init__(self) -> None:
        self._runs: dict[str, _Run] = {}
        self._poisons: dict[str, Poison] = {}
        self._seen: set[str] = set()
        #: Wires refused (untrusted, malformed, a mutation of a known wire), by reason (counted).
        self.refused: dict[str, int] = {}

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
        if parsed.serial in self._seen:
            if isinstance(parsed, LeaseWire) and parsed.serial in self._runs.get(parsed.run_id, _Run()).wires:
                known = self._runs[parsed.run_id].wires[parsed.serial]
                if known == parsed:
                    return None  # the same wire again (live, then from history)
            if isinstance(parsed, Poison) and parsed.serial in self._poisons:
                return None
            return self._refuse("mutation of a lease wire ignored (the first version seen stands)")
        self._seen.add(parsed.serial)
        if isinstance(parsed, Poison):
            self._poisons[parsed.serial] = parsed
            self._refuse("lease wire rewritten by an untrusted mutator (held as an unknown claim)")
            return None
        run = self._runs.setdefault(parsed.run_id, _Run())
        run.wires[parsed.serial] = parsed
        run.ordered = None
        return None

    def wires(self, run_id: str) -> list[LeaseWire]:
        """The run's lease wires in serial order."""
        run = self._runs.get(run_id)
        return list(run.sorted()) if run is not None else []

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

    def tenures(self, run_id: str, lease_ms: float) -> list[tuple[str, Holding | None, Holding]]:
        """Every change of holder of every key of the run, in serial order: ``(serial, before,
        after)`` at the wire that began ``after``'s tenure (a claim, or a takeover from ``before``)."""
        # one pass over the wires in serial order, each stepping only the keys it names (a poison
        # steps every key): the holder rule of :meth:`_fold`, without a pass per key
        out: list[tuple[str, Holding | None, Holding]] = []
        keys = sorted(self.keys(run_id))
        holding: dict[str, Holding | None] = dict.fromkeys(keys)
        for w in self._ordered(run_id):
            for key in keys if isinstance(w, Poison) else sorted(set(w.keys)):
                previous = holding[key]
                h = holding[key] = _step(previous, w, key, lease_ms)
                if h is not None and (previous is None or h.since != previous.since):
                    out.append((w.serial, previous, h))
        return out

    def _ordered(self, run_id: str) -> list[LeaseWire | Poison]:
        """The run's lease wires and every poison, in serial order."""
        run = self._runs.get(run_id)
        wires: list[LeaseWire | Poison] = list(run.sorted()) if run is not None else []
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
        stamps = [w.timestamp for r in self._runs.values() for w in r.wires.values()]
        stamps += [p.timestamp for p in self._poisons.values()]
        return max(stamps) if stamps else None

    def clear(self) -> None:
        """Forget everything (a loss of continuity: the wires are refolded from history)."""
        self._runs.clear()
        self._poisons.clear()
        self._seen.clear()
