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

from ..conversation.client_steers import ClientSteers, SteerEchoed
from ..conversation.lifecycle import build_transport_headers
from ..errors import AITransportError, ErrorCode

__all__ = ["SteerCoordinator", "SteerOutcome", "SteerResult"]

logger = logging.getLogger("ai_transport.sessions.client")


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
        #: The pure part: echoes, stamps, outcomes (:mod:`ai_transport.conversation.client_steers`).
        self.ledger = ClientSteers()
        #: Steer codec-message-id -> its futures, until its outcome settles.
        self._results: dict[str, SteerResult] = {}
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
        if self.ledger.ended(run_id):
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
        self.ledger.expect(run_id, cmid)
        self._results[cmid] = result
        try:
            await self._publish(input, cmid, headers)
        except Exception as exc:
            self.ledger.forget(cmid)
            self._results.pop(cmid, None)
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
        """Feed one live (trusted) channel message to the ledger and settle what it decides."""
        for update in self.ledger.observe(message):
            if isinstance(update, SteerEchoed):
                result = self._results.get(update.cmid)
                if result is not None:
                    _settle(result.published, update.serial)
            else:
                result = self._results.pop(update.cmid, None)
                if result is not None:
                    _settle(result.outcome, SteerOutcome(update.consumed, update.reason))

    def drain_continuity_lost(self, err: BaseException) -> None:
        """Channel continuity was lost: the echoes and run ends that would settle pending steers may
        never arrive, so fail every pending outcome with ``err`` (104006)."""
        self._drain(err, err)

    def drain_closed(self) -> None:
        """The session closed: fail every pending outcome with 104004."""
        self._drain(
            AITransportError("unable to await steer outcome; session closed", ErrorCode.SESSION_CLOSED, 400),
            AITransportError("unable to await steer publish; session closed", ErrorCode.SESSION_CLOSED, 400),
        )

    def _drain(self, inflight_error: BaseException, echo_error: BaseException) -> None:
        ledger = self.ledger
        for bucket in ledger.inflight.values():
            for cmid in bucket:
                result = self._results.pop(cmid, None)
                if result is not None:
                    _settle(result.outcome, error=inflight_error)
        for cmid in ledger.echoes:
            result = self._results.pop(cmid, None)
            if result is not None:
                _settle(result.published, None)
                _settle(result.outcome, error=echo_error)
        ledger.clear()
