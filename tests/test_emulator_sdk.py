"""The unmodified ably-python 3.1.4 SDK against the emulator, in JSON and msgpack modes."""


from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from ably import MessageAction, MessageOperation
from ably.types.message import Message
from ably.util.exceptions import AblyException
from support_emulator import Inbox, emulator, realtime_client, rest_client, unique_channel  # noqa: F401

from ai_transport.emulator import Emulator, ably_rest

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=[True, False], ids=["msgpack", "json"])
def binary(request: pytest.FixtureRequest) -> bool:
    """Both wire formats of the SDK."""
    return request.param


async def test_connect_publish_subscribe_create(emulator: Emulator, binary: bool) -> None:
    async with realtime_client(emulator, client_id="alice", use_binary_protocol=binary) as client:
        details = client.connection.connection_details
        assert details.client_id == "alice"
        ch = client.channels.get(unique_channel())
        inbox = Inbox()
        await ch.subscribe(inbox.push)
        assert ch.state.value == "attached"
        first = await ch.publish("greeting", "hello")
        second = await ch.publish([Message(name="a", data="x"), Message(name="b", data={"k": [1, 2]})])
        assert len(first.serials) == 1 and len(second.serials) == 2
        serials = first.serials + second.serials
        assert serials == sorted(serials) and len(set(serials)) == 3
        got = await inbox.take(3)
        assert [m.name for m in got] == ["greeting", "a", "b"]
        assert [m.serial for m in got] == serials
        m = got[0]
        assert m.action == MessageAction.MESSAGE_CREATE
        assert m.data == "hello"
        assert m.client_id == "alice"
        assert m.connection_id == client.connection.connection_manager.connection_id
        assert m.version.serial == m.serial
        assert got[2].data == {"k": [1, 2]}
        await inbox.quiet()


async def test_append_delivers_fragments_then_history_aggregate(emulator: Emulator, binary: bool) -> None:
    async with realtime_client(emulator, client_id="writer", use_binary_protocol=binary) as client:
        ch = client.channels.get(unique_channel())
        inbox = Inbox()
        await ch.subscribe(inbox.push)
        serial = (
            await ch.publish(Message(name="ai-output", data="", extras={"headers": {"k": "v0"}}))
        ).serials[0]
        versions = []
        for i, frag in enumerate(["Hel", "lo", ", ", "world"]):
            res = await ch.append_message(
                Message(serial=serial, data=frag, extras={"headers": {"k": f"v{i + 1}"}})
            )
            versions.append(res.version_serial)
        assert versions == sorted(versions) and all(v > serial for v in versions)
        got = await inbox.take(5)
        assert got[0].action == MessageAction.MESSAGE_CREATE and got[0].name == "ai-output"
        for i, (m, frag) in enumerate(zip(got[1:], ["Hel", "lo", ", ", "world"])):
            assert m.action == MessageAction.MESSAGE_APPEND
            assert m.name == "ai-output"  # Ably carries the message's name on each append
            assert m.data == frag
            assert m.serial == serial
            assert m.version.serial == versions[i]
            assert m.extras == {"headers": {"k": f"v{i + 1}"}}
        page = await ch.history()
        assert len(page.items) == 1
        agg = page.items[0]
        assert agg.action == MessageAction.MESSAGE_UPDATE
        assert agg.data == "Hello, world" and agg.name == "ai-output"
        assert agg.serial == serial and agg.version.serial == versions[-1]
        assert agg.extras == {"headers": {"k": "v4"}}


