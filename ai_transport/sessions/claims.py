"""Exactly-once tool execution for a fleet of workers: claims ordered by the channel.

However many workers are woken for the same run (a retried HTTP trigger, two approvals arriving close
together), each approved call is executed once. Before executing the calls it owes, a worker
publishes a **claim** naming them and waits until its session has seen the channel up to the claim's
serial (every earlier claim is then folded, live or from history: the channel's total order is the
arbiter, no lock service is involved). For each call, the claims naming it are read in serial order;
the *holder* is the first one, and a later claim takes the call over only when it was published at
least ``claim_ttl`` seconds (server timestamps) after the current holder's. A resuming worker also
claims the input that woke it (``trigger:<event-id>``), so of several workers woken by the same
input only the holder carries the run on, even when no call is owed (a client-executed tool's
result, or a late duplicate wake-up after the calls were run). A worker executes the
calls it holds (and that still have no output once the channel is folded up to its claim); every
worker reading the same claims agrees on the holders.

* **Losers yield.** A worker that holds none of the calls it claimed yields the run: ``run.yielded``
  becomes true, :meth:`~ai_transport.sessions.agent_run.AgentRun.run_owed_calls` executes nothing
  and returns ``[]``, and the run stops publishing (``pipe`` returns ``cancelled`` without reading
  its source, so no model request is made; ``suspend`` / ``end`` publish nothing). The holder carries
  the run on. A worker holding only some of its calls executes those and yields too (another worker
  holds the rest and continues).
* **A claimer that dies** before executing blocks its calls for ``claim_ttl`` seconds (default 60):
  the first wake-up whose claim is published ``claim_ttl`` or more after the dead claim takes the
  calls over. Choose ``claim_ttl`` above your longest tool run plus a publish round-trip; a claimer
  still running after ``claim_ttl`` can be taken over, and its call then runs twice.
* **Trust.** Only claims published by a trusted agent identity (``trusted_agent_ids``) count.

Wire: one plain message per claim, ``name: "ai-claim"``, ``data`` a JSON string
``{"runId", "callIds", "claimant", "invocationId"}`` (``callIds`` also holds the trigger key) and no ``extras.ai`` envelope, so
``@ably/ai-transport@0.8.0`` clients treat it as a foreign message and ignore it (their views are
unchanged; tested against the JS package).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import AITransportError, ErrorCode

if TYPE_CHECKING:
    from .agent_run import AgentRun

__all__ = ["CLAIM_NAME", "Claim", "ClaimLedger", "claim_calls", "trigger_key"]

logger = logging.getLogger("ai_transport.sessions.claims")

#: The message name of a claim.
CLAIM_NAME: Final = "ai-claim"


@dataclass(frozen=True)
class Claim:
    """One claim as read from the channel."""

    serial: str
    timestamp: float
    run_id: str
    call_ids: tuple[str, ...]
    claimant: str


class ClaimLedger:
    """Every trusted claim a session has folded (live or history), by run."""

    def __init__(self) -> None:
        self._by_run: dict[str, dict[str, Claim]] = {}

    def note(self, message: Mapping[str, Any], trusted: Iterable[Any]) -> None:
        """Record the claim ``message`` when its publisher is in ``trusted`` and it parses."""
        if message.get("clientId") not in set(trusted):
            logger.warning("ignored a claim from untrusted client %r", message.get("clientId"))
            return
        serial, timestamp, data = message.get("serial"), message.get("timestamp"), message.get("data")
        try:
            body: Any = json.loads(data) if isinstance(data, str) else data
            run_id, call_ids, claimant = body["runId"], body["callIds"], body["claimant"]
        except (TypeError, ValueError, KeyError):
            logger.warning("ignored a malformed claim (serial %r)", serial)
            return
        if (
            not isinstance(serial, str)
            or not isinstance(timestamp, (int, float))
            or isinstance(timestamp, bool)
            or not isinstance(run_id, str)
            or not isinstance(claimant, str)
            or not isinstance(call_ids, list)
            or not all(isinstance(c, str) for c in call_ids)
        ):
            logger.warning("ignored a malformed claim (serial %r)", serial)
            return
        claim = Claim(serial, float(timestamp), run_id, tuple(call_ids), claimant)
        self._by_run.setdefault(run_id, {})[serial] = claim

    def holder(self, run_id: str, call_id: str, upto: str, ttl: float) -> Claim | None:
        """The claim holding ``call_id`` among the claims up to serial ``upto`` (see module docs)."""
        holder: Claim | None = None
        claims = sorted(self._by_run.get(run_id, {}).values(), key=lambda c: c.serial)
        for claim in claims:
            if claim.serial > upto:
                break
            if call_id not in claim.call_ids:
                continue
            if holder is None or claim.timestamp - holder.timestamp >= ttl * 1000:
                holder = claim
        return holder

    def clear(self) -> None:
        """Forget every claim (a loss of continuity: they are refolded from history)."""
        self._by_run.clear()


def trigger_key(run: AgentRun) -> str | None:
    """The claim key of the input that woke ``run`` (for a continuation), so workers woken by the
    same input agree on which one carries the run on, even when no call is owed."""
    event_id = run.invocation.input_event_id
    return f"trigger:{event_id}" if run.continuation and event_id else None


async def claim_calls(run: AgentRun, calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Claim ``calls`` (and the input that woke ``run``) and return the calls this worker holds
    (execute exactly these).

    Sets ``run.yielded`` when the worker does not hold every key it claimed. Raises 104003 when the
    claim cannot be published, 104010 when its echo is not seen in time.
    """
    wanted = [dict(c) for c in calls]
    call_ids = [str(c.get("call_id")) for c in wanted]
    trigger = trigger_key(run)
    keys = call_ids + ([trigger] if trigger is not None else [])
    if not keys:
        return []
    session = run.session
    ledger = session.claims

    def mine(key: str, upto: str) -> bool:
        holder = ledger.holder(run.run_id, key, upto, session.claim_ttl)
        return holder is not None and holder.claimant == run.claimant

    if all(mine(k, "\uffff") for k in keys):
        # already held by an earlier claim of this run object (a later turn of the same wake-up)
        still = {str(c.get("call_id")) for c in run.approved_unexecuted_calls()}
        return [c for c, cid in zip(wanted, call_ids) if cid in still]
    body = {"runId": run.run_id, "callIds": keys, "claimant": run.claimant, "invocationId": run.invocation_id}
    try:
        serials = await session.channel.publish({"name": CLAIM_NAME, "data": json.dumps(body)})
    except Exception as exc:
        raise AITransportError(
            f"unable to claim calls for run {run.run_id}; {exc}", ErrorCode.RUN_LIFECYCLE_ERROR, 500, cause=exc
        ) from exc
    serial = serials[0] if serials else None
    if not isinstance(serial, str) or not await session.wait_seen(serial):
        raise AITransportError(
            f"unable to claim calls for run {run.run_id}; the claim was not seen on the channel",
            ErrorCode.INPUT_EVENT_NOT_FOUND,
            504,
        )
    await asyncio.sleep(0)

    def holds(key: str) -> bool:
        return mine(key, serial)

    # everything up to the claim is folded now: a call another worker already answered is not owed
    still_owed = {str(c.get("call_id")) for c in run.approved_unexecuted_calls()}
    won = [call for call, call_id in zip(wanted, call_ids) if holds(call_id) and call_id in still_owed]
    if len(won) < len(wanted) or (trigger is not None and not holds(trigger)):
        run.yielded = True
        logger.info("run %s: another worker holds what this worker claimed; it yields", run.run_id)
    return won
