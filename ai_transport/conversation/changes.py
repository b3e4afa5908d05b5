"""What the tree reports into its core's change queue: the view changes (:mod:`.core`).

The tree has no event emitter: every fold reports what it changed, in the order it happened,
through the one callable it was made with (the :class:`~.core.Conversation`'s queue; a bare tree
drops them). The shells drain :meth:`~.core.Conversation.changes` after every input and dispatch
each change to their subscribers (views, steer trackers, agent runs, the supervisor).

* :class:`TreeChanged` — the structure changed (nodes, order, parents, supersedes): a view
  re-reads its visible nodes.
* :class:`OutputChanged` — a fold into one node (its projection may have changed): which node
  (``run_id`` / ``input_codec_message_id``), the wire's ``codec_message_id`` and ``serial``, the
  decoded ``events`` and ``inputs``, and the step / steer stamps the wire carried. Reported per
  model delta: a slotted dataclass holding the decoder's lists as they are (no copies).
* :class:`RunFolded` — a run lifecycle event folded into the tree (live, from history, or a run's
  own local start).
* :class:`WireFolded` — a wire the tree folded (``refold``: into the shadow tree of a refold,
  which the views do not read yet).
* :class:`Replaced` — the tree adopted a refold (views update once, whatever changed).

The three made per wire (:class:`OutputChanged`, :class:`RunFolded`, :class:`WireFolded`) are
read-only by contract, not frozen: a frozen dataclass's ``__init__`` sets each field through
``object.__setattr__`` (~1 us for OutputChanged's nine, five times a plain slot's), and a history
fold makes one or two a wire. They hash and compare by value as the frozen ones do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .lifecycle import RunLifecycleEvent

__all__ = [
    "REPLACED",
    "TREE_CHANGED",
    "OutputChanged",
    "Replaced",
    "Report",
    "RunFolded",
    "TreeChange",
    "TreeChanged",
    "WireFolded",
    "discard",
]


@dataclass(frozen=True, slots=True)
class TreeChanged:
    """The tree's structure changed (reported as the one :data:`TREE_CHANGED`)."""


@dataclass(slots=True, unsafe_hash=True)
class OutputChanged:
    """A fold into the node ``run_id`` (a run) or ``input_codec_message_id`` (a prompt); see the
    module docstring. ``events`` / ``inputs`` are the decoder's own lists (read, never mutate)."""

    run_id: str | None
    input_codec_message_id: str | None
    codec_message_id: str | None
    serial: str | None
    events: Sequence[Any]
    inputs: Sequence[Any]
    step_id: str | None = None
    step_start_serial: str | None = None
    steer_codec_message_ids: Sequence[str] | None = None


@dataclass(slots=True, unsafe_hash=True)
class RunFolded:
    """A run lifecycle event folded into the tree (any source)."""

    event: RunLifecycleEvent


@dataclass(slots=True, unsafe_hash=True)
class WireFolded:
    """A wire the tree folded (after its ``event-id`` was indexed); ``refold`` when it went into a
    refold's shadow tree."""

    wire: Mapping[str, Any]
    refold: bool = False


@dataclass(frozen=True, slots=True)
class Replaced:
    """The tree adopted a refold (reported as the one :data:`REPLACED`)."""


#: The one :class:`TreeChanged` / :class:`Replaced` (they carry nothing).
TREE_CHANGED: Final = TreeChanged()
REPLACED: Final = Replaced()

#: What a tree reports.
TreeChange = TreeChanged | OutputChanged | RunFolded | WireFolded | Replaced

#: Where a tree reports (``list.append`` of its core's queue).
Report = Callable[[Any], None]


def discard(change: Any) -> None:
    """The report of a bare tree (no core): changes are dropped."""
