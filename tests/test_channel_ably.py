"""AblyChannel specifics against the loopback emulator (unmodified ably-python SDK)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from support_channels import Recorder, all_history, subscribed, unique_name
from support_emulator import emulator, wait_connected  # noqa: F401 - fixture

from ai_transport.channels import AblyChannel, Channel, Writer
from ai_transport.channels.ably_channel import from_ably_message, to_ably_message
from ai_transport.emulator import Emulator, ably_realtime, client_options, request_token
from ai_transport.errors import AITransportError, InvalidArgumentError, InvalidTypeError


async def test_connect_owns_its_client(emulator: Emulator) -> None:
    ch = await AblyChannel.connect("owned", client_id="alice", **client_options(emulator))
    assert isinstance(ch, Channel) and isinstance(ch, Writer)
    assert ch.client_id == "alice" and ch.connection_id
    rec = await subscribed(ch)
    assert ch.state == "attached" and ch.attach_serial is not None
    (s,) = await ch.publish({"name": "n", "data": "hi"})
    assert (await rec.wait_count(1))[0]["serial"] == s
    assert "AblyChannel(name='owned'" in repr(ch)
    await ch.close()
    assert ch.realtime.connection.state == "closed"
    with pytest.raises(AITransportError, match="closed"):
        await ch.publish({"data": "x"})


async def test_wrapping_a_shared_client_leaves_it_open(emulator: Emulator) -> None:
    realtime = ably_realtime(emulator, client_id="bob")
    try:
        await wait_connected(realtime)
        a = AblyChannel("one", realtime)
        b = AblyChannel("two", realtime)
        rec_a, rec_b = await subscribed(a), await subscribed(b)
        await a.publish({"data": "to one"})
        await b.publish({"data": "to two"})
        assert [m["data"] for m in await rec_a.wait_count(1)] == ["to one"]
        assert [m["data"] for m in await rec_b.wait_count(1)] == ["to two"]
        await a.close()
        assert realtime.connection.state == "connected"
        await b.publish({"data": "still"})
        await rec_b.wait_count(2)
        await b.close()
    finally:
        await realtime.close()


async def test_coroutine_listeners_run_one_at_a_time_in_order(emulator: Emulator) -> None:
    ch = await AblyChannel.connect(unique_name(), client_id="c", **client_options(emulator))
    order: list[str] = []
    running = 0

    async def slow(msg: dict[str, Any]) -> None:
        nonlocal running
        running += 1
        assert running == 1, "listener re-entered"
        order.append(msg["data"])
        await asyncio.sleep(0.01 if int(msg["data"]) % 2 else 0)
        running -= 1

    await ch.subscribe(slow)
    rec = await subscribed(ch)
    (_s,) = await ch.publish({"data": "0"})
    for i in range(1, 8):
        await ch.publish({"data": str(i)})
    await rec.wait_count(8)
    for _ in range(100):
        if len(order) == 8:
            break
        await asyncio.sleep(0.01)
    assert order == [str(i) for i in range(8)]
    ch.unsubscribe(slow)
    await ch.publish({"data": "8"})
    await rec.wait_count(9)
    await asyncio.sleep(0.05)
    assert len(order) == 8
    await ch.close()


async def test_sdk_errors_become_coded_transport_errors(emulator: Emulator) -> None:
    ch = await AblyChannel.connect(unique_name(), client_id="c", **client_options(emulator))
    with pytest.raises(AITransportError) as info:
        await ch.append_message({"serial": "99999999999999999999", "data": "x"})
    assert info.value.code == 40400 and info.value.status_code == 404
    assert "unable to append message" in info.value.message
    with pytest.raises(AITransportError) as info:
        await ch.history(until_attach=True)
    assert info.value.code == 40000 and "until_attach" in info.value.message
    for bad, exc, needle in [
        (ch.publish(42), InvalidTypeError, "messages"),
        (ch.publish({"extras": "x"}), InvalidTypeError, "message.extras"),
        (ch.publish({"name": 1}), InvalidTypeError, "message.name"),
        (ch.update_message({"data": "x"}), InvalidArgumentError, "message.serial"),
        (ch.history(limit=0), InvalidArgumentError, "limit"),
        (ch.history(direction="up"), InvalidArgumentError, "direction"),
        (ch.subscribe(3), InvalidTypeError, "listener"),
    ]:
        with pytest.raises(exc) as info:
            await bad
        assert info.value.code == 40003 and needle in info.value.message
    await ch.close()


async def test_missing_capability_is_reported_with_ablys_code(emulator: Emulator) -> None:
    name = unique_name("cap")
    token = await asyncio.to_thread(
        request_token, emulator, capability={name: ["subscribe", "history"]}, client_id="reader"
    )
    ch = await AblyChannel.connect(name, client_id="reader", **client_options(emulator, token=token["token"]))
    rec = await subscribed(ch)
    with pytest.raises(AITransportError) as info:
        await ch.publish({"data": "nope"})
    assert info.value.code == 40160 and info.value.status_code == 401
    assert isinstance(rec, Recorder) and (await ch.history()).items == []
    await ch.close()


async def test_json_protocol_client_sees_the_same_dicts(emulator: Emulator) -> None:
    name = unique_name("json")
    binary = await AblyChannel.connect(name, client_id="bin", **client_options(emulator))
    text = await AblyChannel.connect(
        name, client_id="txt", **client_options(emulator, use_binary_protocol=False)
    )
    rb, rt = await subscribed(binary), await subscribed(text)
    (s,) = await text.publish({"name": "b", "data": b"\x00\xff"})
    await text.append_message({"serial": s, "data": b"\x01"})
    await binary.publish({"name": "j", "data": {"k": [1, None]}, "extras": {"headers": {"a": "é"}}})
    got_b, got_t = await rb.wait_count(3), await rt.wait_count(3)
    for got in (got_b, got_t):
        assert got[0]["data"] == b"\x00\xff" and isinstance(got[0]["data"], bytes)
        assert got[1]["action"] == "message.append" and got[1]["data"] == b"\x01"
        assert got[2]["data"] == {"k": [1, None]} and got[2]["extras"] == {"headers": {"a": "é"}}
        assert all("encoding" not in m for m in got)
    for ch in (binary, text):
        hist = await all_history(ch)
        assert [m["data"] for m in hist] == [{"k": [1, None]}, b"\x00\xff\x01"]
    await binary.close()
    await text.close()


async def test_until_attach_with_a_name_needing_url_quoting(emulator: Emulator) -> None:
    name = f"ai:conv/{unique_name()} x+y?&"
    pub = await AblyChannel.connect(name, client_id="p", **client_options(emulator))
    (early,) = await pub.publish({"data": "early"})
    sub = await AblyChannel.connect(name, client_id="s", **client_options(emulator))
    rec = await subscribed(sub)
    await pub.publish({"data": "late"})
    await rec.wait_count(1)
    page = await sub.history(until_attach=True)
    assert [m["serial"] for m in page.items] == [early] and page.is_last() and await page.next() is None
    assert [m["data"] for m in await all_history(sub)] == ["late", "early"]
    assert (await sub.get_message(early))["data"] == "early"
    await pub.close()
    await sub.close()


def test_message_conversion_both_ways() -> None:
    from ably.types.message import Message, MessageAction, MessageVersion

    sdk = to_ably_message({"name": "n", "data": b"\x01", "extras": {"a": 1}, "serial": "s1"}, need_serial=True)
    assert (sdk.name, bytes(sdk.data), sdk.extras, sdk.serial) == ("n", b"\x01", {"a": 1}, "s1")
    assert to_ably_message({"serial": "s1", "data": "x"}).serial is None  # publish never carries one
    inbound = from_ably_message(
        Message(
            id="i", data=bytearray(b"ab"), serial="s", action=MessageAction.MESSAGE_APPEND,
            version=MessageVersion(serial="v", timestamp=5, client_id="c"), timestamp=4, client_id="c",
            connection_id="k", extras={"headers": {}},
        )
    )
    assert inbound == {
        "id": "i", "data": b"ab", "extras": {"headers": {}}, "action": "message.append", "serial": "s",
        "version": {"serial": "v", "timestamp": 5, "clientId": "c"}, "timestamp": 4, "clientId": "c",
        "connectionId": "k",
    }
    bare = from_ably_message(Message(name="x", data="d", serial="s", timestamp=3))
    assert bare["action"] == "message.create" and bare["version"] == {"serial": "s", "timestamp": 3}


async def test_sdk_close_noise_is_filtered_and_an_application_handler_is_kept() -> None:
    """An unretrieved ably SDK task that died on a websocket the server closed prints no traceback;
    any other unhandled error still reaches asyncio's default handler; an app's handler stays."""
    import asyncio

    import websockets.exceptions

    from ai_transport.channels.ably_channel import filter_sdk_close_noise

    loop = asyncio.get_running_loop()
    seen: list[dict] = []
    previous = loop.get_exception_handler()
    try:
        loop.set_exception_handler(None)
        filter_sdk_close_noise()
        handler = loop.get_exception_handler()
        assert handler is not None
        default = loop.default_exception_handler
        loop.default_exception_handler = seen.append  # type: ignore[method-assign]
        try:
            handler(loop, {"message": "x", "exception": websockets.exceptions.ConnectionClosedOK(None, None)})
            assert seen == []
            other = {"message": "y", "exception": RuntimeError("boom")}
            handler(loop, other)
            assert seen == [other]
        finally:
            loop.default_exception_handler = default  # type: ignore[method-assign]

        def mine(loop: asyncio.AbstractEventLoop, context: dict) -> None:
            seen.append(context)

        loop.set_exception_handler(mine)
        filter_sdk_close_noise()
        assert loop.get_exception_handler() is mine
    finally:
        loop.set_exception_handler(previous)


async def test_the_sdk_closing_a_transport_that_never_opened_prints_no_traceback() -> None:
    """A connection given up while connecting (a host that accepts TCP and never answers): the SDK's
    ``WebSocketTransport.close()`` task dies with a bare ``Exception()`` nobody retrieves; asyncio
    would print "Task exception was never retrieved" and its traceback. Any other bare Exception()
    still reaches the default handler."""
    import asyncio
    import types

    from ably.transport.websockettransport import WebSocketTransport

    from ai_transport.channels.ably_channel import filter_sdk_close_noise

    manager = types.SimpleNamespace(options=types.SimpleNamespace())
    transport = WebSocketTransport(manager, "127.0.0.1", {})  # type: ignore[arg-type]
    sdk_task = asyncio.ensure_future(transport.close())
    with contextlib.suppress(Exception):
        await sdk_task
    assert type(sdk_task.exception()) is Exception  # what the SDK 3.1.4 does

    async def mine() -> None:
        raise Exception()

    other_task = asyncio.ensure_future(mine())
    with contextlib.suppress(Exception):
        await other_task
    loop = asyncio.get_running_loop()
    seen: list[dict] = []
    previous = loop.get_exception_handler()
    default = loop.default_exception_handler
    try:
        loop.set_exception_handler(None)
        filter_sdk_close_noise()
        handler = loop.get_exception_handler()
        assert handler is not None
        loop.default_exception_handler = seen.append  # type: ignore[method-assign]
        handler(loop, {"message": "Task exception was never retrieved", "exception": sdk_task.exception(),
                       "future": sdk_task})
        assert seen == []
        other = {"message": "Task exception was never retrieved", "exception": other_task.exception(),
                 "future": other_task}
        handler(loop, other)
        assert seen == [other]
    finally:
        loop.default_exception_handler = default  # type: ignore[method-assign]
        loop.set_exception_handler(previous)


def test_only_an_ably_exception_lends_its_code() -> None:
    """A websockets close error's ``code`` is a deprecated close code, not an Ably error code: it
    must not be read (no DeprecationWarning) nor become the transport error's code."""
    import warnings

    from ably.util.exceptions import AblyException
    from websockets.exceptions import ConnectionClosedError
    from websockets.frames import Close

    from ai_transport.channels.ably_channel import _wrap_error
    from ai_transport.errors import ErrorCode

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        closed = _wrap_error(ConnectionClosedError(Close(1011, "gone"), None), "publish")
    assert closed.code == ErrorCode.INTERNAL_ERROR and "unable to publish" in str(closed)
    ably = _wrap_error(AblyException("denied", 401, 40160), "publish")
    assert (ably.code, ably.status_code) == (40160, 401) and "denied" in str(ably)


