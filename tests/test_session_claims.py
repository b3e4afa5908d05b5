"""Exactly-once tool execution (leased claims) on the in-process channel: several workers woken for
the same approval run the tool once; a claimer that dies is taken over by the next wake-up after one
lease; a long tool is renewed through duplicate wake-ups; a paused holder is fenced; a rewritten
claim does not make the call run twice. The holder rule itself: ``tests/test_lease_core.py``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from support_sessions import Worker, approve_call, open_session, user_message, wait_status

from ai_transport.errors import AITransportError
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.claims import CLAIM_NAME, ClaimLedger


async def suspended_run(workers: int = 3, claim_ttl: float = 60.0) -> tuple[Any, ...]:
    hub, client, first = await open_session(claim_ttl=claim_ttl)
    sessions = [first]
    for _ in range(workers - 1):
        s = AgentSession(hub.client("agent").channel("chat"), claim_ttl=claim_ttl)
        await s.connect()
        sessions.append(s)
    executed: list[str] = []
    sent = await client.view.send(user_message("Weather in Paris?"))
    run = await Worker().handle(first, sent.invocation.to_json())
    await wait_status(client.view, run.run_id, "suspended")
    answer, call = await approve_call(client.view, run.run_id)
    return hub, client, sessions, answer, call, executed, run


class SlowWorker(Worker):
    """A worker whose tool takes ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    async def execute(self, call: Any) -> str:  # type: ignore[override]
        await asyncio.sleep(self.seconds)
        return super().execute(call)


@pytest.mark.parametrize("tool_seconds", [0.0, 0.05])
async def test_workers_woken_together_run_the_tool_once(tool_seconds: float) -> None:
    for _ in range(5):
        _hub, client, sessions, answer, _call, _, run = await suspended_run()
        workers = [SlowWorker(tool_seconds) for _ in sessions]
        runs = await asyncio.gather(*(w.handle(s, answer.invocation.to_json()) for w, s in zip(workers, sessions)))
        assert sum(len(w.executed) for w in workers) == 1
        assert sorted(r.yielded for r in runs) == [False, True, True]
        await wait_status(client.view, run.run_id, "complete")
        outputs = [
            i for m in client.view.get_messages() for i in m.message.items if i["type"] == "function_call_output"
        ]
        assert len(outputs) == 1
        assert sum(1 for m in client.view.get_messages() if m.message.role == "assistant") == 3
        for s in sessions:
            await s.end()
        await client.close()


async def test_a_dead_claimer_is_taken_over_by_the_next_wake_up_within_its_lease() -> None:
    """A claimer that dies before executing: the very next wake-up watches its lease, sees no
    renewal, takes the call over once it lapsed and runs it (no second wake-up needed)."""
    hub, client, sessions, answer, call, _, run = await suspended_run(workers=2, claim_ttl=1.0)
    dead = hub.client("agent").channel("chat")
    body = {"runId": run.run_id, "callIds": [call["call_id"]], "claimant": "dead", "invocationId": "x"}
    await dead.publish({"name": CLAIM_NAME, "data": json.dumps(body)})
    loop = asyncio.get_running_loop()
    started = loop.time()
    early = Worker()
    first = await early.handle(sessions[0], answer.invocation.to_json())
    assert len(early.executed) == 1 and not first.yielded
    # the lease, plus the wake-up's own work (a loaded machine's share of it): under two leases, so a
    # takeover that waits a second lease (or a fixed timeout) fails
    assert loop.time() - started < 1.0 + 0.9
    await wait_status(client.view, run.run_id, "complete")
    late = Worker()
    again = await late.handle(sessions[1], answer.invocation.to_json())
    assert late.executed == [] and again.yielded  # released with the run's end: never taken again
    for s in sessions:
        await s.end()
    await client.close()


async def test_a_tool_running_three_leases_runs_once_through_several_wake_ups() -> None:
    """The holder renews while its tool runs 3x the lease; each duplicate wake-up during it sees a
    renewal and yields (quickly: within one renewal interval plus a round-trip)."""
    hub, client, sessions, answer, _call, _, run = await suspended_run(workers=3, claim_ttl=0.3)
    holder = SlowWorker(0.9)
    holding = asyncio.ensure_future(holder.handle(sessions[0], answer.invocation.to_json()))
    await asyncio.sleep(0.05)
    loop = asyncio.get_running_loop()
    for i in range(4):
        duplicate = SlowWorker(0.0)
        started = loop.time()
        dup_run = await duplicate.handle(sessions[1 + i % 2], answer.invocation.to_json())
        assert duplicate.executed == [] and dup_run.yielded
        assert loop.time() - started < 0.3
        await asyncio.sleep(0.1)
    held = await holding
    assert len(holder.executed) == 1 and not held.yielded
    await wait_status(client.view, run.run_id, "complete")
    outputs = [i for m in client.view.get_messages() for i in m.message.items if i["type"] == "function_call_output"]
    assert len(outputs) == 1
    renewals = [
        m for m in (await hub.client("x").channel("chat").history(limit=1000)).items
        if m.get("name") == CLAIM_NAME and json.loads(m["data"]).get("claimant") == held.claimant
    ]
    assert len(renewals) >= 3  # claim + renewals every ~0.1 s over a 0.9 s tool + release
    for s in sessions:
        await s.end()
    await client.close()


