"""Exactly-once tool execution for a fleet of workers: leased claims ordered by the channel.

However many workers are woken for the same run (a retried HTTP trigger, two approvals arriving
close together, a platform redelivering after a crash), each approved call's output is published
once, and a worker that died is replaced within one lease. Before executing the calls it owes, a
worker publishes a **claim** naming them (and, for a resume, the input that woke it:
``trigger:<event-id>``), waits until its session has folded the channel up to the claim's serial,
and reads who holds each key by the holder rule of :mod:`ai_transport.lease.ledger` (the channel's
serial order and Ably's timestamps decide; no lock service, no local clock). A fresh run holds
``run:<run-id>`` (its claim goes out with ``ai-run-start``, in the same publish), an adopted run
(``load``) takes ``run:<run-id>`` and every key of the run still held by a lapsed worker over.

* **Leases, not timeouts.** The holder renews its keys every ``lease_renew_every`` seconds while the
  run is open (:class:`RunLease`), however long a tool runs; a key whose holder stopped renewing is
  taken over by the first claim stamped more than ``lease`` seconds after the holder's latest
  renewal. A worker that loses to a holder watches for that holder's next renewal: when it sees one
  the holder is alive and it **yields** (``run.yielded``: ``run_owed_calls`` executes nothing,
  ``pipe`` returns ``cancelled`` without reading its source, ``suspend`` / ``end`` publish nothing);
  when none comes before the holder's lease lapses it claims again and takes the keys over (then it
  closes the streams and step the dead holder left open, :mod:`.recovery`, before anything else).
  So a claimer killed before executing delays its call by at most one lease, and a crash while
  resuming is recovered by the platform's redelivery of the same invocation.
* **Fencing.** Before every publish of the run (lifecycle, outputs, every append the encoder makes,
  recovery closes) the run checks its lease (:meth:`RunLease.ensure`): a worker whose lease may have
  lapsed (paused past it: SIGSTOP, a partition) renews first and publishes nothing more when the
  renewal shows another holder (40 ``LEASE_LOST``: the run is then ``yielded``).
* **Release.** ``suspend`` / ``end`` publish, in the same atomic publish as their lifecycle message, a
  last lease wire with ``done``: a late duplicate of the same wake-up can never take the finished
  trigger over and call the model again.
* **Trust.** Only lease wires published by a trusted agent identity (``trusted_agent_ids``) count,
  never a mutation of one (:mod:`ai_transport.lease.ledger`: a rewritten claim is held as an unknown
  claim until it lapses, so a client with ``message-update-any`` cannot make a call run twice).

Wire: one plain message per claim, renewal or release, ``name: "ai-claim"``, ``data`` a JSON string
(:func:`ai_transport.lease.ledger.lease_body`), no ``extras.ai`` envelope: ``@ably/ai-transport@0.8.0``
clients ignore it (tested against the JS package).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

from ..errors import AITransportError, ErrorCode
from ..lease import LEASE_NAME, LeaseKeeper, LeaseLedger, LeasePolicy
from .invocation import Invocation

__all__ = [
    "CLAIM_NAME",
    "ClaimLedger",
    "ClaimingRun",
    "LeaseLost",
    "RunLease",
    "call_id_of",
    "claim_calls",
    "run_key",
    "trigger_key",
]

logger = logging.getLogger("ai_transport.sessions.claims")

#: The message name of a claim (a lease wire).
CLAIM_NAME: Final = LEASE_NAME
#: The ledger of every trusted lease wire a session folded (see :mod:`ai_transport.lease.ledger`).
ClaimLedger = LeaseLedger
#: Error code of a publish refused because the run's lease was lost (taken over by another worker).
LEASE_LOST_CODE: Final = int(ErrorCode.LEASE_LOST)
_WATCH = 0.05
#: Seconds a detaching worker waits for its hand-off to be published (then its lease just lapses).
_HANDOFF_WAIT = 2.0
_ATTEMPTS = 4


class LeaseLost(AITransportError):
    """A publish was refused: another worker took this run's lease over (this one was paused or cut
    off past it); the run publishes nothing more (``run.yielded``)."""


class _ClaimingSession(Protocol):
    @property
    def channel(self) -> Any:
        """The session's channel."""

    @property
    def claims(self) -> LeaseLedger:
        """The session's lease ledger."""

    @property
    def lease_policy(self) -> LeasePolicy:
        """The session's lease timing."""

    async def wait_seen(self, serial: str, timeout: float = 10.0) -> bool:
        """Whether the session has seen the channel up to ``serial``."""


