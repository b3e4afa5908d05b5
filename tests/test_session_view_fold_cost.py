"""Linear folds in the view (issue 21, break #8): a new live wire costs a client view O(1).

A :class:`~ai_transport.sessions.view.View` used to compare its snapshot with every visible node
on each tree change (``benchmarks/bench_fold.py``: 59 us / 245 us / 7.2 ms per new prompt with 100 /
1k / 10k messages held). It now diffs only what the tree changed: the nodes appended to the visible
path it took its snapshot from and the nodes folded since. The visible nodes the view reads per new
prompt (and the entries of the tree's append log) are counted here (timings belong in the benchmark), and a Hypothesis property checks that
the incremental view emits the same ``update`` events and shows the same messages as one that
re-diffs in full, after any sequence of prompts, replies, edits, refolds and branch switches.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_transport.channels.memory import InProcessHub
from ai_transport.conversation.tree import Tree
from ai_transport.sessions.client import ClientSession, ClientView


def prompt_wire(n: int, who: str, cmid: str, parent: str | None = None, fork_of: str | None = None) -> dict[str, Any]:
    transport = {"role": "user", "codec-message-id": cmid, "run-client-id": who,
                 "event-id": str(uuid.uuid4()), "stream": "false", "discrete": "true"}
    if parent is not None:
        transport["parent"] = parent
    if fork_of is not None:
        transport["fork-of"] = fork_of
    serial = f"{n:020d}"
    return {"name": "ai-input", "data": f"p{n}", "clientId": who, "action": "message.create",
            "serial": serial, "version": {"serial": serial, "clientId": who}, "timestamp": 1,
            "extras": {"ai": {"transport": transport, "codec": {"kind": "user-message", "partType": "input_text"}}}}


class CountingPath(list):  # type: ignore[type-arg]
    """The tree's visible path, counting the nodes a reader touches (an iteration reads them all)."""

    reads = 0

    def __iter__(self) -> Any:
        CountingPath.reads += len(self)
        return super().__iter__()

    def __getitem__(self, i: Any) -> Any:
        item = super().__getitem__(i)
        CountingPath.reads += len(item) if isinstance(i, slice) else 1
        return item


def nodes_read_per_prompt(held: int, monkeypatch: pytest.MonkeyPatch) -> float:
    """Visible nodes read per new live prompt (tree path and view diff), ``held`` prompts folded."""
    session = ClientSession(InProcessHub().client("alice").channel("chat"))
    session.view.on("update", lambda *_: None)  # a UI listening
    updates = [0]
    session.view.on("update", lambda *_: updates.__setitem__(0, updates[0] + 1))
    for n in range(held):
        session._on_live(prompt_wire(n, "mallory", str(uuid.uuid4())))
    tree = session.tree
    tree.visible_nodes(session.view.branch.selections)  # the path the next wires extend ...
    assert tree._visible_cache is not None
    key, path, on_path = tree._visible_cache
    counted = CountingPath(path)
    tree._visible_cache = (key, counted, on_path)  # ... counted from here on
    session.view._take_snapshot()
    assert session.view._snap_path is counted
    tree._appends = CountingPath(tree._appends)  # the tree's log of appends (every prompt, held live)
    CountingPath.reads, updates[0] = 0, 0
    for n in range(held, held + 20):
        session._on_live(prompt_wire(n, "mallory", str(uuid.uuid4())))
    reads = CountingPath.reads
    assert tree._visible_cache[1] is counted  # appends only: the path was extended, never rebuilt
    assert updates[0] == 20  # one update per new prompt, as before
    assert len(session.view.get_messages()) == held + 20
    return reads / 20


def test_a_new_prompt_costs_the_view_the_same_with_50_or_500_prompts_held(monkeypatch: pytest.MonkeyPatch) -> None:
    small, large = nodes_read_per_prompt(50, monkeypatch), nodes_read_per_prompt(500, monkeypatch)
    # the appended node (and a binary search of the tree's append log), never every visible node:
    # a full re-diff, or a scan of the append log, reads held + 20 nodes a prompt
    assert small <= 30 and large <= 30, (small, large)
    assert large - small <= 10, (small, large)


def test_a_view_whose_snapshot_outlived_the_fold_journal_diffs_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ai_transport.conversation.tree.FOLD_JOURNAL", 4)
    session = ClientSession(InProcessHub().client("alice").channel("chat"))
    updates: list[int] = []
    session.view.on("update", lambda *_: updates.append(1))
    session._on_live(prompt_wire(0, "alice", "a"))
    mark = session.tree.fold_mark()
    for _ in range(6):  # six refolds of the prompt (no output event), more than the journal holds
        session.tree._refold(session.tree._nodes["a"])
    assert session.tree.folded_since(mark) is None
    updates.clear()
    session._on_live(prompt_wire(1, "alice", "b"))
    assert updates == [1]
    assert session.view._snap_versions == [n.fold_version for n in session.tree.visible_nodes()]
    assert [m.codec_message_id for m in session.view.get_messages()] == ["a", "b"]


class FullDiffView(ClientView):
    """The view as it was: every change re-diffs every visible node."""

    def _update_snapshot(self) -> bool | None:
        return None


ops = st.lists(
    st.tuples(st.sampled_from(["root", "reply", "reply", "edit", "refold", "select", "view"]),
              st.integers(0, 30), st.sampled_from(["alice", "mallory"])),
    min_size=1, max_size=25,
)


@settings(max_examples=80, deadline=None)
@given(steps=ops)
def test_the_incremental_view_equals_a_full_re_diff(steps: list[tuple[str, int, str]]) -> None:
    session = ClientSession(InProcessHub().client("alice").channel("chat"))
    tree: Tree = session.tree
    views = [session.view, FullDiffView(session)]
    counts = [[0, 0], [0, 0]]
    for view, count in zip(views, counts):
        view.on("update", lambda *_, c=count: c.__setitem__(0, c[0] + 1))
        view.on("run", lambda *_, c=count: c.__setitem__(1, c[1] + 1))
    cmids: list[str] = []
    serial = 0
    for op, pick, who in steps:
        other = cmids[pick % len(cmids)] if cmids else None
        if op == "select" and other is not None:
            group = tree.sibling_group(other)
            if len(group) > 1:
                target = group[pick % len(group)].key
                for view in views:
                    view.select(target)  # type: ignore[attr-defined]
        elif op == "view":
            tree.visible_nodes({})  # another reader of the tree's path (another view's selections)
        elif op == "refold" and other is not None:
            tree._refold(tree._nodes[other])  # a fold no output event announces (a superseded step)
        else:
            serial += 1
            cmid = f"c{serial}"
            session._on_live(prompt_wire(serial, who, cmid, parent=other if op == "reply" else None,
                                         fork_of=other if op == "edit" else None))
            cmids.append(cmid)
        inc, full = views
        assert counts[0] == counts[1]
        assert [(m.codec_message_id, m.message) for m in inc.get_messages()] == [
            (m.codec_message_id, m.message) for m in full.get_messages()
        ]
        assert inc._snap_keys == full._snap_keys and inc._snap_versions == full._snap_versions
        assert inc._snap_set == full._snap_set
