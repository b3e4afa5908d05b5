"""Linear folds under edit floods (issue 21): a new live wire costs a client view O(1) work, however
many edits the channel holds.

``benchmarks/bench_fold.py`` times the live fold per new message with 100 / 1k / 10k messages held,
each an edit of the one before (``editchain``), of the first (``edit``), or every other one an edit
of the prompt just shown (``editeach``). Two scans grew with the messages held, both invisible to a
count of Python calls (one call each):

* the view's branch read the prompts the tree's forked index gained since its last read with
  ``islice(index, seen, None)``, which steps over every entry read before: one C-level pass over
  every forked prompt a wire (``edit`` ~50 us at 1k, ~104 us at 10k);
* the branch rebuilt its selections (one per group it pinned: every edited prompt it showed) on
  each read, and the tree hashed them whole to key its cached path (``editeach`` 0.27 ms at 1k,
  2-6 ms at 10k).

Here the entries read from the forked index and the Python lines run per new wire are counted
(timings belong in the benchmark); Hypothesis checks the versioned selections
(:class:`~ai_transport.conversation.selections.Selections`) against a plain mapping, and the tree's
path for them against a path computed from scratch.
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ai_transport.channels.memory import InProcessHub
from ai_transport.conversation.selections import Selections
from ai_transport.conversation.tree import Tree
from ai_transport.sessions.client import ClientSession


def prompt_wire(n: int, who: str, cmid: str, fork_of: str | None = None) -> dict[str, Any]:
    """A live user prompt of ``who`` at serial ``n`` (an edit of ``fork_of``)."""
    transport = {"role": "user", "codec-message-id": cmid, "run-client-id": who,
                 "event-id": str(uuid.uuid4()), "stream": "false", "discrete": "true"}
    if fork_of is not None:
        transport["fork-of"] = fork_of
    serial = f"{n:020d}"
    return {"name": "ai-input", "data": f"p{n}", "clientId": who, "action": "message.create",
            "serial": serial, "version": {"serial": serial, "clientId": who}, "timestamp": 1,
            "extras": {"ai": {"transport": transport, "codec": {"kind": "user-message", "partType": "input_text"}}}}


def flood_wire(mode: str, n: int, sent: list[str]) -> dict[str, Any]:
    """Mallory's ``n``-th prompt of a flood (``bench_fold.py``'s modes): an edit of her previous prompt
    (``editchain``), of her first (``edit``), of the prompt just before it every other one
    (``editeach``: groups of two, each edit of a prompt the view shows), or none (``junk``)."""
    fork_of = None
    if sent and mode in ("editchain", "edit"):
        fork_of = sent[-1] if mode == "editchain" else sent[0]
    elif len(sent) % 2 == 1 and mode == "editeach":
        fork_of = sent[-1]
    cmid = f"m{n}"
    sent.append(cmid)
    return prompt_wire(n, "mallory", cmid, fork_of)


class CountingIndex(dict):  # type: ignore[type-arg]
    """The tree's forked index, counting the entries a reader steps over (an iteration, either way)."""

    reads = 0

    def __iter__(self) -> Any:
        for key in super().__iter__():
            CountingIndex.reads += 1
            yield key

    def __reversed__(self) -> Any:
        for key in super().__reversed__():
            CountingIndex.reads += 1
            yield key


#: The key functions of the tree's binary searches (its order, its append log): O(log N) calls a wire.
BISECT_KEYS = {"_stored_key", "_append_version"}


