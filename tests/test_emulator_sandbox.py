"""The local sandbox (``ai-transport emulator --sandbox``): ably-js's test-app provisioning contract,
and ably-js itself against apps it provisions (strict tokens, key capabilities, fidelity fixes)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from support_emulator import RawClient, unique_channel

from ai_transport.emulator import jwt
from ai_transport.emulator.sandbox import Sandbox

pytestmark = pytest.mark.timeout(90)

#: An appspec in the shape of ably-common's test-app-setup.json ``post_apps``.
APPSPEC: dict[str, Any] = {
    "limits": {"presence": {"maxMembers": 250}},
    "keys": [
        {},
        {"capability": json.dumps({"cansubscribe:*": ["subscribe"], "canpublish:*": ["publish"]})},
        {"capability": json.dumps({"*": ["subscribe"]})},
    ],
    "namespaces": [{"id": "persisted", "persisted": True}, {"id": "mutable", "mutableMessages": True}],
    "channels": [{"name": "persisted:presence_fixtures", "presence": [{"clientId": "c1", "data": "x"}]}],
}


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(port=0) as sb:
        yield sb


async def provision(sandbox: Sandbox, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=sandbox.url) as http:
        r = await http.post("/apps", json=spec or APPSPEC)
    assert r.status_code == 201, r.text
    return r.json()


def basic(key: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(key.encode()).decode()}


async def test_post_apps_provisions_an_isolated_emulator_with_the_appspec(sandbox: Sandbox) -> None:
    app = await provision(sandbox)
    other = await provision(sandbox)
    assert len(app["keys"]) == 3 and len(app["namespaces"]) == 2 and app["channels"] == APPSPEC["channels"]
    assert (app["endpoint"], app["tls"]) == ("127.0.0.1", False) and app["port"] != other["port"]
    k0, k1, _ = app["keys"]
    assert k0["keyStr"] == f"{k0['keyName']}:{k0['keySecret']}" and k0["keyName"].startswith(app["appId"] + ".")
    assert json.loads(k0["capability"]) == {"*": ["*"]}
    assert json.loads(k1["capability"]) == json.loads(APPSPEC["keys"][1]["capability"])
    base = f"http://127.0.0.1:{app['port']}"
    async with httpx.AsyncClient(base_url=base) as http:
        # the key's capability is enforced
        assert (await http.post("/channels/canpublish:a/messages", json={"data": 1}, headers=basic(k1["keyStr"]))).status_code == 201
        denied = await http.post("/channels/cansubscribe:a/messages", json={"data": 1}, headers=basic(k1["keyStr"]))
        assert denied.json()["error"]["code"] == 40160
        # strict tokens: a made-up token is refused
        bogus = await http.get("/channels/x/messages", headers={"Authorization": "Bearer " + base64.b64encode(b"made-up").decode()})
        assert bogus.status_code == 401
        # apps are isolated: another app's key is unknown here
        foreign = await http.post("/channels/x/messages", json={"data": 1}, headers=basic(other["keys"][0]["keyStr"]))
        assert foreign.json()["error"]["code"] == 40101
        # the mutable namespace rule
        serial = (await http.post("/channels/plain/messages", json={"data": "a"}, headers=basic(k0["keyStr"]))).json()["serials"][0]
        refused = await http.patch(f"/channels/plain/messages/{serial}", json={"action": 5, "data": "b"}, headers=basic(k0["keyStr"]))
        assert refused.json()["error"]["code"] == 93002


async def test_delete_apps_needs_the_apps_key_and_stops_its_emulator(sandbox: Sandbox) -> None:
    app = await provision(sandbox)
    async with httpx.AsyncClient(base_url=sandbox.url) as http:
        assert (await http.delete(f"/apps/{app['appId']}")).status_code == 401
        assert (await http.delete(f"/apps/{app['appId']}", headers=basic("x.y:z"))).status_code == 401
        assert (await http.delete(f"/apps/{app['appId']}", headers=basic(app["keys"][0]["keyStr"]))).status_code == 204
        assert (await http.delete(f"/apps/{app['appId']}", headers=basic(app["keys"][0]["keyStr"]))).status_code == 404
    with pytest.raises(OSError):
        _, writer = await asyncio.open_connection("127.0.0.1", app["port"])
        writer.close()
    assert app["appId"] not in sandbox.apps


async def test_bad_appspecs_are_refused(sandbox: Sandbox) -> None:
    async with httpx.AsyncClient(base_url=sandbox.url) as http:
        assert (await http.post("/apps", content=b"{nope")).status_code == 400
        bad = await http.post("/apps", json={"keys": [{"capability": "{\"a\": [\"fly\"]}"}]})
        assert (bad.status_code, bad.json()["error"]["code"]) == (400, 40000)
        assert (await http.post("/apps", json={"namespaces": [{"persisted": True}]})).status_code == 400
    assert sandbox.apps == {}


async def test_realtime_key_auth_and_capabilities_on_a_provisioned_app(sandbox: Sandbox) -> None:
    app = await provision(sandbox)
    subscribe_only = app["keys"][2]["keyStr"]
    async with RawClient.connect(app["port"], query=f"key={subscribe_only}&v=6") as c:
        await c.send({"action": 10, "channel": "anything"})
        attached = await c.recv_action(11)
        assert attached["flags"] & (1 << 18) and not attached["flags"] & (1 << 17)
        await c.send({"action": 15, "channel": "anything", "msgSerial": 0, "messages": [{"data": 1}]})
        assert (await c.recv_action(2))["error"]["code"] in (40160, 40165)


# -- ably-js against a provisioned app -----------------------------------------------------------


async def call(node: Any, op: str, **args: Any) -> Any:
    return await asyncio.to_thread(node.call, "fidelity", op, **args)


def js_options(app: dict[str, Any], key_index: int = 0, **extra: Any) -> dict[str, Any]:
    """ClientOptions as ably-js's test helper builds them from the sandbox reply."""
    return {
        "key": app["keys"][key_index]["keyStr"],
        "endpoint": app["endpoint"],
        "port": app["port"],
        "tlsPort": app["port"],
        "tls": app["tls"],
        "fallbackHosts": [],
        "realtimeRequestTimeout": 3000,
        **extra,
    }


