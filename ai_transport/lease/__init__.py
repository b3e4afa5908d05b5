"""Leases (sans-I/O): who holds a claim on the channel, while its holder is alive.

A worker claims what it is about to do (a tool call, the input that woke a run, a run) with a lease
wire on the channel and renews it while it works; a claim whose holder stopped renewing is taken
over after a short lease, however long a live holder works. Everything here is a pure function of
the channel's wires (their serials and Ably's server timestamps) and of a clock passed in: no
asyncio, no I/O. The shells are :mod:`ai_transport.sessions.claims` (a worker's leases) and
:mod:`ai_transport.sessions.supervisor` (runs whose worker is gone).

* :mod:`.ledger` — the wires, the holder rule, authority, rewrites;
* :mod:`.keeper` — one claimant: renew, fence, lose, wait;
* :mod:`.watch` — what a supervisor decides.

**Renewal messages, not presence.** A holder proves it is alive by publishing a renewal every
``renew_every`` seconds (default ``lease / 3``). Presence would cost nothing while a worker idles,
but Ably notices a silently dropped connection only after ~15 s or more (a clean close leaves at
once), a paused process (SIGSTOP) keeps its TCP connection and its presence, and presence events
have no place in the channel's serial order, so no reader could tell whether an output came before
or after a takeover. Renewals cost ``60 / renew_every`` messages per minute of tool time (18 with the
defaults: a 10 s lease renewed every ~3.3 s), count against the connection's publish budget, and
order against every other wire. Lease wires name the holder's ``connectionId``, so a supervisor
that also follows presence notices a clean close (or a crash Ably detects) as soon as Ably does.
"""

from .keeper import DEFAULT_LEASE, LeaseKeeper, LeasePolicy
from .ledger import (
    LEASE_NAME,
    Holding,
    LeaseLedger,
    LeaseWire,
    Poison,
    TenureFold,
    lapsed,
    lease_body,
    parse_lease_wire,
)
from .watch import ChannelClock, Stall, stalled_runs

__all__ = [
    "DEFAULT_LEASE",
    "LEASE_NAME",
    "ChannelClock",
    "Holding",
    "LeaseKeeper",
    "LeaseLedger",
    "LeasePolicy",
    "LeaseWire",
    "Poison",
    "Stall",
    "TenureFold",
    "lapsed",
    "lease_body",
    "parse_lease_wire",
    "stalled_runs",
]
