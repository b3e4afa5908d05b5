"""Branch navigation of a client view (``NavigableBranchSource`` / ``BranchHandle`` of 0.8.0).

A conversation forks where a user prompt was edited (``fork-of`` siblings of an input) or an
assistant message regenerated (sibling reply runs, or — for a message that is not the first of its
run — *non-head* regenerator runs that replace that message and the rest of its run). Branch points
are anchored at messages: :meth:`ClientView.branch_selection(codec_message_id)
<ai_transport.sessions.client.ClientView.branch_selection>` returns a :class:`BranchHandle` whose
``siblings`` are the alternative *messages* at that point (oldest first), ``index`` the one shown,
and ``select(index)`` (clamped) shows another.

Selection rules as 0.8.0: every fork shows its latest member unless selected; your own ``edit``
(any send with ``fork_of``) switches to the new prompt at once; your own ``regenerate`` switches to
the new reply as soon as it arrives; an explicit ``select`` wins over both; and a prompt fork this
view already showed stays pinned when someone else's edit adds a sibling.
"""

from __future__ import annotations

import itertools
from collections import UserDict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from .nodes import InputNode, Node, RunNode
from .selections import Selections
from .tree import Tree

__all__ = ["BranchHandle", "NavigableBranch", "collect_messages"]


@dataclass
class BranchHandle:
    """The state of one branch point (``BranchHandle`` of 0.8.0).

    ``siblings``: the alternative messages (openai messages), oldest first — ``[message]`` for a
    message that is not a branch point, ``[]`` for an unknown id. ``index``: the one shown.
    ``selected``: ``siblings[index]`` (None when empty). ``select(index)`` shows sibling ``index``
    (clamped to the range; a no-op when the message is not a branch point).
    """

    has_siblings: bool
    siblings: list[Any]
    index: int
    selected: Any
    _select: Callable[[int], None] = field(repr=False, compare=False)

    def select(self, index: int) -> None:
        """Show sibling ``index`` (clamped to ``[0, len(siblings) - 1]``)."""
        self._select(index)


@dataclass(frozen=True)
class _Member:
    key: str  # node key (input cmid or run id)
    head: str  # codec-message-id representing the member


@dataclass(frozen=True)
class _Point:
    kind: str  # "fork-of" | "regen" | "non-head-regen"
    root: str
    members: list[_Member]


class _Intents(UserDict[str, tuple[str, str]]):
    """Group root -> ``(kind, key)`` selection intents of one kind (a :class:`NavigableBranch`'s
    prompt forks or reply regenerates): every write and delete calls ``changed(root)``, so the
    branch's :class:`~.selections.Selections` follow whatever writes them (O(1) a change)."""

    def __init__(self, changed: Callable[[str], None]) -> None:
        self._changed = changed
        super().__init__()

    def __setitem__(self, root: str, intent: tuple[str, str]) -> None:
        self.data[root] = intent
        self._changed(root)

    def __delitem__(self, root: str) -> None:
        del self.data[root]
        self._changed(root)


def collect_messages(
    nodes: list[Node],
    messages_of: Callable[[Node], list[Any]],
    regenerators: Callable[[str, str], list[RunNode]],
    selected: Callable[[str, str, list[RunNode]], str],
) -> list[Any]:
    """Flatten visible nodes to messages, substituting non-head regenerates (``collectMessages`` of
    0.8.0): at a run's message ``M`` (not its first) that has regenerator runs, the selected
    regenerator replaces ``M`` and the rest of the run (recursively)."""

    def emit(node: Node, out: list[Any]) -> None:
        own = messages_of(node)
        if not isinstance(node, RunNode):
            out.extend(own)
            return
        for i, m in enumerate(own):
            if i > 0:
                regens = regenerators(m.codec_message_id, own[i - 1].codec_message_id)
                if regens:
                    key = selected(m.codec_message_id, node.run_id, regens)
                    if key != node.run_id:
                        chosen = next((r for r in regens if r.run_id == key), None)
                        if chosen is not None:
                            emit(chosen, out)
                            return
            out.append(m)

    skip: set[str] = set()
    for node in nodes:
        if isinstance(node, RunNode):
            own = messages_of(node)
            for i in range(1, len(own)):
                for r in regenerators(own[i].codec_message_id, own[i - 1].codec_message_id):
                    skip.add(r.run_id)
    out: list[Any] = []
    for node in nodes:
        if isinstance(node, RunNode) and node.run_id in skip:
            continue
        emit(node, out)
    return out