def work_per_wire(mode: str, held: int, live: int = 20, views: int = 1) -> tuple[float, float, int]:
    """``(forked-index entries read, Python lines run, selections held)`` per new live wire of a
    client session whose ``views`` views have an ``update`` listener, ``held`` wires of the flood
    folded."""
    session = ClientSession(InProcessHub().client("alice").channel("chat"))
    session.view.on("update", lambda *_: None)
    for _ in range(views - 1):
        session.create_view().on("update", lambda *_: None)
    sent: list[str] = []
    for n in range(held):
        session._on_live(flood_wire(mode, n, sent))
    tree = session.tree
    tree.forked_index()
    assert tree._children_cache is not None
    index = CountingIndex(tree._children_cache[7])
    tree._children_cache = (*tree._children_cache[:7], index)
    session._on_live(flood_wire(mode, held, sent))  # the branch reads the (new) index in full once
    CountingIndex.reads = 0
    lines = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal lines
        if event == "call" and frame.f_code.co_name in BISECT_KEYS:
            return None  # a binary search's steps: O(log N), not counted
        if event == "line":
            lines += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        for n in range(held + 1, held + 1 + live):
            session._on_live(flood_wire(mode, n, sent))
    finally:
        sys.settrace(previous)
    assert tree.forked_index() is index  # the groups were extended, never rebuilt
    total = held + 1 + live
    shown = {"junk": total, "editeach": (total + 1) // 2}.get(mode, 1)  # one a group
    assert len(session.view.get_messages()) == shown
    return CountingIndex.reads / live, lines / live, len(session.view.branch.selections)


def test_an_edit_flood_costs_each_new_edit_the_same_with_100_or_1000_held() -> None:
    for mode in ("edit", "editchain", "editeach", "junk"):
        small, large = work_per_wire(mode, 100), work_per_wire(mode, 1000)
        # the new forked prompts only (one an edit; two for an edit that forks a shown prompt),
        # never a step over the ones read before: 100 / 1000 an edit
        assert small[0] <= 2 and large[0] <= 2, (mode, small, large)
        # the same lines a wire (a scan of the groups, selections or path: hundreds more)
        assert large[1] - small[1] <= 2, (mode, small, large)


def test_a_view_that_pinned_every_edited_prompt_reads_its_selections_incrementally() -> None:
    small, large = work_per_wire("editeach", 100), work_per_wire("editeach", 1000)
    assert small[2] >= 50 and large[2] >= 500  # one pin a group shown when edited: they grow ...
    assert large[1] - small[1] <= 2, (small, large)  # ... and a wire costs the same


def test_two_views_reading_the_tree_in_turn_diff_their_selections_outside_python() -> None:
    # the tree keeps one cached path: each view's read reselects it from the other's selections, a
    # set operation on their items (O(the selections) in C, as before), Python only for the changes
    small, large = work_per_wire("editeach", 100, views=2), work_per_wire("editeach", 1000, views=2)
    assert small[0] <= 4 and large[0] <= 4, (small, large)  # each view reads the new forked prompts
    assert large[1] - small[1] <= 4, (small, large)


# -- the versioned selections ------------------------------------------------------------------

changes = st.lists(
    st.tuples(st.sampled_from(["set", "set", "discard", "clear", "read"]), st.sampled_from("abcd"),
              st.sampled_from(["x", "y", "z"]), st.integers(0, 40)),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(steps=changes, journal=st.integers(1, 6))
def test_selections_answer_what_they_held_at_any_version_the_journal_reaches(
    steps: list[tuple[str, str, str, int]], journal: int
) -> None:
    import ai_transport.conversation.selections as module

    kept, module.SELECTIONS_JOURNAL = module.SELECTIONS_JOURNAL, journal
    try:
        selections = Selections()
    finally:
        module.SELECTIONS_JOURNAL = kept
    history: list[dict[str, str]] = [{}]  # history[v]: the contents at version v
    for op, root, key, back in steps:
        if op == "set":
            selections.set(root, key)
        elif op == "discard":
            selections.discard(root)
        elif op == "clear":
            left = dict(selections)
            selections.clear()  # one discard (one version) a root, in the order they were set
            for root in list(left):
                del left[root]
                history.append(dict(left))
        else:
            version = max(0, selections.version - back)
            then = selections.changed_since(version)
            if selections.version - version > journal:
                assert then is None and selections.as_of(version) is None
            else:
                assert then is not None
                assert selections.as_of(version) == history[version]
                differ = {r for r in history[version].keys() | dict(selections).keys()
                          if history[version].get(r) != selections.get(r)}
                assert differ <= then.keys()  # every root that differs is listed, with its value then
                assert all(then[r] == history[version].get(r) for r in then)
        while len(history) <= selections.version:
            history.append(dict(selections))  # a change that changed nothing is no version
        assert dict(selections) == history[selections.version]


tree_ops = st.lists(
    st.tuples(st.sampled_from(["prompt", "edit", "edit", "select", "unselect", "read", "other"]),
              st.integers(0, 30), st.integers(0, 2)),
    min_size=1, max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(steps=tree_ops)
def test_the_path_for_versioned_selections_equals_the_path_from_scratch(steps: list[tuple[str, int, int]]) -> None:
    """Two views' selections and a plain mapping read the tree's one cached path in turn, while
    prompts, edits and selection changes land: each answer equals the path computed from scratch."""
    session = ClientSession(InProcessHub().client("alice").channel("chat"))
    tree: Tree = session.tree
    readers: list[Any] = [Selections(), Selections(), {}]
    cmids: list[str] = []
    for op, pick, who in steps:
        reader = readers[who]
        other = cmids[pick % len(cmids)] if cmids else None
        if op in ("prompt", "edit"):
            cmid = f"c{len(cmids)}"
            session._on_live(prompt_wire(len(cmids) + 1, "mallory", cmid, other if op == "edit" else None))
            cmids.append(cmid)
        elif op in ("select", "unselect") and other is not None:
            root = tree.group_root(other)
            if isinstance(reader, Selections):
                reader.set(root, other) if op == "select" else reader.discard(root)
            elif op == "select":
                reader[root] = other
            else:
                reader.pop(root, None)
        elif op == "other":
            readers[who] = Selections() if isinstance(reader, Selections) else {}  # a new view's
        for read in ([readers[who]] if op != "read" else readers):
            answer = [n.key for n in tree.visible_path(read)]
            cached = tree._visible_cache
            tree._visible_cache = None
            assert answer == [n.key for n in tree.visible_path(dict(read))], (op, read)
            tree._visible_cache = cached  # the next read goes on from the cached path