async def test_late_attach_gets_aggregate_as_update_then_fragments(emulator: Emulator, binary: bool) -> None:
    name = unique_channel()
    async with (
        realtime_client(emulator, client_id="w", use_binary_protocol=binary) as writer,
        realtime_client(emulator, client_id="r", use_binary_protocol=not binary) as reader,
    ):
        wch = writer.channels.get(name)
        await wch.attach()
        serial = (await wch.publish("ai-output", "ab")).serials[0]
        await wch.append_message(Message(serial=serial, data="cd"))
        rch = reader.channels.get(name)
        inbox = Inbox()
        await rch.subscribe(inbox.push)
        await wch.append_message(Message(serial=serial, data="ef"))
        await wch.append_message(Message(serial=serial, data="gh"))
        first, second = await inbox.take(2)
        assert first.action == MessageAction.MESSAGE_UPDATE
        assert first.data == "abcdef" and first.name == "ai-output" and first.serial == serial
        assert second.action == MessageAction.MESSAGE_APPEND and second.data == "gh" and second.name == "ai-output"
        await inbox.quiet()


async def test_update_and_delete(emulator: Emulator, binary: bool) -> None:
    async with realtime_client(emulator, client_id="u", use_binary_protocol=binary) as client:
        ch = client.channels.get(unique_channel())
        inbox = Inbox()
        await ch.subscribe(inbox.push)
        serial = (await ch.publish("n", "v1")).serials[0]
        upd = await ch.update_message(
            Message(serial=serial, data="v2", extras={"e": 1}),
            MessageOperation(description="fix", metadata={"why": "typo"}),
        )
        dele = await ch.delete_message(Message(serial=serial))
        assert serial < upd.version_serial < dele.version_serial
        _create, update, delete = await inbox.take(3)
        assert update.action == MessageAction.MESSAGE_UPDATE and update.data == "v2" and update.name == "n"
        assert update.extras == {"e": 1}
        assert update.version.description == "fix" and update.version.metadata == {"why": "typo"}
        assert update.version.client_id == "u"
        assert delete.action == MessageAction.MESSAGE_DELETE and delete.serial == serial
        got = await ch.get_message(serial)
        assert got.action == MessageAction.MESSAGE_DELETE and got.version.serial == dele.version_serial
        versions = await ch.get_message_versions(serial, params={"direction": "forwards"})
        assert [v.action for v in versions.items] == [
            MessageAction.MESSAGE_CREATE,
            MessageAction.MESSAGE_UPDATE,
            MessageAction.MESSAGE_DELETE,
        ]
        # a delete empties the data (Ably), name and extras stay
        assert [v.data for v in versions.items] == ["v1", "v2", None]
        assert delete.data is None and delete.name == "n" and got.data is None


async def test_history_paging_and_directions(emulator: Emulator, binary: bool) -> None:
    async with realtime_client(emulator, use_binary_protocol=binary) as client:
        ch = client.channels.get(unique_channel())
        await ch.attach()
        serials = []
        for i in range(7):
            serials += (await ch.publish("n", str(i))).serials
        page = await ch.history(limit=3)
        seen = []
        while True:
            seen += [m.data for m in page.items]
            if not page.has_next():
                break
            page = await page.next()
        assert seen == [str(i) for i in reversed(range(7))]
        fwd = await ch.history(direction="forwards", limit=4)
        assert [m.data for m in fwd.items] == ["0", "1", "2", "3"]
        rest = await fwd.next()
        assert [m.data for m in rest.items] == ["4", "5", "6"] and not rest.has_next()


async def test_get_message_and_versions_of_appended(emulator: Emulator, binary: bool) -> None:
    async with realtime_client(emulator, use_binary_protocol=binary) as client:
        ch = client.channels.get(unique_channel())
        await ch.attach()
        serial = (await ch.publish("n", "a")).serials[0]
        for frag in "bcd":
            await ch.append_message(Message(serial=serial, data=frag))
        msg = await ch.get_message(serial)
        assert msg.data == "abcd" and msg.action == MessageAction.MESSAGE_UPDATE
        versions = await ch.get_message_versions(serial)
        assert [v.data for v in versions.items] == ["a", "ab", "abc", "abcd"]  # oldest first, as in Ably
        with pytest.raises(AblyException) as info:
            await ch.get_message("99999999999999999999")
        assert info.value.code == 40400 and info.value.status_code == 404


