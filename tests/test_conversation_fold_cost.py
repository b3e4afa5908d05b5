"""Linear folds (issue 21, break #8): a new live wire costs the tree O(1), whatever the channel holds.

With N junk prompts on the channel a client session used to spend 18 / 96 / 319 ms on each new
message at N = 100 / 200 / 400 (``Tree.sibling_group`` scanned every child per visible node). The
tree now builds its sibling groups and visible path once per structural change and extends them by
the nodes appended since: the work per new prompt is counted here (timings belong in
``benchmarks/bench_fold.py``), and a Hypothesis property checks the extended caches against a full
recompute after every wire.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_transport.channels.memory import InProcessHub
from ai_transport.conversation.tree import Tree
from ai_transport.sessions.client import ClientSession


def prompt_wire(n: int, who: str, cmid: str, parent: str | None = None, fork_of: str | None = None) -> dict[str, Any]:
    transport = {"role": "user", "codec-message-id": cmid, "run-client-id": who,
                 "event-id": str(uuid.uuid4()), "stream": "false", "discrete": "true"}
    if parent is not None:
        transport["parent"] = parent
    if fork_of is not None:
        transport["fork-of"] = fork_of
    return {"name": "ai-input", "data": f"p{n}", "clientId": who, "action": "message.create",
            "serial": f"{n:020d}", "version": {"serial": f"{n:020d}", "clientId": who}, "timestamp": 1,
            "extras": {"ai": {"transport": transport, "codec": {"kind": "user-message", "partType": "input_text"}}}}


def grouped_per_prompt(held: int, monkeypatch: pytest.MonkeyPatch) -> float:
    """Nodes the tree groups per new live prompt, with ``held`` prompts already folded."""
    session = ClientSession(InProcessHub().client("alice").channel("chat"))
    session.view.on("update", lambda *_: None)  # a UI listening
    for n in range(held):
        session._on_live(prompt_wire(n, "mallory", str(uuid.uuid4())))
    calls = [0]
    real = Tree._group_node

    def counted(self: Tree, *args: Any) -> None:
        calls[0] += 1
        real(self, *args)

    monkeypatch.setattr(Tree, "_group_node", counted)
    for n in range(held, held + 20):
        session._on_live(prompt_wire(n, "mallory", str(uuid.uuid4())))
    monkeypatch.undo()
    assert len(session.view.get_messages()) == held + 20
    return calls[0] / 20


def test_a_new_prompt_costs_the_same_with_50_or_500_prompts_held(monkeypatch: pytest.MonkeyPatch) -> None:
    small, large = grouped_per_prompt(50, monkeypatch), grouped_per_prompt(500, monkeypatch)
    assert small <= 2 and large <= 2  # the new node itself, never the whole tree


ops = st.lists(st.tuples(st.sampled_from(["root", "reply", "edit"]), st.integers(0, 30),
                         st.sampled_from(["alice", "mallory"])), min_size=1, max_size=25)


@settings(max_examples=80, deadline=None)
@given(steps=ops, with_view=st.booleans())
def test_the_extended_caches_equal_a_full_recompute(steps: list[tuple[str, int, str]], with_view: bool) -> None:
    session = ClientSession(InProcessHub().client("alice").channel("chat"))
    if not with_view:
        session.view.close()  # the tree alone (a view pins the forks it showed: other selections)
    tree = session.tree
    cmids: list[str] = []
    for n, (op, pick, who) in enumerate(steps):
        cmid = f"c{n}"
        other = cmids[pick % len(cmids)] if cmids else None
        wire = prompt_wire(n, who, cmid, parent=other if op == "reply" else None,
                           fork_of=other if op == "edit" else None)
        session._on_live(wire)
        cmids.append(cmid)
        extended = [n.key for n in tree.visible_nodes()]
        groups = {k: [m.key for m in tree.sibling_group(k)] for k in cmids}
        kept = (tree._visible_cache, tree._children_cache)
        tree._visible_cache = tree._children_cache = None  # the same answers from scratch ...
        assert [n.key for n in tree.visible_nodes()] == extended
        assert {k: [m.key for m in tree.sibling_group(k)] for k in cmids} == groups
        tree._visible_cache, tree._children_cache = kept  # ... then the next wire extends these again


# -- the work per live wire, counted as Python function calls (deterministic, unlike a timing) ----


def _calls(fn: Any) -> int:
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    fn()
    profile.disable()
    return sum(entry.callcount for entry in profile.getstats())


def client_calls_per_wire(held: int) -> float:
    """Calls a client session (a UI listening) spends per new live prompt and answer, with ``held``
    prompts already folded, one in five an edit of alice's previous prompt (forked prompts exist)."""
    session = ClientSession(InProcessHub().client("alice").channel("chat"))
    session.view.on("update", lambda *_: None)
    last: str | None = None
    for n in range(held):
        cmid = f"c{n}"
        edit = last if n % 5 == 4 else None
        session._on_live(prompt_wire(n, "alice", cmid, fork_of=edit))
        last = cmid
    assert session.tree.forked_prompts()

    def more() -> None:
        for n in range(held, held + 20):
            session._on_live(prompt_wire(n, "mallory", f"c{n}"))

    spent = _calls(more)
    assert len(session.view.get_messages()) > held // 2
    return spent / 20


