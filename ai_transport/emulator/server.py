"""The emulator server: one asyncio TCP port speaking HTTP/1.1 (Ably REST) and WebSocket (realtime).

Plain HTTP requests (keep-alive, ``Content-Length`` or chunked bodies) are routed to the REST
handlers; a request with ``Upgrade: websocket`` at any path (ably-python asks for ``GET /?…``,
ably-js for ``GET /?…`` on ``host:port``) is handed to the sans-I/O
:class:`websockets.server.ServerProtocol` and becomes a realtime connection.

All state lives in one event loop: frames are handled synchronously, in arrival order, so a
channel's fan-out order is its serial order for every receiver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import Self
from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol

from .auth import DEFAULT_KEY, Authority, Principal
from .protocol import (
    DEFAULT_MODES,
    MODE_MASK,
    Action,
    EmulatorError,
    Flag,
    MessageAction,
    decode_frame,
    encode_frame,
    encode_json,
    encode_msgpack,
    ingest_data,
    loads_json,
    loads_msgpack,
    message_size,
    render_message,
)
from .store import Event, Store, now_ms

__all__ = ["Emulator", "EmulatorThread"]

log = logging.getLogger("ai_transport.emulator")

MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
MAX_WS_FRAME = 4 * 1024 * 1024


# -- connection state ------------------------------------------------------------------------


@dataclass
class Attachment:
    """One connection's attachment to one channel."""

    channel: str
    subscribe: bool = True
    modes: int = int(DEFAULT_MODES)
    seen: set[str] = field(default_factory=set)
    base: str | None = None  # the client holds every message with serial <= base
    # True while deliveries flow on the connection's current websocket. A dropped transport
    # pauses the attachment until the client re-attaches with its channelSerial, which replays
    # everything after it exactly once; a re-attach while live continues (RESUMED, no replay).
    live: bool = False

    def has_seen(self, serial: str) -> bool:
        """Whether this attachment already delivered (or the client already had) ``serial``."""
        return serial in self.seen or (self.base is not None and serial <= self.base)


class Connection:
    """A realtime connection; outlives its websocket for ``connection_state_ttl`` (resume)."""

    def __init__(
        self, conn_id: str, principal: Principal, client_id: str | None, fmt: str, echo: bool
    ) -> None:
        self.id = conn_id
        self.key = f"{conn_id}!{secrets.token_urlsafe(12)}"
        self.principal = principal
        self.client_id = client_id
        self.fmt = fmt
        self.echo = echo
        self.session: WsSession | None = None
        self.attachments: dict[str, Attachment] = {}
        self.expires_at: float | None = None  # set while detached from a websocket

    def send(self, frame: dict[str, Any]) -> None:
        """Send a ProtocolMessage if a websocket is live (dropped otherwise; replayed on re-attach)."""
        if self.session is not None:
            self.session.send(frame)