async def test_token_capability_enforced(emulator: Emulator, binary: bool) -> None:
    allowed, other = unique_channel("cap"), unique_channel("other")
    rest = ably_rest(emulator, key=emulator.key, use_token_auth=True)
    try:
        details = await rest.auth.request_token(
            token_params={"capability": json.dumps({allowed: ["subscribe", "history"]}), "client_id": "bob"}
        )
    finally:
        await rest.close()
    assert details.client_id == "bob"
    async with realtime_client(emulator, token=details.token, use_binary_protocol=binary) as client:
        assert client.connection.connection_details.client_id == "bob"
        ch = client.channels.get(allowed)
        await ch.attach()
        with pytest.raises(AblyException) as info:
            await ch.publish("n", "denied")
        assert info.value.code == 40160 and info.value.status_code == 401
        assert (await ch.history()).items == []
        denied = client.channels.get(other)
        with pytest.raises(AblyException) as info:
            await denied.attach()
        assert info.value.code == 40160
        assert denied.state.value == "failed"


async def test_mismatched_client_id_is_nacked(emulator: Emulator, binary: bool) -> None:
    async with realtime_client(emulator, client_id="carol", use_binary_protocol=binary) as client:
        ch = client.channels.get(unique_channel())
        await ch.attach()
        with pytest.raises(AblyException) as info:
            await ch.publish(Message(name="n", data="x", client_id="mallory"))
        assert info.value.code == 40012
        ok = await ch.publish(Message(name="n", data="x", client_id="carol"))
        assert len(ok.serials) == 1


async def test_ping(emulator: Emulator, binary: bool) -> None:
    async with realtime_client(emulator, use_binary_protocol=binary) as client:
        rtt = await client.connection.ping()
        assert rtt >= 0


async def test_echo_false_is_honoured(emulator: Emulator, binary: bool) -> None:
    name = unique_channel()
    async with (
        realtime_client(emulator, use_binary_protocol=binary, transport_params={"echo": "false"}) as quiet,
        realtime_client(emulator, use_binary_protocol=binary) as loud,
    ):
        q_inbox, l_inbox = Inbox(), Inbox()
        await quiet.channels.get(name).subscribe(q_inbox.push)
        await loud.channels.get(name).subscribe(l_inbox.push)
        await quiet.channels.get(name).publish("n", "from-quiet")
        await loud.channels.get(name).publish("n", "from-loud")
        assert [m.data for m in await l_inbox.take(2)] == ["from-quiet", "from-loud"]
        assert (await q_inbox.next()).data == "from-loud"
        await q_inbox.quiet()


async def test_binary_and_extras_transcoded_between_formats(emulator: Emulator) -> None:
    name = unique_channel()
    extras = {"ai": {"headers": {"x-id": "1", "n": 1.5, "u": "é✓"}}, "list": [1, "2", None, True]}
    async with (
        realtime_client(emulator, use_binary_protocol=False) as js,
        realtime_client(emulator, use_binary_protocol=True) as mp,
    ):
        js_inbox, mp_inbox = Inbox(), Inbox()
        await js.channels.get(name).subscribe(js_inbox.push)
        await mp.channels.get(name).subscribe(mp_inbox.push)
        await js.channels.get(name).publish(Message(name="bin", data=b"\x00\xffjson", extras=extras))
        await mp.channels.get(name).publish(Message(name="bin", data=b"\x01\xfemsgpack", extras=extras))
        for inbox in (js_inbox, mp_inbox):
            a, b = await inbox.take(2)
            assert bytes(a.data) == b"\x00\xffjson" and bytes(b.data) == b"\x01\xfemsgpack"
            assert a.extras == extras and b.extras == extras
        page = await js.channels.get(name).history(direction="forwards")
        assert [bytes(m.data) for m in page.items] == [b"\x00\xffjson", b"\x01\xfemsgpack"]


