"""The emulator's realtime protocol seen through a bare websocket: frame shapes and bad input."""


from __future__ import annotations

import asyncio
import base64
import json

import msgpack
import pytest
from support_emulator import RawClient, emulator, unique_channel  # noqa: F401
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from ai_transport.emulator import Emulator

pytestmark = pytest.mark.timeout(60)

FORMATS = pytest.mark.parametrize("fmt", ["json", "msgpack"])


async def attach(c: RawClient, channel: str, **extra: object) -> dict:
    await c.send({"action": 10, "channel": channel, **extra})
    return await c.recv_action(11)


async def assert_serving(emu: Emulator) -> None:
    """The server still accepts and serves a fresh connection."""
    async with RawClient.connect(emu.port) as c:
        await c.send({"action": 0, "id": "still-alive"})
        assert await c.recv() == {"action": 0, "id": "still-alive"}


@FORMATS
async def test_connected_frame_shape(emulator: Emulator, fmt: str) -> None:
    async with RawClient.connect(emulator.port, fmt=fmt, query="accessToken=t&v=5&clientId=zed") as c:
        frame = c.connected
        details = frame["connectionDetails"]
        assert frame["connectionId"] and frame["connectionKey"] == details["connectionKey"]
        assert details["clientId"] == "zed"
        assert details["maxIdleInterval"] == 0 and details["maxMessageSize"] == 65536
        assert details["connectionStateTtl"] > 0 and details["serverId"]


@FORMATS
async def test_heartbeat_attach_publish_ack_detach_close(emulator: Emulator, fmt: str) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port, fmt=fmt) as c:
        await c.send({"action": 0, "id": "p1"})
        assert await c.recv() == {"action": 0, "id": "p1"}
        attached = await attach(c, ch, params={"rewind": "0", "agent": "x/1"})
        assert attached["channel"] == ch and isinstance(attached["channelSerial"], str)
        assert attached["flags"] & (1 << 17) and attached["flags"] & (1 << 18)
        assert attached["params"] == {"rewind": "0"}
        await c.send(
            {
                "action": 15,
                "channel": ch,
                "msgSerial": 0,
                "messages": [{"name": "a", "data": "1"}, {"data": "2"}],
            }
        )
        ack = await c.recv()
        assert ack["action"] == 1 and ack["msgSerial"] == 0 and ack["count"] == 1
        assert len(ack["res"]) == 1 and len(ack["res"][0]["serials"]) == 2
        delivery = await c.recv()
        assert delivery["action"] == 15 and delivery["channel"] == ch
        assert [m["serial"] for m in delivery["messages"]] == ack["res"][0]["serials"]
        assert delivery["channelSerial"] == ack["res"][0]["serials"][-1]
        assert [m["id"] for m in delivery["messages"]] == [
            f"{c.connected['connectionId']}:0:0",
            f"{c.connected['connectionId']}:0:1",
        ]
        await c.send({"action": 12, "channel": ch})
        assert await c.recv() == {"action": 13, "channel": ch}
        # detached: our own publish is ACKed but not delivered back
        await c.send({"action": 15, "channel": ch, "msgSerial": 1, "messages": [{"data": "3"}]})
        assert (await c.recv())["action"] == 1
        await c.send({"action": 0, "id": "p2"})
        assert await c.recv() == {"action": 0, "id": "p2"}
        await c.send({"action": 7})
        assert await c.recv() == {"action": 8}


