"""ably-js 2.x (in node) against the emulator, interoperating with the ably-python SDK."""


from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ably import MessageAction
from ably.types.message import Message
from support_emulator import Inbox, emulator_thread, realtime_client, unique_channel  # noqa: F401

from ai_transport.emulator import EmulatorThread, connect_info

pytestmark = [pytest.mark.js, pytest.mark.timeout(90)]


async def call(node: Any, op: str, **args: Any) -> Any:
    """Run a handler op without blocking the test's event loop (the Python SDK keeps running)."""
    return await asyncio.to_thread(node.call, "ably_js", op, **args)


@pytest.fixture(params=[True, False], ids=["msgpack", "json"])
def js_binary(request: pytest.FixtureRequest) -> bool:
    return request.param


async def test_js_receives_python_stream(node: Any, emulator_thread: EmulatorThread, js_binary: bool) -> None:
    name = unique_channel("js")
    options = connect_info(emulator_thread.port, client_id="js-reader", use_binary_protocol=js_binary)
    js = await call(node, "open", options=options)
    try:
        assert js["clientId"] == "js-reader"
        sub = await call(node, "subscribe", handle=js["handle"], channel=name)
        assert sub["state"] == "attached" and sub["attachSerial"]
        fragments = [f"tok{i} " for i in range(30)]
        async with realtime_client(emulator_thread, client_id="py-writer") as py:
            ch = py.channels.get(name)
            await ch.attach()
            serial = (
                await ch.publish(Message(name="ai-output", data="", extras={"ai": {"s": "start"}}))
            ).serials[0]
            tasks = [
                asyncio.create_task(
                    ch.append_message(Message(serial=serial, data=f, extras={"ai": {"i": i}}))
                )
                for i, f in enumerate(fragments)
            ]
            versions = [r.version_serial for r in await asyncio.gather(*tasks)]
        got = await call(node, "received", handle=js["handle"], channel=name, count=1 + len(fragments))
        assert len(got) == 1 + len(fragments)
        assert got[0]["action"] == "message.create" and got[0]["name"] == "ai-output"
        assert got[0]["clientId"] == "py-writer" and got[0]["extras"] == {"ai": {"s": "start"}}
        for i, m in enumerate(got[1:]):
            assert m["action"] == "message.append"
            assert m["data"] == fragments[i] and m["name"] == "ai-output"
            assert m["serial"] == serial and m["version"]["serial"] == versions[i]
            assert m["extras"] == {"ai": {"i": i}}
        # attached before the stream began: untilAttach history excludes it, plain history has the aggregate
        assert await call(node, "history", handle=js["handle"], channel=name, untilAttach=True) == []
        hist = await call(node, "history", handle=js["handle"], channel=name)
        assert len(hist) == 1
        assert hist[0]["action"] == "message.update" and hist[0]["data"] == "".join(fragments)
        assert hist[0]["version"]["serial"] == versions[-1]
        # a client attaching afterwards reads the final aggregate through history({untilAttach: true})
        late = await call(
            node, "open", options=connect_info(emulator_thread, use_binary_protocol=not js_binary)
        )
        try:
            await call(node, "subscribe", handle=late["handle"], channel=name)
            hist = await call(node, "history", handle=late["handle"], channel=name, untilAttach=True)
            assert [(m["action"], m["data"], m["serial"]) for m in hist] == [
                ("message.update", "".join(fragments), serial)
            ]
        finally:
            await call(node, "close", handle=late["handle"])
    finally:
        await call(node, "close", handle=js["handle"])