@pytest.mark.js
async def test_ablyjs_invalid_channel_names_fail_only_the_channel(node: Any, sandbox: Sandbox) -> None:
    app = await provision(sandbox)
    got = await call(node, "invalidNames", options=js_options(app))
    assert got["empty"]["code"] == 40010 and got["empty"]["channelState"] == "failed"
    assert got["colon"] == {"code": 40010, "channelState": "failed", "reasonCode": 40010}
    assert got["publish"] == {"code": 40010}
    assert got["connection"] == "connected"


@pytest.mark.js
async def test_ablyjs_channel_params_and_modes_echo(node: Any, sandbox: Sandbox) -> None:
    app = await provision(sandbox)
    params = {"modes": "subscribe", "delta": "vcdiff"}
    got = await call(node, "paramsEcho", options=js_options(app), channel=unique_channel(), params=params)
    assert got["params"] == params and got["modes"] == ["subscribe"]
    assert got["publish"]["code"] in (40160, 40165)


@pytest.mark.js
async def test_ablyjs_recover(node: Any, sandbox: Sandbox) -> None:
    app = await provision(sandbox)
    got = await call(node, "recover", options=js_options(app))
    assert got["recovered"]["id"] == got["original"]["id"] and got["reasonCode"] is None
    assert got["recovered"]["key"] != got["original"]["key"]
    fake = await call(node, "recover", options=js_options(app), fakeKey="_____!ablyjs_test_fake-key____")
    assert fake["reasonCode"] == 80018 and fake["msgSerial"] == 0
    assert fake["recovered"]["id"] != fake["original"]["id"] and "fake" not in fake["recovered"]["key"]


@pytest.mark.js
async def test_ablyjs_wildcard_token_client_id(node: Any, sandbox: Sandbox) -> None:
    app = await provision(sandbox)
    emu = sandbox.apps[app["appId"]].emulator
    token = emu.authority.issue(app["keys"][0]["keyName"], client_id="*")["token"]
    options = js_options(app)
    del options["key"]
    got = await call(node, "identity", options={**options, "token": token})
    assert got["clientId"] == "*"