async def test_attach_with_channel_serial_replays_missed_events(emulator: Emulator) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as pub:
        await attach(pub, ch)
        await pub.send(
            {"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"name": "n", "data": "a"}]}
        )
        serial = (await pub.recv_action(1))["res"][0]["serials"][0]
        checkpoint = (await pub.recv_action(15))["channelSerial"]
        await pub.send(
            {
                "action": 15,
                "channel": ch,
                "msgSerial": 1,
                "messages": [{"action": 5, "serial": serial, "data": "b"}],
            }
        )
        await pub.recv_action(1)
        await pub.send({"action": 15, "channel": ch, "msgSerial": 2, "messages": [{"data": "c"}]})
        await pub.recv_action(1)
    async with RawClient.connect(emulator.port) as c:
        await attach(c, ch, channelSerial=checkpoint)
        frag = (await c.recv_action(15))["messages"][0]
        new = (await c.recv_action(15))["messages"][0]
        assert (frag["action"], frag["data"], frag["serial"]) == (5, "b", serial)
        assert frag["name"] == "n"  # Ably carries the message name on an append
        assert (new["action"], new["data"]) == (0, "c")


@FORMATS
async def test_malformed_frame_is_an_error_not_a_crash(emulator: Emulator, fmt: str) -> None:
    for bad in ("{not json", "[1, 2]", '{"no": "action"}', b"\xc1\xc1garbage", msgpack.packb([1])):
        async with RawClient.connect(emulator.port, fmt=fmt) as c:
            await c.send_raw(bad)
            err = await c.recv()
            assert err["action"] == 9 and err["error"]["code"] == 40000
            assert err["error"]["statusCode"] == 400 and "malformed" in err["error"]["message"]
            with pytest.raises(ConnectionClosed):
                await c.recv()
    await assert_serving(emulator)


async def test_unknown_action_is_an_error(emulator: Emulator) -> None:
    async with RawClient.connect(emulator.port) as c:
        await c.send({"action": 99})
        err = await c.recv()
        assert err["action"] == 9 and err["error"]["code"] == 40000 and "99" in err["error"]["message"]
    await assert_serving(emulator)


@FORMATS
async def test_oversized_message_is_nacked_and_connection_survives(emulator: Emulator, fmt: str) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port, fmt=fmt) as c:
        await attach(c, ch)
        await c.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": "x" * 70000}]})
        nack = await c.recv()
        assert nack["action"] == 2 and nack["msgSerial"] == 0
        assert nack["error"]["code"] == 40009 and nack["error"]["statusCode"] == 400
        await c.send({"action": 15, "channel": ch, "msgSerial": 1, "messages": [{"data": "x" * 1000}]})
        assert (await c.recv())["action"] == 1


async def test_oversized_frame_closes_only_that_connection(emulator: Emulator) -> None:
    async with connect(f"ws://127.0.0.1:{emulator.port}/?accessToken=t", max_size=None) as ws:
        await ws.recv()
        # the header of a masked 5 MiB text frame: the server refuses it from the length alone
        ws.transport.write(b"\x81\xff" + (5 * 1024 * 1024).to_bytes(8, "big") + b"\x00\x00\x00\x00")
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), 5)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1009
    await assert_serving(emulator)


async def test_bad_publishes_are_nacked_with_ably_errors(emulator: Emulator) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as c:
        await attach(c, ch)
        await c.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": "text"}]})
        serial = (await c.recv_action(1))["res"][0]["serials"][0]
        await c.recv_action(15)
        cases = [
            ({"channel": ch, "messages": [{"action": 5, "serial": "nope", "data": "x"}]}, 40400),
            ({"channel": ch, "messages": [{"action": 5, "data": "x"}]}, 40003),
            (
                {
                    "channel": ch,
                    "messages": [{"action": 5, "serial": serial, "data": "eA==", "encoding": "base64"}],
                },
                40003,
            ),
            ({"channel": ch, "messages": [{"data": "***", "encoding": "base64"}]}, 40013),
            ({"channel": ch, "messages": [{"action": 9, "serial": serial}]}, 40000),
            ({"channel": ch, "messages": "nope"}, 40000),
            ({"messages": [{"data": "x"}]}, 40010),
            ({"channel": ch, "messages": [17]}, 40000),
        ]
        for i, (frame, code) in enumerate(cases, start=1):
            await c.send({"action": 15, "msgSerial": i, **frame})
            nack = await c.recv()
            assert nack["action"] == 2 and nack["msgSerial"] == i, (frame, nack)
            assert nack["error"]["code"] == code, (frame, nack)
            assert {"code", "statusCode", "message"} <= set(nack["error"])
        # nothing was stored by the rejected frames
        await c.send({"action": 15, "channel": ch, "msgSerial": 99, "messages": [{"data": "ok"}]})
        assert (await c.recv_action(1))["msgSerial"] == 99