async def test_python_receives_js_stream(node: Any, emulator_thread: EmulatorThread, js_binary: bool) -> None:
    name = unique_channel("js")
    fragments = ["Hello", ", ", "wor", "ld", "!"]
    async with realtime_client(
        emulator_thread, client_id="py-reader", use_binary_protocol=not js_binary
    ) as py:
        inbox = Inbox()
        await py.channels.get(name).subscribe(inbox.push)
        options = connect_info(emulator_thread, client_id="js-writer", use_binary_protocol=js_binary)
        js = await call(node, "open", options=options)
        try:
            res = await call(
                node,
                "stream",
                handle=js["handle"],
                channel=name,
                name="ai-output",
                fragments=fragments,
                extras={"headers": {"x": "1"}},
            )
            got = await inbox.take(1 + len(fragments))
            assert got[0].action == MessageAction.MESSAGE_CREATE and got[0].client_id == "js-writer"
            assert [m.data for m in got[1:]] == fragments
            assert all(m.action == MessageAction.MESSAGE_APPEND and m.name == got[0].name for m in got[1:])
            assert [m.version.serial for m in got[1:]] == res["versions"]
            assert all(m.extras == {"headers": {"x": "1"}} for m in got)
            upd = await call(
                node, "update", handle=js["handle"], channel=name, serial=res["serial"], data="replaced"
            )
            m = await inbox.next()
            assert m.action == MessageAction.MESSAGE_UPDATE and m.data == "replaced"
            assert m.version.serial == upd["versionSerial"]
            msg = await call(node, "getMessage", handle=js["handle"], channel=name, serial=res["serial"])
            assert msg["data"] == "replaced" and msg["action"] == "message.update"
            assert await call(node, "ping", handle=js["handle"]) >= 0
        finally:
            await call(node, "close", handle=js["handle"])


async def test_js_late_attach_and_history_paging(node: Any, emulator_thread: EmulatorThread) -> None:
    name = unique_channel("js")
    async with realtime_client(emulator_thread) as py:
        ch = py.channels.get(name)
        await ch.attach()
        serials = []
        for i in range(5):
            serials += (await ch.publish("n", f"m{i}")).serials
        await ch.append_message(Message(serial=serials[-1], data="+"))
        js = await call(node, "open", options=connect_info(emulator_thread))
        try:
            await call(node, "subscribe", handle=js["handle"], channel=name)
            await ch.append_message(Message(serial=serials[-1], data="more"))
            got = await call(node, "received", handle=js["handle"], channel=name, count=1)
            assert got[0]["action"] == "message.update" and got[0]["data"] == "m4+more"
            hist = await call(node, "history", handle=js["handle"], channel=name, limit=2)
            assert [m["data"] for m in hist] == ["m4+more", "m3", "m2", "m1", "m0"]
            # untilAttach stops at the attach point even though later messages exist
            await ch.publish("n", "after-attach")
            hist = await call(node, "history", handle=js["handle"], channel=name, untilAttach=True)
            assert [m["data"] for m in hist] == ["m4+more", "m3", "m2", "m1", "m0"]
        finally:
            await call(node, "close", handle=js["handle"])


async def test_js_resumes_after_transport_drop(node: Any, emulator_thread: EmulatorThread) -> None:
    name = unique_channel("js")
    js = await call(node, "open", options=connect_info(emulator_thread))
    try:
        await call(node, "subscribe", handle=js["handle"], channel=name)
        async with realtime_client(emulator_thread) as py:
            ch = py.channels.get(name)
            await ch.attach()
            serial = (await ch.publish("ai-output", "a")).serials[0]
            assert len(await call(node, "received", handle=js["handle"], channel=name, count=1)) == 1
            dropped = await asyncio.to_thread(
                emulator_thread.call, emulator_thread.emulator.drop_transports, js["connectionId"]
            )
            assert dropped == 1
            for frag in "bcd":
                await ch.append_message(Message(serial=serial, data=frag))
            await ch.publish("ai-output", "next")
            got = await call(node, "received", handle=js["handle"], channel=name, count=5, timeoutMs=15000)
        assert [(m["action"], m["data"]) for m in got] == [
            ("message.create", "a"),
            ("message.append", "b"),
            ("message.append", "c"),
            ("message.append", "d"),
            ("message.create", "next"),
        ]
    finally:
        await call(node, "close", handle=js["handle"])


async def test_js_token_capability_and_client_id(node: Any, emulator_thread: EmulatorThread) -> None:
    from jsbridge import NodeError

    name = unique_channel("jscap")
    token = await asyncio.to_thread(
        emulator_thread.call,
        lambda: emulator_thread.emulator.authority.issue(
            "local.dev", capability={name: ["subscribe", "history"]}, client_id="js-bound"
        )["token"],
    )
    js = await call(node, "open", options=connect_info(emulator_thread, token=token))
    try:
        assert js["clientId"] == "js-bound"
        await call(node, "subscribe", handle=js["handle"], channel=name)
        with pytest.raises(NodeError) as info:
            await call(node, "publish", handle=js["handle"], channel=name, name="n", data="denied")
        assert info.value.code == 40160
        assert await call(node, "history", handle=js["handle"], channel=name) == []
    finally:
        await call(node, "close", handle=js["handle"])
