"""A local Ably sandbox: provisions one isolated emulator per test app (``POST /apps``).

The contract of Ably's test sandbox as ably-js's node suite uses it with
``ABLY_LOCAL_SANDBOX_URL`` (and ably-common's ``test-resources/test-app-setup.json`` appspec):

* ``POST /apps`` with the appspec's ``post_apps`` body → a fresh :class:`~.server.Emulator` on
  its own port with the app's keys (each with the appspec's capability, enforced), strict tokens,
  the namespaces' rules (``mutableMessages`` → update / delete / append allowed there only) and
  the reply ``{accountId, appId, keys: [{keyName, keySecret, keyStr, capability, …}],
  namespaces, channels, endpoint, port, tls}``; clients are routed to ``endpoint:port``.
* ``DELETE /apps/<appId>`` (Basic auth with one of the app's keys) stops that emulator.

Channel fixtures (``channels[].presence``) are entered as present members of the app's emulator
(``seed_presence``) and kept on the app (:attr:`SandboxApp.channels`).

``async with Sandbox(port=0) as sandbox: sandbox.url`` or ``ai-transport emulator --sandbox``.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .capability import dumps_capability, parse_capability
from .core import log
from .http_io import HttpResponse
from .protocol import EmulatorError, loads_json
from .server import Emulator
from .serving import MAX_BODY, Serving

__all__ = ["Sandbox", "SandboxApp"]


@dataclass
class SandboxApp:
    """One provisioned app: its emulator, keys and appspec fixtures."""

    app_id: str
    emulator: Emulator
    keys: list[dict[str, Any]]
    namespaces: list[dict[str, Any]]
    channels: list[dict[str, Any]] = field(default_factory=list)

    def reply(self, account_id: str) -> dict[str, Any]:
        """The ``POST /apps`` response body."""
        return {
            "accountId": account_id,
            "id": self.app_id,
            "appId": self.app_id,
            "status": "enabled",
            "tlsOnly": False,
            "keys": self.keys,
            "namespaces": self.namespaces,
            "channels": self.channels,
            "endpoint": self.emulator.host,
            "port": self.emulator.port,
            "tls": False,
        }


class Sandbox(Serving):
    """The provisioner: an HTTP server for ``POST /apps`` / ``DELETE /apps/<id>``.

    Every app's emulator binds ``host`` on a free port and lives in the sandbox's event loop.
    ``emulator_options`` are passed to every app's :class:`~.server.Emulator` (e.g.
    ``max_idle_interval``).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, **emulator_options: Any) -> None:
        self.host = host
        self.port = port
        self._requested_port = port
        self.account_id = f"emu-account-{secrets.token_hex(3)}"
        self.apps: dict[str, SandboxApp] = {}
        self.emulator_options = emulator_options
        self._counter = 0

    @property
    def url(self) -> str:
        """``http://host:port`` (the value for ``ABLY_LOCAL_SANDBOX_URL``)."""
        return f"http://{self.host}:{self.port}"

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> Sandbox:
        """Bind and start serving."""
        await self._listen()
        return self

    async def stop(self) -> None:
        """Stop every app's emulator and the provisioner."""
        for app_id in list(self.apps):
            await self.delete_app(app_id)
        await self._close()

    # -- apps --------------------------------------------------------------------------------

    async def create_app(self, spec: Any) -> SandboxApp:
        """Provision an app from an appspec (``post_apps``) and start its emulator."""
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise EmulatorError("the appspec must be a JSON object", 40000, 400)
        key_specs = spec.get("keys") or [{}]
        if not isinstance(key_specs, list) or not all(isinstance(k, dict) for k in key_specs):
            raise EmulatorError("appspec keys must be a list of objects", 40000, 400)
        namespaces = spec.get("namespaces") or []
        if not isinstance(namespaces, list) or not all(
            isinstance(n, dict) and isinstance(n.get("id"), str) for n in namespaces
        ):
            raise EmulatorError("appspec namespaces must be a list of objects with an id", 40000, 400)
        channels = spec.get("channels") or []
        if not isinstance(channels, list):
            raise EmulatorError("appspec channels must be a list", 40000, 400)
        for i, fixture in enumerate(channels):
            members = fixture.get("presence") if isinstance(fixture, dict) else None
            if isinstance(members, list) and not all(isinstance(m, dict) for m in members):
                raise EmulatorError(f"appspec channels[{i}].presence must be a list of objects", 40000, 400)
        self._counter += 1
        app_id = f"app{self._counter}{secrets.token_hex(3)}"
        keys: list[dict[str, Any]] = []
        capabilities: dict[str, Any] = {}
        for index, key_spec in enumerate(key_specs):
            name = f"{app_id}.k{index}"
            secret = secrets.token_urlsafe(24)
            capability = parse_capability(key_spec.get("capability"))
            capabilities[name] = capability
            keys.append(
                {
                    "id": f"k{index}",
                    "keyName": name,
                    "keySecret": secret,
                    "keyStr": f"{name}:{secret}",
                    "value": secret,
                    "capability": key_spec.get("capability") or dumps_capability(capability),
                    "status": 0,
                    "revocableTokens": bool(key_spec.get("revocableTokens", False)),
                }
            )
        mutable = [n["id"] for n in namespaces if n.get("mutableMessages")]
        options = dict(self.emulator_options)
        options.setdefault("strict_tokens", True)
        emulator = Emulator(
            self.host,
            0,
            keys=[k["keyStr"] for k in keys],
            key_capabilities=capabilities,
            mutable_namespaces=mutable,
            revocable_keys=[k["keyName"] for k in keys if k["revocableTokens"]],
            **options,
        )
        await emulator.start()
        try:  # (whatever fails, the app's emulator is not left running: it would leak its port)
            app = SandboxApp(app_id, emulator, keys, [dict(n) for n in namespaces], list(channels))
            for fixture in channels:
                if isinstance(fixture, dict) and isinstance(fixture.get("presence"), list):
                    try:
                        emulator.seed_presence(str(fixture.get("name") or ""), fixture["presence"])
                    except ValueError as exc:
                        raise EmulatorError(f"appspec channel fixture: {exc}", 40000, 400) from None
        except BaseException:
            await emulator.stop()
            raise
        self.apps[app_id] = app
        log.info("sandbox: app %s on %s", app_id, emulator.url)
        return app

    async def delete_app(self, app_id: str) -> bool:
        """Stop and forget an app; False when unknown."""
        app = self.apps.pop(app_id, None)
        if app is None:
            return False
        await app.emulator.stop()
        return True

    # -- HTTP --------------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        """One catch-all route answered by :meth:`_handle` (errors as Ably's JSON error bodies)."""
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{path:.*}", self._on_request)
        return app

    async def _on_request(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:
            resp = await self._handle(request.method.upper(), request.path, request.headers, body)
        except EmulatorError as err:
            resp = HttpResponse(err.status_code, json.dumps({"error": err.to_dict()}).encode())
        except Exception as exc:
            log.exception("sandbox: request failed")
            internal = EmulatorError(f"internal error: {exc}", 50000, 500)
            resp = HttpResponse(500, json.dumps({"error": internal.to_dict()}).encode())
        headers = {"Content-Type": resp.content_type, "Access-Control-Allow-Origin": "*", **resp.headers}
        return web.Response(status=resp.status, body=resp.body, headers=headers)

    async def _handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> HttpResponse:
        parts = [p for p in path.split("/") if p]
        if parts == ["apps"] and method == "POST":
            try:
                spec = loads_json(body) if body else {}
            except ValueError:  # (nested too deeply too: loads_json never raises RecursionError)
                raise EmulatorError("the appspec is not valid JSON", 40000, 400) from None
            app = await self.create_app(spec)
            return HttpResponse(201, json.dumps(app.reply(self.account_id)).encode())
        if len(parts) == 2 and parts[0] == "apps" and method == "DELETE":
            existing = self.apps.get(parts[1])
            if existing is None:
                raise EmulatorError(f"no app {parts[1]!r}", 40400, 404)
            self._check_app_auth(existing, headers.get("authorization"))
            await self.delete_app(parts[1])
            return HttpResponse(204)
        if parts == ["stats"] and method == "POST":
            raise EmulatorError("stats are not emulated", 40400, 404)
        raise EmulatorError(f"no route for {method} {path}", 40400, 404)

    @staticmethod
    def _check_app_auth(app: SandboxApp, authorization: str | None) -> None:
        scheme, _, value = (authorization or "").partition(" ")
        try:
            key = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            key = ""
        if scheme.lower() != "basic" or key not in {k["keyStr"] for k in app.keys}:
            raise EmulatorError("DELETE /apps/<id> needs Basic auth with one of the app's keys", 40101, 401)
