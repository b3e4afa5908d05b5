"""Ably JWTs (emulator/jwt.py, HS256 through PyJWT): a token an app's server builds by hand, as
Ably's docs describe it, verifies; a forged, tampered or other-algorithm one is refused 40144."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest

from ai_transport.emulator import jwt
from ai_transport.emulator.protocol import EmulatorError

KEYS = {"app.k1": "s1-secret", "app.k2": "s2-secret"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def by_hand(header: dict[str, object], claims: dict[str, object], secret: str) -> str:
    """An Ably JWT as an app server without a JWT library makes it (HMAC-SHA256 over the two parts)."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    mac = hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(mac)}"


def _code(token: str) -> int:
    with pytest.raises(EmulatorError) as info:
        jwt.verify(token, KEYS)
    return info.value.code


def test_a_hand_made_ably_jwt_verifies_with_its_claims() -> None:
    exp = int(time.time()) + 60
    claims = {"iat": exp - 60, "exp": exp, "x-ably-clientId": "jo", "x-ably-capability": '{"a":["subscribe"]}'}
    token = by_hand({"typ": "JWT", "alg": "HS256", "kid": "app.k1"}, claims, "s1-secret")
    assert jwt.looks_like_jwt(token)
    grant = jwt.verify(token, KEYS)
    assert (grant.key_name, grant.client_id, grant.expires) == ("app.k1", "jo", exp * 1000)
    assert grant.capability == '{"a":["subscribe"]}'
    # and the emulator's own signer makes the same kind of token
    mine = jwt.verify(jwt.sign("app.k2", "s2-secret", {"exp": exp, "x-ably-token": "inner"}), KEYS)
    assert (mine.key_name, mine.inner_token) == ("app.k2", "inner")


def test_forged_tampered_and_other_algorithm_tokens_are_refused() -> None:
    exp = int(time.time()) + 60
    header = {"typ": "JWT", "alg": "HS256", "kid": "app.k1"}
    assert _code(by_hand(header, {"exp": exp}, "not-the-secret")) == 40144
    good = by_hand(header, {"exp": exp, "x-ably-clientId": "jo"}, "s1-secret")
    head, _, sig = good.split(".")
    tampered = f"{head}.{_b64(json.dumps({'exp': exp, 'x-ably-clientId': 'admin'}).encode())}.{sig}"
    assert _code(tampered) == 40144
    assert _code(by_hand(dict(header, alg="HS384"), {"exp": exp}, "s1-secret")) == 40144
    unsigned = f"{_b64(json.dumps(dict(header, alg='none')).encode())}.{_b64(json.dumps({'exp': exp}).encode())}."
    assert _code(unsigned) == 40144
    assert _code(by_hand(header, {"exp": exp - 120}, "s1-secret")) == 40142
    assert _code(by_hand(dict(header, kid="app.k9"), {"exp": exp}, "s1-secret")) == 40101
    assert _code(by_hand(dict(header, kid="other.k1"), {"exp": exp}, "s1-secret")) == 40400
