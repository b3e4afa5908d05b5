"""What the local Responses server answers: recorded requests, replies and ready-made responders.

A responder (any callable ``RecordedRequest -> reply``, sync or async) returns a
:class:`StreamReply` (SSE frames, optionally cut short), an :class:`ErrorReply` (an HTTP error
with a body) or a list of event dicts / scripted outputs. :func:`replay_chunks`,
:func:`replay_error`, :func:`scripted` and :func:`sequence` build the common ones.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from .scripted import _SCRIPTED_TYPES, build_response_events
from .sse import encode_event

__all__ = [
    "TERMINAL_TYPES",
    "BadRequest",
    "ErrorReply",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ResponderResult",
    "StreamReply",
    "frame_line",
    "replay_chunks",
    "replay_error",
    "scripted",
    "sequence",
    "split_responses",
]

TERMINAL_TYPES = ("response.completed", "response.incomplete", "response.failed")


# -- requests and replies ----------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One request the server received: method, path (with query), headers (lower-case names), body,
    and ``connection``: the number of the TCP connection it came on (1, 2, … in accept order)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    connection: int = 0

    def json(self) -> Any:
        """The body parsed as JSON (``None`` if empty or not JSON, or nested too deeply to parse)."""
        try:
            return json.loads(self.body) if self.body else None
        except (ValueError, RecursionError):
            return None


class BadRequest(ValueError):
    """What a responder raises for a request it cannot answer (a body that is not a JSON object, a
    field of the wrong type): the local server replies ``400 invalid_request_error`` with this
    message and ``param`` (the field, e.g. ``input[2].call_id``), as the API does, not a 500."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def frame_line(line: bytes | str) -> bytes:
    """The real-wire frame of one recorded event line: ``event: <type>\\ndata: <line>\\n\\n``, with
    ``line`` kept byte for byte (``<type>`` is the ``type`` of the parsed line)."""
    raw = line.encode("utf-8") if isinstance(line, str) else line
    kind = json.loads(raw).get("type", "message")
    return b"event: " + str(kind).encode("utf-8") + b"\ndata: " + raw + b"\n\n"


def _frame_event(event: dict[str, Any]) -> bytes:
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return encode_event(data, event=str(event.get("type", "message")))


@dataclass
class StreamReply:
    """A ``200 text/event-stream`` reply.

    Attributes:
        frames: the SSE frames, bytes each (sent one chunk per frame, unless ``chunk_size``).
        drop_after: close the connection abruptly after this many frames (no terminating chunk).
        chunk_size: re-split the body into transfer chunks of this many bytes (tests frame splitting).
        delay: seconds to wait before each frame.
        headers: extra response headers.
    """

    frames: list[bytes]
    drop_after: int | None = None
    chunk_size: int | None = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_events(
        cls, events: Iterable[dict[str, Any]], *, omit_terminal: bool = False, **kw: Any
    ) -> StreamReply:
        """Frames for event dicts (compact JSON); ``omit_terminal`` leaves out terminal events."""
        frames = [
            _frame_event(e) for e in events if not (omit_terminal and e.get("type") in TERMINAL_TYPES)
        ]
        return cls(frames, **kw)

    @classmethod
    def from_lines(cls, lines: Iterable[bytes | str], *, omit_terminal: bool = False, **kw: Any) -> StreamReply:
        """Frames for recorded JSON lines, byte for byte (see :func:`frame_line`)."""
        frames = []
        for line in lines:
            raw = line.encode("utf-8") if isinstance(line, str) else line
            if not raw.strip():
                continue
            if omit_terminal and json.loads(raw).get("type") in TERMINAL_TYPES:
                continue
            frames.append(frame_line(raw))
        return cls(frames, **kw)


@dataclass
class ErrorReply:
    """An HTTP error reply (default ``400 application/json``), body sent byte for byte."""

    status: int = 400
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_file(cls, path: str | Path, status: int = 400, **kw: Any) -> ErrorReply:
        """A recorded error body (e.g. ``errors/*.json``), unchanged."""
        return cls(status, Path(path).read_bytes(), **kw)

    @classmethod
    def from_error(
        cls,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        status: int = 400,
        **kw: Any,
    ) -> ErrorReply:
        """A body of the API's shape: ``{"error": {"message", "type", "param", "code"}}``."""
        body = {"error": {"message": message, "type": type, "param": param, "code": code}}
        return cls(status, (json.dumps(body, indent=2) + "\n").encode("utf-8"), **kw)


