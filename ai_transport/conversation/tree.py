"""The conversation tree: every wire of a session folded into input nodes and run nodes.

Mirrors ``@ably/ai-transport@0.8.0``'s ``DefaultTree`` (``src/core/transport/tree.ts``) for what a
linear conversation, regenerates and edits need:

* An ``ai-input`` without ``run-id`` whose transport ``role`` is ``user`` makes an
  :class:`InputNode` keyed by its ``codec-message-id`` (the user prompt). A run-less input with
  another role is a client tool-result *fork* (a run keyed by the codec-message-id until the
  agent's ``ai-run-start`` names the real run id).
* Every wire with a ``run-id`` (outputs, continuation inputs such as approvals and tool results)
  folds into the :class:`RunNode` of that run. Each node owns a codec projection (``codec.init()``)
  folded with ``codec.fold`` in serial order; inputs fold before outputs.
* A per-node wire log keyed by serial drops re-deliveries at or below the logged version (and any
  re-delivery of a discrete wire) and refolds the node from ``init()`` when a wire lands out of
  serial order (history pages arrive newest-first).
* Lifecycle messages set the run status (``active``/``suspended``/``complete``/``cancelled``/
  ``error``) and the step read model.

Nodes sort by serial (start serial for runs); :meth:`Tree.visible_nodes` walks them, keeping a
node only when its parent is on the current path and, among siblings (same parent: regenerates
of a reply, edits via ``fork-of``), the selected one — the latest unless a selection says
otherwise. Improvements over 0.8.0 that keep its live behaviour: a lifecycle event older than the
one that set a run's status does not override it, a step-end or run-end may create the run node, and
the earliest serial seen orders a run (all for history, which arrives newest page first); a run
whose prompt was never seen (mid-run join without history) is shown as a root instead of hidden.
Step attempts (as 0.8.0): an output carrying ``step-id`` and ``step-start-serial`` is attributed to
that attempt of the step; only the step's canonical attempt (the ``ai-step-start`` with the latest
serial) is folded, and a later attempt refolds the run without the superseded one, so a retried
step replaces its failed attempt in every view, in any arrival order (an older attempt's step-start
arriving first gates the later attempt's output only until the later step-start refolds it). The reorder-window log sweep is
:mod:`.retention`; branch selection (a view's state, not the tree's) is :mod:`.branch`.
"""


from __future__ import annotations

import bisect
import inspect
import itertools
import logging
import operator
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import Any

from .._shapes import MAPPING
from ..channels.channel import action_name
from ..codec.headers import transport_headers
from ..errors import quoted
from ..lease import LEASE_NAME, LeaseWire, Poison, parse_lease_wire
from .authority import MUTATIONS, author_of
from .changes import REPLACED, TREE_CHANGED, OutputChanged, Report, WireFolded, discard
from .fence import Fence
from .lifecycle import (
    EVENT_AI_INPUT,
    EVENT_AI_OUTPUT,
    H_CODEC_MESSAGE_ID,
    H_EVENT_ID,
    H_FORK_OF,
    H_INPUT_CLIENT_ID,
    H_INPUT_CODEC_MESSAGE_ID,
    H_INVOCATION_ID,
    H_MSG_REGENERATE,
    H_PARENT,
    H_ROLE,
    H_RUN_CLIENT_ID,
    H_RUN_ID,
    H_STEER_CODEC_MESSAGE_IDS,
    H_STEP_ID,
    H_STEP_START_SERIAL,
    H_STREAM,
    H_SUPERSEDES,
    RUN_LIFECYCLE_NAMES,
    STEP_LIFECYCLE_NAMES,
    RunLifecycleEvent,
    parse_run_lifecycle,
)
from .nodes import CodecEvent, Emitter, InputNode, Node, RunNode, WireLog, _Internal, _sort_serial
from .ownership import KIND_CODEC_MESSAGE_ID, KIND_EVENT_ID, OwnershipLedger, claimed_at
from .retention import LogRetention
from .selections import Selections
from .steers import parse_steer_stamp
from .tree_lifecycle import LifecycleFold
from .tree_owners import Replay, TreeOwnership

__all__ = ["CodecEvent", "Emitter", "InputNode", "RunNode", "Tree", "WireApplier", "WireLog"]

logger = logging.getLogger("ai_transport.conversation.tree")


# ---------------------------------------------------------------------------------------------
# Tree


def _group_of(
    node: Node, runs: Mapping[str | None, list[Node]], inputs: Mapping[str, list[Node]], roots: Mapping[str, str]
) -> tuple[str, Sequence[Node]]:
    """``(group root, members)`` of ``node`` in :meth:`Tree._groups`' tables: a run's group is the
    runs answering its parent, a prompt's the prompts of its group root."""
    if isinstance(node, RunNode):
        group = runs.get(node.parent, ())
        return (group[0].key if group else node.key), group
    root = roots.get(node.key, node.key)
    return root, inputs.get(root, ())


def _selection_stamp(selections: Mapping[str, str]) -> Any:
    """What names ``selections`` in :meth:`Tree.visible_path`'s cache: ``(ident, version, the
    object)`` of a :class:`~.selections.Selections` (O(1); its ident is unique, so two stamps with
    the same ident and version are the same object and contents), else the frozen items of a plain
    mapping (O(the selections), hashed once)."""
    if isinstance(selections, Selections):
        return (selections.ident, selections.version, selections)
    return frozenset(selections.items())


def _selection_changes(before: Any, selections: Mapping[str, str], chosen: Any) -> dict[str, str | None] | None:
    """The roots whose selection differs between the stamp ``before`` and ``selections`` (stamped
    ``chosen``), each with its value then (None: none); None when that cannot be told (the
    selections ``before`` named changed beyond their journal since)."""
    if isinstance(before, tuple) and isinstance(chosen, tuple) and before[0] == chosen[0]:
        return selections.changed_since(before[1]) if isinstance(selections, Selections) else None
    if isinstance(before, frozenset):
        then: dict[str, str] | None = dict(before)
    else:
        then = before[2].as_of(before[1])
    if then is None:
        return None
    now = selections.contents() if isinstance(selections, Selections) else dict(selections)
    # the pairs in one and not the other (a set operation: the unchanged ones never reach Python)
    return {root: then.get(root) for root, _ in then.items() ^ now.items()}


def _takes_author(codec: Any) -> bool:
    """Whether ``codec.fold`` accepts the ``author`` keyword."""
    try:
        params = inspect.signature(codec.fold).parameters
    except (AttributeError, TypeError, ValueError):  # no fold (a bare tree), or one with no signature
        return False
    return "author" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


#: The version of an entry of :attr:`Tree._appends`, and the key an entry of the order was sorted by
#: (C-level getters: a binary search calls them for every probe).
_append_version: Callable[[tuple[int, Node]], int] = operator.itemgetter(0)
_stored_key: Callable[[_Internal], tuple[int, str, int]] = operator.attrgetter("sort_key")


