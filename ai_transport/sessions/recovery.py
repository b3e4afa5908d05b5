"""Crash recovery: the streams a dead worker left open, and how the next worker closes them.

A worker that dies mid-stream (SIGKILL, OOM, a lost host) leaves its ``ai-output`` stream with
transport ``status: streaming`` for good: every client shows that message ``in_progress`` forever.
The agent session keeps an :class:`~ai_transport.conversation.open_streams.OpenStreams` ledger of every trusted stream it folds (live and
from history; the latest version of a stream wins), and the next worker that takes the run over
closes each stream still open with the closing append 0.8.0's cancellation publishes (the stream's
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
from ..codec.headers import NAME_OUTPUT
from ..conversation.live_integrity import LiveVerifier
from ..conversation.open_streams import OpenStreams
from ..conversation.signing import SIGNATURE_HEADER, HistoryIntegrity, stream_digest
from ..conversation.tree import Tree

__all__ = ["RecoveringRun", "close_dangling_streams"]

logger = logging.getLogger("ai_transport.sessions.recovery")


class _RecoveringSession(Protocol):
    @property
    def channel(self) -> Channel: ...

    @property
    def tree(self) -> Tree: ...

    @property
    def integrity(self) -> HistoryIntegrity: ...

    @property
    def live_verifier(self) -> LiveVerifier | None: ...

    @property
    def open_streams(self) -> OpenStreams: ...


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
    key = run.session.integrity.key
    verifier = run.session.live_verifier
    for stream in run.session.open_streams.open_streams(run.run_id, before):
        transport = {k: v for k, v in stream.transport.items() if k != SIGNATURE_HEADER}
        transport["status"] = "cancelled"
        ai: dict[str, Any] = {"transport": transport}
        if stream.codec:
            ai["codec"] = stream.codec
        if key:
            sha = verifier.accepted_sha256(stream.serial) if verifier is not None else None
            if sha is not None:  # the text is the dead agent's own: vouch for it as closed
                transport[SIGNATURE_HEADER] = stream_digest(
                    key, run.session.integrity.channel, NAME_OUTPUT, sha, {"ai": ai}
                )
            else:
                logger.warning(
                    "stream %s of run %s closed unsigned: its text is not vouched for by a tag (it stays reported)",
                    stream.serial,
                    run.run_id,
                )
        await run.lease.ensure()  # the fence: a worker that lost the run closes nothing
        try:
            version = await run.session.channel.append_message(
                {"serial": stream.serial, "data": "", "extras": {"ai": ai}}
            )
        except Exception:
            logger.exception("could not close dangling stream %s of run %s", stream.serial, run.run_id)
            continue
        run._note(version)
        closed.append(stream.serial)
        logger.warning("closed stream %s of run %s left open by a dead worker", stream.serial, run.run_id)
    for step_id, step_start_serial, step_client_id in run.session.tree.open_step_attempts(run.run_id):
        if before is not None and step_start_serial >= before:
            continue
        try:
            await run._close_step(step_id, step_start_serial, "failed", step_client_id)
        except Exception:
            logger.exception("could not close dangling step %s of run %s", step_id, run.run_id)
    await run.drain()
    return closed
