"""Steering a running run, client side (``ClientRun.steer`` / ``SteerCoordinator`` of 0.8.0).

:meth:`ClientRun.steer(input) <ai_transport.sessions.client.ClientRun.steer>` publishes ``input``
(typically ``codec.create_user_message(...)``) as an ``ai-input`` carrying the run's ``run-id`` and
returns a :class:`SteerResult` at once:

* ``published`` resolves with the Ably serial of the steer's own echo (None if the run ended before
  the echo was seen);
* ``outcome`` resolves with a :class:`SteerOutcome` when the run's ``ai-run-end`` folds (``consumed``
  is whether an agent output stamped the steer's codec-message-id under
  ``steer-codec-message-ids``; ``run_terminal_reason`` is the end's reason). An ``ai-run-suspend``
  resolves a consumed steer and leaves an unconsumed one pending (a resume may still answer it).

A steer before the agent's ``ai-run-start`` waits for the run id; a steer into a run whose end was
seen, or after the session closed, fails both futures at once (40003 / 104004) and publishes nothing.
Closing the session fails every pending outcome with 104004, a loss of channel continuity with
104006.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..codec.headers import transport_headers
from ..conversation.lifecycle import (
    EVENT_RUN_END,
    EVENT_RUN_SUSPEND,
    H_CODEC_MESSAGE_ID,
    H_RUN_ID,
    H_RUN_REASON,
    H_STEER_CODEC_MESSAGE_IDS,
    build_transport_headers,
)
from ..errors import AITransportError, ErrorCode
from .steer import parse_steer_stamp

__all__ = ["SteerCoordinator", "SteerOutcome", "SteerResult"]

logger = logging.getLogger("ai_transport.sessions.client")

_REASONS = ("complete", "cancelled", "error")


@dataclass(frozen=True)
class SteerOutcome:
    """Whether the agent consumed a steer (``SteerOutcome`` of 0.8.0).

    ``consumed``: an agent output of the run listed the steer in ``steer-codec-message-ids``.
    ``run_terminal_reason``: complete | cancelled | error when decided by ``ai-run-end``; None when
    decided by ``ai-run-suspend``.
    """

    consumed: bool
    run_terminal_reason: str | None = None


@dataclass(frozen=True)
class SteerResult:
    """What :meth:`ClientRun.steer` returns (``SteerResult`` of 0.8.0): two futures.

    ``published`` resolves with the steer's Ably serial once its echo is seen (None when the run
    ended first); ``outcome`` with the :class:`SteerOutcome`. Both fail with the error when the
    steer could not be published.
    """

    published: asyncio.Future[str | None]
    outcome: asyncio.Future[SteerOutcome]


def _quiet(fut: asyncio.Future[Any]) -> None:
    """Mark a future's exception retrieved (callers may await only one of the pair)."""
    fut.add_done_callback(lambda f: f.cancelled() or f.exception())


