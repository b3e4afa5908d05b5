"""The emulator's Ably limits over the real ``ably`` SDK: 42911 / 42913 / 42921, appendRollupWindow,
and the bounded outbound queue of a stalled subscriber (80020). No test depends on speed: rates are
set so low that a slow machine still exceeds them, and roll-up windows so long that a slow machine
still lands several appends in one.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest
from ably.types.message import Message
from ably.util.exceptions import AblyException
from support_emulator import Inbox, realtime_client, rest_client, unique_channel

from ai_transport.emulator import Emulator
from ai_transport.emulator.limits import RateLimits


async def _outcomes(coros: list[Any]) -> list[int | None]:
    """Run publishes concurrently; the error code of each (None = accepted)."""
    results = await asyncio.gather(*coros, return_exceptions=True)
    codes: list[int | None] = []
    for r in results:
        if isinstance(r, AblyException):
            codes.append(r.code)
        elif isinstance(r, BaseException):
            raise r
        else:
            codes.append(None)
    return codes


async def test_connection_over_its_rate_gets_42911_and_stays_connected() -> None:
    limits = RateLimits(connection_rate=2, channel_rate=None, fatal_factor=1000, append_rollup_window=0)
    async with Emulator(port=0, rate_limits=limits) as emu, realtime_client(emu, client_id="w") as client:
        ch = client.channels.get(unique_channel())
        await ch.attach()
        codes = await _outcomes([ch.publish("m", f"{i}") for i in range(30)])
        assert 42911 in codes and None in codes
        assert set(codes) <= {None, 42911}
        assert client.connection.state.value == "connected"
        assert emu.limiter.rejected[42911] == codes.count(42911)
        await asyncio.sleep(1.1)  # the bucket refills: publishing works again
        await ch.publish("m", "after")
        async with rest_client(emu) as rest:
            page = await rest.channels.get(ch.name).history()
        # every accepted message is stored, no rejected one is
        assert len(page.items) == codes.count(None) + 1


async def test_channel_over_its_rate_gets_42913_whoever_publishes() -> None:
    limits = RateLimits(connection_rate=None, channel_rate=2, append_rollup_window=0)
    name = unique_channel()
    async with (
        Emulator(port=0, rate_limits=limits) as emu,
        realtime_client(emu, client_id="a") as a,
        realtime_client(emu, client_id="b") as b,
    ):
        cha, chb = a.channels.get(name), b.channels.get(name)
        await asyncio.gather(cha.attach(), chb.attach())
        codes = await _outcomes([c.publish("m", str(i)) for i in range(15) for c in (cha, chb)])
        assert 42913 in codes and None in codes
        assert a.connection.state.value == "connected" and b.connection.state.value == "connected"
        # another channel is unaffected
        other = a.channels.get(unique_channel())
        await other.publish("m", "fine")


async def test_far_over_the_rate_closes_the_connection_with_42921() -> None:
    limits = RateLimits(connection_rate=1, channel_rate=None, fatal_factor=5, append_rollup_window=0)
    async with Emulator(port=0, rate_limits=limits) as emu, realtime_client(emu, client_id="w") as client:
        ch = client.channels.get(unique_channel())
        await ch.attach()
        # the SDK leaves publishes pending when its connection fails: don't await them
        tasks = [asyncio.ensure_future(ch.publish("m", str(i))) for i in range(20)]
        for _ in range(1000):
            if client.connection.error_reason is not None and client.connection.state.value != "connected":
                break
            await asyncio.sleep(0.01)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert client.connection.error_reason.code == 42921
        assert emu.limiter.rejected[42921] == 1


async def test_rollup_merges_appends_for_subscribers_history_unaffected() -> None:
    name = unique_channel()
    frags = [f"t{i} " for i in range(20)]
    async with (
        Emulator(port=0) as emu,
        realtime_client(emu, client_id="w", transport_params={"appendRollupWindow": 500}) as writer,
        realtime_client(emu, client_id="r") as reader,
    ):
        rch = reader.channels.get(name)
        inbox = Inbox()
        await rch.subscribe(inbox.push)
        wch = writer.channels.get(name)
        serial = (await wch.publish(Message(name="out", data="", extras={"headers": {"k": "v0"}}))).serials[0]
        for i, frag in enumerate(frags):
            await wch.append_message(Message(serial=serial, data=frag, extras={"headers": {"k": f"v{i + 1}"}}))
        got = [await inbox.next()]
        text = ""
        while text != "".join(frags):
            m = await inbox.next()
            got.append(m)
            text += m.data
        appends = got[1:]
        # the first append goes out at once, alone; later ones within the window are merged
        assert appends[0].data == frags[0]
        assert len(appends) < len(frags)
        # a merged delivery carries the last append's extras
        assert appends[-1].extras == {"headers": {"k": f"v{len(frags)}"}}
        assert all(m.serial == serial for m in appends)
        await inbox.quiet(0.6)
        # history (and getMessage) hold every append
        page = await rch.history()
        assert page.items[0].data == "".join(frags)
        assert page.items[0].extras == {"headers": {"k": f"v{len(frags)}"}}


async def test_rollup_window_default_applies_and_zero_turns_it_off() -> None:
    name = unique_channel()
    async with (
        Emulator(port=0, rate_limits=RateLimits(append_rollup_window=500)) as emu,
        realtime_client(emu, client_id="w", transport_params={"appendRollupWindow": 0}) as exact,
        realtime_client(emu, client_id="d") as default,
        realtime_client(emu, client_id="r") as reader,
    ):
        rch = reader.channels.get(name)
        inbox = Inbox()
        await rch.subscribe(inbox.push)
        for client, expect_merge in ((exact, False), (default, True)):
            ch = client.channels.get(name)
            serial = (await ch.publish("out", "")).serials[0]
            for i in range(10):
                await ch.append_message(Message(serial=serial, data=str(i)))
            created = await inbox.next()
            assert created.serial == serial
            text, n = "", 0
            while text != "0123456789":
                text += (await inbox.next()).data
                n += 1
            assert (n < 10) if expect_merge else (n == 10)


async def test_rolled_up_appends_count_once_against_the_rate() -> None:
    # 30 appends at a window of 500 ms cost at most a few messages of a 5/s budget: none rejected
    limits = RateLimits(connection_rate=5, channel_rate=None, fatal_factor=1000, append_rollup_window=500)
    async with Emulator(port=0, rate_limits=limits) as emu, realtime_client(emu, client_id="w") as client:
        ch = client.channels.get(unique_channel())
        await ch.attach()
        serial = (await ch.publish("out", "")).serials[0]
        for i in range(30):
            await ch.append_message(Message(serial=serial, data=str(i % 10)))
        assert emu.limiter.rejected[42911] == 0


async def test_stalled_subscriber_is_cut_others_unaffected() -> None:
    bound = 256 * 1024
    limits = RateLimits(
        connection_rate=None, channel_rate=None, append_rollup_window=0, max_outbound_bytes=bound
    )
    name = unique_channel()
    payload = "x" * 60_000
    count = 160  # ~9.6 MB: more than the loopback socket buffers hold, so the emulator must queue
    async with Emulator(port=0, rate_limits=limits) as emu, realtime_client(emu, client_id="r") as healthy:
        # a raw websocket that attaches and then never reads again
        stalled = socket.create_connection(("127.0.0.1", emu.port))
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.sendall(
            b"GET /?accessToken=raw&v=6&format=json HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\n\r\n"
        )
        attach = json.dumps({"action": 10, "channel": name}).encode()
        stalled.sendall(bytes([0x81, 0x80 | len(attach)]) + b"\0\0\0\0" + attach)
        try:
            await asyncio.sleep(0.2)
            inbox = Inbox()
            ch = healthy.channels.get(name)
            await ch.subscribe(inbox.push)
            async with rest_client(emu) as rest:
                rch = rest.channels.get(name)
                for i in range(count):
                    await rch.publish("big", f"{i}:{payload}")
            got = await inbox.take(count, timeout=30)
            assert [m.data.split(":", 1)[0] for m in got] == [str(i) for i in range(count)]
            assert emu.outbound_disconnects >= 1
            assert healthy.connection.state.value == "connected"
            for conn in emu.connections.values():
                if conn.session is not None and not conn.session.closed:
                    assert conn.session.queued() <= bound + 2 * len(payload)
        finally:
            stalled.close()


@pytest.mark.parametrize("raw", ["abc", "1e3"])
async def test_bad_rollup_window_is_refused(raw: str) -> None:
    from support_emulator import RawClient

    async with Emulator(port=0) as emu, RawClient.connect(
        emu.port, query=f"accessToken=raw&v=6&appendRollupWindow={raw}", connected=False
    ) as c:
        frame = await c.recv()
        assert frame["action"] == 9 and frame["error"]["code"] == 40000


async def test_the_emulator_command_enforces_limits_when_asked() -> None:
    """``ai-transport emulator --inbound-rate N`` (and ``--rate-limits``) turn Ably's limits on; the
    startup text says which limits hold."""
    import re
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ai_transport", "emulator", "--port", "0", "--inbound-rate", "2",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        head = ""
        while "Rate limits:" not in head:
            line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
            assert line, head
            head += line
        assert "2 messages/s per connection (42911)" in head
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", head)
        assert found, head
        url = found.group(1)
        async with realtime_client(url, client_id="w") as client:
            ch = client.channels.get(unique_channel())
            await ch.attach()
            codes = await _outcomes([ch.publish("m", f"{i}") for i in range(30)])
        assert None in codes and set(codes) - {None} and set(codes) <= {None, 42911, 42913}
    finally:
        proc.terminate()
        await proc.wait()


def test_rate_limit_options() -> None:
    import argparse

    from ai_transport.emulator.options import add_rate_limit_arguments, rate_limits_from_args

    parser = argparse.ArgumentParser()
    add_rate_limit_arguments(parser)
    assert rate_limits_from_args(parser.parse_args([])) is None
    assert rate_limits_from_args(parser.parse_args(["--rate-limits"])) == RateLimits()
    limits = rate_limits_from_args(parser.parse_args(["--append-rollup-window", "100"]))
    assert limits is not None and limits.append_rollup_window == 100 and limits.connection_rate == 50
    limits = rate_limits_from_args(parser.parse_args(["--inbound-rate", "10"]))
    assert limits is not None and (limits.connection_rate, limits.channel_rate) == (10, 10)
    with pytest.raises(ValueError, match="--inbound-rate"):
        rate_limits_from_args(parser.parse_args(["--inbound-rate", "0"]))
    with pytest.raises(ValueError, match="--append-rollup-window must be one of 0, 20, 40, 100, 500"):
        rate_limits_from_args(parser.parse_args(["--append-rollup-window", "33"]))