def test_a_live_wire_costs_a_client_the_same_with_50_or_400_prompts_and_their_edits_held() -> None:
    small, large = client_calls_per_wire(50), client_calls_per_wire(400)
    # before: every prompt of the channel was walked (forked prompts) and every shown key
    # checked against them on each structural change: ~+1,000 calls a wire at 400
    assert large <= small * 1.15 + 20, (small, large)


async def agent_calls_per_wire(depth: int) -> float:
    """Calls an agent session with a run in progress (its view: the trigger's chain, ``depth``
    prompts and answers deep) spends per new live wire of another member."""
    from ai_transport.sessions.agent import AgentSession

    hub = InProcessHub()
    agent = AgentSession(hub.client("agent").channel("chat"))
    serial = 0

    def feed(wire: dict[str, Any]) -> None:
        nonlocal serial
        serial += 1
        s = f"{serial:020d}"
        wire.update(serial=s, version={"serial": s, "clientId": wire["clientId"]}, timestamp=serial)
        agent._on_live(wire)

    parent: str | None = None
    for n in range(depth):  # alice's conversation: each prompt answers the one before
        wire = prompt_wire(0, "alice", f"q{n}", parent=parent)
        feed(wire)
        parent = f"q{n}"
    trigger = wire
    event_id = trigger["extras"]["ai"]["transport"]["event-id"]
    run = await agent.create_run({"inputEventId": event_id, "sessionName": "chat", "inputClientId": "alice"})
    run._resolve_trigger(trigger)  # located (what start() does first), without publishing
    run.view._recompute_and_emit()  # the view shows the pinned branch
    updates = [0]
    run.view.on("update", lambda *_: updates.__setitem__(0, updates[0] + 1))
    assert len(run.view.get_messages()) == depth

    def more() -> None:
        for n in range(20):
            feed(prompt_wire(0, "mallory", f"junk{n}"))

    spent = _calls(more)
    assert len(run.view.get_messages()) == depth and updates[0] == 0  # none of it on the branch
    return spent / 20


async def test_a_live_wire_costs_an_agent_run_the_same_with_a_chain_50_or_400_deep() -> None:
    small, large = await agent_calls_per_wire(50), await agent_calls_per_wire(400)
    # before: the run's view walked the trigger's whole chain (and diffed every node of it) per wire
    assert large <= small * 1.15 + 20, (small, large)


# -- edit floods: prompts editing prompts (break #8 with fork-of instead of junk prompts) ----------


