"""Least-privilege Ably credentials for the two roles of a conversation (see ``docs/SECURITY.md``).

A **browser** (or any end-user client) gets an identified ``clientId`` and, on its conversation
channels only, ``subscribe`` / ``publish`` / ``history`` / ``presence``: it can send prompts,
approvals and tool results, read the conversation and hydrate from history, but it cannot update,
append to or delete anyone's messages (no ``message-update-*`` / ``message-delete-*``). An **agent**
gets its own ``clientId`` and, in addition, ``message-update-own`` / ``message-delete-own``: it
streams by appending to its own messages and nobody else's.

With those credentials Ably itself enforces what the sessions' trust rules assume: every message's
``clientId`` (and an operation's ``version.clientId``) is the publisher's identity, and only the
agent can change what the agent published.

* :func:`browser_capability` / :func:`agent_capability`: the capability maps.
* :func:`browser_token_params` / :func:`agent_token_params`: ably-python ``TokenParams`` dicts
  (``client_id``, ``capability``, ``ttl``) for ``rest.auth.request_token(token_params=...)``.
* :func:`create_token_request`: a signed ``TokenRequest`` (Ably's HMAC-SHA256 ``mac``), computed
  locally from the key — return it from your ``authUrl`` endpoint or an ``authCallback`` (ably-js) /
  ``auth_callback`` (ably-python); the SDK exchanges it at ``/keys/{keyName}/requestToken`` (real
  Ably or the emulator).
* :func:`token_request_callback`: an ably-python ``auth_callback`` that answers with
  :func:`create_token_request` (token auth from a key held by the process itself, e.g. an agent).
* :func:`request_token`: issue a token with the ``ably`` SDK (``AblyRest``) from a key.

Never ship the key to a browser: serve token requests from your server, scoped to the user.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

from .errors import InvalidArgumentError, type_name

__all__ = [
    "AGENT_OPERATIONS",
    "BROWSER_OPERATIONS",
    "DEFAULT_TTL_MS",
    "agent_capability",
    "agent_token_params",
    "browser_capability",
    "browser_token_params",
    "create_token_request",
    "request_token",
    "token_request_callback",
]

#: What an end-user client may do on its conversation channels (no mutation of any message).
BROWSER_OPERATIONS: Final = ("subscribe", "publish", "history", "presence")
#: What an agent may do: the browser's operations plus updating / deleting its own messages.
AGENT_OPERATIONS: Final = (*BROWSER_OPERATIONS, "message-update-own", "message-delete-own")
#: Token lifetime by default: one hour.
DEFAULT_TTL_MS: Final = 60 * 60 * 1000
_MAX_TTL_MS = 24 * 60 * 60 * 1000


def _channels(channels: str | Iterable[str], what: str) -> list[str]:
    names = [channels] if isinstance(channels, str) else list(channels)
    if not names:
        raise InvalidArgumentError(f"unable to build {what}; channels must name at least one channel")
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(
                f"unable to build {what}; channels[{i}] must be a non-empty string, got {type_name(name)}"
            )
    return names


def _client_id(client_id: Any, what: str) -> str:
    if not isinstance(client_id, str) or not client_id:
        raise InvalidArgumentError(
            f"unable to build {what}; client_id must be a non-empty string (an identified client), "
            f"got {type_name(client_id)}"
        )
    if client_id == "*":
        raise InvalidArgumentError(
            f"unable to build {what}; client_id must not be the wildcard '*' (it may assume any identity)"
        )
    return client_id


def _ttl(ttl_ms: Any, what: str) -> int:
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not 0 < ttl_ms <= _MAX_TTL_MS:
        raise InvalidArgumentError(
            f"unable to build {what}; ttl_ms must be an integer in 1..{_MAX_TTL_MS} (24 h), got {ttl_ms!r}"
        )
    return ttl_ms


def browser_capability(channels: str | Iterable[str]) -> dict[str, list[str]]:
    """``{channel: [subscribe, publish, history, presence]}`` for each channel (names or
    ``namespace:*`` patterns): no ``message-update-*`` / ``message-delete-*``."""
    return {name: list(BROWSER_OPERATIONS) for name in _channels(channels, "browser capability")}


def agent_capability(channels: str | Iterable[str] = "*") -> dict[str, list[str]]:
    """``{channel: [subscribe, publish, history, presence, message-update-own, message-delete-own]}``."""
    return {name: list(AGENT_OPERATIONS) for name in _channels(channels, "agent capability")}


def _params(client_id: str, capability: Mapping[str, list[str]], ttl_ms: int) -> dict[str, Any]:
    return {
        "client_id": client_id,
        "capability": json.dumps(dict(capability), separators=(",", ":")),
        "ttl": ttl_ms,
    }


def browser_token_params(
    client_id: str, channels: str | Iterable[str], *, ttl_ms: int = DEFAULT_TTL_MS
) -> dict[str, Any]:
    """ably-python ``TokenParams`` for an end user: identified ``client_id`` (required, not ``*``),
    :func:`browser_capability` on ``channels``, ``ttl_ms`` (default 1 h)."""
    what = "browser token params"
    return _params(_client_id(client_id, what), browser_capability(channels), _ttl(ttl_ms, what))


def agent_token_params(
    client_id: str = "agent", channels: str | Iterable[str] = "*", *, ttl_ms: int = DEFAULT_TTL_MS
) -> dict[str, Any]:
    """ably-python ``TokenParams`` for an agent: its own ``client_id`` (default ``agent``; the
    sessions' ``trusted_agent_ids``), :func:`agent_capability` on ``channels``, ``ttl_ms``."""
    what = "agent token params"
    return _params(_client_id(client_id, what), agent_capability(channels), _ttl(ttl_ms, what))


def create_token_request(
    key: str,
    token_params: Mapping[str, Any],
    *,
    timestamp_ms: int | None = None,
    nonce: str | None = None,
) -> dict[str, Any]:
    """A signed ``TokenRequest`` (JSON shape: ``keyName``, ``ttl``, ``capability``, ``clientId``,
    ``timestamp``, ``nonce``, ``mac``) for ``token_params`` (from :func:`browser_token_params` /
    :func:`agent_token_params`), signed with ``key`` (``name:secret``) as the Ably SDKs sign it.

    Serve it from an ``authUrl`` or return it from an auth callback; the client exchanges it for a
    token. The secret never leaves your server.
    """
    if not isinstance(key, str) or ":" not in key:
        raise InvalidArgumentError("unable to create token request; key must be an Ably key 'name:secret'")
    key_name, _, secret = key.partition(":")
    if not key_name or not secret:
        raise InvalidArgumentError("unable to create token request; key must be an Ably key 'name:secret'")
    if not isinstance(token_params, Mapping):
        raise InvalidArgumentError(
            f"unable to create token request; token_params must be a mapping, got {type_name(token_params)}"
        )
    ttl = token_params.get("ttl")
    capability = token_params.get("capability")
    client_id = token_params.get("client_id", token_params.get("clientId"))
    if isinstance(capability, Mapping):
        capability = json.dumps(dict(capability), separators=(",", ":"))
    request: dict[str, Any] = {
        "keyName": key_name,
        "ttl": ttl,
        "capability": capability,
        "clientId": client_id,
        "timestamp": int(timestamp_ms if timestamp_ms is not None else time.time() * 1000),
        "nonce": nonce or secrets.token_hex(16),
    }
    text = "\n".join(
        str(v) if v is not None else ""
        for v in (
            key_name,
            request["ttl"],
            request["capability"],
            request["clientId"],
            request["timestamp"],
            request["nonce"],
        )
    ) + "\n"
    request["mac"] = base64.b64encode(hmac.new(secret.encode(), text.encode(), hashlib.sha256).digest()).decode()
    return {k: v for k, v in request.items() if v is not None}


def token_request_callback(
    key: str, token_params: Mapping[str, Any]
) -> Callable[[Any], Awaitable[dict[str, Any]]]:
    """An ably-python ``auth_callback`` (``AblyRealtime(auth_callback=...)``) that signs a fresh
    :func:`create_token_request` for ``token_params`` each time the SDK needs a token (also on
    renewal). The SDK's own token params are ignored: the capability is the one given here."""
    create_token_request(key, token_params)  # fail now on a bad key / params, not at connect time
    params = dict(token_params)

    async def callback(_sdk_params: Any) -> dict[str, Any]:
        return create_token_request(key, params)

    return callback


async def request_token(key: str, token_params: Mapping[str, Any], **rest_options: Any) -> Any:
    """Issue a token with the ``ably`` SDK: ``AblyRest(key=key, **rest_options).auth.request_token``.

    ``rest_options`` reach ``AblyRest`` (for the emulator: the options of
    :func:`ai_transport.emulator.client.client_options` without a token). Returns ``TokenDetails``.
    """
    from ably import AblyRest

    options = {k: v for k, v in rest_options.items() if k != "token"}
    rest = AblyRest(key=key, **options)
    try:
        return await rest.auth.request_token(token_params=dict(token_params))
    finally:
        await rest.close()
