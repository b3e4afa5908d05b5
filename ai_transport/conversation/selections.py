"""Versioned branch selections: group root -> the member a view shows, with a journal of changes.

A client view (:class:`~.branch.NavigableBranch`) pins every prompt fork it showed, so a view that
watched a flood of edits holds one selection per group. :meth:`Tree.visible_path
<ai_transport.conversation.tree.Tree.visible_path>` keys its cached path on the selections it was
computed for: a plain mapping is hashed whole on every read (O(the selections)), a
:class:`Selections` is keyed by its identity and version, and the roots that changed between two
versions are read from its journal (O(the changes)). So a view pinning N groups costs the tree O(1)
a wire, not N.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator, Mapping

__all__ = ["SELECTIONS_JOURNAL", "Selections"]

#: Changes a :class:`Selections` remembers for :meth:`Selections.changed_since` (a reader whose
#: version is older reads the whole mapping instead).
SELECTIONS_JOURNAL = 1024

_idents = itertools.count(1)


class Selections(Mapping[str, str]):
    """Group root -> selected node key (a read-only mapping to its readers), changed through
    :meth:`set` / :meth:`discard` / :meth:`clear` only.

    ``ident`` is unique to this object for the life of the process (never reused, unlike ``id()``)
    and ``version`` counts its changes (a ``set`` that changes nothing is none): ``(ident,
    version)`` names its contents, so a cache compares two integers instead of two mappings.
    """

    def __init__(self) -> None:
        self._map: dict[str, str] = {}
        self.ident = next(_idents)
        self.version = 0
        #: ``(version the change made, root, its value before: None when it had none)``, oldest first.
        self._journal: deque[tuple[int, str, str | None]] = deque(maxlen=SELECTIONS_JOURNAL)

    def __getitem__(self, root: str) -> str:
        return self._map[root]

    def get(self, root: str, default: str | None = None) -> str | None:  # type: ignore[override]
        """The member selected for ``root`` (``default`` when none is)."""
        return self._map.get(root, default)

    def __contains__(self, root: object) -> bool:
        return root in self._map

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return f"Selections({self._map!r})"

    def contents(self) -> Mapping[str, str]:
        """The selections as the plain dict this object keeps (never mutate it): for set
        operations on its items."""
        return self._map

    def set(self, root: str, key: str | None) -> None:
        """Select ``key`` at ``root`` (None: no selection there)."""
        before = self._map.get(root)
        if before == key:
            return
        if key is None:
            del self._map[root]
        else:
            self._map[root] = key
        self.version += 1
        self._journal.append((self.version, root, before))

    def discard(self, root: str) -> None:
        """No selection at ``root``."""
        self.set(root, None)

    def clear(self) -> None:
        """No selection anywhere."""
        for root in list(self._map):
            self.discard(root)

    def changed_since(self, version: int) -> dict[str, str | None] | None:
        """The roots whose selection changed after ``version`` (of this object), each with its value
        then (None: none), in O(the changes); None when the journal no longer reaches back that far.
        A root set and set back is listed too (its value then equals its value now)."""
        new = self.version - version
        if new < 0 or new > len(self._journal):
            return None
        recent = list(itertools.islice(reversed(self._journal), new))
        then: dict[str, str | None] = {}
        for _, root, before in reversed(recent):  # oldest first: a root's first change holds its value then
            then.setdefault(root, before)
        return then

    def as_of(self, version: int) -> dict[str, str] | None:
        """A copy of the selections at ``version`` (O(the selections)); None when the journal no
        longer reaches back that far."""
        then = self.changed_since(version)
        if then is None:
            return None
        out = dict(self._map)
        for root, before in then.items():
            if before is None:
                out.pop(root, None)
            else:
                out[root] = before
        return out
