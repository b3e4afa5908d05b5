"""The pipe loop of an agent run: events -> one codec message, honouring the run's abort signal."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from typing import Any, Protocol

from ..conversation.run import PipeResult
from ..errors import AITransportError, ErrorCode
from .steer import RunSteering
from .tools import aiter_any

__all__ = ["PipingRun", "pipe_events"]


class PipingRun(Protocol):
    """What the pipe loop uses of a run (an :class:`~ai_transport.sessions.agent_run.AgentRun`, one layer up)."""

    run_id: str
    abort_signal: asyncio.Event
    hooks: dict[str, Callable[..., Any]]
    _steering: RunSteering

    def _encoder(
        self,
        step_id: str,
        step_start_serial: str | None,
        step_client_id: str | None = None,
        steer_ids: list[str] | None = None,
    ) -> tuple[Any, str]: ...

    def _report(self, err: AITransportError) -> None: ...

#: The pipe yields to the event loop (a cancel, the agent's own echo, other runs) after this many
#: events, or once :data:`YIELD_AFTER_SECONDS` passed since it last did, whichever is first.
#: A source reading a network suspends on its own between chunks; a chunk (or an in-memory source)
#: holding many events is served in bursts this long instead of one loop round trip per event
#: (~13 us of CPU a model delta).
YIELD_AFTER_EVENTS = 16
YIELD_AFTER_SECONDS = 0.002

logger = logging.getLogger("ai_transport.sessions.agent")


class _AbortWatch:
    """Whether the pipe waits on its source, and whether an abort cancelled that wait."""

    __slots__ = ("aborted", "waiting")

    def __init__(self) -> None:
        self.waiting = False
        self.aborted = False


async def pipe_events(
    run: PipingRun,
    events: AsyncIterable[Any] | Iterable[Any],
    step: Callable[[], Awaitable[tuple[str, str | None]]],
) -> PipeResult:
    """The pipe loop: ``step()`` gives the step (id, start serial) at the first event."""
    steer_ids = run._steering.begin_pass()  # the steers this pass answers (stamped on its message)
    iterator = aiter_any(events).__aiter__()
    abort: asyncio.Future[Any] = asyncio.ensure_future(run.abort_signal.wait())
    task = asyncio.current_task()
    watch = _AbortWatch()

    def on_abort(fut: asyncio.Future[Any]) -> None:
        if watch.waiting and task is not None and not fut.cancelled():
            watch.aborted = True
            task.cancel()

    def _uncancel() -> None:
        uncancel = getattr(task, "uncancel", None)  # 3.11+; before, a cancel leaves no count behind
        if uncancel is not None:
            uncancel()

    abort.add_done_callback(on_abort)
    encoder: Any = None
    loop = asyncio.get_running_loop()
    burst, burst_began = 0, loop.time()
    reason = "complete"
    error: BaseException | None = None
    try:
        while True:
            # The next event, raced against the abort signal. The source's step runs in this task
            # (a source holding a cancel scope across steps, as anyio's, needs one task): an abort
            # while it waits cancels this task, which the loop takes back (uncancel) as "cancelled".
            # No task and no asyncio.wait per event; one loop yield per event keeps it fair.
            cancelled = abort.done() or run.abort_signal.is_set()
            ended = False
            value: Any = None
            if not cancelled:
                watch.waiting = True
                try:
                    value = await iterator.__anext__()
                except StopAsyncIteration:
                    ended = True
                except asyncio.CancelledError:
                    if not watch.aborted:
                        raise
                finally:
                    watch.waiting = False
                if watch.aborted:
                    watch.aborted = False
                    _uncancel()
                    cancelled = True
            if cancelled:
                reason = "cancelled"
                if encoder is not None:
                    hook = run.hooks.get("on_cancelled")
                    if hook is not None:
                        res = hook(encoder.publish_output)
                        if inspect.isawaitable(res):
                            await res
                    await encoder.cancel_streams()
                    await encoder.close()
                break
            if ended:
                if encoder is not None:
                    await encoder.cancel_streams()
                    await encoder.close()
                break
            burst += 1
            if burst >= YIELD_AFTER_EVENTS or loop.time() - burst_began >= YIELD_AFTER_SECONDS:
                await asyncio.sleep(0)  # let other tasks run (a cancel, the echo) between bursts
                burst, burst_began = 0, loop.time()
            if encoder is None:
                step_id, step_start_serial = await step()
                encoder, _ = run._encoder(step_id, step_start_serial, steer_ids=steer_ids)
            await encoder.publish_output(value)
    except Exception as exc:
        reason, error = "error", exc
        logger.error("pipe for run %s failed: %s", run.run_id, exc)
        if encoder is not None:
            try:
                await encoder.cancel_streams()
            except Exception:
                logger.debug("cancel_streams after error failed", exc_info=True)
            try:
                await encoder.close()
            except Exception:
                logger.debug("close after error failed", exc_info=True)
        run._report(
            AITransportError(
                f"unable to pipe response for run {run.run_id}; {exc}",
                ErrorCode.STREAM_ERROR,
                500,
                cause=exc,
            )
        )
    finally:
        abort.cancel()
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:
                logger.debug("closing the source failed", exc_info=True)
    return PipeResult(reason, error)  # type: ignore[arg-type]