async def test_rest_publish_and_patch_reach_realtime(emulator: Emulator, binary: bool) -> None:
    name = unique_channel()
    token = emulator.authority.issue("local.dev", client_id="restie")["token"]
    async with (
        realtime_client(emulator, use_binary_protocol=binary) as rt,
        rest_client(emulator, token=token, use_binary_protocol=binary) as rest,
    ):
        inbox = Inbox()
        await rt.channels.get(name).subscribe(inbox.push)
        rch = rest.channels.get(name)
        await rch.publish("n", "rest-hello")
        created = await inbox.next()
        assert created.data == "rest-hello" and created.client_id == "restie"
        res = await rch.append_message(Message(serial=created.serial, data="!"))
        frag = await inbox.next()
        assert frag.action == MessageAction.MESSAGE_APPEND and frag.data == "!"
        assert frag.version.serial == res.version_serial
        got = await rch.get_message(created.serial)
        assert got.data == "rest-hello!"


async def test_rewind_delivers_aggregates(emulator: Emulator, binary: bool) -> None:
    name = unique_channel()
    async with realtime_client(emulator, use_binary_protocol=binary) as client:
        ch = client.channels.get(name)
        await ch.attach()
        for i in range(3):
            await ch.publish("n", f"m{i}")
        serial = (await ch.publish("n", "x")).serials[0]
        await ch.append_message(Message(serial=serial, data="y"))
    async with realtime_client(emulator, use_binary_protocol=binary) as late:
        ch = late.channels.get(name, params={"rewind": "2"})
        inbox = Inbox()
        await ch.subscribe(inbox.push)
        assert ch.params == {"rewind": "2"}
        a, b = await inbox.take(2)
        assert (a.data, a.action) == ("m2", MessageAction.MESSAGE_CREATE)
        assert (b.data, b.action) == ("xy", MessageAction.MESSAGE_UPDATE)


async def test_reconnect_resumes_and_delivers_missed(emulator: Emulator, binary: bool) -> None:
    name = unique_channel()
    async with (
        realtime_client(emulator, use_binary_protocol=binary) as sub,
        realtime_client(emulator, use_binary_protocol=binary) as pub,
    ):
        inbox = Inbox()
        sch = sub.channels.get(name)
        await sch.subscribe(inbox.push)
        pch = pub.channels.get(name)
        await pch.attach()
        serial = (await pch.publish("n", "a")).serials[0]
        assert (await inbox.next()).data == "a"
        sub_id = sub.connection.connection_manager.connection_id
        assert emulator.drop_transports(sub_id) == 1  # only the subscriber's websocket
        await asyncio.sleep(0.05)
        await pch.append_message(Message(serial=serial, data="b"))
        await pch.publish("n", "c")
        frag, created = await inbox.take(2, timeout=15)
        assert (frag.action, frag.data) == (MessageAction.MESSAGE_APPEND, "b")
        assert (created.action, created.data) == (MessageAction.MESSAGE_CREATE, "c")
        assert sub.connection.connection_manager.connection_id == sub_id
        await pch.append_message(Message(serial=serial, data="d"))
        assert (await inbox.next()).data == "d"
        await inbox.quiet()


async def test_failed_resume_still_replays_missed_events(emulator: Emulator, binary: bool) -> None:
    name = unique_channel()
    async with (
        realtime_client(emulator, use_binary_protocol=binary) as sub,
        realtime_client(emulator, use_binary_protocol=binary) as pub,
    ):
        inbox = Inbox()
        await sub.channels.get(name).subscribe(inbox.push)
        pch = pub.channels.get(name)
        await pch.attach()
        serial = (await pch.publish("n", "a")).serials[0]
        assert (await inbox.next()).data == "a"
        old_id = sub.connection.connection_manager.connection_id
        assert emulator.drop_transports(old_id, forget=True) == 1
        await asyncio.sleep(0.05)
        await pch.append_message(Message(serial=serial, data="b"))
        frag = await inbox.next(timeout=15)
        assert (frag.action, frag.data) == (MessageAction.MESSAGE_APPEND, "b")
        assert sub.connection.connection_manager.connection_id != old_id
        await inbox.quiet()