def _settle(fut: asyncio.Future[Any], value: Any = None, error: BaseException | None = None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


class _Steer:
    __slots__ = ("cmid", "outcome", "published", "run_id")

    def __init__(self, run_id: str, cmid: str, result: SteerResult) -> None:
        self.run_id = run_id
        self.cmid = cmid
        self.published = result.published
        self.outcome = result.outcome


class SteerCoordinator:
    """The client session's steer state: steers awaiting their echo, steers awaiting an outcome, the
    per-run union of ``steer-codec-message-ids`` stamps, and runs whose end was seen."""

    def __init__(
        self,
        publish: Callable[[Mapping[str, Any], str, dict[str, str]], Awaitable[Any]],
        client_id: Callable[[], str | None],
        is_closed: Callable[[], bool],
    ) -> None:
        self._publish = publish
        self._client_id = client_id
        self._is_closed = is_closed
        self._echoes: dict[str, _Steer] = {}
        self._inflight: dict[str, list[_Steer]] = {}
        self._consumed: dict[str, set[str]] = {}
        self._dead: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def steer(self, run_id: Callable[[], Awaitable[str]], input: Mapping[str, Any]) -> SteerResult:
        """Publish ``input`` into the run whose id ``run_id()`` resolves; returns the futures at once."""
        loop = asyncio.get_running_loop()
        result = SteerResult(loop.create_future(), loop.create_future())
        _quiet(result.published)
        _quiet(result.outcome)
        task = asyncio.ensure_future(self._run(run_id, input, result))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return result

    def _fail(self, result: SteerResult, err: BaseException) -> None:
        _settle(result.published, error=err)
        _settle(result.outcome, error=err)

    async def _run(
        self, run_id_of: Callable[[], Awaitable[str]], input: Mapping[str, Any], result: SteerResult
    ) -> None:
        try:
            run_id = await run_id_of()
        except Exception as exc:
            err = (
                exc
                if isinstance(exc, AITransportError)
                else AITransportError(
                    f"unable to steer; run id never resolved: {exc}", ErrorCode.INVALID_ARGUMENT, 400, cause=exc
                )
            )
            self._fail(result, err)
            return
        if run_id in self._dead:
            self._fail(
                result,
                AITransportError(
                    f"unable to steer; run {run_id} has already ended", ErrorCode.INVALID_ARGUMENT, 400
                ),
            )
            return
        if self._is_closed():
            self._fail(result, AITransportError("unable to steer; session is closed", ErrorCode.SESSION_CLOSED, 400))
            return
        cmid = str(uuid.uuid4())
        headers = build_transport_headers(
            role="user",
            run_id=run_id,
            codec_message_id=cmid,
            run_client_id=self._client_id(),
            input_event_id=str(uuid.uuid4()),
        )
        self._echoes[cmid] = _Steer(run_id, cmid, result)
        try:
            await self._publish(input, cmid, headers)
        except Exception as exc:
            self._echoes.pop(cmid, None)
            status = getattr(exc, "status_code", None) or getattr(exc, "statusCode", None)
            if status in (401, 403):
                err = AITransportError(
                    "unable to publish steer; missing publish capability on the channel",
                    ErrorCode.INSUFFICIENT_CAPABILITY,
                    401,
                    cause=exc,
                )
            else:
                err = AITransportError(
                    f"unable to publish steer; {exc}", ErrorCode.SESSION_SEND_FAILED, 500, cause=exc
                )
            self._fail(result, err)

    def observe(self, message: Mapping[str, Any]) -> None:
        """Feed one live (trusted) channel message: echo match, stamp accumulation, outcomes."""
        h = transport_headers(message.get("extras"))
        cmid = h.get(H_CODEC_MESSAGE_ID)
        if isinstance(cmid, str):
            pending = self._echoes.pop(cmid, None)
            if pending is not None:
                serial = message.get("serial")
                _settle(pending.published, serial if isinstance(serial, str) else None)
                self._inflight.setdefault(pending.run_id, []).append(pending)
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
            self._resolve(run_id, name == EVENT_RUN_END, reason)

    def _resolve(self, run_id: str, is_end: bool, reason: str | None) -> None:
        consumed = self._consumed.get(run_id, set())
        remaining: list[_Steer] = []
        for entry in self._inflight.pop(run_id, []):
            if entry.cmid in consumed:
                _settle(entry.outcome, SteerOutcome(True, reason))
            elif is_end:
                _settle(entry.outcome, SteerOutcome(False, reason))
            else:
                remaining.append(entry)
        if remaining:
            self._inflight[run_id] = remaining
        if is_end:
            self._dead.add(run_id)
            self._consumed.pop(run_id, None)
            for cmid, pending in list(self._echoes.items()):
                if pending.run_id == run_id:
                    del self._echoes[cmid]
                    _settle(pending.published, None)
                    _settle(pending.outcome, SteerOutcome(False, reason))

    def drain_continuity_lost(self, err: BaseException) -> None:
        """Channel continuity was lost: the echoes and run ends that would settle pending steers may
        never arrive, so fail every pending outcome with ``err`` (104006)."""
        for bucket in self._inflight.values():
            for entry in bucket:
                _settle(entry.outcome, error=err)
        self._inflight.clear()
        for entry in self._echoes.values():
            _settle(entry.published, None)
            _settle(entry.outcome, error=err)
        self._echoes.clear()
        self._dead.clear()
        self._consumed.clear()

    def drain_closed(self) -> None:
        """The session closed: fail every pending outcome with 104004."""
        for bucket in self._inflight.values():
            for entry in bucket:
                _settle(
                    entry.outcome,
                    error=AITransportError(
                        "unable to await steer outcome; session closed", ErrorCode.SESSION_CLOSED, 400
                    ),
                )
        self._inflight.clear()
        for entry in self._echoes.values():
            _settle(entry.published, None)
            _settle(
                entry.outcome,
                error=AITransportError("unable to await steer publish; session closed", ErrorCode.SESSION_CLOSED, 400),
            )
        self._echoes.clear()
        self._dead.clear()
        self._consumed.clear()
