"""The generic encoder's asyncio shell over a :class:`ChannelWriter` (``createEncoder`` of 0.8.0).

:class:`StreamEncoder` performs the :class:`~ai_transport.codec.core.encoder_core.Operation` s a
codec's sans-I/O core hands out: publishes (a stream create's serials reported back to the core),
fire-and-forget appends collected and awaited at the next flush (a stream's close, a cancel, or
``close()``, like 0.8.0's promise list), recovery updates for failed appends. It knows no codec:
the codec's encoder (``ResponsesCodec.create_encoder``, ``UIMessageCodec.create_encoder``) builds it
over its own core. See :mod:`ai_transport.codec.responses.encoder` for the operations in detail.
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .coalesce import CoalescingPublisher
from .encoder_core import Operation, StreamEncoderCore, log

__all__ = ["ChannelWriter", "StreamEncoder"]


# ---------------------------------------------------------------------------------------------
# The asyncio shell


class ChannelWriter(Protocol):
    """What the encoder writes through (a subset of :class:`ai_transport.channels.channel.Channel`)."""

    async def publish(self, message: Any) -> Any:
        """Publish one message dict or a list (one batch); return the serials (``list[str]``)."""

    async def append_message(self, message: dict[str, Any]) -> Any:
        """Append ``message["data"]`` to the message at ``message["serial"]``.

        May also be a plain method returning an :class:`asyncio.Future` (saves a task per append).
        """

    async def update_message(self, message: dict[str, Any]) -> Any:
        """Replace the message at ``message["serial"]``."""


class StreamEncoder:
    """The asyncio encoder over a :class:`ChannelWriter` and a codec's core (``Encoder`` of 0.8.0).

    Not safe for concurrent ``publish_*`` calls on the same stream (as 0.8.0: callers await each
    publish in order).
    """

    def __init__(self, writer: ChannelWriter, core: StreamEncoderCore, *, message_id: str | None = None) -> None:
        self._writer = writer
        self.core = core
        #: The core's per-delta path, when it has one: ``event -> (message, stream id) | None``.
        self._fast_delta: Callable[[Any], tuple[dict[str, Any], str] | None] | None = getattr(
            core, "encode_delta", None
        )
        #: The encoder-level fallback message id of 0.8.0's options (``options.messageId``).
        self.message_id = message_id
        self._batch = _AppendBatch()
        self._flushing: asyncio.Future[None] | None = None
        budget = getattr(writer, "publish_budget", None)
        #: Appends merged per stream under the writer's publish budget (None: no budget).
        self.coalescer: CoalescingPublisher | None = (
            CoalescingPublisher(writer, budget, self._append_failed)
            if budget is not None and getattr(budget, "enabled", False)
            else None
        )

    async def publish_output(
        self, event: Any, message_id: str | None = None, *, extras: Mapping[str, Any] | None = None
    ) -> None:
        """Encode and publish one output event (``publishOutput``) on ``ai-output``.

        ``message_id`` is stamped as the transport ``codec-message-id``; ``extras={"headers": {...}}``
        overrides the encoder's headers for this write (0.8.0's ``WriteOptions``).
        """
        fast = self._fast_delta
        if fast is not None:
            hit = fast(event)
            if hit is not None:
                self._append(hit[0], hit[1])
                return
        ops = self.core.encode_output(event, message_id=message_id, extras=extras)
        if len(ops) == 1 and ops[0].action == "append":  # the per-delta path: no coroutine of _run
            self._append(ops[0].message, ops[0].stream_id or "")
            return
        await self._run(ops)

    async def publish_input(
        self, input: Any, message_id: str | None = None, *, extras: Mapping[str, Any] | None = None
    ) -> None:
        """Encode and publish one input (``publishInput``) on ``ai-input``."""
        await self._run(self.core.encode_input(input, message_id=message_id, extras=extras))

    def cancel_streams(self) -> asyncio.Future[None]:
        """Append ``status: cancelled`` to every open stream, then flush (idempotent).

        The streams are marked cancelled at once and the writes are scheduled immediately, so a
        plain ``encoder.cancel_streams()`` cancels them; ``await encoder.cancel_streams()`` also
        waits for the flush (and raises its error), like 0.8.0's ``await cancelStreams()``.
        """
        try:
            ops = self.core.cancel()
        except Exception as exc:
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed
        return self._start(self._run(ops))

    async def close(self) -> None:
        """Flush pending appends (recovering failures) and release the trackers. Idempotent."""
        ops = self.core.close()
        if not ops:
            return
        try:
            await self._run(ops)
        finally:
            self.core.release()

    # -- internals -------------------------------------------------------------------------------

    @staticmethod
    def _start(coro: Any) -> asyncio.Future[Any]:
        # Eager where the runtime supports it (3.12+): the writer is entered at once, as 0.8.0
        # calls the writer synchronously; otherwise tasks still start in creation order.
        if _EAGER:
            return asyncio.Task(coro, loop=asyncio.get_running_loop(), eager_start=True)  # type: ignore[call-arg]
        return asyncio.ensure_future(coro)

    def _append_failed(self, stream_id: str, exc: BaseException) -> None:
        self._batch.failed.append((stream_id, exc))

    def _append(self, message: dict[str, Any], stream_id: str) -> None:
        """Fire one append; its outcome is collected by the current batch (awaited at flush)."""
        if self.coalescer is not None:
            self.coalescer.append(message, stream_id)
            return
        batch = self._batch
        batch.outstanding += 1
        try:
            result = self._writer.append_message(message)
        except Exception as exc:
            batch.settle(stream_id, exc)
            return
        if result.__class__ is not _COROUTINE and asyncio.isfuture(result):
            # Fast path: a writer may return a Future (no task needed).
            batch.tasks.add(result)
            result.add_done_callback(
                lambda f: batch.settle(stream_id, asyncio.CancelledError() if f.cancelled() else f.exception())
            )
        elif asyncio.iscoroutine(result):
            # Run the writer's coroutine to its first suspension here (as an eager task would): a
            # writer that completes at once (the in-process channel) costs no task at all.
            try:
                yielded = result.send(None)
            except StopIteration:
                batch.settle(stream_id, None)
                return
            except (Exception, asyncio.CancelledError) as exc:  # settled as the task path would
                batch.settle(stream_id, exc)
                return
            batch.tasks.add(self._start(self._guarded(batch, _resume(result, yielded), stream_id)))
        else:
            batch.tasks.add(self._start(self._guarded(batch, result, stream_id)))

    @staticmethod
    async def _guarded(batch: _AppendBatch, awaitable: Any, stream_id: str) -> None:
        try:
            await awaitable
        except BaseException as exc:  # settled even when cancelled, so a flush never hangs
            batch.settle(stream_id, exc)
            if not isinstance(exc, Exception):
                raise
        else:
            batch.settle(stream_id, None)

    async def _call(self, fn: Callable[[Any], Any], message: Any) -> Any:
        if self.coalescer is not None:
            return await self.coalescer.call(lambda: self._start(fn(message)))
        return await self._start(fn(message))

    async def _run(self, ops: list[Operation]) -> None:
        for op in ops:
            if op.action == "publish":
                if op.stream_id is not None:
                    try:
                        serials = await self._call(self._writer.publish, op.message)
                    except BaseException:
                        self.core.stream_failed(op.stream_id)
                        raise
                    self.core.stream_started(op.stream_id, serials)
                else:
                    await self._call(self._writer.publish, op.message)
            elif op.action == "append":
                self._append(op.message, op.stream_id or "")
            elif op.action == "update":
                await self._call(self._writer.update_message, op.message)
            elif op.action == "flush":
                await self._flush()

    async def _flush(self) -> None:
        if self.coalescer is not None:
            await self.coalescer.drain()
        if self._flushing is not None:
            await asyncio.shield(self._flushing)
            return
        batch, self._batch = self._batch, _AppendBatch()
        if not batch.outstanding and not batch.failed:
            return
        self._flushing = asyncio.ensure_future(self._do_flush(batch))
        try:
            await asyncio.shield(self._flushing)
        finally:
            self._flushing = None

    async def _do_flush(self, batch: _AppendBatch) -> None:
        if batch.outstanding:
            batch.waiter = asyncio.get_running_loop().create_future()
            await batch.waiter
        failed: list[str] = []
        for stream_id, _exc in batch.failed:
            if stream_id not in failed:
                failed.append(stream_id)
        if not failed:
            return
        log.warning("recovering failed appends for streams %s", failed)
        errors: list[tuple[str, BaseException]] = []
        for op in self.core.recover(failed):
            try:
                await self._call(self._writer.update_message, op.message)
            except Exception as exc:
                errors.append((op.stream_id or "", exc))
        if errors:
            ids = [sid for sid, _ in errors]
            log.error("recovery failed for streams %s", ids)
            raise StreamEncoderCore.recovery_error(ids, errors[0][1])


async def _resume(coro: Any, yielded: Any) -> Any:
    """Continue a coroutine that was started by hand and suspended on ``yielded`` (a future or None)."""
    while True:
        try:
            if yielded is None:
                await asyncio.sleep(0)
            else:
                yielded._asyncio_future_blocking = False
                await asyncio.wait((yielded,))
        except BaseException as exc:  # cancelled while waiting: the coroutine sees it
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            return stop.value


class _AppendBatch:
    """The appends in flight since the last flush (0.8.0's pending-promise snapshot)."""

    __slots__ = ("failed", "outstanding", "tasks", "waiter")

    def __init__(self) -> None:
        self.outstanding = 0
        self.failed: list[tuple[str, BaseException]] = []
        self.tasks: set[asyncio.Future[Any]] = set()  # strong refs until the flush
        self.waiter: asyncio.Future[None] | None = None

    def settle(self, stream_id: str, error: BaseException | None) -> None:
        """One append finished (``error`` set when it failed)."""
        if error is not None:
            self.failed.append((stream_id, error))
        self.outstanding -= 1
        if self.outstanding == 0 and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


_EAGER = sys.version_info >= (3, 12)
#: A coroutine's type: a writer's coroutine is told apart from a Future without asyncio.isfuture.
_COROUTINE = types.CoroutineType
