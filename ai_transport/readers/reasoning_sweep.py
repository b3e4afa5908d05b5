"""The reasoning pairing sweep: drop every reasoning item not immediately followed by its output.

:func:`sweep_reasoning` walks an input once, drops unpaired reasoning (and reasoning a
:data:`DropRule` rejects), strips the ids that pointed at a dropped reasoning item and reports the
region a replay fingerprint covers; :func:`drop_reasoning` drops every reasoning item (the retry
after ``invalid_encrypted_content``). See :mod:`ai_transport.readers.hygiene` for "paired".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from .input_items import (
    _ID_OPTIONAL,
    _SERVER_SIDE,
    Change,
    _check_items,
    _describe,
    _item_kind,
    _str_or_none,
    _strip_id,
    is_output_item,
    is_paired,
    reasoning_links,
)

__all__ = ["DropRule", "SweepResult", "drop_reasoning", "sweep_reasoning"]

log = logging.getLogger("ai_transport.readers.hygiene")


class SweepResult(NamedTuple):
    """Result of :func:`sweep_reasoning`.

    Attributes:
        input: the swept items followed by the trailing items (a new list).
        covered_length: how many leading items of ``input`` the sweep covered (the region a
            reasoning-replay fingerprint covers); trailing items come after it.
        dropped: the items that were dropped (the caller's objects), in order: reasoning items,
            and server-side tool items whose reasoning item was dropped.
        changes: every change made (drops and stripped ids), as :class:`Change` records.
    """

    input: list[dict[str, Any]]
    covered_length: int
    dropped: list[dict[str, Any]]
    changes: list[Change]


#: ``(item, out_so_far) -> reason or None``: an extra reason to drop a reasoning item.
DropRule = Callable[[Mapping[str, Any], Sequence[Mapping[str, Any]]], "str | None"]


def _sweep(
    entries: list[tuple[int | None, dict[str, Any]]],
    links: Mapping[str, str] | None,
    should_drop: DropRule | None,
) -> tuple[list[tuple[int | None, dict[str, Any]]], list[dict[str, Any]], list[Change]]:
    out: list[tuple[int | None, dict[str, Any]]] = []
    out_items: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    changes: list[Change] = []
    kept_reasoning: set[str] = set()
    after_dropped: str | None = None  # id of the reasoning dropped right before this item
    n = len(entries)
    for k, (index, item) in enumerate(entries):
        if item.get("type") == "reasoning":
            rid = _str_or_none(item.get("id"))
            following = entries[k + 1][1] if k + 1 < n else None
            reason: str | None = None
            if rid is None:
                reason = "reasoning_without_id"
            if reason is None and should_drop is not None:
                reason = should_drop(item, out_items)
            if reason is None and not is_paired(item, following, links):
                reason = "reasoning_unpaired"
            if reason is not None:
                dropped.append(item)
                changes.append(
                    Change("dropped_item", reason, index, f"dropped reasoning {rid!r} ({_REASONS.get(reason, reason)})", rid)
                )
                after_dropped = rid if rid is not None else ""
                continue
            kept_reasoning.add(rid)  # type: ignore[arg-type]
            after_dropped = None
            out.append((index, item))
            out_items.append(item)
            continue
        iid = item.get("id")
        if isinstance(iid, str) and is_output_item(item):
            required = links.get(iid) if links else None
            reason = None
            if after_dropped is not None:
                reason, why = "reasoning_dropped", "its reasoning item was dropped"
            elif required is not None and required not in kept_reasoning:
                reason, why = "reasoning_missing", f"its required reasoning item {required!r} is not in the input"
            kind = _item_kind(item)
            if reason is not None and kind in _SERVER_SIDE:
                dropped.append(item)
                changes.append(
                    Change("dropped_item", reason, index, f"dropped {_describe(item)}: {why}", iid)
                )
                continue  # the next item now directly follows the dropped reasoning
            if reason is not None and kind in _ID_OPTIONAL:
                call_id = _str_or_none(item.get("call_id"))
                kind_text = item.get("type") or "message"
                item = _strip_id(item)
                changes.append(
                    Change("stripped_id", reason, index, f"stripped id {iid!r} from {kind_text}: {why}", iid, call_id)
                )
            elif reason is not None:
                # id required and answered by the client (computer_call, local_shell_call,
                # mcp_approval_request): neither stripping nor dropping keeps the input valid.
                log.debug("sweep: %s keeps its id although %s", _describe(item), why)
        after_dropped = None
        out.append((index, item))
        out_items.append(item)
    return out, dropped, changes


def sweep_reasoning(
    items: Sequence[Mapping[str, Any]],
    *,
    trailing: Sequence[Mapping[str, Any]] | None = None,
    links: Mapping[str, str] | None = None,
    should_drop: DropRule | None = None,
) -> SweepResult:
    """The reasoning pairing sweep.

    Walks ``items`` left to right and drops every ``reasoning`` item that is not immediately
    followed by its paired output item (see the module docstring for "paired"; a reasoning item
    without an ``id`` is dropped too, the API requires one). The output item right after a dropped
    reasoning item has its ``id`` stripped (and, for a message, its ``status``), so the API does not
    look for the dropped reasoning; with ``links`` an output item whose linked reasoning item is not
    kept loses its id as well. ``should_drop(item, kept_so_far)`` may give an extra reason to drop a
    reasoning item (a fingerprint or ``store: false`` rule); its follower is then stripped the same
    way. The links the input itself shows (:func:`reasoning_links`) are always used, so every item
    of a dropped reasoning item's response (e.g. both of two parallel calls) loses its id.

    ``trailing`` items (e.g. a context block for this request) are appended after the sweep, outside
    the covered region; ``covered_length`` says where they start. Never reorders; never mutates.
    """
    listed = _check_items(items)
    entries = list(enumerate(listed))
    links = {**reasoning_links(listed), **(links or {})}
    out, dropped, changes = _sweep(entries, links, should_drop)  # type: ignore[arg-type]
    result = [item for _, item in out]
    covered = len(result)
    if trailing is not None:
        result.extend(_check_items(trailing, "trailing"))
    return SweepResult(result, covered, dropped, changes)


def drop_reasoning(items: Sequence[Mapping[str, Any]], *, reason: str = "reasoning_dropped_by_caller") -> SweepResult:
    """``items`` without any reasoning item, the ids that pointed at them stripped (a sweep).

    For the retry after an ``invalid_encrypted_content`` 400: every reasoning item goes, and each
    output item that directly followed one loses its id (server-side tool items are dropped), so
    the retried input is still accepted. ``reason`` is recorded on each drop.
    """
    return sweep_reasoning(items, should_drop=lambda _item, _out: reason)


_REASONS = {
    "reasoning_unpaired": "not immediately followed by its output item",
    "reasoning_without_id": "it has no id",
    "reasoning_without_encrypted_content": "store is false and it has no encrypted_content",
    "reasoning_fingerprint_mismatch": "produced under a different model, tools, instructions or prefix",
    "reasoning_unfingerprinted": "no fingerprint was recorded for it",
}