@pytest.mark.js
async def test_ablyjs_delete_empties_data_and_appends_carry_the_name(node: Any, sandbox: Sandbox) -> None:
    app = await provision(sandbox)
    got = await call(node, "mutations", options=js_options(app), channel=unique_channel("mutable:"))
    actions = [s["action"] for s in got["seen"]]
    assert actions == ["message.create", "message.delete", "message.create", "message.append"]
    assert got["seen"][1]["data"] == {} and got["seen"][1]["name"] == "to-delete"
    assert got["seen"][3] == {"action": "message.append", "name": "streamed", "data": " World"}
    assert got["deleted"]["action"] == "message.delete" and got["deleted"]["name"] == "to-delete"
    assert got["deleted"]["data"] in (None, {})


@pytest.mark.js
async def test_ablyjs_connects_with_an_ably_jwt(node: Any, sandbox: Sandbox) -> None:
    app = await provision(sandbox)
    key = app["keys"][0]
    token = jwt.sign(key["keyName"], key["keySecret"], {"exp": int(time.time()) + 60, "x-ably-clientId": "jwt-user"})
    options = js_options(app)
    del options["key"]
    got = await call(node, "identity", options={**options, "token": token})
    assert got["clientId"] == "jwt-user"


def test_cli_sandbox_provisions_and_deletes_apps() -> None:
    """``ai-transport emulator --sandbox --port 0`` prints its URL and serves POST/DELETE /apps."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ai_transport", "emulator", "--sandbox", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        m = re.search(r"sandbox listening on (http://127\.0\.0\.1:\d+)", first)
        assert m, first
        url = m.group(1)
        app = httpx.post(f"{url}/apps", json=APPSPEC, timeout=10).json()
        assert len(app["keys"]) == 3 and app["port"] > 0
        key = app["keys"][0]["keyStr"]
        r = httpx.post(f"http://127.0.0.1:{app['port']}/channels/c/messages", json={"data": 1}, headers=basic(key))
        assert r.status_code == 201
        assert httpx.delete(f"{url}/apps/{app['appId']}", headers=basic(key), timeout=10).status_code == 204
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def live_emulators(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """The ids of the app emulators started and not stopped (Emulator.start / stop wrapped)."""
    from ai_transport.emulator.server import Emulator

    live: set[int] = set()
    start, stop = Emulator.start, Emulator.stop

    async def counted_start(self: Emulator) -> Emulator:
        out = await start(self)
        live.add(id(self))
        return out

    async def counted_stop(self: Emulator) -> None:
        live.discard(id(self))
        await stop(self)

    monkeypatch.setattr(Emulator, "start", counted_start)
    monkeypatch.setattr(Emulator, "stop", counted_stop)
    return live


async def test_a_bad_presence_fixture_is_400_and_starts_no_emulator(sandbox: Sandbox, live_emulators: set[int]) -> None:
    """A presence member that is no object raised AttributeError (500) after the app's emulator had
    started, which was then never stopped: each such request leaked a listening port."""
    async with httpx.AsyncClient(base_url=sandbox.url) as http:
        for members in ([5], ["c1"], [{"clientId": "ok"}, None]):
            r = await http.post("/apps", json={"channels": [{"name": "x", "presence": members}]})
            assert r.status_code == 400 and r.json()["error"]["code"] == 40000, r.text
        r = await http.post("/apps", json={"channels": [{"name": "x", "presence": [{"clientId": ""}]}]})
        assert r.status_code == 400  # (refused by seed_presence, after the start: stopped)
    assert not live_emulators and not sandbox.apps
    await provision(sandbox)
    assert len(live_emulators) == 1


async def test_any_failure_provisioning_stops_the_app_emulator(
    sandbox: Sandbox, live_emulators: set[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ai_transport.emulator.server import Emulator

    def broken(self: Emulator, channel: str, members: list[dict[str, Any]]) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(Emulator, "seed_presence", broken)
    async with httpx.AsyncClient(base_url=sandbox.url) as http:
        r = await http.post("/apps", json=APPSPEC)
    assert r.status_code == 500 and r.json()["error"]["code"] == 50000
    assert not live_emulators and not sandbox.apps


async def test_an_appspec_nested_past_the_recursion_limit_is_400(sandbox: Sandbox) -> None:
    async with httpx.AsyncClient(base_url=sandbox.url) as http:
        r = await http.post("/apps", content=b"[" * 100_000 + b"]" * 100_000)
    assert r.status_code == 400 and r.json()["error"]["code"] == 40000
