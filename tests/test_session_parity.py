"""Parity features of 0.8.0 on the in-process channel: run read models (``BaseRun``), hooks, options,
view events, extra views. Interop with the JS package: ``test_session_parity_js.py``."""

from __future__ import annotations

from support_parity import texts
from support_sessions import Worker, approve_call, failed_run, open_session, user_message, wait_status


def _shape(messages: list) -> list[tuple[str, list[str]]]:
    return [(m.role, [i.get("type") for i in m.items]) for m in messages]


async def test_base_run_status_error_and_messages_are_this_runs_own_turn() -> None:
    _hub, client, agent = await open_session()
    worker = Worker()
    sent = await client.view.send(user_message("Weather in Paris?"))
    # before the agent's run-start: active, and the turn is the optimistic input
    assert (sent.run_id, sent.status, sent.error) == ("", "active", None)
    assert _shape(sent.messages) == [("user", ["message"])]
    run = await worker.handle(agent, sent.invocation.to_json())
    await wait_status(client.view, run.run_id, "suspended")
    answer, _call = await approve_call(client.view, run.run_id)
    resumed = await worker.handle(agent, answer.invocation.to_json())
    await wait_status(client.view, run.run_id, "complete")
    turn = [
        ("user", ["message"]),
        ("assistant", ["reasoning", "message", "function_call"]),
        ("assistant", ["function_call_output"]),
        ("assistant", ["reasoning", "message"]),
    ]
    # the whole run, across the suspend / resume, on both sides
    assert _shape(sent.messages) == turn and _shape(resumed.messages) == turn and _shape(run.messages) == turn
    assert sent.status == resumed.status == "complete"
    # a second turn: its run's messages hold that turn only; the view holds the conversation
    failed = await failed_run(client, agent, seed=7)
    assert failed.status == "error" and failed.error.code == 50000
    assert texts(client.view.get_messages())[-2] == "Weather in Rome?"
    assert _shape(failed.messages) == [("user", ["message"]), ("assistant", ["message", "function_call"])]
    assert len(failed.branch_messages()) > len(failed.messages)
    await client.close()
    await agent.end()
