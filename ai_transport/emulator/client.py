"""One-call clients for the emulator: ably-python ``AblyRealtime`` / ``AblyRest`` and ably-js options.

ably-python 3.1.4 builds its realtime URL as ``ws://{host}?{query}`` (the ``port`` option is
ignored there) and its REST URLs as ``urljoin(f"http://{host}:{port}", path)``. Using the
endpoint ``"127.0.0.1:PORT/"`` satisfies both without patching anything: realtime connects to
``ws://127.0.0.1:PORT/?…`` and, because every REST path is absolute, ``urljoin`` discards the
``/:PORT`` tail of the REST base URL, leaving ``http://127.0.0.1:PORT/channels/…``.

Token auth (``token=``) is used by default because the SDK refuses Basic auth over plain HTTP
(40103); the emulator accepts any token string as a wildcard dev token, or pass
``capability=``/``issue_token=True`` to have a real token issued by the emulator.
"""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.parse
import urllib.request
from typing import Any

from .auth import DEFAULT_KEY

__all__ = ["ably_realtime", "ably_rest", "client_options", "connect_info", "endpoint_for", "request_token"]

DEV_TOKEN = "emulator-dev-token"


def _split(url_or_port: int | str) -> tuple[str, int]:
    if isinstance(url_or_port, int):
        return "127.0.0.1", url_or_port
    text = str(url_or_port)
    if text.isdigit():
        return "127.0.0.1", int(text)
    if "://" not in text:
        text = "http://" + text
    parts = urllib.parse.urlsplit(text)
    if parts.port is None:
        raise ValueError(f"url_or_port: {url_or_port!r} has no port")
    return parts.hostname or "127.0.0.1", parts.port


def _resolve(target: Any) -> tuple[str, int]:
    """Accept a port, ``host:port``, a URL, or an object with ``host``/``port`` (Emulator, EmulatorThread)."""
    if hasattr(target, "port") and not isinstance(target, (int, str)):
        host = getattr(target, "host", None) or getattr(
            getattr(target, "emulator", None), "host", "127.0.0.1"
        )
        return str(host), int(target.port)
    return _split(target)


def endpoint_for(url_or_port: Any) -> str:
    """The ably-python ``endpoint`` value that reaches the emulator for realtime and REST."""
    host, port = _resolve(url_or_port)
    return f"{host}:{port}/"


def request_token(
    url_or_port: Any,
    *,
    key: str = DEFAULT_KEY,
    capability: dict[str, list[str]] | None = None,
    client_id: str | None = None,
    ttl_ms: int | None = None,
) -> dict[str, Any]:
    """Issue a token from the emulator (blocking HTTP call); returns TokenDetails.

    Safe to call from a coroutine only outside the emulator's own loop (e.g. the emulator runs
    in :class:`~ai_transport.emulator.EmulatorThread` or another process).
    """
    host, port = _resolve(url_or_port)
    name = key.partition(":")[0]
    body: dict[str, Any] = {"keyName": name}
    if capability is not None:
        body["capability"] = json.dumps(capability)
    if client_id is not None:
        body["clientId"] = client_id
    if ttl_ms is not None:
        body["ttl"] = ttl_ms
    req = urllib.request.Request(
        f"http://{host}:{port}/keys/{urllib.parse.quote(name, safe='')}/requestToken",
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": "Basic " + base64.b64encode(key.encode()).decode(),
        },
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def client_options(
    url_or_port: Any,
    *,
    client_id: str | None = None,
    token: str | None = None,
    use_binary_protocol: bool = True,
    **opts: Any,
) -> dict[str, Any]:
    """Keyword options for ``AblyRealtime(**…)`` / ``AblyRest(**…)`` pointing at the emulator."""
    host, port = _resolve(url_or_port)
    options: dict[str, Any] = {
        "endpoint": f"{host}:{port}/",
        "tls": False,
        "port": port,
        "use_binary_protocol": use_binary_protocol,
        "fallback_hosts": [],
        "realtime_request_timeout": 3000,
        "connectivity_check_url": f"http://{host}:{port}/is-the-internet-up.txt",
        "disconnected_retry_timeout": 500,
        "suspended_retry_timeout": 1000,
        "channel_retry_timeout": 1000,
    }
    if "key" not in opts and "auth_callback" not in opts and "auth_url" not in opts:
        options["token"] = token or DEV_TOKEN
    if client_id is not None:
        options["client_id"] = client_id
    options.update(opts)
    return options


def ably_realtime(
    url_or_port: Any,
    *,
    client_id: str | None = None,
    token: str | None = None,
    use_binary_protocol: bool = True,
    **opts: Any,
) -> Any:
    """An ``ably.AblyRealtime`` connected (auto_connect) to the emulator. Needs a running loop.

    ``token``: a token issued by the emulator (see :func:`request_token`) to get capability
    enforcement; default a dev token (all capabilities, any ``client_id``). Other keyword
    options go to ``AblyRealtime`` unchanged. REST calls (history, get_message, versions) on
    the returned client reach the emulator too.
    """
    from ably import AblyRealtime

    asyncio.get_running_loop()  # AblyRealtime needs one; fail clearly otherwise
    return AblyRealtime(
        **client_options(
            url_or_port, client_id=client_id, token=token, use_binary_protocol=use_binary_protocol, **opts
        )
    )


def ably_rest(
    url_or_port: Any,
    *,
    client_id: str | None = None,
    token: str | None = None,
    use_binary_protocol: bool = True,
    **opts: Any,
) -> Any:
    """An ``ably.AblyRest`` talking to the emulator (same options as :func:`ably_realtime`)."""
    from ably import AblyRest

    options = client_options(
        url_or_port, client_id=client_id, token=token, use_binary_protocol=use_binary_protocol, **opts
    )
    for realtime_only in (
        "realtime_request_timeout",
        "disconnected_retry_timeout",
        "suspended_retry_timeout",
        "channel_retry_timeout",
        "connectivity_check_url",
    ):
        if realtime_only not in opts:
            options.pop(realtime_only, None)
    return AblyRest(**options)


def connect_info(
    url_or_port: Any,
    *,
    client_id: str | None = None,
    token: str | None = None,
    use_binary_protocol: bool = True,
) -> dict[str, Any]:
    """ably-js ``ClientOptions`` (JSON-safe) for the emulator: endpoint, port, tls false, token …"""
    host, port = _resolve(url_or_port)
    options: dict[str, Any] = {
        "endpoint": host,
        "port": port,
        "tls": False,
        "token": token or DEV_TOKEN,
        "useBinaryProtocol": use_binary_protocol,
        "fallbackHosts": [],
        "realtimeRequestTimeout": 3000,
        "disconnectedRetryTimeout": 500,
        "suspendedRetryTimeout": 1000,
        "channelRetryTimeout": 1000,
        "connectivityCheckUrl": f"http://{host}:{port}/is-the-internet-up.txt",
    }
    if client_id is not None:
        options["clientId"] = client_id
    return options
