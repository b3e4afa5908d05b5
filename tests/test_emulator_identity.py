"""Emulator identity and exposure like Ably's, through the real ``ably`` SDK.

Who mutated a message is stamped from the connection (a spoofed operation clientId is refused,
40012); an anonymous token cannot publish under a clientId; re-authentication cannot change a
connection's identity; replaying history on attach (rewind, an old channelSerial) needs the
``history`` capability; dev mode (wildcard tokens) needs a loopback bind; browser Origins that are
not loopback (or allowed) are refused on websocket and REST.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest
from ably import AblyException
from ably.types.message import Message
from ably.types.operations import MessageOperation
from support_emulator import Inbox, emulator, realtime_client, unique_channel, wait_connected

from ai_transport.emulator import Emulator, ably_realtime, ably_rest

__all__ = ["emulator"]  # the fixture

ALL = ["publish", "subscribe", "history", "message-update-any", "message-delete-any"]


async def token(emu: Emulator, client_id: str | None, ops: list[str] | None = None, channel: str = "*") -> str:
    rest = ably_rest(emu, key=emu.key, use_token_auth=True)
    try:
        params: dict[str, Any] = {"capability": json.dumps({channel: ops or ALL})}
        if client_id is not None:
            params["client_id"] = client_id
        details = await rest.auth.request_token(token_params=params)
    finally:
        await rest.close()
    return details.token


async def test_operation_client_id_is_stamped_and_a_spoofed_one_refused(emulator: Emulator) -> None:
    name = unique_channel("ident")
    agent_token, mallory_token = await token(emulator, "agent"), await token(emulator, "mallory")
    async with realtime_client(emulator, token=agent_token) as agent, realtime_client(
        emulator, token=mallory_token
    ) as mallory:
        ach = agent.channels.get(name)
        await ach.attach()
        serial = (await ach.publish(Message(name="ai-output", data="hello"))).serials[0]
        mch = mallory.channels.get(name)
        inbox = Inbox()
        await mch.subscribe(inbox.push)
        # claiming to be the agent is refused
        with pytest.raises(AblyException) as info:
            await mch.append_message(Message(serial=serial, data=" evil"), MessageOperation(client_id="agent"))
        assert info.value.code == 40012
        # without a claim the append goes through, stamped with mallory's identity
        await mch.append_message(Message(serial=serial, data=" evil"))
        live = [m for m in await inbox.take(1) if m.action is not None]
        assert live[0].version.client_id == "mallory"
        # the agent's own operation carries the agent; naming itself is fine
        await ach.append_message(Message(serial=serial, data="!"), MessageOperation(client_id="agent"))
        rest = ably_rest(emulator, token=agent_token)
        try:
            got = await rest.channels.get(name).get_message(serial)
        finally:
            await rest.close()
        assert got.data == "hello evil!" and got.version.client_id == "agent"


async def test_an_anonymous_token_cannot_publish_under_a_client_id(emulator: Emulator) -> None:
    name = unique_channel("anon")
    async with realtime_client(emulator, token=await token(emulator, None)) as anon:
        ch = anon.channels.get(name)
        await ch.attach()
        with pytest.raises(AblyException) as info:
            await ch.publish(Message(name="ai-output", data="x", client_id="agent"))
        assert info.value.code == 40012
        serial = (await ch.publish(Message(name="ai-input", data="hi"))).serials[0]
        history = await ch.history()
        assert [(m.serial, m.client_id) for m in history.items] == [(serial, None)]


async def test_reauthentication_cannot_change_the_connection_identity(emulator: Emulator) -> None:
    tokens = [await token(emulator, None), await token(emulator, "mallory")]
    issued: list[str] = []

    async def auth_callback(_params: Any) -> str:
        issued.append(tokens[min(len(issued), 1)])
        return issued[-1]

    client = ably_realtime(emulator, auth_callback=auth_callback, token=None)
    try:
        await wait_connected(client)
        assert client.connection.connection_details.client_id is None
        with pytest.raises(AblyException) as info:
            await client.auth.authorize()
        assert info.value.code == 40102
    finally:
        await client.close()


async def test_replaying_history_on_attach_needs_the_history_capability(emulator: Emulator) -> None:
    name = unique_channel("replay")
    async with realtime_client(emulator, token=await token(emulator, "agent")) as agent:
        ch = agent.channels.get(name)
        await ch.attach()
        first = (await ch.publish("n", "one")).serials[0]
        await ch.publish("n", "two")
    reader_ops = ["subscribe", "publish"]
    # rewind without history: the attach is refused (40160), with history it replays
    async with realtime_client(emulator, token=await token(emulator, "eve", reader_ops)) as eve:
        ch = eve.channels.get(name, params={"rewind": "10"})
        with pytest.raises(AblyException) as info:
            await ch.attach()
        assert info.value.code == 40160
    async with realtime_client(emulator, token=await token(emulator, "bob", [*reader_ops, "history"])) as bob:
        ch = bob.channels.get(name, params={"rewind": "10"})
        inbox = Inbox()
        await ch.subscribe(inbox.push)
        assert [m.data for m in await inbox.take(2)] == ["one", "two"]
    # an old channelSerial on a fresh connection: nothing before the attach without history
    for who, ops, expected in (("eve", reader_ops, []), ("bob", [*reader_ops, "history"], ["two"])):
        async with realtime_client(emulator, token=await token(emulator, who, ops)) as client:
            ch = client.channels.get(name)
            ch._RealtimeChannel__channel_serial = first  # what the SDK sends when it re-attaches
            inbox = Inbox()
            await ch.subscribe(inbox.push)
            await asyncio.sleep(0.2)
            assert [m.data for m in inbox.messages] == expected, who


async def test_dev_mode_needs_a_loopback_bind(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ValueError, match=r"refusing to bind '0\.0\.0\.0' in dev mode"):
        await Emulator(host="0.0.0.0", port=0).start()
    async with Emulator(host="0.0.0.0", port=0, strict_tokens=True) as strict:
        client = ably_realtime(strict.port, token="anything")
        try:
            with pytest.raises(AssertionError, match="40101"):
                await wait_connected(client)
        finally:
            await client.close()
    with caplog.at_level(logging.WARNING, logger="ai_transport.emulator"):
        loud = await Emulator(host="0.0.0.0", port=0, dev_tokens_on_any_host=True).start()
        try:
            async with realtime_client(loud.port, token="anything") as client:
                assert client.connection.state.value == "connected"
        finally:
            await loud.stop()
    assert any("DEV MODE" in r.getMessage() for r in caplog.records)


async def test_a_foreign_browser_origin_is_refused_on_websocket_and_rest() -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    async with Emulator(port=0, allowed_origins=["https://app.example"]) as emu:
        async with httpx.AsyncClient() as http:
            evil = await http.get(f"{emu.url}/time", headers={"Origin": "https://evil.example"})
            assert evil.status_code == 403 and evil.json()["error"]["code"] == 40300
            for ok in ("http://localhost:5173", "http://127.0.0.1:8000", "https://app.example"):
                good = await http.get(f"{emu.url}/time", headers={"Origin": ok})
                assert good.status_code == 200 and good.headers["access-control-allow-origin"] == ok
            preflight = await http.options(
                f"{emu.url}/channels/x/messages", headers={"Origin": "https://evil.example"}
            )
            assert preflight.status_code == 403
        url = f"ws://127.0.0.1:{emu.port}/?accessToken=dev&v=6"
        with pytest.raises(InvalidStatus) as info:
            async with connect(url, origin="https://evil.example"):  # type: ignore[arg-type]
                pass
        assert info.value.response.status_code == 403
        async with connect(url, origin="http://localhost:3000") as ws:  # type: ignore[arg-type]
            assert json.loads(await ws.recv())["action"] == 4
        # SDK clients send no Origin and are unaffected
        async with realtime_client(emu) as client:
            assert client.connection.state.value == "connected"
