"""Paging helpers over any :class:`~ai_transport.transport.channel.Channel`'s history."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from .channel import InboundMessage

__all__ = ["collect_history", "iter_history"]


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
