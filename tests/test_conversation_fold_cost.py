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
