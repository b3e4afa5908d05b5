"""Channel presence (``channel.presence``): one behavioural suite for the in-process channel and
AblyChannel over the emulator (the real ably-python SDK)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support_channels import AblyEmulatorKind, InProcessKind, Recorder, unique_name

from ai_transport.channels import InProcessHub, Presence, PresenceChannel
from ai_transport.errors import AITransportError

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["inprocess", "ably-emulator"])
async def kind(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A channel implementation with presence."""
    if request.param == "inprocess":
        k: Any = InProcessKind()
        try:
            yield k
        finally:
            await k.aclose()
        return
    from ai_transport.emulator import Emulator

    async with Emulator(port=0) as emu:
        k = AblyEmulatorKind(emu.port)
        try:
            yield k
        finally:
            await k.aclose()


def _essence(events: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    return [(e["action"], e["clientId"], e.get("data")) for e in events]


async def test_enter_update_leave_get_subscribe(kind: Any) -> None:
    name = unique_name("presence")
    agent = await kind.open(name, client_id="agent")
    watcher = await kind.open(name, client_id="watcher")
    assert isinstance(agent, PresenceChannel) and isinstance(agent.presence, Presence)
    rec = Recorder()
    await watcher.presence.subscribe(rec)
    await agent.presence.enter({"role": "agent"})
    await rec.wait_count(1)
    await agent.presence.update("busy")
    await rec.wait_count(2)
    members = await watcher.presence.get()
    assert [(m["action"], m["clientId"], m["data"]) for m in members] == [("present", "agent", "busy")]
    assert members[0]["connectionId"] == agent.connection_id
    assert members[0]["id"].startswith(f"{agent.connection_id}:")
    assert (await watcher.presence.get(client_id="nobody")) == []
    assert len(await watcher.presence.get(connection_id=agent.connection_id)) == 1
    await agent.presence.leave()
    await rec.wait_count(3)
    assert _essence(rec.messages) == [
        ("enter", "agent", {"role": "agent"}),
        ("update", "agent", "busy"),
        ("leave", "agent", "busy"),  # a leave without data carries the last data
    ]
    assert await watcher.presence.get() == []
    await rec.settle()
    assert len(rec.messages) == 3


async def test_enter_twice_is_an_update_and_update_when_absent_enters(kind: Any) -> None:
    name = unique_name("presence")
    a = await kind.open(name, client_id="a")
    rec = Recorder()
    await a.presence.subscribe(rec)  # the acting connection sees its own events (echo)
    await a.presence.update("1")
    await a.presence.enter(["2"])
    await a.presence.leave(b"3")
    await a.presence.leave()  # absent: nothing
    await rec.wait_count(3)
    await rec.settle()
    assert _essence(rec.messages) == [("enter", "a", "1"), ("update", "a", ["2"]), ("leave", "a", b"3")]


async def test_detach_and_close_leave(kind: Any) -> None:
    name = unique_name("presence")
    watcher = await kind.open(name, client_id="watcher")
    rec = Recorder()
    await watcher.presence.subscribe(rec)
    a = await kind.open(name, client_id="a")
    await a.presence.enter("x")
    await rec.wait_count(1)
    await a.detach()
    await rec.wait_count(2)
    assert rec.messages[1]["action"] == "leave" and rec.messages[1]["clientId"] == "a"
    await a.presence.enter("y")  # enter attaches again
    await rec.wait_count(3)
    await a.close()
    await rec.wait_count(4)
    assert _essence(rec.messages)[2:] == [("enter", "a", "y"), ("leave", "a", "y")]
    assert await watcher.presence.get() == []


async def test_entering_needs_a_client_id_and_valid_data(kind: Any) -> None:
    anon = await kind.open(unique_name("presence"))
    with pytest.raises(AITransportError) as info:
        await anon.presence.enter()
    assert info.value.code == 40012
    named = await kind.open(unique_name("presence"), client_id="a")
    with pytest.raises(TypeError) as bad:
        await named.presence.enter(12)
    assert getattr(bad.value, "code", None) == 40013


async def test_bad_listener_is_a_clear_error() -> None:
    ch = InProcessHub().channel("x", client_id="a")
    with pytest.raises(TypeError):
        await ch.presence.subscribe("not callable")  # type: ignore[arg-type]


async def test_a_failing_listener_does_not_stop_delivery(kind: Any) -> None:
    name = unique_name("presence")
    a = await kind.open(name, client_id="a")

    def boom(_: Any) -> None:
        raise RuntimeError("listener bug")

    rec = Recorder()
    await a.presence.subscribe(boom)
    await a.presence.subscribe(rec)
    await a.presence.enter()
    await a.presence.leave()
    await rec.wait_count(2)


_ops = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["enter", "update", "leave"])), max_size=12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
async def test_property_get_is_the_set_of_members_whose_last_op_was_not_leave(ops: list[tuple[str, str]]) -> None:
    hub = InProcessHub()
    name = "p"
    chans = {cid: hub.channel(name, client_id=cid) for cid in "abc"}
    watcher = hub.channel(name, client_id="w")
    rec = Recorder()
    await watcher.presence.subscribe(rec)
    expected: dict[str, str] = {}
    for i, (cid, op) in enumerate(ops):
        await getattr(chans[cid].presence, op)(str(i))
        if op == "leave":
            expected.pop(cid, None)
        else:
            expected[cid] = str(i)
    members = await watcher.presence.get()
    assert {m["clientId"]: m["data"] for m in members} == expected
    # the events a subscriber saw fold to the same set
    await rec.settle(0.01)
    folded: dict[str, Any] = {}
    for e in rec.messages:
        if e["action"] == "leave":
            folded.pop(e["clientId"], None)
        else:
            folded[e["clientId"]] = e["data"]
    assert folded == expected
    for ch in [*chans.values(), watcher]:
        await ch.close()


