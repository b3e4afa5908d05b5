"""ai_transport.conversation: the sans-I/O conversation core under both sides' sessions.

Pure state, no event loop and no channel (like the codec's reducer): it takes wires — live, or from
history pages in any order — and folds them; the asyncio sessions in :mod:`ai_transport.sessions`
are shells that feed it what the channel delivers and publish what it asks for.

* :mod:`.core` — :class:`~.core.Conversation`, the state machine itself: wires (live, or from
  history) and local intents in, :data:`~.core.Change` s out (skips, run events, restores to
  publish, cancels, the high-water mark, and the view changes of :mod:`.changes`: what the tree
  reports as it folds, which the views render from); it owns the tree, the trust rules and every
  ledger below.
* :mod:`.lifecycle` — the wire vocabulary: header names, run / step lifecycle events, cancels.
* :mod:`.wire_check` — the shape checks every wire passes before it is folded.
* :mod:`.admission` — who may say what: the authority rule (:mod:`.authority`: trusted agent
  identities come from the session's configuration; a wire's author is the publisher Ably
  verified; an agent in presence is a configured id) and answers held until their run is known
  (:mod:`.held`).
* :mod:`.tree` (with :mod:`.nodes`, :mod:`.tree_owners`, :mod:`.tree_lifecycle`, :mod:`.retention`)
  — the conversation tree and its ownership ledger (which publisher each identifier belongs to).
* :mod:`.branch` (client views: forks, selections) and :mod:`.leaf_branch` (an agent run's view:
  what the model reads); :mod:`.steers` — steer stamps and the per-run steer tracker;
  :mod:`.client_steers` — a client's steers (echoes, stamps, outcomes) without futures.
* :mod:`.run` — the read models (``RunInfo``, ``StepInfo``, ``PipeResult``).
* integrity and the agent's ledgers: :mod:`.signing` (tags bound to channel, run and kind; history
  checks), :mod:`.live_integrity` (live verification with a key), :mod:`.own_streams` (restoring
  the agent's stream after a foreign append), :mod:`.open_streams` (what a recovering worker
  closes), :mod:`.approvals` (approvals of calls the agent never made); the claims ledger is
  :mod:`ai_transport.lease.ledger`.

Nothing here imports asyncio, nor any module that does (``tests/test_layout.py`` checks it).
"""

from .branch import BranchHandle, NavigableBranch
from .changes import OutputChanged, Replaced, RunFolded, TreeChanged, WireFolded
from .core import Change, Conversation
from .leaf_branch import LeafBranch
from .lifecycle import CancelTarget, RunLifecycleEvent
from .run import PipeResult, RunInfo, StepInfo
from .tree import Tree, WireApplier

__all__ = [
    "BranchHandle",
    "CancelTarget",
    "Change",
    "Conversation",
    "LeafBranch",
    "NavigableBranch",
    "OutputChanged",
    "PipeResult",
    "Replaced",
    "RunFolded",
    "RunInfo",
    "RunLifecycleEvent",
    "StepInfo",
    "Tree",
    "TreeChanged",
    "WireApplier",
    "WireFolded",
]
