"""Steering (``ClientRun.steer`` / ``AgentRun.has_input`` / ``on_steer``), on the in-process channel.

The wire-level interop with the reference implementation is in ``test_session_parity_js.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support_parity import gated_model, steer_loop, texts, user_text
from support_sessions import approve_call, open_session, user_message, wait_status

from ai_transport.conversation.changes import OutputChanged
from ai_transport.errors import AITransportError
from ai_transport.responses.local_server import ScriptedFunctionCall, ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentSession, function_call_output, gate_calls
from ai_transport.sessions.client import ClientSession
from ai_transport.sessions.steer import defer_unresponded_steers, parse_steer_stamp
from ai_transport.sessions.steer_client import SteerOutcome


@pytest.mark.parametrize("early", [False, True], ids=["mid-stream", "before-output"])
async def test_client_steers_a_running_python_agent_and_it_is_consumed(early: bool) -> None:
    """Mid-stream: the steer lands after the first answer's message. Before output: it lands before
    (lower serial), and ``run.view`` still puts it at the end of the second pass's model input."""
    _hub, client, agent = await open_session()
    stamps: list[Any] = []
    client.subscribe(OutputChanged, lambda e: stamps.append((e.steer_codec_message_ids, e.step_id)))
    steered = asyncio.Event()
    sent = await client.view.send(user_message("Write a poem"))
    run = await agent.create_run(sent.invocation, hooks={"on_steer": steered.set})
    await run.start()
    streaming = asyncio.Event()
    model = gated_model(steered, ["Roses are red", "Short: red."], 0 if early else 5, streaming)
    loop = asyncio.ensure_future(steer_loop(run, model))
    await sent.started
    await streaming.wait()
    result = sent.steer(user_message("make it shorter"))
    serial = await asyncio.wait_for(result.published, 5)
    assert isinstance(serial, str)
    inputs = await asyncio.wait_for(loop, 10)
    # pass 1 answered the prompt; pass 2 answered the steer, which ends the model input
    assert len(inputs) == 2
    assert inputs[1][-1]["content"][0]["text"] == "make it shorter"
    assert [i.get("role") for i in inputs[1]] == ["user", "assistant", "user"]
    await run.end("complete")
    outcome = await asyncio.wait_for(result.outcome, 5)
    assert outcome == SteerOutcome(True, "complete")
    # the steer's id is stamped on the second pass's output only (the tree's output event carries it)
    shown = texts(client.view.get_messages())
    steer_cmid = client.view.get_messages()[shown.index("make it shorter")].codec_message_id
    stamped = {tuple(ids) for ids, step in stamps if ids is not None and step is not None}
    assert stamped == {(steer_cmid,)}
    # the client's view shows the wire (serial) order
    if early:
        assert shown == ["Write a poem", "make it shorter", "assistant", "assistant"]
    else:
        assert shown == ["Write a poem", "assistant", "make it shorter", "assistant"]
    await client.close()
    await agent.end()


async def test_unconsumed_steer_resolves_false_at_run_end_and_steering_a_dead_run_fails() -> None:
    _hub, client, agent = await open_session()
    steered = asyncio.Event()
    sent = await client.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation, hooks={"on_steer": steered.set})
    await run.start()
    await sent.started
    result = sent.steer(user_message("also this"))
    await asyncio.wait_for(steered.wait(), 5)
    # the agent never asks has_input(): the steer was seen but not consumed
    await run.pipe(build_response_events([ScriptedText("hello")], seed=3))
    await run.end("cancelled")
    assert await asyncio.wait_for(result.outcome, 5) == SteerOutcome(False, "cancelled")
    late = sent.steer(user_message("too late"))
    with pytest.raises(AITransportError) as err:
        await asyncio.wait_for(late.outcome, 5)
    assert err.value.code == 40003 and "already ended" in err.value.message
    with pytest.raises(AITransportError):
        await late.published
    with pytest.raises(ValueError, match="input object"):
        sent.steer("text")  # type: ignore[arg-type]
    await client.close()
    await agent.end()


async def test_steer_outcome_pending_over_suspend_fails_on_close() -> None:
    _hub, client, agent = await open_session()
    steered = asyncio.Event()
    sent = await client.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation, hooks={"on_steer": steered.set})
    await run.start()
    await sent.started
    result = sent.steer(user_message("and more"))
    await asyncio.wait_for(steered.wait(), 5)
    await run.suspend()
    await wait_status(client.view, run.run_id, "suspended")
    await asyncio.sleep(0.05)
    assert not result.outcome.done()  # a resume may still answer it
    await client.close()
    with pytest.raises(AITransportError) as err:
        await result.outcome
    assert err.value.code == 104004
    await agent.end()


