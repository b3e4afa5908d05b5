"""Exactly-once tool execution (claims) on the in-process channel: several workers woken for the same
approval run the tool once; a claimer that dies blocks the call for ``claim_ttl`` only."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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


async def test_a_dead_claimer_is_taken_over_after_claim_ttl() -> None:
    hub, client, sessions, answer, call, _, run = await suspended_run(workers=2, claim_ttl=0.5)
    # a worker claimed the call and died before executing it
    dead = hub.client("agent").channel("chat")
    body = {"runId": run.run_id, "callIds": [call["call_id"]], "claimant": "dead", "invocationId": "x"}
    await dead.publish({"name": CLAIM_NAME, "data": json.dumps(body)})
    early = Worker()
    first = await early.handle(sessions[0], answer.invocation.to_json())
    assert early.executed == [] and first.yielded  # within claim_ttl: the dead claim still holds
    await asyncio.sleep(0.6)
    late = Worker()
    second = await late.handle(sessions[1], answer.invocation.to_json())
    assert len(late.executed) == 1 and not second.yielded
    await wait_status(client.view, run.run_id, "complete")
    for s in sessions:
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
    assert ledger.holder("1", "c", "9", 1.0) is None
    with pytest.raises(AITransportError) as err:
        AgentSession(hub.client("agent").channel("chat"), claim_ttl=0)
    assert err.value.code == 40003 and "claim_ttl" in err.value.message
    await sessions[0].end()
    await client.close()


@settings(max_examples=200, deadline=None)
@given(
    claims=st.lists(
        st.tuples(st.integers(0, 3000), st.sets(st.sampled_from(["a", "b", "c"]), min_size=1)), max_size=12
    ),
    ttl=st.sampled_from([0.5, 1.0, 2.0]),
    data=st.data(),
)
def test_every_reader_agrees_on_the_holders_and_takeovers_wait_claim_ttl(
    claims: list[tuple[int, set[str]]], ttl: float, data: Any
) -> None:
    timestamps = sorted(t for t, _ in claims)  # the channel stamps claims in serial order
    messages = [
        {
            "name": CLAIM_NAME,
            "clientId": "agent",
            "serial": f"{i:08d}",
            "timestamp": timestamps[i],
            "data": json.dumps({"runId": "r", "callIds": sorted(keys), "claimant": f"w{i}", "invocationId": "x"}),
        }
        for i, (_, keys) in enumerate(claims)
    ]
    ledgers = []
    for order in (messages, data.draw(st.permutations(messages))):
        ledger = ClaimLedger()
        for m in order:
            ledger.note(m, {"agent"})
        ledgers.append(ledger)
    for key in ("a", "b", "c"):
        naming = [m for m in messages if key in json.loads(m["data"])["callIds"]]
        winners = []
        for m in naming:
            holders = [lg.holder("r", key, m["serial"], ttl) for lg in ledgers]
            assert holders[0] == holders[1]  # fold order does not matter
            if holders[0] is not None and holders[0].serial == m["serial"]:
                winners.append(m)
        if naming:
            assert winners[0] is naming[0]  # the earliest claim holds first
        for prev, nxt in itertools.pairwise(winners):
            assert nxt["timestamp"] - prev["timestamp"] >= ttl * 1000  # a takeover waits claim_ttl
