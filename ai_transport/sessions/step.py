"""An explicit step of a run (``RunStep`` of 0.8.0)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from typing import Any, Protocol

from ..conversation.run import PipeResult
from ..errors import InvalidArgumentError

__all__ = ["RunStep", "StepHost"]


class StepHost(Protocol):
    """What a step uses of its run (an :class:`~ai_transport.sessions.agent_run.AgentRun`, one layer up)."""

    _active_step: bool
    _current_step: RunStep | None
    abort_signal: asyncio.Event

    def _assert_open(self, action: str) -> None:
        """``_assert_open`` of the run (``AgentRun``)."""

    async def _open_step(
        self, step_client_id: str | None = None, step_id: str | None = None
    ) -> tuple[str, str | None]:
        """``_open_step`` of the run (``AgentRun``)."""

    async def _close_step(
        self, step_id: str, step_start_serial: str | None, reason: str, step_client_id: str | None = None
    ) -> None:
        """``_close_step`` of the run (``AgentRun``)."""

    async def _pipe_events(
        self,
        events: AsyncIterable[Any] | Iterable[Any],
        step: Callable[[], Awaitable[tuple[str, str | None]]],
    ) -> PipeResult:
        """``_pipe_events`` of the run (``AgentRun``)."""

    def _encoder(
        self,
        step_id: str,
        step_start_serial: str | None,
        step_client_id: str | None = None,
        steer_ids: list[str] | None = None,
    ) -> tuple[Any, str]:
        """``_encoder`` of the run (``AgentRun``)."""

    async def drain(self, timeout: float = 10.0) -> bool:
        """``drain`` of the run (``AgentRun``)."""


class RunStep:
    """An explicit step of a run (``RunStep`` of 0.8.0), from :meth:`AgentRun.create_step`.

    ``await start()`` publishes ``ai-step-start``; ``pipe(events)`` / ``send(output)`` publish
    messages in the step (each its own codec message); ``await end(reason=None)`` publishes
    ``ai-step-end`` — by default ``cancelled`` if the run was cancelled, ``failed`` if a pipe or send
    of the step failed, else ``complete``. ``AgentRun.end`` closes a step left open.
    """

    def __init__(self, run: StepHost, step_client_id: str | None = None, step_id: str | None = None) -> None:
        self.run = run
        #: The step's id (resolved when the step is created; see :meth:`AgentRun.create_step`).
        self.step_id: str | None = step_id
        self.step_client_id = step_client_id
        self._serial: str | None = None
        self._state = "initialized"
        self._failed = False
        self._cancelled = False

    @property
    def abort_signal(self) -> asyncio.Event:
        """The run's abort signal."""
        return self.run.abort_signal

    async def start(self) -> None:
        """Publish ``ai-step-start`` (idempotent)."""
        if self._state != "initialized":
            return
        run = self.run
        run._assert_open("start step")
        if run._active_step:
            raise InvalidArgumentError("unable to start step; another step is already active on this run")
        run._active_step = True
        try:
            self.step_id, self._serial = await run._open_step(self.step_client_id, self.step_id)
        except BaseException:
            run._active_step = False
            raise
        self._state = "active"
        run._current_step = self

    def _check_active(self, what: str) -> None:
        if self._state != "active":
            raise InvalidArgumentError(
                f"unable to {what}; the step is not active — call start() first and do not use it after end()"
            )

    async def pipe(self, events: AsyncIterable[Any] | Iterable[Any]) -> PipeResult:
        """Pipe a stream of events as one message of this step (see :meth:`AgentRun.pipe`)."""
        self._check_active("pipe step")
        assert self.step_id is not None
        step = (self.step_id, self._serial)

        async def opened() -> tuple[str, str | None]:
            return step

        result = await self.run._pipe_events(events, opened)
        self._failed |= result.reason == "error"
        self._cancelled |= result.reason == "cancelled"
        await self.run.drain()
        return result

    async def send(self, output: Any) -> str:
        """Publish one discrete output as its own message in this step; returns its codec-message-id."""
        self._check_active("send step")
        assert self.step_id is not None
        encoder, cmid = self.run._encoder(self.step_id, self._serial, self.step_client_id)
        try:
            await encoder.publish_output(output)
        except BaseException:
            self._failed = True
            raise
        finally:
            await encoder.close()
        await self.run.drain()
        return cmid

    async def end(self, reason: str | None = None) -> None:
        """Publish ``ai-step-end`` (idempotent); ``reason`` complete | failed | cancelled."""
        if reason is not None and reason not in ("complete", "failed", "cancelled"):
            raise InvalidArgumentError(
                f"unable to end step; reason must be complete, failed or cancelled, got {reason!r}"
            )
        if self._state != "active":
            self._state = "settled"
            return
        self._state = "settled"
        if reason is None:
            cancelled = self._cancelled or self.run.abort_signal.is_set()
            reason = "cancelled" if cancelled else "failed" if self._failed else "complete"
        run = self.run
        try:
            assert self.step_id is not None
            await run._close_step(self.step_id, self._serial, reason, self.step_client_id)
        finally:
            run._active_step = False
            if run._current_step is self:
                run._current_step = None
        await run.drain()

