"""The framing activities (``activities.ts`` of 0.8.0): open a run, and publish its terminal.

Framing brackets a turn; the inference inside stays the application's. Every activity may run in a
fresh process, so each one makes its own channel through the caller's factory, connects an
:class:`~ai_transport.sessions.agent.AgentSession`, does one thing, closes the session (detach:
nothing is published) and closes the channel before it returns. One channel per activity is a
correctness rule, not tidiness: two sessions sharing one channel object would detach each other.

The factory must give every activity the same agent identity (``clientId``): a session folds agent
output and run lifecycle only from its own identity (``trusted_agent_ids``).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ..conversation.run import TERMINAL_STATUSES
from ..errors import AITransportError, ErrorCode, InvalidArgumentError, InvalidTypeError, type_name
from ..sessions.agent import AgentSession
from ..sessions.agent_run import AgentRun
from ..sessions.durable import with_agent_session
from ..sessions.invocation import Invocation
from ..sessions.view import DEFAULT_HISTORY_PAGE_SIZE
from .heartbeat import heartbeat_now, heartbeating
from .types import (
    ACTIVITY_NAMES,
    CleanupRunInput,
    EndRunInput,
    InvocationData,
    OpenRunInput,
    RunIdentity,
    SuspendRunInput,
)

__all__ = [
    "DEFAULT_MAX_HISTORY_PAGES",
    "ChannelFactory",
    "FramingActivities",
    "FramingOptions",
    "adopt_and_load",
    "create_framing_activities",
    "page_history_for_trigger",
]

logger = logging.getLogger("ai_transport.temporal")

T = TypeVar("T")

#: ``session_name -> Channel`` (or an awaitable of one); called once per activity.
ChannelFactory = Callable[[str], Any]

#: History pages ``openRun`` reads looking for the trigger before giving up (0.8.0: 20).
DEFAULT_MAX_HISTORY_PAGES = 20
#: Seconds ``openRun`` keeps waiting for a trigger still in flight once history is exhausted.
TRIGGER_WAIT = 5.0


@dataclass
class FramingOptions:
    """Configuration of the framing activities (``FramingActivitiesOptions`` of 0.8.0).

    Attributes:
        create_channel: ``session_name -> Channel`` (or awaitable); the channel is closed before
            the activity returns. Required: the SDK never reads the environment or builds clients.
        codec: the codec sessions encode with (default: the Responses codec).
        heartbeat: heartbeat while the activity runs and once per history page (default off).
        max_history_pages: most history pages ``openRun`` reads (default 20).
        history_page_size: messages per history page (default 100).
        session_options: extra keyword arguments for every ``AgentSession`` (trust settings such as
            ``trusted_client_ids`` / ``accept_input``).
    """

    create_channel: ChannelFactory
    codec: Any = None
    heartbeat: bool = False
    max_history_pages: int = DEFAULT_MAX_HISTORY_PAGES
    history_page_size: int = DEFAULT_HISTORY_PAGE_SIZE
    session_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(self.create_channel):
            raise InvalidArgumentError("unable to create framing activities; create_channel must be callable")
        for name in ("max_history_pages", "history_page_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidArgumentError(
                    f"unable to create framing activities; {name} must be a positive integer, got {value!r}"
                )


async def page_history_for_trigger(
    session: AgentSession,
    input_event_id: str,
    *,
    max_pages: int = DEFAULT_MAX_HISTORY_PAGES,
    on_page: Callable[[], None] | None = None,
    located: Callable[[], bool] | None = None,
) -> int:
    """Fold channel history pages (newest first, the session's page size) until the trigger
    ``input_event_id`` is located; returns the pages read.

    ``located()`` says when the trigger is settled (a run's ``located``: the match is bound to the
    invocation's publisher or serial, or history is read to its start, see
    :mod:`ai_transport.sessions.invocation`); without it, when a wire carrying the id is folded.
    It stops there: opening a run needs no inference, so it never reads more of the conversation
    than settling its trigger takes. ``max_pages`` bounds only the search for an id no folded wire
    carries: 104010 when that many pages did not reveal it and history has more; once the id is
    seen, paging goes on while the trigger is unsettled (a long channel whose trigger is present
    never fails here). When history is exhausted, ``run.start()`` then waits a bounded moment for
    a live arrival. Works on the session (``sessions.durable.page_until_located`` needs a run) and
    calls ``on_page`` per page read, so the activity can heartbeat.
    """
    pages = 0
    tree = session.tree

    def seen() -> bool:
        return tree.find_message_by_event_id(input_event_id) is not None

    def stop() -> bool:
        nonlocal pages
        if (located() if located is not None else seen()) or (pages >= max_pages and not seen()):
            return True
        pages += 1
        if on_page is not None:
            on_page()
        return False

    exhausted = await session.hydrator.fold_until(stop)
    if not seen() and not exhausted:
        raise AITransportError(
            f"unable to open run; trigger event {input_event_id} not located within {pages} history pages",
            ErrorCode.INPUT_EVENT_NOT_FOUND,
            504,
        )
    return pages


async def adopt_and_load(session: AgentSession, invocation: Invocation, ids: Mapping[str, Any]) -> AgentRun:
    """Adopt the open run ``ids`` (``{runId, invocationId}``) on ``session`` and load it.

    ``load()`` status-gates: it raises when the run is suspended or already terminal. The run's
    claims are the workflow's (claimant = its invocation id, the same in every activity and retry of
    it): Temporal decides which attempt runs, so a retry carries the dead attempt's leases on at
    once instead of waiting one lease for them to lapse (:mod:`ai_transport.sessions.claims`).
    """
    if not isinstance(ids, Mapping):
        raise InvalidTypeError(f"unable to adopt run; ids must be an object {{runId, invocationId}}, got {type_name(ids)}")
    run_id, invocation_id = ids.get("runId"), ids.get("invocationId")
    for label, value in (("ids.runId", run_id), ("ids.invocationId", invocation_id)):
        if not isinstance(value, str) or not value:
            raise InvalidArgumentError(f"unable to adopt run; {label} must be a non-empty string")
    run = session.adopt_run(invocation, str(run_id), str(invocation_id))
    run.claimant = str(invocation_id)
    await run.load()
    return run


@contextlib.asynccontextmanager
async def _caller_errors_final() -> AsyncIterator[None]:
    """A wrong argument (or a run in the wrong state: ending an ended run) fails the activity for
    good, as a non-retryable ``ApplicationError`` carrying the message and code: retrying cannot help."""
    try:
        yield
    except (InvalidArgumentError, InvalidTypeError) as exc:
        raise ApplicationError(exc.message, exc.code, type=type(exc).__name__, non_retryable=True) from exc


class FramingActivities:
    """The four framing activities bound to one :class:`FramingOptions` (see :attr:`all`)."""

    def __init__(self, options: FramingOptions) -> None:
        self.options = options

    @property
    def all(self) -> list[Callable[..., Any]]:
        """The activity callables to register on a worker (type names ``openRun`` … ``cleanupRun``)."""

        async def open_run(input: OpenRunInput) -> RunIdentity:
            async with _caller_errors_final():
                return await self.open_run(input)

        async def end_run(input: EndRunInput) -> None:
            async with _caller_errors_final():
                await self.end_run(input)

        async def suspend_run(input: SuspendRunInput) -> None:
            async with _caller_errors_final():
                await self.suspend_run(input)

        async def cleanup_run(input: CleanupRunInput) -> None:
            async with _caller_errors_final():
                await self.cleanup_run(input)

        return [
            activity.defn(name=ACTIVITY_NAMES[fn.__name__])(fn)
            for fn in (open_run, end_run, suspend_run, cleanup_run)
        ]

    async def _in_session(
        self,
        invocation: InvocationData,
        body: Callable[[AgentSession, Invocation], Awaitable[T]],
        *,
        heartbeat: bool | None = None,
    ) -> T:
        """Run ``body`` on a connected session over a fresh channel; close both afterwards."""
        opts = self.options
        inv = Invocation.from_json(invocation)
        channel = opts.create_channel(inv.session_name)
        if inspect.isawaitable(channel):
            channel = await channel
        try:
            # Detached afterwards, never ended: a run left open stays open for the next activity.
            async with with_agent_session(
                channel, codec=opts.codec, history_page_size=opts.history_page_size, **dict(opts.session_options)
            ) as session, heartbeating(opts.heartbeat if heartbeat is None else heartbeat):
                return await body(session, inv)
        finally:
            try:
                await channel.close()
            except Exception:
                logger.debug("closing the activity's channel failed", exc_info=True)

    async def open_run(self, input: OpenRunInput) -> RunIdentity:
        """``openRun``: create the run pinned to ``invocationId``, locate its trigger, publish
        ``ai-run-start`` (or ``ai-run-resume`` for a continuation); returns ``{runId, invocationId}``.

        The run id is the invocation id, which Temporal holds constant across retries: a retry
        re-enters the same run (its second ``ai-run-start`` folds onto the existing run) instead of
        opening a parallel one. A continuation's run id comes from its trigger instead.
        """
        invocation_id = input["invocationId"]
        if not isinstance(invocation_id, str) or not invocation_id:
            raise InvalidArgumentError("unable to open run; invocationId must be a non-empty string")

        async def body(session: AgentSession, inv: Invocation) -> RunIdentity:
            run = await session.create_run(inv, run_id=invocation_id, invocation_id=invocation_id)
            run.claimant = invocation_id  # the workflow's leases, the same in every retry of it
            # The trigger was published before this process attached: page history until it
            # surfaces, no further. start() then publishes nothing if it cannot be found.
            await page_history_for_trigger(
                session,
                inv.input_event_id,
                max_pages=self.options.max_history_pages,
                on_page=heartbeat_now if self.options.heartbeat else None,
                located=lambda: run.located,
            )
            await run.start(timeout=TRIGGER_WAIT)
            return {"runId": run.run_id, "invocationId": run.invocation_id}

        return await self._in_session(input["invocation"], body)

    async def end_run(self, input: EndRunInput) -> None:
        """``endRun``: adopt the run and publish ``ai-run-end`` with ``reason`` (and error message)."""
        reason = input["reason"]
        if reason not in ("complete", "cancelled", "error"):
            raise InvalidArgumentError(
                f"unable to end run; reason must be complete, cancelled or error, got {reason!r}"
            )

        async def body(session: AgentSession, inv: Invocation) -> None:
            run = await adopt_and_load(session, inv, input["ids"])
            if reason == "error":
                message = input.get("errorMessage") or "run failed"
                await run.end("error", AITransportError(message, ErrorCode.STREAM_ERROR, 500))
            else:
                await run.end(reason)

        await self._in_session(input["invocation"], body)

    async def suspend_run(self, input: SuspendRunInput) -> None:
        """``suspendRun``: adopt the run and publish ``ai-run-suspend`` (fails while a step is open)."""

        async def body(session: AgentSession, inv: Invocation) -> None:
            run = await adopt_and_load(session, inv, input["ids"])
            await run.suspend()

        await self._in_session(input["invocation"], body)

    async def cleanup_run(self, input: CleanupRunInput) -> None:
        """``cleanupRun``: end the run ``error`` so a waiting client unsticks — status-gated: does
        nothing when the run already finished or is parked suspended (``load()`` refuses it)."""
        message = input.get("errorMessage") or "workflow failed"

        async def body(session: AgentSession, inv: Invocation) -> None:
            try:
                try:
                    run = await adopt_and_load(session, inv, input["ids"])
                except Exception as exc:
                    logger.debug("cleanupRun: nothing to clean up (%s)", exc)
                    return
                if run.status == "suspended" or run.status in TERMINAL_STATUSES:
                    return
                await run.end("error", AITransportError(message, ErrorCode.STREAM_ERROR, 500))
            except Exception:
                # The terminal path: ending whatever is still open is the intent.
                try:
                    await session.end()
                except Exception:
                    logger.debug("cleanupRun: session end failed", exc_info=True)
                raise

        await self._in_session(input["invocation"], body)


def create_framing_activities(
    create_channel: ChannelFactory,
    *,
    codec: Any = None,
    heartbeat: bool = False,
    max_history_pages: int = DEFAULT_MAX_HISTORY_PAGES,
    history_page_size: int = DEFAULT_HISTORY_PAGE_SIZE,
    session_options: Mapping[str, Any] | None = None,
) -> FramingActivities:
    """The framing activities bound to a channel factory (``createFramingActivities`` of 0.8.0).

    Register ``create_framing_activities(...).all`` on a worker, or use
    :class:`~ai_transport.temporal.plugin.AblyTransportPlugin`, which does it for you.
    """
    return FramingActivities(
        FramingOptions(
            create_channel,
            codec=codec,
            heartbeat=heartbeat,
            max_history_pages=max_history_pages,
            history_page_size=history_page_size,
            session_options=dict(session_options or {}),
        )
    )
