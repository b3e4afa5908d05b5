"""The emulator behaves as Ably does where Ably's own SDK suites showed it did not (issue 23).

ably-python's ``test/ably/rest`` and ``realtime`` against ``--sandbox`` found each of these; every
test pins one fix through the real ably-python SDK or on the raw wire: a message's versions listed
oldest first, the REST publish reply's ``channel`` / ``messageId``, 80018 for a resume key this
server never issued (80008 for one of its own that expired), ``isActive`` for a channel nobody
attached, the token-request replay guard keyed on (timestamp, nonce), a presence echo that
reaches its publisher before the ACK, and the ``_forceNack`` publish test param. The last test
keeps what ably-js's ``rest/auth`` and ``rest/presence`` check of a sandbox app (a default key's
token capability, the appspec's presence fixtures), which pass on this emulator.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import httpx
import pytest
from ably.transport.defaults import Defaults
from ably.types.message import Message
from support_emulator import RawClient, emulator, realtime_client, rest_client, unique_channel  # noqa: F401
from test_emulator_fidelity import signed_request

from ai_transport.emulator import Emulator
from ai_transport.emulator.realtime import PING_REPLY_DELAY_S

pytestmark = pytest.mark.timeout(60)

ACK, PRESENCE, MESSAGE = 1, 14, 15
BEARER = {"Authorization": "Bearer " + base64.b64encode(b"dev").decode()}


# -- message versions: oldest first (RSL14) --------------------------------------------------------


async def _publish_update_delete(rest: Any, name: str) -> tuple[str, str, str]:
    channel = rest.channels.get(name)
    serial = (await channel.publish("v", "one")).serials[0]
    updated = await channel.update_message(Message(serial=serial, data="two"))
    deleted = await channel.delete_message(Message(serial=serial))
    return serial, updated.version_serial, deleted.version_serial


async def test_rest_message_versions_are_listed_oldest_first(emulator: Emulator) -> None:
    name = unique_channel()
    async with rest_client(emulator) as rest:
        serials = await _publish_update_delete(rest, name)
        page = await rest.channels.get(name).get_message_versions(serials[0])
        assert [m.version.serial for m in page.items] == list(serials)
        assert [m.data for m in page.items[:2]] == ["one", "two"]
        # asked for, newest first is still there
        newest = await rest.channels.get(name).get_message_versions(serials[0], {"direction": "backwards"})
        assert [m.version.serial for m in newest.items] == list(reversed(serials))


async def test_realtime_message_versions_are_listed_oldest_first(emulator: Emulator) -> None:
    name = unique_channel()
    async with realtime_client(emulator) as rt, rest_client(emulator) as rest:
        serials = await _publish_update_delete(rest, name)
        page = await rt.channels.get(name).get_message_versions(serials[0])
        assert [m.version.serial for m in page.items] == list(serials)


# -- REST publish reply ----------------------------------------------------------------------------


async def test_rest_publish_answers_its_channel_and_message_id(emulator: Emulator) -> None:
    name = unique_channel()
    async with rest_client(emulator) as rest:
        reply = await rest.request(
            "POST", f"/channels/{name}/messages", Defaults.protocol_version, body=[{"data": "a"}, {"data": "b"}]
        )
        (item,) = reply.items
        assert item["channel"] == name and isinstance(item["messageId"], str) and item["messageId"]
        history = (await rest.channels.get(name).history(direction="forwards")).items
        assert [m.id for m in history] == [f"{item['messageId']}:0", f"{item['messageId']}:1"]
        assert [m.serial for m in history] == item["serials"]


# -- resume keys -----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["ably-python-fake-key", "_____!ablyjs_test_fake-key____", "emu-99999-abcdef!x"])
async def test_resume_with_a_key_this_server_never_issued_answers_80018(emulator: Emulator, key: str) -> None:
    async with RawClient.connect(emulator.port, query=f"accessToken=raw&v=6&resume={key}") as c:
        assert c.connected["error"]["code"] == 80018 and c.connected["error"]["statusCode"] == 400
        assert c.connected["connectionKey"] != key


async def test_resume_of_an_expired_connection_answers_80008(emulator: Emulator) -> None:
    async with RawClient.connect(emulator.port) as c:
        key = c.connected["connectionKey"]
        assert emulator.drop_transports(c.connected["connectionId"], forget=True) == 1
    async with RawClient.connect(emulator.port, query=f"accessToken=raw&v=6&resume={key}") as again:
        assert again.connected["error"]["code"] == 80008
        assert again.connected["connectionId"] != c.connected["connectionId"]


async def test_ably_python_resuming_a_malformed_key_gets_80018(emulator: Emulator) -> None:
    """ably-python's own RTN15c7 check: a fake key on resume → CONNECTED with 80018, a new connection."""
    from ably.realtime.connection import ConnectionState

    async with realtime_client(emulator) as rt:
        manager = rt.connection.connection_manager
        first_id = manager.connection_id
        manager.connection_details.connection_key = "ably-python-fake-key"
        await manager.transport.dispose()
        manager.notify_state(ConnectionState.DISCONNECTED)
        change = await asyncio.wait_for(rt.connection.once_async(ConnectionState.CONNECTED), 10)
        assert (change.reason.code, change.reason.status_code) == (80018, 400)
        assert manager.connection_id != first_id


# -- channel status --------------------------------------------------------------------------------


async def test_channel_status_of_a_channel_nobody_attached_is_active(emulator: Emulator) -> None:
    name = unique_channel()
    async with rest_client(emulator) as rest:
        details = await rest.channels.get(name).status()
        assert details.channel_id == name and details.status.is_active is True
        assert details.status.occupancy.metrics.connections == 0


