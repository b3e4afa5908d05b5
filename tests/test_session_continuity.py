"""Loss of channel continuity (``attached`` with ``resumed`` false) on the in-process channel: both
sessions emit 104006 once, rebuild from history, and an approval published in the gap is acted on."""

from __future__ import annotations

import asyncio
from typing import Any

from support_sessions import (
    Worker,
    approve_call,
    eventually,
    model_stream,
    open_session,
    shapes,
    user_message,
    wait_status,
)

from ai_transport.channels.state import ChannelStateChange, is_continuity_lost


def test_is_continuity_lost_follows_0_8_0() -> None:
    lost = [("failed", False), ("suspended", False), ("detached", False), ("attached", False)]
    kept = [("attached", True), ("attaching", False), ("detaching", False)]
    assert all(is_continuity_lost(ChannelStateChange(c, "attached", r)) for c, r in lost)
    assert not any(is_continuity_lost(ChannelStateChange(c, "attached", r)) for c, r in kept)


async def test_approval_published_in_the_gap_is_acted_on() -> None:
    _hub, client, agent = await open_session()
    errors: dict[str, list[Any]] = {"client": [], "agent": []}
    client.on("error", errors["client"].append)
    agent.on("error", errors["agent"].append)
    worker = Worker()
    sent = await client.view.send(user_message("Weather in Paris?"))
    run = await worker.handle(agent, sent.invocation.to_json())
    await wait_status(client.view, run.run_id, "suspended")
    agent.channel.interrupt()  # the agent's transport drops: it misses what follows live
    answer, _ = await approve_call(client.view, run.run_id)
    client.channel.interrupt()
    await client.channel.reattach()
    await agent.channel.reattach()
    await asyncio.gather(client.rebuilt(), agent.rebuilt())
    for side in ("client", "agent"):
        assert [e.code for e in errors[side]] == [104006], side
        assert "continuity lost (attached, resumed: false)" in errors[side][0].message
    # the agent's rebuilt tree holds the approval it never saw live
    resumed = await worker.handle(agent, answer.invocation.to_json())
    assert resumed.run_id == run.run_id and worker.executed and len(worker.executed) == 1
    await wait_status(client.view, run.run_id, "complete")
    assert shapes(client.view.get_messages()) == [
        ("user", ["message"]),
        ("assistant", ["reasoning", "message", "function_call"]),
        ("assistant", ["function_call_output"]),
        ("assistant", ["reasoning", "message"]),
    ]
    assert agent.continuity_losses == client.continuity_losses == 1
    await client.close()
    await agent.end()


async def test_loss_aborts_a_run_in_flight() -> None:
    _hub, client, agent = await open_session()
    sent = await client.view.send(user_message("Weather in Paris?"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    started = asyncio.Event()

    async def slow(items: list[dict[str, Any]]) -> Any:
        async for event in model_stream(items, delay=0.01):
            started.set()
            yield event

    piping = asyncio.ensure_future(run.pipe(slow(run.input_items())))
    await started.wait()
    agent.channel.interrupt()
    await agent.channel.reattach()
    result = await piping
    assert result.reason == "cancelled" and run.abort_signal.is_set()
    await run.end("cancelled")
    await agent.rebuilt()
    await wait_status(client.view, run.run_id, "cancelled")
    assert agent.continuity_losses == 1 and client.continuity_losses == 0
    await client.close()
    await agent.end()


async def test_suspended_then_reattached_reports_each_loss() -> None:
    _hub, client, agent = await open_session()
    seen: list[Any] = []
    client.channel.on_state_change(seen.append)
    errors: list[Any] = []
    client.on("error", errors.append)
    client.channel.interrupt("suspended")
    await client.channel.reattach()
    await eventually(lambda: len(errors) == 2)  # state changes arrive in order with messages
    await client.rebuilt()
    assert [(c.current, c.resumed) for c in seen][-2:] == [("suspended", False), ("attached", False)]
    assert [e.code for e in errors] == [104006, 104006]  # as 0.8.0: one per continuity-breaking change
    assert "(suspended)" in errors[0].message
    sent = await client.view.send(user_message("still here?"))
    assert sent.invocation.input_event_id
    await client.close()
    await agent.end()
