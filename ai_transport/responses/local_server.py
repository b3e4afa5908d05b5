"""A small loopback HTTP server that speaks the Responses streaming wire (an offline "model").

``POST …/responses`` is answered by a pluggable *responder*; every request is recorded in
:attr:`LocalResponsesServer.requests`. Streams are sent like the real API: HTTP/1.1 200,
``content-type: text/event-stream; charset=utf-8``, chunked transfer encoding, one
``event: <type>`` / ``data: <json>`` frame per event, no ``[DONE]``.

Responders (any callable ``RecordedRequest -> reply``, sync or async) may return:

* :class:`StreamReply` — SSE frames; ``drop_after=n`` cuts the connection after ``n`` frames
  (no terminating chunk: the client sees a broken stream);
* :class:`ErrorReply` — an HTTP error with a body (``from_file`` serves a recorded body byte for byte);
  a responder may also raise :class:`BadRequest` for a body it cannot answer (a 400 naming the field);
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
import inspect
import logging
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .._serving import listen
from .replies import (
    BadRequest,
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
    "BadRequest",
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

#: The largest request body accepted (413 past it).
MAX_BODY = 64 * 1024 * 1024


# -- the server --------------------------------------------------------------------------------------


class LocalResponsesServer:
    """Loopback HTTP/1.1 server for ``POST …/responses`` (aiohttp: keep-alive, chunked streaming).

    Use as ``async with LocalResponsesServer(responder) as server:``; ``server.base_url`` is
    ``http://127.0.0.1:<port>/v1``. :attr:`requests` lists every request received; :attr:`responder`
    may be replaced at any time.
    """

    def __init__(self, responder: Responder, host: str = "127.0.0.1", port: int = 0) -> None:
        self.responder = responder
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self._runner: web.AppRunner | None = None
        self._connections: weakref.WeakKeyDictionary[asyncio.BaseTransport, int] = weakref.WeakKeyDictionary()
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
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner, self.port = await listen(app, self.host, self.port, shutdown_timeout=1.0)
        return self

    async def close(self) -> None:
        """Stop serving and close open connections (a stream still being written is cut)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _connection_of(self, request: web.BaseRequest) -> int:
        transport = request.transport
        if transport is None:
            return 0
        number = self._connections.get(transport)
        if number is None:
            self._accepted += 1
            number = self._connections[transport] = self._accepted
        return number

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {name.lower(): value for name, value in request.headers.items()}
        recorded = RecordedRequest(request.method, request.raw_path, headers, body)
        recorded.connection = self._connection_of(request)
        self.requests.append(recorded)
        if request.method != "POST" or not request.path.endswith("/responses"):
            reply: Reply = ErrorReply.from_error(
                f"local server: no route for {request.method} {request.raw_path}", status=404
            )
        else:
            try:
                result = self.responder(recorded)
                if inspect.isawaitable(result):
                    result = await result
                reply = _as_reply(result)
            except BadRequest as exc:  # the client's mistake: the API's 400
                reply = ErrorReply.from_error(exc.message, param=exc.param)
            except Exception as exc:  # a responder bug becomes a 500 the client can see
                logger.exception("local server responder failed")
                reply = ErrorReply.from_error(f"local server responder failed: {exc}", type="server_error",
                                              status=500)
        if isinstance(reply, ErrorReply):
            return web.Response(
                status=reply.status, body=reply.body, headers={"Content-Type": reply.content_type, **reply.headers}
            )
        return await self._stream(request, reply)

    async def _stream(self, request: web.Request, reply: StreamReply) -> web.StreamResponse:
        """SSE frames as chunks, each written (and drained: the client's pace) before the next."""
        resp = web.StreamResponse(
            status=200,
            headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", **reply.headers},
        )
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        frames = reply.frames
        limit = len(frames) if reply.drop_after is None else min(reply.drop_after, len(frames))
        pieces: list[bytes] = list(frames[:limit])
        if reply.chunk_size:
            data = b"".join(pieces)
            pieces = [data[i : i + reply.chunk_size] for i in range(0, len(data), reply.chunk_size)]
        try:
            for piece in pieces:
                if reply.delay:
                    await asyncio.sleep(reply.delay)
                await resp.write(piece)
            if reply.drop_after is not None:
                if request.transport is not None:
                    request.transport.abort()  # no terminating chunk: a broken stream
                return resp
            await resp.write_eof()
        except ConnectionError as exc:
            logger.debug("local server stream ended: %r", exc)
        return resp


def _as_reply(result: Any) -> Reply:
    if isinstance(result, (StreamReply, ErrorReply)):
        return result
    if isinstance(result, list):
        if result and all(isinstance(o, _SCRIPTED_TYPES) for o in result):
            return StreamReply.from_events(build_response_events(result))
        return StreamReply.from_events(result)
    raise TypeError(f"responder returned {type(result).__name__}; expected a reply or a list of events")
