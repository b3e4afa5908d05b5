"""Branch selection (``ClientView.branch_selection`` / ``BranchHandle``), regenerate / edit options and
auto-selection as 0.8.0, on the in-process channel. Interop: ``test_session_parity_js.py``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support_parity import text_turn, texts
from support_sessions import Worker, approve_call, open_session, user_message, wait_status

from ai_transport.errors import AITransportError
from ai_transport.sessions.agent import AgentSession
from ai_transport.sessions.client import ClientSession


async def answer(agent: AgentSession, client: ClientSession, sent: Any, text: str, seed: int) -> str:
    """The agent answers ``sent`` with ``text``; returns the run id once the client saw it complete."""
    run = await agent.create_run(sent.invocation)
    await run.start()
    await run.pipe(text_turn(text, seed))
    await run.end("complete")
    await wait_status(client.view, run.run_id, "complete")
    return run.run_id


def handle_texts(handle: Any) -> list[str]:
    return [
        "".join(p.get("text", "") for it in m.items if it.get("type") == "message" for p in it.get("content", []))
        for m in handle.siblings
    ]


async def test_regenerate_siblings_are_messages_and_select_clamps() -> None:
    _hub, client, agent = await open_session()
    view = client.view
    sent = await view.send(user_message("Name a colour"))
    await answer(agent, client, sent, "Red", 1)
    first = view.get_messages()[1].codec_message_id
    prompt = view.get_messages()[0].codec_message_id
    plain = view.branch_selection(prompt)
    assert (plain.has_siblings, plain.index, handle_texts(plain)) == (False, 0, ["Name a colour"])
    unknown = view.branch_selection("no-such-id")
    assert (unknown.has_siblings, unknown.siblings, unknown.index, unknown.selected) == (False, [], 0, None)
    unknown.select(3)  # a no-op

    regen = await view.regenerate(first)
    await answer(agent, client, regen, "Blue", 2)
    assert texts(view.get_messages()) == ["Name a colour", "assistant"]
    handle = view.branch_selection(first)
    assert handle.has_siblings and handle_texts(handle) == ["Red", "Blue"]
    assert handle.index == 1 and handle.selected is handle.siblings[1]
    updates: list[int] = []
    view.on("update", lambda: updates.append(1))
    handle.select(-5)  # clamped to 0
    assert updates == [1]
    assert view.branch_selection(first).index == 0
    assert handle_texts(view.branch_selection(view.get_messages()[1].codec_message_id)) == ["Red", "Blue"]
    view.branch_selection(first).select(99)  # clamped to the last
    assert view.branch_selection(first).index == 1

    # an explicit selection, then our own regenerate: it overrides the selection (as 0.8.0, at once
    # the latest sibling so far), and the new reply is shown once it arrives
    view.branch_selection(first).select(0)
    again = await view.regenerate(view.get_messages()[1].codec_message_id)
    assert view.branch_selection(first).index == 1
    await answer(agent, client, again, "Green", 3)
    handle = view.branch_selection(first)
    assert handle_texts(handle) == ["Red", "Blue", "Green"] and handle.index == 2
    await client.close()
    await agent.end()


async def test_edit_switches_to_the_new_prompt_and_others_edits_stay_pinned() -> None:
    hub, client, agent = await open_session()
    other = ClientSession(hub.client("bob").channel("chat"))
    await other.connect()
    sent = await client.view.send(user_message("Weather in Paris?"))
    await answer(agent, client, sent, "Sunny.", 1)
    prompt = client.view.get_messages()[0].codec_message_id
    await other.view.load_all()
    await wait_status(other.view, sent.run_id, "complete")

    edited = await client.view.edit(prompt, user_message("Weather in Rome?"))
    # our own edit shows at once (optimistic), before any answer
    assert texts(client.view.get_messages()) == ["Weather in Rome?"]
    handle = client.view.branch_selection(prompt)
    assert handle_texts(handle) == ["Weather in Paris?", "Weather in Rome?"] and handle.index == 1
    await answer(agent, client, edited, "Rainy.", 2)
    assert texts(client.view.get_messages()) == ["Weather in Rome?", "assistant"]
    # bob's view showed Paris when alice's edit arrived: it stays there (pinned) ...
    assert texts(other.view.get_messages()) == ["Weather in Paris?", "assistant"]
    bob_handle = other.view.branch_selection(prompt)
    assert bob_handle.index == 0 and bob_handle.has_siblings
    # ... until bob selects the edit
    bob_handle.select(1)
    assert texts(other.view.get_messages()) == ["Weather in Rome?", "assistant"]
    # a view that never showed the fork follows the latest
    fresh = other.create_view()
    assert texts(fresh.get_messages()) == ["Weather in Rome?", "assistant"]
    await other.close()
    await client.close()
    await agent.end()


async def test_non_head_regenerate_replaces_the_message_and_the_rest_of_its_run() -> None:
    """Regenerating the answer after a tool call (not the first message of its run): the new run
    replaces that message; the branch point is that message, with the original as sibling 0."""
    _hub, client, agent = await open_session()
    worker = Worker()
    view = client.view
    sent = await view.send(user_message("Weather in Paris?"))
    run = await worker.handle(agent, sent.invocation.to_json())
    await wait_status(view, run.run_id, "suspended")
    approved, _call = await approve_call(view, run.run_id)
    await worker.handle(agent, approved.invocation.to_json())
    await wait_status(view, run.run_id, "complete")
    before = view.get_messages()
    assert len(before) == 4
    final = before[3].codec_message_id

    regen = await view.regenerate(final)
    again = await worker.handle(agent, regen.invocation.to_json())
    await wait_status(view, again.run_id, "complete")
    after = view.get_messages()
    assert [m.codec_message_id for m in after[:3]] == [m.codec_message_id for m in before[:3]]
    assert len(after) == 4 and after[3].codec_message_id != final
    handle = view.branch_selection(final)
    assert handle.has_siblings and len(handle.siblings) == 2 and handle.index == 1
    assert view.branch_selection(after[3].codec_message_id).index == 1  # same point from the new head
    handle.select(0)
    assert [m.codec_message_id for m in view.get_messages()] == [m.codec_message_id for m in before]
    await client.close()
    await agent.end()


async def test_views_are_tracked_and_closed_with_the_session() -> None:
    _hub, client, agent = await open_session()
    extra = client.create_view()
    closed_early = client.create_view()
    closed_early.close()
    assert client._views == {client.view, extra}
    await client.close()
    for view in (client.view, extra):
        with pytest.raises(AITransportError) as err:
            await view.send(user_message("hi"))
        assert err.value.code == 104004 and "view is closed" in err.value.message
    with pytest.raises(AITransportError) as err:
        client.create_view()
    assert err.value.code == 104004
    await agent.end()


@settings(max_examples=20, deadline=None)
@given(picks=st.lists(st.integers(-3, 6), min_size=1, max_size=6), replies=st.integers(1, 3))
def test_any_selection_sequence_shows_the_clamped_sibling(picks: list[int], replies: int) -> None:
    """Whatever indexes are selected, in any order: the handle's index is the last one clamped to
    the siblings, the view shows exactly that sibling, and the conversation keeps its length."""

    async def scenario() -> None:
        _hub, client, agent = await open_session()
        view = client.view
        sent = await view.send(user_message("Name a colour"))
        await answer(agent, client, sent, "Colour 0", 1)
        first = view.get_messages()[1].codec_message_id
        for n in range(1, replies + 1):
            regen = await view.regenerate(view.get_messages()[1].codec_message_id)
            await answer(agent, client, regen, f"Colour {n}", n + 1)
        for pick in picks:
            view.branch_selection(first).select(pick)
            handle = view.branch_selection(first)
            expected = max(0, min(pick, replies))
            assert handle.index == expected and handle_texts(handle)[expected] == f"Colour {expected}"
            assert len(view.get_messages()) == 2
            shown = view.get_messages()[1].message.items[-1]["content"][0]["text"]
            assert shown == f"Colour {expected}"
        await client.close()
        await agent.end()

    asyncio.run(scenario())


@pytest.mark.parametrize("load", ["load_all", "load_older"])
async def test_a_prompt_shown_after_loading_history_stays_pinned_when_an_edit_arrives(load: str) -> None:
    """A view that showed a prompt read from history (``load_all`` as ``load_older``) keeps showing
    it when another member's edit of it arrives live: the load refreshes what the view shows."""
    hub, client, agent = await open_session()
    sent = await client.view.send(user_message("Weather in Paris?"))
    await answer(agent, client, sent, "Sunny.", 1)
    prompt = client.view.get_messages()[0].codec_message_id
    late = ClientSession(hub.client("bob").channel("chat"))
    await late.connect()
    if load == "load_all":
        await late.view.load_all()
    else:
        await late.view.load_older(100)
    assert texts(late.view.get_messages()) == ["Weather in Paris?", "assistant"]

    edited = await client.view.edit(prompt, user_message("Weather in Rome?"))
    await answer(agent, client, edited, "Rainy.", 2)
    await late.view.wait_for(lambda: late.view.branch_selection(prompt).has_siblings)
    assert texts(late.view.get_messages()) == ["Weather in Paris?", "assistant"]
    assert late.view.branch_selection(prompt).index == 0
    await late.close()
    await client.close()
    await agent.end()