def _codec_events(inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> list[CodecEvent]:
    """A decoded wire's events in fold order: its inputs, then its outputs."""
    if not inputs:
        return list(zip(repeat("output"), outputs))
    events: list[CodecEvent] = list(zip(repeat("input"), inputs))
    if outputs:
        events += zip(repeat("output"), outputs)
    return events


#: Folds a tree remembers for :meth:`Tree.folded_since` (a view whose snapshot is older diffs in full).
FOLD_JOURNAL = 1024


class Tree(LifecycleFold, TreeOwnership):
    """All nodes of one session and their projections.

    No event emitter: every fold reports what it changed through ``report`` (its core's change
    queue, :mod:`.changes`), in order: :class:`~.changes.TreeChanged` (structure),
    :class:`~.changes.OutputChanged` (a fold into a node), :class:`~.changes.RunFolded` (a run
    lifecycle event), :class:`~.changes.WireFolded` (every wire, :meth:`emit_ably_message`),
    :class:`~.changes.Replaced` (:meth:`adopt`). A wire the tree will not fold goes to
    ``refused`` (``(message, why)``).
    """

    def __init__(
        self,
        codec: Any,
        report: Report | None = None,
        refused: Callable[[Mapping[str, Any], str], None] | None = None,
    ) -> None:
        self._codec = codec
        #: Whether the codec's fold takes ``author`` (both built-in codecs do; a custom one may not).
        self._fold_author = _takes_author(codec)
        #: Where the tree reports what each fold changed (:mod:`.changes`; its core's queue).
        self._report: Report = report if report is not None else discard
        #: Called with ``(message, why)`` for every wire the tree refuses (the core counts it).
        self._on_refused: Callable[[Mapping[str, Any], str], None] = refused if refused is not None else _ignore_refused
        self._nodes: dict[str, _Internal] = {}
        self._cmid_to_key: dict[str, str] = {}
        self._sorted: list[_Internal] = []
        #: Where :meth:`_insert_sorted` placed the last node (tried first for the next one).
        self._last_insert = -1
        #: Superseded node key -> the client that superseded it (honoured only for its own nodes).
        self._supersedes: dict[str, str | None] = {}
        self._superseded: set[str] = set()
        self._wire: Mapping[str, Any] = {}
        self._run_message_ids: set[str] = set()
        self._client: str | None = None
        #: Who owns each identifier a wire claims (:mod:`.ownership`): prompt / fork codec-message-ids,
        #: event-ids, run ids, step ids.
        self.owners = OwnershipLedger()
        #: Judge run ids and step ids by ownership too: set by a session that admits run wires from
        #: trusted agent identities only (:mod:`.admission`), so two of them cannot share a run. A tree
        #: that folds every publisher's outputs (an untrusted view, as 0.8.0's) shows them as 0.8.0 does.
        self.judge_runs = False
        #: The fork seeds' codec-message-ids a read refused as copies of no agent message (each
        #: reported once: :meth:`_vouched`).
        self._seeds_refused: set[Any] = set()
        #: Folds a change of owner let count, made at the end of the current fold.
        self._replays: list[Replay] = []
        self._replaying = False
        #: A node changed owner during the current fold (announced when it ends).
        self._moved = False
        #: Nodes whose owner lost their id to an older wire, by (key, that owner) (:mod:`.tree_owners`).
        self._set_aside: dict[tuple[str, str | None], tuple[_Internal, list[str]]] = {}
        self._seq = itertools.count()
        #: Bumped on every structural change (nodes, order, parents, supersedes).
        self.version = 0
        #: Bumped on every run status change.
        self.status_version = 0
        self._visible_cache: tuple[Any, list[Node], dict[str, int]] | None = None
        #: Nodes appended at the end of the order since ``_appends_base`` (each with the version its
        #: insert made): the only structural changes since then, so caches of a version at or after
        #: the base extend by these instead of walking the whole tree (a live fold is O(1) a wire).
        self._appends: list[tuple[int, Node]] = []
        self._appends_base = 0
        self._children_cache: Any = None
        #: Every key or codec-message-id a node names as its ``parent`` or ``fork-of`` (kept on
        #: insert and on every re-parenting; never shrinks, so it errs on the structural side): a
        #: message id mapped to its node for the first time changes the tree's shape only when a
        #: node names it, else the caches stay valid (a run's new message in a live fold is O(1)).
        self._referenced: set[str] = set()
        #: Bumped when a message id is mapped to its node without a structural change (a cache
        #: that resolved an id still unmapped keys on it, see :class:`~.leaf_branch.LeafBranch`).
        self.cmid_version = 0
        #: The nodes folded most recently (:meth:`_record_and_fold`, :meth:`_refold`), so a view diffs
        #: only those against its snapshot (:meth:`folded_since`); ``_folds`` counts every fold.
        self._folded: deque[Node] = deque(maxlen=FOLD_JOURNAL)
        self._folds = 0
        #: Event-log retention (the reorder window, :mod:`.retention`).
        self.retention = LogRetention()
        self.retention.before_sweep = self._settle_stale
        #: Lease wires, and the late outputs of superseded holders they refuse (:mod:`.fence`).
        self.fence = Fence()
        self._fence_reported: set[str] = set()
        #: True while one history page folds (:meth:`~.core.Conversation.receive_history_page`):
        #: what lease wires change of the fenced outputs is settled once, by :meth:`settle_fences`,
        #: not per wire (a page of a contested run's older renewals costs one refold of its keys),
        #: and a node an older wire lands on is refolded once it is read, not per wire (:meth:`_stale`).
        self.page_folding = False
        #: Whether :meth:`emit_ably_message` reports :class:`~.changes.WireFolded` (the core turns
        #: it off while a history page folds with that change muted: one record a wire less).
        self.wires_reported = True
        #: Nodes whose projection waits for a refold (an older wire landed on them while a page
        #: folded): refolded on their first read (:meth:`messages_of`), or before their log is
        #: swept. A run spread over many pages, read newest page first, was refolded from its start
        #: once per older wire (1,600 messages of one run: ~45 s); now once.
        self._stale: dict[str, _Internal] = {}
        #: Per run whose lease wires landed since the last settle: whether each of its output
        #: serials was fenced when last judged (its fold follows that judgement).
        self._fence_pending: dict[str, dict[str, bool]] = {}
        #: Runs whose lease wires a history page folded (:attr:`page_folding`): what they change of
        #: the fenced outputs is settled once, when the run is read (:meth:`_settle_stale`), not per
        #: page (judging it folds the holder rule of the run's keys from their start: a tenure of n
        #: renewals read newest page first cost n / page refolds of it).
        self._fence_touched: set[str] = set()
        #: Nodes whose fenced outputs a history page left to their first read to report (each
        #: stale then too, :attr:`_stale`, when the page's lease wires moved its fences: its refold
        #: reports them), or to :meth:`settle_deferred_fences`.
        self._fence_deferred: set[str] = set()

    def adopt(self, shadow: Tree) -> None:
        """Take every node and index of ``shadow`` in one step (the refold after a loss of channel
        continuity, :mod:`.core`): this object, its listeners and every reference to it stay valid,
        versions keep increasing, :class:`~.changes.Replaced` is reported (views then update once)."""
        version = max(self.version, shadow.version) + 1
        status_version = max(self.status_version, shadow.status_version) + 1
        report, refused, state = self._report, self._on_refused, vars(self)
        state.clear()
        state.update(vars(shadow))
        self._report, self._on_refused = report, refused
        self.retention.before_sweep = self._settle_stale  # (the shadow's retention, now this tree's)
        self.version, self.status_version = version, status_version
        self._visible_cache = self._children_cache = None
        self._appends, self._appends_base = [], self.version
        self._folded, self._folds = deque(maxlen=FOLD_JOURNAL), 0
        self._report(REPLACED)

    def _changed(self) -> bool:
        """A structural change: caches of earlier versions are rebuilt, never extended."""
        self.version += 1
        self._appends_base = self.version
        self._appends.clear()
        return True

    # -- queries -----------------------------------------------------------------------------

    def get_node(self, key: str) -> Node | None:
        """The node with key ``key`` (run id or input codec-message-id)."""
        entry = self._nodes.get(key)
        return entry.node if entry is not None else None

    def get_run_node(self, run_id: str) -> RunNode | None:
        """The run node of ``run_id``."""
        node = self.get_node(run_id)
        return node if isinstance(node, RunNode) else None

    def get_node_by_codec_message_id(self, codec_message_id: str) -> Node | None:
        """The node that holds the message ``codec_message_id`` (an input node or a run)."""
        key = self._cmid_to_key.get(codec_message_id)
        return self.get_node(key) if key is not None else None

    def prompt_owner(self, codec_message_id: str) -> tuple[str | None] | None:
        """``(clientId,)`` of the publisher that owns the prompt ``codec_message_id`` (its first
        publisher in serial order, of the wires folded so far), or None when no prompt holds it."""
        entry = self._nodes.get(codec_message_id)
        if entry is None or not isinstance(entry.node, InputNode):
            return None
        return (entry.owner,)

    def find_message_by_event_id(self, event_id: str) -> dict[str, Any] | None:
        """The wire that owns the transport ``event-id`` ``event_id``: of those folded so far, the
        first in channel serial order (:meth:`claim_event_id`). Paging history newest first, an
        older claim may still be unread: see ``AgentRun`` for how a worker settles its trigger."""
        claim = self.owners.first(KIND_EVENT_ID, event_id)
        return claim.payload if claim is not None else None

    def nodes(self) -> list[Node]:
        """Every node in sort order (serial; optimistic ones last)."""
        return [e.node for e in self._sorted]

    def reply_runs(self, input_codec_message_id: str) -> list[RunNode]:
        """Runs whose parent is ``input_codec_message_id`` (reply + regenerates), oldest first."""
        runs = self._groups()[0].get(input_codec_message_id, ())  # superseded runs left out
        return [n for n in runs if isinstance(n, RunNode)]

    def messages_of(self, node: Node) -> list[Any]:
        """``codec.get_messages`` of the node's projection (cached until the node folds again)."""
        if self._fence_deferred and node.key in self._fence_deferred:  # (refusals a page left to this read)
            entry = self._nodes.get(node.key)
            if entry is not None and entry.node is node:
                self._settle_deferred_fence(entry)
        cached = node.messages_cache
        if cached is not None and cached[0] == node.fold_version:
            return cached[1]
        if self._stale:
            stale = self._stale.get(node.key)
            if stale is not None and stale.node is node:
                self._settle_stale(stale)
        messages = list(self._codec.get_messages(node.projection))
        seeded = getattr(node.projection, "seeded", None)
        if seeded and self.judge_runs:
            return self._vouched(node, messages, seeded)  # (not cached: it reads the other runs too)
        node.messages_cache = (node.fold_version, messages)
        return messages

    def _vouched(self, node: Node, messages: list[Any], seeded: Any) -> list[Any]:
        """A trusting tree's read of a node holding a fork seed (a client's copy of a run's messages,
        Vercel codec): a seeded message shows only as a copy of an agent message of a run of the
        same client (:func:`~ai_transport.codec.vercel.readers.vouched_messages`); what a client
        wrote as the agent's never shows as the agent's, nor reaches the model."""
        vouch = getattr(self._codec, "vouched_messages", None)
        if vouch is None:
            return messages
        entry = self._nodes.get(node.key)
        owner = getattr(node, "input_client_id", None) or (entry.owner if entry is not None else None)
        # A seed copies the run its fork supersedes, a run answering the same input (a fork is a
        # same-parent sibling, superseded or not): only those runs are read, never the whole tree
        siblings = [n for n in self._groups()[0].get(node.parent, ()) if isinstance(n, RunNode) and n is not node]
        for key in self._superseded:
            superseded = self._nodes.get(key)
            if superseded is not None and isinstance(superseded.node, RunNode) and superseded.node.parent == node.parent:
                siblings.append(superseded.node)
        runs = []
        for sibling in siblings:
            stale = self._stale.get(sibling.key)
            if stale is not None and stale.node is sibling:
                self._settle_stale(stale)  # (its projection as its wires make it)
            runs.append((sibling.input_client_id, sibling.projection))
        kept, dropped = vouch(messages, seeded, runs, owner)
        fresh = [m for m in dropped if m.codec_message_id not in self._seeds_refused]
        if fresh:
            self._seeds_refused.update(m.codec_message_id for m in fresh)
            why = (
                f"{len(fresh)} message(s) of a fork seed in {quoted(node.key)} copy no agent message of a run of "
                f"{quoted(owner)}: not shown, never the model's input"
            )
            self._refuse({"name": "ai-input", "serial": getattr(node, "serial", None), "clientId": owner}, why)
        return kept

    # -- ordering ----------------------------------------------------------------------------

    def _compare_key(self, e: _Internal) -> tuple[int, str, int]:
        s = _sort_serial(e.node)
        return (1, "", e.seq) if s is None else (0, s, e.seq)

    def _insert_sorted(self, entry: _Internal) -> bool:
        """Place ``entry`` in the order; True when it went last. The place right after the previous
        insert is tried first (history folds each page oldest first, live wires append at the end:
        either way the next node usually goes there), else a binary search finds it."""
        key = entry.sort_key = self._compare_key(entry)
        order = self._sorted
        lo = self._last_insert + 1
        if not (
            lo <= len(order)
            and (lo == 0 or order[lo - 1].sort_key < key)
            and (lo == len(order) or key < order[lo].sort_key)
        ):
            lo = bisect.bisect_right(order, key, key=_stored_key)
        order.insert(lo, entry)
        self._last_insert = lo
        return lo == len(order) - 1

    def _promote(self, entry: _Internal) -> bool:
        """Re-sort ``entry`` after its serial changed (a prompt published, a run's earlier wire);
        returns whether that moved it (a structural change). Found by a binary search on the key it
        was sorted by, never a scan; a node whose place stays the same (the optimistic prompt that
        was already the latest) changes nothing a cache holds."""
        order = self._sorted
        i = bisect.bisect_left(order, entry.sort_key, key=_stored_key)
        while order[i] is not entry:  # keys are unique (the insert sequence breaks ties)
            i += 1
        key = self._compare_key(entry)
        if (i == 0 or order[i - 1].sort_key <= key) and (i == len(order) - 1 or key <= order[i + 1].sort_key):
            entry.sort_key = key
            return False
        del order[i]
        self._insert_sorted(entry)
        return self._changed()

    def _reference(self, node: Node) -> None:
        """Note the ids ``node`` names (its parent, its fork): see :attr:`_referenced`."""
        for ref in (node.parent, node.fork_of):
            if ref is not None:
                self._referenced.add(ref)

    def _insert(self, key: str, entry: _Internal) -> None:
        self._nodes[key] = entry
        self._reference(entry.node)
        if self._insert_sorted(entry) and key not in self._supersedes:
            self.version += 1  # appended at the end (the live case): caches extend by it
            self._appends.append((self.version, entry.node))
        else:
            self._changed()
        if key in self._supersedes:
            self._sync_superseded()

    # -- visibility --------------------------------------------------------------------------

    def _fork_of(self, node: Node) -> str | None:
        """``node.fork_of`` when it edits a prompt of the same client (another client's "edit" is
        a prompt of its own, never a sibling that replaces the original in views)."""
        fork_of = node.fork_of
        target = self._nodes.get(fork_of) if fork_of is not None else None
        own = self._nodes.get(node.key)
        if target is not None and own is not None and target.owner != own.owner:
            return None
        return fork_of

    def _group_link(self, key: str) -> str | None:
        """The prompt the prompt ``key`` joins the group of: its ``fork-of`` target when that is a
        prompt of the same client (:meth:`_fork_of`) with the same parent, else None (a root)."""
        entry = self._nodes.get(key)
        if entry is None or not isinstance(entry.node, InputNode):
            return None
        fork_of = self._fork_of(entry.node)
        target = self._nodes.get(fork_of) if fork_of is not None else None
        if target is None or not isinstance(target.node, InputNode) or target.node.parent != entry.node.parent:
            return None
        return fork_of

    def _resolve_root(self, key: str, roots: dict[str, str]) -> str:
        """The group root of the prompt ``key``, memoised in ``roots`` (every prompt a walk passes
        gets its root, so each prompt is walked once per build: O(1) amortised a prompt).

        ``root(p) = root(link(p))`` (:meth:`_group_link`), ``p`` itself when it links nowhere. A
        ``fork-of`` loop (one client's prompts editing each other) is one group whose root is the
        loop's smallest key, for every prompt of the loop and every prompt leading into it: the
        answer depends on the set of prompts only, never on their arrival or serial order."""
        walked: list[str] = []
        at: dict[str, int] = {}
        current = key
        while current not in roots:
            if current in at:  # a loop: walked[at[current]:]
                loop = walked[at[current]:]
                rep = min(loop)
                for k in loop:
                    roots[k] = rep
                break
            at[current] = len(walked)
            walked.append(current)
            nxt = self._group_link(current)
            if nxt is None:
                roots[current] = current
                break
            current = nxt
        root = roots[current]
        for k in walked:
            roots.setdefault(k, root)
        return roots[key]

    def _groups(self) -> tuple[dict[str | None, list[Node]], dict[str, list[Node]], dict[str, str]]:
        """The sibling groups of this version of the tree.

        ``(runs, inputs, roots)``: ``runs[parent]`` — the runs answering ``parent`` (a reply and its
        regenerates); ``inputs[root]`` — the prompts of the group rooted at ``root`` (the prompt and
        its edits, edits of edits..., :meth:`_resolve_root`), one list a group root; ``roots[key]``
        — the group root of each prompt (superseded ones included). In serial order, superseded
        nodes left out of groups. Built in one pass (O(1) amortised a node: roots are memoised),
        then extended by the nodes appended since (:attr:`_appends`), so a live fold never walks
        the tree.
        """
        cached = self._children_cache
        if cached is not None and cached[0] != self.version:
            cached = self._extend_groups(cached)
        if cached is not None and cached[0] == self.version:
            return cached[1], cached[2], cached[3]
        runs: dict[str | None, list[Node]] = {}
        inputs: dict[str, list[Node]] = {}
        roots: dict[str, str] = {}
        referenced: set[str] = set()
        forked: dict[str, None] = {}
        by_root: dict[str, list[str]] = {}
        forked_keys: dict[str, None] = {}
        for e in self._sorted:
            self._group_node(e.node, runs, inputs, roots, referenced, forked, by_root, forked_keys)
        self._children_cache = (self.version, runs, inputs, roots, referenced, forked, by_root, forked_keys)
        return runs, inputs, roots

    def _group_node(
        self,
        node: Node,
        runs: dict[str | None, list[Node]],
        inputs: dict[str, list[Node]],
        roots: dict[str, str],
        referenced: set[str],
        forked: dict[str, None],
        by_root: dict[str, list[str]],
        forked_keys: dict[str, None],
    ) -> None:
        """Add ``node`` (the latest in serial order) to the groups (``forked``: the roots of the
        prompt groups with more than one member; ``by_root``: every prompt of each group root,
        superseded ones included; ``forked_keys``: the prompts whose root is forked, what
        :meth:`forked_prompts` answers, kept here so that no reader walks every prompt). O(1)
        amortised: the root is memoised (:meth:`_resolve_root`), one member list a group root."""
        for ref in (node.parent, node.fork_of):
            if ref is not None:
                referenced.add(ref)
        if isinstance(node, RunNode):
            if node.key not in self._superseded:
                runs.setdefault(node.parent, []).append(node)
            return
        root = roots.get(node.key)  # superseded prompts too: a view may still hold one
        if root is None:
            root = self._resolve_root(node.key, roots)
        by_root.setdefault(root, []).append(node.key)
        if root in forked:
            forked_keys[node.key] = None
        if node.key in self._superseded:
            return
        members = inputs.setdefault(root, [])
        members.append(node)
        if len(members) > 1:
            self._mark_forked(root, forked, by_root, forked_keys)

    @staticmethod
    def _mark_forked(
        key: str, forked: dict[str, None], by_root: dict[str, list[str]], forked_keys: dict[str, None]
    ) -> None:
        if key not in forked:
            forked[key] = None
            forked_keys.update(dict.fromkeys(by_root.get(key, ())))

    def _appended_since(self, version: int) -> list[Node] | None:
        """The nodes appended after ``version``, when appends are all that changed since; else None.
        A node another one already names (as parent or fork) changes more than itself: None."""
        if version < self._appends_base:
            return None
        start = bisect.bisect_right(self._appends, version, key=_append_version)  # versions ascend
        return [node for _, node in self._appends[start:]]

    def _extend_groups(self, cached: Any) -> Any:
        version, runs, inputs, roots, referenced, forked, by_root, forked_keys = cached
        appended = self._appended_since(version)
        if appended is None or any(n.key in referenced for n in appended):
            return None
        for node in appended:
            self._group_node(node, runs, inputs, roots, referenced, forked, by_root, forked_keys)
        extended = (self.version, runs, inputs, roots, referenced, forked, by_root, forked_keys)
        self._children_cache = extended
        return extended

    def forked_prompts(self) -> set[str]:
        """The prompts that have an alternative (an edit, or the prompt an edit replaces)."""
        return set(self.forked_index())

    def forked_index(self) -> dict[str, None]:
        """:meth:`forked_prompts` as the tree keeps it while prompts fold (never walked per call;
        do not mutate it): in the order they became forked, so a reader that consumed the first
        ``n`` reads only the rest next time; a new object after a rebuild of the groups."""
        self._groups()
        forked_keys: dict[str, None] = self._children_cache[7]
        return forked_keys

    def root_of(self, key: str) -> str:
        """The group root of the prompt ``key`` (itself when it is none of the tree's prompts),
        read from the groups (no ``fork-of`` walk)."""
        return self._groups()[2].get(key, key)

    def sibling_group(self, key: str) -> list[Node]:
        """Alternatives of the node ``key`` (edits of a prompt, regenerates of a reply), in order."""
        entry = self._nodes.get(key)
        if entry is None:
            return []
        original = entry.node
        runs, inputs, roots = self._groups()
        if isinstance(original, RunNode):
            return list(runs.get(original.parent, ()))
        return list(inputs.get(roots.get(key, key), ()))

    def group_root(self, key: str) -> str:
        """The key identifying the sibling group of ``key`` (its first member)."""
        entry = self._nodes.get(key)
        if entry is None:
            return key
        if isinstance(entry.node, InputNode):
            return self._groups()[2].get(key, key)
        group = self.sibling_group(key)
        return group[0].key if group else key

    def visible_nodes(self, selections: Mapping[str, str] | None = None) -> list[Node]:
        """The selected path through the tree, in serial order.

        A node is kept when its parent (if known to the tree) is on the path and, when it has
        siblings, it is the selected member of its group: ``selections[group_root]`` if given and
        present, else the latest.
        """
        return list(self.visible_path(selections))

    def fold_mark(self) -> tuple[Any, int]:
        """A mark of the folds made so far, for :meth:`folded_since`."""
        return (self._folded, self._folds)

    def folded_since(self, mark: tuple[Any, int]) -> list[Node] | None:
        """The nodes folded (their ``fold_version`` bumped) after ``mark``, oldest first, repeats
        included; None when the journal no longer reaches back that far (or the tree adopted a
        refold since)."""
        journal, count = mark
        if journal is not self._folded:
            return None
        new = self._folds - count
        if new == 0:
            return []
        if new > len(journal):
            return None
        return [journal[-k] for k in range(new, 0, -1)]  # from the newest end: O(new)

    def visible_path(self, selections: Mapping[str, str] | None = None) -> list[Node]:
        """:meth:`visible_nodes` as the tree holds it: never mutate it. A later answer that is the
        same list object only grew at its end (the live append case; other selections that pick
        the members shown already, such as a view pinning what it shows, answer the same list); a
        structural change answers a new list.

        The path is cached for the selections it was computed for: a plain mapping is hashed whole
        on every call (O(the selections)); a :class:`~.selections.Selections` (a view's) is named by
        its identity and version, and what changed since is read from its journal (O(the changes)).
        """
        if selections is None:
            selections = {}
        chosen = _selection_stamp(selections)
        cache_key = (self.version, chosen)
        cached = self._visible_cache
        if cached is not None and cached[0] != cache_key and cached[0][1] != chosen:
            cached = self._reselect_visible(cached, selections, chosen)
        if cached is not None and cached[0] != cache_key:
            cached = self._extend_visible(cached, selections)
        if cached is not None and cached[0] == cache_key:
            return cached[1]
        result: list[Node] = []
        path: dict[str, int] = {}  # key -> its index in result
        resolved: dict[str, str] = {}
        runs, inputs, roots = self._groups()
        for entry in self._sorted:
            node = entry.node
            key = node.key
            if key in self._superseded:
                continue
            parent_key = self._parent_key(node)
            if parent_key is not None and parent_key not in path:
                continue
            root, group = _group_of(node, runs, inputs, roots)
            if len(group) > 1:
                selected = resolved.get(root)
                if selected is None:
                    preferred = selections.get(root)
                    if preferred is not None and self._in_group(preferred, node, root):
                        selected = preferred
                    else:
                        selected = group[-1].key
                    resolved[root] = selected
                if key != selected:
                    continue
            path[key] = len(result)
            result.append(node)
        self._visible_cache = (cache_key, result, path)
        return result

    def _extend_visible(self, cached: Any, selections: Mapping[str, str]) -> Any:
        """The cached path extended by the nodes appended since it was computed, else None.

        An appended node of its own (no siblings) is shown iff its parent is on the path (the path
        grows at its end: the same list). An appended sibling (an edit, a regenerate) is the latest
        of its group, and no node names it yet: when a selection keeps another member it changes
        nothing; else it replaces the member shown until now (the group's previous latest), which
        leaves the path with the nodes shown through it — a new list, rebuilt from that member on
        only (O(the path after it), never the whole tree). ``selections``: the ones the cached path
        was computed (or reselected) for."""
        (version, chosen), result, path = cached
        appended = self._appended_since(version)
        if appended is None:
            return None
        runs, inputs, roots = self._groups()
        if self._children_cache is None or any(n.key in self._children_cache[4] for n in appended):
            return None
        for node in appended:
            key = node.key
            if key in self._superseded:
                continue
            parent_key = self._parent_key(node)
            if parent_key is not None and parent_key not in path:
                continue
            root, group = _group_of(node, runs, inputs, roots)
            if len(group) > 1:
                if group[-1] is not node:
                    return None
                preferred = selections.get(root)
                if preferred is not None and preferred != key and self._in_group(preferred, node, root):
                    continue  # the selected member stays
                at = path.get(group[-2].key)
                if at is None:
                    return None
                result = self._drop_from_path(result, path, at)
                if parent_key is not None and parent_key not in path:
                    continue  # its parent left with the member it replaces (a run whose prompt maps to it)
            path[key] = len(result)
            result.append(node)
        extended = ((self.version, chosen), result, path)
        self._visible_cache = extended
        return extended

    def _reselect_visible(self, cached: Any, selections: Mapping[str, str], chosen: Any) -> Any:
        """The cached path (of the tree as it was, before the nodes appended since) for other
        selections, when each selection that changed picks the member the path shows already (a
        view pinning the prompt it shows when someone edits it); else None. O(the selections
        that changed) for a :class:`~.selections.Selections` read again, else O(the selections)."""
        (version, before), result, path = cached
        appended = self._appended_since(version)
        if appended is None or self._children_cache is None:
            return None
        referenced = self._children_cache[4]
        if any(n.key in referenced for n in appended):
            return None
        changed = _selection_changes(before, selections, chosen)
        if changed is None:
            return None
        runs, inputs, _ = self._groups()
        new = {n.key for n in appended}
        for root, was in changed.items():
            entry = self._nodes.get(root)
            groups = [inputs.get(root, ())]
            if entry is not None and isinstance(entry.node, RunNode):
                siblings = runs.get(entry.node.parent, ())
                if siblings and siblings[0].key == root:
                    groups.append(siblings)
            for group in groups:
                held = len(group)
                while held and group[held - 1].key in new:  # appended since: at the group's end
                    held -= 1
                if held > 1 and self._pick(group, held, was, root, new) != self._pick(
                    group, held, selections.get(root), root, new
                ):
                    return None
        return ((version, chosen), result, path)

    def _pick(self, group: Any, held: int, preferred: str | None, root: str, new: set[str]) -> str:
        """The member of ``group[:held]`` a path shows for the selection ``preferred``."""
        if preferred is not None and preferred not in new and self._in_group(preferred, group[0], root):
            return preferred
        return str(group[held - 1].key)

    def _parent_key(self, node: Node) -> str | None:
        """The key of the node ``node``'s parent, None for a root (or a run whose prompt was never
        seen: joined mid-run, no history loaded, the prompt's id maps to the run itself; 0.8.0 then
        hides the run, we show it as a root)."""
        parent_key = self._cmid_to_key.get(node.parent) if node.parent is not None else None
        return None if parent_key == node.key else parent_key

    def _in_group(self, key: str, member: Node, root: str) -> bool:
        """Whether the node ``key`` is in the (unsuperseded) sibling group of ``member``, whose
        root is ``root`` — an O(1) test, not a scan of the group."""
        entry = self._nodes.get(key)
        if entry is None or key in self._superseded:
            return False
        if isinstance(member, RunNode):
            return isinstance(entry.node, RunNode) and entry.node.parent == member.parent
        return isinstance(entry.node, InputNode) and self._groups()[2].get(key) == root

    def _drop_from_path(self, result: list[Node], path: dict[str, int], at: int) -> list[Node]:
        """A new path: ``result`` without its node at ``at`` and the nodes after it shown through
        it (their parent left the path); ``path`` (the key index) updated in place."""
        kept = result[:at]
        tail = result[at + 1 :]
        del path[result[at].key]
        for node in tail:
            del path[node.key]
        for node in tail:
            parent_key = self._parent_key(node)
            if parent_key is None or parent_key in path:
                path[node.key] = len(kept)
                kept.append(node)
        return kept

    # -- folding -----------------------------------------------------------------------------

    def _fenced(self, entry: _Internal, serial: str) -> bool:
        published = entry.publishers.get(serial)
        if published is None or not isinstance(entry.node, RunNode):
            return False
        fenced = self.fence.fenced(entry.node.run_id, published[0], published[1])
        if self._fence_pending:
            judged = self._fence_pending.get(entry.node.key)
            if judged is not None and serial not in judged:
                judged[serial] = fenced  # an output folded while the run's lease wires are unsettled
        return fenced

    def _gated(self, entry: _Internal, serial: str) -> bool:
        """A wire logged but not folded: a superseded step attempt's, or a fenced holder's."""
        return self._is_gated(entry, serial) or self._fenced(entry, serial)

    def _report_fenced(self, entry: _Internal, serials: list[str]) -> None:
        for serial in serials:
            if serial in self._fence_reported or not self._fenced(entry, serial):
                continue
            self._fence_reported.add(serial)
            conn, _, client, name = entry.publishers[serial]
            self._refuse(
                # (the tree keeps no fenced wire: its refusal names what the fence judged it by)
                {"serial": serial, "connectionId": conn, "clientId": client, "name": name},
                f"output of run {entry.node.key!r} from connection {conn!r} after its lease was taken over",
            )

    def note_lease(self, message: Mapping[str, Any], parsed: LeaseWire | Poison | str | None = None) -> None:
        """Fold a lease wire (its publisher already admitted): a run whose folded outputs it fences
        (or un-fences: it landed out of serial order) is refolded and announced — at once, or once
        per history page while :attr:`page_folding` holds (:meth:`settle_fences`). ``parsed``:
        what ``parse_lease_wire(message, {its clientId})`` answers, when the caller has it."""
        if parsed is None:
            parsed = parse_lease_wire(message, {message.get("clientId")})
        fence = self.fence
        pending = self._fence_pending
        if isinstance(parsed, LeaseWire):
            found = self._nodes.get(parsed.run_id)
            if found is None or not found.publishers:
                fence.note(message, parsed)  # no output of the run folded yet: nothing to fence
                return
            key = found.node.key
            if self.page_folding and key not in pending:  # judged when the run is read (_fence_touched)
                fence.note(message, parsed)
                # (contested before the wire or after it: the same test, as a run once contested
                # stays so, note only ever adding a connection)
                if fence.contested(parsed.run_id):
                    self._fence_touched.add(key)
                return
            if key not in pending:
                if not fence.contested(parsed.run_id):  # one connection's lease wires fence nothing
                    fence.note(message, parsed)
                    if not fence.contested(parsed.run_id):
                        return  # the usual case: nothing of the run fenced, before or after this wire
                    pending[key] = dict.fromkeys(found.publishers, False)
                else:
                    pending[key] = {s: self._fenced(found, s) for s in found.publishers}
                    fence.note(message, parsed)
            else:
                fence.note(message, parsed)
        elif isinstance(parsed, Poison) and self.page_folding:  # any run may change: judged when read
            self._fence_touched.update(e.node.key for e in self._nodes.values() if e.publishers)
            fence.note(message, parsed)
            return
        elif isinstance(parsed, Poison):  # any run may change
            for entry in self._nodes.values():
                if entry.publishers and entry.node.key not in pending:
                    pending[entry.node.key] = {s: self._fenced(entry, s) for s in entry.publishers}
            fence.note(message, parsed)
        else:  # refused (malformed): counted by the ledger, no run changes
            fence.note(message, parsed)
            return
        if not self.page_folding:
            self.settle_fences()

    def settle_fences(self) -> None:
        """Refold and announce each run whose fenced outputs the lease wires folded since the last
        settle changed (a re-delivery, a renewal or another run's wire changes nothing)."""
        touched, self._fence_touched = self._fence_touched, set()
        for key in touched:  # (a history page's: refolded and reported once read)
            entry = self._nodes.get(key)
            if entry is not None and key not in self._fence_pending:
                self._fence_deferred.add(key)
                self._mark_stale(entry)
                self._report(OutputChanged(key, None, None, None, (), ()))
        pending, self._fence_pending = self._fence_pending, {}
        for key, judged in pending.items():
            entry = self._nodes.get(key)
            if entry is None:
                continue
            if all(self._fenced(entry, s) == judged.get(s, False) for s in entry.publishers):
                continue  # nothing folded changes
            self._refold(entry)
            self._report_fenced(entry, list(entry.publishers))
            self._report(OutputChanged(entry.node.key, None, None, None, (), ()))

    def _refold(self, entry: _Internal) -> None:
        self._stale.pop(entry.node.key, None)
        self._replay(entry)
        self._report_deferred_fence(entry)
        entry.node.fold_version += 1
        self._folded.append(entry.node)
        self._folds += 1

    def _mark_stale(self, entry: _Internal) -> None:
        """Announce a fold of ``entry`` whose projection is made on its first read (:attr:`_stale`)."""
        self._stale[entry.node.key] = entry
        entry.node.fold_version += 1
        self._folded.append(entry.node)
        self._folds += 1

    def _settle_stale(self, entry: _Internal) -> None:
        """Make the projection of a stale ``entry`` (its fold was announced already)."""
        if self._stale.get(entry.node.key) is entry:
            del self._stale[entry.node.key]
            self._replay(entry)
            self._report_deferred_fence(entry)

    def settle_deferred_fences(self) -> None:
        """Refold and report now every run whose fenced outputs a history page left to its read
        (:attr:`_fence_deferred`): a history fold paused, so its refusals are known at once."""
        for key in list(self._fence_deferred):
            entry = self._nodes.get(key)
            if entry is not None:
                self._settle_deferred_fence(entry)
            else:
                self._fence_deferred.discard(key)

    def _settle_deferred_fence(self, entry: _Internal) -> None:
        """Report what a history page left of ``entry``'s fenced outputs: by its refold when it is
        stale (:meth:`_settle_stale`), else now."""
        if self._stale.get(entry.node.key) is entry:
            self._settle_stale(entry)
        else:
            self._report_deferred_fence(entry)

    def _report_deferred_fence(self, entry: _Internal) -> None:
        """After a refold: report the outputs a history page's lease wires fenced (:attr:`_fence_deferred`)."""
        if self._fence_deferred and entry.node.key in self._fence_deferred:
            self._fence_deferred.discard(entry.node.key)
            self._report_fenced(entry, list(entry.publishers))

    def settle(self) -> None:
        """Make every stale projection now (a reader of ``node.projection`` itself calls this first)."""
        while self._stale:
            self._settle_stale(next(iter(self._stale.values())))

    def _replay(self, entry: _Internal) -> None:
        projection = self._codec.init()
        fold = self._codec.fold
        for (direction, event), serial, mid, author in entry.log.replay_authored():
            if self._gated(entry, serial):
                continue
            try:
                if author is None or not self._fold_author:
                    projection = fold(projection, direction, event, message_id=mid, serial=serial)
                else:
                    projection = fold(projection, direction, event, message_id=mid, serial=serial, author=author)
            except Exception:
                logger.exception("refold raised for node %s (message %s)", entry.node.key, mid)
        entry.node.projection = projection

    def _record_and_fold(
        self,
        entry: _Internal,
        events: list[CodecEvent],
        serial: str | None,
        mid: str | None,
        version: str | None,
        streamed: bool,
        gated: bool | None = None,
    ) -> None:
        """Log the wire's ``events`` on ``entry`` (:class:`WireLog`) and fold them into its projection:
        at the end when the wire is the node's latest, else by a refold (it landed before a later
        serial, or the node holds an optimistic fold); a re-delivery is dropped, a gated wire
        (:meth:`_gated`; ``gated`` when the caller judged it already) logged only. A serial-less
        (optimistic) wire folds without a log entry."""
        self.retention.record_activity(self._nodes, entry, self._wire.get("timestamp"))
        if serial is not None:
            if events:
                fold = entry.log.record(serial, mid, events, version, streamed, self._client)
                if fold == "dropped":
                    logger.debug("dropped re-delivered wire %s (version %s) on %s", serial, version, entry.node.key)
                    return
                if entry.optimistic or fold == "refold":
                    entry.optimistic = False
                    if self.page_folding:
                        self._mark_stale(entry)  # refolded once, when read: not once per older wire
                    else:
                        self._refold(entry)
                    return
            if self._gated(entry, serial) if gated is None else gated:
                return
        elif events:
            entry.optimistic = True
        node = entry.node
        if self._stale and self._stale.get(node.key) is entry:
            self._mark_stale(entry)  # logged: the refold to come folds it in place
            return
        projection = node.projection
        fold_event = self._codec.fold
        author = self._client if self._fold_author else None
        for direction, event in events:
            try:
                if author is None:
                    projection = fold_event(projection, direction, event, message_id=mid, serial=serial or "")
                else:
                    projection = fold_event(
                        projection, direction, event, message_id=mid, serial=serial or "", author=author
                    )
            except Exception:
                logger.exception("fold raised for node %s (message %s)", node.key, mid)
        node.projection = projection
        node.fold_version += 1
        self._folded.append(node)
        self._folds += 1

    def apply_message(
        self,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        headers: Mapping[str, str],
        serial: str | None = None,
        version: str | None = None,
        client_id: str | None = None,
        wire: Mapping[str, Any] | None = None,
    ) -> None:
        """Fold a decoded ``ai-input`` / ``ai-output`` wire (or an optimistic local input).

        ``client_id`` is the publisher (a local optimistic input: the session's own id); ``wire`` the
        message, for the ``refused`` event. A user prompt's ``codec-message-id`` belongs to the client
        that published it first (lowest serial): the same id from another client is refused (or, when
        older, takes the node over), as is a prompt or client fork whose id names a node of another kind.
        """
        # (the whole wire: what the tree keeps of a fold to make it again is slimmed then, :func:`.held`)
        replay = Replay(
            "apply_message",
            (inputs, outputs, headers, serial, version, client_id, wire),
            serial,
            wire if wire is not None else {"serial": serial, "clientId": client_id},
            wire is None,
        )
        self._wire = replay.wire
        self._client = client_id
        run_id = headers.get(H_RUN_ID)
        if run_id is None:
            self._apply_run_less(inputs, outputs, headers, serial, version, wire, replay)
        else:  # a wire of a run (an output, a continuation input): the commonest
            events = _codec_events(inputs, outputs)
            if (events or run_id in self._nodes) and self._apply_run(
                run_id, inputs, outputs, events, headers, serial, version, False, replay, judged=wire is not None
            ):
                self._report(TREE_CHANGED)
        if self._replays or self._moved:  # (what _flush_replays does first: a call less a wire)
            self._flush_replays()

    def _apply_run_less(
        self,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        headers: Mapping[str, str],
        serial: str | None,
        version: str | None,
        wire: Mapping[str, Any] | None,
        replay: Replay,
    ) -> None:
        """:meth:`apply_message` of a wire without a ``run-id``: a prompt, or a client fork."""
        cmid = headers.get(H_CODEC_MESSAGE_ID)
        if cmid is None or not inputs:
            logger.debug("message has no run-id and is not a user input or fork; skipped")
            return
        events = _codec_events(inputs, outputs)
        if headers.get(H_ROLE) == "user":  # a prompt
            if self._apply_input(cmid, headers, serial, version, events, inputs, replay):
                self._report(TREE_CHANGED)
            return
        # a client fork (a run-less input of another role: a tool result), keyed by its
        # codec-message-id until the agent's run-start names the run
        structural = False
        supersedes = headers.get(H_SUPERSEDES)
        if supersedes is not None and supersedes not in self._supersedes:
            self._supersedes[supersedes] = self._client
            structural = self._sync_superseded()
        mapped = self._cmid_to_key.get(cmid)
        mapped_entry = self._nodes.get(mapped) if mapped is not None else None
        key = mapped if mapped is not None and mapped_entry is not None and isinstance(mapped_entry.node, RunNode) else cmid
        structural |= self._apply_run(
            key, inputs, outputs, events, headers, serial, version, True, replay, judged=wire is not None
        )
        if structural:
            self._report(TREE_CHANGED)

    def _apply_input(
        self,
        cmid: str,
        headers: Mapping[str, str],
        serial: str | None,
        version: str | None,
        events: list[CodecEvent],
        inputs: list[dict[str, Any]],
        replay: Replay,
    ) -> bool:
        structural = False
        ok, entry = self._claim_prompt_id(cmid, serial, version, replay)
        if not ok:
            return False
        if entry is None:
            node = InputNode(cmid, headers.get(H_PARENT), headers.get(H_FORK_OF), self._codec.init(), serial)
            entry = _Internal(node, next(self._seq), owner=self._client)
            self._insert(cmid, entry)
            if self._cmid_to_key.get(cmid, cmid) != cmid:
                self._changed()  # the id named another node (a run's client-fork link): a re-mapping
            self._cmid_to_key[cmid] = cmid
            structural = True
        elif isinstance(entry.node, InputNode) and serial and not entry.node.serial:
            entry.node.serial = serial
            structural |= self._promote(entry)
        self._record_and_fold(entry, events, serial, cmid, version, headers.get(H_STREAM) == "true")
        self._report(OutputChanged(None, cmid, cmid, serial, (), list(inputs)))
        return structural

    def _apply_run(
        self,
        run_id: str,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        events: list[CodecEvent],
        headers: Mapping[str, str],
        serial: str | None,
        version: str | None,
        fork: bool,
        replay: Replay,
        *,
        judged: bool,
    ) -> bool:
        structural = False
        cmid = headers.get(H_CODEC_MESSAGE_ID)
        input_cmid = headers.get(H_INPUT_CODEC_MESSAGE_ID)
        step_id = headers.get(H_STEP_ID)
        name = self._wire.get("name")
        entry = self._nodes.get(run_id)
        if entry is not None and not isinstance(entry.node, RunNode):
            self._refuse(self._wire, f"run-id {run_id!r} names a prompt")
            return False
        action = action_name(self._wire.get("action"))
        mutation = action in MUTATIONS
        claims = False
        if fork and cmid is not None:
            # a client fork input claims its codec-message-id, as a prompt does
            ok, _ = self._claim_fork_id(cmid, serial, version, replay)
            if not ok:
                return False
            entry = self._nodes.get(run_id)
        elif judged and (outputs or name == EVENT_AI_OUTPUT):
            # an agent output claims its run (and its step): the first identity in serial order owns them
            claims = True
            log = entry.log.entries if entry is not None else None
            if not (mutation and log and serial is not None and log[-1].serial == serial):
                # (an append to the stream folded last is that stream's: its create was judged)
                if not self._claim_run(run_id, self._client, serial, replay, mutation=mutation):
                    return False
                if step_id is not None and not self._claim_step(
                    run_id, step_id, self._client, serial, replay, mutation=mutation
                ):
                    return False
                entry = self._nodes.get(run_id)
        if fork and entry is not None and isinstance(entry.node, RunNode):
            node = entry.node
            # (a run placed by its own later outputs, history newest page first, and not started yet:
            # in a tree with trust rules admission judged the answer by the run it supersedes, and
            # the fork's codec-message-id is its first publisher's, claimed above)
            unstarted = node.input_client_id is None and self.judge_runs
            if not unstarted and self._client not in (entry.owner, node.input_client_id):
                self._refuse(self._wire, f"client input {cmid!r} into run {run_id!r} of another client")
                return False
        structural |= self._link_fork_input(input_cmid, run_id)
        if entry is None and cmid is not None:
            indexed = self._nodes.get(self._cmid_to_key.get(cmid, ""))
            if (
                indexed is not None
                and isinstance(indexed.node, RunNode)
                and indexed.node.start_serial is None
            ):
                entry = indexed
        if entry is None:
            fork_of = headers.get(H_FORK_OF)
            node = RunNode(
                run_id=run_id,
                parent=headers.get(H_PARENT),
                fork_of=self._cmid_to_key.get(fork_of) if fork_of else None,
                regenerates=headers.get(H_MSG_REGENERATE),
                client_id=headers.get(H_RUN_CLIENT_ID, ""),
                invocation_id=headers.get(H_INVOCATION_ID, ""),
                projection=self._codec.init(),
                start_serial=serial,
                input_client_id=headers.get(H_INPUT_CLIENT_ID) if outputs else None,
            )
            entry = _Internal(node, next(self._seq), owner=self._client if fork else None)
            self._insert(run_id, entry)
            structural = True
        elif (
            serial
            and isinstance(entry.node, RunNode)
            and (not entry.node.start_serial or serial < entry.node.start_serial)
        ):
            # the earliest serial seen orders the run (history arrives newest page first)
            entry.node.start_serial = serial
            structural |= self._promote(entry)
        owner = entry.node.key
        if not claims:
            self._keep_replay(entry, replay)
        if cmid and not fork:
            self._run_message_ids.add(cmid)
            held = self._nodes.get(cmid)
            if held is not None and isinstance(held.node, InputNode):
                # a prompt that took the id of a run's message is an impostor's
                self._evict(cmid, f"prompt codec-message-id {cmid!r} names a run's message")
                structural = True
        mapped = self._cmid_to_key.get(cmid) if cmid else None
        if cmid and mapped != owner and (mapped is None or mapped not in self._nodes):
            self._cmid_to_key[cmid] = owner
            if mapped is not None or cmid in self._referenced:
                structural = self._changed()  # a node names it: its place in the tree changes
            else:
                self.cmid_version += 1  # a new message no node names yet: the shape is the same
        step_start_serial = headers.get(H_STEP_START_SERIAL)
        if step_id is not None and step_start_serial is not None and serial is not None:
            self._record_step_attribution(entry, serial, step_id, step_start_serial)
        conn = self._wire.get("connectionId")
        fenced = False
        if serial is not None:
            published = False
            if isinstance(conn, str) and name != EVENT_AI_INPUT:
                published = True
                if serial not in entry.publishers or action in (None, "message.create"):
                    # the publisher of the message's create decides (a mutation is another connection's
                    # append or closing update): a stream begun before a takeover is kept whole
                    entry.publishers[serial] = (conn, serial, self._client, name)
            fenced = self._fenced(entry, serial)  # (judged once: folding the wire moves no fence)
            if fenced and published and serial not in self._fence_reported:
                if self.page_folding:  # an older page may yet un-fence it: reported when the run is read
                    self._fence_deferred.add(entry.node.key)
                else:
                    self._report_fenced(entry, [serial])
        # (logging the wire moves neither a fence nor a step attempt: judged once, before)
        gated = serial is not None and (fenced or self._is_gated(entry, serial))
        self._record_and_fold(entry, events, serial, cmid, version, headers.get(H_STREAM) == "true", gated)
        if gated:
            return structural  # a superseded step attempt (or a fenced holder's): logged, not folded, not announced
        stamp = headers.get(H_STEER_CODEC_MESSAGE_IDS)
        self._report(
            OutputChanged(
                owner,
                input_cmid,
                cmid,
                serial,
                outputs,
                inputs,
                step_id,
                step_start_serial,
                parse_steer_stamp(stamp) if stamp is not None else None,
            )
        )
        return structural

    def delete(self, key: str) -> None:
        """Remove a node (an optimistic input whose publish failed)."""
        entry = self._nodes.pop(key, None)
        if entry is None:
            return
        if isinstance(entry.node, InputNode):
            self.owners.forget(KIND_CODEC_MESSAGE_ID, key)  # the optimistic claim goes with its node
        self._sorted.remove(entry)
        self._changed()
        self._report(TREE_CHANGED)

    def emit_ably_message(self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        """Index the wire by ``event-id`` (:meth:`claim_event_id`) and report it folded (:class:`~.changes.WireFolded`).

        ``headers``: the wire's transport tier when the caller read it already (read once per wire)."""
        if headers is None:
            headers = transport_headers(message.get("extras"))
        event_id = headers.get(H_EVENT_ID)
        if event_id is not None and isinstance(event_id, str):  # (most wires carry none)
            self.claim_event_id(event_id, message)
        if self.wires_reported:
            self._report(WireFolded(message))

    def claim_event_id(self, event_id: str, message: Mapping[str, Any]) -> None:
        """``message`` claims ``event_id``: the id belongs to its first publisher in channel serial
        order, whatever order the wires arrive in (live, history newest page first, a refold).

        The owner's first claim (lowest serial; a serial-less optimistic wire only until a serial one
        arrives) is the wire :meth:`find_message_by_event_id` answers. Every claim by another
        publisher than the owner is refused (reported, counted by the session) once it is known to
        lose — on arrival, or when an older wire of another publisher turns up and takes the id from
        it (and from the owner's earlier claims). An update or append of a claimed wire stands for it;
        a mutated wire whose message claimed nothing claims from its mutation on (:func:`claimed_at`).
        """
        serial = message.get("serial")
        serial = serial if isinstance(serial, str) else None
        version = message.get("version")
        self._claim(
            KIND_EVENT_ID,
            event_id,
            author_of(message),
            serial,
            dict(message),
            mutation=action_name(message.get("action")) in MUTATIONS,
            position=claimed_at(serial, version.get("serial") if isinstance(version, MAPPING) else None),
        )


def _ignore_refused(message: Mapping[str, Any], why: str) -> None:
    """The refusal hook of a bare tree (no core): a refused wire is only logged."""
    logger.debug("refused %r: %s", message.get("serial"), why)


class WireApplier:
    """Routes one inbound wire: lifecycle -> the tree's lifecycle, anything else -> decode + fold."""

    def __init__(self, tree: Tree, decoder: Any) -> None:
        self.tree = tree
        self.decoder = decoder

    def apply(self, message: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> RunLifecycleEvent | None:
        """Apply the wire; returns the run lifecycle event it carried, if any. ``headers``: the
        wire's transport tier when the caller read it already (read once per wire)."""
        if headers is None:
            headers = transport_headers(message.get("extras"))
        name = message.get("name")
        if name != EVENT_AI_OUTPUT and name != EVENT_AI_INPUT:  # (the codec's wires first: the commonest)
            if not name:
                if action_name(message.get("action")) in (None, "message.create"):
                    return None  # a name-less create is foreign: it must not claim a serial's stream tracker
                # a name-less append / update / delete (of an ai-input / ai-output) carries codec events
            elif isinstance(name, str) and name in RUN_LIFECYCLE_NAMES:
                event = parse_run_lifecycle(name, headers, message.get("serial"), message.get("timestamp"))
                if event is not None and not self.tree.apply_run_lifecycle(event, author_of(message), message):
                    return None  # another identity owns the run: refused (reported)
                return event
            elif isinstance(name, str) and name in STEP_LIFECYCLE_NAMES:
                self.tree.fold_step_wire(name, headers, message, author_of(message))
                return None
            else:  # a lease wire, or a foreign one: only the codec's wires carry codec events
                if name == LEASE_NAME:
                    self.tree.note_lease(message)
                return None
        try:
            result = self.decoder.decode(message)
        except Exception:  # the decoder should never raise; never let one wire break the session
            logger.exception("decoder raised on wire %s", message.get("serial"))
            return None
        inputs = list(getattr(result, "inputs", []) or [])
        outputs = list(getattr(result, "outputs", []) or [])
        if inputs or outputs or (headers.get(H_RUN_ID) and name in (EVENT_AI_INPUT, EVENT_AI_OUTPUT)):
            serial = message.get("serial")
            version = message.get("version")
            version_serial = version.get("serial") if type(version) is dict or isinstance(version, MAPPING) else None
            self.tree.apply_message(
                inputs,
                outputs,
                headers,
                serial,
                version_serial or serial,
                author_of(message),  # who Ably says wrote the wire as it stands (its mutator, if any)
                message,
            )
        return None
