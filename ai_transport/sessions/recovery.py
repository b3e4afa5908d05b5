"""Crash recovery: the streams a dead worker left open, and how the next worker closes them.

A worker that dies mid-stream (SIGKILL, OOM, a lost host) leaves its ``ai-output`` stream with
transport ``status: streaming`` for good: every client shows that message ``in_progress`` forever.
The agent session's core keeps an :class:`~ai_transport.conversation.open_streams.OpenStreams`
ledger of every trusted stream it folds (live and from history; the latest version of a stream
wins) and decides what is dangling (:meth:`~ai_transport.conversation.core.Conversation.dangling_streams`,
:meth:`~ai_transport.conversation.core.Conversation.dangling_steps`); the next worker that takes
the run over publishes the close of each stream still open with the closing append 0.8.0's cancellation publishes (the stream's
own transport and codec tiers with ``status: cancelled``, empty data), before it publishes anything
else:

* :meth:`~ai_transport.sessions.agent_run.AgentRun.load` of an adopted run closes every stream of
  the run still open (adopting means the previous worker is gone);
* :meth:`~ai_transport.sessions.agent_run.AgentRun.start` of a continuation (a resume) closes the
  run's streams opened *before* the input that woke it (a stream opened after it belongs to another
  worker woken by the same input, which may still be streaming).

A step left open by the dead worker is closed ``failed`` too (``ai-step-end`` for its attempt), and the
next :meth:`~ai_transport.sessions.agent_run.AgentRun.create_step` re-attempts it (0.8.0's rule).

With a signing key (:mod:`~ai_transport.conversation.signing`) the ``cancelled`` close is tagged over the stream's text only
when that text is the dead agent's own: the agent session's live verifier (:mod:`~ai_transport.conversation.live_integrity`)
knows the text it accepted of each open stream (from a verified aggregate, then verified appends),
every byte vouched for by a tag; a stream it does not know that way (its aggregate failed) is closed
unsigned and stays reported (never laundered).

How long a client waits: a client cannot tell a dead worker from a slow one by itself; it sees the
message finish (``cancelled``) as soon as the next worker takes the run over, i.e. after your
wake-up policy's delay (an HTTP retry, a Temporal activity's heartbeat/start-to-close timeout plus
its retry backoff) plus one history read and one append round-trip.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..channels.channel import Channel
from ..conversation.core import Conversation

__all__ = ["RecoveringRun", "close_dangling_streams"]

logger = logging.getLogger("ai_transport.sessions.recovery")


class _RecoveringSession(Protocol):
    @property
    def channel(self) -> Channel: ...

    @property
    def core(self) -> Conversation: ...


class _Fence(Protocol):
    async def ensure(self, keys: Any = None) -> None: ...


class RecoveringRun(Protocol):
    """What recovery uses of a run (an :class:`~ai_transport.sessions.agent_run.AgentRun`, one layer up)."""

    run_id: str

    @property
    def lease(self) -> _Fence:
        """The run's leases (the fence before each publish)."""

    @property
    def session(self) -> _RecoveringSession:
        """``session`` of the run (``AgentRun``)."""

    def _note(self, serial: Any) -> None:
        """``_note`` of the run (``AgentRun``)."""

    async def _close_step(
        self, step_id: str, step_start_serial: str | None, reason: str, step_client_id: str | None = None
    ) -> None:
        """``_close_step`` of the run (``AgentRun``)."""

    async def drain(self, timeout: float = 10.0) -> bool:
        """``drain`` of the run (``AgentRun``)."""


async def close_dangling_streams(run: RecoveringRun, before: str | None = None) -> list[str]:
    """Close every stream of ``run`` still open (created before ``before``) with a ``cancelled``
    closing append, and its step attempt left open with ``ai-step-end`` ``failed``; returns the
    serials of the streams closed."""
    closed: list[str] = []
    core = run.session.core
    for close in core.dangling_streams(run.run_id, before):  # the decision is the core's
        serial = close["serial"]
        await run.lease.ensure()  # the fence: a worker that lost the run closes nothing
        try:
            version = await run.session.channel.append_message(
                {"serial": serial, "data": close["data"], "extras": close["extras"]}
            )
        except Exception:
            logger.exception("could not close dangling stream %s of run %s", serial, run.run_id)
            continue
        run._note(version)
        closed.append(serial)
        logger.warning("closed stream %s of run %s left open by a dead worker", serial, run.run_id)
    for step_id, step_start_serial, step_client_id in core.dangling_steps(run.run_id, before):
        try:
            await run._close_step(step_id, step_start_serial, "failed", step_client_id)
        except Exception:
            logger.exception("could not close dangling step %s of run %s", step_id, run.run_id)
    await run.drain()
    return closed
