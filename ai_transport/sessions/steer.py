"""Steering a running run, agent side (``RunSteerTracker`` / ``hasInput`` / ``onSteer`` of 0.8.0).

A *steer* is a user message a client publishes into a run that is already running (an ``ai-input``
carrying the run's ``run-id``; :meth:`~ai_transport.sessions.client.ClientRun.steer`). The agent:

* notices it as it folds into the run (the tree's ``output`` event for the run carries ``inputs``)
  and calls the run's ``on_steer()`` hook (a hint: wake the loop);
* drives its loop with :meth:`~ai_transport.sessions.agent_run.AgentRun.has_input`: True once for
  the triggering input (until the run produced output), then once per batch of steers folded in since
  the previous call — each call *drains* the pending steers into the "answered by the next pass" set;
* stamps the ids a pass drained as ``steer-codec-message-ids`` (a JSON array) on every message that
  pass publishes (``pipe`` / ``send``), which is how a client's
  :class:`~ai_transport.sessions.steer_client.SteerResult` resolves ``consumed: true``;
* in ``run.view`` moves a steer no output answered yet to the tail of its run's messages, so the next
  model input ends on the user's message (:func:`defer_unresponded_steers`).

The agent loop::

    run = await session.create_run(invocation, hooks={"on_steer": wake.set})
    await run.start()
    while run.has_input():
        await run.pipe(model(run.input_items()))
    await run.end("complete")

Beyond 0.8.0 (history robustness): a steer whose id an earlier pass already stamped (seen in any
folded output of the run, before or after the run opened) is never reported again, so a worker that
re-reads history after ``start()`` does not answer a steer twice.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any, Protocol

from ..conversation.changes import OutputChanged
from ..conversation.steers import (
    RUNS_HELD,
    STEERS_HELD,
    SteerLedger,
    SteerTracker,
    carries_a_message,
    defer_unresponded_steers,
    parse_steer_stamp,
)
from ..errors import AITransportError, ErrorCode

__all__ = ["RUNS_HELD", "STEERS_HELD", "RunSteering", "SteerLedger", "SteerTracker", "SteeredRun", "defer_unresponded_steers", "parse_steer_stamp"]

logger = logging.getLogger("ai_transport.sessions.steer")

class _SteeredSession(Protocol):
    def subscribe(self, kind: type[Any], handler: Callable[[Any], None]) -> Callable[[], None]: ...


class SteeredRun(Protocol):
    """What the steer machinery uses of a run (an :class:`~ai_transport.sessions.agent_run.AgentRun`)."""

    run_id: str
    abort_signal: asyncio.Event

    @property
    def session(self) -> _SteeredSession:
        """``session`` of the run (``AgentRun``)."""

    @property
    def input_codec_message_id(self) -> str | None:
        """``input_codec_message_id`` of the run (``AgentRun``)."""

    def _report(self, err: AITransportError) -> None:
        """``_report`` of the run (``AgentRun``)."""


class RunSteering:
    """The steer machinery of one :class:`~ai_transport.sessions.agent_run.AgentRun`.

    Armed when the run is created (it subscribes to the session's :class:`~ai_transport.conversation.changes.OutputChanged`); before the run
    opens it buffers folded steers and answered-stamps by the run id seen on the wire (a continuation
    re-keys the run when its trigger folds), and :meth:`seed` (end of ``start()``) hands the ones this
    run has not answered to the tracker.
    """

    def __init__(self, run: SteeredRun, on_steer: Callable[[], Any] | None) -> None:
        self._run = run
        self._on_steer = on_steer
        self.tracker = SteerTracker()
        self._produced_output = False
        self._seeded = False
        self._folded: dict[str, dict[str, None]] = {}
        self._responded: dict[str, set[str]] = {}
        self._off = run.session.subscribe(OutputChanged, self._on_output)

    # -- watching the session's folds ------------------------------------------------------------

    def _on_output(self, event: OutputChanged) -> None:
        run_id = event.run_id
        if not isinstance(run_id, str):
            return  # an input-node fold is never a steer into a run
        stamped = event.steer_codec_message_ids or ()
        if stamped:
            self._responded.setdefault(run_id, set()).update(stamped)
        cmid = event.codec_message_id
        is_steer = isinstance(cmid, str) and carries_a_message(event.inputs)
        if not self._seeded:
            if is_steer:
                folded = self._folded.setdefault(run_id, {})
                folded[str(cmid)] = None
                if len(folded) > STEERS_HELD:  # only the run's own client may steer it: its oldest goes
                    del folded[next(iter(folded))]
            return
        if run_id != self._run.run_id:
            return
        for answered in stamped:
            self.tracker.discard(answered)
        if not is_steer or cmid == self._run.input_codec_message_id:
            return
        if cmid in self._responded.get(run_id, ()):
            return
        self.tracker.add_pending(str(cmid))
        self._notify()

    def _notify(self) -> None:
        hook = self._on_steer
        if hook is None:
            return
        try:
            result = hook()
            if inspect.iscoroutine(result):
                result.close()
                raise TypeError("on_steer must be a plain function (it is a hint; wake your loop from it)")
        except Exception as exc:
            err = AITransportError(
                f"unable to notify steer for run {self._run.run_id}; on_steer handler threw: {exc}",
                ErrorCode.CANCEL_LISTENER_ERROR,
                500,
                cause=exc,
            )
            logger.error("%s", err.message)
            self._run._report(err)

    # -- the run's side ------------------------------------------------------------------------

    def seed(self) -> None:
        """Hand the steers folded before the run opened (and not answered) to the tracker."""
        if self._seeded:
            return
        self._seeded = True
        run_id = self._run.run_id
        responded = set(self._responded.get(run_id, ()))
        folded = dict(self._folded.get(run_id, {}))
        ledger = getattr(self._run.session, "steer_ledger", None)
        if isinstance(ledger, SteerLedger):  # steers this session folded before the run was created
            responded |= ledger.responded.get(run_id, set())
            folded = {**ledger.folded.get(run_id, {}), **folded}
        seeded = False
        for cmid in folded:
            if cmid == self._run.input_codec_message_id or cmid in responded:
                continue
            self.tracker.add_pending(cmid)
            seeded = True
        self._folded.clear()
        if seeded:
            self._notify()

    def has_input(self) -> bool:
        """``hasInput()`` of 0.8.0 (see :meth:`AgentRun.has_input`)."""
        if self._run.abort_signal.is_set():
            return False
        had_pending = self.tracker.has_pending()
        if had_pending:
            self.tracker.drain_pending()
        if not self._produced_output:
            return True
        return had_pending

    def begin_pass(self) -> list[str]:
        """A pass starts publishing (a ``pipe`` or a ``send``): the run has produced output; returns
        the steer ids this pass answers (stamped on its messages)."""
        self._produced_output = True
        ids = self.tracker.consume_recently_processed()
        if ids:
            self._responded.setdefault(self._run.run_id, set()).update(ids)
        return ids

    def is_unresponded(self, codec_message_id: str) -> bool:
        """True for a steer of this run no output answered yet (``run.view`` defers it)."""
        return self.tracker.is_unresponded(codec_message_id)

    def close(self) -> None:
        """Stop watching the tree (the run ended or suspended)."""
        self._off()