class WsSession:
    """One websocket carrying a connection."""

    def __init__(self, proto: ServerProtocol, writer: asyncio.StreamWriter, fmt: str) -> None:
        self.proto = proto
        self.writer = writer
        self.fmt = fmt
        self.closed = False
        self.expiry_task: asyncio.Task[None] | None = None

    def flush(self) -> None:
        """Write whatever the protocol has queued."""
        for chunk in self.proto.data_to_send():
            if chunk:
                self.writer.write(chunk)
            else:
                with contextlib.suppress(Exception):
                    if self.writer.can_write_eof():
                        self.writer.write_eof()

    def send(self, frame: dict[str, Any]) -> None:
        """Encode and send one ProtocolMessage (messages must already be rendered for ``fmt``)."""
        if self.closed or self.proto.state is not State.OPEN:
            return
        self.send_raw(encode_frame(frame, self.fmt))

    def send_raw(self, payload: bytes) -> None:
        """Send a frame encoded by :func:`encode_frame` for this session's format."""
        if self.closed or self.proto.state is not State.OPEN:
            return
        if self.fmt == "msgpack":
            self.proto.send_binary(payload)
        else:
            self.proto.send_text(payload)
        self.flush()

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Start the closing handshake."""
        if self.proto.state is State.OPEN:
            self.proto.send_close(code, reason)
            self.flush()


# -- HTTP plumbing ---------------------------------------------------------------------------


@dataclass
class HttpRequest:
    """A parsed HTTP request."""

    method: str
    target: str
    headers: dict[str, str]
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


_REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    426: "Upgrade Required",
    500: "Internal Server Error",
}

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


def _page(
    items: list[dict[str, Any]], query: dict[str, str], key: str, base: str
) -> tuple[list[dict[str, Any]], str]:
    """Page ``items`` (oldest first, ordered by ``item[key]``) by ``limit``/``direction``/``cursor``.

    Returns the page and a ``Link`` header value (``first`` always, ``next`` while more remain).
    """
    limit = _int_param(query, "limit")
    limit = 100 if limit is None else limit
    if not 1 <= limit <= 1000:
        raise EmulatorError("limit must be between 1 and 1000", 40003, 400)
    direction = query.get("direction", "backwards") or "backwards"
    if direction not in ("backwards", "forwards"):
        raise EmulatorError("direction must be 'backwards' or 'forwards'", 40003, 400)
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
    first_q = {k: v for k, v in query.items() if k != "cursor"}
    links = [f'<./{base}?{urllib.parse.urlencode(first_q)}>; rel="first"']
    if len(ordered) > limit:
        next_q = dict(first_q, cursor=sort_key(page[-1]))
        links.append(f'<./{base}?{urllib.parse.urlencode(next_q)}>; rel="next"')
    return page, ", ".join(links)


# -- the emulator ----------------------------------------------------------------------------


class Emulator:
    """A local Ably-compatible server (realtime + REST) on one port.

    ``async with Emulator(port=0) as emu: emu.port``. Options: ``keys`` (``["name:secret"]``,
    default :data:`~ai_transport.emulator.auth.DEFAULT_KEY`), ``strict_tokens`` (refuse tokens
    the emulator did not issue), ``max_message_size`` (65536), ``max_idle_interval`` (ms; 0 =
    no server heartbeats), ``connection_state_ttl`` (ms a dropped connection stays resumable),
    ``echo_before_ack`` (deliver a publish to subscribers, the publisher's echo included, before
    its ACK; default False: ACK first — real Ably does either, so consumers must handle both).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        keys: list[str] | None = None,
        strict_tokens: bool = False,
        max_message_size: int = 65536,
        max_idle_interval: int = 0,
        connection_state_ttl: int = 120_000,
        echo_before_ack: bool = False,
        server_id: str = "ai-transport-emulator",
    ) -> None:
        self.host = host
        self._requested_port = port
        self.port = port
        self.keys = list(keys) if keys is not None else [DEFAULT_KEY]
        self.authority = Authority(self.keys, strict_tokens=strict_tokens)
        self.store = Store()
        self.max_message_size = max_message_size
        self.max_idle_interval = max_idle_interval
        self.connection_state_ttl = connection_state_ttl
        self.echo_before_ack = echo_before_ack
        self.server_id = server_id
        self.connections: dict[str, Connection] = {}
        self._by_key: dict[str, Connection] = {}
        self._subs: dict[str, dict[str, Attachment]] = {}
        self._server: asyncio.base_events.Server | None = None
        self._conn_counter = 0
        self._rest_counter = 0
        self._client_tasks: set[asyncio.Task[Any]] = set()

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def key(self) -> str:
        """The first configured key (``name:secret``)."""
        return self.keys[0]

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> Emulator:
        """Bind and start serving."""
        self._server = await asyncio.start_server(
            self._on_client, self.host, self._requested_port, limit=MAX_HEAD
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("emulator listening on %s", self.url)
        return self

    async def stop(self) -> None:
        """Close every connection and stop listening."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections.values()):
            if conn.session is not None:
                conn.session.close(1001, "emulator stopping")
        for task in list(self._client_tasks):
            task.cancel()
        for task in list(self._client_tasks):
            with contextlib.suppress(BaseException):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        """Start (if needed) and serve until cancelled."""
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    # -- TCP / HTTP --------------------------------------------------------------------------

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._client_tasks.add(task)
        try:
            await self._serve_http(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("emulator: connection handler failed")
        finally:
            if task is not None:
                self._client_tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _serve_http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return
            except asyncio.LimitOverrunError:
                writer.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n")
                return
            try:
                lines = head.decode("latin-1").split("\r\n")
                method, target, _version = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if not line:
                        continue
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            except ValueError:
                writer.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
                return
            if "websocket" in headers.get("upgrade", "").lower():
                await self._serve_websocket(head, reader, writer)
                return
            try:
                body = await self._read_body(headers, reader)
            except ValueError:
                writer.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
                return
            if body is None:
                writer.write(
                    b"HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
                )
                return
            req = HttpRequest(method.upper(), target, headers, body)
            try:
                resp = self._handle_rest(req)
            except EmulatorError as err:
                resp = _error_response(err)
            except Exception as exc:
                log.exception("emulator: REST handler failed")
                resp = _error_response(EmulatorError(f"internal error: {exc}", 50000, 500))
            keep_alive = headers.get("connection", "").lower() != "close"
            self._write_response(writer, req, resp, keep_alive)
            await writer.drain()
            if not keep_alive:
                return

    async def _read_body(self, headers: dict[str, str], reader: asyncio.StreamReader) -> bytes | None:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts: list[bytes] = []
            total = 0
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    # trailers until an empty line
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":
                        pass
                    return b"".join(parts)
                total += size
                if total > MAX_BODY:
                    return None
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
        length = int(headers.get("content-length", "0") or 0)
        if length > MAX_BODY:
            return None
        return await reader.readexactly(length) if length else b""

    @staticmethod
    def _write_response(
        writer: asyncio.StreamWriter, req: HttpRequest, resp: HttpResponse, keep_alive: bool
    ) -> None:
        head = [f"HTTP/1.1 {resp.status} {_REASONS.get(resp.status, 'Status')}"]
        hdrs = {
            "Content-Type": resp.content_type,
            "Content-Length": str(len(resp.body)),
            "Connection": "keep-alive" if keep_alive else "close",
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Expose-Headers": "Link, X-Ably-Errorcode, X-Ably-Errormessage",
        }
        hdrs.update(resp.headers)
        head.extend(f"{k}: {v}" for k, v in hdrs.items())
        writer.write(
            ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (b"" if req.method == "HEAD" else resp.body)
        )

    # -- REST --------------------------------------------------------------------------------

    def _decode_request_body(self, req: HttpRequest) -> Any:
        if not req.body:
            return None
        ctype = req.headers.get("content-type", "").lower()
        try:
            if ctype.startswith(MSGPACK):
                return loads_msgpack(req.body)
            return loads_json(req.body)
        except Exception:
            raise EmulatorError("request body could not be decoded", 40000, 400) from None

    def _rest_auth(self, req: HttpRequest) -> Principal:
        auth = req.headers.get("authorization")
        if not auth:
            q = req.query
            if q.get("key"):
                return self.authority.by_key(q["key"])
            token = q.get("access_token") or q.get("accessToken")
            if token:
                return self.authority.by_token(token)
        return self.authority.from_header(auth, req.headers.get("x-ably-clientid"))

    def _handle_rest(self, req: HttpRequest) -> HttpResponse:
        segments = [urllib.parse.unquote_plus(s) for s in req.path.split("/") if s != ""]
        out_msgpack = _wants_msgpack(req)
        fmt = "msgpack" if out_msgpack else "json"

        def reply(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
            body, ctype = _encode_body(value, out_msgpack)
            return HttpResponse(status, body, ctype, headers or {})

        if req.method == "OPTIONS":
            # CORS preflight for browser clients: "*" does not cover Authorization, so echo the ask
            asked = req.headers.get("access-control-request-headers")
            return HttpResponse(
                204,
                headers={
                    "Access-Control-Allow-Methods": "GET, POST, PATCH, PUT, DELETE, OPTIONS",
                    "Access-Control-Allow-Headers": asked
                    or "Authorization, Content-Type, Accept, X-Ably-Version, Ably-Agent, X-Ably-ClientId",
                    "Access-Control-Max-Age": "600",
                },
            )
        if not segments or segments == ["is-the-internet-up.txt"]:
            return HttpResponse(200, b"yes", "text/plain")
        if segments == ["time"] and req.method in ("GET", "HEAD"):
            return reply([now_ms()])
        if (
            len(segments) == 3
            and segments[0] == "keys"
            and segments[2] == "requestToken"
            and req.method == "POST"
        ):
            details = self.authority.request_token(
                segments[1], self._decode_request_body(req), req.headers.get("authorization")
            )
            return reply(details)
        if segments[0] != "channels" or len(segments) < 2:
            raise EmulatorError(f"no route for {req.method} {req.path}", 40400, 404)

        principal = self._rest_auth(req)
        channel = segments[1]
        rest = segments[2:]
        query = req.query

        if not rest and req.method in ("GET", "HEAD"):
            return reply(self._channel_details(channel))
        if rest == ["messages"] and req.method in ("GET", "HEAD"):
            principal.check(channel, "history")
            until = query.get("from_serial") or query.get("fromSerial") or None
            items = self.store.history(
                channel, start=_int_param(query, "start"), end=_int_param(query, "end"), until_serial=until
            )
            page, link = _page(items, query, "serial", "messages")
            return reply([render_message(m, fmt) for m in page], headers={"Link": link})
        if rest == ["messages"] and req.method == "POST":
            body = self._decode_request_body(req)
            messages = body if isinstance(body, list) else [body]
            serials = self._rest_publish(principal, channel, messages, self._body_format(req))
            return reply({"serials": serials}, 201)
        if len(rest) == 2 and rest[0] == "messages" and req.method in ("GET", "HEAD"):
            principal.check(channel, "history")
            return reply(render_message(self.store.get(channel, rest[1]), fmt))
        if len(rest) == 2 and rest[0] == "messages" and req.method in ("PATCH", "PUT", "POST"):
            body = self._decode_request_body(req)
            if not isinstance(body, dict):
                raise EmulatorError("the request body must be a message object", 40000, 400)
            action = body.get("action")
            if action not in (MessageAction.UPDATE, MessageAction.DELETE, MessageAction.APPEND):
                raise EmulatorError("action must be 1 (update), 2 (delete) or 5 (append)", 40003, 400)
            body["serial"] = rest[1]
            events = self._rest_mutate(principal, channel, body, self._body_format(req))
            return reply({"versionSerial": events[0].serial})
        if (
            len(rest) == 3
            and rest[0] == "messages"
            and rest[2] == "versions"
            and req.method in ("GET", "HEAD")
        ):
            principal.check(channel, "history")
            versions = self.store.versions(channel, rest[1])
            page, link = _page(versions, query, "version", "versions")
            return reply([render_message(m, fmt) for m in page], headers={"Link": link})
        raise EmulatorError(f"no route for {req.method} {req.path}", 40400, 404)

    @staticmethod
    def _body_format(req: HttpRequest) -> str:
        return "msgpack" if req.headers.get("content-type", "").lower().startswith(MSGPACK) else "json"

    def _channel_details(self, channel: str) -> dict[str, Any]:
        subs = self._subs.get(channel, {})
        n = len(subs)
        return {
            "channelId": channel,
            "name": channel,
            "status": {
                "isActive": n > 0,
                "occupancy": {
                    "metrics": {
                        "connections": n,
                        "publishers": sum(1 for a in subs.values() if a.modes & Flag.PUBLISH),
                        "subscribers": sum(1 for a in subs.values() if a.subscribe),
                        "presenceConnections": 0,
                        "presenceMembers": 0,
                        "presenceSubscribers": 0,
                    }
                },
            },
        }

    def _rest_publish(self, principal: Principal, channel: str, messages: list[Any], fmt: str) -> list[str]:
        self._rest_counter += 1
        events = self._accept(
            principal,
            principal.client_id,
            channel,
            messages,
            fmt,
            connection_id=None,
            id_prefix=f"rest{self._rest_counter}-{secrets.token_hex(4)}",
        )
        self._fan_out(channel, events, publisher=None, frame_id=None, connection_id=None)
        return [e.serial for e in events]

    def _rest_mutate(
        self, principal: Principal, channel: str, message: dict[str, Any], fmt: str
    ) -> list[Event]:
        events = self._accept(
            principal, principal.client_id, channel, [message], fmt, connection_id=None, id_prefix=""
        )
        self._fan_out(channel, events, publisher=None, frame_id=None, connection_id=None)
        return events

    # -- shared publish path -----------------------------------------------------------------

    def _accept(
        self,
        principal: Principal,
        client_id: str | None,
        channel: str,
        messages: list[Any],
        fmt: str,
        *,
        connection_id: str | None,
        id_prefix: str,
    ) -> list[Event]:
        """Validate (capability, clientId, size, shape), ingest and store a batch."""
        if not isinstance(channel, str) or not channel:
            raise EmulatorError("channel name is required", 40010, 400)
        principal.check_expiry()
        total = 0
        for i, msg in enumerate(messages):
            if not isinstance(msg, dict):
                raise EmulatorError(f"messages[{i}] is not a message object", 40000, 400)
            ingest_data(msg, fmt)
            total += message_size(msg)
            action = msg.get("action")
            if action is None or action == MessageAction.CREATE:
                principal.check(channel, "publish")
            elif action == MessageAction.DELETE:
                self._check_op(principal, client_id, channel, msg, "delete")
            else:
                self._check_op(principal, client_id, channel, msg, "update")
            cid = msg.get("clientId")
            if cid is not None:
                if not isinstance(cid, str):
                    raise EmulatorError(f"messages[{i}].clientId must be a string", 40012, 400)
                if client_id not in (None, "*") and cid != client_id:
                    raise EmulatorError(
                        f"Mismatched clientId: messages[{i}].clientId {cid!r} differs from the connection's "
                        f"{client_id!r}",
                        40012,
                        400,
                    )
        if total > self.max_message_size:
            raise EmulatorError(
                f"Maximum message length exceeded (size {total} bytes, limit {self.max_message_size})",
                40009,
                400,
            )
        return self.store.apply(
            channel, messages, connection_id=connection_id, client_id=client_id, id_prefix=id_prefix
        )

    def _check_op(
        self, principal: Principal, client_id: str | None, channel: str, msg: dict[str, Any], op: str
    ) -> None:
        if principal.allows(channel, "publish") or principal.allows(channel, f"message-{op}-any"):
            return
        if principal.allows(channel, f"message-{op}-own"):
            serial = msg.get("serial")
            log_ = self.store.channels.get(channel)
            entry = log_.entries.get(serial) if log_ and isinstance(serial, str) else None
            if entry is None or (client_id and entry.aggregate.get("clientId") == client_id):
                return
        principal.check(channel, f"message-{op}-any")

    def _fan_out(
        self,
        channel: str,
        events: list[Event],
        *,
        publisher: Connection | None,
        frame_id: str | None,
        connection_id: str | None,
    ) -> None:
        """Deliver one ProtocolMessage's events to every subscribed attachment, in order."""
        events = [e for e in events if not e.duplicate]
        if not events:
            return
        subs = self._subs.get(channel)
        if not subs:
            return
        cache: dict[tuple[str, tuple[bool, ...]], bytes] = {}
        ts = now_ms()
        for conn_id, att in list(subs.items()):
            conn = self.connections.get(conn_id)
            if conn is None or conn.session is None or not att.subscribe or not att.live:
                continue
            if conn is publisher and not conn.echo:
                continue
            choice = tuple(att.has_seen(ev.message_serial) for ev in events)
            for ev in events:
                att.seen.add(ev.message_serial)
            cache_key = (conn.fmt, choice)
            payload = cache.get(cache_key)
            if payload is None:
                frame: dict[str, Any] = {
                    "action": int(Action.MESSAGE),
                    "channel": channel,
                    "channelSerial": events[-1].serial,
                    "timestamp": ts,
                    "messages": [
                        render_message(ev.live if seen else ev.aggregate, conn.fmt)
                        for ev, seen in zip(events, choice)
                    ],
                }
                if frame_id:
                    frame["id"] = frame_id
                if connection_id:
                    frame["connectionId"] = connection_id
                payload = cache[cache_key] = encode_frame(frame, conn.fmt)
            assert conn.session is not None
            conn.session.send_raw(payload)

    # -- websocket ---------------------------------------------------------------------------

    async def _serve_websocket(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        proto = ServerProtocol(max_size=MAX_WS_FRAME)
        proto.receive_data(head)
        events = proto.events_received()
        if not events or not isinstance(events[0], Request):
            writer.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            return
        request = events[0]
        response = proto.accept(request)
        proto.send_response(response)
        for chunk in proto.data_to_send():
            writer.write(chunk)
        await writer.drain()
        if response.status_code != 101:
            return
        query = dict(
            urllib.parse.parse_qsl(urllib.parse.urlsplit(request.path).query, keep_blank_values=True)
        )
        fmt = "msgpack" if query.get("format") == "msgpack" else "json"
        session = WsSession(proto, writer, fmt)
        conn: Connection | None = None
        heartbeat: asyncio.Task[None] | None = None
        try:
            conn = self._open_connection(session, query)
            if conn is None:
                await writer.drain()
                await self._drain_close(session, reader)
                return
            if self.max_idle_interval > 0:
                heartbeat = asyncio.create_task(self._heartbeat(session))
            self._watch_expiry(conn, session)
            await self._read_loop(conn, session, reader)
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            if session.expiry_task is not None:
                session.expiry_task.cancel()
            session.closed = True
            if conn is not None and conn.session is session:
                conn.session = None
                self._pause(conn)
                conn.expires_at = asyncio.get_running_loop().time() + self.connection_state_ttl / 1000

    def _watch_expiry(self, conn: Connection, session: WsSession) -> None:
        """When the connection's token expires, send DISCONNECTED 40142 (the SDK renews and resumes)."""
        if session.expiry_task is not None:
            session.expiry_task.cancel()
            session.expiry_task = None
        expires = conn.principal.expires
        if expires is None:
            return

        async def expire() -> None:
            await asyncio.sleep(max(0.0, (expires - now_ms()) / 1000))
            if session.closed or conn.session is not session:
                return
            err = EmulatorError("Token expired", 40142, 401)
            session.send({"action": int(Action.DISCONNECTED), "error": err.to_dict()})
            session.close(1000, "token expired")

        session.expiry_task = asyncio.create_task(expire())

    async def _drain_close(self, session: WsSession, reader: asyncio.StreamReader) -> None:
        """After a fatal error: close and wait (briefly) for the peer's close."""
        session.close(1000, "")

        async def wait_peer_close() -> None:
            while session.proto.state is not State.CLOSED:
                data = await reader.read(65536)
                if not data:
                    break
                session.proto.receive_data(data)
                session.proto.events_received()
                session.flush()

        with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
            await asyncio.wait_for(wait_peer_close(), 2)

    async def _heartbeat(self, session: WsSession) -> None:
        interval = self.max_idle_interval / 2000
        while not session.closed:
            await asyncio.sleep(interval)
            session.send({"action": int(Action.HEARTBEAT)})

    async def _read_loop(self, conn: Connection, session: WsSession, reader: asyncio.StreamReader) -> None:
        proto = session.proto
        fragments: list[bytes] = []
        fragment_text = False
        while True:
            data = await reader.read(65536)
            if not data:
                proto.receive_eof()
                session.flush()
                return
            proto.receive_data(data)
            for event in proto.events_received():
                if not isinstance(event, Frame):
                    continue
                if event.opcode in (Opcode.TEXT, Opcode.BINARY):
                    if not event.fin:
                        fragments = [bytes(event.data)]
                        fragment_text = event.opcode is Opcode.TEXT
                        continue
                    self._on_payload(conn, session, bytes(event.data), event.opcode is Opcode.TEXT)
                elif event.opcode is Opcode.CONT:
                    fragments.append(bytes(event.data))
                    if event.fin:
                        self._on_payload(conn, session, b"".join(fragments), fragment_text)
                        fragments = []
            session.flush()
            if proto.state is State.CLOSED or session.closed:
                return
            await session.writer.drain()

    @staticmethod
    def _pause(conn: Connection) -> None:
        """The transport went away: hold deliveries until each channel is re-attached."""
        for att in conn.attachments.values():
            att.live = False

    def _sweep(self) -> None:
        now = asyncio.get_running_loop().time()
        for conn in list(self.connections.values()):
            if conn.session is None and conn.expires_at is not None and conn.expires_at < now:
                self._drop_connection(conn)

    def _drop_connection(self, conn: Connection) -> None:
        self.connections.pop(conn.id, None)
        self._by_key.pop(conn.key, None)
        for name in conn.attachments:
            subs = self._subs.get(name)
            if subs is not None:
                subs.pop(conn.id, None)
        conn.attachments.clear()

    def _connected_frame(self, conn: Connection, error: EmulatorError | None = None) -> dict[str, Any]:
        frame: dict[str, Any] = {
            "action": int(Action.CONNECTED),
            "connectionId": conn.id,
            "connectionKey": conn.key,
            "connectionDetails": {
                "connectionKey": conn.key,
                "clientId": conn.client_id,
                "connectionStateTtl": self.connection_state_ttl,
                "maxIdleInterval": self.max_idle_interval,
                "maxMessageSize": self.max_message_size,
                "maxInboundRate": 1000,
                "maxFrameSize": MAX_WS_FRAME,
                "serverId": self.server_id,
            },
        }
        if error is not None:
            frame["error"] = error.to_dict()
        return frame

    def _authenticate(
        self, query: dict[str, str], token_override: str | None = None
    ) -> tuple[Principal, str | None]:
        requested = query.get("clientId") or None
        token = token_override or query.get("accessToken") or query.get("access_token")
        if token:
            principal = self.authority.by_token(token)
        elif query.get("key"):
            principal = self.authority.by_key(query["key"], requested)
        else:
            raise EmulatorError("No authentication information provided", 40101, 401)
        bound = principal.client_id
        if bound in (None, "*"):
            return principal, requested if requested != "*" else None
        if requested is not None and requested != bound:
            raise EmulatorError(
                f"Incompatible clientId: the credentials are for {bound!r}, the connection asked for {requested!r}",
                40102,
                401,
            )
        return principal, bound

    def _open_connection(self, session: WsSession, query: dict[str, str]) -> Connection | None:
        """Authenticate and send CONNECTED (resuming where asked); ERROR and None on failure."""
        self._sweep()
        try:
            principal, client_id = self._authenticate(query)
        except EmulatorError as err:
            session.send({"action": int(Action.ERROR), "error": err.to_dict()})
            return None
        echo = query.get("echo", "true").lower() != "false"
        resume_key = query.get("resume") or query.get("recover")
        resume_error: EmulatorError | None = None
        if resume_key:
            old = self._by_key.get(resume_key)
            if old is not None and old.client_id == client_id:
                if old.session is not None:
                    old.session.close(1000, "superseded by a resumed transport")
                    old.session.closed = True
                self._pause(old)
                old.session = session
                old.expires_at = None
                old.principal = principal
                old.fmt = session.fmt
                old.echo = echo
                session.send(self._connected_frame(old))
                return old
            resume_error = EmulatorError("Unable to recover connection: connection key not found", 80008, 400)
        self._conn_counter += 1
        conn = Connection(
            f"emu-{self._conn_counter}-{secrets.token_hex(3)}", principal, client_id, session.fmt, echo
        )
        conn.session = session
        self.connections[conn.id] = conn
        self._by_key[conn.key] = conn
        session.send(self._connected_frame(conn, resume_error))
        return conn

    def _on_payload(self, conn: Connection, session: WsSession, payload: bytes, text: bool) -> None:
        try:
            frame = decode_frame(payload.decode("utf-8") if text else payload)
        except (EmulatorError, UnicodeDecodeError) as exc:
            err = (
                exc
                if isinstance(exc, EmulatorError)
                else EmulatorError("malformed frame: invalid UTF-8", 40000)
            )
            log.warning("emulator: %s (connection %s); closing it", err.message, conn.id)
            session.send({"action": int(Action.ERROR), "error": err.to_dict()})
            session.close(1000, "protocol error")
            return
        try:
            self._on_frame(conn, session, frame)
        except EmulatorError as err:
            log.warning("emulator: %s (connection %s); closing it", err.message, conn.id)
            session.send({"action": int(Action.ERROR), "error": err.to_dict()})
            session.close(1000, "protocol error")
        except Exception as exc:
            log.exception("emulator: frame handler failed")
            session.send(
                {
                    "action": int(Action.ERROR),
                    "error": EmulatorError(f"internal error: {exc}", 50000, 500).to_dict(),
                }
            )
            session.close(1011, "internal error")

    def _on_frame(self, conn: Connection, session: WsSession, frame: dict[str, Any]) -> None:
        action = frame["action"]
        channel = frame.get("channel")
        if action == Action.HEARTBEAT:
            reply: dict[str, Any] = {"action": int(Action.HEARTBEAT)}
            if frame.get("id") is not None:
                reply["id"] = frame["id"]
            session.send(reply)
        elif action == Action.CLOSE:
            session.send({"action": int(Action.CLOSED)})
            session.close(1000, "")
            self._drop_connection(conn)
        elif action == Action.DISCONNECT:
            session.send({"action": int(Action.DISCONNECTED)})
            session.close(1000, "")
        elif action == Action.ATTACH:
            self._on_attach(conn, session, frame)
        elif action == Action.DETACH:
            if not isinstance(channel, str) or not channel:
                raise EmulatorError("DETACH without a channel", 40010, 400)
            conn.attachments.pop(channel, None)
            subs = self._subs.get(channel)
            if subs is not None:
                subs.pop(conn.id, None)
            session.send({"action": int(Action.DETACHED), "channel": channel})
        elif action == Action.MESSAGE:
            self._on_message(conn, session, frame)
        elif action in (Action.PRESENCE, Action.ANNOTATION, Action.OBJECT):
            self._nack_unsupported(conn, session, frame)
        elif action == Action.AUTH:
            auth = frame.get("auth") if isinstance(frame.get("auth"), dict) else {}
            token = auth.get("accessToken") if auth else None
            try:
                if not isinstance(token, str) or not token:
                    raise EmulatorError("AUTH without auth.accessToken", 40101, 401)
                principal, client_id = self._authenticate({"clientId": conn.client_id or ""}, token)
                if client_id != conn.client_id and conn.client_id is not None:
                    raise EmulatorError("Incompatible clientId on re-authentication", 40102, 401)
            except EmulatorError as err:
                session.send({"action": int(Action.ERROR), "error": err.to_dict()})
                session.close(1000, "")
                return
            conn.principal = principal
            session.send(self._connected_frame(conn))
            self._watch_expiry(conn, session)
        else:
            raise EmulatorError(f"unknown or unexpected ProtocolMessage action {action}", 40000, 400)

    def _nack_unsupported(self, conn: Connection, session: WsSession, frame: dict[str, Any]) -> None:
        serial = frame.get("msgSerial")
        channel = frame.get("channel")
        if isinstance(channel, str) and channel and channel not in conn.attachments:
            err = EmulatorError(f"channel {channel!r} is not attached", 90001, 400)
        else:
            err = EmulatorError(
                f"{Action(frame['action']).name} is not supported by the emulator", 40000, 400
            )
        if isinstance(serial, int) and not isinstance(serial, bool):
            session.send(
                {"action": int(Action.NACK), "msgSerial": serial, "count": 1, "error": err.to_dict()}
            )
        else:
            session.send({"action": int(Action.ERROR), "channel": channel, "error": err.to_dict()})

    def _on_attach(self, conn: Connection, session: WsSession, frame: dict[str, Any]) -> None:
        channel = frame.get("channel")
        if not isinstance(channel, str) or not channel:
            raise EmulatorError("ATTACH without a channel", 40010, 400)
        principal = conn.principal
        try:
            principal.check_expiry()
            if not principal.allows_any(channel):
                raise EmulatorError(
                    f"Channel denied access based on given capability; channel {channel!r}", 40160, 401
                )
        except EmulatorError as err:
            session.send({"action": int(Action.ERROR), "channel": channel, "error": err.to_dict()})
            return
        raw_flags = frame.get("flags")
        flags = raw_flags if isinstance(raw_flags, int) else 0
        requested = flags & MODE_MASK or int(DEFAULT_MODES)
        granted = 0
        if principal.allows(channel, "publish"):
            granted |= Flag.PUBLISH
        if principal.allows(channel, "subscribe"):
            granted |= Flag.SUBSCRIBE
        if principal.allows(channel, "presence"):
            granted |= Flag.PRESENCE
        if principal.allows(channel, "subscribe") or principal.allows(channel, "presence"):
            granted |= Flag.PRESENCE_SUBSCRIBE
        if principal.allows(channel, "annotation-publish"):
            granted |= Flag.ANNOTATION_PUBLISH
        if principal.allows(channel, "annotation-subscribe") or principal.allows(channel, "subscribe"):
            granted |= Flag.ANNOTATION_SUBSCRIBE
        modes = requested & granted
        log_ = self.store.channel(channel)
        att = conn.attachments.get(channel)
        continuing = att is not None and att.live
        if att is None:
            att = conn.attachments[channel] = Attachment(channel)
        att.modes = modes
        att.subscribe = bool(modes & Flag.SUBSCRIBE)
        self._subs.setdefault(channel, {})[conn.id] = att

        raw_params = frame.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        honoured: dict[str, str] = {}
        backlog: list[tuple[Event | None, dict[str, Any]]] = []
        channel_serial = frame.get("channelSerial")
        if continuing:
            pass  # nothing was lost on this transport: frames after channelSerial are in flight
        elif isinstance(channel_serial, str) and channel_serial:
            if att.base is None or channel_serial > att.base:
                att.base = channel_serial
            for ev in log_.events_after(channel_serial):
                seen = att.has_seen(ev.message_serial)
                att.seen.add(ev.message_serial)
                backlog.append((ev, ev.live if seen else ev.aggregate))
        elif params.get("rewind") not in (None, ""):
            rewind = str(params["rewind"])
            honoured["rewind"] = rewind
            for agg in self._rewind(channel, rewind):
                att.seen.add(agg["serial"])
                backlog.append((None, agg))
        reply: dict[str, Any] = {
            "action": int(Action.ATTACHED),
            "channel": channel,
            "channelSerial": log_.latest_serial,
            "flags": int(modes | (Flag.HAS_BACKLOG if backlog else 0) | (Flag.RESUMED if continuing else 0)),
        }
        att.live = True
        if honoured:
            reply["params"] = honoured
        session.send(reply)
        if not att.subscribe:
            return
        for event, msg in backlog:
            session.send(
                {
                    "action": int(Action.MESSAGE),
                    "channel": channel,
                    # a replayed event carries its own serial; rewound aggregates are as of the
                    # attach point, so they carry the ATTACHED channelSerial
                    "channelSerial": event.serial if event is not None else reply["channelSerial"],
                    "timestamp": msg.get("timestamp", now_ms()),
                    "messages": [render_message(msg, conn.fmt)],
                }
            )

    def _rewind(self, channel: str, rewind: str) -> list[dict[str, Any]]:
        items = self.store.history(channel)
        try:
            if rewind[-1:] in ("s", "m"):
                span = int(rewind[:-1]) * (1000 if rewind[-1] == "s" else 60_000)
                cutoff = now_ms() - span
                return [m for m in items if m.get("timestamp", 0) >= cutoff][-100:]
            count = int(rewind)
        except ValueError:
            return []
        return items[-count:] if count > 0 else []

    def _on_message(self, conn: Connection, session: WsSession, frame: dict[str, Any]) -> None:
        msg_serial = frame.get("msgSerial")
        if isinstance(msg_serial, bool) or not isinstance(msg_serial, int):
            raise EmulatorError("MESSAGE without an integer msgSerial", 40000, 400)
        channel = frame.get("channel")
        messages = frame.get("messages")
        try:
            if not isinstance(channel, str) or not channel:
                raise EmulatorError("MESSAGE without a channel", 40010, 400)
            if not isinstance(messages, list):
                raise EmulatorError("MESSAGE without a messages array", 40000, 400)
            events = self._accept(
                conn.principal,
                conn.client_id,
                channel,
                messages,
                session.fmt,
                connection_id=conn.id,
                id_prefix=f"{conn.id}:{msg_serial}",
            )
        except EmulatorError as err:
            session.send(
                {"action": int(Action.NACK), "msgSerial": msg_serial, "count": 1, "error": err.to_dict()}
            )
            return
        ack = {
            "action": int(Action.ACK),
            "msgSerial": msg_serial,
            "count": 1,
            "res": [{"serials": [ev.serial for ev in events]}],
        }
        if not self.echo_before_ack:
            session.send(ack)
        self._fan_out(
            channel, events, publisher=conn, frame_id=f"{conn.id}:{msg_serial}", connection_id=conn.id
        )
        if self.echo_before_ack:
            session.send(ack)

    # -- introspection -----------------------------------------------------------------------

    def drop_transports(self, connection_id: str | None = None, *, forget: bool = False) -> int:
        """Abruptly cut live websockets (all, or one connection's); return how many were cut.

        The connections stay resumable for ``connection_state_ttl``: an SDK reconnects with
        ``resume`` and re-attaches with its last ``channelSerial``, and the emulator replays every
        event it missed. ``forget=True`` also discards the connection state, so the resume fails
        (CONNECTED with error 80008 and a new connectionId) and only the ``channelSerial``
        re-attach restores continuity. Call on the emulator's loop (or through
        :meth:`EmulatorThread.call`).
        """
        n = 0
        for conn in list(self.connections.values()):
            if conn.session is None or (connection_id is not None and conn.id != connection_id):
                continue
            session = conn.session
            session.closed = True
            with contextlib.suppress(Exception):
                session.writer.transport.abort()
            if forget:
                self._drop_connection(conn)
            n += 1
        return n


class EmulatorThread:
    """An :class:`Emulator` on its own event loop in a daemon thread (for sync tests / node clients).

    ``with EmulatorThread() as emu: emu.port`` — or ``start()`` / ``stop()``.
    """

    def __init__(self, **options: Any) -> None:
        self.emulator = Emulator(**options)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="ai-transport-emulator", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.emulator.start())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.emulator.stop())
        self.loop.close()

    @property
    def port(self) -> int:
        """The bound port."""
        return self.emulator.port

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return self.emulator.url

    @property
    def key(self) -> str:
        """The first configured key."""
        return self.emulator.key

    def start(self) -> EmulatorThread:
        """Start the thread and wait until the port is bound."""
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        return self

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the emulator's loop and return its result."""

        async def run() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
