"""Presence in the emulator: the unmodified ably-python SDK (realtime + REST) and raw frames."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from ably.types.presence import PresenceAction
from ably.util.exceptions import AblyException
from hypothesis import given, settings
from hypothesis import strategies as st
from support_emulator import (  # noqa: F401
    Inbox,
    RawClient,
    emulator,
    realtime_client,
    rest_client,
    unique_channel,
)

from ai_transport.emulator import Emulator
from ai_transport.emulator.presence_store import PresenceStore, newer_than

pytestmark = pytest.mark.timeout(60)

PRESENCE, SYNC, ATTACH, ATTACHED, ACK, NACK, DETACH = 14, 16, 10, 11, 1, 2, 12
HAS_PRESENCE = 1
RESUMED = 1 << 2


def _ids(members: list[Any]) -> list[str]:
    return sorted(m.client_id for m in members)


async def test_enter_get_subscribe_update_leave_with_the_sdk(emulator: Emulator) -> None:
    name = unique_channel("presence")
    async with realtime_client(emulator, client_id="agent") as agent, realtime_client(
        emulator, client_id="watcher"
    ) as watcher:
        wch = watcher.channels.get(name)
        inbox = Inbox()
        await wch.presence.subscribe(inbox.push)
        ach = agent.channels.get(name)
        await ach.attach()
        await ach.presence.enter({"status": "online"})
        entered = await inbox.next()
        assert entered.action == PresenceAction.ENTER
        assert entered.client_id == "agent"
        assert entered.data == {"status": "online"}
        agent_conn = agent.connection.connection_manager.connection_id
        assert entered.connection_id == agent_conn
        assert entered.id.startswith(f"{agent_conn}:")
        await ach.presence.update("busy")
        updated = await inbox.next()
        assert (updated.action, updated.data) == (PresenceAction.UPDATE, "busy")
        members = await wch.presence.get()
        assert _ids(members) == ["agent"] and members[0].data == "busy"
        await ach.presence.leave()
        left = await inbox.next()
        assert left.action == PresenceAction.LEAVE and left.client_id == "agent"
        assert left.data == "busy"  # a leave without data carries the member's last data
        assert await wch.presence.get() == []
        await inbox.quiet()


async def test_late_attach_gets_the_set_by_sync(emulator: Emulator) -> None:
    name = unique_channel("presence")
    async with realtime_client(emulator) as a:
        ch = a.channels.get(name)
        await ch.attach()
        for cid in ("x", "y", "z"):
            await ch.presence.enter_client(cid, cid.upper())
        async with realtime_client(emulator, client_id="late") as late:
            members = await late.channels.get(name).presence.get()
            assert _ids(members) == ["x", "y", "z"]
            assert {m.client_id: m.data for m in members} == {"x": "X", "y": "Y", "z": "Z"}
            assert all(m.action == PresenceAction.PRESENT for m in members)


async def test_a_transport_drop_the_sdk_resumes_from_keeps_the_member() -> None:
    async with Emulator(port=0, remain_present_for=300) as emu:
        name = unique_channel("presence")
        async with realtime_client(emu, client_id="agent") as agent, realtime_client(
            emu, client_id="watcher"
        ) as watcher:
            wch = watcher.channels.get(name)
            inbox = Inbox()
            await wch.presence.subscribe(inbox.push)
            ach = agent.channels.get(name)
            await ach.attach()
            await ach.presence.enter("on")
            assert (await inbox.next()).action == PresenceAction.ENTER
            conn_id = agent.connection.connection_manager.connection_id
            assert emu.drop_transports(conn_id) == 1
            # the SDK resumes and re-enters with the member's own id: no leave, no event at all
            await inbox.quiet(1.0)
            assert _ids(await wch.presence.get()) == ["agent"]
            assert agent.connection.connection_manager.connection_id == conn_id


async def test_leave_after_grace_when_a_connection_vanishes() -> None:
    grace = 500
    async with Emulator(port=0, remain_present_for=grace) as emu:
        name = unique_channel("presence")
        async with realtime_client(emu, client_id="watcher") as watcher:
            wch = watcher.channels.get(name)
            inbox = Inbox()
            await wch.presence.subscribe(inbox.push)
            async with RawClient.connect(emu.port, query="accessToken=raw&v=6&clientId=worker") as worker:
                await worker.send({"action": ATTACH, "channel": name})
                await worker.recv_action(ATTACHED)
                presence = [{"action": 2, "data": "w"}]
                await worker.send({"action": PRESENCE, "channel": name, "msgSerial": 0, "presence": presence})
                await worker.recv_action(ACK)
                conn_id = worker.connected["connectionId"]
                assert (await inbox.next()).action == PresenceAction.ENTER
                gone_at = int(time.time() * 1000)
            left = await inbox.next(10)
            assert (left.action, left.client_id, left.connection_id) == (PresenceAction.LEAVE, "worker", conn_id)
            assert left.data == "w" and left.is_synthesized()
            assert left.timestamp.timestamp() * 1000 >= gone_at + grace - 1
            assert await wch.presence.get() == []


async def test_close_and_detach_leave_at_once(emulator: Emulator) -> None:
    name = unique_channel("presence")
    async with realtime_client(emulator, client_id="watcher") as watcher:
        wch = watcher.channels.get(name)
        inbox = Inbox()
        await wch.presence.subscribe(inbox.push)
        async with realtime_client(emulator, client_id="a") as a:
            ch = a.channels.get(name)
            await ch.attach()
            await ch.presence.enter()
            assert (await inbox.next()).action == PresenceAction.ENTER
            await ch.detach()
            assert (await inbox.next()).action == PresenceAction.LEAVE
            await ch.attach()
            await ch.presence.enter()
            assert (await inbox.next()).action == PresenceAction.ENTER
        left = await inbox.next()
        assert (left.action, left.client_id) == (PresenceAction.LEAVE, "a")


async def test_rest_get_and_history(emulator: Emulator) -> None:
    name = unique_channel("presence")
    async with realtime_client(emulator) as a:
        ch = a.channels.get(name)
        await ch.attach()
        for i in range(5):
            await ch.presence.enter_client(f"c{i}", str(i))
        await ch.presence.leave_client("c0")
        async with rest_client(emulator) as rest:
            rch = rest.channels.get(name)
            page = await rch.presence.get()
            assert _ids(page.items) == ["c1", "c2", "c3", "c4"]
            assert all(m.action == PresenceAction.PRESENT for m in page.items)
            small = await rch.presence.get(limit=3)
            assert len(small.items) == 3 and small.has_next()
            rest_of = await small.next()
            assert len(rest_of.items) == 1
            hist = await rch.presence.history()
            assert [m.action for m in hist.items][:1] == [PresenceAction.LEAVE]  # newest first
            assert len(hist.items) == 6
            fwd = await rch.presence.history(direction="forwards", limit=2)
            assert [m.client_id for m in fwd.items] == ["c0", "c1"]
            details = await rest.request("GET", f"/channels/{name}", "3")
            metrics = details.items[0]["status"]["occupancy"]["metrics"]
            assert (metrics["presenceMembers"], metrics["presenceConnections"]) == (4, 1)


async def test_capability_mode_and_client_id_rules(emulator: Emulator) -> None:
    name = unique_channel("presence")
    token = emulator.authority.issue(
        emulator.key.split(":")[0], capability={name: ["subscribe", "publish"]}, client_id="nopres"
    )["token"]
    async with RawClient.connect(emulator.port, query=f"accessToken={token}&v=6") as c:
        await c.send({"action": PRESENCE, "channel": name, "msgSerial": 0, "presence": [{"action": 2}]})
        assert (await c.recv_action(NACK))["error"]["code"] == 90001  # not attached
        await c.send({"action": ATTACH, "channel": name})
        await c.recv_action(ATTACHED)
        await c.send({"action": PRESENCE, "channel": name, "msgSerial": 1, "presence": [{"action": 2}]})
        assert (await c.recv_action(NACK))["error"]["code"] == 40160  # no presence capability
    async with RawClient.connect(emulator.port, query="accessToken=raw&v=6&clientId=me") as c:
        # attached without the PRESENCE mode (subscribe only)
        await c.send({"action": ATTACH, "channel": name, "flags": 1 << 18})
        await c.recv_action(ATTACHED)
        await c.send({"action": PRESENCE, "channel": name, "msgSerial": 0, "presence": [{"action": 2}]})
        assert (await c.recv_action(NACK))["error"]["code"] == 40160
        await c.send({"action": ATTACH, "channel": name})
        await c.recv_action(ATTACHED)
        bad = [{"action": 2, "clientId": "someone-else"}]
        await c.send({"action": PRESENCE, "channel": name, "msgSerial": 1, "presence": bad})
        assert (await c.recv_action(NACK))["error"]["code"] == 40012
        await c.send({"action": PRESENCE, "channel": name, "msgSerial": 2, "presence": [{"action": 1}]})
        assert (await c.recv_action(NACK))["error"]["code"] == 40000
    async with RawClient.connect(emulator.port) as anon:  # no clientId: must name one
        await anon.send({"action": ATTACH, "channel": name})
        await anon.recv_action(ATTACHED)
        await anon.send({"action": PRESENCE, "channel": name, "msgSerial": 0, "presence": [{"action": 2}]})
        assert (await anon.recv_action(NACK))["error"]["code"] == 40012
    async with realtime_client(emulator, client_id="sdk") as sdk:
        ch = sdk.channels.get(name)
        await ch.attach()
        with pytest.raises(AblyException):
            await ch.presence.enter_client("other")


async def test_raw_frames_ids_sync_and_enter_as_update(emulator: Emulator) -> None:
    name = unique_channel("presence")
    async with RawClient.connect(emulator.port, query="accessToken=raw&v=6&clientId=me") as c:
        conn_id = c.connected["connectionId"]
        await c.send({"action": ATTACH, "channel": name})
        attached = await c.recv_action(ATTACHED)
        assert not attached["flags"] & HAS_PRESENCE
        await c.send({"action": PRESENCE, "channel": name, "msgSerial": 0, "presence": [{"action": 2, "data": "a"}]})
        frame = await c.recv_action(PRESENCE)  # the echo comes before the ACK
        assert (await c.recv_action(ACK))["msgSerial"] == 0
        (msg,) = frame["presence"]
        assert msg["id"] == f"{conn_id}:0:0" and msg["action"] == 2 and msg["connectionId"] == conn_id
        # entering again is an update; re-entering with the member's own id changes nothing
        await c.send({"action": PRESENCE, "channel": name, "msgSerial": 1, "presence": [{"action": 2, "data": "b"}]})
        assert (await c.recv_action(PRESENCE))["presence"][0]["action"] == 4
        await c.recv_action(ACK)
        same = [{"action": 2, "data": "b", "id": f"{conn_id}:1:0"}]
        await c.send({"action": PRESENCE, "channel": name, "msgSerial": 2, "presence": same})
        await c.recv_action(ACK)
        # a client-requested SYNC gets the whole set as PRESENT, one page ending the sync
        await c.send({"action": SYNC, "channel": name})
        sync = await c.recv_action(SYNC)
        assert sync["channelSerial"].endswith(":")
        assert [(m["clientId"], m["action"], m["data"]) for m in sync["presence"]] == [("me", 1, "b")]
        async with RawClient.connect(emulator.port) as other:
            await other.send({"action": ATTACH, "channel": name})
            attached = await other.recv_action(ATTACHED)
            assert attached["flags"] & HAS_PRESENCE
            sync = await other.recv_action(SYNC)
            assert [m["id"] for m in sync["presence"]] == [f"{conn_id}:1:0"]
        await c.send({"action": DETACH, "channel": name})


async def test_a_reattach_over_a_live_transport_still_says_has_presence(emulator: Emulator) -> None:
    # RTP1: an ATTACHED without HAS_PRESENCE says the set is empty (an SDK passing through
    # ATTACHING clears its members, RTP19a), so a RESUMED re-attach carries it and a SYNC too.
    name = unique_channel("presence")
    async with RawClient.connect(emulator.port, query="accessToken=raw&v=6&clientId=me") as c:
        await c.send({"action": ATTACH, "channel": name})
        first = await c.recv_action(ATTACHED)
        await c.send({"action": PRESENCE, "channel": name, "msgSerial": 0, "presence": [{"action": 2}]})
        await c.recv_action(ACK)
        await c.send({"action": ATTACH, "channel": name, "channelSerial": first["channelSerial"]})
        again = await c.recv_action(ATTACHED)
        assert again["flags"] & RESUMED and again["flags"] & HAS_PRESENCE
        sync = await c.recv_action(SYNC)
        assert [m["clientId"] for m in sync["presence"]] == ["me"]


_member_ids = st.tuples(st.integers(0, 5), st.integers(0, 3))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_member_ids, st.sampled_from([2, 3, 4])), max_size=20))
def test_store_member_set_follows_the_last_operation(ops: list[tuple[tuple[int, int], int]]) -> None:
    store = PresenceStore()
    expected: dict[str, int] = {}
    for n, ((member, _), action) in enumerate(ops):
        cid = f"m{member}"
        out = store.apply("ch", {"id": f"c:{n}:0", "action": action, "clientId": cid, "connectionId": "c"})
        if action == 3:
            assert (out is not None) == (cid in expected)
            expected.pop(cid, None)
        else:
            assert out is not None and out["action"] == (4 if cid in expected else 2)
            expected[cid] = n
    assert {m["clientId"]: int(m["id"].split(":")[1]) for m in store.members("ch")} == expected
    assert all(m["action"] == 1 for m in store.present("ch"))


@given(_member_ids, _member_ids, st.integers(0, 10), st.integers(0, 10))
def test_newness_by_id_then_timestamp_when_synthesized(a: Any, b: Any, ta: int, tb: int) -> None:
    x = {"id": f"c:{a[0]}:{a[1]}", "connectionId": "c", "timestamp": ta}
    y = {"id": f"c:{b[0]}:{b[1]}", "connectionId": "c", "timestamp": tb}
    assert newer_than(x, y) == (a > b)
    synthetic = dict(x, id=f"synthetic:{a[0]}:{a[1]}")
    assert newer_than(synthetic, y) == (ta >= tb)


async def test_rest_batch_presence(emulator: Emulator) -> None:
    allowed, denied = unique_channel("presence"), unique_channel("presence")
    async with realtime_client(emulator, client_id="member") as member:
        for name in (allowed, denied):
            ch = member.channels.get(name)
            await ch.attach()
            await ch.presence.enter("here")
        token = emulator.authority.issue(
            emulator.key.split(":")[0], capability={allowed: ["subscribe"], denied: ["publish"]}
        )["token"]
        async with rest_client(emulator, token=token) as rest:
            page = await rest.request("GET", "/presence", "3", params={"channels": f"{denied},{allowed}"})
            (body,) = page.items  # a single JSON object
            assert (body["successCount"], body["failureCount"]) == (1, 1)
            first, second = body["results"]
            assert first["channel"] == denied and first["error"]["code"] == 40160 and "presence" not in first
            assert second["channel"] == allowed and "error" not in second
            assert [(m["clientId"], m["action"], m["data"]) for m in second["presence"]] == [("member", 1, "here")]


async def test_channel_modes_gate_presence_with_the_sdk(emulator: Emulator) -> None:
    from ably.types.channelmode import ChannelMode
    from ably.types.channeloptions import ChannelOptions

    name = unique_channel("presence")
    async with realtime_client(emulator, client_id="a") as a, realtime_client(emulator, client_id="b") as b:
        # a: may enter but not see presence; b: sees presence but may not enter
        ach = a.channels.get(name, ChannelOptions(modes=[ChannelMode.PRESENCE, ChannelMode.SUBSCRIBE]))
        bch = b.channels.get(name, ChannelOptions(modes=[ChannelMode.PRESENCE_SUBSCRIBE]))
        blind, seeing = Inbox(), Inbox()
        await ach.presence.subscribe(blind.push)
        await bch.presence.subscribe(seeing.push)
        await ach.presence.enter("x")
        assert (await seeing.next()).client_id == "a"
        with pytest.raises(AblyException) as info:
            await bch.presence.enter("y")
        assert info.value.code == 40160
        await blind.quiet(0.3)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["c1", "c2"]), st.sampled_from(["x", "y"]), st.sampled_from(["m1", "m2"]),
                  st.sampled_from([2, 3, 4])),
        max_size=25,
    )
)
def test_store_members_of_a_connection_matches_the_sets(ops: list[tuple[str, str, str, int]]) -> None:
    store = PresenceStore()
    for n, (conn, channel, cid, action) in enumerate(ops):
        store.apply(channel, {"id": f"{conn}:{n}:0", "action": action, "clientId": cid, "connectionId": conn})
    for conn in ("c1", "c2"):
        expected = sorted(
            (ch, m["clientId"]) for ch in ("x", "y") for m in store.members(ch) if m["connectionId"] == conn
        )
        assert sorted((ch, m["clientId"]) for ch, m in store.members_of(conn)) == expected
        assert [m["clientId"] for _, m in store.members_of(conn, "x")] == sorted(
            m["clientId"] for m in store.members("x") if m["connectionId"] == conn
        )


def test_store_ignores_an_operation_older_than_the_member() -> None:
    store = PresenceStore()
    base = {"clientId": "a", "connectionId": "c", "timestamp": 5}
    assert store.apply("ch", dict(base, id="c:3:0", action=2)) is not None
    assert store.apply("ch", dict(base, id="c:2:9", action=4)) is None  # stale: not applied
    assert store.apply("ch", dict(base, id="c:3:0", action=2)) is None  # the member's own id
    out = store.apply("ch", dict(base, id="c:3:1", action=4, data="new"))
    assert out is not None and out["action"] == 4
    assert store.members("ch")[0]["data"] == "new"


async def test_sync_pages_a_large_set(emulator: Emulator) -> None:
    name = unique_channel("presence")
    n = 250  # three SYNC frames
    async with RawClient.connect(emulator.port) as c:
        await c.send({"action": ATTACH, "channel": name})
        await c.recv_action(ATTACHED)
        batch = [{"action": 2, "clientId": f"m{i:03d}", "data": str(i)} for i in range(n)]
        await c.send({"action": PRESENCE, "channel": name, "msgSerial": 0, "presence": batch})
        await c.recv_action(ACK)
        async with RawClient.connect(emulator.port) as raw:
            await raw.send({"action": ATTACH, "channel": name})
            await raw.recv_action(ATTACHED)
            frames = [await raw.recv_action(SYNC) for _ in range(3)]
            cursors = [f["channelSerial"].split(":", 1) for f in frames]
            assert len({sync_id for sync_id, _ in cursors}) == 1
            assert [bool(cursor) for _, cursor in cursors] == [True, True, False]
            assert sum(len(f["presence"]) for f in frames) == n
        async with realtime_client(emulator, client_id="late") as late:
            members = await late.channels.get(name).presence.get()
            assert _ids(members) == [f"m{i:03d}" for i in range(n)]


async def test_a_huge_remain_present_for_is_bounded_and_the_drop_is_handled() -> None:
    """``remainPresentFor`` of 400 digits: the leave timer's delay (ms / 1000) raised OverflowError
    in the websocket handler's cleanup when the transport dropped (the session was never released)."""
    async with Emulator(port=0) as emu:
        name = unique_channel("presence")
        query = "accessToken=raw&v=6&clientId=worker&remainPresentFor=" + "9" * 400
        async with RawClient.connect(emu.port, query=query) as worker:
            await worker.send({"action": ATTACH, "channel": name})
            await worker.recv_action(ATTACHED)
            await worker.send({"action": PRESENCE, "channel": name, "msgSerial": 0, "presence": [{"action": 2}]})
            await worker.recv_action(ACK)
            assert emu.drop_transports(worker.connected["connectionId"]) == 1
        for _ in range(100):
            if not emu._sessions:
                break
            await asyncio.sleep(0.02)
        assert not emu._sessions
        assert [m["clientId"] for m in emu.presence.present(name)] == ["worker"]  # (still within its time)