def edit_flood_calls_per_wire(held: int, mode: str, with_view: bool) -> float:
    """Calls a client session spends per new live edit, with ``held`` edits already folded: each
    prompt edits the one before (``chain``: an edit of an edit of ...) or the first (``one``).
    Without a view, the tree's default path (the latest edit shown) is read after every wire."""
    session = ClientSession(InProcessHub().client("alice").channel("chat"))
    if with_view:
        session.view.on("update", lambda *_: None)  # a UI listening: it pins the edit it showed
    else:
        session.view.close()
    tree = session.tree

    def publish(n: int) -> None:
        target = None if n == 0 else (f"e{n - 1}" if mode == "chain" else "e0")
        session._on_live(prompt_wire(n, "mallory", f"e{n}", fork_of=target))
        if not with_view:
            tree.visible_path()

    for n in range(held):
        publish(n)

    def more() -> None:
        for n in range(held, held + 20):
            publish(n)

    spent = _calls(more)
    last = held + 19
    assert len(tree.sibling_group(f"e{last}")) == held + 20  # one group: the prompt and all its edits
    assert tree.group_root(f"e{last}") == "e0" and tree.root_of(f"e{last // 2}") == "e0"
    shown = [n.key for n in (session.view._visible() if with_view else tree.visible_path())]
    assert shown == (["e0"] if with_view else [f"e{last}"])  # the view keeps the edit it showed
    return spent / 20


@pytest.mark.parametrize("with_view", [True, False], ids=["view", "tree"])
@pytest.mark.parametrize("mode", ["chain", "one"])
def test_a_live_edit_costs_the_same_with_50_or_400_edits_held(mode: str, with_view: bool) -> None:
    small, large = edit_flood_calls_per_wire(50, mode, with_view), edit_flood_calls_per_wire(400, mode, with_view)
    # before: each edit walked its fork-of chain (twice), was appended to the group of every prompt
    # the chain reached (O(N^2) entries), and the visible path was rebuilt from scratch: ~+10,000
    # calls a wire at 400
    assert large <= small * 1.15 + 20, (small, large)


def test_a_live_edit_of_the_last_prompt_of_a_long_conversation_costs_the_same() -> None:
    """An edit of the prompt shown last (the reply chain above it stays): the path loses one node
    and gains one, whatever the conversation's length."""

    def calls(depth: int) -> float:
        session = ClientSession(InProcessHub().client("alice").channel("chat"))
        session.view.close()
        tree = session.tree
        for n in range(depth):
            session._on_live(prompt_wire(n, "alice", f"q{n}", parent=f"q{n - 1}" if n else None))
        tree.visible_path()

        def more() -> None:
            for k in range(20):
                n = depth + k
                target = f"q{depth - 1}" if k == 0 else f"q{n - 1}"
                session._on_live(prompt_wire(n, "alice", f"q{n}", parent=f"q{depth - 2}", fork_of=target))
                tree.visible_path()

        spent = _calls(more)
        keys = [n.key for n in tree.visible_path()]
        assert keys == [f"q{n}" for n in range(depth - 1)] + [f"q{depth + 19}"]
        return spent / 20

    small, large = calls(50), calls(400)
    assert large <= small * 1.15 + 20, (small, large)


def test_a_live_edit_of_another_shown_prompt_each_time_costs_the_same_with_50_or_400_held() -> None:
    """Mallory's prompts, all shown, then an edit of a different one each time: the view pins each
    prompt it showed as its group forks, which keeps the path (the same list, diffed in O(1))."""

    def calls(held: int) -> float:
        session = ClientSession(InProcessHub().client("alice").channel("chat"))
        session.view.on("update", lambda *_: None)
        for n in range(held):
            session._on_live(prompt_wire(n, "mallory", f"x{n}"))

        def more() -> None:
            for k in range(20):
                session._on_live(prompt_wire(held + k, "mallory", f"e{k}", fork_of=f"x{k * 2}"))

        spent = _calls(more)
        assert [n.key for n in session.view._visible()] == [f"x{n}" for n in range(held)]  # each pinned
        assert [m.key for m in session.tree.sibling_group("x2")] == ["x2", "e1"]
        return spent / 20

    small, large = calls(50), calls(400)
    assert large <= small * 1.15 + 40, (small, large)


