"""Views over a session's tree: what a UI renders and what an agent sends to the model.

:class:`View` (``View`` of 0.8.0): :meth:`View.get_messages`, :meth:`View.runs`,
:meth:`View.has_older` / :meth:`View.load_older` (history paging), :meth:`View.run_of`,
:meth:`View.run`, and events via :meth:`View.on` (``update``, ``run``, ``ably-message``), fired when
0.8.0 fires them: ``update`` when the visible nodes change (a structural change that leaves them
as they were emits nothing), on every fold into a visible node, on a selection, a reveal and when a
``load_until`` walk settles — not on a run's status change; ``run`` only for runs on this branch
(or a ``start`` whose parent is on it).

Two branch sources decide which nodes a view shows:

* :class:`~ai_transport.conversation.branch.NavigableBranch` (client views): the tree's selected path
  — at every fork (edits of a prompt, regenerates of a message) the latest sibling unless selected;
  branch-selection handles and auto-selection as 0.8.0 (:mod:`ai_transport.conversation.branch`).
* :class:`LeafBranch` (an agent run's ``run.view``): the ancestor chain of the run's trigger, with
  ancestor runs that did not end ``complete`` left out together with the input they answered (so
  their dangling calls never reach the model); the current run is always kept. A regenerate cuts the
  messages at the regenerated target, and a steer no output answered yet is moved to the tail of its
  run (:func:`~ai_transport.sessions.steer.defer_unresponded_steers`).

History: :class:`HistoryHydrator` reads ``channel.history(until_attach=True)`` pages (newest first)
and hands each page, oldest first, to its page sink (the session folds it into the shared tree and
dispatches what it changed once per page), with 3 retries then 104011. A view subscribes its
handlers as :class:`IgnoresHistory`: they ignore what a page of the session's own history changes
(the view emits once the load settles), so the session neither calls them nor queues the view
changes no other subscriber wants while a page folds.

The cyclic garbage collector is paused while one page folds (``gc.disable()``, restored in a
``finally``, and never enabled when the application had turned it off). A page folds with no await
inside, so nothing else runs meanwhile and the pause is bounded by one page (100 wires by default).
Without it, a 10k-message wake-up ran ~200 young and one full collection, the full one scanning every
object of the process (~30 us a history message on a loaded 2-core machine); with it, ~110 young and
none. The fold creates no reference cycle per wire (``tests/test_session_fold_gc.py`` counts the
objects on cycles a dropped session leaves), so the pause defers no garbage: what a page allocates
is the tree's, freed by reference counting. ``gc.freeze()`` was measured too and is not used: it is
process-wide (it moves every object of the application to a generation never collected again until
``gc.unfreeze()``), not something a library may do to its host.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..codec.headers import transport_headers
from ..conversation.branch import NavigableBranch
from ..conversation.changes import OutputChanged, Replaced, RunFolded, TreeChanged, WireFolded
from ..conversation.leaf_branch import LeafBranch
from ..conversation.lifecycle import H_CODEC_MESSAGE_ID, H_RUN_ID
from ..conversation.run import RunInfo
from ..conversation.tree import Emitter, Node, RunNode, Tree, WireApplier
from ..errors import AITransportError, ErrorCode, InvalidArgumentError

__all__ = ["HistoryHydrator", "IgnoresHistory", "LeafBranch", "NavigableBranch", "TreeBranch", "View"]

logger = logging.getLogger("ai_transport.sessions.view")

DEFAULT_HISTORY_PAGE_SIZE = 100

#: ``subscribe(change_class, handler) -> unsubscribe`` of a session (:meth:`~.session.SessionCore.subscribe`).
Subscribe = Callable[[type[Any], Callable[[Any], None]], Callable[[], None]]


class IgnoresHistory(functools.partial):
    """A change handler that ignores the changes a page of its session's own history makes
    (``IgnoresHistory(handler)``; called as ``handler`` is). A session (:meth:`~.session.SessionCore.subscribe`)
    does not call it while its hydrator folds a page, and does not even queue a view change whose
    every subscriber is one; any other subscriber calls it as a plain handler."""


class HistoryHydrator:
    """Folds channel history into a tree, one page at a time, on demand (shared by a session's views).

    ``on_page(wires)`` folds one page, its wires oldest first (the session's page sink).
    """

    def __init__(
        self,
        channel: Any,
        applier: WireApplier,
        on_page: Callable[[list[Mapping[str, Any]]], None],
        page_size: int = DEFAULT_HISTORY_PAGE_SIZE,
        retries: int = 3,
        backoff: float = 0.1,
        on_pause: Callable[[], None] | None = None,
    ) -> None:
        self._channel = channel
        self._applier = applier
        self._on_page = on_page
        self._on_pause = on_pause
        self._page_size = page_size
        self._retries = retries
        self._backoff = backoff
        self._page: Any = None
        self._first_yielded = False
        self._started = False
        self._exhausted = False
        self._folding = False
        self._lock = asyncio.Lock()
        self._generation = 0
        self._resumed: asyncio.Event | None = None
        #: History pages folded since the last :meth:`reset`.
        self.pages_folded = 0

    def reset(self) -> None:
        """Start again from the newest page (a fold in flight drops its page and goes on from there)."""
        self._generation += 1
        self._page = None
        self._first_yielded = False
        self._started = False
        self._exhausted = False
        self.pages_folded = 0

    def spawn(self, applier: WireApplier) -> HistoryHydrator:
        """A fresh hydrator (newest page first) over the same channel, settings and page sink."""
        return HistoryHydrator(
            self._channel, applier, self._on_page, self._page_size, self._retries, self._backoff, self._on_pause
        )

    def pause(self) -> None:
        """Hold every fold (a refold is reading history into a shadow tree): a page in flight is
        dropped, :meth:`fold_until` waits for :meth:`resume`; :meth:`has_next` keeps answering."""
        self._generation += 1
        if self._started and self._page is None and not self._exhausted:
            self._started = False  # the first page was in flight: read it again (of the new attach)
        if self._resumed is None:
            self._resumed = asyncio.Event()

    def adopt(self, other: HistoryHydrator) -> None:
        """Continue from ``other``'s cursor (the refold's, when its shadow tree is adopted)."""
        self._page, self._first_yielded = other._page, other._first_yielded
        self._started, self._exhausted = other._started, other._exhausted
        self._page_size, self.pages_folded = other._page_size, other.pages_folded

    def resume(self) -> None:
        """End a :meth:`pause`: waiting folds go on (from the adopted cursor, if any)."""
        resumed, self._resumed = self._resumed, None
        if resumed is not None:
            resumed.set()

    def prefer_page_size(self, page_size: int) -> None:
        """Request ``page_size`` messages per history page, if no page was requested yet.

        Once paging started its size is fixed (later pages follow the first page's cursor).
        """
        if not self._started:
            self._page_size = page_size

    def has_next(self) -> bool:
        """True while older history may exist."""
        if self._exhausted:
            return False
        if not self._started or not self._first_yielded:
            return True
        return bool(self._page is not None and self._page.has_next())

    def is_folding(self) -> bool:
        """True while a history page is being folded (views hold their events)."""
        return self._folding

    async def _fetch(self, fetch: Callable[[], Any]) -> Any:
        last: BaseException | None = None
        for attempt in range(self._retries + 1):
            try:
                return await fetch()
            except Exception as exc:
                last = exc
                if attempt < self._retries:
                    await asyncio.sleep(self._backoff * 2**attempt)
        raise AITransportError(
            f"unable to fetch history page; {last}", ErrorCode.HISTORY_FETCH_FAILED, cause=last
        )

    async def _next_items(self) -> list[Any] | None:
        generation = self._generation
        if not self._started:
            self._started = True
            await self._channel.attach()
            page = await self._fetch(
                lambda: self._channel.history(limit=self._page_size, direction="backwards", until_attach=True)
            )
            if generation != self._generation:
                return None  # reset meanwhile: this page belongs to the old attach
            self._page = page
        if self._page is None:
            return None
        if not self._first_yielded:
            self._first_yielded = True
            return list(self._page.items)
        if not self._page.has_next():
            self._page = None
            return None
        page = await self._fetch(self._page.next)
        if generation != self._generation:
            return None
        self._page = page
        return list(page.items) if page is not None else None

    async def fold_until(self, should_stop: Callable[[], bool]) -> bool:
        """Fold older pages until ``should_stop()`` or history is exhausted; returns exhausted.
        ``on_pause()`` (the session's) runs once it stops, when it folded a page."""
        async with self._lock:
            folded = self.pages_folded
            try:
                return await self._fold_until(should_stop)
            finally:
                if self._on_pause is not None and self.pages_folded != folded:
                    self._on_pause()

    async def _fold_until(self, should_stop: Callable[[], bool]) -> bool:
        while not should_stop():
            if self._resumed is not None:
                await self._resumed.wait()
                continue
            if self._exhausted:
                break
            generation = self._generation
            items = await self._next_items()
            if generation != self._generation:
                continue  # paused or reset while the page was in flight: it belongs to the old attach
            if items is None:
                self._exhausted = True
                break
            self._folding = True
            self.pages_folded += 1
            collecting = gc.isenabled()
            if collecting:
                gc.disable()  # one page folds with no await: see the module docstring
            try:
                items.reverse()  # the page's own list (a copy of the page's items): oldest first
                self._on_page(items)
            finally:
                self._folding = False
                if collecting:
                    gc.enable()
            if generation == self._generation and (
                self._page is None or (self._first_yielded and not self._page.has_next())
            ):
                self._exhausted = True
            await asyncio.sleep(0)  # one loop turn per page: a long fold never starves readers
        return self._exhausted


#: The client branch source (kept under its old name).
TreeBranch = NavigableBranch


class View:
    """Messages and runs of one branch of a session, with history paging and update events."""

    def __init__(
        self,
        tree_getter: Callable[[], Tree],
        hydrator_getter: Callable[[], HistoryHydrator],
        source: NavigableBranch | LeafBranch,
        subscribe: Subscribe,
    ) -> None:
        self._tree = tree_getter
        self._subscribe = subscribe
        self._hydrator = hydrator_getter
        self._source = source
        self._hidden = 0
        self._emitter = Emitter()
        self._unsubs: list[Callable[[], None]] = []
        self._bound = False
        self._closed = False
        self._snap_keys: list[str] = []
        self._snap_versions: list[int] = []
        self._snap_set: dict[str, int] = {}
        #: Run ids ``_on_run`` added to ``_snap_set`` ahead of their node (dropped by a snapshot).
        self._snap_early: list[str] = []
        #: The tree's own visible path the snapshot was taken from (a client view) and the tree's
        #: fold mark then: the next change diffs only what was appended to that path and the nodes
        #: folded since (:meth:`_update_snapshot`), never every visible node.
        self._snap_path: list[Node] | None = None
        self._snap_mark: Any = None
        self._walking = False
        self._walk_lock = asyncio.Lock()
        self._bind()
        self._take_snapshot()

    def _bind(self) -> None:
        # the session's dispatch of its core's view changes (the tree keeps its identity)
        if self._bound:
            return
        # the handlers that ignore a change while a history page folds say so: the session then
        # neither calls them nor queues the changes only they would get
        subscribe = self._subscribe
        self._unsubs = [
            subscribe(TreeChanged, IgnoresHistory(self._on_change)),
            subscribe(OutputChanged, IgnoresHistory(self._on_output)),
            subscribe(RunFolded, IgnoresHistory(self._on_run)),
            subscribe(WireFolded, IgnoresHistory(self._on_ably_message)),
            subscribe(Replaced, self._on_replaced),
        ]
        self._bound = True

    # -- events (as 0.8.0's View: against a snapshot of the visible nodes) --------------------

    def _visible(self) -> list[Node]:
        """The visible nodes, read-only (a client view: the tree's own path, not a copy)."""
        path_of = getattr(self._source, "visible_path", None)
        return path_of() if path_of is not None else self._source.visible_nodes()

    def _take_snapshot(self, nodes: list[Node] | None = None) -> None:
        nodes = self._visible() if nodes is None else nodes
        self._snap_keys = [n.key for n in nodes]
        self._snap_versions = [n.fold_version for n in nodes]
        self._snap_set = {key: i for i, key in enumerate(self._snap_keys)}
        self._snap_early = []
        self._snap_path = nodes if hasattr(self._source, "visible_path") else None
        self._snap_mark = self._tree().fold_mark()

    def _update_snapshot(self) -> bool | None:
        """Bring the snapshot up to date from the tree's change alone: the nodes appended to the
        visible path it was taken from and the nodes folded since. Returns whether the visible
        nodes (or a projection) changed — what a full comparison would answer — or None when the
        path was rebuilt (a structural change, another selection) and only a full diff can tell."""
        if self._snap_path is None:
            return None
        path = self._visible()
        held = len(self._snap_keys)
        if path is not self._snap_path or len(path) < held:
            return None
        tree = self._tree()
        folded = tree.folded_since(self._snap_mark)
        if folded is None:
            return None
        changed = len(path) > held
        versions, index = self._snap_versions, self._snap_set
        for node in folded:
            i = index.get(node.key)
            if i is not None and i < held and path[i] is node and versions[i] != node.fold_version:
                versions[i] = node.fold_version
                changed = True
        self._snap_mark = tree.fold_mark()
        if changed:
            for key in self._snap_early:
                index.pop(key, None)
            self._snap_early = []
            for i in range(held, len(path)):
                node = path[i]
                self._snap_keys.append(node.key)
                versions.append(node.fold_version)
                index[node.key] = i
        return changed

    def _emit_update(self) -> None:
        if not self._walking:
            self._emitter.emit("update")

    def _recompute_and_emit(self, only_if_changed: bool = False) -> None:
        """Refresh the snapshot and emit ``update`` (only when the visible nodes or one of their
        projections changed, with ``only_if_changed``)."""
        self._bind()
        if only_if_changed:
            changed = self._update_snapshot()
            if changed is not None:
                if changed:
                    self._emit_update()
                return
        nodes = self._visible()
        if (
            only_if_changed
            and [n.key for n in nodes] == self._snap_keys
            and [n.fold_version for n in nodes] == self._snap_versions
        ):
            self._snap_path, self._snap_mark = (  # the same nodes: diff from this path next time
                nodes if hasattr(self._source, "visible_path") else None,
                self._tree().fold_mark(),
            )
            return
        self._take_snapshot(nodes)
        self._emit_update()

    def _folding(self) -> bool:
        return self._hydrator().is_folding()

    def _on_change(self, *_: Any) -> None:
        # a structural tree change: emit only when this view's visible nodes changed
        if self._folding():
            return
        reconcile = getattr(self._source, "on_visible_nodes_changed", None)
        if reconcile is not None:
            reconcile(self._snap_set)  # the keys shown, as a dict: O(1) lookups, never a walk
        self._recompute_and_emit(only_if_changed=True)

    def _on_replaced(self, *_: Any) -> None:
        # the tree adopted a refold (a loss of continuity): one update, whatever changed
        reconcile = getattr(self._source, "on_visible_nodes_changed", None)
        if reconcile is not None:
            reconcile(list(self._snap_keys))
        self._recompute_and_emit()

    def _on_output(self, event: OutputChanged) -> None:
        # a fold into a node: emit when the node is visible (every fold, as 0.8.0)
        if self._folding():
            return
        for key in (event.run_id, event.input_codec_message_id):
            i = self._snap_set.get(key) if isinstance(key, str) else None
            if i is not None and isinstance(key, str):
                node = self._tree().get_node(key)
                if i < len(self._snap_versions):
                    self._snap_versions[i] = node.fold_version if node is not None else -1
                self._emit_update()
                return

    def _on_run(self, change: RunFolded) -> None:
        # lifecycle of a visible run, or the start of a run that will be visible
        if self._folding():
            return
        event = change.event
        if event.run_id in self._snap_set:
            self._emitter.emit("run", event)
        elif event.type == "start" and self._run_start_visible(event):
            self._snap_set[event.run_id] = len(self._snap_keys)
            self._snap_early.append(event.run_id)
            self._emitter.emit("run", event)

    def _run_start_visible(self, event: Any) -> bool:
        if event.parent is None:
            return True
        parent = self._tree().get_node_by_codec_message_id(event.parent)
        return parent is None or parent.key in self._snap_set

    def _on_ably_message(self, change: WireFolded) -> None:
        if change.refold or self._folding():
            return  # a wire of history (or of a refold's shadow tree): no event, as 0.8.0
        message = change.wire
        h = transport_headers(message.get("extras"))
        run_id = h.get(H_RUN_ID)
        if (not h.get(H_CODEC_MESSAGE_ID) and not run_id) or (run_id and run_id in self._snap_set):
            self._emitter.emit("ably-message", message)

    def on(self, event: str, handler: Callable[..., Any]) -> Callable[[], None]:
        """Listen to ``update`` (the visible messages changed), ``run`` (lifecycle of a run on this
        branch) or ``ably-message`` (a wire of this branch); returns an unsubscribe."""
        return self._emitter.on(event, handler)

    # -- reads -------------------------------------------------------------------------------

    @property
    def branch(self) -> NavigableBranch | LeafBranch:
        """The branch source deciding which nodes this view shows."""
        return self._source

    def _all_messages(self) -> list[Any]:
        self._bind()
        return self._source.extract_messages(self._source.visible_nodes())

    def get_messages(self) -> list[Any]:
        """The visible messages (``CodecMessage``: ``codec_message_id``, ``message``), oldest first."""
        return self._all_messages()[self._hidden :]

    def runs(self) -> list[RunInfo]:
        """:class:`RunInfo` of every run on this branch."""
        self._bind()
        return [n.info() for n in self._source.visible_nodes() if isinstance(n, RunNode)]

    def run_of(self, codec_message_id: str) -> RunInfo | None:
        """The run a message belongs to (for a user prompt: the run replying to it)."""
        node = self._tree().get_node_by_codec_message_id(codec_message_id)
        if node is None:
            return None
        if isinstance(node, RunNode):
            return node.info()
        reply = self._source.selected_reply_run(node.codec_message_id)
        return reply.info() if reply is not None else None

    def run(self, run_id: str) -> RunInfo | None:
        """The run ``run_id`` (anywhere in the tree)."""
        node = self._tree().get_run_node(run_id)
        return node.info() if node is not None else None

    def has_older(self) -> bool:
        """True while older messages are hidden or history may hold more."""
        return self._hidden > 0 or self._hydrator().has_next()

    async def load_older(self, limit: int = 10) -> list[Any]:
        """Reveal up to ``limit`` older messages (reading history only when needed), oldest first."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise InvalidArgumentError(
                f"unable to load older messages; limit must be a positive integer, got {limit!r}"
            )
        if self._closed:
            return []
        before_visible = self.get_messages()
        if self._hidden >= limit:
            self._hidden -= limit
        else:
            need = limit - self._hidden
            before = len(self._all_messages())
            hydrator = self._hydrator()
            await hydrator.fold_until(lambda: len(self._all_messages()) - before >= need)
            after = len(self._all_messages())
            self._hidden = max(0, self._hidden + (after - before) - limit)
        now = self.get_messages()
        revealed = now[: max(0, len(now) - len(before_visible))]
        self._recompute_and_emit()
        return revealed

    async def load_until(
        self, predicate: Callable[[Any], bool], signal: asyncio.Event | None = None
    ) -> list[Any]:
        """Page older messages until one matches ``predicate`` (``loadUntil`` of 0.8.0).

        The view then shows only the messages strictly newer than the first (oldest) match among
        those visible when it was found; returns them. History exhausted without a match: returns
        every message. Concurrent walks run one after another; ``update`` is emitted once, when the
        walk settles. ``signal`` (set it to abandon the walk, checked between reveals) or a closed
        view: returns ``[]``.
        """
        if signal is not None and signal.is_set():
            return []
        async with self._walk_lock:
            return await self._walk(predicate, signal)

    async def _walk(self, predicate: Callable[[Any], bool], signal: asyncio.Event | None) -> list[Any]:
        def aborted() -> bool:
            return self._closed or (signal is not None and signal.is_set())

        if aborted():
            return []
        self._walking = True
        try:

            def seam(page: list[Any]) -> list[Any] | None:
                for i, message in enumerate(page):
                    if predicate(message):
                        self._hidden += i + 1
                        return self.get_messages()
                return None

            found = seam(self.get_messages())
            if found is not None:
                return found
            while self.has_older():
                if aborted():
                    return []
                found = seam(await self.load_older(1))
                if found is not None:
                    return found
            return self.get_messages()
        finally:
            self._walking = False
            if not aborted():
                self._recompute_and_emit()

    async def load_all(self) -> list[Any]:
        """Load every older message (as ``while has_older(): load_older(100)``); returns all
        messages. Folds the remaining history in one pass (linear in its length)."""
        if self._closed:
            return self.get_messages()
        await self._hydrator().fold_until(lambda: False)
        self._hidden = 0
        self._recompute_and_emit()  # as load_older: what the view shows now is its snapshot
        return self.get_messages()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until ``predicate()`` holds, re-checking on every update (raises TimeoutError)."""
        if predicate():
            return
        event = asyncio.Event()

        def check(*_: Any) -> None:
            if predicate():
                event.set()

        offs = [self.on("update", check), self.on("run", check), self.on("ably-message", check)]
        try:
            await asyncio.wait_for(event.wait(), timeout)
        finally:
            for off in offs:
                off()

    def close(self) -> None:
        """Stop listening to the session."""
        self._closed = True
        for off in self._unsubs:
            off()
        self._unsubs = []
        self._emitter.clear()
