"""The REST side of the emulator: HTTP requests routed to Ably's REST endpoints.
"""

from __future__ import annotations

import asyncio
import secrets
import urllib.parse
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .attach import check_channel_name
from .auth import Principal
from .batch import batch_publish
from .connection import Connection
from .core import log
from .guard import origin_allowed
from .http_io import (
    MSGPACK,
    HttpRequest,
    HttpResponse,
    _encode_body,
    _error_response,
    _int_param,
    _page,
    _wants_msgpack,
    page_sorted,
)
from .presence import PresenceHandlers
from .protocol import (
    EmulatorError,
    Flag,
    MessageAction,
    loads_json,
    loads_msgpack,
    render_message,
)
from .revocation import revoke_tokens
from .store import Event, now_ms

__all__ = ["RestHandlers"]

_CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Expose-Headers": "Link, X-Ably-Errorcode, X-Ably-Errormessage",
}


def _to_web(resp: HttpResponse, origin: str | None) -> web.Response:
    """The aiohttp response for a handler's reply (CORS headers; an allowed Origin is echoed)."""
    headers = {"Content-Type": resp.content_type, **_CORS, **resp.headers}
    if origin is not None:  # echo the (allowed) browser origin rather than "*"
        headers["Access-Control-Allow-Origin"] = resp.headers.get("Access-Control-Allow-Origin", origin)
        # as Ably does: ably-js sends REST requests (history) withCredentials
        headers.setdefault("Access-Control-Allow-Credentials", "true")
        headers.setdefault("Vary", "Origin")
    return web.Response(status=resp.status, body=resp.body, headers=headers)


