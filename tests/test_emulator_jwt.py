"""Ably JWTs (emulator/jwt.py, HS256 through PyJWT): a token an app's server builds by hand, as
Ably's docs describe it, verifies; a forged, tampered or other-algorithm one is refused 40144."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import httpx
import pytest
from support_emulator import RawClient

from ai_transport.emulator import Emulator, jwt
from ai_transport.emulator.auth import Authority
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


def _unsigned(header: dict[str, object], claims_json: str) -> str:
    """A JWT whose claims are raw JSON text (``NaN``, ``1e308``) and whose signature is garbage."""
    return f"{_b64(json.dumps(header).encode())}.{_b64(claims_json.encode())}.{_b64(b'x')}"


@pytest.mark.parametrize("exp", ["1e308", "NaN", "Infinity", "-Infinity", "1e13", str(10**400)])
def test_an_exp_that_is_not_a_finite_time_is_malformed(exp: str) -> None:
    """``int(exp * 1000)`` raised OverflowError / ValueError (HTTP 500, an escaped websocket handler)."""
    header = {"typ": "JWT", "alg": "HS256", "kid": "app.k1"}
    assert _code(_unsigned(header, '{"exp":' + exp + "}")) == 40144
    assert _code(by_hand(header, json.loads('{"exp":' + exp + "}"), "s1-secret")) == 40144


@pytest.mark.parametrize("kid", [["app.k1"], {"a": 1}, 5, None])
def test_a_kid_that_is_not_a_string_is_an_unknown_key(kid: object) -> None:
    """A list / dict ``kid`` was hashed (``kid in keys``): TypeError, HTTP 500."""
    token = by_hand({"typ": "JWT", "alg": "HS256", "kid": kid}, {"exp": int(time.time()) + 60}, "s1-secret")
    assert jwt.header_kid(token) is None
    assert _code(token) == 40101
    strict = Authority(["app.k1:s1-secret"], strict_tokens=True)
    with pytest.raises(EmulatorError) as info:
        strict.by_token(token)
    assert info.value.code == 40101
    # in dev mode a JWT of no configured key is any other token string: a wildcard dev token
    assert Authority(["app.k1:s1-secret"]).by_token(token).client_id == "*"


def test_a_deeply_nested_jwt_part_is_not_a_jwt_or_malformed() -> None:
    """``json.loads`` of a part nested past the recursion limit raised RecursionError (HTTP 500)."""
    deep = _b64(b"[" * 5000 + b"]" * 5000)
    assert not jwt.looks_like_jwt(f"{deep}.{deep}.x")
    head = _b64(json.dumps({"alg": "HS256", "kid": "app.k1"}).encode())
    assert _code(f"{head}.{deep}.x") == 40144
    deep_exp = _b64(b'{"exp":' + b"[" * 5000 + b"]" * 5000 + b"}")
    assert _code(f"{head}.{deep_exp}.x") == 40144


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": "Bearer " + token}


async def test_hostile_jwts_get_401_over_rest_and_an_error_frame_over_the_websocket() -> None:
    header = {"typ": "JWT", "alg": "HS256", "kid": "local.dev"}
    tokens = {
        _unsigned(header, '{"exp":1e308}'): 40144,
        _unsigned(header, '{"exp":NaN}'): 40144,
        _unsigned(header, '{"exp":Infinity}'): 40144,
        _unsigned(dict(header, kid=["a"]), "{}"): 40101,
        _unsigned(dict(header, kid={"a": 1}), "{}"): 40101,
    }
    async with Emulator(port=0, strict_tokens=True) as emu, httpx.AsyncClient(base_url=emu.url) as http:
        for token, code in tokens.items():
            r = await http.get("/channels/x/messages", headers=_bearer(token))
            assert r.status_code == 401 and r.json()["error"]["code"] == code, (token, r.text)
            async with RawClient.connect(emu.port, query=f"accessToken={token}", connected=False) as c:
                err = await c.recv()
                assert err["action"] == 9 and err["error"]["code"] == code
        assert (await http.get("/time")).status_code == 200
