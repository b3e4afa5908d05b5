"""Paging helpers over any :class:`~ai_transport.channels.channel.Channel`'s history."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

from ..errors import ErrorCode, InvalidArgumentError
from .channel import InboundMessage

__all__ = ["MAX_HISTORY_LIMIT", "check_history_args", "collect_history", "iter_history"]

#: The largest ``limit`` of one history request (as Ably).
MAX_HISTORY_LIMIT: Final = 1000


def check_history_args(limit: Any, direction: Any) -> None:
    """Raise :class:`~ai_transport.errors.InvalidArgumentError` (40003) unless ``limit`` is an
    integer in 1..:data:`MAX_HISTORY_LIMIT` and ``direction`` is ``"backwards"`` or ``"forwards"``
    (the argument checks of every channel's ``history``)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_HISTORY_LIMIT:
        raise InvalidArgumentError(
            f"unable to get history; limit must be an integer in 1..{MAX_HISTORY_LIMIT}, got {limit!r}",
            ErrorCode.INVALID_ARGUMENT,
        )
    if direction not in ("backwards", "forwards"):
        raise InvalidArgumentError(
            f"unable to get history; direction must be 'backwards' or 'forwards', got {direction!r}",
            ErrorCode.INVALID_ARGUMENT,
        )


async def iter_history(
    channel: Any,
    *,
    limit: int = 100,
    direction: str = "backwards",
    until_attach: bool = False,
    max_pages: int | None = None,
) -> AsyncIterator[InboundMessage]:
    """Every history item of ``channel``, following pages (``limit`` items per request).

    Items come in the page order (newest first for ``"backwards"``); ``max_pages`` bounds how many
    pages are read.
    """
    page = await channel.history(limit=limit, direction=direction, until_attach=until_attach)
    pages = 1
    while True:
        for item in page.items:
            yield item
        if not page.has_next() or (max_pages is not None and pages >= max_pages):
            return
        nxt = await page.next()
        if nxt is None:
            return
        page = nxt
        pages += 1


async def collect_history(
    channel: Any,
    *,
    limit: int = 100,
    direction: str = "backwards",
    until_attach: bool = False,
    max_pages: int | None = None,
    oldest_first: bool = False,
) -> list[InboundMessage]:
    """All of :func:`iter_history` as a list; ``oldest_first`` reverses a backwards read."""
    items = [
        m
        async for m in iter_history(
            channel, limit=limit, direction=direction, until_attach=until_attach, max_pages=max_pages
        )
    ]
    if oldest_first and direction == "backwards":
        items.reverse()
    return items