async def test_a_worker_paused_past_its_lease_is_fenced_and_publishes_nothing() -> None:
    """Worker A holds the call and its tool hangs while A's renewals stop (a pause); B's wake-up takes
    the call over and answers; when A's tool returns, its fence renews, sees the takeover and A
    publishes nothing (no second output, no lifecycle message)."""
    hub, client, sessions, answer, _call, _, run = await suspended_run(workers=2, claim_ttl=0.4)
    release = asyncio.Event()
    claimed = asyncio.Event()

    class Paused(Worker):
        async def execute(self, call: Any) -> str:  # type: ignore[override]
            claimed.set()
            await release.wait()
            return super().execute(call)

    paused = Paused()
    a_task = asyncio.ensure_future(paused.handle(sessions[0], answer.invocation.to_json()))
    await claimed.wait()
    a_run = next(iter(sessions[0]._runs.values()))
    a_run.lease.cancel()  # A stops renewing (SIGSTOP); its keys stay "held" in its own eyes
    for keeper in a_run.lease.keepers:
        keeper.released = False
    taker = Worker()
    b_run = await taker.handle(sessions[1], answer.invocation.to_json())
    assert len(taker.executed) == 1 and not b_run.yielded
    await wait_status(client.view, run.run_id, "complete")
    channel = hub.client("x").channel("chat")
    before = len((await channel.history(limit=1000)).items)
    release.set()
    a_done = await a_task
    assert len(paused.executed) == 1 and a_done.yielded and a_done.lease.lost
    after = (await channel.history(limit=1000)).items
    assert [m for m in after[: len(after) - before] if m.get("name") != CLAIM_NAME] == []  # only its renewal
    outputs = [i for m in client.view.get_messages() for i in m.message.items if i["type"] == "function_call_output"]
    assert len(outputs) == 1
    for s in sessions:
        await s.end()
    await client.close()


async def test_a_claim_rewritten_by_a_client_does_not_run_the_call_twice() -> None:
    """Break #3 of issue 21: while the holder's tool runs, alice (who may update any message)
    rewrites the agent's claim to name no call; a fresh worker woken then, folding history, sees the
    rewrite as an unknown claim and does not execute; the mutation is counted."""
    hub, client, sessions, answer, _call, _, run = await suspended_run(workers=1, claim_ttl=0.6)
    holder = SlowWorker(0.3)
    holding = asyncio.ensure_future(holder.handle(sessions[0], answer.invocation.to_json()))
    await asyncio.sleep(0.08)
    alice = hub.client("alice").channel("chat")
    claims = [m for m in (await alice.history(limit=1000)).items if m.get("name") == CLAIM_NAME]
    target = claims[0]  # the newest claim: the holder's
    empty = {"runId": run.run_id, "callIds": [], "claimant": "mallory", "invocationId": "x"}
    await alice.update_message({"serial": target["serial"], "data": json.dumps(empty)})
    fresh = AgentSession(hub.client("agent").channel("chat"), claim_ttl=0.6)
    await fresh.connect()
    duplicate = Worker()
    dup_run = await duplicate.handle(fresh, answer.invocation.to_json())
    assert duplicate.executed == [] and dup_run.yielded
    assert any("rewritten" in why or "mutation" in why for why in fresh.claims.refused)
    assert any("mutation" in why for why in sessions[0].claims.refused)  # live: the first version stands
    held = await holding
    assert len(holder.executed) == 1 and not held.yielded
    await wait_status(client.view, run.run_id, "complete")
    for s in [*sessions, fresh]:
        await s.end()
    await client.close()


async def test_claims_from_untrusted_clients_are_ignored() -> None:
    hub, client, sessions, answer, call, _, run = await suspended_run(workers=1)
    body = {"runId": run.run_id, "callIds": [call["call_id"]], "claimant": "mallory", "invocationId": "x"}
    await hub.client("alice").channel("chat").publish({"name": CLAIM_NAME, "data": json.dumps(body)})
    await hub.client("agent").channel("chat").publish({"name": CLAIM_NAME, "data": "{not json"})
    worker = Worker()
    resumed = await worker.handle(sessions[0], answer.invocation.to_json())
    assert len(worker.executed) == 1 and not resumed.yielded
    ledger = ClaimLedger()
    ledger.note({"clientId": "agent", "serial": "1", "timestamp": 1, "data": {"runId": 1}}, {"agent"})
    assert ledger.holder("1", "c", 1000.0) is None
    assert sessions[0].claims.refused  # counted
    with pytest.raises(AITransportError) as err:
        AgentSession(hub.client("agent").channel("chat"), claim_ttl=0)
    assert err.value.code == 40003 and "claim_ttl" in err.value.message
    await sessions[0].end()
    await client.close()