async def test_token_auth_via_request_token_reauth_and_expiry_renewal(emulator: Emulator) -> None:
    async with realtime_client(
        emulator,
        key=emulator.key,
        use_token_auth=True,
        client_id="kim",
        default_token_params={"client_id": "kim", "ttl": 1500},
    ) as client:
        first = client.auth.token_details
        assert first.client_id == "kim" and first.token.startswith("emu.")
        conn_id = client.connection.connection_manager.connection_id
        renewed = await client.auth.authorize()
        assert renewed.token != first.token
        assert client.connection.state.value == "connected"
        ch = client.channels.get(unique_channel())
        inbox = Inbox()
        await ch.subscribe(inbox.push)
        await ch.publish("n", "before-expiry")
        assert (await inbox.next()).client_id == "kim"
        # the token expires: DISCONNECTED 40142, the SDK fetches a new token and resumes
        for _ in range(500):
            if (
                client.connection.state.value == "connected"
                and client.auth.token_details.token != renewed.token
            ):
                break
            await asyncio.sleep(0.02)
        assert client.auth.token_details.token != renewed.token
        assert client.connection.connection_manager.connection_id == conn_id
        await ch.publish("n", "after-renewal")
        assert (await inbox.next()).data == "after-renewal"


async def test_connection_refused_with_bad_key(emulator: Emulator) -> None:
    from ai_transport.emulator import ably_realtime

    client = ably_realtime(emulator, key="local.dev:wrong")
    try:
        for _ in range(200):
            if client.connection.state.value == "failed":
                break
            await asyncio.sleep(0.02)
        assert client.connection.state.value == "failed"
        assert client.connection.error_reason.code == 40101
    finally:
        await client.close()


def _shape(m: Any) -> tuple[Any, ...]:
    return (m.name, m.data, m.serial)


async def test_rest_time_and_channel_status(emulator: Emulator, binary: bool) -> None:
    name = unique_channel()
    async with realtime_client(emulator) as rt, rest_client(emulator, use_binary_protocol=binary) as rest:
        await rt.channels.get(name).attach()
        now = await rest.time()
        assert abs(now - int(time.time() * 1000)) < 5000
        details = await rest.channels.get(name).status()
        assert details.channel_id == name
        assert details.status.is_active and details.status.occupancy.metrics.connections == 1


def test_client_option_targets() -> None:
    from ai_transport.emulator import client_options, connect_info, endpoint_for

    assert endpoint_for(8123) == endpoint_for("8123") == endpoint_for("127.0.0.1:8123") == "127.0.0.1:8123/"
    assert endpoint_for("http://localhost:9000") == "localhost:9000/"
    with pytest.raises(ValueError):
        endpoint_for("http://localhost")
    opts = client_options(8123, client_id="a")
    assert (
        opts["tls"] is False and opts["token"] and opts["client_id"] == "a" and opts["fallback_hosts"] == []
    )
    assert "token" not in client_options(8123, key="local.dev:secret")
    js = connect_info(8123, client_id="b", use_binary_protocol=False)
    assert (js["endpoint"], js["port"], js["tls"], js["clientId"], js["useBinaryProtocol"]) == (
        "127.0.0.1",
        8123,
        False,
        "b",
        False,
    )


async def test_url_string_target_reaches_rest_and_realtime(emulator: Emulator) -> None:
    async with realtime_client(f"http://127.0.0.1:{emulator.port}") as client:
        ch = client.channels.get(unique_channel())
        await ch.attach()
        await ch.publish("n", "via-url")
        assert [m.data for m in (await ch.history()).items] == ["via-url"]


async def test_sdk_works_when_echo_precedes_ack(binary: bool) -> None:
    async with (
        Emulator(echo_before_ack=True) as emu,
        realtime_client(emu, use_binary_protocol=binary) as client,
    ):
        ch = client.channels.get(unique_channel())
        inbox = Inbox()
        await ch.subscribe(inbox.push)
        serial = (await ch.publish("n", "a")).serials[0]
        version = (await ch.append_message(Message(serial=serial, data="b"))).version_serial
        created, frag = await inbox.take(2)
        assert (created.serial, frag.serial, frag.version.serial, frag.data) == (serial, serial, version, "b")
