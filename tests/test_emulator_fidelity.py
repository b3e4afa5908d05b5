"""The emulator behaves as Ably does where ably-js's own test suite showed it did not (issue 17).

Each test pins one fidelity fix on the wire (raw websocket / HTTP) or through the ably-python SDK:
channel-name validation, recover, delete, append names, ATTACH_RESUME / RESUMED, params echo,
token-request validation, wildcard and anonymous clientIds, REST ``connectionKey``, key
capabilities, the mutable-messages rule, Ably JWTs, AUTH before a token expires.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import httpx
import pytest
from support_emulator import RawClient, emulator, realtime_client, unique_channel  # noqa: F401

from ai_transport.emulator import Emulator, jwt
from ai_transport.emulator.auth import MAX_TTL_MS
from ai_transport.emulator.realtime import REAUTH_LEAD_MS

pytestmark = pytest.mark.timeout(60)

FLAG_RESUMED = 1 << 2
FLAG_HAS_BACKLOG = 1 << 1
FLAG_ATTACH_RESUME = 1 << 5
FLAG_PUBLISH = 1 << 17
FLAG_SUBSCRIBE = 1 << 18


def signed_request(key: str = "local.dev:secret", **fields: Any) -> dict[str, Any]:
    """A TokenRequest signed as the SDKs sign it (fields: ttl, capability, clientId, timestamp, nonce)."""
    name, _, secret = key.partition(":")
    body: dict[str, Any] = {"keyName": name, "timestamp": int(time.time() * 1000), "nonce": f"n{time.time_ns()}"}
    body.update(fields)
    text = "\n".join(
        [
            name,
            str(body.get("ttl") or ""),
            str(body.get("capability") or ""),
            str(body.get("clientId") or ""),
            str(body["timestamp"]),
            str(body["nonce"]),
            "",
        ]
    )
    body["mac"] = base64.b64encode(hmac.new(secret.encode(), text.encode(), hashlib.sha256).digest()).decode()
    return body


async def attach(c: RawClient, channel: str, **extra: Any) -> dict[str, Any]:
    await c.send({"action": 10, "channel": channel, **extra})
    return await c.recv()


# -- 1. channel names ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", ":hell", "[unclosed", "[meta]", "two\nlines"])
async def test_invalid_channel_name_fails_only_that_channel(emulator: Emulator, name: str) -> None:
    async with RawClient.connect(emulator.port) as c:
        reply = await attach(c, name)
        assert reply["action"] == 9 and reply["channel"] == name and reply["error"]["code"] == 40010
        # the connection is still up: a ping is answered and another channel attaches
        await c.send({"action": 0, "id": "p"})
        assert (await c.recv_action(0))["id"] == "p"
        ok = await attach(c, unique_channel())
        assert ok["action"] == 11


async def test_publish_on_invalid_channel_name_is_nacked_40010(emulator: Emulator) -> None:
    async with RawClient.connect(emulator.port) as c:
        await c.send({"action": 15, "channel": ":hell", "msgSerial": 0, "messages": [{"data": "x"}]})
        nack = await c.recv_action(2)
        assert nack["msgSerial"] == 0 and nack["error"]["code"] == 40010


# -- 2. recover ----------------------------------------------------------------------------------


async def test_recover_keeps_the_id_rotates_the_key_and_retires_the_old_one(emulator: Emulator) -> None:
    async with RawClient.connect(emulator.port) as first:
        conn_id, old_key = first.connected["connectionId"], first.connected["connectionKey"]
        async with RawClient.connect(emulator.port, query=f"accessToken=raw&v=6&recover={old_key}") as second:
            assert second.connected["connectionId"] == conn_id and "error" not in second.connected
            new_key = second.connected["connectionKey"]
            assert new_key != old_key and second.connected["connectionDetails"]["connectionKey"] == new_key
            # the client recovered from cannot take the connection back with its old key
            async with RawClient.connect(emulator.port, query=f"accessToken=raw&v=6&resume={old_key}") as third:
                assert third.connected["connectionId"] != conn_id
                assert third.connected["error"]["code"] == 80008
            await second.send({"action": 0, "id": "still-mine"})
            assert (await second.recv_action(0))["id"] == "still-mine"


async def test_recover_with_an_unknown_key_answers_80018(emulator: Emulator) -> None:
    query = "accessToken=raw&v=6&recover=_____!fake-key____"
    async with RawClient.connect(emulator.port, query=query) as c:
        assert c.connected["error"]["code"] == 80018
        assert "fake" not in c.connected["connectionKey"]


# -- 5. ATTACH_RESUME / RESUMED ------------------------------------------------------------------


async def test_attach_resume_flag_does_not_replay_a_rewind(emulator: Emulator) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as pub:
        await pub.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": "old"}]})
        await pub.recv_action(1)
    async with RawClient.connect(emulator.port) as c:
        first = await attach(c, ch, params={"rewind": "1"})
        assert first["flags"] & FLAG_HAS_BACKLOG and first["params"] == {"rewind": "1"}
        assert (await c.recv_action(15))["messages"][0]["data"] == "old"
        await c.send({"action": 12, "channel": ch})
        await c.recv_action(13)
        again = await attach(c, ch, params={"rewind": "1"}, flags=FLAG_ATTACH_RESUME)
        assert again["action"] == 11 and not again["flags"] & FLAG_HAS_BACKLOG
        await c.send({"action": 0, "id": "end"})
        assert (await c.recv())["action"] == 0  # no MESSAGE was replayed before the heartbeat


async def test_reattach_with_channel_serial_after_recover_is_resumed(emulator: Emulator) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as c:
        attached = await attach(c, ch)
        key, serial = c.connected["connectionKey"], attached["channelSerial"]
    async with RawClient.connect(emulator.port) as pub:
        await pub.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": "missed"}]})
        await pub.recv_action(1)
    async with RawClient.connect(emulator.port, query=f"accessToken=raw&v=6&recover={key}") as c:
        assert "error" not in c.connected
        again = await attach(c, ch, channelSerial=serial)
        assert again["action"] == 11 and again["flags"] & FLAG_RESUMED
        assert (await c.recv_action(15))["messages"][0]["data"] == "missed"


# -- 6. params echo and modes --------------------------------------------------------------------


async def test_attached_echoes_params_and_grants_params_modes(emulator: Emulator) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as c:
        reply = await attach(
            c, ch, params={"modes": "subscribe", "delta": "vcdiff", "agent": "x/1"}, flags=FLAG_PUBLISH
        )
        assert reply["params"] == {"modes": "subscribe", "delta": "vcdiff"}
        assert reply["flags"] & FLAG_SUBSCRIBE and not reply["flags"] & FLAG_PUBLISH
        await c.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": "x"}]})
        assert (await c.recv_action(2))["error"]["code"] == 40165
        bad = await attach(c, unique_channel(), params={"modes": "subscribe,flying"})
        assert bad["action"] == 9 and bad["error"]["code"] == 40000


# -- 7. token requests ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "status", "code"),
    [
        ({"timestamp": int(time.time() * 1000) - 30 * 60 * 1000}, 401, 40104),
        ({"ttl": -1}, 400, 40003),
        ({"ttl": MAX_TTL_MS + 1}, 400, 40003),
        ({"ttl": "notanumber"}, 400, 40003),
        ({"clientId": ""}, 400, 40012),
        ({"capability": json.dumps({"ch": ["publish_"]})}, 400, 40000),
        ({"capability": json.dumps({"ch": ["*", "publish"]})}, 400, 40000),
        ({"capability": json.dumps({"ch": []})}, 400, 40000),
    ],
)
async def test_invalid_token_requests_are_refused(
    emulator: Emulator, fields: dict[str, Any], status: int, code: int
) -> None:
    async with httpx.AsyncClient(base_url=emulator.url) as http:
        r = await http.post("/keys/local.dev/requestToken", json=signed_request(**fields))
    assert (r.status_code, r.json()["error"]["code"]) == (status, code)


async def test_a_token_request_nonce_is_single_use(emulator: Emulator) -> None:
    body = signed_request(nonce="1234567890123456")
    async with httpx.AsyncClient(base_url=emulator.url) as http:
        assert (await http.post("/keys/local.dev/requestToken", json=body)).status_code == 200
        again = await http.post("/keys/local.dev/requestToken", json=body)
    assert again.status_code == 401


# -- 8. clientIds --------------------------------------------------------------------------------


async def test_wildcard_token_connects_as_star_and_anonymous_token_has_no_client_id(emulator: Emulator) -> None:
    wildcard = emulator.authority.issue("local.dev", client_id="*")
    anonymous = emulator.authority.issue("local.dev")
    assert wildcard["clientId"] == "*" and "clientId" not in anonymous
    async with RawClient.connect(emulator.port, query=f"accessToken={wildcard['token']}&v=6") as c:
        assert c.connected["connectionDetails"]["clientId"] == "*"
        ch = unique_channel()
        await attach(c, ch)
        await c.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": "x", "clientId": "any"}]})
        assert (await c.recv_action(1))["msgSerial"] == 0


# -- 9. REST publish on behalf of a realtime connection -------------------------------------------


async def test_rest_publish_with_connection_key_carries_its_connection_id(emulator: Emulator) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as c, httpx.AsyncClient(base_url=emulator.url) as http:
        await attach(c, ch)
        bearer = {"Authorization": "Bearer " + base64.b64encode(b"dev").decode()}
        key = c.connected["connectionKey"]
        r = await http.post(f"/channels/{ch}/messages", json={"data": "x", "connectionKey": key}, headers=bearer)
        assert r.status_code == 201
        delivered = (await c.recv_action(15))["messages"][0]
        assert delivered["connectionId"] == c.connected["connectionId"] and "connectionKey" not in delivered
        history = (await http.get(f"/channels/{ch}/messages", headers=bearer)).json()
        assert history[0]["connectionId"] == c.connected["connectionId"]
        bad = await http.post(f"/channels/{ch}/messages", json={"data": "x", "connectionKey": "nope"}, headers=bearer)
        assert (bad.status_code, bad.json()["error"]["code"]) == (400, 40006)


# -- 10. key capabilities ------------------------------------------------------------------------


async def test_key_capability_is_enforced_and_bounds_its_tokens() -> None:
    caps = {"limited": json.dumps({"canpublish:*": ["publish"], "ro": ["subscribe", "history"]})}
    async with Emulator(port=0, keys=["limited:s1", "full:s2"], key_capabilities=caps) as emu:
        basic = {"Authorization": "Basic " + base64.b64encode(b"limited:s1").decode()}
        async with httpx.AsyncClient(base_url=emu.url) as http:
            assert (await http.post("/channels/canpublish:x/messages", json={"data": 1}, headers=basic)).status_code == 201
            denied = await http.post("/channels/other/messages", json={"data": 1}, headers=basic)
            assert (denied.status_code, denied.json()["error"]["code"]) == (401, 40160)
            # a token gets the intersection of what it asks for and what its key grants
            r = await http.post(
                "/keys/limited/requestToken",
                json=signed_request("limited:s1", capability=json.dumps({"canpublish:a": ["*"], "ro": ["*"]})),
            )
            assert json.loads(r.json()["capability"]) == {"canpublish:a": ["publish"], "ro": ["history", "subscribe"]}
            empty = await http.post(
                "/keys/limited/requestToken", json=signed_request("limited:s1", capability=json.dumps({"zz": ["*"]}))
            )
            assert (empty.status_code, empty.json()["error"]["code"]) == (401, 40160)
            whole = await http.post("/keys/limited/requestToken", json=signed_request("limited:s1"))
            assert json.loads(whole.json()["capability"]) == json.loads(caps["limited"])
        async with RawClient.connect(emu.port, query="key=limited:s1&v=6") as c:
            assert (await attach(c, "nothing-here"))["error"]["code"] == 40160
            ro = await attach(c, "ro")
            assert ro["action"] == 11 and not ro["flags"] & FLAG_PUBLISH
        async with RawClient.connect(emu.port, query="key=full:s2&v=6") as c:
            assert (await attach(c, "anything"))["action"] == 11


# -- mutable-messages rule -----------------------------------------------------------------------


async def test_mutations_need_the_mutable_namespace_when_rules_are_configured() -> None:
    async with Emulator(port=0, mutable_namespaces=["mutable"]) as emu, RawClient.connect(emu.port) as c:
        for n, ch in enumerate(["mutable:a", "plain"]):
            await c.send({"action": 15, "channel": ch, "msgSerial": 2 * n, "messages": [{"data": "x"}]})
            serial = (await c.recv_action(1))["res"][0]["serials"][0]
            await c.send(
                {"action": 15, "channel": ch, "msgSerial": 2 * n + 1, "messages": [{"action": 5, "serial": serial, "data": "y"}]}
            )
            reply = await c.recv()
            while reply["action"] not in (1, 2):
                reply = await c.recv()
            if ch == "plain":
                assert reply["action"] == 2 and reply["error"]["code"] == 93002
            else:
                assert reply["action"] == 1


# -- JWT and server-requested re-authorisation ---------------------------------------------------


async def test_ably_jwt_authenticates_with_its_claims() -> None:
    caps = {"app.k2": json.dumps({"ro:*": ["subscribe", "history"]})}
    async with Emulator(port=0, keys=["app.k1:s1", "app.k2:s2"], key_capabilities=caps, strict_tokens=True) as emu:
        now = int(time.time())
        good = jwt.sign("app.k1", "s1", {"iat": now, "exp": now + 60, "x-ably-clientId": "jo"})
        async with RawClient.connect(emu.port, query=f"accessToken={good}&v=6") as c:
            assert c.connected["connectionDetails"]["clientId"] == "jo"
        narrowed = jwt.sign("app.k2", "s2", {"exp": now + 60, "x-ably-capability": json.dumps({"*": ["*"]})})
        async with httpx.AsyncClient(base_url=emu.url) as http:
            bearer = {"Authorization": "Bearer " + base64.b64encode(narrowed.encode()).decode()}
            assert (await http.get("/channels/ro:x/messages", headers=bearer)).status_code == 200
            denied = await http.post("/channels/ro:x/messages", json={"data": 1}, headers=bearer)
            assert denied.json()["error"]["code"] == 40160  # the key's capability bounds the JWT's
            for token, code in [
                (jwt.sign("app.k1", "wrong", {"exp": now + 60}), 40144),
                (jwt.sign("app.k1", "s1", {"exp": now - 1}), 40142),
                (jwt.sign("app.k9", "s9", {"exp": now + 60}), 40101),
                (jwt.sign("other.k1", "s1", {"exp": now + 60}), 40400),
            ]:
                bad = {"Authorization": "Bearer " + base64.b64encode(token.encode()).decode()}
                assert (await http.get("/channels/x/messages", headers=bad)).json()["error"]["code"] == code
            # an embedded-token JWT acts as its inner token
            inner = emu.authority.issue("app.k1", client_id="inner")["token"]
            embedded = jwt.sign("app.k1", "s1", {"exp": now + 60, "x-ably-token": inner})
        async with RawClient.connect(emu.port, query=f"accessToken={embedded}&v=6") as c:
            assert c.connected["connectionDetails"]["clientId"] == "inner"


async def test_server_sends_auth_before_the_token_expires(emulator: Emulator) -> None:
    token = emulator.authority.issue("local.dev", ttl=REAUTH_LEAD_MS + 300)["token"]
    async with RawClient.connect(emulator.port, query=f"accessToken={token}&v=6") as c:
        assert (await c.recv(timeout=5))["action"] == 17  # AUTH: re-authorise now
        fresh = emulator.authority.issue("local.dev")["token"]
        await c.send({"action": 17, "auth": {"accessToken": fresh}})
        assert (await c.recv_action(4))["connectionId"] == c.connected["connectionId"]


async def test_reauth_changes_the_attached_channels_capability(emulator: Emulator) -> None:
    ch = unique_channel()

    def token(cap: dict[str, list[str]]) -> str:
        return emulator.authority.issue("local.dev", capability=cap)["token"]

    async with RawClient.connect(emulator.port, query=f"accessToken={token({ch: ['subscribe']})}&v=6") as c:
        await attach(c, ch)
        await c.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": "x"}]})
        assert (await c.recv_action(2))["error"]["code"] == 40160
        # upgrade: publish is allowed on the same attachment (the ATTACH asked for the default modes)
        await c.send({"action": 17, "auth": {"accessToken": token({ch: ["subscribe", "publish"]})}})
        await c.recv_action(4)
        await c.send({"action": 15, "channel": ch, "msgSerial": 1, "messages": [{"data": "x"}]})
        assert (await c.recv_action(1))["msgSerial"] == 1
        # downgrade: a channel the new token does not cover at all fails (ERROR for that channel)
        await c.send({"action": 17, "auth": {"accessToken": token({"elsewhere": ["*"]})}})
        failed = await c.recv_action(9)
        assert failed["channel"] == ch and failed["error"]["code"] == 40160
        await c.send({"action": 0, "id": "alive"})
        assert (await c.recv_action(0))["id"] == "alive"


# -- batch publish -------------------------------------------------------------------------------


async def test_batch_publish_per_channel_results() -> None:
    caps = {"k": json.dumps({"ok:*": ["publish", "history"]})}
    async with Emulator(port=0, keys=["k:s"], key_capabilities=caps) as emu, httpx.AsyncClient(base_url=emu.url) as http:
        auth = {"Authorization": "Basic " + base64.b64encode(b"k:s").decode()}
        specs = [{"channels": ["ok:a", "no"], "messages": [{"data": "m1"}, {"data": "m2"}]}, {"channels": "ok:b", "messages": {"data": "m3"}}]
        r = await http.post("/messages", json=specs, headers=auth)
        assert r.status_code == 201
        first, second = r.json()
        assert (first["successCount"], first["failureCount"], second["successCount"]) == (1, 1, 1)
        ok, denied = first["results"]
        assert ok["channel"] == "ok:a" and ok["messageId"] and len(ok["serials"]) == 2 and "error" not in ok
        assert denied["channel"] == "no" and denied["error"]["statusCode"] == 401 and "messageId" not in denied
        history = (await http.get("/channels/ok:a/messages", params={"direction": "forwards"}, headers=auth)).json()
        assert [m["data"] for m in history] == ["m1", "m2"]
        assert [m["id"] for m in history] == [f"{ok['messageId']}:0", f"{ok['messageId']}:1"]
        # a single spec answers a flat list; any failure makes it 400 / 40020 with the per-channel list
        flat = await http.post("/messages", json={"channels": ["ok:c", "ok:d"], "messages": {"data": "x"}}, headers=auth)
        assert flat.status_code == 201 and [x["channel"] for x in flat.json()] == ["ok:c", "ok:d"]
        partial = await http.post("/messages", json={"channels": ["ok:e", ":bad"], "messages": {"data": "x"}}, headers=auth)
        assert partial.status_code == 400 and partial.json()["error"]["code"] == 40020
        assert partial.json()["batchResponse"][1]["error"]["code"] == 40010


# -- token revocation ----------------------------------------------------------------------------


async def test_revoke_tokens_by_client_id() -> None:
    async with Emulator(port=0, keys=["rk:s", "plain:s"], revocable_keys=["rk"]) as emu, httpx.AsyncClient(
        base_url=emu.url
    ) as http:
        basic = {"Authorization": "Basic " + base64.b64encode(b"rk:s").decode()}
        doomed = emu.authority.issue("rk", client_id="alice")["token"]
        other = emu.authority.issue("rk", client_id="bob")["token"]
        async with RawClient.connect(emu.port, query=f"accessToken={doomed}&v=6") as c:
            body = {"targets": ["clientId:alice", "nonsense:x"]}
            r = await http.post("/keys/rk/revokeTokens", json=body, headers=basic)
            result = r.json()
            assert (result["successCount"], result["failureCount"]) == (1, 1)
            assert result["results"][0]["target"] == "clientId:alice" and isinstance(result["results"][0]["appliesAt"], int)
            assert result["results"][1]["error"]["statusCode"] == 400
            assert (await c.recv_action(6))["error"]["code"] == 40141  # DISCONNECTED: token revoked

        def bearer(token: str) -> dict[str, str]:
            return {"Authorization": "Bearer " + base64.b64encode(token.encode()).decode()}

        assert (await http.get("/channels/x/messages", headers=bearer(doomed))).json()["error"]["code"] == 40141
        assert (await http.get("/channels/x/messages", headers=bearer(other))).status_code == 200
        fresh = emu.authority.issue("rk", client_id="alice")["token"]  # issued after: unaffected
        assert (await http.get("/channels/x/messages", headers=bearer(fresh))).status_code == 200
        # with allowReauthMargin the revocation applies 30 s later
        later = await http.post(
            "/keys/rk/revokeTokens", json={"targets": ["clientId:bob"], "allowReauthMargin": True}, headers=basic
        )
        assert later.json()["results"][0]["appliesAt"] >= int(time.time() * 1000) + 25_000
        assert (await http.get("/channels/x/messages", headers=bearer(other))).status_code == 200
        # keys without revocable tokens, and token auth, are refused
        plain = {"Authorization": "Basic " + base64.b64encode(b"plain:s").decode()}
        refused = await http.post("/keys/plain/revokeTokens", json={"targets": ["clientId:a"]}, headers=plain)
        assert refused.json()["error"]["code"] == 40162
        by_token = await http.post("/keys/rk/revokeTokens", json={"targets": ["clientId:a"]}, headers=bearer(fresh))
        assert by_token.json()["error"]["code"] == 40162
