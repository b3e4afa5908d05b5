"""Durable turns for stateless workers: adopting a run, bounded trigger paging, a session scaffold.

* :meth:`AgentSession.adopt_run(invocation, run_id, invocation_id) <ai_transport.sessions.agent.AgentSession.adopt_run>`
  + ``await run.load(timeout=30.0)`` (``adoptRun`` + ``load`` of 0.8.0): a worker continues a run
  another process opened, *without* publishing an opening event. ``load`` pages history (and then
  waits live) until the run's ``ai-run-start`` and its trigger are folded, rejects a suspended run
  (resume it with ``create_run(...).start()``) or an ended one (read-only) with 40003, and 104010
  (504) when the run-start is not seen within ``timeout`` (40033 if the run was cancelled). The
  identity given is authoritative: the trigger's ``run-id`` header never re-keys an adopted run.
  Before returning it takes the run's leases over (``run:<run-id>`` and every key a worker still
  holds: it waits for a live-looking holder's lease to lapse, and refuses with 40003 a run whose
  holder keeps renewing, see :mod:`.claims`), then closes every stream the previous worker left
  open (see :mod:`.recovery`).
  Then ``pipe`` / ``send`` / ``create_step`` / ``suspend`` / ``end`` work as on a started run. Unlike
  0.8.0, once history is exhausted ``load`` keeps waiting live for the rest of ``timeout``.
* :func:`page_until_located` (``pageUntilLocated``): page history until a freshly created run's
  trigger is located, then wait ``trigger_wait`` seconds live. ``max_pages`` bounds only the
  search for an ``event-id`` not seen at all: once a wire carrying it is folded, paging goes on
  until the trigger is settled (an unbound invocation reads history to its start, see
  :mod:`.invocation`).
* :func:`with_agent_session` (``withAgentSession``): ``async with with_agent_session(channel) as
  session:`` connects, runs the body, then *detaches* (never ends): a run the body left open stays
  open on the wire for the next attempt to adopt.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import AITransportError, ErrorCode, InvalidArgumentError
from .agent import AgentSession
from .run_durable import wait_live

if TYPE_CHECKING:
    from .agent_run import AgentRun

__all__ = ["page_until_located", "with_agent_session"]

logger = logging.getLogger("ai_transport.sessions.durable")


async def page_until_located(
    run: AgentRun,
    input_event_id: str,
    max_pages: int = 20,
    page_size: int = 100,
    trigger_wait: float = 5.0,
) -> None:
    """Page ``run.view`` history until the run's trigger is located (``pageUntilLocated`` of 0.8.0).

    Pages of ``page_size`` messages, newest first. ``max_pages`` bounds the search for an
    ``event-id`` no folded wire carries yet; once one does, paging goes on while the trigger is
    unsettled (``run.located``), because a wire further back may own the id (its first publisher
    in serial order, :mod:`.invocation`): a long channel whose trigger is present never fails
    here. When history is exhausted first, waits ``trigger_wait`` seconds for the trigger to
    arrive live. Raises 104010 (504) when it is not located, 40033 when the run was cancelled.

    Cost: a bound invocation (``inputClientId``, or ``inputSerial``) stops at the trigger, about
    one page when it is the newest thing in history (0.8.0's figure); an unbound one (what a
    0.8.0 client POSTs) that finds the id reads history to its start, one page per ``page_size``
    messages on the channel.
    """
    for label, value, low in (("max_pages", max_pages, 0), ("page_size", page_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidArgumentError(f"unable to page history; {label} must be an integer >= {low}, got {value!r}")
    if isinstance(trigger_wait, bool) or not isinstance(trigger_wait, (int, float)) or trigger_wait < 0:
        raise InvalidArgumentError(
            f"unable to page history; trigger_wait must be a number >= 0, got {trigger_wait!r}"
        )
    # Page the session's history itself: the run's view shows nothing until the trigger is found,
    # so paging the view by messages would read the whole history in one go.
    hydrator = run.session.hydrator
    hydrator.prefer_page_size(page_size)
    start = hydrator.pages_folded
    tree = run.session.tree

    def settled() -> bool:
        if run.located or run.abort_signal.is_set():
            return True
        # the cap ends only a search that never saw the id; a seen one is read on until settled
        return hydrator.pages_folded - start >= max_pages and tree.find_message_by_event_id(input_event_id) is None

    await hydrator.fold_until(settled)
    pages = hydrator.pages_folded - start
    if not run.located:
        await wait_live(lambda: run.located, run, float(trigger_wait))
    if run.abort_signal.is_set():
        raise AITransportError(
            f"unable to open run; run {run.run_id} was cancelled", ErrorCode.OPERATION_CANCELLED, 400
        )
    if not run.located:
        raise AITransportError(
            f"unable to open run; trigger event {input_event_id} not located within {pages} history pages",
            ErrorCode.INPUT_EVENT_NOT_FOUND,
            504,
        )


@contextlib.asynccontextmanager
async def with_agent_session(channel_or_options: Any, **options: Any) -> AsyncIterator[AgentSession]:
    """A connected :class:`~ai_transport.sessions.agent.AgentSession` for one unit of durable work.

    ``channel_or_options``: a channel, or a mapping with ``channel`` and any other
    :class:`AgentSession` keyword arguments (``options`` add more). On exit — success or failure —
    the session is *detached*, never ended: nothing is published, so a run the body left open stays
    open for a later attempt to adopt (call ``session.end()`` in the body when ending is the intent).
    A failure to detach is logged, never raised. The caller owns the channel (close it yourself).
    """
    if isinstance(channel_or_options, Mapping):
        opts = dict(channel_or_options)
        if "channel" not in opts:
            raise InvalidArgumentError("unable to open agent session; options must include 'channel'")
        channel = opts.pop("channel")
        opts.update(options)
    else:
        channel, opts = channel_or_options, dict(options)
    if channel is None:
        raise InvalidArgumentError("unable to open agent session; channel must not be None")
    session = AgentSession(channel, **opts)
    try:
        await session.connect()
        yield session
    finally:
        try:
            await session.detach()
        except Exception:
            logger.debug("with_agent_session: detach failed", exc_info=True)
