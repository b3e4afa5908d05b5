"""Linear folds (issue 21): the tree's and the branches' incremental structures equal a recomputation.

The tree keeps its sibling groups, forked prompts and visible path across wires (extended by the
nodes appended since, or rebuilt after a structural change), and an agent run's
:class:`~ai_transport.conversation.leaf_branch.LeafBranch` keeps its trigger chain and visible
nodes while the tree only appends nodes it does not wait for. Hypothesis builds conversations
(prompts of two publishers, replies, edits, sibling runs, failed runs, a prompt id taken by an
impostor before or after its owner, refolds), delivers their wires live, newest page first or
shuffled, and after every wire compares each cached answer with the same answer computed from
scratch (every cache dropped). The work per wire is counted in
``tests/test_conversation_fold_cost.py``; timings belong in ``benchmarks/bench_fold.py``.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ai_transport.codec.codec import ResponsesCodec
from ai_transport.conversation.branch import NavigableBranch
from ai_transport.conversation.leaf_branch import LeafBranch
from ai_transport.conversation.nodes import InputNode, RunNode
from ai_transport.conversation.tree import Tree, WireApplier


def _wire(serial: int, name: str, who: str, transport: dict[str, str], data: Any = None,
          codec: dict[str, str] | None = None) -> dict[str, Any]:
    ai: dict[str, Any] = {"transport": transport}
    if codec is not None:
        ai["codec"] = codec
    s = f"{serial:020d}"
    return {"id": f"w{serial}", "name": name, "data": data, "clientId": who, "connectionId": f"conn-{who}",
            "action": "message.create", "serial": s, "version": {"serial": s}, "timestamp": serial,
            "extras": {"ai": ai}}


def prompt(serial: int, who: str, cmid: str, parent: str | None, fork_of: str | None) -> dict[str, Any]:
    t = {"role": "user", "codec-message-id": cmid, "run-client-id": who, "event-id": f"e{serial}",
         "stream": "false", "discrete": "true"}
    if parent is not None:
        t["parent"] = parent
    if fork_of is not None:
        t["fork-of"] = fork_of
    return _wire(serial, "ai-input", who, t, f"prompt {serial}", {"kind": "user-message", "partType": "input_text"})


def run_start(serial: int, run_id: str, parent: str) -> dict[str, Any]:
    return _wire(serial, "ai-run-start", "agent", {"run-id": run_id, "run-client-id": "alice", "parent": parent,
                                                   "invocation-id": f"i-{run_id}", "input-client-id": "alice",
                                                   "input-codec-message-id": parent})


def answer(serial: int, run_id: str, parent: str, cmid: str) -> dict[str, Any]:
    t = {"role": "assistant", "codec-message-id": cmid, "run-id": run_id, "run-client-id": "alice",
         "parent": parent, "invocation-id": f"i-{run_id}", "input-client-id": "alice",
         "input-codec-message-id": parent, "stream": "false"}
    item = {"type": "message", "id": f"msg_{cmid}", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": f"answer {cmid}", "annotations": []}]}
    return _wire(serial, "ai-output", "agent", t, {"item": item}, {"kind": "response.output_item.done"})


def run_end(serial: int, run_id: str, parent: str, reason: str) -> dict[str, Any]:
    return _wire(serial, "ai-run-end", "agent", {"run-id": run_id, "run-client-id": "alice", "run-reason": reason,
                                                 "invocation-id": f"i-{run_id}", "input-client-id": "alice",
                                                 "input-codec-message-id": parent})


steps_st = st.lists(
    st.tuples(st.sampled_from(["prompt", "reply", "reply", "edit", "run", "run", "failed", "impostor", "flush"]),
              st.integers(0, 40), st.sampled_from(["alice", "alice", "mallory"])),
    min_size=1, max_size=18,
)


def conversation(
    steps: list[tuple[str, int, str]],
) -> tuple[list[dict[str, Any]], list[str], list[str], list[str]]:
    """The wires of ``steps`` in serial order, the prompt ids, the answers' ids and the run ids.

    A run's answer (and end) may come a few steps after its start, so that other nodes sort
    between a run's first wire and its start (a run created from a later wire moves when its start
    arrives)."""
    wires: list[dict[str, Any]] = []
    prompts: list[tuple[str, str | None]] = []  # (cmid, parent)
    answers: list[str] = []
    runs: list[str] = []
    pending: list[tuple[str, str, str, int]] = []  # (run id, prompt, op, pick): answered later
    serial = 0

    def next_serial() -> int:
        nonlocal serial
        serial += 1
        return serial

    def finish(run_id: str, target: str, op: str, pick: int) -> None:
        cmid = f"a{run_id}"
        wires.append(answer(next_serial(), run_id, target, cmid))
        answers.append(cmid)
        if pick % 2:  # a second message of the run: mapped to a node that already exists
            wires.append(answer(next_serial(), run_id, target, cmid + "b"))
            answers.append(cmid + "b")
        if pick % 3 or op == "failed":
            wires.append(run_end(next_serial(), run_id, target, "error" if op == "failed" else "complete"))

    for op, pick, who in steps:
        if op in ("prompt", "reply", "edit", "impostor"):
            named = answers + [p for p, _ in prompts]  # the last message shown: an answer, or a prompt
            parent = named[pick % len(named)] if op == "reply" and named else None
            if op == "reply" and pick % 5 == 0:
                parent = f"p{len(prompts) + 1}"  # a crafted parent: the id of a prompt published later
            fork_of = None
            cmid = f"p{len(prompts)}"
            if op == "edit" and prompts:
                fork_of, parent = prompts[pick % len(prompts)]
            if op == "impostor" and prompts:
                cmid = prompts[pick % len(prompts)][0]  # another publisher's prompt id, later in serial order
                who = "mallory" if who == "alice" else "alice"
            wires.append(prompt(next_serial(), who, cmid, parent, fork_of))
            if cmid not in (p for p, _ in prompts):
                prompts.append((cmid, parent))
        elif op == "flush":
            while pending:
                finish(*pending.pop(0))
        elif prompts:  # a run answering a prompt: complete, failed, or (a run that never ended) active
            target = prompts[pick % len(prompts)][0]
            run_id = f"r{len(runs)}"
            runs.append(run_id)
            wires.append(run_start(next_serial(), run_id, target))
            if pick % 4 == 0:
                pending.append((run_id, target, op, pick))
            else:
                finish(run_id, target, op, pick)
    while pending:
        finish(*pending.pop(0))
    return wires, [p for p, _ in prompts], answers, runs


def arrival(wires: list[dict[str, Any]], how: str, page: int, seed: int) -> list[dict[str, Any]]:
    """Live (serial order), history (newest page first, each page oldest first), or shuffled."""
    if how == "live":
        return list(wires)
    if how == "history":
        newest_first = list(reversed(wires))
        out: list[dict[str, Any]] = []
        for start in range(0, len(newest_first), page):
            out.extend(reversed(newest_first[start : start + page]))
        return out
    import random

    shuffled = list(wires)
    random.Random(seed).shuffle(shuffled)
    return shuffled


class RecomputedPins(NavigableBranch):
    """The fork pinning as it was: every shown prompt checked against every forked prompt."""

    def on_visible_nodes_changed(self, previous: Any) -> None:
        forked = self.tree.forked_prompts()
        for key in previous if forked else ():
            if key not in forked:
                continue
            root = self.tree.group_root(key)
            if root not in self._forks:
                self._forks[root] = ("pinned", key)
                self._version += 1
        self._resolve_pending()


def answers_of(tree: Tree, leaf: LeafBranch, nav: NavigableBranch, prompts: list[str], runs: list[str],
               selections: dict[str, str]) -> Any:
    """Every answer the incremental structures give (read through their caches)."""
    keys = [n.key for n in tree.nodes()]
    return {
        "path": [n.key for n in tree.visible_path(selections)],
        "default": [n.key for n in tree.visible_path()],
        "nav": [n.key for n in nav.visible_path()],
        "groups": {k: [m.key for m in tree.sibling_group(k)] for k in keys},
        "roots": {k: tree.group_root(k) for k in keys},
        "root_of": {k: tree.root_of(k) for k in keys if isinstance(tree.get_node(k), InputNode)},
        "forked": sorted(tree.forked_prompts()),
        # the definition, read through the groups (what the kept set must equal)
        "forked_by_definition": sorted(
            k for k in keys if isinstance(tree.get_node(k), InputNode) and len(tree.sibling_group(k)) > 1
        ),
        "replies": {p: [r.key for r in tree.reply_runs(p)] for p in prompts},
        "replies_by_definition": {
            p: [n.key for n in tree.nodes() if isinstance(n, RunNode) and n.parent == p and n.key not in tree._superseded]
            for p in prompts
        },
        "leaf": [n.key for n in leaf.visible_path()],
        "leaf_chain": [n.key for n in leaf._chain()],
        "leaf_messages": [m.codec_message_id for m in leaf.extract_messages(leaf.visible_nodes())],
    }


def from_scratch(tree: Tree, leaf: LeafBranch, nav: NavigableBranch, prompts: list[str], runs: list[str],
                 selections: dict[str, str]) -> Any:
    """The same answers with every cache dropped first (then put back: the next wire extends them)."""
    kept = (tree._visible_cache, tree._children_cache, leaf._cache, leaf._chain_cache)
    tree._visible_cache = tree._children_cache = None
    leaf._cache = leaf._chain_cache = None
    try:
        return answers_of(tree, leaf, nav, prompts, runs, selections)
    finally:
        tree._visible_cache, tree._children_cache, leaf._cache, leaf._chain_cache = kept


@settings(max_examples=300, deadline=None)
@given(steps=steps_st, how=st.sampled_from(["live", "history", "shuffled"]), page=st.integers(1, 6),
       seed=st.integers(0, 1000), pin=st.integers(0, 40), choice=st.integers(0, 40),
       refolds=st.lists(st.integers(0, 60), max_size=4), optimistic=st.integers(0, 30))
def test_incremental_structures_equal_a_recomputation_after_every_wire(
    steps: list[tuple[str, int, str]], how: str, page: int, seed: int, pin: int, choice: int, refolds: list[int],
    optimistic: int,
) -> None:
    wires, prompts, answers, runs = conversation(steps)
    tree = Tree(ResponsesCodec)
    decoder = ResponsesCodec.create_decoder()
    applier = WireApplier(tree, decoder)
    leaf = LeafBranch(lambda: tree)
    nav = NavigableBranch(tree)
    pins = [NavigableBranch(tree), RecomputedPins(tree)]  # two views pinning the forks they showed
    anchors = prompts + answers  # a prompt, or an assistant message (a continuation's trigger)
    anchor = anchors[pin % len(anchors)] if anchors else None
    run_id = runs[pin % len(runs)] if runs and pin % 3 == 0 else "r-current"  # often a run not folded yet
    leaf.set_pin(anchor, run_id, None)
    order = arrival(wires, how, page, seed)
    if how == "live" and optimistic < len(order) and order[optimistic]["name"] == "ai-input":
        # the sender's own prompt, folded before its publish returns (no serial), then echoed
        local = order[optimistic]
        headers = local["extras"]["ai"]["transport"]
        tree.apply_message(list(decoder.decode(local).inputs), [], headers, client_id=local["clientId"])
    for i, message in enumerate(order):
        shown = [{n.key: at for at, n in enumerate(view.visible_path())} for view in pins]  # as a view holds them
        applier.apply(message)
        tree.emit_ably_message(message)
        if i in refolds and tree.nodes():
            node = tree.nodes()[i % len(tree.nodes())]
            tree._refold(tree._nodes[node.key])  # a fold no output event announces
        nodes = tree.nodes()
        selections: dict[str, str] = {}
        if nodes and choice % 2:  # a view's selection of one sibling
            pick = nodes[choice % len(nodes)]
            selections[tree.group_root(pick.key)] = pick.key
            nav.select(pick.key)
            if i in refolds:
                for view in pins:
                    view.select(pick.key)
        if i == optimistic:
            for view in pins:
                view.clear()
        for view, before in zip(pins, shown):
            view.on_visible_nodes_changed(before)
        assert pins[0]._forks == pins[1]._forks
        assert [n.key for n in pins[0].visible_path()] == [n.key for n in pins[1].visible_path()]
        cached = answers_of(tree, leaf, nav, prompts, runs, selections)
        assert cached == from_scratch(tree, leaf, nav, prompts, runs, selections), (i, json.dumps(message)[:200])
        assert cached["forked"] == cached["forked_by_definition"]
        assert cached["root_of"] == {k: cached["roots"][k] for k in cached["root_of"]}
        assert cached["replies"] == cached["replies_by_definition"]


# -- edit floods: the prompt groups against their definition ---------------------------------------


def defined_root(tree: Tree, key: str) -> str:
    """A prompt's group root by definition, walked with no memo: ``root(p) = root(t)`` when ``p``
    is a ``fork-of`` of a prompt ``t`` of the same publisher (the ids' owners, by the ownership
    rule) with the same parent, else ``p``; a loop's root is its smallest key."""
    walked: list[str] = []
    while key not in walked:
        walked.append(key)
        entry = tree._nodes[key]
        fork_of = entry.node.fork_of
        target = tree._nodes.get(fork_of) if fork_of is not None else None
        if (
            target is None
            or not isinstance(target.node, InputNode)
            or target.owner != entry.owner
            or target.node.parent != entry.node.parent
        ):
            return key
        key = fork_of
    return min(walked[walked.index(key):])


