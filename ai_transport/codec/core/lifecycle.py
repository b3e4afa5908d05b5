"""The decode lifecycle tracker (``createLifecycleTracker`` of 0.8.0's ``core/codec``).

When a decoder joins a stream mid-flight (history compaction, a rewind miss, a partial page), a
codec's reducer may still need its lifecycle pre-roll (the Vercel codec's ``start`` /
``start-step``). The tracker remembers, per scope (a run id), which phases were emitted and builds
the missing ones in order.

**Scopes are per publisher.** One decoder reads every publisher's wires on the channel, so a scope
is ``(publisher, run id)``: the publisher is the wire's Ably-verified ``clientId`` (None, one
anonymous bucket, for a wire without one). A publisher's wires mark, re-arm, clear and consult only
its own scopes; for a single publisher the events are exactly 0.8.0's (which keys by run id alone).

**Bound.** Scopes come off the wire (run ids), so the tracker keeps at most :data:`MAX_SCOPES` *per
publisher*, forgetting that publisher's oldest first (:attr:`LifecycleTracker.evicted` counts them;
nothing raises). A publisher inventing run ids therefore only ever evicts its own scopes, never
another publisher's live run. A forgotten run that streams again gets its pre-roll again (harmless
for its own publisher: the reducer's ``start`` / ``start-step`` folds are idempotent enough for a
run that old). A publisher's bucket goes when its last scope is cleared.

=====================  ======================================================================
call                   behaviour
=====================  ======================================================================
``ensure_phases``      the events of the phases ``(publisher, scope)`` lacks (now marked), in order
``mark_emitted``       the phase was on the wire for ``(publisher, scope)``
``reset_phase``        forget one phase of ``(publisher, scope)`` (e.g. ``start-step`` at a step's end)
``clear_scope``        forget ``(publisher, scope)`` (its run ended)
=====================  ======================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MAX_SCOPES", "LifecycleTracker", "Phase"]

#: The most scopes one tracker remembers per publisher (its oldest beyond this are forgotten).
MAX_SCOPES = 4096

#: ``(key, build)``: a phase and the events it emits, built from a context (e.g. a message id).
Phase = tuple[str, Callable[[Mapping[str, Any]], list[dict[str, Any]]]]


class LifecycleTracker:
    """Per-publisher, per-scope emitted phases (``LifecycleTracker``): ensure, mark, reset, clear.

    ``publisher``: the wire's Ably ``clientId`` (None: the anonymous bucket). ``max_scopes``: the
    bound per publisher (default :data:`MAX_SCOPES`, read when the tracker is made).
    """

    __slots__ = ("_emitted", "_max", "_phases", "evicted")

    def __init__(self, phases: list[Phase], max_scopes: int | None = None) -> None:
        self._phases = phases
        self._max = max(1, MAX_SCOPES if max_scopes is None else max_scopes)
        #: publisher -> its scopes, oldest first -> the phases emitted there.
        self._emitted: dict[str | None, dict[str, set[str]]] = {}
        #: How many scopes were forgotten to keep a publisher within its bound.
        self.evicted = 0

    def ensure_phases(self, publisher: str | None, scope: str, context: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The events of every phase not yet emitted in ``scope`` of ``publisher`` (now marked
        emitted), in order."""
        emitted = self._scope(publisher, scope)
        events: list[dict[str, Any]] = []
        for key, build in self._phases:
            if key not in emitted:
                emitted.add(key)
                events.extend(build(context))
        return events

    def mark_emitted(self, publisher: str | None, scope: str, key: str) -> None:
        """Record that ``publisher`` put phase ``key`` of ``scope`` on the wire."""
        self._scope(publisher, scope).add(key)

    def reset_phase(self, publisher: str | None, scope: str, key: str) -> None:
        """Forget phase ``key`` of ``publisher``'s ``scope`` (it may be needed again)."""
        scopes = self._emitted.get(publisher)
        emitted = scopes.get(scope) if scopes is not None else None
        if emitted is not None:
            emitted.discard(key)

    def clear_scope(self, publisher: str | None, scope: str) -> None:
        """Forget ``publisher``'s ``scope`` entirely (its run ended)."""
        scopes = self._emitted.get(publisher)
        if scopes is not None and scopes.pop(scope, None) is not None and not scopes:
            del self._emitted[publisher]

    def _scope(self, publisher: str | None, scope: str) -> set[str]:
        scopes = self._emitted.get(publisher)
        if scopes is None:
            scopes = self._emitted[publisher] = {}
        emitted = scopes.get(scope)
        if emitted is None:
            if len(scopes) >= self._max:  # the publisher's own oldest: never another's
                del scopes[next(iter(scopes))]
                self.evicted += 1
            emitted = scopes[scope] = set()
        return emitted

    @property
    def scopes(self) -> int:
        """How many scopes are tracked (every publisher's)."""
        return sum(len(scopes) for scopes in self._emitted.values())

    def scopes_of(self, publisher: str | None) -> int:
        """How many scopes of ``publisher`` are tracked."""
        scopes = self._emitted.get(publisher)
        return 0 if scopes is None else len(scopes)
