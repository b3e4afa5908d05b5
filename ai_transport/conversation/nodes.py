"""The nodes of the conversation tree: input nodes, run nodes, their wire logs, and the event emitter."""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .run import RunInfo, RunStatus, StepInfo

__all__ = ["CodecEvent", "Emitter", "InputNode", "Node", "RunNode", "WireLog"]

logger = logging.getLogger("ai_transport.conversation.tree")

#: ``(direction, event)`` with direction ``"input"`` or ``"output"``.
CodecEvent = tuple[str, dict[str, Any]]


class Emitter:
    """Tiny synchronous event emitter: ``on(event, handler) -> unsubscribe``; handler errors are logged."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Callable[..., Any]]] = {}

    def on(self, event: str, handler: Callable[..., Any]) -> Callable[[], None]:
        """Register ``handler`` for ``event``; returns a function that removes it."""
        self._handlers.setdefault(event, []).append(handler)

        def off() -> None:
            handlers = self._handlers.get(event, [])
            if handler in handlers:
                handlers.remove(handler)

        return off

    def emit(self, event: str, *args: Any) -> None:
        """Call every handler of ``event`` in registration order."""
        handlers = self._handlers.get(event)
        if not handlers:
            return
        for handler in list(handlers):
            try:
                handler(*args)
            except Exception:  # a listener must never break the fold
                logger.exception("listener for %r raised", event)

    def clear(self) -> None:
        """Remove every handler."""
        self._handlers.clear()


# ---------------------------------------------------------------------------------------------
# Wire log


@dataclass(slots=True)
class _LogEntry:
    serial: str
    message_id: str | None
    #: The wire's codec events, flat (:func:`flat_events`): ``direction, event, direction, event, …``
    #: (a list: a stream's appends extend it in place).
    events: list[Any]
    decoded_through: str
    #: The publisher Ably verified for the wire (its create's ``clientId``): what a refold passes
    #: the codec's fold as ``author`` (per-publisher bounds in the projection).
    author: str | None = None

    def codec_events(self) -> list[CodecEvent]:
        """The wire's events as ``(direction, event)`` pairs, in fold order."""
        return list(_pairs(self.events))


def flat_events(events: list[CodecEvent]) -> list[Any]:
    """``events`` as a log entry keeps them: one flat list (``direction, event, …``), not a list of
    pairs — a woken worker's tree logs every wire of the history, and each pair would be one more
    object the cyclic GC tracks (a tuple holding a dict is never untracked) for as long as the log."""
    flat: list[Any] = []
    for event in events:  # (a loop of extends: ~3x faster than ``list(chain.from_iterable(...))`` at 1-4 events)
        flat.extend(event)
    return flat


def _pairs(flat: list[Any]) -> zip[tuple[Any, Any]]:
    it = iter(flat)
    return zip(it, it)


def _entry_serial(entry: _LogEntry) -> str:
    return entry.serial


class WireLog:
    """Per-node record of folded wires, in serial order (``WireLog`` of 0.8.0).

    :meth:`record` returns ``"dropped"`` (re-delivery at or below the logged version, or any
    re-delivery of a discrete wire), ``"incremental"`` (appended at the tail: fold just these
    events) or ``"refold"`` (landed before a later serial: refold the node from scratch).
    """

    def __init__(self) -> None:
        self.entries: list[_LogEntry] = []
        #: True once the retention sweep dropped the decoded payloads (:mod:`.retention`).
        self.swept = False

    def sweep(self) -> None:
        """Drop every entry's decoded events, keeping its replay key (serial, decoded-through): a
        re-delivery is still dropped, a new wire only folds incrementally (nothing to refold)."""
        self.swept = True
        for entry in self.entries:
            entry.events = []

    def record(
        self,
        serial: str,
        message_id: str | None,
        events: list[CodecEvent],
        version: str | None,
        streamed: bool,
        author: str | None = None,
    ) -> str:
        """Record ``events`` of the wire at ``serial`` (published by ``author``); see the class
        docstring for the result."""
        entries = self.entries
        if not entries or entries[-1].serial < serial:  # the next wire in serial order (the commonest)
            entries.append(_LogEntry(serial, message_id, [] if self.swept else flat_events(events), version or serial, author))
            return "incremental"
        # an older wire (history pages arrive newest first) or a mutation: found by bisection, not a
        # scan from the tail (a long log read newest page first scanned all of it per wire)
        i = bisect_left(entries, serial, key=_entry_serial)
        if i < len(entries) and entries[i].serial == serial:
            entry = entries[i]
            if version is not None and (version <= entry.decoded_through or not streamed):
                return "dropped"
            if not self.swept:
                kept = entry.events  # extended in place (a stream's appends)
                for event in events:
                    kept.extend(event)
            if version is not None:
                entry.decoded_through = version
            return "incremental" if i == len(entries) - 1 or self.swept else "refold"
        entries.insert(i, _LogEntry(serial, message_id, [] if self.swept else flat_events(events), version or serial, author))
        return "incremental" if i == len(entries) - 1 or self.swept else "refold"

    def replay(self) -> list[tuple[CodecEvent, str, str | None]]:
        """Every logged event with its serial and message id, in serial order."""
        return [(ev, e.serial, e.message_id) for e in self.entries for ev in _pairs(e.events)]

    def replay_authored(self) -> list[tuple[CodecEvent, str, str | None, str | None]]:
        """:meth:`replay` with each wire's author."""
        return [(ev, e.serial, e.message_id, e.author) for e in self.entries for ev in _pairs(e.events)]