async def steered_while_suspended(client: ClientSession, agent: AgentSession) -> tuple[Any, dict[str, Any], Any]:
    """Alice asks, the agent's run suspends on a gated ``get_weather`` call, alice steers ("in
    fahrenheit please") and then approves the call; returns (the approval's send, the call, the
    steer's result)."""
    sent = await client.view.send(user_message("Weather in Oslo?"))
    run = await agent.create_run(sent.invocation)
    await run.start()
    events = build_response_events(
        [ScriptedText("Checking."), ScriptedFunctionCall("get_weather", {"city": "Oslo"})], seed=5
    )
    await run.pipe(gate_calls(events, lambda item: True))
    await run.suspend()
    await wait_status(client.view, run.run_id, "suspended")
    result = sent.steer(user_message("in fahrenheit please"))
    await asyncio.wait_for(result.published, 5)
    answer, call = await approve_call(client.view, run.run_id)
    return answer, call, result


async def test_steer_into_a_suspended_run_is_answered_by_the_resuming_worker() -> None:
    """A steer that lands while the run is suspended is seeded by the next worker's ``start()`` (it
    reads it from history) and answered by that worker's first pass; a third worker that re-reads the
    whole history after ``start()`` does not answer it again."""
    hub, client, agent = await open_session()
    answer, _call, result = await steered_while_suspended(client, agent)
    await agent.close()

    fresh = AgentSession(hub.client("agent").channel("chat"))
    await fresh.connect()
    seen: list[int] = []
    resumed = await fresh.create_run(answer.invocation, hooks={"on_steer": lambda: seen.append(1)})
    await resumed.start()
    assert seen == [1]  # seeded from history
    await resumed.view.load_all()
    assert resumed.has_input()  # the first pass answers the approval and the seeded steer
    assert not resumed._steering.tracker.has_pending()
    await resumed.send(function_call_output(_call, "5C"))
    assert not resumed.has_input()  # the steer was drained by the first has_input() and stamped
    await resumed.end("complete")
    assert await asyncio.wait_for(result.outcome, 5) == SteerOutcome(True, "complete")
    await fresh.close()

    third = AgentSession(hub.client("agent").channel("chat"))
    await third.connect()
    replay_seen: list[int] = []
    again = await third.create_run(answer.invocation, hooks={"on_steer": lambda: replay_seen.append(1)})
    again._steering.seed()
    await again.view.load_all()
    assert replay_seen == [] and not again._steering.tracker.has_pending()
    await third.close()
    await client.close()


async def test_a_duplicate_wake_up_never_answers_an_answered_steer_again() -> None:
    """A second worker woken by the same approval, starting after the first one answered the steer
    (its stamp is in history), seeds nothing from ``start()``: it would answer the steer twice."""
    hub, client, agent = await open_session()
    answer, call, result = await steered_while_suspended(client, agent)
    await agent.close()
    first = AgentSession(hub.client("agent").channel("chat"))  # a stateless wake-up
    await first.connect()
    resumed = await first.create_run(answer.invocation)
    await resumed.start()
    await resumed.view.load_all()
    assert resumed.has_input()
    await resumed.send(function_call_output(call, "41F"))  # stamps the steer: answered

    duplicate = AgentSession(hub.client("agent").channel("chat"))
    await duplicate.connect()
    seen: list[int] = []
    again = await duplicate.create_run(answer.invocation, hooks={"on_steer": lambda: seen.append(1)})
    await again.start()  # folds history (the steer and its stamp) before seeding
    assert seen == [] and not again._steering.tracker.has_pending()
    await again.view.load_all()
    assert again.has_input()  # only the first pass's own input: then nothing more to answer
    await again.send(function_call_output(call, "41F"))
    assert not again.has_input()
    await duplicate.close()
    await resumed.end("complete")
    assert await asyncio.wait_for(result.outcome, 5) == SteerOutcome(True, "complete")
    await client.close()
    await first.end()


async def test_on_steer_that_raises_is_reported_not_fatal() -> None:
    _hub, client, agent = await open_session()
    errors: list[AITransportError] = []

    def boom() -> None:
        raise RuntimeError("bad hook")

    sent = await client.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation, hooks={"on_steer": boom, "on_error": errors.append})
    await run.start()
    await sent.started
    result = sent.steer(user_message("x"))
    await asyncio.wait_for(result.published, 5)
    await asyncio.sleep(0.05)
    assert [e.code for e in errors] == [104002] and "on_steer" in errors[0].message
    assert run.has_input()  # the loop keeps working
    await client.close()
    await agent.end()


async def test_cancelled_run_has_no_input() -> None:
    _hub, client, agent = await open_session()
    sent = await client.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation)
    await run.start()
    assert run.has_input()  # the triggering input, until output is produced
    run.abort_signal.set()
    assert not run.has_input()
    await client.close()
    await agent.end()


# -- pure helpers --------------------------------------------------------------------------------


class _M:
    def __init__(self, cmid: str) -> None:
        self.codec_message_id = cmid


