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
  trigger is folded, at most ``max_pages`` pages, then wait ``trigger_wait`` seconds live.
* :func:`with_agent_session` (``withAgentSession``): ``async with with_agent_session(channel) as
  session:`` connects, runs the body, then *detaches* (never ends): a run the body left open stays
  open on the wire for the next attempt to adopt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import AITransportError, ErrorCode, InvalidArgumentError
from .recovery import close_dangling_streams
from .run import TERMINAL_STATUSES

if TYPE_CHECKING:
    from .agent import AgentSession
    from .agent_run import AgentRun

__all__ = ["load_run", "page_until_located", "with_agent_session"]

logger = logging.getLogger("ai_transport.sessions.durable")

_POLL = 0.02


async def _wait_live(ready: Any, run: AgentRun, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not ready() and not run.abort_signal.is_set() and loop.time() < deadline:
        await asyncio.sleep(min(_POLL, max(0.0, deadline - loop.time())))


async def load_run(run: AgentRun, timeout: float = 30.0) -> None:
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
        await _wait_live(ready, run, max(0.0, deadline - loop.time()))
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


async def _take_over(run: AgentRun, timeout: float) -> None:
    """Claim ``run:<run-id>`` and every key of the run a worker still holds (not released): the
    adopter waits for a live holder's lease to lapse (a takeover) and fails with 40003 when the
    holder is alive (it renews: the run is not abandoned)."""
    from .claims import run_key

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


async def page_until_located(
    run: AgentRun,
    input_event_id: str,
    max_pages: int = 20,
    page_size: int = 100,
    trigger_wait: float = 5.0,
) -> None:
    """Page ``run.view`` history until the run's trigger is folded (``pageUntilLocated`` of 0.8.0).

    At most ``max_pages`` pages of ``page_size`` messages; when history is exhausted first, waits
    ``trigger_wait`` seconds for the trigger to arrive live. Raises 104010 (504) when it is not
    located, 40033 when the run was cancelled. Opening a run then costs about one history page
    whatever the conversation's length (the trigger is the newest thing in history).
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
    await hydrator.fold_until(
        lambda: run.located or run.abort_signal.is_set() or hydrator.pages_folded - start >= max_pages
    )
    pages = hydrator.pages_folded - start
    if not run.located:
        await _wait_live(lambda: run.located, run, float(trigger_wait))
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
    from .agent import AgentSession

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
