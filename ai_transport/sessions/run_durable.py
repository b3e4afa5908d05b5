"""The durable half of :class:`~ai_transport.sessions.agent_run.AgentRun`: adopting (``load``),
recovery before a resume, and claims (a mixin; see :mod:`.durable`, :mod:`.recovery`, :mod:`.claims`)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..conversation.run import TERMINAL_STATUSES, RunStatus
from ..errors import AITransportError, ErrorCode, InvalidArgumentError
from .claims import LeaseLost, RunLease, call_id_of, claim_calls, run_key
from .invocation import Invocation
from .recovery import close_dangling_streams
from .run_host import AgentSessionHost
from .tools import function_call_output

if TYPE_CHECKING:
    from .view import LeafBranch

_POLL = 0.02

__all__ = ["DurableRun", "load_run", "wait_live"]

logger = logging.getLogger("ai_transport.sessions.claims")


class DurableRun:
    """Mixin of :class:`~ai_transport.sessions.agent_run.AgentRun` (which provides the attributes)."""

    if TYPE_CHECKING:
        session: AgentSessionHost
        invocation: Invocation
        invocation_id: str
        run_id: str
        run_client_id: str | None
        input_client_id: str | None
        trigger: Any
        continuation: bool
        is_open: bool
        yielded: bool
        claimant: str
        abort_signal: asyncio.Event
        _adopted: bool
        _opening: bool
        _steering: Any
        _branch: LeafBranch
        lease: RunLease

        def _resolve_trigger(self, message: Mapping[str, Any]) -> None: ...
        def _note(self, serial: Any) -> None: ...
        async def _close_step(
            self, step_id: str, step_start_serial: str | None, reason: str, step_client_id: str | None = None
        ) -> None: ...
        async def drain(self, timeout: float = 10.0) -> bool: ...
        def approved_unexecuted_calls(self) -> list[dict[str, Any]]: ...

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
        await load_run(self, timeout)
        self._steering.seed()

    async def _recover_before_resume(self) -> None:
        """Fold the run back to its start and close the streams left open before the trigger."""
        tree = self.session.tree
        await self.session.hydrator.fold_until(lambda: tree.run_start_confirmed(self.run_id))
        trigger_serial = self.trigger.get("serial") if self.trigger is not None else None
        if isinstance(trigger_serial, str) and trigger_serial:
            await close_dangling_streams(self, before=trigger_serial)

    async def run_owed_calls(
        self, execute: Callable[[Mapping[str, Any]], Any | Awaitable[Any]]
    ) -> list[dict[str, Any]] | None:
        """Execute every owed call with ``execute(call)`` and send each output; None when the run
        must stay suspended (see :meth:`owed_calls`). Returns the calls executed. The calls are
        claimed first (:meth:`claim_calls`): however many workers run this for the same run, each
        call's output is published once, and a worker that holds none of them yields the run. The
        lease is checked before each call runs and before its output is sent: a worker that lost
        it (paused past it, then taken over) stops there, publishes nothing and yields."""
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
        await close_dangling_streams(self)

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
        return await claim_calls(self, calls)


async def wait_live(ready: Callable[[], bool], run: DurableRun, seconds: float) -> None:
    """Poll ``ready()`` for up to ``seconds`` of live folding (or until the run is cancelled)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not ready() and not run.abort_signal.is_set() and loop.time() < deadline:
        await asyncio.sleep(min(_POLL, max(0.0, deadline - loop.time())))


async def load_run(run: DurableRun, timeout: float = 30.0) -> None:
    """``load()`` of an adopted run (see the module docstring); idempotent."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise InvalidArgumentError(f"unable to load run; timeout must be a number >= 0, got {timeout!r}")
    session = run.session
    if not session._connected:
        raise AITransportError(
            "unable to load run; connect() must be called first", ErrorCode.CHANNEL_NOT_READY, 400
        )
    if run.abort_signal.is_set():
        raise AITransportError(
            f"unable to load run; run {run.run_id} was cancelled before load()",
            ErrorCode.OPERATION_CANCELLED,
            400,
        )
    if run.is_open or run._opening:
        return
    run._opening = True
    run_id = run.run_id

    def start_seen() -> bool:
        return session.tree.run_start_confirmed(run_id)

    def ready() -> bool:
        return start_seen() and run.located

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    fetch_error: BaseException | None = None
    if not ready():
        try:
            await asyncio.wait_for(session.hydrator.fold_until(ready), timeout)
        except asyncio.TimeoutError:
            pass
        except AITransportError as exc:
            fetch_error = exc
        await wait_live(ready, run, max(0.0, deadline - loop.time()))
    if not ready():
        run._opening = False
        session._forget(run)
        if run.abort_signal.is_set():
            raise AITransportError(
                f"unable to load run; run {run_id} was cancelled", ErrorCode.OPERATION_CANCELLED, 400
            )
        what = "run-start" if not start_seen() else f"input event '{run.invocation.input_event_id}'"
        raise AITransportError(
            f"unable to load run; {what} for run {run_id} not observed within {timeout}s",
            ErrorCode.INPUT_EVENT_NOT_FOUND,
            504,
            cause=fetch_error,
        )
    found = run._match()
    if found is not None:
        run._resolve_trigger(found)
    else:
        run._branch.set_pin(None, run_id, None)
    status = run.status
    if status == "suspended" or status in TERMINAL_STATUSES:
        run._opening = False
        session._forget(run)
        detail = (
            "is suspended, resume via create_run().start()"
            if status == "suspended"
            else "is terminal (read-only)"
        )
        raise InvalidArgumentError(f"unable to load run; run {run_id} {detail}")
    node = session.tree.get_run_node(run_id)
    run.run_client_id = node.client_id if node is not None else ""
    if node is not None and node.input_client_id is not None and run.input_client_id is None:
        run.input_client_id = node.input_client_id
    run.is_open = True
    await _take_over(run, max(0.0, deadline - loop.time()))
    await close_dangling_streams(run)


async def _take_over(run: DurableRun, timeout: float) -> None:
    """Claim ``run:<run-id>`` and every key of the run a worker still holds (not released): the
    adopter waits for a live holder's lease to lapse (a takeover) and fails with 40003 when the
    holder is alive (it renews: the run is not abandoned)."""
    session = run.session
    lease_ms = session.lease_policy.lease_ms
    keys = [run_key(run.run_id)]
    keys += [k for k, h in session.claims.holders(run.run_id, lease_ms).items() if not h.done and k not in keys]
    keeper = await run.lease.claim(keys)
    if run_key(run.run_id) not in keeper.held:
        run.is_open = False
        run._opening = False
        run.lease.cancel()
        session._forget(run)
        raise InvalidArgumentError(
            f"unable to load run; run {run.run_id} is held by a live worker (its lease is being renewed)"
        )