# ---------------------------------------------------------------------------------------------
# Nodes


@dataclass(eq=False)
class InputNode:
    """A user prompt (run-less ``ai-input`` with role ``user``), keyed by ``codec_message_id``."""

    codec_message_id: str
    parent: str | None
    fork_of: str | None
    projection: Any
    serial: str | None = None
    kind: Literal["input"] = "input"
    #: Bumped on every fold (keys the messages cache).
    fold_version: int = field(default=0, repr=False)
    messages_cache: tuple[int, list[Any]] | None = field(default=None, repr=False)
    #: The node key (its codec-message-id): a plain attribute, read on every fold and view walk.
    key: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        self.key = self.codec_message_id


@dataclass(eq=False)
class RunNode:
    """One run of the agent, keyed by ``run_id``: its projection, status and steps."""

    run_id: str
    parent: str | None
    fork_of: str | None
    regenerates: str | None
    client_id: str
    invocation_id: str
    projection: Any
    start_serial: str | None = None
    end_serial: str | None = None
    status: RunStatus = "active"
    error: Any = None
    input_client_id: str | None = None
    last_resume_invocation_id: str | None = None
    steps: list[StepInfo] = field(default_factory=list)
    #: Serial of the lifecycle event that set ``status`` (history folds newer pages first).
    status_serial: str = ""
    kind: Literal["run"] = "run"
    #: Bumped on every fold (keys the messages cache).
    fold_version: int = field(default=0, repr=False)
    messages_cache: tuple[int, list[Any]] | None = field(default=None, repr=False)
    #: The node key (its run id; a client fork's run is re-keyed with it, :meth:`rekey`): a plain
    #: attribute, read on every fold and view walk.
    key: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        self.key = self.run_id

    def rekey(self, run_id: str) -> None:
        """The run is ``run_id`` (a client fork's run, keyed by its codec-message-id until then)."""
        self.run_id = self.key = run_id

    def info(self) -> RunInfo:
        """A :class:`RunInfo` snapshot."""
        return RunInfo(
            run_id=self.run_id,
            client_id=self.client_id,
            invocation_id=self.invocation_id,
            steps=list(self.steps),
            status=self.status,
            error=self.error,
        )


Node = InputNode | RunNode


@dataclass(eq=False)
class _Internal:
    node: Node
    seq: int
    log: WireLog = field(default_factory=WireLog)
    optimistic: bool = False
    run_start_seen: bool = False
    #: Serial of the ``ai-run-start`` the run's identity fields (invocation, clients) come from: the
    #: oldest seen, so history in any page order gives the same fields as the live fold.
    run_start_serial: str | None = None
    #: clientId of the wire that created an input node or a client fork run (None: anonymous).
    owner: str | None = None
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per step id, the key ``node.steps`` is sorted by (its first attempt's serial, then the order
    #: steps were first seen), and the keys in ``node.steps``' order: a fold into one step places
    #: it by bisection instead of sorting every step of the run again. ``step_order`` is made with
    #: the first step (None until then: an input node has none, and an empty list is an object the
    #: cyclic GC tracks, an empty dict is not).
    step_keys: dict[str, tuple[str, int]] = field(default_factory=dict)
    step_order: list[tuple[str, int]] | None = None
    #: Output wire serial -> (step id, step-start-serial of the attempt that published it).
    attribution: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Step id -> the attempts (step-start-serials) that have published output: one as itself, two
    #: or more as a set (the usual step has one attempt, and a dict of strings is no object the
    #: cyclic GC tracks, a set is, and so is a dict holding one).
    output_attempts: dict[str, str | set[str]] = field(default_factory=dict)
    #: Latest Ably timestamp (ms) of a wire on this node, and whether it waits to be swept.
    last_activity: int = 0
    sweep_queued: bool = False
    #: Agent output wire serial -> (Ably ``connectionId`` of its create's publisher, the serial the
    #: fence judges it at: what :mod:`.fence` checks; then the create's author and wire name, what
    #: the refusal of a fenced output names).
    publishers: dict[str, tuple[str, str, str | None, Any]] = field(default_factory=dict)
    #: The key the tree's order sorted it by (``Tree._compare_key`` when last placed): what its
    #: binary searches compare, so a node whose serial just changed is still found where it is.
    sort_key: tuple[int, str, int] = (1, "", 0)
    #: Wires folded into this node that claim nothing (client inputs into a run): folded again
    #: when the run changes owner (:mod:`.tree_owners`).
    replays: list[Any] | None = None


def _sort_serial(node: Node) -> str | None:
    return node.start_serial if isinstance(node, RunNode) else node.serial


