"""The conversation as a state machine: wires and local intents in, what changed out.

:class:`Conversation` is the sans-I/O core of a session (like ``websockets``' ``protocol.py`` under
its ``asyncio/``, or h11's connection): it never touches a channel, a clock or an event loop. Its
shell (:class:`~ai_transport.sessions.agent.AgentSession`, :class:`~ai_transport.sessions.client.ClientSession`)
feeds it every wire the channel delivers and every local intent, then drains :meth:`~Conversation.changes`
and acts on them (emit session events, schedule publishes, wake futures, start cancel tasks).

Inputs:

* :meth:`~Conversation.receive_live` — a wire of the live subscription (channel order);
* :meth:`~Conversation.receive_history` — an aggregate from a history page (pages in any order; an
  agent checks its integrity first, :mod:`.signing`); :meth:`~Conversation.receive_history_page`
  folds a whole page, leaving out the view changes the shell says nobody reads meanwhile;
* :meth:`~Conversation.fold` — one wire through the trust rules and the tree, no more (what both
  of the above end in);
* local intents: :meth:`~Conversation.send_input` / :meth:`~Conversation.withdraw_input` (an
  optimistic input), :meth:`~Conversation.apply_local_lifecycle` (an agent run's own start),
  :meth:`~Conversation.apply_local` (any local change), :meth:`~Conversation.defer_cancel`, and
  the refold after a loss of continuity: :meth:`~Conversation.begin_refold` /
  :meth:`~Conversation.commit_refold` / :meth:`~Conversation.discard_refold` (history is folded
  into a shadow tree meanwhile; the tree the views read keeps the conversation as it was at the
  loss, then adopts the refold in one step).

Decisions read from the folded state: :meth:`~Conversation.trigger` (the input that woke a run,
never a copy of its event-id an older wire could still own), :meth:`~Conversation.dangling_streams`
/ :meth:`~Conversation.dangling_steps` (what a worker taking a run over closes).

Outputs (:data:`Change`, small frozen dataclasses, in the order they happened): :class:`Skipped`
(a wire not folded, counted once per wire for the core's life; :class:`Tampered` for one that
failed the integrity check), :class:`Folded`, :class:`RunChanged`,
:class:`RunFailed`, :class:`Publish`, :class:`CancelRequested`, :class:`Seen`, and the view
changes the tree reports into the same queue as it folds (:mod:`.changes`): :class:`TreeChanged`
(structure), :class:`OutputChanged` (a fold into a node, per model delta), :class:`RunFolded` (a
lifecycle event, reported before the core's :class:`RunChanged` of the same wire),
:class:`WireFolded` (every wire folded; ``refold`` for the shadow tree of a refold, whose other
changes are dropped) and :class:`Replaced` (a refold adopted). The views render from these alone:
nothing listens to the tree.

**Never raises on wire input**: whatever a publisher sends (any JSON-shaped value, any page order),
it is folded, held, or skipped and counted.

Two flavours (one class): ``agent=True`` folds as an agent does (admission always on, claims,
open / own streams, history integrity and, with a ``signing_key``, live verification, cancels);
``agent=False`` as a client (admission only with ``trusted_agent_ids``; a live ``ai-run-end`` with
reason ``error`` is reported as :class:`RunFailed`).
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .._shapes import MAPPING
from ..channels.channel import action_name
from ..codec.headers import NAME_OUTPUT, codec_headers, transport_headers
from ..errors import AITransportError, one_line, quoted
from ..lease import LEASE_NAME, LeaseLedger, parse_lease_wire
from .admission import ANSWER_KINDS, AcceptInput, Admission
from .approvals import PublishedCalls
from .authority import author_of
from .changes import REPLACED, TREE_CHANGED, OutputChanged, Replaced, RunFolded, TreeChanged, WireFolded
from .held import HeldWires
from .lifecycle import (
    EVENT_AI_INPUT,
    EVENT_AI_OUTPUT,
    EVENT_CANCEL,
    EVENT_RUN_END,
    H_CODEC_MESSAGE_ID,
    H_INPUT_CODEC_MESSAGE_ID,
    H_ROLE,
    H_RUN_ID,
    H_RUN_REASON,
    OUTPUT_WIRE_NAMES,
    RunLifecycleEvent,
    build_run_end_error,
    read_cancel_target,
)
from .live_integrity import DROP, FOLD, HOLD, SPLIT, LiveVerifier
from .open_streams import OpenStreams
from .own_streams import OwnStreams
from .signing import SIGNATURE_HEADER, HistoryIntegrity, stream_digest
from .steers import SteerLedger
from .tree import Tree, WireApplier
from .wire_check import full_problem, plainly_well_typed

__all__ = [
    "DEFERRED_CANCEL_LIMIT",
    "REPLACED",
    "SKIP_MEMORY",
    "TREE_CHANGED",
    "CancelRequested",
    "Change",
    "Conversation",
    "Folded",
    "OutputChanged",
    "Publish",
    "Replaced",
    "RunChanged",
    "RunFailed",
    "RunFolded",
    "Seen",
    "Skipped",
    "Tampered",
    "TreeChanged",
    "WireFolded",
    "adopt_state",
]

#: How many skipped wires the core remembers so that a refold does not count them again.
SKIP_MEMORY: Final = 100_000

#: Cancels one publisher has held for inputs whose run is not known yet (0.8.0's limit, per
#: publisher here); its oldest is dropped beyond. One per publisher and input: a later one of the
#: same publisher replaces its earlier one, another publisher's never does.
DEFERRED_CANCEL_LIMIT: Final = 200

#: Live wires one publisher (:func:`~.authority.author_of`) may have held while a refold runs;
#: beyond it the publisher's later ones are skipped (counted), so a flood evicts only its own.
#: A live agent streaming through a refold of a few seconds sends far fewer.
HELD_LIVE_LIMIT: Final = 10_000

_RESTORING_ACTIONS: Final = ("message.append", "message.update")


@dataclass(frozen=True)
class Skipped:
    """A wire not folded (malformed, refused by the trust rules or the tree, tampered), with why.
    Reported once per wire (``serial`` and version serial) for the core's life."""

    wire: Mapping[str, Any]
    why: str