def defined_answers(tree: Tree, selections: dict[str, str]) -> Any:
    """The groups, roots and visible path from their definitions over the tree's nodes alone."""
    nodes = tree.nodes()
    prompts = [n for n in nodes if isinstance(n, InputNode)]
    roots = {n.key: defined_root(tree, n.key) for n in prompts}
    live = [n for n in prompts if n.key not in tree._superseded]
    groups = {k: [n.key for n in live if roots[n.key] == root] for k, root in roots.items()}
    path: list[str] = []
    chosen: dict[str, str] = {}
    for n in live:
        parent = tree._cmid_to_key.get(n.parent) if n.parent is not None else None
        if parent is not None and parent != n.key and parent not in path:  # a self-parent: a root
            continue
        root, group = roots[n.key], groups[n.key]
        if len(group) > 1:
            pick = chosen.setdefault(root, selections[root] if selections.get(root) in group else group[-1])
            if n.key != pick:
                continue
        path.append(n.key)
    return {"roots": roots, "groups": groups, "path": path,
            "forked": sorted(k for k in roots if len(groups[k]) > 1)}


def kept_answers(tree: Tree, selections: dict[str, str]) -> Any:
    """The same answers as the tree keeps them (read through its caches)."""
    prompts = [n.key for n in tree.nodes() if isinstance(n, InputNode)]
    return {"roots": {k: tree.group_root(k) for k in prompts},
            "groups": {k: [m.key for m in tree.sibling_group(k)] for k in prompts},
            "path": [n.key for n in tree.visible_path(selections)],
            "forked": sorted(tree.forked_prompts())}


