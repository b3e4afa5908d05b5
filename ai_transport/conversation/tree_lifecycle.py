"""Run and step lifecycle folded into the conversation tree (status, start serials, the step read model)."""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .changes import TREE_CHANGED, OutputChanged, Report, RunFolded
from .lifecycle import H_STEP_CLIENT_ID, RunLifecycleEvent, StepLifecycleEvent, read_step_headers
from .nodes import Node, RunNode, _Internal
from .retention import LogRetention
from .run import StepInfo
from .tree_owners import UNJUDGED, Replay

__all__ = ["LifecycleFold"]


def _first_attempt(step: tuple[str, dict[str, Any]]) -> str:
    """Sort key of a run's step: the serial of its first attempt ("" when none is known yet)."""
    return min(step[1]["serials"], default="")


class LifecycleFold:
    """The lifecycle half of :class:`~ai_transport.conversation.tree.Tree` (a mixin of it)."""

    if TYPE_CHECKING:
        _codec: Any
        _nodes: dict[str, _Internal]
        _cmid_to_key: dict[str, str]
        _seq: itertools.count[int]
        _wire: Mapping[str, Any]
        _report: Report
        status_version: int
        retention: LogRetention

        def _changed(self) -> bool: ...

        def _reference(self, node: Node) -> None: ...
        def _insert(self, key: str, entry: _Internal) -> None: ...
        def _promote(self, entry: _Internal) -> bool: ...
        def _rekey_fork_run(self, fork_cmid: str | None, run_id: str) -> _Internal | None: ...
        def _link_fork_input(self, fork_cmid: str | None, run_id: str) -> bool: ...
        def _refold(self, entry: _Internal) -> None: ...
        def _claim_run(
            self, run_id: str, publisher: Any, serial: str | None, replay: Replay, *, mutation: bool = False
        ) -> bool: ...
        def _claim_step(
            self, run_id: str, step_id: str, publisher: Any, serial: str | None, replay: Replay,
            *, mutation: bool = False,
        ) -> bool: ...
        def _flush_replays(self) -> None: ...

    # -- lifecycle ---------------------------------------------------------------------------

    def apply_run_lifecycle(
        self, event: RunLifecycleEvent, publisher: Any = UNJUDGED, wire: Mapping[str, Any] | None = None
    ) -> bool:
        """Apply a run lifecycle event (start/resume/suspend/end) to its run node.

        ``publisher``: who Ably says published the wire (``wire``); the run id belongs to the first
        identity in serial order (:mod:`.ownership`): another's event is refused (False). Without a
        publisher (a session's own run start) nothing is judged."""
        # (a lifecycle wire carries only headers: the replay keeps it whole, no slimmed copy per wire)
        kept = wire if wire is not None else {"serial": event.serial, "clientId": publisher}
        replay = Replay("apply_run_lifecycle", (event, publisher, kept), event.serial, kept)
        self._wire = kept
        if not self._claim_run(event.run_id, publisher, event.serial, replay):
            return False
        self._apply_run_lifecycle(event)
        self._flush_replays()
        return True

    def _apply_run_lifecycle(self, event: RunLifecycleEvent) -> None:
        structural = False
        entry = self._nodes.get(event.run_id)
        if event.type == "start":
            if entry is None:
                entry = self._rekey_fork_run(event.input_codec_message_id, event.run_id)
                if entry is not None:
                    structural = self._changed()
            if entry is not None and isinstance(entry.node, RunNode):
                node = entry.node
                self._link_fork_input(event.input_codec_message_id, event.run_id)
                # the oldest run-start in serial order places the run and names its invocation and
                # clients (a later one only fills what is missing): live, newest page first or oldest
                # first alike
                older = event.serial is not None and (
                    not entry.run_start_seen
                    or (entry.run_start_serial is not None and event.serial < entry.run_start_serial)
                )
                if older:
                    entry.run_start_serial = event.serial
                if node.status == "suspended" and self._newer(node, event):
                    node.status = "active"
                    self.status_version += 1
                if event.serial and (not node.start_serial or event.serial < node.start_serial):
                    node.start_serial = event.serial
                    structural |= self._promote(entry)
                if event.parent is not None and node.parent != event.parent and older:
                    # the agent's (oldest) run-start is authoritative for the run's place in the tree
                    # (a node created from a later wire of a resumed run may carry another parent)
                    node.parent = event.parent
                    self._reference(node)
                    structural = self._changed()
                elif node.parent is None and event.parent is not None:
                    node.parent = event.parent
                    self._reference(node)
                    structural = self._changed()
                if node.fork_of is None and event.fork_of is not None:
                    fk = self._cmid_to_key.get(event.fork_of)
                    if fk is not None and fk != event.run_id:
                        node.fork_of = fk
                        self._reference(node)
                        structural = self._changed()
                if node.regenerates is None and event.regenerates is not None:
                    node.regenerates = event.regenerates
                    structural = self._changed()
                if event.invocation_id and (older or not node.invocation_id):
                    node.invocation_id = event.invocation_id
                if event.client_id and (older or not node.client_id):
                    node.client_id = event.client_id
                if event.input_client_id is not None and (older or node.input_client_id is None):
                    node.input_client_id = event.input_client_id
                entry.run_start_seen = True
            elif entry is None:
                node = RunNode(
                    run_id=event.run_id,
                    parent=event.parent,
                    fork_of=self._cmid_to_key.get(event.fork_of) if event.fork_of else None,
                    regenerates=event.regenerates,
                    client_id=event.client_id,
                    invocation_id=event.invocation_id,
                    projection=self._codec.init(),
                    start_serial=event.serial,
                    input_client_id=event.input_client_id,
                )
                self._insert(
                    event.run_id, _Internal(node, next(self._seq), run_start_seen=True, run_start_serial=event.serial)
                )
                self._link_fork_input(event.input_codec_message_id, event.run_id)
                structural = True
        else:
            if entry is None and event.serial is not None:
                # a newer history page can bring a run's suspend/end before its start: keep it
                node = RunNode(
                    run_id=event.run_id,
                    parent=None,
                    fork_of=None,
                    regenerates=None,
                    client_id=event.client_id,
                    invocation_id=event.invocation_id,
                    projection=self._codec.init(),
                )
                entry = _Internal(node, next(self._seq))
                self._insert(event.run_id, entry)
                structural = True
            if entry is not None and isinstance(entry.node, RunNode):
                self._apply_status(entry.node, event)
        if entry is not None:
            self.retention.record_activity(self._nodes, entry, event.timestamp)
            self.retention.maybe_queue(entry)
        self._report(RunFolded(event))
        if structural:
            self._report(TREE_CHANGED)

    @staticmethod
    def _newer(node: RunNode, event: RunLifecycleEvent) -> bool:
        """True unless ``event`` is older than the event that set the current status."""
        if event.serial is None:
            return True
        if event.serial < node.status_serial:
            return False
        node.status_serial = event.serial
        return True

    def _apply_status(self, node: RunNode, event: RunLifecycleEvent) -> None:
        """Suspend / resume / end, as 0.8.0, but an event older than the one that set the current
        status (history folds newer pages first) does not override it."""
        if event.type == "resume" and event.invocation_id:
            node.last_resume_invocation_id = event.invocation_id
        if event.type == "suspend" and (
            node.last_resume_invocation_id is not None
            and event.invocation_id
            and node.last_resume_invocation_id != event.invocation_id
        ):
            return
        if event.type == "resume" and node.status != "suspended":
            return
        if not self._newer(node, event):
            return
        self.status_version += 1
        if event.type == "suspend":
            node.status = "suspended"
            node.end_serial = event.serial
        elif event.type == "resume":
            node.status = "active"
        elif event.type == "end":
            node.status = event.reason if event.reason in ("complete", "cancelled", "error") else "complete"  # type: ignore[assignment]
            node.error = event.error if event.reason == "error" else None
            node.end_serial = event.serial

    def apply_step_lifecycle(
        self, event: StepLifecycleEvent, publisher: Any = UNJUDGED, wire: Mapping[str, Any] | None = None
    ) -> bool:
        """Apply ``step-start`` / ``step-end`` to the step read model of the run; the run id and
        ``(run id, step id)`` belong to their first publisher in serial order (another's is refused:
        False)."""
        kept = wire if wire is not None else {"serial": event.serial, "clientId": publisher}
        replay = Replay("apply_step_lifecycle", (event, publisher, kept), event.serial, kept)
        self._wire = kept
        if not (
            self._claim_run(event.run_id, publisher, event.serial, replay)
            and self._claim_step(event.run_id, event.step_id, publisher, event.serial, replay)
        ):
            return False
        start = event.type == "step-start"
        self._fold_step(
            start,
            event.run_id,
            event.step_id,
            event.serial if start else event.step_start_serial,
            event.serial,
            event.reason,
            event.step_client_id,
            event.timestamp,
        )
        self._flush_replays()
        return True

    def fold_step_wire(self, name: str, headers: Mapping[str, Any], wire: Mapping[str, Any], publisher: Any) -> bool:
        """Fold an ``ai-step-start`` / ``ai-step-end`` wire (``headers``: its transport tier) as
        :meth:`apply_step_lifecycle` folds the event :func:`~.lifecycle.parse_step_lifecycle` makes
        of it, without making one (each header is read once). False when it is no step wire
        (malformed: ignored) or refused."""
        read = read_step_headers(name, headers)
        if read is None:
            return False
        start, run_id, step_id, step_start_serial, reason = read
        serial = wire.get("serial")
        replay = Replay("fold_step_wire", (name, headers, wire, publisher), serial, wire)
        self._wire = wire
        if not (
            self._claim_run(run_id, publisher, serial, replay)
            and self._claim_step(run_id, step_id, publisher, serial, replay)
        ):
            return False
        client = headers.get(H_STEP_CLIENT_ID) if start else None
        self._fold_step(
            start,
            run_id,
            step_id,
            serial if start else step_start_serial,
            serial,
            reason,
            client if client and isinstance(client, str) else "",
            wire.get("timestamp"),
        )
        self._flush_replays()
        return True

    def _fold_step(
        self,
        start: bool,
        run_id: str,
        step_id: str,
        attempt: str | None,
        serial: str | None,
        reason: str | None,
        client: str,
        timestamp: Any,
    ) -> None:
        """Fold a step-start (``start``; ``attempt`` its serial) or a step-end (``attempt``: the
        step-start-serial it ends) into the step read model of ``run_id``."""
        entry = self._nodes.get(run_id)
        structural = False
        if entry is None:  # 0.8.0 creates the run only for a step-start; history may bring the end first
            node = RunNode(
                run_id=run_id,
                parent=None,
                fork_of=None,
                regenerates=None,
                client_id="",
                invocation_id="",
                projection=self._codec.init(),
            )
            entry = _Internal(node, next(self._seq))
            self._insert(run_id, entry)
            structural = True
        if not isinstance(entry.node, RunNode):
            return
        steps = entry.steps
        rec = steps.get(step_id)
        if rec is None:
            rec = {"canonical": None, "started": False, "client": None, "serials": set(), "ends": {}}
            steps[step_id] = rec
        if attempt is not None:
            rec["serials"].add(attempt)
        if start:
            canonical = rec["canonical"]
            if not rec["started"] or (serial is not None and (canonical is None or serial > canonical)):
                rec["canonical"] = serial
                rec["client"] = client
                attempts = entry.output_attempts.get(step_id)  # (none yet: history folds a step-start first)
                if attempts is not None and self._gating_changes(attempts, canonical, serial):
                    # the canonical attempt changed under logged output: refold with only its output
                    self._refold(entry)
                    self._report(OutputChanged(entry.node.key, None, None, None, (), ()))
            rec["started"] = True
        else:
            rec["ends"][attempt] = reason
        self._place_step(entry, step_id, rec)
        self.retention.record_activity(self._nodes, entry, timestamp)
        if not start:
            self.retention.maybe_queue(entry)
        if structural:
            self._report(TREE_CHANGED)

    @staticmethod
    def _place_step(entry: _Internal, step_id: str, rec: dict[str, Any]) -> None:
        """The run's steps read model after a fold into step ``step_id`` (its record ``rec``): in
        serial order of each step's first attempt (ties: the order steps were first seen), whatever
        order history pages brought them in. Only that step's :class:`~.run.StepInfo` is new; it is
        placed by bisection (sorting every step per step wire made a run of n steps cost O(n²))."""
        node = entry.node
        assert isinstance(node, RunNode)
        keys, order, steps = entry.step_keys, entry.step_order, node.steps
        if order is None:
            order = entry.step_order = []
        old = keys.get(step_id)
        serials = rec["serials"]
        key = (min(serials, default=""), old[1] if old is not None else len(keys))
        # the step's read model from its record, made here (a call less per step wire): ``active``
        # until its canonical attempt ends
        canonical = rec["canonical"]
        status = rec["ends"].get(canonical, "active") if rec["started"] and canonical is not None else "active"
        info = StepInfo(step_id, status, len(serials), rec["client"])
        if old == key:
            steps[bisect_left(order, key)] = info
            return
        if old is not None:
            i = bisect_left(order, old)
            del order[i], steps[i]
        keys[step_id] = key
        i = len(order) if not order or order[-1] < key else bisect_left(order, key)
        order.insert(i, key)
        steps.insert(i, info)

    # -- step attempts -----------------------------------------------------------------------

    @staticmethod
    def _gating_changes(attempts: str | set[str] | None, old: str | None, new: str | None) -> bool:
        """True when a step's canonical attempt moving from ``old`` to ``new`` changes which of its
        logged output (by attempt: ``attempts``) folds: an output folds when no attempt is canonical
        yet or it is the canonical attempt's. Whatever order the step-starts arrive in (live, history
        newest page first, oldest first), the output folded is then the latest attempt's: an older
        attempt without output that was canonical for a while gates the later attempt's output until
        the later step-start arrives, which must fold it again. ``attempts``: as
        :attr:`~.nodes._Internal.output_attempts` keeps them (one attempt as itself)."""
        if attempts is not None and not isinstance(attempts, set):
            attempts = {attempts}
        if not attempts or old == new:
            return False
        if old is None:
            return any(a != new for a in attempts)
        return old in attempts or new in attempts

    @staticmethod
    def _record_step_attribution(entry: _Internal, serial: str, step_id: str, step_start_serial: str) -> None:
        """Remember which attempt of which step published the output wire at ``serial``."""
        entry.attribution[serial] = (step_id, step_start_serial)
        attempts = entry.output_attempts.get(step_id)
        if attempts is None:
            entry.output_attempts[step_id] = step_start_serial  # one attempt: itself, no set
        elif isinstance(attempts, set):
            attempts.add(step_start_serial)
        elif attempts != step_start_serial:
            entry.output_attempts[step_id] = {attempts, step_start_serial}

    @staticmethod
    def _is_gated(entry: _Internal, serial: str) -> bool:
        """True when the wire at ``serial`` belongs to a superseded (non-canonical) step attempt."""
        attr = entry.attribution.get(serial)
        if attr is None:
            return False
        rec = entry.steps.get(attr[0])
        if rec is None or rec["canonical"] is None:
            return False
        return bool(attr[1] != rec["canonical"])

    def open_step_attempts(self, run_id: str) -> list[tuple[str, str, str | None]]:
        """``(step_id, step_start_serial, step_client_id)`` of each step of ``run_id`` whose
        canonical attempt has no ``ai-step-end`` yet."""
        entry = self._nodes.get(run_id)
        if entry is None:
            return []
        out: list[tuple[str, str, str | None]] = []
        for step_id, rec in sorted(entry.steps.items(), key=_first_attempt):
            canonical = rec["canonical"]
            if rec["started"] and canonical is not None and canonical not in rec["ends"]:
                out.append((step_id, canonical, rec["client"]))
        return out

    def run_start_confirmed(self, run_id: str) -> bool:
        """True once the run's ``ai-run-start`` wire (with its serial) has been folded."""
        entry = self._nodes.get(run_id)
        return (
            entry is not None
            and entry.run_start_seen
            and isinstance(entry.node, RunNode)
            and entry.node.start_serial is not None
        )

