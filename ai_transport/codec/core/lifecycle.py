"""The decode lifecycle tracker (``createLifecycleTracker`` of 0.8.0's ``core/codec``).

When a decoder joins a stream mid-flight (history compaction, a rewind miss, a partial page), a
codec's reducer may still need its lifecycle pre-roll (the Vercel codec's ``start`` /
``start-step``). The tracker remembers, per scope (a run id), which phases were emitted and builds
the missing ones in order.

Scopes come off the wire (run ids), so the tracker keeps at most :data:`MAX_SCOPES`, forgetting the
oldest first (a forgotten run that streams again gets its pre-roll again: harmless, the reducer's
``start`` / ``start-step`` folds are idempotent enough for a run that old).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MAX_SCOPES", "LifecycleTracker", "Phase"]

#: The most scopes one tracker remembers.
MAX_SCOPES = 4096

#: ``(key, build)``: a phase and the events it emits, built from a context (e.g. a message id).
Phase = tuple[str, Callable[[Mapping[str, Any]], list[dict[str, Any]]]]


class LifecycleTracker:
    """Per-scope emitted phases (``LifecycleTracker``): ensure, mark, reset, clear."""

    __slots__ = ("_emitted", "_phases")

    def __init__(self, phases: list[Phase]) -> None:
        self._phases = phases
        self._emitted: dict[str, set[str]] = {}

    def ensure_phases(self, scope: str, context: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The events of every phase not yet emitted in ``scope`` (now marked emitted), in order."""
        emitted = self._scope(scope)
        events: list[dict[str, Any]] = []
        for key, build in self._phases:
            if key not in emitted:
                emitted.add(key)
                events.extend(build(context))
        return events

    def mark_emitted(self, scope: str, key: str) -> None:
        """Record that ``scope`` saw phase ``key`` on the wire."""
        self._scope(scope).add(key)

    def reset_phase(self, scope: str, key: str) -> None:
        """Forget phase ``key`` of ``scope`` (it may be needed again)."""
        emitted = self._emitted.get(scope)
        if emitted is not None:
            emitted.discard(key)

    def clear_scope(self, scope: str) -> None:
        """Forget ``scope`` entirely (its run ended)."""
        self._emitted.pop(scope, None)

    def _scope(self, scope: str) -> set[str]:
        emitted = self._emitted.get(scope)
        if emitted is None:
            if len(self._emitted) >= MAX_SCOPES:
                del self._emitted[next(iter(self._emitted))]
            emitted = self._emitted[scope] = set()
        return emitted

    @property
    def scopes(self) -> int:
        """How many scopes are tracked."""
        return len(self._emitted)