# -- a long run read newest page first ------------------------------------------------------------


def _long_run(messages: int) -> list[dict[str, Any]]:
    """A recorded conversation, then ``messages`` more answers streamed in its last run (a long
    agentic run), as history holds them (aggregates, oldest first)."""
    import asyncio
    import copy

    from support_untrusted import record

    history = [dict(w) for w in asyncio.run(record())["full"]["history"]]
    template = next(
        w for w in history
        if w.get("name") == "ai-output" and w["extras"]["ai"].get("codec", {}).get("kind") == "output_text"
    )
    serial, ts = int(history[-1]["serial"]), max(w["timestamp"] for w in history)
    for i in range(messages):
        w = copy.deepcopy(template)
        s = f"{serial + 1 + i:020d}"
        w.update(serial=s, id=f"long:{i}", timestamp=ts + i, data=f"answer {i}", version={**w["version"], "serial": s})
        transport = w["extras"]["ai"]["transport"]
        transport["codec-message-id"], transport["stream-id"] = f"long-{i}", f"stream-{i}"
        history.append(w)
    return history


def _fold_pages(wires: list[dict[str, Any]], page_size: int) -> Any:
    from ai_transport.codec import ResponsesCodec
    from ai_transport.conversation.core import Conversation

    core = Conversation(ResponsesCodec, agent=True, trusted_agent_ids={"agent"})
    for end in range(len(wires), 0, -page_size):  # newest page first, each page oldest first
        core.receive_history_page([dict(w) for w in wires[max(0, end - page_size) : end]])
    return core


