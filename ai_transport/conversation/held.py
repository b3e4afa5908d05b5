"""``HeldWires``: wires held under a key until something releases them, bounded.

A session holds wires it cannot judge yet — an answer into a run whose start is not folded
(:mod:`.admission`), an append whose tag cannot be checked yet (:mod:`.live_integrity`). Anyone can
publish such wires, so the hold is bounded per key and in all; beyond a bound the oldest wire is
dropped and handed to ``on_drop(message, why)`` (the session reports it as skipped).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any

__all__ = ["HeldWires"]

Drop = Callable[[Mapping[str, Any], str], None]


class HeldWires:
    """Wires held per key, in arrival order, at most ``per_key`` under one key and ``total`` in all.

    Within a key a wire is identified by an item key: a wire held again under the same item key (a
    re-delivery) is held once. ``per_key_why`` / ``total_why`` are the reasons given to ``on_drop``.
    """

    def __init__(self, per_key: int, total: int, on_drop: Drop, per_key_why: str, total_why: str) -> None:
        self._per_key = per_key
        self._total = total
        self._on_drop = on_drop
        self._per_key_why = per_key_why
        self._total_why = total_why
        self._held: dict[Hashable, dict[Hashable, Mapping[str, Any]]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def hold(self, key: Hashable, item: Hashable, message: Mapping[str, Any]) -> None:
        """Hold ``message`` under ``key`` (once per ``item``), dropping the oldest beyond a bound."""
        held = self._held.setdefault(key, {})
        if item in held:
            return
        if len(held) >= self._per_key:
            self._count -= 1
            self._on_drop(held.pop(next(iter(held))), self._per_key_why)
        held[item] = message
        self._count += 1
        while self._count > self._total:
            oldest = next(iter(self._held))
            queue = self._held[oldest]
            self._count -= 1
            self._on_drop(queue.pop(next(iter(queue))), self._total_why)
            if not queue:
                del self._held[oldest]

    def release(self, key: Hashable) -> list[Mapping[str, Any]]:
        """The wires held under ``key``, in arrival order, no longer held."""
        held = self._held.pop(key, None)
        if not held:
            return []
        self._count -= len(held)
        return list(held.values())

    def by_key(self) -> Iterator[tuple[Hashable, list[Mapping[str, Any]]]]:
        """``(key, wires)`` for every key with wires held, oldest key first."""
        for key, held in self._held.items():
            yield key, list(held.values())

    def clear(self) -> None:
        """Hold nothing."""
        self._held.clear()
        self._count = 0
