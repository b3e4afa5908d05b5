"""Several approvals of one suspended run published in one batch, each call in a message of its own:
the resumed run answers every approval once and terminates under the standard worker loop (which
never calls ``has_input()``), whether the worker saw the run live or folds it from history. An
approval is no steer: taken for one, the message holding its call moved to the tail of ``run.view``
and the loop called the model forever."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support_sessions import Worker, open_session, user_message, wait_status
from test_session_approvals import approvals_of_every_call, two_calls

from ai_transport.responses.local_server import ScriptedFunctionCall, build_response_events
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.tools import gate_calls

pytestmark = pytest.mark.asyncio


async def events_of(events: list[dict[str, Any]]) -> Any:
    for event in events:
        yield event


@pytest.mark.parametrize("fresh", [False, True])
async def test_a_batch_of_approvals_resumes_once_and_the_run_completes(fresh: bool) -> None:
    hub, alice, agent = await open_session()
    worker = Worker(model=two_calls)
    sent = await alice.view.send(user_message("Paris and Rome?"))
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    for seed, city in enumerate(["Paris", "Rome"], 1):  # one message per call
        events = build_response_events([ScriptedFunctionCall("get_weather", {"city": city})], seed=seed)
        await run.pipe(gate_calls(events_of(events), lambda _item: True))
    await run.suspend()
    await wait_status(alice.view, run.run_id, "suspended")
    approvals = approvals_of_every_call(alice.view)
    assert len({a["codecMessageId"] for a in approvals}) == 2
    wake = await alice.view.send(approvals, run_id=run.run_id)
    if fresh:  # another worker takes the wake-up: it folds the run from history
        await agent.close()
        agent = AgentSession(hub.client("agent").channel("chat"))
        await agent.connect()
    resumed = await asyncio.wait_for(worker.handle(agent, wake.invocation.to_json()), 10)
    await wait_status(alice.view, resumed.run_id, "complete")
    assert sorted(worker.executed) == [("get_weather", '{"city":"Paris"}'), ("get_weather", '{"city":"Rome"}')]
    assert len(worker.results) == 1  # one model call answers both outputs
    types = [i.get("type") for i in resumed.input_items()]
    assert types == ["message", "function_call", "function_call", "function_call_output", "function_call_output", "message"]
    await alice.close()
    await agent.end()
