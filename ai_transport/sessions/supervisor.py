"""No run left streaming: a supervisor that notices runs whose worker is gone (asyncio shell).

A :class:`Supervisor` follows channels (one :class:`~.agent.AgentSession` each, folding history
and then live, never entering presence) and, every ``poll`` seconds, asks the lease core
(:func:`ai_transport.lease.watch.stalled_runs`) which ``active`` runs have lost their worker: every
lease holder of the run stopped renewing for more than ``lease`` (+ ``grace``) at the channel's time,
or its connection left the channel's presence, or the run holds no lease and published nothing for
that long. For each such run it either

* **wakes a worker**: ``on_stall(stall)`` (your serverless trigger: POST the run's last invocation
  to your endpoint; :attr:`StalledRun.invocation` is the input that last woke it, when known). A run
  still stalled one ``lease + grace`` after its wake-up is ended (below), so no client waits forever;
* or, without ``on_stall`` (or after a wake-up that did not help), **ends it** ``error``: it adopts
  the run (taking the dead holder's keys over, so a worker that comes back is fenced), closes the
  streams and step left open, and publishes ``ai-run-end`` with reason ``error`` and a message
  naming why (``worker lost: lease lapsed``…).

Bound: a worker that dies is noticed at most ``lease + grace + poll`` seconds after its latest
renewal, or as soon as Ably reports its connection leaving presence (at once after a clean close,
~15 s after a silent TCP drop; only leaves seen while the supervisor follows count); ending the run
then waits for the lease to lapse (a takeover needs it, so a worker that was only paused is fenced),
plus one history read and two publishes.

The channel's time is estimated from the wires seen (:class:`~ai_transport.lease.watch.ChannelClock`:
never ahead of Ably's clock). The supervisor publishes as a trusted agent identity: give its
connection the agents' ``clientId`` (or list its identity in the readers' ``trusted_agent_ids``).
``ai-transport supervise CHANNEL…`` runs one from the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._shapes import MAPPING
from ..codec.headers import transport_headers
from ..conversation.changes import WireFolded
from ..conversation.lifecycle import H_RUN_ID
from ..errors import AITransportError, ErrorCode, InvalidArgumentError
from ..lease import DEFAULT_LEASE, ChannelClock, Holding, stalled_runs
from .invocation import Invocation

__all__ = ["StalledRun", "Supervisor"]

logger = logging.getLogger("ai_transport.sessions.supervisor")

#: Error code of a run the supervisor ended because its worker was lost.
WORKER_LOST_CODE = int(ErrorCode.WORKER_LOST)


@dataclass(frozen=True)
class StalledRun:
    """An active run whose worker is gone, as the supervisor found it."""

    channel: str
    run_id: str
    #: ``lease lapsed`` / ``holder left presence`` / ``released, not ended`` / ``no activity``.
    reason: str
    #: Channel time (ms) the run was last known alive.
    last_alive: float
    #: The input that last woke the run (its ``trigger:`` key), when known: POST it to re-wake.
    invocation: Invocation | None
    holders: Mapping[str, Holding]


OnStall = Callable[[StalledRun], Any]


class _Followed:
    """One followed channel: its session, the runs' latest wire times, presence leaves."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.clock = ChannelClock()
        self.last_wire: dict[str, float] = {}
        self.left: set[str] = set()
        self.woken: dict[str, float] = {}
        self.ended: set[str] = set()