# -- token request replay guard --------------------------------------------------------------------


async def test_a_nonce_is_reusable_under_a_new_timestamp_but_not_replayable(emulator: Emulator) -> None:
    now = int(time.time() * 1000)
    async with httpx.AsyncClient(base_url=emulator.url) as http:

        async def post(body: dict[str, Any]) -> httpx.Response:
            return await http.post("/keys/local.dev/requestToken", json=body)

        assert (await post(signed_request(nonce="1234567890123456", timestamp=now))).status_code == 200
        assert (await post(signed_request(nonce="1234567890123456", timestamp=now + 7))).status_code == 200
        replay = await post(signed_request(nonce="1234567890123456", timestamp=now))
        assert (replay.status_code, replay.json()["error"]["code"]) == (401, 40101)


# -- presence: the echo before the ACK -------------------------------------------------------------


async def test_presence_echo_reaches_its_publisher_before_the_ack(emulator: Emulator) -> None:
    name = unique_channel("presence")
    async with RawClient.connect(emulator.port, query="accessToken=raw&v=6&clientId=alice") as c:
        await c.send({"action": 10, "channel": name})
        assert (await c.recv())["action"] == 11
        await c.send({"action": PRESENCE, "channel": name, "msgSerial": 0, "presence": [{"action": 2}]})
        echo = await c.recv()
        assert echo["action"] == PRESENCE and echo["presence"][0]["clientId"] == "alice"
        ack = await c.recv()
        assert ack["action"] == ACK and ack["msgSerial"] == 0


async def test_a_member_is_listed_as_soon_as_enter_resolves(emulator: Emulator) -> None:
    """ably-python's ``get()`` reads the client's own presence set: the echo must be in it by then."""
    name = unique_channel("presence")
    async with realtime_client(emulator) as rt:
        channel = rt.channels.get(name)
        await channel.attach()
        for i in range(5):
            await channel.presence.enter_client(f"c{i}", str(i))
            members = await channel.presence.get()
            assert len(members) == i + 1, [m.client_id for m in members]


# -- publish params --------------------------------------------------------------------------------


async def test_rest_publish_with_the_force_nack_test_param_is_refused_40099(emulator: Emulator) -> None:
    from ably import AblyException

    name = unique_channel()
    async with rest_client(emulator) as rest:
        channel = rest.channels.get(name)
        with pytest.raises(AblyException) as info:
            await channel.publish(Message("name", "data"), {"_forceNack": True})
        assert (info.value.status_code, info.value.code) == (400, 40099)
        await channel.publish(Message("name", "kept"), {"_forceNack": False})
        assert [m.data for m in (await channel.history()).items] == ["kept"]


# -- the sandbox app as ably-js's rest/auth and rest/presence read it ------------------------------

#: ably-common's presence fixtures (test-app-setup.json): plain, JSON and encrypted member data.
PRESENCE_FIXTURES = [
    {"clientId": "client_bool", "data": "true"},
    {"clientId": "client_int", "data": "24"},
    {"clientId": "client_string", "data": "This is a string clientData payload"},
    {"clientId": "client_json", "data": '{ "test": "This is a JSONObject clientData payload"}'},
    {"clientId": "client_decoded", "data": '{"example":{"json":"Object"}}', "encoding": "json"},
    {
        "clientId": "client_encoded",
        "data": "HO4cYSP8LybPYBPZPHQOtuD53yrD3YV3NBoTEYBh4U0N1QXHbtkfsDfTspKeLQFt",
        "encoding": "json/utf-8/cipher+aes-128-cbc/base64",
    },
]


async def test_a_sandbox_apps_default_key_tokens_and_presence_fixtures() -> None:
    """A token for the appspec's capability-less key carries ``{"*": ["*"]}``; the app's
    ``persisted:presence_fixtures`` members are listed by REST presence get and history."""
    from ai_transport.emulator.sandbox import Sandbox

    spec = {
        "keys": [{}, {"capability": '{ "cansubscribe:*":["subscribe"] }'}],
        "namespaces": [{"id": "persisted", "persisted": True}],
        "channels": [{"name": "persisted:presence_fixtures", "presence": PRESENCE_FIXTURES}],
    }
    async with Sandbox(port=0) as sandbox:
        app = await sandbox.create_app(spec)
        key = app.keys[0]["keyStr"]
        async with rest_client(app.emulator, key=key, use_token_auth=True) as rest:
            details = await rest.auth.request_token()
            assert json.loads(str(details.capability)) == {"*": ["*"]}
            channel = rest.channels.get("persisted:presence_fixtures")
            members = (await channel.presence.get()).items
            history = (await channel.presence.history()).items
        expected = {f["clientId"] for f in PRESENCE_FIXTURES}
        assert {m.client_id for m in members} == expected and len(members) == 6
        assert {m.client_id for m in history} == expected and len(history) == 6
        by_id = {m.client_id: m for m in members}
        assert by_id["client_decoded"].data == {"example": {"json": "Object"}}


async def test_a_ping_is_never_answered_within_the_same_millisecond(emulator: Emulator) -> None:
    """ably-js's connectionPingWithCallback requires a response time above 0 ms: a loopback reply
    could come back within one Date.now() tick, so the emulator answers a HEARTBEAT after a delay."""
    async with RawClient.connect(emulator.port) as c:
        for n in range(3):
            sent = time.monotonic()
            await c.send({"action": 0, "id": f"p{n}"})
            assert await c.recv() == {"action": 0, "id": f"p{n}"}
            assert time.monotonic() - sent >= PING_REPLY_DELAY_S