@dataclass(frozen=True)
class Tampered(Skipped):
    """An agent wire that failed the integrity check (from history, or live with a key): a
    :class:`Skipped` whose ``why`` is ``"tampered: <problem>"``; kept in ``tampered`` too."""

    problem: str = ""


@dataclass(slots=True, unsafe_hash=True)  # read-only by contract: one a wire (see .changes)
class Folded:
    """A live wire the trust rules let through and the tree folded (a refusal by the tree's
    ownership ledger is a :class:`Skipped` besides)."""

    wire: Mapping[str, Any]


@dataclass(slots=True, unsafe_hash=True)  # read-only by contract: one a wire (see .changes)
class RunChanged:
    """A run lifecycle event folded (from ``wire``; ``live`` when it came from the subscription)."""

    event: RunLifecycleEvent
    wire: Mapping[str, Any]
    live: bool

    @property
    def input_codec_message_id(self) -> str | None:
        """The ``input-codec-message-id`` the lifecycle wire names (the input that woke the run)."""
        value = transport_headers(self.wire.get("extras")).get(H_INPUT_CODEC_MESSAGE_ID)
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class RunFailed:
    """A live ``ai-run-end`` with reason ``error`` (client flavour): the agent's error."""

    run_id: Any
    error: AITransportError


@dataclass(frozen=True)
class Publish:
    """A wire the core asks its shell to publish as an update of message ``wire["serial"]`` (the
    update restoring one of the agent's own streams after someone else appended to it, signed
    with the key if any, :mod:`.own_streams`)."""

    wire: dict[str, Any]


@dataclass(frozen=True)
class CancelRequested:
    """A live ``ai-cancel`` naming a run (``run_id``: its own, or the run the input it names woke)
    or an input whose run is not known here yet (``run_id`` None: the shell defers it with
    :meth:`Conversation.defer_cancel` unless it knows the run)."""

    wire: Mapping[str, Any]
    run_id: str | None
    input_codec_message_id: str | None


@dataclass(slots=True, unsafe_hash=True)  # read-only by contract: one a wire (see .changes)
class Seen:
    """The live subscription delivered a wire at ``serial`` (the highest so far): every earlier wire
    has been folded (delivery is in channel order)."""

    serial: str


#: What :meth:`Conversation.changes` returns.
Change = (
    Skipped
    | Folded
    | RunChanged
    | RunFailed
    | Publish
    | CancelRequested
    | Seen
    | TreeChanged
    | OutputChanged
    | RunFolded
    | WireFolded
    | Replaced
)


def adopt_state(target: Any, source: Any) -> None:
    """Give ``target`` every attribute of ``source`` (an object of the same class) in one step:
    ``target`` keeps its identity, so whoever holds it sees the new state."""
    state = vars(target)
    state.clear()
    state.update(vars(source))


def _apply_optimistic(inp: dict[str, Any], headers: Mapping[str, str], client_id: str | None, tree: Tree) -> None:
    tree.apply_message([inp], [], headers, client_id=client_id)


def _drop_optimistic(key: str, tree: Tree) -> None:
    node = tree.get_node(key)
    if node is not None and getattr(node, "serial", None) is None:
        tree.delete(key)


