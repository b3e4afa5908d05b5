"""A client's steers, as a state machine: which steers await their echo, which await an outcome,
what the agent stamped as consumed, which runs ended (``SteerCoordinator`` of 0.8.0, without its
futures).

The shell (:class:`~ai_transport.sessions.steer_client.SteerCoordinator`) tells the ledger about
each steer it publishes (:meth:`ClientSteers.expect`, :meth:`ClientSteers.forget` when the publish
failed), feeds it every live wire the session folded (:meth:`ClientSteers.observe`) and settles its
futures from what that returns: :class:`SteerEchoed` (the steer's own echo, with its serial; None
when the run ended before it) and :class:`SteerSettled` (its outcome: ``consumed`` when an agent
output stamped its codec-message-id under ``steer-codec-message-ids``, with the run's end reason).
An ``ai-run-suspend`` settles a consumed steer and leaves an unconsumed one pending (a resume may
still answer it); an ``ai-run-end`` settles every steer of the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..codec.headers import transport_headers
from .lifecycle import (
    EVENT_RUN_END,
    EVENT_RUN_SUSPEND,
    H_CODEC_MESSAGE_ID,
    H_RUN_ID,
    H_RUN_REASON,
    H_STEER_CODEC_MESSAGE_IDS,
)
from .steers import parse_steer_stamp

__all__ = ["ClientSteers", "SteerEchoed", "SteerSettled", "SteerUpdate"]

_REASONS: Final = ("complete", "cancelled", "error")


@dataclass(frozen=True, slots=True)
class SteerEchoed:
    """The steer ``cmid`` was seen on the channel at ``serial`` (None: its run ended first)."""

    cmid: str
    serial: str | None


@dataclass(frozen=True, slots=True)
class SteerSettled:
    """The steer ``cmid`` has its outcome: ``consumed`` by the agent or not, the run's end reason
    (None after a suspend)."""

    cmid: str
    consumed: bool
    reason: str | None


#: What :meth:`ClientSteers.observe` returns.
SteerUpdate = SteerEchoed | SteerSettled


class ClientSteers:
    """The steer state of one client session; see the module docstring."""

    def __init__(self) -> None:
        #: Steer codec-message-id -> its run, awaiting the echo.
        self.echoes: dict[str, str] = {}
        #: Run id -> steers echoed, awaiting an outcome (oldest first).
        self.inflight: dict[str, list[str]] = {}
        self._consumed: dict[str, set[str]] = {}
        self._dead: set[str] = set()

    def ended(self, run_id: str) -> bool:
        """True once the run's ``ai-run-end`` was seen (a steer into it fails at once)."""
        return run_id in self._dead

    def expect(self, run_id: str, cmid: str) -> None:
        """A steer ``cmid`` into ``run_id`` is being published: await its echo."""
        self.echoes[cmid] = run_id

    def forget(self, cmid: str) -> None:
        """The publish of steer ``cmid`` failed: nothing to await."""
        self.echoes.pop(cmid, None)

    def observe(self, message: Mapping[str, Any]) -> list[SteerUpdate]:
        """Feed one live (trusted) wire: echo match, stamp accumulation, outcomes (never raises)."""
        h = transport_headers(message.get("extras"))
        out: list[SteerUpdate] = []
        cmid = h.get(H_CODEC_MESSAGE_ID)
        if isinstance(cmid, str):
            run = self.echoes.pop(cmid, None)
            if run is not None:
                serial = message.get("serial")
                out.append(SteerEchoed(cmid, serial if isinstance(serial, str) else None))
                self.inflight.setdefault(run, []).append(cmid)
        run_id = h.get(H_RUN_ID)
        stamp = h.get(H_STEER_CODEC_MESSAGE_IDS)
        if isinstance(run_id, str) and stamp is not None:
            ids = parse_steer_stamp(stamp)
            if ids:
                self._consumed.setdefault(run_id, set()).update(ids)
        name = message.get("name")
        if name in (EVENT_RUN_SUSPEND, EVENT_RUN_END) and isinstance(run_id, str):
            reason: str | None = None
            if name == EVENT_RUN_END:
                raw = h.get(H_RUN_REASON)
                reason = raw if raw in _REASONS else "complete"
            self._resolve(run_id, name == EVENT_RUN_END, reason, out)
        return out

    def _resolve(self, run_id: str, is_end: bool, reason: str | None, out: list[SteerUpdate]) -> None:
        consumed = self._consumed.get(run_id, set())
        remaining: list[str] = []
        for cmid in self.inflight.pop(run_id, []):
            if cmid in consumed:
                out.append(SteerSettled(cmid, True, reason))
            elif is_end:
                out.append(SteerSettled(cmid, False, reason))
            else:
                remaining.append(cmid)
        if remaining:
            self.inflight[run_id] = remaining
        if is_end:
            self._dead.add(run_id)
            self._consumed.pop(run_id, None)
            for cmid, run in list(self.echoes.items()):
                if run == run_id:
                    del self.echoes[cmid]
                    out.append(SteerEchoed(cmid, None))
                    out.append(SteerSettled(cmid, False, reason))

    def clear(self) -> None:
        """Forget everything (the session closed, or continuity was lost)."""
        self.echoes.clear()
        self.inflight.clear()
        self._dead.clear()
        self._consumed.clear()
