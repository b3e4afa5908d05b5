"""The pipe loop of an agent run: events -> one codec message, honouring the run's abort signal."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..codec.encoder import _resume
from ..errors import AITransportError, ErrorCode
from .run import PipeResult
from .tools import aiter_any

if TYPE_CHECKING:
    from .agent_run import AgentRun

__all__ = ["pipe_events"]

logger = logging.getLogger("ai_transport.sessions.agent")


async def pipe_events(
    run: AgentRun,
    events: AsyncIterable[Any] | Iterable[Any],
    step: Callable[[], Awaitable[tuple[str, str | None]]],
) -> PipeResult:
    """The pipe loop: ``step()`` gives the step (id, start serial) at the first event."""
    steer_ids = run._steering.begin_pass()  # the steers this pass answers (stamped on its message)
    iterator = aiter_any(events).__aiter__()
    abort: asyncio.Future[Any] = asyncio.ensure_future(run.abort_signal.wait())
    encoder: Any = None
    reason = "complete"
    error: BaseException | None = None
    try:
        while True:
            # The next event, raced against the abort signal. A source that yields at once (its
            # ``__anext__`` completes without suspending) costs no task and no wait: the abort is
            # checked first and the loop still yields once per event (fairness, as before).
            pending: asyncio.Future[Any] | None = None
            ready = False
            value: Any = None
            if abort.done() or run.abort_signal.is_set():
                cancelled = True
            else:
                step_coro = iterator.__anext__()
                try:
                    yielded = step_coro.send(None)
                except StopIteration as stop:
                    value, ready = stop.value, True
                except StopAsyncIteration:
                    pass  # the source ended
                else:
                    pending = asyncio.ensure_future(_resume(step_coro, yielded))
                cancelled = False
                if pending is not None:
                    waitables: set[asyncio.Future[Any]] = {pending, abort}
                    done, _ = await asyncio.wait(waitables, return_when=asyncio.FIRST_COMPLETED)
                    cancelled = pending not in done
                    if cancelled:
                        pending.cancel()
                elif ready:
                    await asyncio.sleep(0)  # let other tasks run (a cancel, the echo) between events
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
            try:
                if pending is not None:
                    value = pending.result()
                elif not ready:
                    raise StopAsyncIteration
            except StopAsyncIteration:
                if encoder is not None:
                    await encoder.cancel_streams()
                    await encoder.close()
                break
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