class _Refold:
    """What one refold writes: a fresh tree (same codec, reorder window and lease as ``tree``)
    with its own decoder, the local changes applied meanwhile, and (agent) fresh ledgers. The
    shadow tree's view changes are dropped (the views read the live tree until the commit); only
    its folded wires are reported (``WireFolded(refold=True)``: a run locating its trigger)."""

    def __init__(
        self,
        codec: Any,
        tree: Tree,
        on_refused: Callable[[Mapping[str, Any], str], None],
        queue: list[Change],
    ) -> None:
        def report(change: Any) -> None:
            if type(change) is WireFolded:
                queue.append(WireFolded(change.wire, True))

        self.tree = Tree(codec, report, on_refused)
        self.tree.retention.window_ms = tree.retention.window_ms
        self.tree.fence.lease_ms = tree.fence.lease_ms
        self.tree.judge_runs = tree.judge_runs
        self.applier = WireApplier(self.tree, codec.create_decoder())
        self.local: list[Callable[[Tree], Any]] = []


class Conversation:
    """One channel's conversation, folded; see the module docstring.

    Args:
        codec: the codec class (``create_decoder()``).
        agent: fold as an agent (see the module docstring) rather than as a client.
        trusted_agent_ids: publisher ids whose outputs / lifecycle count (from configuration only;
            a client without them trusts every publisher, as 0.8.0).
        trusted_client_ids: client ids always accepted for inputs into a run.
        accept_input: ``(client_id, run_node) -> bool`` replacing the default input rule (agent).
        signing_key: the agent's key (:mod:`.signing`, :mod:`.live_integrity`).
        channel_name: the channel the conversation is on (signatures are bound to it).
        log: where skipped wires and dropped cancels are logged (the shell's logger).
    """

    def __init__(
        self,
        codec: Any,
        *,
        agent: bool = False,
        trusted_agent_ids: Iterable[Any] | None = None,
        trusted_client_ids: Iterable[str] = (),
        accept_input: AcceptInput | None = None,
        signing_key: bytes | str | None = None,
        channel_name: str = "",
        log: logging.Logger | None = None,
    ) -> None:
        self.codec = codec
        self.agent = agent
        self.log = log if log is not None else logging.getLogger(__name__)
        self._changes: list[Change] = []
        #: View change classes the live tree's reports are not queued for (:meth:`receive_history_page`).
        self._muted: frozenset[type[Any]] = frozenset()
        #: Steers folded by run since the core was made (agent: a run created later seeds them).
        self.steer_ledger = SteerLedger() if agent else None
        #: The tree the views read (a refold adopts into it, keeping its identity); it reports
        #: its view changes into this core's queue (:mod:`.changes`).
        self.tree = Tree(codec, self._report_agent if agent else self._report_client, self._skip)
        self._live_applier = WireApplier(self.tree, codec.create_decoder())
        #: Where wires are folded: the live tree, or the shadow tree while a refold runs.
        self.applier = self._live_applier
        self._skipped = 0
        self._skipped_wires: dict[tuple[str, str], None] = {}
        self._refold: _Refold | None = None
        #: Live wires held while a refold runs (folded after it, in arrival order), and how many
        #: each publisher has held (at most :data:`HELD_LIVE_LIMIT`).
        self._held_live: list[Any] | None = None
        self._held_live_by: dict[str | None, int] = {}
        #: The trust rules (always for an agent; for a client only with ``trusted_agent_ids``).
        self.admission: Admission | None = None
        if agent or trusted_agent_ids is not None:
            self.admission = Admission(
                trusted_agent_ids if trusted_agent_ids is not None else (),
                trusted_client_ids,
                accept_input,
                self.reject if agent else self._skip,
            )
        # only trusted agents' run wires fold: a run is its first identity's (:mod:`.ownership`); a
        # client that trusts every publisher (0.8.0's view) shows them all
        self.tree.judge_runs = self.admission is not None
        trusted: set[Any] = self.admission.trusted_agent_ids if self.admission is not None else set()
        self._trusted = trusted  # shared with admission and integrity: updated in place
        #: Messages ignored by the trust rules or tampered (agent; most recent last).
        self.rejected: list[Mapping[str, Any]] = []
        #: Every trusted claim folded, by run (:mod:`ai_transport.lease.ledger`).
        self.claims = LeaseLedger()
        #: Every trusted stream folded, by run (what a recovering worker closes).
        self.open_streams = OpenStreams()
        #: What this agent's live runs wrote to their streams (:mod:`.own_streams`).
        self.own_streams = OwnStreams()
        #: Call ids the agent's trusted output declared (:mod:`.approvals`).
        self.published_calls = PublishedCalls()
        #: Integrity of agent output folded from history (and the signer of the agent's output).
        self.integrity = HistoryIntegrity(signing_key if agent else None, trusted, channel_name)
        #: With a key: checks every live agent output wire's tag (:mod:`.live_integrity`).
        self.live_verifier = (
            LiveVerifier(self.integrity.key, self._skip, self.integrity.channel) if self.integrity.key else None
        )
        if self.live_verifier is not None:
            self.integrity.pending = self.live_verifier.pending
        #: Where folds record claims / streams / verified history: the live objects, or twins in a refold.
        self._claims_sink, self._streams_sink = self.claims, self.open_streams
        self._verifier_sink = self.live_verifier
        #: Input codec-message-id -> the run it woke (filled by the agent's runs).
        self.run_by_input_cmid: dict[str, str] = {}
        #: Cancels held for inputs whose run is not known yet (bounded per publisher).
        self.deferred_cancels = HeldWires(
            1,
            DEFERRED_CANCEL_LIMIT,
            self._dropped_cancel,
            "a later cancel of the same input by the same publisher",
            f"more than {DEFERRED_CANCEL_LIMIT} cancels held for inputs not yet run",
        )
        self._cancel_arrivals = itertools.count()
        #: The highest serial (or version serial) the live subscription delivered.
        self.high_water = ""

    # -- output ----------------------------------------------------------------------------------

    def changes(self) -> list[Change]:
        """What happened since the last call, in order (and forget it)."""
        queue = self._changes
        if not queue:
            return []
        out = queue[:]
        queue.clear()
        return out

    def _report_agent(self, change: Change) -> None:
        """The live tree's report (agent): queue the change (unless muted); a fold's steers go to
        the ledger too (always)."""
        if type(change) not in self._muted:
            self._changes.append(change)
        if type(change) is OutputChanged:
            ledger = self.steer_ledger
            if ledger is not None:
                ledger.note(change)

    def _report_client(self, change: Change) -> None:
        """The live tree's report (client): queue the change (unless muted)."""
        if type(change) not in self._muted:
            self._changes.append(change)

    @property
    def skipped(self) -> int:
        """How many wires were not folded (each counted once for the core's life)."""
        return self._skipped

    @property
    def tampered(self) -> list[Mapping[str, Any]]:
        """Agent messages that failed the integrity check (history and, with a key, live)."""
        return self.integrity.tampered

    @property
    def trusted_agent_ids(self) -> set[Any] | None:
        """The trusted agent identities the trust rules use (None: a client trusting everyone)."""
        return self.admission.trusted_agent_ids if self.admission is not None else None

    @property
    def refolding(self) -> bool:
        """True between :meth:`begin_refold` and its commit / discard."""
        return self._refold is not None

    # -- skips -----------------------------------------------------------------------------------

    def first_skip(self, message: Any) -> bool:
        """True the first time a wire (``serial``, version serial) is not folded; False when it was
        counted already (seen live and again in a refold). A wire without a string serial cannot be
        told apart and counts each time. The last :data:`SKIP_MEMORY` wires are remembered."""
        serial = message.get("serial") if isinstance(message, MAPPING) else None
        if not isinstance(serial, str):
            return True
        version = message.get("version")
        version_serial = version.get("serial") if isinstance(version, MAPPING) else None
        key = (serial, version_serial if isinstance(version_serial, str) and version_serial else serial)
        if key in self._skipped_wires:
            return False
        self._skipped_wires[key] = None
        if len(self._skipped_wires) > SKIP_MEMORY:
            del self._skipped_wires[next(iter(self._skipped_wires))]
        return True

    def _skip(self, message: Mapping[str, Any], why: str) -> None:
        if self.first_skip(message):
            self._count_skip(message, why)

    def _count_skip(self, message: Mapping[str, Any], why: str, tampered: str | None = None) -> None:
        self._skipped += 1
        why = one_line(why)  # a reason may quote what a member published: one printable line, bounded
        # the first 100, then every 1000th at warning level: a flood must not flood the logs too
        level = logging.WARNING if self._skipped <= 100 or self._skipped % 1000 == 0 else logging.DEBUG
        if self.log.isEnabledFor(level):  # (a flood's skips mostly log nothing: nothing to format)
            mapping = isinstance(message, MAPPING)
            client_id = message.get("clientId") if mapping else None
            author = author_of(message) if mapping else None
            # a mutation names who made it too (Ably's ``version.clientId``): another member's update
            # of alice's wire is mallory's doing, not alice's
            by = f", {action_name(message.get('action'))} by {quoted(author)}" if author is not None and author != client_id else ""
            name = message.get("name") if mapping else None
            if not (type(name) is str and len(name) <= 60 and name.isascii() and name.isprintable()):
                name = quoted(name)  # an untrusted name as its repr, cut: a lone surrogate never reaches a handler raw
            self.log.log(
                level,
                "skipped %s from client %s (serial %s%s): %s (%d skipped so far)",
                name,
                quoted(client_id),
                quoted(message.get("serial") if mapping else None),
                by,
                why,
                self._skipped,
            )
        self._changes.append(Skipped(message, why) if tampered is None else Tampered(message, why, tampered))

    def _well_formed(self, message: Any) -> bool:
        if plainly_well_typed(message):  # (wire_problem, its two steps asked here: one call a wire)
            return True
        problem = full_problem(message)  # (None too: the fast path only said "look closer")
        if problem is None:
            return True
        self._skip(message if isinstance(message, MAPPING) else {}, f"malformed: {problem}")
        return False

    def reject(self, message: Mapping[str, Any], why: str) -> None:
        """A wire the agent's trust rules refused: kept in :attr:`rejected`, counted once; a refused
        append / update of one of the agent's live streams asks for its restore (:class:`Publish`)."""
        self._foreign_mutation(message)
        if self.first_skip(message):
            self.rejected.append(message)
            self._count_skip(message, why)

    def _refuse_tampered(self, message: Mapping[str, Any], problem: str) -> None:
        self._foreign_mutation(message)
        if self.first_skip(message):
            self.integrity.record(message, problem)
            self.published_calls.note_tampered(message)
            self.rejected.append(message)
            self._count_skip(message, f"tampered: {problem}", problem)

    def _foreign_mutation(self, message: Mapping[str, Any]) -> None:
        serial = message.get("serial")
        if serial not in self.own_streams or action_name(message.get("action")) not in _RESTORING_ACTIONS:
            return
        restore = self.own_streams.foreign(serial)
        if restore is not None:
            self.integrity.sign_update(restore)
            self._changes.append(Publish(restore))

    # -- input -----------------------------------------------------------------------------------

    def receive_live(self, message: Any) -> None:
        """Fold one wire the live subscription delivered (never raises). While a refold runs it is
        held and folded after the refold, so a replayed append lands on its message rather than
        starting it (history holds the aggregates up to the new attach point, live the rest)."""
        held = self._held_live
        if held is not None:
            self._hold_live(held, message)
            return
        if not self._well_formed(message):
            return
        if self.agent:
            self._fold_agent(message, live=True)
            version = message.get("version")
            mark = max(
                str(message.get("serial") or ""),
                str(version.get("serial") or "") if isinstance(version, MAPPING) else "",
            )
            if mark > self.high_water:
                self.high_water = mark
                self._changes.append(Seen(mark))
            if message.get("name") == EVENT_CANCEL:
                self.route_cancel(message)
        elif self._fold_client(message, live=True):
            self._changes.append(Folded(message))

    def receive_history(self, message: Any) -> None:
        """Fold one aggregate read from history (an agent checks its integrity first; never raises)."""
        if not self._well_formed(message):
            return
        if not self.agent:
            self._fold_client(message, live=False)
            return
        problem = self.integrity.problem(message)
        if problem is not None:
            self._refuse_tampered(message, problem)
            return
        verifier = self._verifier_sink
        if (
            verifier is not None
            and message.get("name") == EVENT_AI_OUTPUT
            and message.get("clientId") in self._trusted
        ):
            verifier.adopt(message)  # verified (problem() checked the tag): live appends go on from it
        self._fold_agent(message)
        if verifier is not None and verifier is self.live_verifier:
            self._settle(verifier)

    def receive_history_page(self, wires: Iterable[Any], mute: Iterable[type[Any]] = ()) -> None:
        """Fold a page of history aggregates, oldest first, each as :meth:`receive_history` does
        (never raises). The view changes (:mod:`.changes`) of the classes in ``mute`` that the
        page's folds report are not queued: the shell names the ones no subscriber reads while a
        history page folds (the rest of :meth:`changes`, and the steer ledger, are as ever)."""
        muted, self._muted = self._muted, frozenset(mute)
        tree = self.applier.tree
        deferred, tree.page_folding = tree.page_folding, True  # fences settled once a page
        # (a refold's shadow tree reports its wires whatever is muted: a run locating its trigger)
        reported, tree.wires_reported = tree.wires_reported, tree is not self.tree or WireFolded not in self._muted
        try:
            receive = self.receive_history
            for wire in wires:
                receive(wire)
        finally:
            tree.page_folding = deferred
            tree.wires_reported = reported
            if not deferred:
                tree.settle_fences()
            self._muted = muted

    def settle_history(self) -> None:
        """A history fold paused (its reader stopped paging): what its pages left to the first
        read of a run (the outputs its lease wires fence, :meth:`~.tree.Tree.settle_deferred_fences`)
        is settled and reported now (never raises)."""
        self.tree.settle_deferred_fences()

    def fold(self, message: Any) -> None:
        """Fold one wire through the trust rules and the tree only (no history integrity check, no
        live-only step; never raises)."""
        if not self._well_formed(message):
            return
        if self.agent:
            self._fold_agent(message)
        else:
            self._fold_client(message, live=False)

    def _settle(self, verifier: LiveVerifier) -> None:
        """Report the pending appends the verifier found foreign; fold the ones it released."""
        if not verifier.unsettled:
            return
        for refused, why in verifier.take_refused():
            self._refuse_tampered(refused, why)
        for released in verifier.take_released():
            self._fold_agent(released, live=True)

    def _fold_agent(self, message: Mapping[str, Any], live: bool = False) -> None:
        trusted = self._trusted
        if message.get("name") == LEASE_NAME:
            parsed = parse_lease_wire(message, trusted)
            refused = self._claims_sink.note(message, trusted, parsed)
            if refused is not None:
                self.reject(message, refused)
                return
            # The fence parses for the publisher alone ({clientId}): the same answer as for every
            # trusted id unless another identity mutated the wire, so it is parsed once, not twice.
            version = message.get("version")
            mutator = version.get("clientId") if isinstance(version, MAPPING) else None
            same = mutator == message.get("clientId") or (mutator is None and None not in trusted)
            self.applier.tree.note_lease(message, parsed if same else None)  # fences late outputs
            return
        tree = self.applier.tree  # the shadow tree while a refold runs
        admission = self.admission
        assert admission is not None  # an agent always has its trust rules
        # the transport tier, read once for the trust rules, the ledger, the applier and the tree
        headers = transport_headers(message.get("extras"))
        verdict = admission.admit(message, tree, headers)
        if verdict is None:
            admission.hold(message)
            return
        if not verdict:
            return
        verifier = self.live_verifier if live else None
        if verifier is not None:
            outcome = verifier.check(message)
            if outcome == SPLIT:  # a rolled-up delivery: fold the agent's part (the wire is reported)
                message, outcome = verifier.take_substitute(), FOLD
                headers = transport_headers(message.get("extras"))  # (the substitute's own tier)
            if outcome != FOLD:
                if outcome != HOLD and outcome != DROP:
                    self._refuse_tampered(message, outcome)
                self._settle(verifier)
                return
        if headers.get(H_ROLE, "user") != "user" and message.get("name") == EVENT_AI_INPUT:
            message, headers = self._spoken_as_user(message, headers)
        # the open-stream and published-call ledgers read an output's wires only: no call for the rest
        if message.get("name") in OUTPUT_WIRE_NAMES:
            self._streams_sink.note(message, headers)
            if message.get("clientId") in trusted:
                self.published_calls.note(message)
        event = self.applier.apply(message, headers)
        tree.emit_ably_message(message, headers)
        if verifier is not None:
            self._settle(verifier)
        if isinstance(event, RunLifecycleEvent):
            self._changes.append(RunChanged(event, message, live))
            if event.type == "start":
                for held in admission.release(event.run_id):
                    self._fold_agent(held)

    def _fold_client(self, message: Mapping[str, Any], live: bool) -> bool:
        tree = self.applier.tree  # the shadow tree while a refold runs
        admission = self.admission
        headers = transport_headers(message.get("extras"))  # read once for the trust rules, the applier and the tree
        if admission is not None:
            verdict = admission.admit(message, tree, headers)
            if verdict is None:
                admission.hold(message)
                return False
            if not verdict:
                return False
            if headers.get(H_ROLE, "user") != "user" and message.get("name") == EVENT_AI_INPUT:
                message, headers = self._spoken_as_user(message, headers)
        if live and message.get("name") == EVENT_RUN_END and headers.get(H_RUN_REASON) == "error":
            err = build_run_end_error(headers)
            self.log.error(
                "run %s ended with an agent error: %s", quoted(headers.get(H_RUN_ID)), one_line(err.message)
            )
            self._changes.append(RunFailed(headers.get(H_RUN_ID), err))
        event = self.applier.apply(message, headers)
        if isinstance(event, RunLifecycleEvent):
            self._changes.append(RunChanged(event, message, live))
        tree.emit_ably_message(message, headers)
        if admission is not None and isinstance(event, RunLifecycleEvent) and event.type == "start":
            for held in admission.release(event.run_id):
                self._fold_client(held, live)
        return True

    def _spoken_as_user(
        self, message: Mapping[str, Any], headers: dict[str, str]
    ) -> tuple[Mapping[str, Any], dict[str, str]]:
        """A member's ``ai-input`` declaring another role than ``user`` (``assistant``, ``system``)
        folds as the user's message it is: the role is self-declared, and only a trusted agent
        speaks as the assistant (authority is who Ably says published a wire, never what it says
        of itself). A trusted agent's input, and an answer (a tool result or approval: a client
        fork's is ``role: assistant`` by 0.8.0's design, its run the agent's to start), stay as
        they are."""
        if author_of(message) in self._trusted:
            return message, headers
        extras: dict[str, Any] = message["extras"]  # (a transport tier with a role: the wire check saw
        if codec_headers(extras).get("kind") in ANSWER_KINDS:  # extras and extras.ai are objects)
            return message, headers
        if self.log.isEnabledFor(logging.INFO):
            self.log.info(
                "ai-input of %s declaring role %s folded as a user message", quoted(author_of(message)), quoted(headers.get(H_ROLE))
            )
        user = {**headers, H_ROLE: "user"}
        ai = extras["ai"]
        return {**message, "extras": {**extras, "ai": {**ai, "transport": user}}}, user

    # -- cancels ---------------------------------------------------------------------------------

    def route_cancel(self, message: Mapping[str, Any]) -> None:
        """Report a live ``ai-cancel`` as :class:`CancelRequested` (one naming neither a run nor an
        input is logged and ignored)."""
        target = read_cancel_target(message)
        cmid = target.input_codec_message_id
        if target.run_id is None and cmid is None:
            self.log.warning("ai-cancel without run-id or input-codec-message-id ignored")
            return
        run_id = target.run_id
        if run_id is None and cmid is not None:
            run_id = self.run_by_input_cmid.get(cmid)
        self._changes.append(CancelRequested(message, run_id, cmid))

    def defer_cancel(self, message: Mapping[str, Any], input_codec_message_id: str) -> None:
        """Hold a cancel of an input whose run is not open here yet (per publisher: another member's
        cancels never replace or evict this one); the run takes it when it starts."""
        self.deferred_cancels.hold(input_codec_message_id, next(self._cancel_arrivals), message)

    def _dropped_cancel(self, message: Mapping[str, Any], why: str) -> None:
        self.log.warning("deferred cancel from %s dropped: %s", quoted(message.get("clientId")), one_line(why))

    # -- the trigger of a run -------------------------------------------------------------------

    def trigger(
        self, event_id: str, publisher: str | None, history_complete: bool, *, serial: str | None = None
    ) -> Mapping[str, Any] | None:
        """The input that woke a run, once it is settled: the wire that owns ``event_id`` (its first
        publisher in serial order, :meth:`~.tree.Tree.find_message_by_event_id`) when no older wire
        can still take the id from it — the invocation names its ``publisher`` and / or the wire's
        ``serial`` and the match is that wire, or ``history_complete`` (read to its start). A match
        a member copied the id into is never acted on while older history is unread; None until
        then. Nor is a prompt whose ``codec-message-id`` an older wire of the tree owns (a member's
        copy of someone's prompt under a fresh ``event-id``): the tree refused it, so no run answers
        it in the owner's place."""
        found = self.tree.find_message_by_event_id(event_id)
        if found is None or not self._owns_its_prompt(found):
            return None
        if publisher is not None or serial is not None:
            if publisher is not None and found.get("clientId") != publisher:
                return None
            return found if serial is None or found.get("serial") == serial else None
        return found if history_complete else None

    def _owns_its_prompt(self, wire: Mapping[str, Any]) -> bool:
        """False for a wire whose codec-message-id names a prompt another publisher owns (the
        first in serial order of the wires folded, :meth:`~.tree.Tree.prompt_owner`), judged by
        the wire's author (:func:`~.authority.author_of`)."""
        cmid = transport_headers(wire.get("extras")).get(H_CODEC_MESSAGE_ID)
        owner = self.tree.prompt_owner(cmid) if isinstance(cmid, str) else None
        return owner is None or owner[0] == author_of(wire)

    # -- recovery: what a worker taking a run over closes ----------------------------------------

    def dangling_streams(self, run_id: str, before: str | None = None) -> list[dict[str, Any]]:
        """The closing append (empty data, the stream's own tiers with ``status: cancelled``) of each
        stream of ``run_id`` still open, created before serial ``before`` if given (a resume closes
        only what was opened before its trigger: a later stream belongs to another worker woken by
        the same input, which may still be streaming). With a key, a close is tagged over the
        stream's text only when the live verifier vouched for all of it (:mod:`.live_integrity`);
        otherwise it goes out unsigned and the stream stays reported (never laundered)."""
        key = self.integrity.key
        closes: list[dict[str, Any]] = []
        for stream in self.open_streams.open_streams(run_id, before):
            transport = {k: v for k, v in stream.transport.items() if k != SIGNATURE_HEADER}
            transport["status"] = "cancelled"
            ai: dict[str, Any] = {"transport": transport}
            if stream.codec:
                ai["codec"] = stream.codec
            if key:
                verifier = self.live_verifier
                sha = verifier.accepted_sha256(stream.serial) if verifier is not None else None
                if sha is not None:  # the text is the dead agent's own: vouch for it as closed
                    transport[SIGNATURE_HEADER] = stream_digest(key, self.integrity.channel, NAME_OUTPUT, sha, {"ai": ai})
                else:
                    self.log.warning(
                        "stream %s of run %s closed unsigned: its text is not vouched for by a tag (it stays reported)",
                        stream.serial,
                        run_id,
                    )
            closes.append({"serial": stream.serial, "data": "", "extras": {"ai": ai}})
        return closes

    def dangling_steps(self, run_id: str, before: str | None = None) -> list[tuple[str, str, str | None]]:
        """``(step_id, step_start_serial, step_client_id)`` of each step attempt of ``run_id`` left
        open (started before serial ``before`` if given): what a worker taking the run over closes
        ``failed``."""
        return [s for s in self.tree.open_step_attempts(run_id) if before is None or s[1] < before]

    # -- local intents ---------------------------------------------------------------------------

    def apply_local(self, change: Callable[[Tree], Any]) -> None:
        """Apply a local change (an optimistic input, a run's own start) to the tree, and to the
        shadow tree too while a refold runs, so the change survives the swap."""
        change(self.tree)
        if self._refold is not None:
            change(self._refold.tree)
            self._refold.local.append(change)

    def apply_local_lifecycle(self, event: RunLifecycleEvent) -> None:
        """:meth:`apply_local` of a run lifecycle event (an agent run's own start)."""
        self.apply_local(lambda tree: tree.apply_run_lifecycle(event))

    def send_input(self, input: Mapping[str, Any], headers: Mapping[str, str], client_id: str | None) -> None:
        """Fold a fresh user message locally before it is published (optimistic; its echo, same
        ``codec-message-id``, replaces it)."""
        self.apply_local(functools.partial(_apply_optimistic, dict(input), headers, client_id))

    def withdraw_input(self, codec_message_id: str) -> None:
        """Drop an optimistic input whose publish failed (one already echoed stays)."""
        self.apply_local(functools.partial(_drop_optimistic, codec_message_id))

    def _hold_live(self, held: list[Any], message: Any) -> None:
        """Hold a live wire while a refold runs, at most :data:`HELD_LIVE_LIMIT` per publisher."""
        mapping = isinstance(message, MAPPING)
        author = author_of(message) if mapping else None
        count = self._held_live_by.get(author, 0)
        if count >= HELD_LIVE_LIMIT:
            why = f"more than {HELD_LIVE_LIMIT} live wires of one publisher held during a refold"
            self._skip(message if mapping else {}, why)
            return
        self._held_live_by[author] = count + 1
        held.append(message)

    # -- refold after a loss of continuity -------------------------------------------------------

    def begin_refold(self) -> Tree:
        """Start folding into a fresh shadow tree (returned): wires go there until
        :meth:`commit_refold` or :meth:`discard_refold`; the tree the views read is left as it is,
        and live wires are held meanwhile. A refold already running is dropped (its local changes
        and held live wires are carried over)."""
        previous = self._refold
        refold = self._refold = _Refold(self.codec, self.tree, self._skip, self._changes)
        for local in previous.local if previous is not None else ():
            local(refold.tree)  # a local change made during the refold this one restarts
            refold.local.append(local)
        self.applier = refold.applier
        if self._held_live is None:
            self._held_live = []
        if self.agent:  # readers keep the pre-loss ledgers; the refold fills fresh twins
            if self.admission is not None:
                self.admission.clear_held()
            self._claims_sink, self._streams_sink = LeaseLedger(), self.open_streams.twin()
            if self.live_verifier is not None:  # what the refold verifies from history replaces it
                self._verifier_sink = self.live_verifier.twin()
        return refold.tree

    def commit_refold(self, release: bool = True) -> None:
        """Adopt the refold: decoder, ledgers, then the tree (each view emits one ``update``); then
        fold the live wires held meanwhile (unless ``release`` is False: :meth:`release_live`)."""
        refold, self._refold = self._refold, None
        if refold is None:
            return
        self._live_applier.decoder = refold.applier.decoder
        self.applier = self._live_applier
        if self.agent:
            adopt_state(self.claims, self._claims_sink)
            adopt_state(self.open_streams, self._streams_sink)
            if self.live_verifier is not None and self._verifier_sink is not None:
                adopt_state(self.live_verifier, self._verifier_sink)
            self._reset_sinks()
        self.tree.adopt(refold.tree)
        if release:
            self.release_live()

    def discard_refold(self, release: bool = True) -> None:
        """Drop the refold in flight (if any): folds go to the live tree again, and the live wires
        held meanwhile are folded onto it (unless ``release`` is False: :meth:`release_live`)."""
        if self._refold is None:
            return
        self._refold = None
        self.applier = self._live_applier
        if self.agent:
            if self.live_verifier is not None:  # the gap is unknown: appends wait for a verified aggregate
                self.live_verifier.clear()
            self._reset_sinks()
        if release:
            self.release_live()

    def release_live(self) -> None:
        """Fold the live wires held during a refold, in arrival order (once it is committed or
        discarded)."""
        for message in self.take_live():
            self.receive_live(message)

    def take_live(self) -> list[Any]:
        """The live wires held during a refold, in arrival order, and forget them: a shell folds
        each with :meth:`receive_live` and drains :meth:`changes` after each (what
        :meth:`release_live` does in one step)."""
        held, self._held_live = self._held_live or [], None
        self._held_live_by = {}
        return held

    def drop_live(self) -> None:
        """Forget the live wires held during a refold (the session closed)."""
        self._held_live = None
        self._held_live_by = {}

    def _reset_sinks(self) -> None:
        self._claims_sink, self._streams_sink = self.claims, self.open_streams
        self._verifier_sink = self.live_verifier