edit_steps = st.lists(
    st.tuples(
        st.sampled_from(["new", "new", "new", "impostor"]),  # an impostor takes a prompt's id (maybe first)
        st.sampled_from([None, None, None, "p0", "p1"]),  # the parent: most prompts share one
        st.one_of(st.none(), st.sampled_from(["prev", "first"]), st.integers(0, 14)),  # fork-of (a later id: loops)
        st.sampled_from(["alice", "alice", "mallory"]),
    ),
    min_size=1, max_size=14,
)


def edit_wires(steps: list[tuple[str, str | None, Any, str]], pick: int) -> list[dict[str, Any]]:
    """The prompts of ``steps`` in serial order. A publisher never publishes one id twice (that
    re-publication, newest first, keeps the later serial: an ordering question of its own)."""
    wires = []
    published: set[tuple[str, str]] = set()
    for i, (op, parent, fork, who) in enumerate(steps):
        cmid = f"p{(i + pick) % len(steps)}" if op == "impostor" else f"p{i}"
        if (cmid, who) in published:
            continue
        published.add((cmid, who))
        # an edit of the one before (of nothing yet for the first), of the first, of any id (a later
        # one: loops), itself (half of the time kept: a self-loop), or none
        fork_of = f"p{fork}" if isinstance(fork, int) else {"prev": f"p{i - 1}", "first": "p0"}.get(fork or "")
        wires.append(prompt(i + 1, who, cmid, parent, None if fork_of == cmid and i % 2 else fork_of))
    return wires


