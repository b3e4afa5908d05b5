"""The durable half of :class:`~ai_transport.sessions.agent_run.AgentRun`: adopting (``load``),
recovery before a resume, and claims (a mixin; see :mod:`.durable`, :mod:`.recovery`, :mod:`.claims`)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from ..errors import InvalidArgumentError
from .run import TERMINAL_STATUSES, RunStatus
from .tools import function_call_output

if TYPE_CHECKING:
    from .agent import AgentSession
    from .agent_run import AgentRun
    from .claims import RunLease
    from .invocation import Invocation

__all__ = ["DurableRun"]

logger = logging.getLogger("ai_transport.sessions.claims")


class DurableRun:
    """Mixin of :class:`~ai_transport.sessions.agent_run.AgentRun` (which provides the attributes)."""

    if TYPE_CHECKING:
        session: AgentSession
        invocation: Invocation
        run_id: str
        trigger: Any
        continuation: bool
        is_open: bool
        yielded: bool
        _adopted: bool
        _steering: Any
        lease: RunLease

        @property
        def status(self) -> RunStatus: ...
        def _match(self) -> Any: ...
        def _assert_open(self, action: str) -> None: ...
        def owed_calls(self) -> list[dict[str, Any]] | None: ...
        def _codec_reader(self, name: str) -> Callable[..., Any] | None: ...
        async def send(self, output: Any) -> str: ...

    @property
    def located(self) -> bool:
        """True once the trigger (the input named by the invocation) has been folded (or there is none)."""
        return not self.invocation.input_event_id or self._match() is not None

    async def load(self, timeout: float = 30.0) -> None:
        """Open an adopted run for publishing without publishing anything (``load`` of 0.8.0).

        Waits up to ``timeout`` seconds for the run's ``ai-run-start`` and trigger (history, then
        live), rejects a suspended run (40003: resume it with ``create_run().start()``) or an ended
        one (40003), raises 104010 when the run is not visible in time, then closes every stream a
        dead worker left open (:mod:`.recovery`). Only for runs from ``AgentSession.adopt_run``.
        """
        if not self._adopted:
            raise InvalidArgumentError(
                f"unable to load run; run {self.run_id} was created, not adopted (call start())"
            )
        from .durable import load_run

        await load_run(cast("AgentRun", self), timeout)
        self._steering.seed()

    async def _recover_before_resume(self) -> None:
        """Fold the run back to its start and close the streams left open before the trigger."""
        from .recovery import close_dangling_streams

        tree = self.session.tree
        await self.session.hydrator.fold_until(lambda: tree.run_start_confirmed(self.run_id))
        trigger_serial = self.trigger.get("serial") if self.trigger is not None else None
        if isinstance(trigger_serial, str) and trigger_serial:
            await close_dangling_streams(cast("AgentRun", self), before=trigger_serial)

    async def run_owed_calls(
        self, execute: Callable[[Mapping[str, Any]], Any | Awaitable[Any]]
    ) -> list[dict[str, Any]] | None:
        """Execute every owed call with ``execute(call)`` and send each output; None when the run
        must stay suspended (see :meth:`owed_calls`). Returns the calls executed. The calls are
        claimed first (:meth:`claim_calls`): however many workers run this for the same run, each
        call's output is published once, and a worker that holds none of them yields the run. The
        lease is checked before each call runs and before its output is sent: a worker that lost
        it (paused past it, then taken over) stops there, publishes nothing and yields."""
        from .claims import LeaseLost, call_id_of

        owed = self.owed_calls()
        if owed is None:
            return None
        owed = await self.claim_calls(owed)
        done: list[dict[str, Any]] = []
        try:
            for call in owed:
                await self.lease.ensure([call_id_of(call)])
                result = execute(call)
                if inspect.isawaitable(result):
                    result = await result
                done.append(call)
                await self.lease.ensure([call_id_of(call)])  # still ours after the tool ran?
                await self.send((self._codec_reader("tool_output") or function_call_output)(call, result))
        except LeaseLost as exc:
            logger.warning("%s", exc.message)
            self.yielded = True
        return done

    async def _recover_after_takeover(self) -> None:
        """This run took a key over from a worker whose lease lapsed: close every stream and step
        of the run still open (only the lapsed worker can have opened them, and it is fenced)."""
        from .recovery import close_dangling_streams

        await close_dangling_streams(cast("AgentRun", self))

    async def claim_calls(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Claim ``calls`` on the channel and return those this worker holds: execute exactly
        these (exactly-once across workers, see :mod:`.claims`). Sets :attr:`yielded` when another
        worker holds some of them. :meth:`run_owed_calls` calls it for you."""
        if not calls and not self.continuation:
            return []
        if self.is_open and self.status in TERMINAL_STATUSES:
            self.yielded = True  # another worker already finished the run
            return []
        self._assert_open("claim calls")
        from .claims import claim_calls

        return await claim_calls(cast("AgentRun", self), calls)