def test_a_long_run_read_newest_page_first_is_refolded_once_not_once_per_older_wire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each page of a run spread over many pages lands before what was folded of it: the run was
    refolded from its start once per such wire (1,600 answers of one run: ~45 s for every fresh
    worker and reader). A node an older wire lands on while a page folds is now refolded once, when
    it is read; what it shows equals the fold in one page."""
    from ai_transport.codec import ResponsesCodec

    wires = _long_run(300)
    run_id = wires[-1]["extras"]["ai"]["transport"]["run-id"]
    folds = [0]
    real = ResponsesCodec.fold

    def counted(*args: Any, **kwargs: Any) -> Any:
        folds[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(ResponsesCodec, "fold", staticmethod(counted))
    paged = _fold_pages(wires, 20)
    run = paged.tree.get_run_node(run_id)
    assert run is not None
    shown = [m.message.items for m in paged.tree.messages_of(run)]
    events = folds[0]
    monkeypatch.undo()
    whole = _fold_pages(wires, len(wires))
    one_page = whole.tree.get_run_node(run_id)
    assert one_page is not None
    assert shown == [m.message.items for m in whole.tree.messages_of(one_page)]
    assert "answer 299" in str(shown[-1]) and len(shown) > 300
    assert events < 3000, events  # ~1,300 (refolded per older wire: ~200,000)


def test_a_wire_log_read_newest_first_places_each_wire_by_bisection() -> None:
    """A node's wire log takes an older wire (history pages arrive newest first; a member's copies
    of one prompt id all land on one node) by bisection: it scanned the log from its tail, 6,400
    copies of a prompt cost a reader ~3 s. Counted as lines of ``record`` run (no timing)."""
    import sys

    from ai_transport.conversation.nodes import WireLog

    log = WireLog()
    code = WireLog.record.__code__
    lines = [0]

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code is not code:
            return None

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                lines[0] += 1
            return local

        return local

    n = 400
    sys.settrace(trace)
    try:
        for i in range(n, 0, -1):  # newest first
            log.record(f"{i:08d}", f"m{i}", [], None, False)
    finally:
        sys.settrace(None)
    assert [e.serial for e in log.entries] == [f"{i:08d}" for i in range(1, n + 1)]
    assert lines[0] < 20 * n, lines[0]  # a scan from the tail: ~n * n
    assert log.record(f"{n // 2:08d}", "again", [], f"{n // 2:08d}", False) == "dropped"  # a re-delivery, found


# -- a run of many steps ----------------------------------------------------------------------------


def _step_wires(steps: int) -> tuple[list[dict[str, Any]], str]:
    """A recorded conversation, then ``steps`` more steps (start, answer, end) in its last run."""
    import asyncio
    import copy

    from support_untrusted import record

    history = [dict(w) for w in asyncio.run(record())["full"]["history"]]

    def template(name: str, kind: str | None = None) -> dict[str, Any]:
        return next(
            w for w in history
            if w.get("name") == name and (kind is None or w["extras"]["ai"].get("codec", {}).get("kind") == kind)
        )

    start, end, answer = template("ai-step-start"), template("ai-step-end"), template("ai-output", "output_text")
    run_id = answer["extras"]["ai"]["transport"]["run-id"]
    serial, ts = int(history[-1]["serial"]), max(w["timestamp"] for w in history)
    for i in range(steps):
        opened = ""
        for t in (start, answer, end):
            serial += 1
            w = copy.deepcopy(t)
            s = f"{serial:020d}"
            w.update(serial=s, id=f"step:{serial}", timestamp=ts + serial, version={**w["version"], "serial": s})
            transport = w["extras"]["ai"]["transport"]
            transport.update({"run-id": run_id, "step-id": f"step-{i}"})
            if t is start:
                opened = s
            elif t is end:
                transport["step-start-serial"] = opened
            else:
                transport.update({"codec-message-id": f"m-{i}", "stream-id": f"st-{i}", "step-start-serial": opened})
            history.append(w)
    return history, run_id


STEP_HISTORY = _step_wires(12)


@settings(max_examples=60, deadline=None)
@given(order=st.permutations(range(len(STEP_HISTORY[0]))))
def test_a_runs_steps_are_in_first_attempt_order_whatever_the_arrival_order(order: list[int]) -> None:
    from ai_transport.codec import ResponsesCodec
    from ai_transport.conversation.core import Conversation

    wires, run_id = STEP_HISTORY
    core = Conversation(ResponsesCodec, agent=True, trusted_agent_ids={"agent"})
    for i in order:
        core.receive_history(dict(wires[i]))
    in_order = Conversation(ResponsesCodec, agent=True, trusted_agent_ids={"agent"})
    for wire in wires:
        in_order.receive_live(dict(wire))
    run, expected = core.tree.get_run_node(run_id), in_order.tree.get_run_node(run_id)
    assert run is not None and expected is not None
    assert run.steps == expected.steps
    assert [s.step_id for s in run.steps][-12:] == [f"step-{i}" for i in range(12)]
    assert all(s.status == "complete" for s in run.steps[-12:]), run.steps


def test_a_step_wire_places_its_step_without_sorting_the_runs_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step wire re-sorted every step of its run (a run of 1,200 steps: ~460 us a wire, growing);
    now the step is placed by bisection, the others untouched."""
    from ai_transport.codec import ResponsesCodec
    from ai_transport.conversation import tree_lifecycle
    from ai_transport.conversation.core import Conversation

    wires, run_id = _step_wires(200)
    sorts = [0]
    real = tree_lifecycle._first_attempt

    def counted(step: Any) -> str:
        sorts[0] += 1
        return real(step)

    monkeypatch.setattr(tree_lifecycle, "_first_attempt", counted)
    core = Conversation(ResponsesCodec, agent=True, trusted_agent_ids={"agent"})
    for end in range(len(wires), 0, -50):  # newest page first
        core.receive_history_page([dict(w) for w in wires[max(0, end - 50) : end]])
    run = core.tree.get_run_node(run_id)
    assert run is not None and len(run.steps) >= 200
    assert sorts[0] == 0  # (sorting per step wire: ~80,000 calls)
