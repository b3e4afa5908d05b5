"""The REST side's requests and replies as its handlers see them: error bodies, formats, paging.

aiohttp parses and writes HTTP (:mod:`.serving`); a handler gets an :class:`HttpRequest` (method,
raw target, case-insensitive headers, body) and returns an :class:`HttpResponse`.
"""

from __future__ import annotations

import urllib.parse
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .protocol import (
    EmulatorError,
    encode_json,
    encode_msgpack,
)


@dataclass
class HttpRequest:
    """A parsed HTTP request (``headers``: case-insensitive, as aiohttp gives them)."""

    method: str
    target: str
    headers: Mapping[str, str]
    body: bytes = b""

    @property
    def path(self) -> str:
        """The request target's path, without the query string."""
        return urllib.parse.urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        """The request target's query parameters (blank values kept)."""
        return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.target).query, keep_blank_values=True))


@dataclass
class HttpResponse:
    """A response to write."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


MSGPACK = "application/x-msgpack"


def _wants_msgpack(req: HttpRequest) -> bool:
    accept = req.headers.get("accept", "")
    first = accept.split(",")[0].strip().lower()
    return first.startswith(MSGPACK)


def _encode_body(value: Any, msgpack_out: bool) -> tuple[bytes, str]:
    if msgpack_out:
        return encode_msgpack(value), MSGPACK
    return encode_json(value), "application/json"


def _error_response(err: EmulatorError) -> HttpResponse:
    body = encode_json({"error": err.to_dict()})
    return HttpResponse(
        err.status_code,
        body,
        "application/json",
        {"X-Ably-Errorcode": str(err.code), "X-Ably-Errormessage": urllib.parse.quote(err.message)},
    )


def _int_param(query: dict[str, str], name: str) -> int | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise EmulatorError(f"{name} must be an integer, got {value!r}", 40003, 400) from None


def _page_params(query: dict[str, str]) -> tuple[int, str]:
    limit = _int_param(query, "limit")
    limit = 100 if limit is None else limit
    if not 1 <= limit <= 1000:
        raise EmulatorError("limit must be between 1 and 1000", 40003, 400)
    direction = query.get("direction", "backwards") or "backwards"
    if direction not in ("backwards", "forwards"):
        raise EmulatorError("direction must be 'backwards' or 'forwards'", 40003, 400)
    return limit, direction


def _links(query: dict[str, str], base: str, next_cursor: str | None) -> str:
    first_q = {k: v for k, v in query.items() if k != "cursor"}
    links = [f'<./{base}?{urllib.parse.urlencode(first_q)}>; rel="first"']
    if next_cursor is not None:
        next_q = dict(first_q, cursor=next_cursor)
        links.append(f'<./{base}?{urllib.parse.urlencode(next_q)}>; rel="next"')
    return ", ".join(links)


def page_sorted(
    items: Sequence[dict[str, Any]], key_at: Callable[[int], str], query: dict[str, str], base: str
) -> tuple[list[dict[str, Any]], str]:
    """:func:`_page` over a lazy sequence whose keys (``key_at(i)``) ascend: only the page is built."""
    limit, direction = _page_params(query)
    cursor = query.get("cursor")
    lo, hi = 0, len(items)
    if cursor:
        if direction == "forwards":
            lo = bisect_right(range(hi), cursor, key=key_at)
        else:
            hi = bisect_left(range(hi), cursor, key=key_at)
    span = range(lo, hi) if direction == "forwards" else range(hi - 1, lo - 1, -1)
    page = [items[i] for i in span[:limit]]
    return page, _links(query, base, key_at(span[limit - 1]) if len(span) > limit else None)


def _page(
    items: list[dict[str, Any]], query: dict[str, str], key: str, base: str
) -> tuple[list[dict[str, Any]], str]:
    """Page ``items`` (oldest first, ordered by ``item[key]``) by ``limit``/``direction``/``cursor``.

    Returns the page and a ``Link`` header value (``first`` always, ``next`` while more remain).
    """
    limit, direction = _page_params(query)
    cursor = query.get("cursor")

    def sort_key(item: dict[str, Any]) -> str:
        value = item.get(key)
        if isinstance(value, dict):
            value = value.get("serial")
        return str(value or "")

    ordered = items if direction == "forwards" else list(reversed(items))
    if cursor:
        if direction == "forwards":
            ordered = [m for m in ordered if sort_key(m) > cursor]
        else:
            ordered = [m for m in ordered if sort_key(m) < cursor]
    page = ordered[:limit]
    return page, _links(query, base, sort_key(page[-1]) if len(ordered) > limit else None)


