"""``HeldWires``: wires held under a key until something releases them, bounded per publisher.

A session holds wires it cannot judge yet — an answer into a run whose start is not folded
(:mod:`.admission`), an append whose tag cannot be checked yet (:mod:`.live_integrity`).
Anyone can publish such wires, so the hold is bounded **per publisher** (the wire's author,
:func:`~.authority.author_of`): per key and in all, beyond a bound the publisher's own oldest wire is
dropped and handed to ``on_drop(message, why)`` (the session reports it as skipped). A flood from
one publisher therefore never evicts another's wire. A session-wide cap (``total`` times
:data:`PUBLISHERS_HELD`) bounds memory against many publishers; beyond it the publisher holding the
most loses its oldest.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any, Final

from .authority import author_of

__all__ = ["PUBLISHERS_HELD", "HeldWires"]

Drop = Callable[[Mapping[str, Any], str], None]

#: The session-wide cap on held wires is this many publishers' worth (``total`` each).
PUBLISHERS_HELD: Final = 8


class HeldWires:
    """Wires held per key, in arrival order: at most ``per_key`` of one publisher under one key and
    ``total`` of one publisher in all.

    Within a key a wire is identified by an item key: a wire held again under the same item key (a
    re-delivery) is held once. ``per_key_why`` / ``total_why`` are the reasons given to ``on_drop``.
    """

    def __init__(self, per_key: int, total: int, on_drop: Drop, per_key_why: str, total_why: str) -> None:
        self._per_key = per_key
        self._total = total
        self._cap = total * PUBLISHERS_HELD
        self._on_drop = on_drop
        self._per_key_why = per_key_why
        self._total_why = total_why
        #: key -> item -> (publisher, wire), in arrival order (release order).
        self._held: dict[Hashable, dict[Hashable, tuple[str | None, Mapping[str, Any]]]] = {}
        #: publisher -> its held (key, item) in arrival order; (key, publisher) -> its items.
        self._by_publisher: dict[str | None, dict[tuple[Hashable, Hashable], None]] = {}
        self._by_key_publisher: dict[tuple[Hashable, str | None], dict[Hashable, None]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Hashable]:
        """The keys with wires held, oldest first."""
        return iter(list(self._held))

    def held_by(self, publisher: str | None) -> int:
        """How many wires of ``publisher`` are held."""
        return len(self._by_publisher.get(publisher, ()))

    def hold(self, key: Hashable, item: Hashable, message: Mapping[str, Any]) -> None:
        """Hold ``message`` under ``key`` (once per ``item``), dropping its publisher's oldest beyond
        a bound."""
        held = self._held.setdefault(key, {})
        if item in held:
            return
        publisher = author_of(message)
        mine = self._by_key_publisher.setdefault((key, publisher), {})
        if len(mine) >= self._per_key:
            self._drop(key, next(iter(mine)), self._per_key_why)
        held = self._held.setdefault(key, {})
        held[item] = (publisher, message)
        self._by_key_publisher.setdefault((key, publisher), {})[item] = None
        theirs = self._by_publisher.setdefault(publisher, {})
        theirs[(key, item)] = None
        self._count += 1
        if len(theirs) > self._total:
            self._drop(*next(iter(theirs)), self._total_why)
        while self._count > self._cap:
            largest = max(self._by_publisher, key=lambda p: len(self._by_publisher[p]))
            self._drop(*next(iter(self._by_publisher[largest])), self._total_why)

    def _forget(self, key: Hashable, item: Hashable) -> tuple[str | None, Mapping[str, Any]]:
        held = self._held[key]
        publisher, message = held.pop(item)
        if not held:
            del self._held[key]
        mine = self._by_key_publisher[(key, publisher)]
        del mine[item]
        if not mine:
            del self._by_key_publisher[(key, publisher)]
        theirs = self._by_publisher[publisher]
        del theirs[(key, item)]
        if not theirs:
            del self._by_publisher[publisher]
        self._count -= 1
        return publisher, message

    def _drop(self, key: Hashable, item: Hashable, why: str) -> None:
        _, message = self._forget(key, item)
        self._on_drop(message, why)

    def release(self, key: Hashable) -> list[Mapping[str, Any]]:
        """The wires held under ``key``, in arrival order, no longer held."""
        held = self._held.get(key)
        if not held:
            return []
        return [self._forget(key, item)[1] for item in list(held)]

    def by_key(self) -> Iterator[tuple[Hashable, list[Mapping[str, Any]]]]:
        """``(key, wires)`` for every key with wires held, oldest key first."""
        for key, held in list(self._held.items()):
            yield key, [message for _, message in held.values()]

    def clear(self) -> None:
        """Hold nothing."""
        self._held.clear()
        self._by_publisher.clear()
        self._by_key_publisher.clear()
        self._count = 0
