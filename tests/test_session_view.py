"""Views: optimistic sends, history paging, run status, the agent's view of a conversation with failed
runs, regenerate and edit branches. Real codec and in-process channel throughout."""

from __future__ import annotations

import asyncio
import json

import pytest
from support_sessions import C, failed_run, open_session, user_message, wait_status

from ai_transport.errors import AITransportError
from ai_transport.readers.calls import unanswered_calls
from ai_transport.responses.local_server import ScriptedText, build_response_events
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession

pytestmark = pytest.mark.asyncio


async def answer(agent: AgentSession, sent, text: str, *, end: str = "complete"):
    """One agent invocation that streams ``text`` and ends the run."""
    run = await agent.create_run(sent.invocation.to_json())
    await run.start()
    await run.view.load_all()
    inputs = run.input_items()
    result = await run.pipe(build_response_events([ScriptedText(text)], seed=1))
    assert result.reason == "complete"
    await run.end(end)
    return run, inputs


def texts(messages) -> list[str]:
    out = []
    for m in messages:
        for item in m.message.items:
            if item.get("type") == "message":
                out.append("".join(p.get("text", "") for p in item.get("content", [])))
    return out


async def test_user_message_folds_optimistically_and_send_rules() -> None:
    _hub, client, agent = await open_session()
    updates = []
    client.view.on("update", lambda: updates.append(1))
    msg = user_message("hello")
    sent = await client.view.send(msg)
    # folded before any echo could be delivered... and refolded, unchanged, from the echo
    assert texts(client.view.get_messages()) == ["hello"]
    assert client.view.get_messages()[0].codec_message_id == sent.input_codec_message_id
    await asyncio.sleep(0.01)
    assert len(client.view.get_messages()) == 1 and updates
    assert client.view.run_of(sent.input_codec_message_id) is None  # no run yet
    assert sent.invocation.to_json() == {"inputEventId": sent.input_event_id, "sessionName": "chat"}

    with pytest.raises(AITransportError) as err:
        await client.view.send([user_message("a"), user_message("b")])
    assert err.value.code == 40003 and "at most one new message" in err.value.message
    with pytest.raises(AITransportError) as err:
        await client.view.send([])
    assert err.value.code == 40003
    # tool answers are wire-only: never folded locally, only from the echo (so with a serial)
    await client.view.send(C.create_tool_result("nope", {"call_id": "c1", "output": "x"}))
    await client.view.wait_for(lambda: client.tree.get_node("nope") is not None)
    assert client.tree.get_node("nope").serial is not None
    assert client.tree.get_node(sent.input_codec_message_id).serial is not None  # refolded from its echo
    await client.close()
    await agent.end()


async def test_load_older_reveals_exactly_limit_oldest_first() -> None:
    hub, client, agent = await open_session()
    for i in range(3):
        sent = await client.view.send(user_message(f"q{i}"))
        await answer(agent, sent, f"a{i}")
    await wait_status(client.view, client.view.runs()[-1].run_id, "complete")
    late = ClientSession(hub.client("bob").channel("chat"), history_page_size=2)
    await late.connect()
    assert late.view.has_older() and late.view.get_messages() == []
    got = await late.view.load_older(3)
    assert texts(got) == ["a1", "q2", "a2"]
    assert texts(late.view.get_messages()) == ["a1", "q2", "a2"]
    got = await late.view.load_older(1)
    assert texts(got) == ["q1"]
    got = await late.view.load_older(10)
    assert texts(got) == ["q0", "a0"]
    assert not late.view.has_older()
    assert await late.view.load_older(5) == []
    for bad in (0, -1, 1.5, True):
        with pytest.raises(AITransportError) as err:
            await late.view.load_older(bad)  # type: ignore[arg-type]
        assert err.value.code == 40003
    assert [r.status for r in late.view.runs()] == ["complete"] * 3
    assert late.view.run_of(got[0].codec_message_id).run_id == late.view.runs()[0].run_id
    await late.close()
    await client.close()
    await agent.end()


async def test_agent_view_leaves_out_failed_runs_and_the_input_they_answered() -> None:
    _hub, client, agent = await open_session()
    run1 = await failed_run(client, agent, seed=2)
    assert client.view.run(run1.run_id).error.code == 50000
    assert client.view.run(run1.run_id).error.message == "model crashed"

    second = await client.view.send(user_message("Never mind, tell me a joke"))
    run2, inputs = await answer(agent, second, "A joke.")
    # the model never sees the failed run's dangling call, nor the question it was answering
    assert inputs == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Never mind, tell me a joke"}],
        }
    ]
    assert unanswered_calls(run2.branch_messages()) == []
    await wait_status(client.view, run2.run_id, "complete")
    # the client still renders everything that happened
    assert texts(client.view.get_messages()) == [
        "Weather in Rome?",
        "Checking.",
        "Never mind, tell me a joke",
        "A joke.",
    ]
    assert [r.status for r in client.view.runs()] == ["error", "complete"]
    await client.close()
    await agent.end()