class ClaimingRun(Protocol):
    """What claiming uses of a run (an :class:`~ai_transport.sessions.agent_run.AgentRun`, one layer up)."""

    run_id: str
    claimant: str
    invocation_id: str
    invocation: Invocation
    continuation: bool
    yielded: bool
    abort_signal: asyncio.Event

    @property
    def session(self) -> _ClaimingSession:
        """The run's session."""

    @property
    def lease(self) -> RunLease:
        """The run's leases."""

    def approved_unexecuted_calls(self) -> list[dict[str, Any]]:
        """The approved calls the run has not executed yet."""

    def _note(self, serial: Any) -> None:
        """``_note`` of the run (``AgentRun``)."""

    async def drain(self, timeout: float = 10.0) -> bool:
        """Wait until the run's writes are echoed."""

    async def _recover_after_takeover(self) -> None:
        """``_recover_after_takeover`` of the run (``AgentRun``)."""


def trigger_key(run: ClaimingRun) -> str | None:
    """The claim key of the input that woke ``run`` (for a continuation), so workers woken by the
    same input agree on which one carries the run on, even when no call is owed."""
    event_id = run.invocation.input_event_id
    return f"trigger:{event_id}" if run.continuation and event_id else None


def call_id_of(call: Mapping[str, Any]) -> str:
    """The claim key of a call: its ``call_id`` (Responses) or ``toolCallId`` (UI message codecs)."""
    value = call.get("call_id")
    if value is None:
        value = call.get("toolCallId")
    return str(value)


def run_key(run_id: str) -> str:
    """The claim key of a run itself (held by the worker that opened or adopted it)."""
    return f"run:{run_id}"