async def test_a_message_the_sdk_cannot_decode_never_fails_a_history_page(emulator: Emulator) -> None:
    """Another member publishes what ably-python cannot decode (``encoding: "vcdiff"``, which no
    history reader has a decoder for; an unknown encoding; ``json`` over text that is not JSON).
    The SDK's own page handler raised on the first (40019), so the page and every page after it
    failed, and a fresh worker on the channel could never read its history again. The page now
    carries it undecoded (its ``encoding`` kept), and every other message as ever."""
    from support_emulator import RawClient

    name = unique_name("undecodable")
    pub = await AblyChannel.connect(name, client_id="p", **client_options(emulator))
    (before,) = await pub.publish({"name": "n", "data": "before"})
    odd = [{"data": "abc", "encoding": "vcdiff"}, {"data": "abc", "encoding": "weird"},
           {"data": "not json {", "encoding": "json"}]
    async with RawClient.connect(emulator.port, query="accessToken=raw&v=6&clientId=mallory") as raw:
        for serial, fields in enumerate(odd):
            await raw.send({"action": 15, "channel": name, "msgSerial": serial, "messages": [{"name": "x", **fields}]})
            assert (await raw.recv_action(1))["msgSerial"] == serial
    (after,) = await pub.publish({"name": "n", "data": "after"})
    reader = await AblyChannel.connect(name, client_id="r", **client_options(emulator))
    for limit in (1, 100):  # the odd messages alone on a page, and among the others
        page = await reader.history(limit=limit, direction="forwards")
        items = list(page.items)
        while page.has_next():
            page = await page.next()  # type: ignore[assignment]
            items.extend(page.items)
        assert [m["serial"] for m in items][0::4] == [before, after]
        assert [(m["data"], m.get("encoding")) for m in items[1:4]] == [(f["data"], f["encoding"]) for f in odd]
    await pub.close()
    await reader.close()


