"""Optional activity heartbeats (``heartbeat.ts`` of 0.8.0).

Temporal cannot tell a slow activity from a hung one unless it heartbeats; with a
``heartbeat_timeout`` it also notices a worker that died mid-activity within that timeout and
retries the activity elsewhere, instead of waiting out ``start_to_close_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from temporalio import activity

__all__ = ["HEARTBEAT_INTERVAL", "heartbeat_now", "heartbeating"]

logger = logging.getLogger("ai_transport.temporal")

#: Seconds between heartbeats of :func:`heartbeating` (0.8.0: 5 s).
HEARTBEAT_INTERVAL = 5.0


def heartbeat_now() -> None:
    """One heartbeat; a no-op outside an activity (best-effort, never raises)."""
    try:
        activity.heartbeat()
    except Exception:
        logger.debug("heartbeat outside an activity ignored", exc_info=True)


@contextlib.asynccontextmanager
async def heartbeating(enabled: bool = True, interval: float = HEARTBEAT_INTERVAL) -> AsyncIterator[None]:
    """Heartbeat every ``interval`` seconds while the ``async with`` body runs (nothing if disabled).

    Use it around a long model stream in your inference activity together with a
    ``heartbeat_timeout`` a few intervals long, so a killed worker's attempt is retried quickly.
    """
    if not enabled:
        yield
        return

    async def pump() -> None:
        while True:
            heartbeat_now()
            await asyncio.sleep(interval)

    task = asyncio.ensure_future(pump())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
