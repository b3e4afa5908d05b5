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
        self._cache: tuple[Any, list[Node]] | None = None

    def set_pin(self, anchor: str | None, run_id: str, regenerate_target: str | None) -> None:
        """Pin the view to ``anchor`` (trigger codec-message-id) and the run ``run_id``."""
        self.anchor, self.run_id, self.regenerate_target = anchor, run_id, regenerate_target
        self.pinned = True
        self._cache = None

    def _chain(self) -> list[Node]:
        tree = self._tree()
        chain: list[Node] = []
        current = tree.get_node_by_codec_message_id(self.anchor) if self.anchor is not None else None
        seen: set[str] = set()
        while current is not None and current.key not in seen:
            seen.add(current.key)
            chain.insert(0, current)
            if current.parent is None:
                break
            current = tree.get_node_by_codec_message_id(current.parent)
        run = tree.get_run_node(self.run_id) if self.run_id is not None else None
        if run is not None and not any(n is run for n in chain):
            chain.append(run)
        return chain

    def cache_key(self) -> Any:
        """Changes whenever :meth:`visible_nodes` may change."""
        tree = self._tree()
        return (id(tree), tree.version, tree.status_version, self.anchor, self.run_id, self.pinned)

    def visible_nodes(self) -> list[Node]:
        """The chain minus incomplete ancestor runs and the inputs they answered."""
        if not self.pinned:
            return []
        tree = self._tree()
        key = self.cache_key()
        if self._cache is not None and self._cache[0] == key:
            return list(self._cache[1])
        anchor_node = tree.get_node_by_codec_message_id(self.anchor) if self.anchor is not None else None
        leaf_run = anchor_node.run_id if isinstance(anchor_node, RunNode) else None
        dropped: set[str] = set()
        kept: list[Node] = []
        for node in self._chain():
            if (
                isinstance(node, RunNode)
                and node.run_id not in (self.run_id, leaf_run)
                and node.status != "complete"
            ):
                if node.parent is not None:
                    dropped.add(node.parent)
                continue
            kept.append(node)
        result = [n for n in kept if not (isinstance(n, InputNode) and n.codec_message_id in dropped)]
        self._cache = (key, result)
        return list(result)

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
