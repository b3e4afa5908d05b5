"""Ably JWTs: a token string the app's own server signs with an API key (HS256), no token request.

Format (Ably's "Ably JWT"): header ``{"typ": "JWT", "alg": "HS256", "kid": "<keyName>"}``, claims
``iat`` / ``exp`` (seconds), optional ``x-ably-capability`` (capability JSON text) and
``x-ably-clientId``; signature HMAC-SHA256 over ``base64url(header).base64url(claims)`` with the
key's secret. An **embedded token** JWT carries an Ably token in ``x-ably-token`` instead (its
header has ``"x-ably-token"`` as ``typ`` or the claim alone); the inner token then applies.

:func:`looks_like_jwt` tells a JWT from an opaque token; :func:`verify` checks one against the
keys and returns its grant (key name, capability ∩ the key's, clientId, expiry in ms) or the
inner token; errors: 40144 (malformed / bad signature), 40101 (unknown key of this app), 40400
(a key of another app), 40142 (expired). The signature is made and checked by PyJWT (HS256 only:
a token naming another ``alg`` is refused before any key is used); the Ably claims are read here.
"""

from __future__ import annotations

import base64
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any

import jwt as pyjwt
from jwt.warnings import InsecureKeyLengthWarning

from .protocol import EmulatorError, loads_json

__all__ = ["JwtGrant", "header_kid", "looks_like_jwt", "sign", "verify"]

#: The latest ``exp`` (seconds) honoured: the last instant a JS ``Date`` holds (8.64e15 ms).
MAX_EXP_S = 8.64e12


@dataclass
class JwtGrant:
    """What a verified JWT grants (``inner_token`` set for an embedded-token JWT)."""

    key_name: str | None
    capability: Any = None
    client_id: str | None = None
    expires: int | None = None  # ms
    inner_token: str | None = None


def _b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _json_part(part: str) -> Any:
    """A JWT part's JSON value; ValueError (binascii.Error is one) when it is not one."""
    return loads_json(_b64url_decode(part))


def looks_like_jwt(token: str) -> bool:
    """Whether ``token`` has the three dot-separated parts of a JWT with a JSON header."""
    parts = token.split(".")
    if len(parts) != 3 or not all(parts[:2]):
        return False
    try:
        header = _json_part(parts[0])
    except ValueError:
        return False
    return isinstance(header, dict) and "alg" in header


def header_kid(token: str) -> str | None:
    """The ``kid`` of a JWT's header when it is a string (None when absent, unreadable or not one)."""
    try:
        header = _json_part(token.split(".")[0])
    except ValueError:
        return None
    kid = header.get("kid") if isinstance(header, dict) else None
    return kid if isinstance(kid, str) else None


def _expires(exp: Any) -> int | None:
    """``exp`` (seconds) as ms; None when it is not a number; 40144 when not a finite one in range."""
    if isinstance(exp, bool) or not isinstance(exp, (int, float)):
        return None
    if not (isinstance(exp, int) or math.isfinite(exp)) or abs(exp) > MAX_EXP_S:
        raise EmulatorError(f"Malformed JWT: exp must be a finite number of seconds up to {MAX_EXP_S:.0f}", 40144, 401)
    return int(exp * 1000)


def sign(key_name: str, secret: str, claims: dict[str, Any]) -> str:
    """An HS256 Ably JWT for ``claims`` signed with the key ``key_name:secret`` (for tests/tools)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureKeyLengthWarning)  # an app's key secret is its own
        return pyjwt.encode(claims, secret, algorithm="HS256", headers={"typ": "JWT", "kid": key_name})


def _check_signature(token: str, secret: str) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureKeyLengthWarning)
            pyjwt.PyJWS().decode_complete(token, key=secret, algorithms=["HS256"])
    except pyjwt.InvalidSignatureError:
        raise EmulatorError("Invalid JWT signature", 40144, 401) from None
    except pyjwt.PyJWTError:
        raise EmulatorError("Malformed JWT", 40144, 401) from None


def verify(token: str, keys: dict[str, str], now_ms: int | None = None) -> JwtGrant:
    """Verify an Ably JWT against ``keys`` (name -> secret); raise :class:`EmulatorError` if invalid."""
    try:
        head_b64, body_b64, _sig_b64 = token.split(".")
        header = _json_part(head_b64)
        claims = _json_part(body_b64)
    except ValueError:
        raise EmulatorError("Malformed JWT", 40144, 401) from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise EmulatorError("Malformed JWT", 40144, 401)
    if header.get("alg") != "HS256":
        raise EmulatorError(f"Unsupported JWT algorithm {header.get('alg')!r}", 40144, 401)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    expires = _expires(claims.get("exp"))
    if expires is not None and now >= expires:
        raise EmulatorError("Token expired", 40142, 401)
    kid = header.get("kid")
    secret = keys.get(kid) if isinstance(kid, str) else None
    if secret is None:
        app = kid.split(".", 1)[0] if isinstance(kid, str) else None
        if app is not None and not any(name.split(".", 1)[0] == app for name in keys):
            raise EmulatorError(f"No application found with id {app!r}", 40400, 404)
        raise EmulatorError(f"JWT signed by an unknown key {kid!r}", 40101, 401)
    _check_signature(token, secret)
    inner = claims.get("x-ably-token")
    if isinstance(inner, str) and inner:
        return JwtGrant(key_name=kid, expires=expires, inner_token=inner)
    client_id = claims.get("x-ably-clientId")
    return JwtGrant(
        key_name=kid,
        capability=claims.get("x-ably-capability"),
        client_id=client_id if isinstance(client_id, str) and client_id else None,
        expires=expires,
    )
