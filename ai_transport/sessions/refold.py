"""The refold after a loss of channel continuity, kept away from the views until it is complete.

On a loss (see :class:`~.session.SessionCore`) the session folds history into a :class:`Shadow`: a
fresh tree with its own decoder (:class:`~.tree.WireApplier`) and its own history cursor
(:meth:`~.view.HistoryHydrator.spawn`); an agent adds fresh claim and open-stream ledgers. Meanwhile
every view, run and reader keeps reading the state as it was at the loss: the refold emits no view
event (only a run locating its trigger hears of the wires it folds), and the session's own hydrator
is paused (a ``load_older`` waits for the refold, then goes on from the refold's cursor).

When the fold is done, the session commits it in one step: the live objects *adopt* the shadow's
state (:meth:`~.tree.Tree.adopt`, :meth:`~.view.HistoryHydrator.adopt`, :func:`adopt_state`) rather
than being replaced, so every reference captured earlier (views, branch selection, steer tracking,
runs, a claim waiting for its echo) sees the new state; each view then emits one ``update``, and the
live wires held meanwhile are folded in order. A second loss during a refold drops that shadow and
starts a fresh one.

If history stays unreachable (the hydrator's retries exhausted), the shadow is discarded: the views
keep the conversation as it was at the loss, the held live wires are folded onto it, and besides the
104006 of the loss the session emits the 104011 of the history read (messages published during the
gap are missing until the session is reopened).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..conversation.tree import Tree, WireApplier
from .view import HistoryHydrator

__all__ = ["Shadow", "adopt_state"]


class Shadow:
    """What one refold writes: a fresh tree (same codec and reorder window as ``tree``), its applier
    with a fresh decoder, and a fresh history cursor spawned from ``hydrator``."""

    def __init__(
        self,
        codec: Any,
        tree: Tree,
        hydrator: HistoryHydrator,
        on_refused: Callable[[Mapping[str, Any], str], None],
    ) -> None:
        #: The tree history is folded into.
        self.tree = Tree(codec)
        self.tree.retention.window_ms = tree.retention.window_ms
        self.tree.on("refused", on_refused)
        #: Folds into :attr:`tree` with a fresh decoder.
        self.applier = WireApplier(self.tree, codec.create_decoder())
        #: Local changes applied to :attr:`tree` too (replayed if a second loss restarts the refold).
        self.local: list[Callable[[Tree], Any]] = []
        #: Reads history from the newest page (up to the new attach point).
        self.hydrator = hydrator.spawn(self.applier)
        # a run locating its trigger listens on the live tree: tell it what the refold finds
        self.tree.on("ably-message", lambda message: hydrator.announce(tree, message))


def adopt_state(target: Any, source: Any) -> None:
    """Give ``target`` every attribute of ``source`` (an object of the same class) in one step:
    ``target`` keeps its identity, so whoever holds it sees the new state."""
    state = vars(target)
    state.clear()
    state.update(vars(source))
