"""Keys, tokens and capabilities for the emulator.

* Key auth: ``key=<name>:<secret>`` (realtime) or ``Authorization: Basic base64(name:secret)``
  (REST); the secret must match a configured key. A key grants its configured capability
  (``key_capabilities``; every capability when none is configured).
* Token auth: ``accessToken`` / ``access_token`` (realtime) or ``Authorization: Bearer
  base64(token)`` (REST); an Ably JWT signed with a configured key is verified (:mod:`.jwt`).
  Tokens issued by ``POST /keys/{keyName}/requestToken`` carry their capability, ``clientId``
  and expiry, all enforced. **Dev mode**: any other token string is accepted as a wildcard
  token (every capability, any ``clientId``), unless the emulator was created with
  ``strict_tokens=True``.

Capabilities (parsing, matching, the key/token intersection): :mod:`.capability`. Token
requests are validated as Ably does: a timestamp more than :data:`TIMESTAMP_WINDOW_MS` from the
server clock (40104), a nonce reused with the same timestamp (40101), a ttl that is not a
positive integer up to :data:`MAX_TTL_MS` (40003), an empty clientId (40012) are refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import secrets
from dataclasses import dataclass
from typing import Any

from .capability import capability_allows, dumps_capability, intersect, parse_capability, resource_matches
from .jwt import header_kid, looks_like_jwt
from .jwt import verify as verify_jwt
from .protocol import EmulatorError
from .store import now_ms

__all__ = ["DEFAULT_KEY", "Authority", "Principal", "capability_allows"]

#: The well-known development key every emulator accepts unless configured otherwise.
DEFAULT_KEY = "local.dev:secret"

DEFAULT_TTL_MS = 60 * 60 * 1000
#: The longest token a token request may ask for (Ably: 24 hours).
MAX_TTL_MS = 24 * 60 * 60 * 1000
#: How far a token request's timestamp may be from the server clock.
TIMESTAMP_WINDOW_MS = 10 * 60 * 1000


@dataclass
class Principal:
    """Who a connection or request acts as."""

    key_name: str | None = None
    token: str | None = None
    capability: dict[str, list[str]] | None = None  # None = everything
    client_id: str | None = None  # None = anonymous; "*" = may assume any clientId
    expires: int | None = None
    issued: int | None = None  # issued tokens: when (ms)
    revocation_key: str | None = None  # issued tokens: the token request's revocationKey
    revoked_at: int | None = None  # set by token revocation: unusable from then on (40141)

    def allows(self, channel: str, operation: str) -> bool:
        """True when the capability grants ``operation`` on ``channel``."""
        return capability_allows(self.capability, channel, operation)

    def allows_any(self, channel: str) -> bool:
        """True when the capability grants anything on ``channel``."""
        if self.capability is None:
            return True
        return any(resource_matches(res, channel) and ops for res, ops in self.capability.items())

    def check(self, channel: str, operation: str) -> None:
        """Raise 40160 unless ``operation`` is allowed on ``channel``."""
        if not self.allows(channel, operation):
            raise EmulatorError(
                f"Channel denied access based on given capability; operation {operation!r} on channel {channel!r}",
                40160,
                401,
            )

    def check_expiry(self) -> None:
        """Raise 40142 when the token has expired, 40141 when it has been revoked."""
        if self.revoked_at is not None and now_ms() >= self.revoked_at:
            raise EmulatorError("Token revoked", 40141, 401)
        if self.expires is not None and now_ms() > self.expires:
            raise EmulatorError("Token expired", 40142, 401)


class Authority:
    """The emulator's keys and issued tokens."""

    def __init__(
        self,
        keys: list[str] | None = None,
        *,
        strict_tokens: bool = False,
        key_capabilities: dict[str, Any] | None = None,
    ) -> None:
        self.keys: dict[str, str] = {}
        for key in keys if keys is not None else [DEFAULT_KEY]:
            name, _, secret = key.partition(":")
            if not name or not secret:
                raise ValueError(f"keys: {key!r} is not '<name>:<secret>'")
            self.keys[name] = secret
        self.strict_tokens = strict_tokens
        self.tokens: dict[str, Principal] = {}
        #: key name -> its capability (absent = everything)
        self.key_capabilities: dict[str, dict[str, list[str]] | None] = {
            name: parse_capability(cap) for name, cap in (key_capabilities or {}).items()
        }
        # (keyName, timestamp, nonce) of the signed token requests seen, while inside the window
        self._nonces: dict[tuple[str, int, str], int] = {}

    # -- credentials -------------------------------------------------------------------------

    def by_key(self, key: str, client_id: str | None = None) -> Principal:
        """Authenticate ``name:secret``; 40101 when unknown."""
        name, _, secret = key.partition(":")
        expected = self.keys.get(name)
        if expected is None or not hmac.compare_digest(expected, secret):
            raise EmulatorError("Invalid key in request", 40101, 401)
        return Principal(key_name=name, capability=self.key_capabilities.get(name), client_id=client_id)

    def by_token(self, token: str) -> Principal:
        """Authenticate a token string (issued, or any string in dev mode)."""
        if not token:
            raise EmulatorError("Token string is empty", 40101, 401)
        issued = self.tokens.get(token)
        if issued is not None:
            issued.check_expiry()
            return issued
        if looks_like_jwt(token) and (self.strict_tokens or header_kid(token) in self.keys):
            return self._by_jwt(token)
        if self.strict_tokens:
            raise EmulatorError("Token not recognised", 40101, 401)
        return Principal(token=token, client_id="*")

    def _by_jwt(self, token: str) -> Principal:
        grant = verify_jwt(token, self.keys)
        if grant.inner_token is not None:
            inner = self.tokens.get(grant.inner_token)
            if inner is None:
                raise EmulatorError("The JWT's embedded token is not recognised", 40101, 401)
            inner.check_expiry()
            return inner
        assert grant.key_name is not None
        capability = intersect(parse_capability(grant.capability), self.key_capabilities.get(grant.key_name))
        return Principal(
            key_name=grant.key_name, token=token, capability=capability, client_id=grant.client_id, expires=grant.expires
        )

    def from_header(self, authorization: str | None, client_id_header: str | None = None) -> Principal:
        """Authenticate a REST ``Authorization`` header (Basic key or Bearer token)."""
        if not authorization:
            raise EmulatorError("Unable to authenticate: no credentials", 40101, 401)
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "basic":
            try:
                key = base64.b64decode(value, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                raise EmulatorError("Malformed Basic credentials", 40101, 401) from None
            cid = None
            if client_id_header:
                try:
                    cid = base64.b64decode(client_id_header).decode("utf-8")
                except (binascii.Error, ValueError):
                    cid = client_id_header
            return self.by_key(key, cid)
        if scheme.lower() == "bearer":
            token = value
            if token not in self.tokens:
                try:
                    decoded = base64.b64decode(value, validate=True).decode("utf-8")
                    if decoded.isprintable():
                        token = decoded
                except (binascii.Error, ValueError):
                    pass
            return self.by_token(token)
        raise EmulatorError(f"Unsupported authorization scheme {scheme!r}", 40101, 401)

    # -- tokens ------------------------------------------------------------------------------

    def issue(
        self,
        key_name: str,
        *,
        capability: dict[str, list[str]] | None = None,
        client_id: str | None = None,
        ttl: int | None = None,
        revocation_key: str | None = None,
    ) -> dict[str, Any]:
        """Issue a token and return its TokenDetails (``capability`` is intersected with the key's).

        An anonymous token's TokenDetails carry no ``clientId``.
        """
        capability = intersect(capability, self.key_capabilities.get(key_name))
        issued = now_ms()
        expires = issued + (int(ttl) if ttl else DEFAULT_TTL_MS)
        token = f"emu.{key_name}.{secrets.token_urlsafe(18)}"
        self.tokens[token] = Principal(
            key_name=key_name,
            token=token,
            capability=capability,
            client_id=client_id,
            expires=expires,
            issued=issued,
            revocation_key=revocation_key,
        )
        details: dict[str, Any] = {
            "token": token,
            "keyName": key_name,
            "issued": issued,
            "expires": expires,
            "capability": dumps_capability(capability),
        }
        if client_id is not None:
            details["clientId"] = client_id
        return details

    def request_token(self, key_name: str, body: Any, authorization: str | None) -> dict[str, Any]:
        """Handle ``POST /keys/{key_name}/requestToken`` (signed TokenRequest or key-authorised)."""
        if key_name not in self.keys:
            raise EmulatorError(f"No key named {key_name!r}", 40400, 404)
        if not isinstance(body, dict):
            body = {}
        if body.get("keyName") not in (None, key_name):
            raise EmulatorError("keyName does not match the request path", 40101, 401)
        mac = body.get("mac")
        if mac:
            text = "\n".join(
                [
                    key_name,
                    str(body.get("ttl") or ""),
                    str(body.get("capability") or ""),
                    str(body.get("clientId") or ""),
                    str(body.get("timestamp") or 0),
                    str(body.get("nonce") or ""),
                    "",
                ]
            )
            expected = base64.b64encode(
                hmac.new(self.keys[key_name].encode(), text.encode("utf-8"), hashlib.sha256).digest()
            ).decode("ascii")
            if not hmac.compare_digest(expected, str(mac)):
                raise EmulatorError("Invalid mac in token request", 40101, 401)
        else:
            principal = self.from_header(authorization)
            if principal.key_name != key_name:
                raise EmulatorError("A token request without a mac must be authorised by its key", 40101, 401)
        ttl = _check_ttl(body.get("ttl"))
        if mac:
            self._check_timestamp_and_nonce(key_name, body)
        capability = parse_capability(body.get("capability"))
        client_id = body.get("clientId")
        if client_id == "":
            raise EmulatorError("clientId must be a non-empty string", 40012, 400)
        if client_id is not None and not isinstance(client_id, str):
            raise EmulatorError("clientId must be a string", 40012, 400)
        revocation_key = body.get("revocationKey")
        return self.issue(
            key_name,
            capability=capability,
            client_id=client_id,
            ttl=ttl,
            revocation_key=revocation_key if isinstance(revocation_key, str) else None,
        )

    def _check_timestamp_and_nonce(self, key_name: str, body: dict[str, Any]) -> None:
        now = now_ms()
        timestamp = body.get("timestamp")
        if isinstance(timestamp, str) and timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 20:
            timestamp = int(timestamp)  # ("²".isdigit(), and int() refuses past 4300 digits)
        if (
            isinstance(timestamp, bool)
            or not isinstance(timestamp, (int, float))
            or (isinstance(timestamp, float) and not math.isfinite(timestamp))
        ):
            raise EmulatorError("Token request timestamp is missing or not a (finite) number", 40003, 400)
        if abs(now - timestamp) > TIMESTAMP_WINDOW_MS:
            raise EmulatorError("Timestamp not current", 40104, 401)
        nonce = body.get("nonce")
        if not isinstance(nonce, str) or not nonce:
            raise EmulatorError("Token request nonce must be a non-empty string", 40003, 400)
        for seen, ts in list(self._nonces.items()):
            if now - ts > TIMESTAMP_WINDOW_MS:
                del self._nonces[seen]
        # a replay is the same signed (timestamp, nonce) pair: Ably accepts a used nonce again
        # under a new timestamp (ably-python's suite reuses one fixed nonce across requests)
        slot = (key_name, int(timestamp), nonce)
        if slot in self._nonces:
            raise EmulatorError("Token request nonce already used", 40101, 401)
        self._nonces[slot] = int(timestamp)


def _check_ttl(value: Any) -> int | None:
    """A token request's ``ttl`` (ms) as an int; None when absent; 40003 when invalid."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise EmulatorError(f"ttl must be an integer number of ms, got {value!r}", 40003, 400) from None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not value.is_integer())  # (NaN and Infinity are not)
    ):
        raise EmulatorError(f"ttl must be an integer number of ms, got {value!r}", 40003, 400)
    if value <= 0:
        raise EmulatorError(f"ttl must be positive, got {value}", 40003, 400)
    if value > MAX_TTL_MS:
        raise EmulatorError(f"ttl {value} exceeds the maximum token lifetime {MAX_TTL_MS} ms", 40003, 400)
    return int(value)