#: A reply of the server.
Reply = Union[StreamReply, ErrorReply]  # noqa: UP007 (a runtime alias; must work on 3.10)
#: What a responder may return: a reply, a list of event dicts, or a list of scripted outputs.
ResponderResult = Union[Reply, list[Any]]  # noqa: UP007
#: A responder: called with each request; sync or async.
Responder = Callable[[RecordedRequest], Union[ResponderResult, Awaitable[ResponderResult]]]  # noqa: UP007


# -- ready-made responders -----------------------------------------------------------------------------


def split_responses(lines: Sequence[bytes]) -> list[list[bytes]]:
    """Split recorded event lines into responses (each starts at a ``response.created`` line)."""
    responses: list[list[bytes]] = []
    for line in lines:
        if not line.strip():
            continue
        kind = json.loads(line).get("type")
        if kind == "response.created" or not responses:
            responses.append([])
        responses[-1].append(line)
    return responses


def _file_lines(path: str | Path) -> list[bytes]:
    return [line for line in Path(path).read_bytes().split(b"\n") if line.strip()]


class _Replay:
    def __init__(self, responses: list[list[bytes]], cycle: bool, kw: dict[str, Any]) -> None:
        self.responses = responses
        self.cycle = cycle
        self.kw = kw
        self.served = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        index = self.served
        self.served += 1
        if index >= len(self.responses):
            if not self.cycle:
                return ErrorReply.from_error(
                    f"local server: no recorded response left ({len(self.responses)} served)",
                    type="server_error",
                    status=500,
                )
            index %= len(self.responses)
        return StreamReply.from_lines(self.responses[index], **self.kw)


def replay_chunks(
    path: str | Path, *, whole: bool = False, cycle: bool = False, **kw: Any
) -> Callable[[RecordedRequest], Reply]:
    """Serve a recorded ``*.chunks.txt`` file, each line byte for byte as one frame.

    A file holding several responses serves the next one on each request (after the last: a 500, or
    from the start again with ``cycle``); ``whole=True`` serves the entire file on every request.
    ``kw`` goes to :meth:`StreamReply.from_lines` (``drop_after``, ``omit_terminal``, ``chunk_size``…).
    """
    lines = _file_lines(path)
    responses = [lines] if whole else split_responses(lines)
    return _Replay(responses, cycle or whole, kw)


def replay_error(path: str | Path, status: int = 400) -> Callable[[RecordedRequest], Reply]:
    """Answer every request with a recorded error body (``application/json``), byte for byte."""
    reply = ErrorReply.from_file(path, status)
    return lambda request: reply


def scripted(
    fn: Callable[[Any], Any], *, delay: float = 0.0, **build_kw: Any
) -> Callable[[RecordedRequest], Awaitable[ResponderResult]]:
    """A responder from a function of the request JSON (sync or async) returning a reply, event dicts
    or scripted outputs (built with :func:`build_response_events`, ``build_kw`` passed on).
    ``delay`` (seconds before each frame) makes a list result stream at a visible pace."""

    async def responder(request: RecordedRequest) -> ResponderResult:
        body = request.json()
        result = fn(body)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, list) and result and all(isinstance(o, _SCRIPTED_TYPES) for o in result):
            result = build_response_events(result, request=body if isinstance(body, dict) else None, **build_kw)
        if isinstance(result, list) and delay:
            return StreamReply.from_events(result, delay=delay)
        return typing.cast(ResponderResult, result)

    return responder


def sequence(*steps: Reply | Responder | list[Any]) -> Callable[[RecordedRequest], Awaitable[ResponderResult]]:
    """One step per request, in order (a reply, event list or responder); a 500 once they run out."""
    remaining = list(steps)

    async def responder(request: RecordedRequest) -> ResponderResult:
        if not remaining:
            return ErrorReply.from_error("local server: no scripted reply left", type="server_error", status=500)
        step = remaining.pop(0)
        if callable(step) and not isinstance(step, (StreamReply, ErrorReply)):
            result = step(request)
            if inspect.isawaitable(result):
                result = await result
            return result
        return step

    return responder