class RestHandlers(PresenceHandlers):
    """Ably REST over HTTP/1.1 (publish, history, messages, time, token requests, channel status)."""

    if TYPE_CHECKING:

        async def _serve_websocket(self, request: web.Request) -> web.StreamResponse: ...

    def _refuse_origin(self, request: web.Request) -> web.Response | None:
        """403 / 40300 for a browser Origin that is neither loopback nor allowed (REST and websocket)."""
        origin = request.headers.get("Origin")
        if origin_allowed(origin, self.allowed_origins):
            return None
        log.warning("emulator: refused a request from browser origin %r (not loopback or allowed)", origin)
        err = EmulatorError(
            f"Origin {origin!r} is not allowed: the emulator accepts loopback origins and its "
            "allowed_origins (--allow-origin) only",
            40300,
            403,
        )
        return _to_web(_error_response(err), None)

    async def _serve_rest(self, request: web.Request) -> web.Response:
        """One REST request (aiohttp parsed it and enforces the body limit: 413 past ``MAX_BODY``)."""
        body = await request.read()
        req = HttpRequest(request.method.upper(), request.raw_path, request.headers, body)
        try:
            resp = self._handle_rest(req)
        except EmulatorError as err:
            resp = _error_response(err)
        except Exception as exc:
            log.exception("emulator: REST handler failed")
            resp = _error_response(EmulatorError(f"internal error: {exc}", 50000, 500))
        return _to_web(resp, request.headers.get("Origin"))

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
        if segments == ["presence"] and req.method in ("GET", "HEAD"):
            return reply(self._rest_batch_presence(self._rest_auth(req), req.query, fmt))
        if len(segments) == 3 and segments[0] == "keys" and segments[2] == "revokeTokens" and req.method == "POST":
            out, applies_at = revoke_tokens(
                self.authority, segments[1], self._rest_auth(req), self._decode_request_body(req), self.revocable_keys
            )
            asyncio.get_running_loop().call_later(max(0, applies_at - now_ms()) / 1000, self._disconnect_revoked)
            return reply(out)
        if segments == ["messages"] and req.method == "POST":
            principal = self._rest_auth(req)
            body_fmt = self._body_format(req)
            status, out = batch_publish(
                self._decode_request_body(req),
                lambda channel, messages, message_id: self._rest_publish(
                    principal, check_channel_name(channel), messages, body_fmt, message_id
                ),
            )
            return reply(out, status)
        if segments == ["stats"] and req.method in ("GET", "HEAD"):
            self._rest_auth(req)  # authenticated like any call; no statistics are collected
            return reply([], headers={"Link": '<./stats>; rel="first"'})
        if segments[0] != "channels" or len(segments) < 2:
            raise EmulatorError(f"no route for {req.method} {req.path}", 40400, 404)

        principal = self._rest_auth(req)
        channel = segments[1]
        rest = segments[2:]
        query = req.query

        if not rest and req.method in ("GET", "HEAD"):
            return reply(self._channel_details(channel))
        if rest[:1] == ["presence"] and req.method in ("GET", "HEAD"):
            found = self._rest_presence(principal, channel, rest, query, fmt)
            if found is not None:
                return reply(found[0], headers={"Link": found[1]})
        if rest == ["messages"] and req.method in ("GET", "HEAD"):
            principal.check(channel, "history")
            until = query.get("from_serial") or query.get("fromSerial") or None
            items = self.store.history(
                channel, start=_int_param(query, "start"), end=_int_param(query, "end"), until_serial=until
            )
            page, link = _page(items, query, "serial", "messages")
            return reply([render_message(m, fmt) for m in page], headers={"Link": link})
        if rest == ["messages"] and req.method == "POST":
            if query.get("_forceNack") == "true":  # Ably's test param (RSL1l1): refuse this publish
                raise EmulatorError("publish refused: the _forceNack test param was set", 40099, 400)
            body = self._decode_request_body(req)
            messages = body if isinstance(body, list) else [body]
            message_id = secrets.token_urlsafe(9)  # the messages' ids are <messageId>:<index>, as in Ably
            serials = self._rest_publish(principal, channel, messages, self._body_format(req), message_id)
            return reply({"channel": channel, "messageId": message_id, "serials": serials}, 201)
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
            versions = self.store.versions_view(channel, rest[1])
            # Ably lists a message's versions oldest first unless asked otherwise (RSL14)
            if not query.get("direction"):
                query = dict(query, direction="forwards")
            page, link = page_sorted(versions, versions.serial, query, "versions")
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
                # the status request itself activates the channel in Ably, attached or not
                "isActive": True,
                "occupancy": {
                    "metrics": {
                        "connections": n,
                        "publishers": sum(1 for a in subs.values() if a.modes & Flag.PUBLISH),
                        "subscribers": sum(1 for a in subs.values() if a.subscribe),
                        **self._presence_occupancy(channel),
                    }
                },
            },
        }

    def _rest_publish(
        self, principal: Principal, channel: str, messages: list[Any], fmt: str, id_prefix: str | None = None
    ) -> list[str]:
        self._rest_counter += 1
        on_behalf = self._on_behalf_of(messages)
        connection_id = on_behalf.id if on_behalf is not None else None
        if isinstance(messages, list):
            self.limiter.admit(None, channel, messages)
        events = self._accept(
            principal,
            principal.client_id,
            channel,
            messages,
            fmt,
            connection_id=connection_id,
            id_prefix=id_prefix or f"rest{self._rest_counter}-{secrets.token_hex(4)}",
        )
        self._fan_out(channel, events, publisher=on_behalf, frame_id=None, connection_id=connection_id)
        return [e.serial for e in events]

    def _on_behalf_of(self, messages: list[Any]) -> Connection | None:
        """The realtime connection a REST publish names by ``connectionKey`` (its messages then
        carry that ``connectionId``, as in Ably); 40006 for an unknown key or several keys."""
        given = [m.pop("connectionKey") for m in messages if isinstance(m, dict) and "connectionKey" in m]
        if not given:
            return None
        if not all(isinstance(k, str) for k in given):  # (hashed below: a list one raised TypeError)
            raise EmulatorError("connectionKey must be a string", 40006, 400)
        keys = set(given)
        if len(keys) > 1:
            raise EmulatorError("messages in one publish must share one connectionKey", 40006, 400)
        key = keys.pop()
        conn = self._by_key.get(key)
        if conn is None:
            raise EmulatorError(f"Invalid connectionKey {key!r}", 40006, 400)
        return conn

    def _rest_mutate(
        self, principal: Principal, channel: str, message: dict[str, Any], fmt: str
    ) -> list[Event]:
        self.limiter.admit(None, channel, [message])
        events = self._accept(
            principal, principal.client_id, channel, [message], fmt, connection_id=None, id_prefix=""
        )
        self._fan_out(channel, events, publisher=None, frame_id=None, connection_id=None)
        return events

