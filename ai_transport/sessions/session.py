"""What the agent and client sessions share: the folded tree, history hydration, connect / close
plumbing and the publisher-trust predicates (see the trust notes of :mod:`.agent` and :mod:`.client`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any, ClassVar

from ..channels.modes import channel_agent, resolve_channel_modes, validate_channel_modes
from ..channels.presence import Presence
from ..channels.state import ChannelStateChange, is_continuity_lost
from ..conversation.admission import AGENT_NAMES, MUTATIONS, is_untrusted_agent_mutation, mutator_of
from ..conversation.core import (
    SKIP_MEMORY,
    Change,
    Conversation,
    OutputChanged,
    Replaced,
    RunFolded,
    Skipped,
    TreeChanged,
    WireFolded,
)
from ..conversation.lifecycle import RunLifecycleEvent
from ..conversation.retention import set_reorder_window
from ..conversation.tree import Emitter, Tree
from ..errors import AITransportError, ErrorCode
from .presence import presence_of
from .view import HistoryHydrator, IgnoresHistory

#: The tree's view changes: only subscribers get them (never ``_on_change``).
_VIEW_CHANGES: frozenset[type[Any]] = frozenset({TreeChanged, OutputChanged, RunFolded, WireFolded, Replaced})

__all__ = ["AGENT_NAMES", "MUTATIONS", "SKIP_MEMORY", "SessionCore", "is_untrusted_agent_mutation", "mutator_of"]


def default_codec() -> Any:
    """The default codec (:class:`~ai_transport.codec.codec.ResponsesCodec`), imported on demand."""
    from ..codec.codec import ResponsesCodec

    return ResponsesCodec


class SessionCore:
    """Base of :class:`~.agent.AgentSession` and :class:`~.client.ClientSession`: the asyncio shell
    over one :class:`~ai_transport.conversation.core.Conversation` (the sans-I/O core that folds the
    channel, live and from history, into its tree), an event emitter, connect / close steps.

    The shell subscribes, hands every wire to the core (``receive_live`` / ``receive_history``),
    and every local intent, then drains the core's changes (:meth:`_dispatch`) after each input:
    ``skipped`` events here, the core's own changes in the subclass's ``_on_change`` (run futures,
    restores to publish, cancels, ``wait_seen``), and every change to its subscribers
    (:meth:`subscribe`: the views, steer trackers, runs locating their trigger, the supervisor
    follow the tree's view changes this way; nothing listens to the tree). A subclass sets
    ``_log`` (its module's logger) and builds the core with :meth:`_make_core`.

    Untrusted input: every wire from the channel (live or history) is type-checked first
    (:func:`~.wire_check.wire_problem`); a malformed one, one the trust rules refuse and one the tree
    refuses (a ``codec-message-id`` another client owns) is skipped, logged as a warning and counted
    in :attr:`skipped`; ``on("skipped", handler)`` gets ``(message, reason)`` for each. A wire is
    identified by its ``serial`` and version serial and counted (and emitted, and kept in an agent's
    ``rejected`` / ``tampered``) once for the life of the session, with the reason it was first
    skipped for: the same wire read again from history (a refold after a loss of continuity, a
    ``load_older`` over what was seen live) is not reported again. A new version of a message (a
    later append or update) is a new wire. Nothing anyone publishes makes a session raise.

    **Continuity.** The session listens to the channel's state changes (``on_state_change``). After
    the first attach, a change that may have skipped messages (``failed``, ``suspended``,
    ``detached``, or ``attached`` with ``resumed`` false) is a loss of continuity: the session emits
    one ``error`` 104006 (``ChannelContinuityLost`` of 0.8.0), an agent aborts its open runs (their
    pipes end ``cancelled``), and history (as many pages as were folded before, up to the new attach
    point) is refolded into a shadow tree (:meth:`~ai_transport.conversation.core.Conversation.begin_refold`) while the views, runs and readers keep
    the conversation as it was at the loss — no view goes empty, none emits ``update`` for the
    refold. When the refold is complete the tree adopts it in one step and each view emits one
    ``update``; live wires that arrived meanwhile are held and folded after it, in order, so nothing
    published during the gap is missed: it is in history up to the attach point and live after it.
    A second loss restarts the refold; history unreachable keeps the pre-loss conversation (and
    emits the 104011 too). ``await session.rebuilt()`` waits for the refold. An agent run that was
    still locating its trigger fails with 40033; wake the worker again. (0.8.0: the client only
    emits the 104006, the agent swaps in an empty tree that later reads refill.)
    """

    _log: ClassVar[logging.Logger]

    def __init__(
        self,
        channel: Any,
        codec: Any,
        history_page_size: int,
        history_retries: int,
        history_backoff: float,
        **core_options: Any,
    ) -> None:
        self.channel = channel
        self.codec = codec if codec is not None else default_codec()
        channel_name = getattr(channel, "name", None)
        #: The sans-I/O core: the tree, the trust rules, the ledgers (:mod:`ai_transport.conversation.core`).
        self.core = Conversation(
            self.codec,
            channel_name=channel_name if isinstance(channel_name, str) else "",
            log=self._log,
            **core_options,
        )
        self.tree = self.core.tree
        self.hydrator = HistoryHydrator(
            channel,
            self.core.applier,
            self._on_history_page,
            history_page_size,
            history_retries,
            history_backoff,
            self._on_history_paused,
        )
        self._connected = False
        self._closed = False
        self._emitter = Emitter()
        #: Who gets each change of the core, by its class (:meth:`subscribe`): the handler and
        #: whether it gets the changes of a page of the session's own history too.
        self._subscribers: dict[type[Any], list[tuple[Callable[[Any], None], bool]]] = {}
        self._dispatching = False
        self._off_state: Callable[[], None] | None = None
        self._has_attached_once = False
        self._rebuild_task: asyncio.Task[None] | None = None
        #: The history cursor of the refold in flight (None when none runs).
        self._shadow: HistoryHydrator | None = None
        #: How many times channel continuity was lost (each emitted one 104006 ``error``).
        self.continuity_losses = 0
        self.channel_modes: tuple[str, ...] | None = None

    def _set_options(self, channel_modes: Any, reorder_window: Any) -> None:
        """The 0.8.0 session options ``channelModes`` / ``reorderWindowMs`` (validated, 40003)."""
        self.channel_modes = validate_channel_modes(channel_modes)
        set_reorder_window(self.tree, reorder_window)

    def _require_connected(self, method: str) -> None:
        """40003 unless :meth:`connect` completed (``requireConnected`` of 0.8.0)."""
        if not self._connected:
            raise AITransportError(
                f"unable to {method}; connect() must be called before {method}()", ErrorCode.INVALID_ARGUMENT, 400
            )

    async def _configure_channel(self) -> None:
        configure = getattr(self.channel, "configure_session", None)
        if callable(configure):
            version = getattr(import_module("ai_transport"), "__version__", "0")
            agent = channel_agent(getattr(self.codec, "adapter_tag", None), version)
            await configure(resolve_channel_modes(self.channel_modes), agent)

    @property
    def skipped(self) -> int:
        """How many channel messages this session did not fold: malformed (a field of the wrong
        type), refused by the trust rules, or refused by the tree (see the class docstring). Each
        wire counts once for the life of the session (see the class docstring)."""
        return self.core.skipped

    def _skip(self, message: Mapping[str, Any], why: str) -> None:
        """Count, log and emit ``skipped`` for a wire not folded (once per wire)."""
        self.core._skip(message, why)
        self._dispatch()

    def subscribe(self, kind: type[Any], handler: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``handler(change)`` for every change of the core of class ``kind`` (a view change
        of :mod:`ai_transport.conversation.changes`, or any other :data:`~ai_transport.conversation.core.Change`),
        in the order the core reported them, right after the input that caused it is folded (a
        page of history is one input: its changes are dispatched once it is folded, in order).
        Handlers run in subscription order; one that raises is logged and never breaks the fold.

        A handler marked :class:`~.view.IgnoresHistory` (a view's) is not called for the changes
        dispatched while :attr:`hydrator` folds a page (it ignores them anyway); a view change
        class only such handlers want is then not even queued
        (:meth:`~ai_transport.conversation.core.Conversation.receive_history_page`).
        Returns an unsubscribe."""
        handlers = self._subscribers.setdefault(kind, [])
        entry = (handler, not isinstance(handler, IgnoresHistory))
        handlers.append(entry)

        def off() -> None:
            if entry in handlers:
                handlers.remove(entry)

        return off

    def _dispatch(self) -> None:
        """Act on what the core reports changed since the last call, in order: ``skipped`` events,
        the subclass's :meth:`_on_change` for the core's own changes, then every subscriber of the
        change's class. Never re-entered: the changes a handler causes (a view listener sending a
        message) are dispatched after the ones already drained, in order."""
        if self._dispatching:
            return
        self._dispatching = True
        try:
            core, subscribers = self.core, self._subscribers
            while changes := core.changes():
                folding = self.hydrator.is_folding()  # a page of history: skip the quiet handlers
                for change in changes:
                    kind = type(change)
                    if kind not in _VIEW_CHANGES:
                        if isinstance(change, Skipped):
                            self._emitter.emit("skipped", change.wire, change.why)
                        else:
                            self._on_change(change)
                    handlers = subscribers.get(kind)
                    if handlers:
                        for handler, during_history in tuple(handlers):
                            if folding and not during_history:
                                continue
                            try:
                                handler(change)
                            except Exception:  # a listener must never break the fold
                                self._log.exception("listener for %s raised", kind.__name__)
        finally:
            self._dispatching = False

    def _on_change(self, change: Change) -> None:
        """Subclass hook: one change of the core other than a skip."""

    @property
    def presence(self) -> Presence:
        """The channel's presence set (JS ``session.presence``; see :mod:`~.presence`)."""
        return presence_of(self.channel)

    def _on_live(self, message: Mapping[str, Any]) -> None:
        """Fold one live wire (the channel listener, once no refold holds it back)."""
        if self._closed:
            return
        self.core.receive_live(message)
        self._dispatch()

    def _listen(self, message: Mapping[str, Any]) -> None:
        # After a loss of continuity the core holds live wires until history is refolded.
        self._on_live(message)

    def _on_wire(self, message: Mapping[str, Any]) -> None:
        """Fold one wire through the trust rules and the tree only (:meth:`~.Conversation.fold`)."""
        self.core.fold(message)
        self._dispatch()

    def _on_history(self, message: Mapping[str, Any]) -> None:
        """Fold one history aggregate (the agent checks integrity here first)."""
        self.core.receive_history(message)
        self._dispatch()

    def _on_history_page(self, wires: list[Mapping[str, Any]]) -> None:
        """Fold one history page, oldest first (the hydrators' page sink), then dispatch what it
        changed. While :attr:`hydrator` folds the page, the view changes whose every subscriber
        ignores history (:class:`~.view.IgnoresHistory`) are not queued; a refold's shadow pages keep
        them all."""
        mute: tuple[type[Any], ...] = ()
        if self.hydrator.is_folding():
            subscribers = self._subscribers
            mute = tuple(
                kind
                for kind in _VIEW_CHANGES
                if not any(during_history for _, during_history in subscribers.get(kind, ()))
            )
        try:
            self.core.receive_history_page(wires, mute)
        finally:
            self._dispatch()

    def _on_history_paused(self) -> None:
        """A history fold stopped paging (the hydrators' pause sink): settle what its pages left to
        a run's first read, then dispatch what that changed."""
        try:
            self.core.settle_history()
        finally:
            self._dispatch()

    async def connect(self) -> None:
        """Subscribe to every message (unfiltered) and attach."""
        if self._closed:
            raise AITransportError("unable to connect; session is closed", ErrorCode.SESSION_CLOSED, 400)
        if self._connected:
            return
        on_state = getattr(self.channel, "on_state_change", None)
        if callable(on_state) and self._off_state is None:
            self._has_attached_once = getattr(self.channel, "state", None) == "attached"
            self._off_state = on_state(self._on_state_change)
        await self._configure_channel()
        await self.channel.subscribe(self._listen)
        await self.channel.attach()
        self._connected = True

    # -- continuity ----------------------------------------------------------------------------

    #: The verb of the 104006 message (``unable to <verb>; channel continuity lost``).
    _continuity_verb: ClassVar[str] = "deliver events"

    def _on_state_change(self, change: ChannelStateChange) -> None:
        if self._closed:
            return
        if not self._has_attached_once:
            # before the first attach there is no continuity to lose
            self._has_attached_once = change.current == "attached"
            return
        if is_continuity_lost(change):
            self._lose_continuity(change)

    def _before_rebuild(self) -> None:
        """Subclass hook, called on a loss of continuity before the refold starts."""

    def _apply_local(self, change: Callable[[Tree], Any]) -> None:
        """Apply a local change (an optimistic input, a run's own start) to the tree, and to the
        shadow tree too while a refold runs, so the change survives the swap."""
        self.core.apply_local(change)
        self._dispatch()

    def _apply_local_lifecycle(self, event: RunLifecycleEvent) -> None:
        """:meth:`_apply_local` of a run lifecycle event (an agent run's own start)."""
        self.core.apply_local_lifecycle(event)
        self._dispatch()

    def _lose_continuity(self, change: ChannelStateChange) -> None:
        """Emit 104006 and refold as many history pages as were folded before into a shadow tree."""
        suffix = ", resumed: false" if change.current == "attached" else ""
        err = AITransportError(
            f"unable to {self._continuity_verb}; channel continuity lost ({change.current}{suffix})",
            ErrorCode.CHANNEL_CONTINUITY_LOST,
            500,
            cause=change.reason if isinstance(change.reason, BaseException) else None,
        )
        self._log.error("%s", err.message)
        self.continuity_losses += 1
        self._before_rebuild()
        # the session's hydrator is paused during a refold: its count is still the pre-loss one
        pages = max(1, self.hydrator.pages_folded)
        self.hydrator.pause()
        # a run locating its trigger hears what the refold finds (WireFolded(refold=True))
        self.core.begin_refold()
        shadow = self._shadow = self.hydrator.spawn(self.core.applier)
        self._dispatch()
        self._emitter.emit("error", err)
        if self._rebuild_task is not None:
            self._rebuild_task.cancel()
        self._rebuild_task = asyncio.ensure_future(self._rebuild(shadow, pages))

    async def _rebuild(self, shadow: HistoryHydrator, pages: int) -> None:
        failure: Exception | None = None
        try:
            await shadow.fold_until(lambda: shadow.pages_folded >= pages)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = exc
        if self._shadow is not shadow:
            return  # superseded by a later loss, or the session closed
        if failure is None:
            self._commit(shadow)
        else:
            self._log.error(
                "could not refold the tree from history after a loss of continuity (%s); the views keep "
                "the conversation as it was at the loss, without what was published during the gap",
                failure,
            )
            self._end_shadow(release=False)
            if not isinstance(failure, AITransportError):
                failure = AITransportError(
                    f"unable to fetch history page; {failure}", ErrorCode.HISTORY_FETCH_FAILED, cause=failure
                )
            self._emitter.emit("error", failure)
            self._release_live()  # what arrived during the gap goes onto the pre-loss tree

    def _commit(self, shadow: HistoryHydrator) -> None:
        """Swap the refold in: history cursor, then the core's decoder, ledgers and tree (views update)."""
        self._shadow = None
        self.hydrator.adopt(shadow)
        self.hydrator.resume()
        self.core.commit_refold(release=False)
        self._dispatch()  # the views update once for the refold, before the held wires fold
        self._release_live()

    def _release_live(self) -> None:
        """Fold the live wires the core held during a refold, one input at a time (each drained)."""
        for message in self.core.take_live():
            self._on_live(message)

    def _end_shadow(self, release: bool = True) -> None:
        """Drop the refold in flight (if any): folds go to the live tree again, paused reads resume."""
        if self._shadow is None:
            return
        self._shadow = None
        self.hydrator.resume()
        self.core.discard_refold(release=False)
        self._dispatch()
        if release:
            self._release_live()

    async def rebuilt(self) -> None:
        """Wait until the refold from history after the latest loss of continuity is done (a loss
        during a refold restarts it: this waits for the latest one)."""
        while (task := self._rebuild_task) is not None and not task.done():
            await asyncio.wait({task})

    def _stop_continuity(self) -> None:
        if self._off_state is not None:
            off, self._off_state = self._off_state, None
            try:
                off()
            except Exception:
                self._log.debug("removing the state listener failed", exc_info=True)
        if self._rebuild_task is not None and not self._rebuild_task.done():
            self._rebuild_task.cancel()
        self._end_shadow(release=False)
        self.core.drop_live()

    def _unsubscribe_quietly(self) -> None:
        self._stop_continuity()
        try:
            self.channel.unsubscribe(self._listen)
        except Exception:
            self._log.debug("unsubscribe failed", exc_info=True)

    async def _detach_quietly(self) -> None:
        try:
            await self.channel.detach()
        except Exception:
            self._log.debug("detach failed", exc_info=True)
