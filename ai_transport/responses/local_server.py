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

>>> async with LocalResponsesServer(scripted(lambda req: [ScriptedText("Hello")])) as server:  # doctest: +SKIP
...     client = ResponsesClient(base_url=server.base_url, model="local")
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import inspect
import json
import logging
import random
import re
import string
import time
import typing
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Union

from .sse import encode_event

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
        """The body parsed as JSON (``None`` if empty or not JSON)."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


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


# -- scripted outputs ----------------------------------------------------------------------------------


@dataclass
class ScriptedText:
    """An assistant message with one ``output_text`` part (``phase``: ``"commentary"`` /
    ``"final_answer"`` on newer models)."""

    text: str
    phase: str | None = None
    id: str | None = None


@dataclass
class ScriptedReasoning:
    """A reasoning item: summary parts (none → ``added`` then ``done`` with nothing between) and the
    ``encrypted_content`` of its ``done`` item (generated when ``None``; the ``added`` item carries a
    different blob, as on the real wire)."""

    summary: list[str] = field(default_factory=list)
    encrypted_content: str | None = None
    id: str | None = None


@dataclass
class ScriptedFunctionCall:
    """A ``function_call`` item; ``arguments`` as a JSON string or a value to encode."""

    name: str
    arguments: Any = field(default_factory=dict)
    call_id: str | None = None
    id: str | None = None


#: One scripted output item.
ScriptedOutput = Union[ScriptedText, ScriptedReasoning, ScriptedFunctionCall]  # noqa: UP007
_SCRIPTED_TYPES = (ScriptedText, ScriptedReasoning, ScriptedFunctionCall)
_TOKEN = re.compile(r"\s*[\w']+|\s*[^\w\s]+|\s+")


def _deltas(text: str, max_len: int = 12) -> list[str]:
    """Split text into token-like deltas (a word with its leading space, a punctuation run)."""
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        piece = match.group(0)
        while len(piece) > max_len:
            out.append(piece[:max_len])
            piece = piece[max_len:]
        if piece:
            out.append(piece)
    return out or ([text] if text else [])


def _blob(rng: random.Random, seed_text: str, size: int = 360) -> str:
    digest = hashlib.sha256(seed_text.encode("utf-8") + rng.randbytes(16)).digest()
    raw = b"\x80" + rng.randbytes(8) + digest * (size // 32 + 1)
    return "gAAAAAB" + base64.urlsafe_b64encode(raw[:size]).decode("ascii")


def _estimate_tokens(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return max(1, len(text) // 4)


def build_response_events(
    outputs: Sequence[ScriptedOutput],
    *,
    request: dict[str, Any] | None = None,
    model: str | None = None,
    status: str = "completed",
    error: dict[str, Any] | None = None,
    seed: int | None = None,
    created_at: int | None = None,
    obfuscation: bool = False,
) -> list[dict[str, Any]]:
    """A realistic Responses event sequence for scripted outputs, shaped like the recorded streams.

    ``response.created`` → ``response.in_progress`` → per output item (``output_index`` 0, 1, …):
    ``output_item.added`` → its content events (summary parts, text deltas, argument deltas) →
    ``output_item.done`` → the terminal event. ``sequence_number`` runs from 0; ids share one
    response-specific suffix (``resp_…``, ``rs_…``, ``msg_…``, ``fc_…``; ``call_…`` for call ids).
    The envelope echoes ``request`` (model, instructions, tools, reasoning, max_output_tokens…).

    ``status``: ``"completed"``, ``"incomplete"`` (``max_output_tokens``; the last message is left
    ``incomplete``) or ``"failed"`` (no output; ``error`` = ``{"code", "message"}`` is sent as a nested
    ``error`` event and as ``response.error``). ``seed`` makes ids and blobs reproducible.
    ``obfuscation`` adds random padding to delta events, as the real API does by default.
    """
    if status not in ("completed", "incomplete", "failed"):
        raise ValueError(f"status: must be 'completed', 'incomplete' or 'failed', got {status!r}")
    rng = random.Random(seed)
    req = request or {}
    suffix = rng.randbytes(24).hex()
    created = int(time.time()) if created_at is None else created_at
    reasoning_req: dict[str, Any] = req["reasoning"] if isinstance(req.get("reasoning"), dict) else {}
    tools = req.get("tools")
    envelope: dict[str, Any] = {
        "id": f"resp_{suffix}",
        "object": "response",
        "created_at": created,
        "status": "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": req.get("instructions"),
        "max_output_tokens": req.get("max_output_tokens"),
        "max_tool_calls": req.get("max_tool_calls"),
        "model": model or req.get("model") or "local-scripted-model",
        "output": [],
        "parallel_tool_calls": req.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "prompt_cache_key": req.get("prompt_cache_key"),
        "prompt_cache_retention": req.get("prompt_cache_retention"),
        "reasoning": {"effort": reasoning_req.get("effort"), "summary": reasoning_req.get("summary")},
        "safety_identifier": req.get("safety_identifier"),
        "service_tier": "auto",
        "store": req.get("store", False),
        "temperature": req.get("temperature", 1),
        "text": req.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": req.get("tool_choice", "auto"),
        "tools": tools if isinstance(tools, list) else [],
        "top_logprobs": req.get("top_logprobs", 0),
        "top_p": req.get("top_p", 1),
        "truncation": req.get("truncation", "disabled"),
        "usage": None,
        "user": req.get("user"),
        "metadata": req.get("metadata") or {},
    }
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    def pad(fields: dict[str, Any]) -> dict[str, Any]:
        if obfuscation:
            n = rng.randint(1, 15)
            fields["obfuscation"] = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))
        return fields

    emit("response.created", response={**envelope})
    emit("response.in_progress", response={**envelope})
    final: list[dict[str, Any]] = []
    output_tokens = 0
    reasoning_tokens = 0
    outputs = [] if status == "failed" else list(outputs)
    for index, spec in enumerate(outputs):
        last = index == len(outputs) - 1
        if isinstance(spec, ScriptedReasoning):
            item_id = spec.id or f"rs_{suffix}{index:02x}"
            done_blob = spec.encrypted_content or _blob(rng, f"done:{item_id}")
            added = {"id": item_id, "type": "reasoning", "encrypted_content": _blob(rng, f"added:{item_id}"),
                     "summary": []}
            emit("response.output_item.added", output_index=index, item=added)
            for k, part_text in enumerate(spec.summary):
                common = {"item_id": item_id, "output_index": index, "summary_index": k}
                emit("response.reasoning_summary_part.added", **common, part={"type": "summary_text", "text": ""})
                for delta in _deltas(part_text):
                    emit("response.reasoning_summary_text.delta", **pad({**common, "delta": delta}))
                emit("response.reasoning_summary_text.done", **common, text=part_text)
                emit("response.reasoning_summary_part.done", **common, part={"type": "summary_text", "text": part_text})
                reasoning_tokens += _estimate_tokens(part_text)
            reasoning_tokens += 16
            item = {"id": item_id, "type": "reasoning", "encrypted_content": done_blob,
                    "summary": [{"type": "summary_text", "text": t} for t in spec.summary]}
        elif isinstance(spec, ScriptedText):
            item_id = spec.id or f"msg_{suffix}{index:02x}"
            head: dict[str, Any] = {"id": item_id, "type": "message", "status": "in_progress", "content": [],
                                    "role": "assistant"}
            if spec.phase is not None:
                head["phase"] = spec.phase
            emit("response.output_item.added", output_index=index, item=head)
            common = {"item_id": item_id, "output_index": index, "content_index": 0}
            emit("response.content_part.added", **common,
                 part={"type": "output_text", "annotations": [], "logprobs": [], "text": ""})
            for delta in _deltas(spec.text):
                emit("response.output_text.delta", **pad({**common, "delta": delta, "logprobs": []}))
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": spec.text}
            emit("response.output_text.done", **common, text=spec.text, logprobs=[])
            emit("response.content_part.done", **common, part=part)
            item_status = "incomplete" if (status == "incomplete" and last) else "completed"
            item = {"id": item_id, "type": "message", "status": item_status, "content": [dict(part)],
                    "role": "assistant"}
            if spec.phase is not None:
                item["phase"] = spec.phase
            output_tokens += _estimate_tokens(spec.text)
        elif isinstance(spec, ScriptedFunctionCall):
            item_id = spec.id or f"fc_{suffix}{index:02x}"
            call_id = spec.call_id or "call_" + "".join(
                rng.choice(string.ascii_letters + string.digits) for _ in range(24)
            )
            arguments = spec.arguments if isinstance(spec.arguments, str) else json.dumps(
                spec.arguments, separators=(",", ":"), ensure_ascii=False
            )
            emit("response.output_item.added", output_index=index,
                 item={"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
                       "call_id": call_id, "name": spec.name})
            for delta in _deltas(arguments, max_len=6):
                emit("response.function_call_arguments.delta",
                     **pad({"item_id": item_id, "output_index": index, "delta": delta}))
            emit("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=arguments)
            item = {"id": item_id, "type": "function_call", "status": "completed", "arguments": arguments,
                    "call_id": call_id, "name": spec.name}
            output_tokens += _estimate_tokens(arguments)
        else:
            raise TypeError(f"outputs[{index}]: expected a scripted output, got {type(spec).__name__}")
        emit("response.output_item.done", output_index=index, item=item)
        final.append(item)
    input_tokens = _estimate_tokens(req.get("input", "")) + _estimate_tokens(req.get("instructions") or "")
    usage = {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": output_tokens + reasoning_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": input_tokens + output_tokens + reasoning_tokens,
    }
    terminal = {**envelope, "status": status, "output": final, "usage": usage}
    if status == "completed":
        emit("response.completed", response=terminal)
    elif status == "incomplete":
        terminal["incomplete_details"] = {"reason": "max_output_tokens"}
        emit("response.incomplete", response=terminal)
    else:
        err = error or {"code": "server_error", "message": "The scripted model failed."}
        emit("error", error={"type": err.get("code"), "code": err.get("code"), "message": err.get("message"),
                             "param": None})
        terminal["error"] = {"code": err.get("code"), "message": err.get("message")}
        terminal["usage"] = None
        emit("response.failed", response=terminal)
    return events


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
