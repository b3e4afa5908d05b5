"""Steers as the conversation reads them: the ``steer-codec-message-ids`` stamp, the per-run tracker
(``RunSteerTracker`` of 0.8.0) and the view rule that moves an unanswered steer to its run's tail.

Pure: the agent run's steer machinery (:mod:`ai_transport.sessions.steer`) drives these.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .changes import OutputChanged

__all__ = [
    "RUNS_HELD",
    "STEERS_HELD",
    "SteerLedger",
    "SteerTracker",
    "carries_a_message",
    "defer_unresponded_steers",
    "parse_steer_stamp",
]

logger = logging.getLogger("ai_transport.sessions.steer")

M = TypeVar("M")


def parse_steer_stamp(value: Any) -> list[str] | None:
    """The codec-message-ids of a ``steer-codec-message-ids`` header (a JSON array of strings).

    None when absent or malformed (wire input: a bad stamp is logged and degrades to "no stamp");
    non-string members are dropped.
    """
    if value is None:
        return None
    try:
        parsed = json.loads(value) if isinstance(value, str) else None
    except (ValueError, RecursionError):  # (nested deeper than the parser goes: malformed too)
        parsed = None
    if not isinstance(parsed, list):
        logger.warning("ignored malformed steer-codec-message-ids header %r", value)
        return None
    ids = [i for i in parsed if isinstance(i, str)]
    return ids or None


def defer_unresponded_steers(messages: Sequence[M], is_unresponded: Callable[[str], bool]) -> list[M]:
    """Move every message whose ``codec_message_id`` is an unanswered steer to the tail, keeping the
    relative order of everything else (``deferUnrespondedSteers`` of 0.8.0)."""
    kept: list[M] = []
    deferred: list[M] = []
    for message in messages:
        cmid = getattr(message, "codec_message_id", None)
        (deferred if isinstance(cmid, str) and is_unresponded(cmid) else kept).append(message)
    return [*kept, *deferred] if deferred else list(messages)


class SteerTracker:
    """Per-run steer state (``RunSteerTracker`` of 0.8.0): steers folded but not yet drained by
    ``has_input()`` (*pending*), and those drained since the previous pass (*recently processed*,
    stamped by the next pass)."""

    def __init__(self) -> None:
        self._pending: dict[str, None] = {}
        self._recent: dict[str, None] = {}

    def add_pending(self, codec_message_id: str) -> None:
        """Record a folded steer (idempotent)."""
        self._pending[codec_message_id] = None

    def discard(self, codec_message_id: str) -> None:
        """Forget a steer an earlier pass answered (its stamp was folded)."""
        self._pending.pop(codec_message_id, None)

    def has_pending(self) -> bool:
        """True while a folded steer waits to be drained."""
        return bool(self._pending)

    def drain_pending(self) -> None:
        """Move every pending steer to the recently-processed set."""
        self._recent.update(self._pending)
        self._pending.clear()

    def consume_recently_processed(self) -> list[str]:
        """The steers drained since the previous pass, in fold order; clears them."""
        ids = list(self._recent)
        self._recent.clear()
        return ids

    def is_unresponded(self, codec_message_id: str) -> bool:
        """True for a steer still pending or drained but not yet stamped on an output."""
        return codec_message_id in self._pending or codec_message_id in self._recent


#: Steers buffered per run before the run opens (admission lets only the run's own client, or a
#: trusted one, steer it, so the bound is per publisher); the oldest beyond it are forgotten.
STEERS_HELD = 1000

#: Runs a session's :class:`SteerLedger` remembers (the least recently steered beyond it go).
RUNS_HELD = 1000


def carries_a_message(inputs: Any) -> bool:
    """True when a fold's inputs hold a user message: only a message steers a run. An approval or
    a tool result amends the message holding its call (its ``codecMessageId`` is that message's):
    the resume answers it (``run_owed_calls``), and taking it for a steer would move the call's
    message to the tail of ``run.view`` until a ``has_input()`` the standard loop never calls."""
    if not isinstance(inputs, (list, tuple)) or not inputs:
        return False  # (an output's fold: no inputs, no scan)
    return any(isinstance(i, Mapping) and i.get("message") is not None for i in inputs)


class SteerLedger:
    """The steers (and answered-stamps) a session folded, by run id, since it was made: a run
    created later in a session that stays alive seeds the steers that arrived before it (its own
    watch starts at ``create_run``; history already folded is not read again). Bounded:
    :data:`STEERS_HELD` per run, :data:`RUNS_HELD` runs."""

    def __init__(self) -> None:
        self.folded: dict[str, dict[str, None]] = {}
        self.responded: dict[str, set[str]] = {}

    def note(self, output: OutputChanged) -> None:
        """Record one fold of the live tree (its core reports each, :mod:`.changes`)."""
        run_id = output.run_id
        if not isinstance(run_id, str):
            return
        stamped = output.steer_codec_message_ids
        if stamped:
            self._bounded(self.responded, run_id, set()).update(str(i) for i in stamped)
        inputs = output.inputs  # (none in an output's fold: nothing more to look at)
        cmid = output.codec_message_id
        if inputs and isinstance(cmid, str) and carries_a_message(inputs):
            folded = self._bounded(self.folded, run_id, {})
            folded[cmid] = None
            if len(folded) > STEERS_HELD:
                del folded[next(iter(folded))]

    @staticmethod
    def _bounded(table: dict[str, Any], run_id: str, empty: Any) -> Any:
        if run_id not in table:
            table[run_id] = empty
            if len(table) > RUNS_HELD:
                del table[next(iter(table))]
        return table[run_id]

    def close(self) -> None:
        """Nothing to release (kept for callers of the former tree-watching ledger)."""
