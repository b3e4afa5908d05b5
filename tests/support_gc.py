"""What the cyclic GC tracks (tests of what a woken worker keeps per wire, issue 21)."""

from __future__ import annotations

import gc
from typing import Any


def tracked_from(root: Any) -> int:
    """How many objects the cyclic GC tracks among those reachable from ``root`` (classes aside),
    once a collection untracked what it never needs to scan (tuples and dicts of atoms)."""
    gc.collect()
    seen = {id(root)}
    todo = [root]
    while todo:
        for ref in gc.get_referents(todo.pop()):
            if gc.is_tracked(ref) and not isinstance(ref, type) and id(ref) not in seen:
                seen.add(id(ref))
                todo.append(ref)
    return len(seen)