@settings(max_examples=200, deadline=None)
@given(steps=edit_steps, how=st.sampled_from(["live", "history", "shuffled"]), page=st.integers(1, 5),
       seed=st.integers(0, 1000), pick=st.integers(0, 20), choice=st.integers(0, 40))
def test_prompt_groups_equal_their_definition_after_every_wire(
    steps: list[tuple[str, str | None, Any, str]], how: str, page: int, seed: int, pick: int, choice: int
) -> None:
    """Edit chains, edits of one prompt, ``fork-of`` loops (and self-edits), another publisher's
    "edit", edits of a prompt folded after them, impostors: after every wire the kept groups, roots,
    forked prompts and visible path (default and with a selection) equal their definitions, and a
    recomputation from scratch; every arrival order ends with the same answers."""
    wires = edit_wires(steps, pick)
    # one selection for the whole fold (so the kept path extends wire after wire): a group root and
    # its member, or ids that are neither (yet), or none
    selections = {f"p{choice % 7}": f"p{choice // 7 % 7}"} if choice % 3 else {}

    def fold(order: list[dict[str, Any]]) -> Tree:
        tree, viewed = Tree(ResponsesCodec), Tree(ResponsesCodec)  # viewed: by two views pinning forks
        appliers = [WireApplier(t, ResponsesCodec.create_decoder()) for t in (tree, viewed)]
        pins, recomputed = NavigableBranch(viewed), RecomputedPins(viewed)
        for message in order:
            shown = [{n.key: at for at, n in enumerate(b.visible_path())} for b in (pins, recomputed)]
            for applier in appliers:
                applier.apply(message)
            assert kept_answers(tree, selections) == defined_answers(tree, selections), json.dumps(message)[:200]
            # one member list a group: each unsuperseded prompt held once (a chain of N edits: N entries)
            held = sum(len(members) for members in tree._children_cache[2].values())
            assert held == sum(isinstance(n, InputNode) and n.key not in tree._superseded for n in tree.nodes())
            kept = (tree._visible_cache, tree._children_cache)
            tree._visible_cache = tree._children_cache = None
            assert kept_answers(tree, selections) == defined_answers(tree, selections)
            tree._visible_cache, tree._children_cache = kept  # the next wire extends the kept caches
            pins.on_visible_nodes_changed(shown[0])
            recomputed.on_visible_nodes_changed(shown[1])
            assert pins._forks == recomputed._forks
            pinned = [n.key for n in pins.visible_path()]  # the path kept across the views' selections
            assert pinned == defined_answers(viewed, pins.selections)["path"]
            assert pinned == [n.key for n in recomputed.visible_path()]
        return tree

    final = kept_answers(fold(arrival(wires, how, page, seed)), selections)
    assert final == kept_answers(fold(list(wires)), selections)  # as live, whatever the arrival order


def test_an_edit_loop_is_one_group_rooted_at_its_smallest_key_in_any_order() -> None:
    # serial order p3, p1, p2 (the smallest key neither first nor last); p0 edits into the loop
    wires = [prompt(1, "alice", "p3", None, "p1"), prompt(2, "alice", "p1", None, "p2"),
             prompt(3, "alice", "p2", None, "p3"), prompt(4, "alice", "p0", None, "p2")]
    for order in (wires, wires[::-1], [wires[1], wires[3], wires[2], wires[0]]):
        tree = Tree(ResponsesCodec)
        applier = WireApplier(tree, ResponsesCodec.create_decoder())
        for message in order:
            applier.apply(message)
        assert {k: tree.group_root(k) for k in ("p0", "p1", "p2", "p3")} == dict.fromkeys(("p0", "p1", "p2", "p3"), "p1")
        assert [n.key for n in tree.sibling_group("p2")] == ["p3", "p1", "p2", "p0"]  # in serial order
        assert [n.key for n in tree.visible_path()] == ["p0"]  # the latest of the group
