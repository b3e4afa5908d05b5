"""``session.presence`` on agent and client sessions; the agent is present while connected.

In-process, over the emulator with the real ably-python SDK, with ably-js in node as the UI, and a
real agent worker process killed mid-session (its member leaves after the disconnection grace).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support_channels import Recorder, unique_name
from support_emulator import emulator_thread  # noqa: F401
from support_sessions import open_session

from ai_transport.channels import AblyChannel, InProcessHub
from ai_transport.emulator import EmulatorThread, ably_realtime, connect_info
from ai_transport.errors import AITransportError
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession
from ai_transport.sessions.presence import AGENT_ROLE, is_agent_member, present_agents

pytestmark = pytest.mark.timeout(90)

WORKER = Path(__file__).with_name("support_presence_worker.py")


async def test_agent_is_present_while_connected_in_process() -> None:
    _hub, client, agent = await open_session(presence_data={"model": "m1"})
    members = await client.presence.get()
    assert [(m["clientId"], m["data"]) for m in members] == [("agent", {"model": "m1", "role": AGENT_ROLE})]
    assert [m["clientId"] for m in await present_agents(client.presence, {"agent"})] == ["agent"]
    assert agent.presence is agent.channel.presence  # the channel's own set, as JS exposes it
    rec = Recorder()
    await client.presence.subscribe(rec)
    await client.presence.enter({"typing": False})
    assert {m["clientId"] for m in await agent.presence.get()} == {"agent", "alice"}
    assert [m["clientId"] for m in await present_agents(agent.presence, {"agent"})] == ["agent"]
    await agent.close()
    await rec.wait_count(2)
    assert [(e["action"], e["clientId"], is_agent_member(e, {"agent"})) for e in rec.messages] == [
        ("enter", "alice", False),
        ("leave", "agent", True),
    ]
    assert await present_agents(client.presence, {"agent"}) == []
    await client.close()


async def test_a_member_claiming_the_agent_role_is_not_an_agent_in_process() -> None:
    # issue 21 #6: the role comes from the configured identities, never from the member's own data
    _hub, client, agent = await open_session()
    mallory = ClientSession(_hub.client("mallory").channel("chat"))
    await mallory.connect()
    await mallory.presence.enter({"role": AGENT_ROLE})
    assert {m["clientId"] for m in await client.presence.get()} == {"agent", "mallory"}
    assert [m["clientId"] for m in await present_agents(client.presence, {"agent"})] == ["agent"]
    (spoof,) = await client.presence.get(client_id="mallory")
    assert not is_agent_member(spoof, {"agent"})
    assert await present_agents(client.presence, {"agent"}, client_id="mallory") == []
    with pytest.raises(AITransportError) as err:
        await present_agents(client.presence, "agent")  # type: ignore[arg-type]  # a str is not a set of ids
    assert err.value.code == 40003
    await agent.end()
    for s in (mallory, client):
        await s.close()


async def test_a_member_claiming_the_agent_role_is_not_an_agent_over_the_sdk(emulator_thread: EmulatorThread) -> None:
    name = unique_name("presence-spoof")
    agent = AgentSession(AblyChannel(name, ably_realtime(emulator_thread, client_id="agent"), owns_client=True))
    mallory = ably_realtime(emulator_thread, client_id="mallory")
    watcher = ClientSession(AblyChannel(name, ably_realtime(emulator_thread, client_id="w"), owns_client=True))
    try:
        await agent.connect()
        await watcher.connect()
        await mallory.channels.get(name).presence.enter({"role": "agent"})  # the real ably SDK
        for _ in range(200):
            if {m["clientId"] for m in await watcher.presence.get()} == {"agent", "mallory"}:
                break
            await asyncio.sleep(0.02)
        assert {m["clientId"] for m in await watcher.presence.get()} == {"agent", "mallory"}
        assert [m["clientId"] for m in await present_agents(watcher.presence, {"agent"})] == ["agent"]
    finally:
        await mallory.close()
        await agent.close()
        await watcher.close()


async def test_opting_out_and_anonymous_agents_do_not_enter() -> None:
    hub = InProcessHub()
    quiet = AgentSession(hub.client("agent").channel("c"), enter_presence=False)
    await quiet.connect()
    anonymous = AgentSession(hub.client(None).channel("c"))
    await anonymous.connect()
    watcher = ClientSession(hub.client("w").channel("c"))
    assert await watcher.presence.get() == []
    assert not quiet.agent_presence.entered and not anonymous.agent_presence.entered
    with pytest.raises(TypeError):
        AgentSession(hub.client("a").channel("c"), presence_data="not a mapping")  # type: ignore[arg-type]
    for s in (quiet, anonymous, watcher):
        await s.close()


async def test_presence_needs_a_channel_with_a_presence_set() -> None:
    class Bare:
        name = "bare"
        client_id = "x"

    session = ClientSession(Bare())
    with pytest.raises(AITransportError) as info:
        _ = session.presence
    assert info.value.code == 40000 and "bare" in info.value.message


async def _js(node: Any, op: str, **args: Any) -> Any:
    return await asyncio.to_thread(node.call, "presence_js", op, **args)


@pytest.mark.js
async def test_python_agent_and_js_ui_over_the_emulator(node: Any, emulator_thread: EmulatorThread) -> None:
    name = unique_name("presence")
    ui = await _js(node, "open", options=connect_info(emulator_thread, client_id="alice"))
    realtime = ably_realtime(emulator_thread, client_id="agent")
    agent = AgentSession(AblyChannel(name, realtime, owns_client=True), presence_data={"model": "m1"})
    try:
        await _js(node, "subscribe", handle=ui["handle"], channel=name)
        await agent.connect()
        assert agent.agent_presence.entered
        (entered,) = await _js(node, "events", handle=ui["handle"], channel=name, count=1)
        assert (entered["action"], entered["clientId"]) == ("enter", "agent")
        assert entered["data"] == {"model": "m1", "role": "agent"}
        members = await _js(node, "get", handle=ui["handle"], channel=name)
        assert [(m["action"], m["clientId"]) for m in members] == [("present", "agent")]
        # the UI enters; the Python agent sees it through session.presence
        await _js(node, "act", handle=ui["handle"], channel=name, action="enter", data={"typing": True})
        for _ in range(100):
            if {m["clientId"] for m in await agent.presence.get()} == {"agent", "alice"}:
                break
            await asyncio.sleep(0.05)
        alice = (await agent.presence.get(client_id="alice"))[0]
        assert alice["data"] == {"typing": True} and alice["connectionId"] == ui["connectionId"]
        await _js(node, "act", handle=ui["handle"], channel=name, action="leave", data=None)
        await agent.close()  # the agent leaves at once
        got = await _js(node, "events", handle=ui["handle"], channel=name, count=4)
        assert [(e["action"], e["clientId"]) for e in got] == [
            ("enter", "agent"),
            ("enter", "alice"),
            ("leave", "alice"),
            ("leave", "agent"),
        ]
        assert await _js(node, "get", handle=ui["handle"], channel=name) == []
    finally:
        await agent.close()
        await _js(node, "close", handle=ui["handle"])


@pytest.mark.js
async def test_a_killed_worker_leaves_after_the_grace(node: Any, emulator_thread: EmulatorThread) -> None:
    name = unique_name("presence")
    grace = 700
    ui = await _js(node, "open", options=connect_info(emulator_thread, client_id="ui"))
    watcher = ClientSession(AblyChannel(name, ably_realtime(emulator_thread, client_id="py-ui"), owns_client=True))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), str(emulator_thread.port), name, str(grace), stdout=asyncio.subprocess.PIPE
    )
    try:
        await watcher.connect()
        rec = Recorder()
        await watcher.presence.subscribe(rec)
        await _js(node, "subscribe", handle=ui["handle"], channel=name)
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().split()
        assert line[0] == "ready"
        worker_conn = line[1]
        await rec.wait_for(lambda ms: any(m["action"] in ("enter", "present") for m in ms), 10)
        (online,) = await present_agents(watcher.presence, {"agent"})
        assert online["connectionId"] == worker_conn and online["data"]["worker"] == "w1"
        proc.kill()  # the worker vanishes: no CLOSE, no leave of its own
        killed_at = time.time() * 1000
        await proc.wait()
        await rec.wait_for(lambda ms: any(m["action"] == "leave" for m in ms), 15)
        leave = next(m for m in rec.messages if m["action"] == "leave")
        assert (leave["clientId"], leave["connectionId"]) == ("agent", worker_conn)
        assert leave["timestamp"] >= killed_at + grace - 50  # held for the grace, then synthesized
        assert not leave["id"].startswith(worker_conn)
        assert await present_agents(watcher.presence, {"agent"}) == []
        js_events = await _js(node, "events", handle=ui["handle"], channel=name, count=2, timeoutMs=15000)
        assert [(e["action"], e["clientId"]) for e in js_events][-1] == ("leave", "agent")
        assert await _js(node, "get", handle=ui["handle"], channel=name) == []
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await watcher.close()
        await _js(node, "close", handle=ui["handle"])


@pytest.mark.js
async def test_js_package_sessions_and_python_sessions_share_presence(
    node: Any, emulator_thread: EmulatorThread
) -> None:
    """A JS ClientSession (@ably/ai-transport) sees the Python agent online; a JS AgentSession
    entering through its session.presence is seen by a Python ClientSession that trusts its
    identity, and a JS browser entering with ``{"role": "agent"}`` is not listed."""
    AGENTS = {"py-agent", "js-agent"}
    name = unique_name("presence")
    agent = AgentSession(AblyChannel(name, ably_realtime(emulator_thread, client_id="py-agent"), owns_client=True))
    client = ClientSession(AblyChannel(name, ably_realtime(emulator_thread, client_id="py-user"), owns_client=True))
    js_client = await _js(node, "sessionOpen", options=connect_info(emulator_thread, client_id="js-user"),
                          channel=name, kind="client")
    js_agent = await _js(node, "sessionOpen", options=connect_info(emulator_thread, client_id="js-agent"),
                         channel=name, kind="agent")
    try:
        await agent.connect()
        await client.connect()
        members = await _js(node, "sessionGet", handle=js_client["handle"])
        assert [(m["clientId"], m["data"]) for m in members] == [("py-agent", {"role": "agent"})]
        await _js(node, "sessionPresence", handle=js_agent["handle"], action="enter", data={"role": "agent"})
        for _ in range(100):
            if len(await present_agents(client.presence, AGENTS)) == 2:
                break
            await asyncio.sleep(0.05)
        online = await present_agents(client.presence, AGENTS)
        assert sorted(m["clientId"] for m in online) == ["js-agent", "py-agent"]
        await _js(node, "sessionPresence", handle=js_client["handle"], action="enter", data={"role": "agent"})
        for _ in range(100):
            if "js-user" in {m["clientId"] for m in await client.presence.get()}:
                break
            await asyncio.sleep(0.05)
        assert sorted(m["clientId"] for m in await present_agents(client.presence, AGENTS)) == ["js-agent", "py-agent"]
        js_member = next(m for m in online if m["clientId"] == "js-agent")
        assert js_member["connectionId"] == js_agent["connectionId"]
        await _js(node, "close", handle=js_agent["handle"])  # closing the connection leaves at once
        for _ in range(100):
            if [m["clientId"] for m in await present_agents(client.presence, AGENTS)] == ["py-agent"]:
                break
            await asyncio.sleep(0.05)
        assert [m["clientId"] for m in await present_agents(client.presence, AGENTS)] == ["py-agent"]
    finally:
        await agent.close()
        await client.close()
        await _js(node, "close", handle=js_client["handle"])
        await _js(node, "close", handle=js_agent["handle"])


async def test_presence_after_history_lists_the_agent_over_the_emulator(emulator_thread: EmulatorThread) -> None:
    """``view.load_all()`` then ``presence.get()`` lists the agent (issue 23). Each REST request of an
    ably-python realtime client sends an in-band AUTH first, and the CONNECTED answering it makes the
    SDK re-attach every channel: that ATTACHED must carry HAS_PRESENCE (and a SYNC), or the SDK
    clears its member map."""
    name = unique_name("presence-history")
    agent = AgentSession(AblyChannel(name, ably_realtime(emulator_thread, client_id="agent"), owns_client=True))
    client = ClientSession(AblyChannel(name, ably_realtime(emulator_thread, client_id="user"), owns_client=True))
    try:
        await agent.connect()
        await agent.channel.publish({"name": "note", "data": "something in history"})
        await client.connect()
        assert [m["clientId"] for m in await present_agents(client.presence, {"agent"})] == ["agent"]
        await client.view.load_all()
        assert [m["clientId"] for m in await present_agents(client.presence, {"agent"})] == ["agent"]
        await client.view.load_all()  # and again: every history request re-attaches
        assert [m["clientId"] for m in await client.presence.get()] == ["agent"]
        assert [m["clientId"] for m in await present_agents(agent.presence, {"agent"})] == ["agent"]
    finally:
        await client.close()
        await agent.close()


async def test_presence_after_history_lists_the_agent_in_process() -> None:
    hub, client, agent = await open_session()
    await agent.channel.publish({"name": "note", "data": "something in history"})
    await client.view.load_all()
    assert [m["clientId"] for m in await present_agents(client.presence, {"agent"})] == ["agent"]
    await client.close()
    await agent.close()
    assert hub.channel_names() == ["chat"]