async def test_presence_on_unattached_channel_is_nacked(emulator: Emulator) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as c:
        await c.send({"action": 14, "channel": ch, "msgSerial": 0, "presence": [{"action": 2}]})
        nack = await c.recv()
        assert nack["action"] == 2 and nack["error"]["code"] == 90001
        await attach(c, ch)
        await c.send({"action": 14, "channel": ch, "msgSerial": 1, "presence": [{"action": 2}]})
        nack = await c.recv()
        # attached, but an anonymous connection must name the member's clientId
        assert nack["action"] == 2 and nack["error"]["code"] == 40012


async def test_publish_without_attach_is_accepted_like_ably(emulator: Emulator) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as c:
        await c.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": "x"}]})
        ack = await c.recv()
        assert ack["action"] == 1 and len(ack["res"][0]["serials"]) == 1
        await c.send({"action": 0, "id": "z"})
        assert (await c.recv())["id"] == "z"  # no delivery: not attached


async def test_auth_failures(emulator: Emulator) -> None:
    for query, code in [("v=6", 40101), ("key=local.dev:nope", 40101), ("key=other:secret", 40101)]:
        async with RawClient.connect(emulator.port, query=query, connected=False) as c:
            err = await c.recv()
            assert err["action"] == 9 and err["error"]["code"] == code and err["error"]["statusCode"] == 401
    token = emulator.authority.issue("local.dev", client_id="ann")["token"]
    async with RawClient.connect(
        emulator.port, query=f"access_token={token}&clientId=bob", connected=False
    ) as c:
        err = await c.recv()
        assert err["error"]["code"] == 40102
    expired = emulator.authority.issue("local.dev", ttl=1)["token"]
    await asyncio.sleep(0.01)
    async with RawClient.connect(emulator.port, query=f"accessToken={expired}", connected=False) as c:
        assert (await c.recv())["error"]["code"] == 40142
    await assert_serving(emulator)