async def test_in_process_interrupt_delivers_no_presence_until_reattach() -> None:
    hub = InProcessHub()
    watcher = hub.channel("i", client_id="w")
    rec = Recorder()
    await watcher.presence.subscribe(rec)
    watcher.interrupt()
    agent = hub.channel("i", client_id="agent")
    await agent.presence.enter("on")
    await rec.settle(0.05)
    assert rec.messages == []  # lost with the transport
    await watcher.reattach()
    assert [m["clientId"] for m in await watcher.presence.get()] == ["agent"]  # the set is still known
    await agent.presence.leave()
    await rec.wait_count(1)
    assert rec.messages[0]["action"] == "leave"
    for ch in (watcher, agent):
        await ch.close()


@pytest.mark.parametrize(
    "fields", [{"data": "abc", "encoding": "vcdiff"}, {"data": "{", "encoding": "json"}], ids=["vcdiff", "bad-json"]
)
async def test_a_member_whose_data_the_sdk_cannot_decode_never_stalls_presence(fields: dict[str, Any]) -> None:
    """Another member enters with data ably-python cannot decode: the SDK raised in its transport
    handler and dropped the SYNC holding it, so ``presence.get()`` hung for every ably-python
    client of the channel. The member is listed with its data undecoded, the others as ever."""
    import asyncio

    from support_emulator import RawClient

    from ai_transport.channels.ably_channel import AblyChannel
    from ai_transport.emulator import Emulator, client_options

    async with Emulator(port=0) as emu:
        name = unique_name("presence-undecodable")
        agent = await AblyChannel.connect(name, **client_options(emu, client_id="agent"))
        await agent.presence.enter({"role": "agent"})
        async with RawClient.connect(emu.port, query="accessToken=raw&v=6&clientId=mallory") as raw:
            await raw.send({"action": 10, "channel": name})
            await raw.recv_action(11)
            await raw.send({"action": 14, "channel": name, "msgSerial": 0,
                            "presence": [{"action": 2, "clientId": "mallory", **fields}]})
            await raw.recv_action(1)
            watcher = await AblyChannel.connect(name, **client_options(emu, client_id="watch"))
            await watcher.attach()
            members = await asyncio.wait_for(watcher.presence.get(), 10)
            assert sorted(m["clientId"] for m in members) == ["agent", "mallory"]
            assert next(m for m in members if m["clientId"] == "agent")["data"] == {"role": "agent"}
            await watcher.close()
        await agent.close()
