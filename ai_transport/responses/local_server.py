"""A small loopback HTTP server that speaks the Responses streaming wire (an offline "model").

``POST …/responses`` is answered by a pluggable *responder*; every request is recorded in
:attr:`LocalResponsesServer.requests`. Streams are sent like the real API: HTTP/1.1 200,
``content-type: text/event-stream; charset=utf-8``, chunked transfer encoding, one
``event: <type>`` / ``data: <json>`` frame per event, no ``[DONE]``.

Responders (any callable ``RecordedRequest -> reply``, sync or async) may return:

* :class:`StreamReply` — SSE frames; ``drop_after=n`` cuts the connection after ``n`` frames
  (no terminating chunk: the client sees a broken stream);
* :class:`ErrorReply` — an HTTP error with a body (``from_file`` serves a recorded body byte for byte);
* a list of event dicts (streamed as given) or of scripted outputs (:class:`ScriptedText`,
  :class:`ScriptedReasoning`, :class:`ScriptedFunctionCall`, built with :func:`build_response_events`).

Ready-made responders: :func:`replay_chunks` (a recorded ``*.chunks.txt`` file, one response per
request, lines byte for byte), :func:`replay_error` (a recorded error body), :func:`scripted` (a
function of the request JSON) and :func:`sequence` (one reply per request, in order).

Here: the HTTP serving. Replies and responders live in :mod:`.replies`, scripted outputs and
:func:`build_response_events` in :mod:`.scripted`; both are re-exported.

>>> async with LocalResponsesServer(scripted(lambda req: [ScriptedText("Hello")])) as server:  # doctest: +SKIP
...     client = ResponsesClient(base_url=server.base_url, model="local")
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from http import HTTPStatus
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .replies import (
    ErrorReply,
    RecordedRequest,
    Reply,
    Responder,
    StreamReply,
    frame_line,
    replay_chunks,
    replay_error,
    scripted,
    sequence,
    split_responses,
)
from .scripted import (
    _SCRIPTED_TYPES,
    ScriptedFunctionCall,
    ScriptedOutput,
    ScriptedReasoning,
    ScriptedText,
    build_response_events,
)

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "ErrorReply",
    "LocalResponsesServer",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedFunctionCall",
    "ScriptedOutput",
    "ScriptedReasoning",
    "ScriptedText",
    "StreamReply",
    "build_response_events",
    "frame_line",
    "replay_chunks",
    "replay_error",
    "scripted",
    "sequence",
    "split_responses",
]

logger = logging.getLogger("ai_transport.responses.local_server")


# -- the server --------------------------------------------------------------------------------------


class LocalResponsesServer:
    """Loopback HTTP/1.1 server for ``POST …/responses`` (keep-alive, chunked streaming).

    Use as ``async with LocalResponsesServer(responder) as server:``; ``server.base_url`` is
    ``http://127.0.0.1:<port>/v1``. :attr:`requests` lists every request received; :attr:`responder`
    may be replaced at any time.
    """

    def __init__(self, responder: Responder, host: str = "127.0.0.1", port: int = 0) -> None:
        self.responder = responder
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._accepted = 0

    @property
    def base_url(self) -> str:
        """``http://host:port/v1`` (valid once started)."""
        return f"http://{self.host}:{self.port}/v1"

    def request_bodies(self) -> list[Any]:
        """The JSON bodies of the requests received so far."""
        return [r.json() for r in self.requests]

    async def start(self) -> Self:
        """Bind and start serving (port 0 picks a free port)."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        """Stop serving and close open connections."""
        if self._server is not None:
            self._server.close()
            for writer in list(self._connections):
                writer.close()
            for task in list(self._handlers):
                task.cancel()
            if self._handlers:
                await asyncio.gather(*self._handlers, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        self._accepted += 1
        connection = self._accepted
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                request.connection = connection
                self.requests.append(request)
                keep_alive = await self._respond(request, writer)
                if not keep_alive or request.headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            logger.debug("local server connection ended: %r", exc)
        except asyncio.CancelledError:
            pass  # server closing; end the handler quietly (asyncio logs cancelled handler tasks)
        finally:
            if task is not None:
                self._handlers.discard(task)
            self._connections.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _respond(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        if request.method != "POST" or not request.path.split("?", 1)[0].endswith("/responses"):
            reply: Reply = ErrorReply.from_error(
                f"local server: no route for {request.method} {request.path}", status=404
            )
        else:
            try:
                result = self.responder(request)
                if inspect.isawaitable(result):
                    result = await result
                reply = _as_reply(result)
            except Exception as exc:  # a responder bug becomes a 500 the client can see
                logger.exception("local server responder failed")
                reply = ErrorReply.from_error(f"local server responder failed: {exc}", type="server_error",
                                              status=500)
        if isinstance(reply, ErrorReply):
            head = _status_line(reply.status) + _headers(
                {"content-type": reply.content_type, "content-length": str(len(reply.body)), **reply.headers}
            )
            writer.write(head + reply.body)
            await writer.drain()
            return True
        head = _status_line(200) + _headers(
            {
                "content-type": "text/event-stream; charset=utf-8",
                "cache-control": "no-cache",
                "transfer-encoding": "chunked",
                **reply.headers,
            }
        )
        writer.write(head)
        await writer.drain()
        frames = reply.frames
        limit = len(frames) if reply.drop_after is None else min(reply.drop_after, len(frames))
        pieces: list[bytes] = list(frames[:limit])
        if reply.chunk_size:
            data = b"".join(pieces)
            pieces = [data[i : i + reply.chunk_size] for i in range(0, len(data), reply.chunk_size)]
        for piece in pieces:
            if reply.delay:
                await asyncio.sleep(reply.delay)
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        if reply.drop_after is not None:
            writer.transport.abort()  # no terminating chunk: a broken stream
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def _as_reply(result: Any) -> Reply:
    if isinstance(result, (StreamReply, ErrorReply)):
        return result
    if isinstance(result, list):
        if result and all(isinstance(o, _SCRIPTED_TYPES) for o in result):
            return StreamReply.from_events(build_response_events(result))
        return StreamReply.from_events(result)
    raise TypeError(f"responder returned {type(result).__name__}; expected a reply or a list of events")


def _status_line(status: int) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Status"
    return f"HTTP/1.1 {status} {phrase}\r\n".encode("ascii")


def _headers(headers: dict[str, str]) -> bytes:
    return "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1") + b"\r\n"


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    line = await reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").strip().split(" ")
    if len(parts) != 3:
        raise ValueError(f"bad request line: {line!r}")
    method, path, _version = parts
    headers: dict[str, str] = {}
    while True:
        raw = await reader.readline()
        if not raw:
            return None
        if raw in (b"\r\n", b"\n"):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int((await reader.readline()).split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            chunks.append(await reader.readexactly(size))
            await reader.readline()
        body = b"".join(chunks)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
    return RecordedRequest(method, path, headers, body)