async def test_an_unexpected_failure_authenticating_a_websocket_is_an_error_frame(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in authentication answers ERROR 50000 (as REST answers 500), not an exception out of
    the aiohttp handler; other connections are served."""

    def broken(token: str) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(emulator.authority, "by_token", broken)
    async with RawClient.connect(emulator.port, query="accessToken=t", connected=False) as c:
        err = await c.recv()
        assert err["action"] == 9 and err["error"]["code"] == 50000 and "boom" in err["error"]["message"]
        with pytest.raises(ConnectionClosed):
            await c.recv()
    async with RawClient.connect(emulator.port, query="key=local.dev:secret") as c:
        await c.send({"action": 0, "id": "alive"})
        assert await c.recv() == {"action": 0, "id": "alive"}


async def test_attach_denied_by_capability_fails_the_channel(emulator: Emulator) -> None:
    token = emulator.authority.issue("local.dev", capability={"team:*": ["subscribe"]})["token"]
    async with RawClient.connect(emulator.port, query=f"accessToken={token}") as c:
        ok = await attach(c, "team:a")
        assert ok["flags"] & (1 << 18) and not ok["flags"] & (1 << 17)  # SUBSCRIBE, not PUBLISH
        await c.send({"action": 10, "channel": "other"})
        err = await c.recv()
        assert err["action"] == 9 and err["channel"] == "other" and err["error"]["code"] == 40160
        await c.send({"action": 15, "channel": "team:a", "msgSerial": 0, "messages": [{"data": "x"}]})
        assert (await c.recv())["error"]["code"] == 40160


async def test_reauth_with_auth_frame(emulator: Emulator) -> None:
    async with RawClient.connect(emulator.port) as c:
        await c.send({"action": 17, "auth": {"accessToken": "fresh-token"}})
        again = await c.recv()
        assert again["action"] == 4 and again["connectionId"] == c.connected["connectionId"]


async def test_resume_unknown_key_gives_new_connection_with_error(emulator: Emulator) -> None:
    async with RawClient.connect(emulator.port, query="accessToken=t&resume=nope!x") as c:
        assert c.connected["error"]["code"] == 80018  # a key this server never issued
        async with RawClient.connect(
            emulator.port, query=f"accessToken=t&resume={c.connected['connectionKey']}"
        ) as d:
            assert d.connected["connectionId"] == c.connected["connectionId"]
            assert "error" not in d.connected


async def test_resume_key_of_unicode_or_many_digits_is_an_invalid_key(emulator: Emulator) -> None:
    """``"²".isdigit()`` is true and ``int("²")`` raises (so does int() past 4300 digits): the
    resume failed with an exception instead of CONNECTED with 80018."""
    for number in ("%C2%B2", "1" * 5000):
        async with RawClient.connect(emulator.port, query=f"accessToken=t&resume=emu-{number}-abcdef!x") as c:
            assert c.connected["error"]["code"] == 80018


async def test_server_heartbeats_when_idle_interval_set() -> None:
    async with Emulator(max_idle_interval=200) as emu, RawClient.connect(emu.port) as c:
        assert c.connected["connectionDetails"]["maxIdleInterval"] == 200
        assert await c.recv(timeout=1) == {"action": 0}


async def test_binary_transcoding_on_the_wire(emulator: Emulator) -> None:
    ch = unique_channel()
    async with (
        RawClient.connect(emulator.port, fmt="json") as j,
        RawClient.connect(emulator.port, fmt="msgpack") as m,
    ):
        await attach(j, ch)
        await attach(m, ch)
        payload = bytes(range(256))
        await m.send(
            {
                "action": 15,
                "channel": ch,
                "msgSerial": 0,
                "messages": [{"data": payload, "encoding": "utf-8/cipher+aes-128-cbc"}],
            }
        )
        got_j = (await j.recv_action(15))["messages"][0]
        got_m = (await m.recv_action(15))["messages"][0]
        assert got_j["encoding"] == "utf-8/cipher+aes-128-cbc/base64"
        assert base64.b64decode(got_j["data"]) == payload
        assert got_m["data"] == payload and got_m["encoding"] == "utf-8/cipher+aes-128-cbc"
        await j.send(
            {
                "action": 15,
                "channel": ch,
                "msgSerial": 0,
                "messages": [
                    {"data": base64.b64encode(b"hi").decode(), "encoding": "base64"},
                    {"data": json.dumps({"a": 1}), "encoding": "json"},
                ],
            }
        )
        got = (await m.recv_action(15))["messages"]
        assert got[0]["data"] == b"hi" and "encoding" not in got[0]
        assert got[1] == {**got[1], "data": '{"a": 1}', "encoding": "json"}


async def test_a_lone_surrogate_from_a_json_peer_reaches_a_msgpack_peer_as_a_replacement_character(
    emulator: Emulator,
) -> None:
    """JSON can carry a lone surrogate (``"\\udfff"``, as ``JSON.stringify`` writes one) and
    MessagePack cannot: a binary subscriber gets U+FFFD (what a UTF-8 encoder in JS makes of it), a
    JSON one the surrogate itself, and the publisher's connection stays up (the fan-out failed, the
    publisher got 1011 and no one got the message)."""
    ch = unique_channel()
    async with (
        RawClient.connect(emulator.port, fmt="json") as pub,
        RawClient.connect(emulator.port, fmt="json") as j,
        RawClient.connect(emulator.port, fmt="msgpack") as m,
    ):
        await attach(j, ch)
        await attach(m, ch)
        frame = '{"action": 15, "channel": "%s", "msgSerial": 0, "messages": [{"name": "n\\ud800", "data": "a\\udfffb", "extras": {"headers": {"k": "\\ud800"}}}]}'
        await pub.send_raw(frame % ch)
        assert (await pub.recv_action(1))["msgSerial"] == 0
        got_m = (await m.recv_action(15))["messages"][0]
        assert (got_m["name"], got_m["data"], got_m["extras"]) == ("n\ufffd", "a\ufffdb", {"headers": {"k": "\ufffd"}})
        got_j = (await j.recv_action(15))["messages"][0]
        assert (got_j["name"], got_j["data"]) == ("n\ud800", "a\udfffb")
        await pub.send({"action": 15, "channel": ch, "msgSerial": 1, "messages": [{"data": "next"}]})
        assert (await pub.recv_action(1))["msgSerial"] == 1
        assert (await m.recv_action(15))["messages"][0]["data"] == "next"
    await assert_serving(emulator)


async def test_an_integer_past_64_bits_from_a_json_peer_is_refused_with_40013(emulator: Emulator) -> None:
    """JSON can carry an integer MessagePack cannot: stored, it broke every binary peer of the
    channel (its history page failed, "can't serialize ints", and its live delivery). It is refused
    at the door, and the channel goes on serving binary peers."""
    ch = unique_channel()
    async with (
        RawClient.connect(emulator.port, fmt="json") as pub,
        RawClient.connect(emulator.port, fmt="msgpack") as m,
    ):
        await attach(m, ch)
        huge = "9" * 40
        for i, field in enumerate(('"data": 18446744073709551616', f'"extras": {{"headers": {{"n": {huge}}}}}')):
            await pub.send_raw(f'{{"action": 15, "channel": "{ch}", "msgSerial": {i}, "messages": [{{{field}}}]}}')
            nack = await pub.recv_action(2)
            assert nack["msgSerial"] == i and nack["error"]["code"] == 40013, nack
            assert "64-bit" in nack["error"]["message"]
        await pub.send({"action": 15, "channel": ch, "msgSerial": 2, "messages": [{"data": "fine", "extras": {"n": 2**63}}]})
        assert (await pub.recv_action(1))["msgSerial"] == 2
        got = (await m.recv_action(15))["messages"][0]
        assert (got["data"], got["extras"]) == ("fine", {"n": 2**63})
    await assert_serving(emulator)


async def test_a_message_field_that_must_be_a_string_is_refused_otherwise(emulator: Emulator) -> None:
    """As Ably: a non-string ``name`` is 40016, ``encoding`` 40013, ``id`` 40000 (no SDK can read
    such a message: stored, it failed every ably-python reader's history page)."""
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as pub:
        for serial, (field, code) in enumerate((("name", 40016), ("encoding", 40013), ("id", 40000))):
            await pub.send({"action": 15, "channel": ch, "msgSerial": serial, "messages": [{field: 5, "data": "x"}]})
            nack = await pub.recv_action(2)
            assert nack["error"]["code"] == code and field in nack["error"]["message"], nack
    await assert_serving(emulator)


async def test_map_keys_from_a_msgpack_peer_reach_everyone_as_strings(emulator: Emulator) -> None:
    """MessagePack has map keys of any type, JSON and JS objects (Ably's) only strings: a binary
    peer's integer, binary and null keys are stored as ``String(key)``. Stored as sent, they broke
    every reader decoding with string keys (ably-python's MessagePack, this test's: its history page
    failed, so no fresh ably-python worker could wake up on the channel)."""
    ch = unique_channel()
    async with (
        RawClient.connect(emulator.port, fmt="msgpack") as pub,
        RawClient.connect(emulator.port, fmt="msgpack") as m,
        RawClient.connect(emulator.port, fmt="json") as j,
    ):
        await attach(m, ch)
        await attach(j, ch)
        odd = {1: "one", b"k": [{None: True, 2.0: "two"}], "s": "kept"}
        await pub.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": odd, "extras": {"h": odd}}]})
        assert (await pub.recv_action(1))["msgSerial"] == 0
        expected = {"1": "one", "k": [{"null": True, "2": "two"}], "s": "kept"}
        got = (await m.recv_action(15))["messages"][0]  # (decoded with string keys only)
        assert (got["data"], got["extras"]) == (expected, {"h": expected})
        assert (await j.recv_action(15))["messages"][0]["extras"] == {"h": expected}
    async with RawClient.connect(emulator.port, fmt="msgpack") as late:
        await late.send({"action": 10, "channel": ch, "params": {"rewind": "1"}})
        assert (await late.recv_action(15))["messages"][0]["extras"] == {"h": expected}


async def test_rewind_frames_carry_the_attach_point_so_resuming_adds_no_duplicates(
    emulator: Emulator,
) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as pub:
        await pub.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": "m3"}]})
        m3 = (await pub.recv_action(1))["res"][0]["serials"][0]
        await pub.send({"action": 15, "channel": ch, "msgSerial": 1, "messages": [{"data": "m4"}]})
        await pub.recv_action(1)
        await pub.send(
            {
                "action": 15,
                "channel": ch,
                "msgSerial": 2,
                "messages": [{"action": 5, "serial": m3, "data": "+"}],
            }
        )
        await pub.recv_action(1)
    async with RawClient.connect(emulator.port) as c:
        attached = await attach(c, ch, params={"rewind": "2"})
        assert attached["flags"] & 2  # HAS_BACKLOG
        frames = [await c.recv_action(15), await c.recv_action(15)]
        assert [f["messages"][0]["data"] for f in frames] == ["m3+", "m4"]
        assert [f["messages"][0]["action"] for f in frames] == [1, 0]
        assert {f["channelSerial"] for f in frames} == {attached["channelSerial"]}
    async with RawClient.connect(emulator.port) as d:
        await attach(d, ch, channelSerial=frames[-1]["channelSerial"])
        await d.send({"action": 0, "id": "nothing-replayed"})
        assert await d.recv() == {"action": 0, "id": "nothing-replayed"}


async def test_token_expiry_disconnects_with_40142_and_auth_extends(emulator: Emulator) -> None:
    short = emulator.authority.issue("local.dev", ttl=300)["token"]
    async with RawClient.connect(emulator.port, query=f"accessToken={short}") as c:
        frame = await c.recv(timeout=3)
        assert (
            frame["action"] == 6 and frame["error"]["code"] == 40142 and frame["error"]["statusCode"] == 401
        )
    short = emulator.authority.issue("local.dev", ttl=300)["token"]
    longer = emulator.authority.issue("local.dev", ttl=60_000)["token"]
    async with RawClient.connect(emulator.port, query=f"accessToken={short}") as c:
        await c.send({"action": 17, "auth": {"accessToken": longer}})
        assert (await c.recv())["action"] == 4
        await asyncio.sleep(0.5)
        await c.send({"action": 0, "id": "still-connected"})
        assert await c.recv() == {"action": 0, "id": "still-connected"}


async def test_reattach_while_live_continues_without_replay(emulator: Emulator) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as c:
        first = await attach(c, ch)
        assert not first["flags"] & 4
        await c.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": "a"}]})
        await c.recv_action(1)
        await c.recv_action(15)
        # re-attach with an older channelSerial (frames may still be in flight): RESUMED, no replay
        again = await attach(c, ch, channelSerial=first["channelSerial"])
        assert again["flags"] & 4
        await c.send({"action": 0, "id": "no-replay"})
        assert await c.recv() == {"action": 0, "id": "no-replay"}


async def test_resume_holds_deliveries_until_reattach_then_replays_once(emulator: Emulator) -> None:
    ch = unique_channel()
    async with RawClient.connect(emulator.port) as pub:
        async with RawClient.connect(emulator.port) as sub:
            await attach(sub, ch)
            await pub.send({"action": 15, "channel": ch, "msgSerial": 0, "messages": [{"data": "a"}]})
            await pub.recv_action(1)
            checkpoint = (await sub.recv_action(15))["channelSerial"]
            key, conn_id = sub.connected["connectionKey"], sub.connected["connectionId"]
            sub.ws.transport.abort()
        await asyncio.sleep(0.05)
        await pub.send({"action": 15, "channel": ch, "msgSerial": 1, "messages": [{"data": "during-gap"}]})
        await pub.recv_action(1)
        async with RawClient.connect(emulator.port, query=f"accessToken=t&resume={key}") as back:
            assert back.connected["connectionId"] == conn_id
            await pub.send(
                {"action": 15, "channel": ch, "msgSerial": 2, "messages": [{"data": "after-resume"}]}
            )
            await pub.recv_action(1)
            await back.send({"action": 0, "id": "held"})
            assert await back.recv() == {"action": 0, "id": "held"}  # nothing delivered before re-attach
            await attach(back, ch, channelSerial=checkpoint)
            got = [(await back.recv_action(15))["messages"][0]["data"] for _ in range(2)]
            assert got == ["during-gap", "after-resume"]
            await back.send({"action": 0, "id": "once"})
            assert await back.recv() == {"action": 0, "id": "once"}


@pytest.mark.parametrize("echo_before_ack", [False, True])
async def test_ack_and_echo_order_is_configurable(echo_before_ack: bool) -> None:
    async with Emulator(echo_before_ack=echo_before_ack) as emu, RawClient.connect(emu.port) as c:
        await attach(c, "order")
        await c.send({"action": 15, "channel": "order", "msgSerial": 0, "messages": [{"data": "x"}]})
        first, second = await c.recv(), await c.recv()
        assert [first["action"], second["action"]] == ([15, 1] if echo_before_ack else [1, 15])