class RunLease:
    """The leases one :class:`~ai_transport.sessions.agent_run.AgentRun` holds: claims, renewals
    (a background task), the fence before each publish, and the release (see the module docstring)."""

    def __init__(self, run: ClaimingRun) -> None:
        self._run = run
        self.keepers: list[LeaseKeeper] = []
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        #: True once a key this run held was taken over by another worker.
        self.lost = False
        #: Lease wires this run published (claims, renewals, releases).
        self.published = 0

    @property
    def policy(self) -> LeasePolicy:
        """The session's lease timing."""
        return self._run.session.lease_policy

    @property
    def held(self) -> set[str]:
        """Every key this run holds now."""
        return {k for kp in self.keepers for k in kp.held}

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def keeper(self, keys: Iterable[str]) -> LeaseKeeper:
        """A new keeper of ``keys`` for this run (not yet claimed)."""
        run = self._run
        connection_id = getattr(run.session.channel, "connection_id", None)
        return LeaseKeeper(
            run.run_id,
            keys,
            run.claimant,
            run.invocation_id,
            self.policy,
            connection_id if isinstance(connection_id, str) else None,
        )

    @staticmethod
    def message(body: Mapping[str, Any]) -> dict[str, Any]:
        """The Ably message of a lease wire body."""
        return {"name": CLAIM_NAME, "data": json.dumps(body, separators=(",", ":"))}

    async def _send(self, keeper: LeaseKeeper, body: Mapping[str, Any], sent_at: float) -> str:
        session = self._run.session
        try:
            serials = await session.channel.publish(self.message(body))
        except Exception as exc:
            raise AITransportError(
                f"unable to claim for run {self._run.run_id}; {exc}", ErrorCode.RUN_LIFECYCLE_ERROR, 500, cause=exc
            ) from exc
        self.published += 1
        serial = serials[0] if serials else None
        if not isinstance(serial, str) or not await session.wait_seen(serial):
            raise AITransportError(
                f"unable to claim for run {self._run.run_id}; the claim was not seen on the channel",
                ErrorCode.INPUT_EVENT_NOT_FOUND,
                504,
            )
        self._run._note(serial)
        keeper.confirm(session.claims, serial, sent_at)
        return serial

    def adopt(self, keeper: LeaseKeeper, serial: str, sent_at: float) -> None:
        """A claim published by the run itself (in the same publish as ``ai-run-start``) was folded."""
        self.published += 1
        keeper.confirm(self._run.session.claims, serial, sent_at)
        self.keepers.append(keeper)
        self._start_renewing()

    async def claim(self, keys: Sequence[str]) -> LeaseKeeper:
        """Claim ``keys``; returns the keeper (its ``held`` keys are this worker's). Waits for a rival
        holder's next renewal (then yields those keys) or its lapse (then takes them over)."""
        keeper = self.keeper(keys)
        self.keepers.append(keeper)
        ledger = self._run.session.claims
        now = self._now()
        serial = await self._send(keeper, keeper.wire(now), now)
        self._start_renewing()
        for _ in range(_ATTEMPTS):
            missing = [k for k in keeper.keys if k not in keeper.held]
            if not missing:
                break
            wire = next((w for w in ledger.wires(keeper.run_id) if w.serial == serial), None)
            mine = wire.timestamp if wire is not None else 0.0
            rivals = {k: keeper.rival(ledger, k, upto=serial) for k in missing}
            waits = [keeper.wait_for(r, mine) if r is not None else 0.0 for r in rivals.values()]
            if any(w is None for w in waits):
                break  # a rival finished this work: nothing to take over
            if await self._watch(keeper, rivals, serial, max(w for w in waits if w is not None)):
                break  # a rival renewed: it is alive and carries on
            now = self._now()
            serial = await self._send(keeper, keeper.wire(now, claim=True), now)
            self._start_renewing()
        return keeper

    async def _watch(self, keeper: LeaseKeeper, rivals: Mapping[str, Any], since: str, seconds: float) -> bool:
        """Watch for ``seconds``: True as soon as a rival renews (or releases) a key after ``since``."""
        ledger = self._run.session.claims
        deadline = self._now() + seconds
        while True:
            for key, rival in rivals.items():
                if rival is None:
                    continue
                h = ledger.holder(keeper.run_id, key, self.policy.lease_ms)
                if h is not None and h.claimant == rival.claimant and (h.renewed_serial > since or h.done):
                    return True
            if self._run.abort_signal.is_set() or self._now() >= deadline:
                return False
            await asyncio.sleep(min(_WATCH, max(0.0, deadline - self._now())))

    # -- renewals and the fence ------------------------------------------------------------------

    def _start_renewing(self) -> None:
        if (self._task is None or self._task.done()) and any(k.held and not k.released for k in self.keepers):
            self._task = asyncio.ensure_future(self._renew_loop())

    async def _renew_loop(self) -> None:
        try:
            while True:
                active = [k for k in self.keepers if k.held and not k.released]
                if not active:
                    return
                now = self._now()
                wait = min(k.next_renewal(now) for k in active)
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue
                await self.renew([k for k in active if k.renew_due(self._now())])
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("run %s: lease renewal failed", self._run.run_id)

    async def renew(self, keepers: Iterable[LeaseKeeper]) -> None:
        """Publish a renewal for each of ``keepers`` and confirm it (a takeover shows as lost keys)."""
        async with self._lock:
            for keeper in keepers:
                if keeper.released or not keeper.held:
                    continue
                before = set(keeper.held)
                now = self._now()
                try:
                    await self._send(keeper, keeper.wire(now), now)
                except AITransportError as exc:
                    logger.warning("run %s: lease renewal not confirmed: %s", self._run.run_id, exc.message)
                    continue
                if keeper.held != before:
                    self.lost = True
                    logger.warning(
                        "run %s: lease on %s taken over by another worker; this worker publishes nothing more",
                        self._run.run_id,
                        ", ".join(sorted(before - keeper.held)),
                    )

    def holds(self, keys: Iterable[str] | None = None) -> bool:
        """Whether the fence would let a publish for ``keys`` (default: every key held) leave now."""
        now = self._now()
        wanted = set(keys) if keys is not None else None
        for keeper in self.keepers:
            if not keeper.held and not keeper.lost:
                continue
            mine = None if wanted is None else wanted & set(keeper.keys)
            if mine is not None and not mine:
                continue
            if not keeper.may_publish(now, mine):
                return False
        return not self.lost

    async def ensure(self, keys: Iterable[str] | None = None) -> None:
        """The fence: return when a publish for ``keys`` may leave; renews first when the lease may
        have lapsed; raises :class:`LeaseLost` (the run yields) when another worker took it over."""
        if not self.keepers or self.holds(keys):
            return
        if not self.lost:
            now = self._now()
            await self.renew([k for k in self.keepers if k.held and not k.released and k.expired(now)])
            if self.holds(keys):
                return
        self._run.yielded = True
        raise LeaseLost(
            f"unable to publish for run {self._run.run_id}; its lease was taken over by another worker "
            "(this worker was paused or cut off past its lease)",
            LEASE_LOST_CODE,
            409,
        )

    async def open_with(
        self, lifecycle: dict[str, Any], publish: Callable[[list[dict[str, Any]]], Awaitable[list[str]]]
    ) -> None:
        """Publish a fresh run's ``lifecycle`` message with its claim on ``run:<run-id>`` (one
        atomic publish), then hold and renew it."""
        keeper = self.keeper([run_key(self._run.run_id)])
        sent_at = self._now()
        serials = await publish([lifecycle, self.message(keeper.wire(sent_at))])
        if len(serials) > 1:
            await self._run.drain()
            self.adopt(keeper, serials[1], sent_at)

    async def close_with(
        self,
        lifecycle: dict[str, Any],
        publish: Callable[[dict[str, Any] | list[dict[str, Any]]], Awaitable[list[str]]],
        *,
        ending: bool,
    ) -> None:
        """Publish ``suspend`` / ``end``'s ``lifecycle`` message after the fence, with the release of
        the run's keys in the same atomic publish; stop renewing."""
        await self.ensure()
        releases = self.release_messages(ending=ending)
        try:
            await publish([lifecycle, *releases] if releases else lifecycle)
        finally:
            await self.stop()

    def release_messages(self, *, ending: bool) -> list[dict[str, Any]]:
        """The last lease wire of each keeper (``done``), to publish with ``suspend`` / ``end``; a
        suspend keeps ``run:`` (the run is not finished) and lets it lapse."""
        out = []
        now = self._now()
        for keeper in self.keepers:
            if keeper.released or not keeper.held:
                continue
            keys = [k for k in keeper.held if ending or not k.startswith("run:")]
            body = keeper.wire(now, done=True)
            body["callIds"] = sorted(keys)
            if keys:
                out.append(self.message(body))
        return out

    async def hand_off(self) -> None:
        """The worker leaves the run open for another (a detach): publish a ``handoff`` wire for the
        keys still held, so the next worker takes them over at once instead of after a lease;
        best effort (a failure leaves the lease to lapse). Then stop renewing."""
        messages = []
        now = self._now()
        for keeper in self.keepers:
            if keeper.released or not keeper.held or keeper.expired(now):
                continue
            messages.append(self.message(keeper.wire(now, handoff=True)))
        self.cancel()
        if messages:
            try:
                await asyncio.wait_for(self._run.session.channel.publish(messages), _HANDOFF_WAIT)
                self.published += len(messages)
            except Exception as exc:
                logger.info("run %s: hand-off not published (%s); its lease lapses instead", self._run.run_id, exc)

    def cancel(self) -> None:
        """Stop renewing now (synchronous; the task is cancelled, not awaited)."""
        for keeper in self.keepers:
            keeper.released = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()

    async def stop(self) -> None:
        """Stop renewing (the run ended, suspended, yielded or was dropped)."""
        for keeper in self.keepers:
            keeper.released = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def claim_calls(run: ClaimingRun, calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Claim ``calls`` (and the input that woke ``run``) and return the calls this worker holds
    (execute exactly these).

    Sets ``run.yielded`` when the worker does not hold every key it claimed. Raises 104003 when the
    claim cannot be published, 104010 when its echo is not seen in time.
    """
    wanted = [dict(c) for c in calls]
    call_ids = [call_id_of(c) for c in wanted]
    trigger = trigger_key(run)
    keys = call_ids + ([trigger] if trigger is not None else [])
    if not keys:
        return []
    lease = run.lease
    if set(keys) <= lease.held and lease.holds(keys):
        # already held by an earlier claim of this run object (a later turn of the same wake-up)
        still = {call_id_of(c) for c in run.approved_unexecuted_calls()}
        return [c for c, cid in zip(wanted, call_ids) if cid in still]
    keeper = await lease.claim(keys)
    await asyncio.sleep(0)
    if any(h.takeover for k in keeper.held if (h := run.session.claims.holder(run.run_id, k, lease.policy.lease_ms))):
        await run._recover_after_takeover()
    # everything up to the claim is folded now: a call another worker already answered is not owed
    still_owed = {call_id_of(c) for c in run.approved_unexecuted_calls()}
    won = [call for call, call_id in zip(wanted, call_ids) if call_id in keeper.held and call_id in still_owed]
    if len(won) < len(wanted) or (trigger is not None and trigger not in keeper.held):
        run.yielded = True
        logger.info("run %s: another worker holds what this worker claimed; it yields", run.run_id)
    return won
