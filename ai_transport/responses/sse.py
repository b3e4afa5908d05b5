"""Server-sent events: a sans-I/O decoder and a frame encoder.

:class:`SSEDecoder` implements the event-stream interpretation of the WHATWG HTML standard
("Server-sent events", §9.2.6): bytes go in through :meth:`SSEDecoder.feed` in chunks of any size
(split anywhere, even inside a UTF-8 sequence or between ``\\r`` and ``\\n``), complete events come
out. Lines end with ``\\r\\n``, ``\\n`` or ``\\r``; a leading BOM is skipped; lines starting with
``:`` are comments; ``data`` lines accumulate (joined by ``\\n``); ``event`` names the event
(``"message"`` when absent); ``id`` sets the last event id (kept across events, ignored when it
contains NUL); ``retry`` takes ASCII digits only; unknown fields are ignored; a blank line
dispatches, and an event with no ``data`` is not dispatched. As the standard says, an event still
incomplete when the stream ends (no blank line after it) is discarded by :meth:`SSEDecoder.close`.

The decoder knows nothing about OpenAI: the Responses client turns each event's ``data`` into a
dict. :func:`encode_event` writes one frame (used by the local Responses server).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = ["SSEDecoder", "ServerSentEvent", "encode_event"]


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched server-sent event.

    Attributes:
        data: the data buffer (``data`` lines joined by ``\\n``, no trailing newline).
        event: the event type (``"message"`` when the frame had no non-empty ``event`` field).
        id: the last event id in force when the event was dispatched (``""`` if none).
        retry: the reconnection time (ms) from this frame's ``retry`` field, if it had a valid one.
    """

    data: str
    event: str = "message"
    id: str = ""
    retry: int | None = None


class SSEDecoder:
    """Incremental event-stream decoder (pure: no I/O, no clock).

    >>> d = SSEDecoder()
    >>> d.feed(b"event: ping\\r\\ndata: a\\r")
    []
    >>> d.feed(b"\\ndata: b\\n\\n")
    [ServerSentEvent(data='a\\nb', event='ping', id='', retry=None)]
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial: list[str] = []  # pieces of the current, unterminated line
        self._skip_lf = False  # the previous chunk ended with "\r": a leading "\n" belongs to it
        self._bom_checked = False
        self._data: list[str] = []
        self._has_data = False
        self._event = ""
        self._last_id = ""
        self._retry: int | None = None
        self._closed = False

    @property
    def last_event_id(self) -> str:
        """The last event id buffer (what a reconnecting client would send as ``Last-Event-ID``)."""
        return self._last_id

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Consume the next chunk of bytes; return the events it completed (possibly none)."""
        if self._closed:
            raise RuntimeError("SSEDecoder.feed() after close()")
        text = self._decoder.decode(chunk)
        return self._consume(text)

    def close(self) -> list[ServerSentEvent]:
        """Signal end of stream: flush the decoder; an unterminated event is discarded (WHATWG)."""
        if self._closed:
            return []
        events = self._consume(self._decoder.decode(b"", final=True))
        # A final line without a terminator is still a line; process it, but never dispatch the
        # pending event (it was not followed by a blank line).
        if self._partial:
            self._line("".join(self._partial))
            self._partial = []
        self._closed = True
        self._reset_event()
        return events

    # -- internals -------------------------------------------------------------------------------

    def _consume(self, text: str) -> list[ServerSentEvent]:
        if not text:
            return []
        if not self._bom_checked:
            self._bom_checked = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text[:1] == "\n":
                text = text[1:]
        events: list[ServerSentEvent] = []
        start = 0
        n = len(text)
        find = text.find
        # Only the new text is scanned (a long line split over many chunks stays linear).
        cr = find("\r", start)
        lf = find("\n", start)
        while cr != -1 or lf != -1:
            if cr == -1 or (lf != -1 and lf < cr):
                end, nxt = lf, lf + 1
            else:
                end = cr
                if cr + 1 < n:
                    nxt = cr + 2 if text[cr + 1] == "\n" else cr + 1
                else:
                    nxt = cr + 1
                    self._skip_lf = True  # "\r" at the very end: a following "\n" is part of it
            if self._partial:
                self._partial.append(text[start:end])
                line = "".join(self._partial)
                self._partial = []
            else:
                line = text[start:end]
            event = self._line(line)
            if event is not None:
                events.append(event)
            start = nxt
            if cr != -1 and cr < start:
                cr = find("\r", start)
            if lf != -1 and lf < start:
                lf = find("\n", start)
        if start < n:
            self._partial.append(text[start:])
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None
        colon = line.find(":")
        if colon == -1:
            name, value = line, ""
        else:
            name = line[:colon]
            value = line[colon + 1 :]
            value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._has_data:
            self._reset_event()
            return None
        event = ServerSentEvent(
            data="\n".join(self._data),
            event=self._event or "message",
            id=self._last_id,
            retry=self._retry,
        )
        self._reset_event()
        return event

    def _reset_event(self) -> None:
        self._data = []
        self._has_data = False
        self._event = ""
        self._retry = None


def encode_event(data: str, event: str | None = None, id: str | None = None, newline: str = "\n") -> bytes:
    """One SSE frame as UTF-8 bytes: optional ``event:``/``id:`` lines, one ``data:`` line per line of
    ``data`` (split on ``\\n``), then a blank line. ``newline`` may be ``"\\n"``, ``"\\r\\n"`` or ``"\\r"``.

    ``event`` and ``id`` must not contain line breaks; ``data`` must not contain ``\\r``.
    """
    if newline not in ("\n", "\r\n", "\r"):
        raise ValueError(f"newline: must be '\\n', '\\r\\n' or '\\r', got {newline!r}")
    if "\r" in data:
        raise ValueError("data: must not contain '\\r' (it would split the line)")
    parts: list[str] = []
    if event is not None:
        if "\r" in event or "\n" in event:
            raise ValueError("event: must not contain a line break")
        parts.append(f"event: {event}{newline}")
    if id is not None:
        if "\r" in id or "\n" in id:
            raise ValueError("id: must not contain a line break")
        parts.append(f"id: {id}{newline}")
    for line in data.split("\n"):
        parts.append(f"data: {line}{newline}")
    parts.append(newline)
    return "".join(parts).encode("utf-8")