class NavigableBranch:
    """Client branch source: the tree's selected path plus the branch-selection state."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        #: What :attr:`selections` answers, kept as the intents below change (never rebuilt a read).
        self._selections = Selections()
        self._forks = _Intents(self._resolve)  # group root -> (user|auto|pinned, input key)
        self._regens = _Intents(self._resolve)  # group root -> (user|auto|pending, run id | carrier)
        self._non_head: dict[str, tuple[str, str]] = {}  # anchor cmid -> (user|auto|pending, run id | carrier)
        self._version = 0
        #: The tree's forked index last read and how much of it (:meth:`on_visible_nodes_changed`),
        #: and the forked prompts read from it whose group is not pinned yet.
        self._fork_seen: tuple[dict[str, None], int] | None = None
        self._unpinned: dict[str, None] = {}

    # -- branch source -------------------------------------------------------------------------

    @property
    def selections(self) -> Selections:
        """Group root -> selected node key, as the tree's ``visible_nodes`` takes them (read-only:
        kept up to date as the selections change, O(1) a change, so a view that pinned N forks
        does not rebuild N entries a read)."""
        return self._selections

    def _resolve(self, root: str) -> None:
        """Bring ``selections[root]`` in line with the intents: a regenerate's selection (unless
        pending) over a prompt fork's."""
        regen = self._regens.data.get(root)
        if regen is not None and regen[0] != "pending":
            self._selections.set(root, regen[1])
        else:
            fork = self._forks.data.get(root)
            self._selections.set(root, fork[1] if fork is not None else None)

    def cache_key(self) -> Any:
        """Changes whenever :meth:`visible_nodes` may change."""
        return (id(self.tree), self.tree.version, self._version)

    def visible_nodes(self) -> list[Node]:
        """The nodes on the selected path."""
        return self.tree.visible_nodes(self.selections)

    def visible_path(self) -> list[Node]:
        """:meth:`visible_nodes` as the tree holds it (:meth:`Tree.visible_path`: never mutate it)."""
        return self.tree.visible_path(self.selections)

    def extract_messages(self, nodes: list[Node]) -> list[Any]:
        """The messages of ``nodes``, non-head regenerates substituted."""
        return collect_messages(nodes, self.tree.messages_of, self._regenerators, self._selected_non_head)

    def selected_reply_run(self, input_cmid: str) -> RunNode | None:
        """The reply run of ``input_cmid`` this view shows (the selected one, else the latest)."""
        replies = self.tree.reply_runs(input_cmid)
        if len(replies) <= 1:
            return replies[0] if replies else None
        sel = self._regens.get(self.tree.group_root(replies[0].run_id))
        if sel is not None and sel[0] != "pending":
            for r in replies:
                if r.run_id == sel[1]:
                    return r
        return replies[-1]

    def on_visible_nodes_changed(self, previous: Collection[str]) -> None:
        """The tree changed: pin prompt forks this view showed, roll pending regenerates forward.

        ``previous`` holds the keys the view showed (a dict or set: O(1) lookups). Only the forked
        prompts whose group is not pinned yet are checked against it; they are read from the
        tree's forked index as it grows (:meth:`Tree.forked_index`), and leave once their group is
        pinned, so a view with N prompts and their edits shown costs O(1) a change, not N."""
        index = self.tree.forked_index()
        seen = self._fork_seen
        if seen is None or seen[0] is not index:  # a rebuild of the tree's groups: read it all again
            self._unpinned = dict(index)
        elif len(index) > seen[1]:
            # the keys added since, read from the index's newest end: O(them), never a skip over
            # the ones read already (an edit flood grows the index by one a wire)
            added = list(itertools.islice(reversed(index), len(index) - seen[1]))
            self._unpinned.update(dict.fromkeys(reversed(added)))
        self._fork_seen = (index, len(index))
        if self._unpinned:
            if not isinstance(previous, (set, frozenset, dict)):
                previous = {k: i for i, k in enumerate(previous)}
            shown: list[tuple[Any, str, str]] = []
            for key in list(self._unpinned):
                root = self.tree.root_of(key)
                if root in self._forks:
                    del self._unpinned[key]  # pinned (or selected): never again
                elif key in previous:
                    at = previous.get(key) if isinstance(previous, dict) else None
                    shown.append((at if isinstance(at, int) else 0, key, root))
            shown.sort(key=lambda t: t[0])  # two members shown (a prompt and its edit, just grouped): the first
            for _, key, root in shown:
                if root not in self._forks:
                    self._forks[root] = ("pinned", key)
                    self._version += 1
                self._unpinned.pop(key, None)
        self._resolve_pending()

    # -- selection -------------------------------------------------------------------------------

    def select(self, node_key: str) -> None:
        """Show the sibling ``node_key`` (a run id or input codec-message-id) at its fork."""
        node = self.tree.get_node(node_key)
        root = self.tree.group_root(node_key)
        (self._regens if isinstance(node, RunNode) else self._forks)[root] = ("user", node_key)
        self._version += 1

    def branch_selection(self, codec_message_id: str, select: Callable[[int], None]) -> BranchHandle:
        """The :class:`BranchHandle` anchored at ``codec_message_id``."""
        point = self._point(codec_message_id)
        if point is not None:
            siblings = [m for m in (self._message(member.head) for member in point.members) if m is not None]
            if siblings:
                index = max(0, min(self._selected_index(point), len(siblings) - 1))
                return BranchHandle(len(siblings) > 1, siblings, index, siblings[index], select)
        found = self._message(codec_message_id)
        if found is not None:
            return BranchHandle(False, [found], 0, found, select)
        return BranchHandle(False, [], 0, None, select)

    def record_selection(self, codec_message_id: str, index: int) -> bool:
        """Select member ``index`` (clamped) of the branch point at ``codec_message_id``; False when
        it is not a branch point."""
        point = self._point(codec_message_id)
        if point is None or not point.members:
            return False
        member = point.members[max(0, min(index, len(point.members) - 1))]
        target = {"fork-of": self._forks, "non-head-regen": self._non_head}.get(point.kind, self._regens)
        target[point.root] = ("user", member.key)
        self._version += 1
        return True

    def apply_fork_auto_select(self, input_codec_message_id: str) -> None:
        """Your own edit: show the new prompt."""
        self._forks[self.tree.group_root(input_codec_message_id)] = ("auto", input_codec_message_id)
        self._version += 1

    def apply_regenerate_auto_select(self, carrier: str, anchor: str) -> bool:
        """Your own regenerate of ``anchor``: show the new reply once it arrives."""
        owner = self.tree.get_node_by_codec_message_id(anchor)
        if not isinstance(owner, RunNode):
            return False
        own = self.tree.messages_of(owner)
        if not own or own[0].codec_message_id != anchor:
            self._non_head[anchor] = ("pending", carrier)
        else:
            self._regens[self.tree.group_root(owner.run_id)] = ("pending", carrier)
        self._version += 1
        self._resolve_pending()
        return True

    def clear(self) -> None:
        """Forget every selection."""
        self._fork_seen = None  # every forked prompt may be pinned again
        self._forks.clear()
        self._regens.clear()
        self._non_head.clear()
        self._version += 1

    # -- internals -------------------------------------------------------------------------------

    def _message(self, codec_message_id: str) -> Any:
        owner = self.tree.get_node_by_codec_message_id(codec_message_id)
        if owner is None:
            return None
        for m in self.tree.messages_of(owner):
            if m.codec_message_id == codec_message_id:
                return m.message
        return None

    def _regenerators(self, target: str, predecessor: str) -> list[RunNode]:
        runs = [r for r in self.tree.reply_runs(predecessor) if r.regenerates == target]
        return sorted(runs, key=lambda r: r.start_serial or "\uffff")

    def _selected_non_head(self, target: str, owner_run_id: str, regens: list[RunNode]) -> str:
        sel = self._non_head.get(target)
        if (
            sel is not None
            and sel[0] != "pending"
            and (sel[1] == owner_run_id or any(r.run_id == sel[1] for r in regens))
        ):
            return sel[1]
        return regens[-1].run_id if regens else owner_run_id

    def _resolve_pending(self) -> None:
        for root, (kind, _) in list(self._regens.items()):
            if kind == "user":
                continue
            group = [n for n in self.tree.sibling_group(root) if isinstance(n, RunNode)]
            if len(group) > 1 and self._regens[root] != ("auto", group[-1].run_id):
                self._regens[root] = ("auto", group[-1].run_id)
                self._version += 1
        for anchor, (kind, _) in list(self._non_head.items()):
            if kind == "user":
                continue
            predecessor = self._predecessor(anchor)
            if predecessor is None:
                continue
            regens = self._regenerators(anchor, predecessor)
            if regens and self._non_head[anchor] != ("auto", regens[-1].run_id):
                self._non_head[anchor] = ("auto", regens[-1].run_id)
                self._version += 1

    def _predecessor(self, anchor: str) -> str | None:
        owner = self.tree.get_node_by_codec_message_id(anchor)
        if not isinstance(owner, RunNode):
            return None
        own = [m.codec_message_id for m in self.tree.messages_of(owner)]
        idx = own.index(anchor) if anchor in own else -1
        return own[idx - 1] if idx > 0 else None

    def _selected_index(self, point: _Point) -> int:
        last = len(point.members) - 1
        sel = {"fork-of": self._forks, "non-head-regen": self._non_head}.get(point.kind, self._regens).get(
            point.root
        )
        if sel is None or sel[0] == "pending":
            return last
        for i, member in enumerate(point.members):
            if member.key == sel[1]:
                return i
        return last

    def _heads(self, nodes: list[Node]) -> list[_Member]:
        members = []
        for n in nodes:
            own = self.tree.messages_of(n)
            if own:
                members.append(_Member(n.key, own[0].codec_message_id))
        return members

    def _point(self, codec_message_id: str) -> _Point | None:
        tree = self.tree
        node = tree.get_node_by_codec_message_id(codec_message_id)
        if node is None:
            return None
        if isinstance(node, InputNode):
            siblings = tree.sibling_group(node.key)
            if len(siblings) > 1:
                return _Point("fork-of", tree.group_root(node.key), self._heads(siblings))
            return None
        assert isinstance(node, RunNode)
        own = tree.messages_of(node)
        non_head = self._non_head_point(node, own, codec_message_id)
        if non_head is not None:
            return non_head
        siblings = tree.sibling_group(node.run_id)
        if len(siblings) > 1 and own and own[0].codec_message_id == codec_message_id:
            return _Point("regen", tree.group_root(node.run_id), self._heads(siblings))
        return None

    def _non_head_point(self, node: RunNode, own: list[Any], cmid: str) -> _Point | None:
        is_head = bool(own) and own[0].codec_message_id == cmid
        if is_head and node.regenerates is not None:
            anchor = node.regenerates
            owner = self.tree.get_node_by_codec_message_id(anchor)
            predecessor = self._predecessor(anchor)
            if isinstance(owner, RunNode) and predecessor is not None:
                return self._non_head_group(anchor, owner.run_id, predecessor)
            return None
        ids = [m.codec_message_id for m in own]
        idx = ids.index(cmid) if cmid in ids else -1
        if idx <= 0:
            return None
        return self._non_head_group(cmid, node.run_id, ids[idx - 1])

    def _non_head_group(self, anchor: str, owner_run_id: str, predecessor: str) -> _Point | None:
        regens = self._regenerators(anchor, predecessor)
        if not regens:
            return None
        members = [_Member(owner_run_id, anchor)]
        for r in regens:
            own = self.tree.messages_of(r)
            if own:
                members.append(_Member(r.run_id, own[0].codec_message_id))
        return _Point("non-head-regen", anchor, members)