def test_a_history_item_with_fields_the_sdk_cannot_read_is_kept_without_them() -> None:
    """A non-string ``name`` or ``id`` fails ably-python's ``Message`` (Ably refuses one with 40016,
    the emulator too): read from a page anyway, the message is kept without the field, never
    failing the page; an item that is no message at all is left out."""
    from ai_transport.channels.ably_channel import _history_items

    class Response:
        def __init__(self, items: Any) -> None:
            self.items = items

        def to_native(self) -> Any:
            return self.items

    items = _history_items(Response([
        {"id": "a", "name": "ok", "data": "1", "serial": "s1"},
        {"id": 5, "name": 7, "data": "2", "serial": "s2", "clientId": "mallory"},
        "not a message",
        {"id": "c", "name": "ok", "data": "3", "serial": "s3"},
    ]))
    converted = [m if isinstance(m, dict) else from_ably_message(m) for m in items]
    assert [m["data"] for m in converted] == ["1", "2", "3"]
    assert "name" not in converted[1] and "id" not in converted[1] and converted[1]["clientId"] == "mallory"


async def test_a_live_frame_holding_a_message_the_sdk_cannot_decode_loses_nothing(emulator: Emulator) -> None:
    """Live, ably-python skipped every message of a frame in which one failed to decode (Ably
    bundles messages into one frame): the frame's other messages were lost to every ably-python
    subscriber. Each arrives now, the undecodable one undecoded (its ``encoding`` kept)."""
    from support_emulator import RawClient

    name = unique_name("undecodable-live")
    sub = await AblyChannel.connect(name, client_id="s", **client_options(emulator))
    rec = await subscribed(sub)
    frame = [{"name": "a", "data": "first"}, {"name": "x", "data": "abc", "encoding": "vcdiff"},
             {"name": "y", "data": "{", "encoding": "json"}, {"name": "b", "data": "last"}]
    async with RawClient.connect(emulator.port, query="accessToken=raw&v=6&clientId=mallory") as raw:
        await raw.send({"action": 15, "channel": name, "msgSerial": 0, "messages": frame})
        assert (await raw.recv_action(1))["msgSerial"] == 0
    got = await rec.wait_count(4)
    assert [(m["name"], m["data"], m.get("encoding")) for m in got] == [
        ("a", "first", None), ("x", "abc", "vcdiff"), ("y", "{", "json"), ("b", "last", None)
    ]
    await sub.close()
