"""The emulator's serving on aiohttp: websocket and REST on one port, frame types per format,
fragmented messages, ordered sends, and a graceful stop (close 1001, then nothing listens)."""

from __future__ import annotations

import json
import socket

import httpx
import pytest
from support_emulator import RawClient, unique_channel
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from ai_transport.emulator import Emulator


async def test_websocket_and_rest_share_the_port_and_frames_follow_the_format() -> None:
    async with Emulator(port=0) as emu:
        async with connect(f"ws://127.0.0.1:{emu.port}/?accessToken=t&v=6&format=json") as ws:
            connected = await ws.recv()
            assert isinstance(connected, str) and json.loads(connected)["action"] == 4  # a text frame
        async with connect(f"ws://127.0.0.1:{emu.port}/?accessToken=t&v=6&format=msgpack") as ws:
            assert isinstance(await ws.recv(), bytes)  # a binary frame
        async with httpx.AsyncClient(base_url=emu.url) as http:
            assert (await http.get("/time")).status_code == 200


async def test_a_fragmented_message_is_reassembled() -> None:
    async with Emulator(port=0) as emu, RawClient.connect(emu.port) as c:
        text = json.dumps({"action": 0, "id": "fragmented"})
        await c.ws.send([text[:5], text[5:11], text[11:]])  # one message in three frames
        assert await c.recv_action(0) == {"action": 0, "id": "fragmented"}


async def test_replies_keep_their_order_up_to_the_close() -> None:
    name = unique_channel()
    async with Emulator(port=0) as emu, RawClient.connect(emu.port) as c:
        await c.send({"action": 10, "channel": name})
        assert (await c.recv_action(11))["channel"] == name
        n = 200
        for i in range(n):
            await c.send({"action": 15, "channel": name, "msgSerial": i, "messages": [{"data": f"m{i}"}]})
        await c.send({"action": 99})  # an unknown action: ERROR, then the close
        acks, echoes = [], []
        while True:
            frame = await c.recv()
            if frame["action"] == 9:
                break
            if frame["action"] == 1:
                acks.append(frame["msgSerial"])
            elif frame["action"] == 15:
                echoes.append(frame["messages"][0]["data"])
        assert acks == list(range(n)) and echoes == [f"m{i}" for i in range(n)]
        with pytest.raises(ConnectionClosed) as info:
            await c.recv()
        assert info.value.rcvd is not None and info.value.rcvd.code == 1000


async def test_stop_closes_websockets_with_1001_and_frees_the_port() -> None:
    emu = await Emulator(port=0).start()
    port = emu.port
    async with RawClient.connect(port) as a, RawClient.connect(port) as b:
        await emu.stop()
        for client in (a, b):
            with pytest.raises(ConnectionClosed) as info:
                await client.recv()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1001
    with pytest.raises(ConnectionRefusedError):  # nothing listens there any more
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


async def test_a_request_body_over_the_limit_is_413_and_the_server_survives() -> None:
    async with Emulator(port=0) as emu, httpx.AsyncClient(base_url=emu.url) as http:
        big = b"x" * (16 * 1024 * 1024 + 1)
        r = await http.post("/channels/x/messages", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert (await http.get("/time")).status_code == 200