class Supervisor:
    """Follows ``channels`` and wakes or ends the runs whose worker is gone (module docstring).

    Args:
        channels: channels (in-process or :class:`~ai_transport.channels.ably_channel.AblyChannel`)
            on a connection whose ``clientId`` is a trusted agent identity.
        on_stall: ``(StalledRun) -> None | Awaitable``: wake a worker for the run (your trigger);
            None: end stalled runs ``error`` at once.
        lease: the agents' lease (seconds; the same as their ``AgentSession(lease=...)``).
        grace: extra seconds before a lapsed lease counts as a dead worker (clock skew, a slow
            renewal); default ``lease / 5``.
        poll: seconds between checks (default ``lease / 5``).
        session_options: more :class:`~.agent.AgentSession` keyword arguments (``trusted_agent_ids``,
            ``signing_key``…).
    """

    def __init__(
        self,
        channels: Iterable[Any],
        *,
        on_stall: OnStall | None = None,
        lease: float = DEFAULT_LEASE,
        grace: float | None = None,
        poll: float | None = None,
        session_options: Mapping[str, Any] | None = None,
    ) -> None:
        for name, value in (("lease", lease), ("grace", grace), ("poll", poll)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value < 0):
                # NaN compares false with everything: no run would ever count as stalled
                raise InvalidArgumentError(
                    f"unable to create supervisor; {name} must be a finite number >= 0, got {value!r}"
                )
        if lease <= 0:
            raise InvalidArgumentError(f"unable to create supervisor; lease must be a number > 0, got {lease!r}")
        if on_stall is not None and not callable(on_stall):
            raise InvalidArgumentError("unable to create supervisor; on_stall must be callable")
        self.channels = list(channels)
        if not self.channels:
            raise InvalidArgumentError("unable to create supervisor; give at least one channel")
        self.on_stall = on_stall
        self.lease = float(lease)
        self.grace = float(grace) if grace is not None else self.lease / 5
        self.poll = float(poll) if poll is not None else self.lease / 5
        self._options = dict(session_options or {})
        self._followed: list[_Followed] = []
        self._task: asyncio.Task[None] | None = None
        #: Every stalled run handled (woken or ended), oldest first.
        self.handled: list[tuple[StalledRun, str]] = []

    # -- following -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to every channel (history, then live) and start checking."""
        from .agent import AgentSession

        for channel in self.channels:
            session = AgentSession(channel, enter_presence=False, lease=self.lease, **self._options)
            followed = _Followed(session)
            session.subscribe(WireFolded, functools.partial(self._note_fold, followed))
            await session.connect()
            presence = getattr(channel, "presence", None)
            if presence is not None:
                try:
                    await presence.subscribe(lambda event, f=followed: self._presence(f, event))
                except Exception as exc:
                    logger.warning("supervisor: presence of %r not followed: %s", getattr(channel, "name", "?"), exc)
            await session.hydrator.fold_until(lambda: False)  # the whole history: every run's state
            self._followed.append(followed)
        self._task = asyncio.ensure_future(self._loop())

    def _note_fold(self, followed: _Followed, change: WireFolded) -> None:
        self._note(followed, change.wire)

    def _note(self, followed: _Followed, message: Mapping[str, Any]) -> None:
        stamp = message.get("timestamp")
        if not isinstance(stamp, (int, float)) or isinstance(stamp, bool):
            return
        version = message.get("version")
        vstamp = version.get("timestamp") if isinstance(version, MAPPING) else None
        if isinstance(vstamp, (int, float)) and not isinstance(vstamp, bool):
            stamp = max(stamp, vstamp)
        followed.clock.observe(float(stamp), time.monotonic() * 1000)
        run_id = transport_headers(message.get("extras")).get(H_RUN_ID)
        if isinstance(run_id, str):
            followed.last_wire[run_id] = max(followed.last_wire.get(run_id, 0.0), float(stamp))

    def _presence(self, followed: _Followed, event: Mapping[str, Any]) -> None:
        conn = event.get("connectionId")
        if isinstance(conn, str):
            if event.get("action") == "leave":
                followed.left.add(conn)
            elif event.get("action") in ("enter", "present", "update"):
                followed.left.discard(conn)
        stamp = event.get("timestamp")
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
            followed.clock.observe(float(stamp), time.monotonic() * 1000)

    # -- checking --------------------------------------------------------------------------------

    def stalled(self) -> list[StalledRun]:
        """The stalled runs of every followed channel now (nothing is done about them)."""
        out: list[StalledRun] = []
        for followed in self._followed:
            out.extend(self._stalled(followed))
        return out

    def _stalled(self, followed: _Followed) -> list[StalledRun]:
        session = followed.session
        now = followed.clock.now(time.monotonic() * 1000)
        if now is None:
            return []
        active = {}
        for node in session.tree.nodes():
            if getattr(node, "kind", None) == "run" and node.status == "active" and node.run_id not in followed.ended:
                active[node.run_id] = followed.last_wire.get(node.run_id, 0.0)
        lease_ms = self.lease * 1000
        found = stalled_runs(session.claims, active, now, lease_ms, self.grace * 1000, followed.left)
        name = str(getattr(session.channel, "name", ""))
        out = []
        for stall in found:
            triggers = sorted(
                (h.renewed_at, k) for k, h in stall.holders.items() if k.startswith("trigger:")
            )
            invocation = Invocation(triggers[-1][1][len("trigger:") :], name) if triggers else None
            out.append(StalledRun(name, stall.run_id, stall.reason, stall.last_alive, invocation, stall.holders))
        return out

    async def check(self) -> list[tuple[StalledRun, str]]:
        """One check of every channel: wake or end each stalled run; returns what was done."""
        done: list[tuple[StalledRun, str]] = []
        for followed in self._followed:
            for stall in self._stalled(followed):
                action = await self._handle(followed, stall)
                if action:
                    done.append((stall, action))
                    self.handled.append((stall, action))
        return done

    async def _handle(self, followed: _Followed, stall: StalledRun) -> str | None:
        now = time.monotonic()
        woken = followed.woken.get(stall.run_id)
        if self.on_stall is not None and woken is None:
            followed.woken[stall.run_id] = now
            logger.warning("run %s on %s stalled (%s): waking a worker", stall.run_id, stall.channel, stall.reason)
            try:
                result = self.on_stall(stall)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("on_stall failed for run %s", stall.run_id)
            return "woken"
        if woken is not None and now - woken < self.lease + self.grace:
            return None  # give the woken worker one lease to take the run over
        try:
            await self.end_run(followed, stall)
        except Exception as exc:
            logger.warning("could not end stalled run %s on %s: %s", stall.run_id, stall.channel, exc)
            return None
        return "ended"

    async def end_run(self, followed: _Followed, stall: StalledRun) -> None:
        """Adopt the run (taking its lapsed keys over), close what it left open, end it ``error``."""
        session = followed.session
        node = session.tree.get_run_node(stall.run_id)
        invocation_id = node.invocation_id if node is not None and node.invocation_id else "supervisor"
        run = session.adopt_run(Invocation("", stall.channel), stall.run_id, invocation_id)
        await run.load(timeout=self.lease + self.grace)
        reason = AITransportError(
            f"worker lost: {stall.reason}; run {stall.run_id} ended by the supervisor",
            WORKER_LOST_CODE,
            500,
        )
        await run.end("error", reason)
        followed.ended.add(stall.run_id)
        logger.warning("run %s on %s ended error (%s)", stall.run_id, stall.channel, stall.reason)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.poll)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("supervisor check failed")

    async def close(self) -> None:
        """Stop checking and close every session (the channels stay the caller's)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for followed in self._followed:
            await followed.session.close()
        self._followed.clear()

    async def __aenter__(self) -> Supervisor:  # noqa: PYI034
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