@given(st.lists(st.tuples(st.text(min_size=1, max_size=4), st.booleans()), max_size=12, unique_by=lambda t: t[0]))
def test_defer_unresponded_steers_keeps_order_and_moves_only_unanswered(items: list[tuple[str, bool]]) -> None:
    messages = [_M(c) for c, _ in items]
    unanswered = {c for c, u in items if u}
    out = defer_unresponded_steers(messages, lambda c: c in unanswered)
    ids = [m.codec_message_id for m in out]
    assert sorted(ids) == sorted(c for c, _ in items)
    assert ids == [c for c, u in items if not u] + [c for c, u in items if u]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, None), ('["a","b"]', ["a", "b"]), ('["a",1]', ["a"]), ("[]", None), ("{", None), ('"a"', None)],
)
def test_parse_steer_stamp(raw: Any, expected: Any) -> None:
    assert parse_steer_stamp(raw) == expected


async def test_a_loss_of_continuity_fails_pending_steer_outcomes_with_104006() -> None:
    _hub, client, agent = await open_session()
    steered = asyncio.Event()
    sent = await client.view.send(user_message("hi"))
    run = await agent.create_run(sent.invocation, hooks={"on_steer": steered.set})
    await run.start()
    await sent.started
    result = sent.steer(user_message("and this"))
    await asyncio.wait_for(steered.wait(), 5)
    client.channel.interrupt()
    await client.channel.reattach()
    await client.rebuilt()
    with pytest.raises(AITransportError) as err:
        await asyncio.wait_for(result.outcome, 5)
    assert err.value.code == 104006
    await client.close()
    await agent.end()


@settings(max_examples=15, deadline=None)
@given(count=st.integers(1, 4), at=st.integers(0, 8))
def test_every_steer_folded_during_a_pass_is_answered_by_the_next(count: int, at: int) -> None:
    """However many steers land during the first pass (at any point of its stream), the second pass
    answers all of them: its model input ends with them in order, each id is stamped on exactly one
    pass, and every outcome resolves consumed."""

    async def scenario() -> None:
        _hub, client, agent = await open_session()
        folded: list[int] = []
        all_in = asyncio.Event()

        def on_steer() -> None:
            folded.append(1)
            if len(folded) == count:
                all_in.set()

        stamps: list[tuple[str, ...]] = []
        client.subscribe(
            OutputChanged,
            lambda e: e.steer_codec_message_ids and stamps.append(tuple(e.steer_codec_message_ids)),
        )
        sent = await client.view.send(user_message("Write a poem"))
        run = await agent.create_run(sent.invocation, hooks={"on_steer": on_steer})
        await run.start()
        streaming = asyncio.Event()
        model = gated_model(all_in, ["Roses are red", "Short."], at, streaming)
        loop = asyncio.ensure_future(steer_loop(run, model))
        await asyncio.wait_for(asyncio.shield(sent.started), 5)
        await asyncio.wait_for(streaming.wait(), 5)
        results = [sent.steer(user_message(f"steer {i}")) for i in range(count)]
        for r in results:
            await asyncio.wait_for(r.published, 5)
        inputs = await asyncio.wait_for(loop, 10)
        await run.end("complete")
        outcomes = [await asyncio.wait_for(r.outcome, 5) for r in results]
        assert outcomes == [SteerOutcome(True, "complete")] * count
        assert len(inputs) == 2
        assert [i["content"][0]["text"] for i in inputs[1][-count:]] == [f"steer {i}" for i in range(count)]
        steered = [m.codec_message_id for m in client.view.get_messages() if user_text(m.message).startswith("steer")]
        assert set(stamps) == {tuple(steered)}  # every output of pass 2 carries them all, in fold order
        await client.close()
        await agent.end()

    asyncio.run(scenario())


async def test_a_steer_before_create_run_in_a_live_session_is_seeded_and_answered() -> None:
    """The steer lands while the run is suspended and the agent session stays alive (it folds the
    steer live, before the resuming ``create_run``): the resumed run seeds it and its first pass
    answers it; a later run of the same session does not answer it again."""
    _hub, client, agent = await open_session()
    answer, call, result = await steered_while_suspended(client, agent)
    seen: list[int] = []
    resumed = await agent.create_run(answer.invocation, hooks={"on_steer": lambda: seen.append(1)})
    await resumed.start()
    assert seen == [1]
    assert resumed.has_input() and not resumed._steering.tracker.has_pending()
    await resumed.send(function_call_output(call, "41F"))
    assert not resumed.has_input()
    await resumed.end("complete")
    assert await asyncio.wait_for(result.outcome, 5) == SteerOutcome(True, "complete")
    again = await agent.create_run(answer.invocation)
    again._steering.seed()
    assert not again._steering.tracker.has_pending()
    await client.close()
    await agent.end()
