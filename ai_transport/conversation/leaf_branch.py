"""The agent's branch source (:class:`LeafBranch`): what an agent run's view shows and the model reads.

The ancestor chain of the run's trigger, with ancestor runs that did not end ``complete`` left out
together with the input they answered (so their dangling calls never reach the model); the current
run is always kept. A regenerate cuts the messages at the regenerated target, and a steer no output
answered yet is moved to the tail of its run (:func:`~.steers.defer_unresponded_steers`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from .nodes import InputNode, Node, RunNode
from .steers import defer_unresponded_steers
from .tree import Tree

__all__ = ["LeafBranch", "reply_shown"]


def reply_shown(replies: list[RunNode], shown: Callable[[], Iterable[Any]]) -> RunNode | None:
    """Of an input's reply runs, the one among the nodes a branch ``shown`` (else the latest)."""
    if len(replies) <= 1:
        return replies[0] if replies else None
    keys = {n.key for n in shown()}
    for r in replies:
        if r.run_id in keys:
            return r
    return replies[-1]


class LeafBranch:
    """Agent branch source: the trigger's ancestor chain, failed ancestor runs left out."""

    def __init__(self, tree_getter: Callable[[], Tree]) -> None:
        self._tree = tree_getter
        self.anchor: str | None = None
        self.run_id: str | None = None
        self.regenerate_target: str | None = None
        self.pinned = False
        #: ``(run_id, codec_message_id) -> bool``: a steer no output answered yet (moved to the tail
        #: of its run's messages, so the model input ends on the user's message).
        self.is_unresponded_steer: Callable[[str, str], bool] | None = None
        self._cache: tuple[Any, list[Node], list[Node], Any] | None = None
        self._chain_cache: tuple[Any, tuple[int, int], list[Node], set[str]] | None = None

    def set_pin(self, anchor: str | None, run_id: str, regenerate_target: str | None) -> None:
        """Pin the view to ``anchor`` (trigger codec-message-id) and the run ``run_id``."""
        self.anchor, self.run_id, self.regenerate_target = anchor, run_id, regenerate_target
        self.pinned = True
        self._cache = self._chain_cache = None

    def _chain(self) -> list[Node]:
        """The trigger's ancestors, root first, then the run (the tree's own list: never mutate it).

        Kept across tree changes that cannot touch it: when the tree only appended nodes since it
        was walked, the chain changes only if one of them is the run, the node holding the anchor
        (unresolved then) or the missing parent of its oldest node; any other structural change
        (a re-parenting, a new mapping of an id a node names, an eviction) walks it again. So a
        live fold costs the agent's view O(1) a wire, not the depth of the conversation."""
        tree = self._tree()
        cached = self._chain_cache
        if cached is not None:
            ident, versions, held, waits = cached
            now = (tree.version, tree.cmid_version)
            if ident == (id(tree), self.anchor, self.run_id) and (
                versions == now or self._untouched(tree, versions[0], waits)
            ):
                if versions != now:
                    self._chain_cache = (ident, now, held, waits)
                return held
        chain: list[Node] = []
        current = tree.get_node_by_codec_message_id(self.anchor) if self.anchor is not None else None
        watched: set[str] = set()
        if current is None and self.anchor is not None:
            watched.add(self.anchor)  # the anchor's node may arrive
        seen: set[str] = set()
        while current is not None and current.key not in seen:
            seen.add(current.key)
            chain.append(current)
            if current.parent is None:
                break
            parent = tree.get_node_by_codec_message_id(current.parent)
            if parent is None:
                watched.add(current.parent)  # the oldest node's parent may arrive
            current = parent
        chain.reverse()
        run = tree.get_run_node(self.run_id) if self.run_id is not None else None
        if run is not None and not any(n is run for n in chain):
            chain.append(run)
        if run is None and self.run_id is not None:
            watched.add(self.run_id)
        self._chain_cache = ((id(tree), self.anchor, self.run_id), (tree.version, tree.cmid_version), chain, watched)
        return chain

    @staticmethod
    def _untouched(tree: Tree, version: int, watched: set[str]) -> bool:
        """Whether the chain walked at tree ``version`` still holds: only appends since, none of
        them a node it waits for, and no id it waits for mapped since (a new message id is mapped
        without a structural change: ``Tree.cmid_version``)."""
        appended = tree._appended_since(version)
        if appended is None:
            return False
        if any(n.key in watched for n in appended):
            return False
        return not any(tree.get_node_by_codec_message_id(w) is not None for w in watched)

    def cache_key(self) -> Any:
        """Changes whenever :meth:`visible_nodes` may change."""
        tree = self._tree()
        return (id(tree), tree.version, tree.status_version, tree.cmid_version, self.anchor, self.run_id, self.pinned)

    def visible_path(self) -> list[Node]:
        """:meth:`visible_nodes` as the branch holds it (never mutate it): the same list object as
        long as the nodes it shows are the same, so a view diffs only the nodes folded since. It
        is rebuilt only when the chain is (:meth:`_chain`) or, after a run status changed
        anywhere, when the status of one of the chain's ancestor runs did."""
        if not self.pinned:
            return []
        tree = self._tree()
        chain = self._chain()
        cached = self._cache
        if cached is not None and cached[2] is chain and cached[0] == tree.status_version:
            return cached[1]
        tail = chain[-1].run_id if chain and isinstance(chain[-1], RunNode) else None
        anchor_node = tree.get_node_by_codec_message_id(self.anchor) if self.anchor is not None else None
        leaf_run = anchor_node.run_id if isinstance(anchor_node, RunNode) else None
        keep = (self.run_id, leaf_run)
        statuses = (leaf_run, tail, tuple(n.status for n in chain if isinstance(n, RunNode) and n.run_id not in keep))
        if cached is not None and cached[2] is chain and cached[3] == statuses:
            self._cache = (tree.status_version, cached[1], chain, statuses)  # the same nodes
            return cached[1]
        dropped: set[str] = set()
        kept: list[Node] = []
        for node in chain:
            if isinstance(node, RunNode) and node.run_id not in keep and node.status != "complete":
                if node.parent is not None:
                    dropped.add(node.parent)
                continue
            kept.append(node)
        result = [n for n in kept if not (isinstance(n, InputNode) and n.codec_message_id in dropped)]
        if cached is not None and len(result) == len(cached[1]) and all(x is y for x, y in zip(result, cached[1])):
            result = cached[1]  # walked again, the same nodes: the same list (the view's fast diff)
        self._cache = (tree.status_version, result, chain, statuses)
        return result

    def visible_nodes(self) -> list[Node]:
        """The chain minus incomplete ancestor runs and the inputs they answered."""
        return list(self.visible_path())

    def extract_messages(self, nodes: list[Node]) -> list[Any]:
        """Messages in node order, cut before the regenerate target (then, unlike 0.8.0, the run's
        own messages: a regenerate of a message that is not the first of its run cuts inside an
        ancestor run, and the agent should still read what it has answered)."""
        tree = self._tree()
        out: list[Any] = []
        for node in nodes:
            for m in self._node_messages(tree, node):
                if self.regenerate_target is not None and m.codec_message_id == self.regenerate_target:
                    run = tree.get_run_node(self.run_id) if self.run_id is not None else None
                    if run is not None and run is not node and any(n is run for n in nodes):
                        out.extend(self._node_messages(tree, run))
                    return out
                out.append(m)
        return out

    def _node_messages(self, tree: Tree, node: Node) -> list[Any]:
        messages = tree.messages_of(node)
        steer = self.is_unresponded_steer
        if steer is not None and isinstance(node, RunNode):
            messages = defer_unresponded_steers(messages, functools.partial(steer, node.run_id))
        return messages

    def selected_reply_run(self, input_cmid: str) -> RunNode | None:
        """The reply run of ``input_cmid`` on this branch (else the latest)."""
        return reply_shown(self._tree().reply_runs(input_cmid), self._chain)