async def test_regenerate_makes_a_sibling_run_and_the_view_follows_it() -> None:
    hub, client, agent = await open_session()
    sent = await client.view.send(user_message("Name a colour"))
    run1, _ = await answer(agent, sent, "Blue.")
    await wait_status(client.view, run1.run_id, "complete")
    target = client.view.get_messages()[1].codec_message_id
    regen = await client.view.regenerate(target)
    run2, inputs = await answer(agent, regen, "Green.")
    assert inputs == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Name a colour"}]}
    ]
    await wait_status(client.view, run2.run_id, "complete")
    assert texts(client.view.get_messages()) == ["Name a colour", "Green."]
    assert [r.run_id for r in client.view.runs()] == [run2.run_id]
    node = client.tree.get_run_node(run2.run_id)
    assert node.regenerates == target and node.parent == sent.input_codec_message_id
    assert [n.key for n in client.tree.sibling_group(run1.run_id)] == [run1.run_id, run2.run_id]
    client.view.select(run1.run_id)
    assert texts(client.view.get_messages()) == ["Name a colour", "Blue."]
    # a fresh reader sees the same tree: the latest sibling by default
    late = ClientSession(hub.client("bob").channel("chat"))
    await late.connect()
    await late.view.load_all()
    assert texts(late.view.get_messages()) == ["Name a colour", "Green."]
    await late.close()
    await client.close()
    await agent.end()


async def test_edit_forks_the_prompt() -> None:
    _hub, client, agent = await open_session()
    sent = await client.view.send(user_message("Capital of Frnace?"))
    run1, _ = await answer(agent, sent, "Did you mean France?")
    await wait_status(client.view, run1.run_id, "complete")
    edited = await client.view.edit(sent.input_codec_message_id, user_message("Capital of France?"))
    assert texts(client.view.get_messages()) == ["Capital of France?"]  # optimistic, on the new branch
    run2, inputs = await answer(agent, edited, "Paris.")
    assert json.dumps(inputs).count("Capital of") == 1 and "France?" in json.dumps(inputs)
    await wait_status(client.view, run2.run_id, "complete")
    assert texts(client.view.get_messages()) == ["Capital of France?", "Paris."]
    client.view.select(sent.input_codec_message_id)
    assert texts(client.view.get_messages()) == ["Capital of Frnace?", "Did you mean France?"]
    await client.close()
    await agent.end()


async def test_view_events_and_run_lookup() -> None:
    _hub, client, agent = await open_session()
    seen_runs = []
    client.view.on("run", lambda event: seen_runs.append((event.type, event.run_id)))
    sent = await client.view.send(user_message("hi"))
    run, _ = await answer(agent, sent, "hello")
    await wait_status(client.view, run.run_id, "complete")
    assert seen_runs == [("start", run.run_id), ("end", run.run_id)]
    assert client.view.run_of(sent.input_codec_message_id).run_id == run.run_id
    assert client.view.run_of(client.view.get_messages()[1].codec_message_id).run_id == run.run_id
    assert client.view.run("missing") is None and client.view.run_of("missing") is None
    info = client.view.run(run.run_id)
    assert info.invocation_id == run.invocation_id and info.client_id == "alice"
    assert await sent.started == run.run_id and sent.run_id == run.run_id and sent.status == "complete"
    await client.close()
    await agent.end()


class FlakyHistory:
    """A real in-process channel whose first ``failures`` history reads fail (a network fault)."""

    def __init__(self, channel, failures: int) -> None:
        self._channel = channel
        self.failures = failures
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self._channel, name)

    async def history(self, **kwargs):
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("history endpoint unreachable")
        return await self._channel.history(**kwargs)


async def test_history_reads_are_retried_then_fail_with_104011() -> None:
    hub, client, agent = await open_session()
    sent = await client.view.send(user_message("hi"))
    await answer(agent, sent, "hello")
    flaky = FlakyHistory(hub.client("bob").channel("chat"), failures=2)
    late = ClientSession(flaky, history_backoff=0.001)
    await late.connect()
    await late.view.load_all()
    assert texts(late.view.get_messages()) == ["hi", "hello"] and flaky.calls == 3
    broken = FlakyHistory(hub.client("carol").channel("chat"), failures=10)
    dead = ClientSession(broken, history_backoff=0.001)
    await dead.connect()
    with pytest.raises(AITransportError) as err:
        await dead.view.load_older(5)
    assert err.value.code == 104011 and "history endpoint unreachable" in err.value.message
    assert broken.calls == 4  # one try + 3 retries
    for s in (late, dead, client):
        await s.close()
    await agent.end()
