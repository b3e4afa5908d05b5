"""What an in-process hub keeps per channel: messages by serial, the serial counter, history pages.

Serials are a zero-padded decimal counter (:data:`SERIAL_WIDTH` digits), so string order is
acceptance order; history pages find their window by bisection. Messages handed out (deliveries,
history, ``get_message``) are copies (:func:`_copy_message`), never the stored aggregate.
"""

from __future__ import annotations

import bisect
import copy
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .channel import InboundMessage

__all__ = ["SERIAL_WIDTH", "Attachment", "InProcessHistoryPage"]

#: Digits in a serial (zero-padded decimal counter, so string order == numeric order).
SERIAL_WIDTH = 20


def _now_ms() -> int:
    return int(time.time() * 1000)


def _format_serial(n: int) -> str:
    return f"{n:0{SERIAL_WIDTH}d}"


# --------------------------------------------------------------------------------------------
# Shared channel state (one per channel name in a hub)
# --------------------------------------------------------------------------------------------


class Attachment(Protocol):
    """What the channel state knows of one attached channel object (an ``InProcessChannel``).

    The state sits below the channel objects: it holds them through this protocol, never by class.
    """

    #: The channel object's presence (``InProcessPresence``), once used; else None.
    _presence: Any
    #: True while the connection's transport is down (nothing is delivered).
    _interrupted: bool

    def _deliver_full(self, msg: dict[str, Any]) -> None: ...

    def _deliver_append(self, aggregate: dict[str, Any], fragment: dict[str, Any]) -> None: ...


class _Stored:
    """A stored message: its aggregate (the latest version), and how to copy it (:func:`_copier`).

    The aggregate is the store's own: its nested values are never mutated, only replaced (a new
    version); whoever replaces one calls :meth:`changed`.
    """

    __slots__ = ("_plan", "aggregate")

    def __init__(self, aggregate: dict[str, Any]) -> None:
        self.aggregate = aggregate
        self._plan: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def changed(self) -> None:
        """The aggregate got a new version: its copies are planned again, on the next one (a
        streamed message gets a version per append, and most are never read from the store)."""
        self._plan = None

    def copy(self) -> InboundMessage:
        """A copy of the aggregate (what :func:`_copy_message` makes), by the copier made for it
        (:func:`_copier`): the top level copied, each nested container copied its way, the rest
        shared (scalars)."""
        plan = self._plan
        if plan is None:
            plan = self._plan = _copier(self.aggregate)
        return plan(self.aggregate)  # type: ignore[return-value]


class _ChannelState:
    """Everything the hub keeps for one channel name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counter = 0
        self.messages: list[_Stored] = []  # in serial order
        self.by_serial: dict[str, _Stored] = {}
        self.attachments: list[Attachment] = []
        self.presence: Any = None  # the member set (presence_memory._PresenceSet), on first use

    def next_serial(self) -> str:
        self.counter += 1
        return _format_serial(self.counter)

    @property
    def channel_serial(self) -> str:
        return _format_serial(self.counter)


# --------------------------------------------------------------------------------------------
# History
# --------------------------------------------------------------------------------------------


class InProcessHistoryPage:
    """One page of in-process history (``items`` in the requested direction)."""

    def __init__(
        self,
        state: _ChannelState,
        items: list[InboundMessage],
        *,
        limit: int,
        direction: str,
        bound: str | None,
        cursor: str | None,
        more: bool,
    ) -> None:
        self.items = items
        self._state = state
        self._limit = limit
        self._direction = direction
        self._bound = bound
        self._cursor = cursor
        self._more = more

    def has_next(self) -> bool:
        """True when another page (older for ``backwards``) exists."""
        return self._more

    def is_last(self) -> bool:
        """True on the last page."""
        return not self._more

    async def next(self) -> InProcessHistoryPage | None:
        """The next page, or None after the last."""
        if not self._more:
            return None
        return _history_page(self._state, self._limit, self._direction, self._bound, self._cursor)


def _history_page(
    state: _ChannelState, limit: int, direction: str, bound: str | None, cursor: str | None
) -> InProcessHistoryPage:
    msgs = state.messages

    def serial_of(stored: _Stored) -> str:
        return str(stored.aggregate["serial"])

    # messages are kept in serial order: find the page's window by bisection, not by a scan, and
    # take it (and one more, to tell whether another page follows) by slicing
    if direction == "backwards":
        end = len(msgs)
        if bound is not None:
            end = bisect.bisect_right(msgs, bound, key=serial_of)
        if cursor is not None:
            end = min(end, bisect.bisect_left(msgs, cursor, key=serial_of))
        chosen = msgs[max(0, end - limit - 1) : end][::-1]
    else:
        start = 0 if cursor is None else bisect.bisect_right(msgs, cursor, key=serial_of)
        stop = len(msgs) if bound is None else bisect.bisect_right(msgs, bound, key=serial_of)
        chosen = msgs[start : min(stop, start + limit + 1)]
    more = len(chosen) > limit
    chosen = chosen[:limit]
    items = [s.copy() for s in chosen]
    next_cursor = items[-1]["serial"] if items else cursor
    return InProcessHistoryPage(
        state, items, limit=limit, direction=direction, bound=bound, cursor=next_cursor, more=more
    )


# --------------------------------------------------------------------------------------------
# Copies of stored messages
# --------------------------------------------------------------------------------------------


_SCALARS = frozenset((str, int, float, bool, bytes, type(None)))


def _json_copy(value: Any) -> Any:
    """A copy of a JSON-shaped value (dicts and lists rebuilt, scalars shared); others deep-copied.

    A container is copied in C (``.copy()``: every entry shared, in its order), then only its
    entries that are not scalars are replaced by their own copies, in place (a key keeps its
    position): the same copy as rebuilding it entry by entry, without a comprehension's frame and
    a store per scalar."""
    t = type(value)
    if t is dict:
        out = value.copy()
        for k, v in value.items():
            if type(v) not in _SCALARS:
                out[k] = _json_copy(v)
        return out
    if t is list:
        out = value.copy()
        for i, v in enumerate(value):
            if type(v) not in _SCALARS:
                out[i] = _json_copy(v)
        return out
    if t in _SCALARS:
        return value
    return copy.deepcopy(value)


_DICTS = frozenset((dict,))
_NESTED = (dict, list, bytearray)
_NESTED_TYPES = frozenset(_NESTED)


def _copy_envelope(extras: dict[str, Any]) -> dict[str, Any]:
    """``extras`` of the common AI envelope shape (``{"ai": {tier: {str: scalar}}}``, checked by
    :func:`_copy_plan`) copied: the tiers' dict copied in C, then each tier replaced by its copy
    (in place: a tier keeps its position)."""
    ai = extras["ai"]
    tiers = ai.copy()
    for name, tier in ai.items():
        tiers[name] = tier.copy()
    return {"ai": tiers}


def _copy_enveloped(msg: dict[str, Any]) -> dict[str, Any]:
    """A copy of a message whose only containers are the AI envelope (``extras``) and a flat
    ``version``: the commonest plan (:func:`_copier`), with no loop over it."""
    out = msg.copy()
    out["extras"] = _copy_envelope(msg["extras"])
    out["version"] = msg["version"].copy()
    return out


def _copy_versioned(msg: dict[str, Any]) -> dict[str, Any]:
    """A copy of a message whose only container is a flat ``version`` (a lease wire)."""
    out = msg.copy()
    out["version"] = msg["version"].copy()
    return out


def _is_envelope(extras: Any) -> bool:
    if type(extras) is not dict or len(extras) != 1:
        return False
    ai = extras.get("ai")
    if type(ai) is not dict or not _DICTS.issuperset(map(type, ai.values())):
        return False
    return all(_SCALARS.issuperset(map(type, tier.values())) for tier in ai.values())


def _copy_plan(msg: Mapping[str, Any]) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """How a copy of ``msg`` copies its nested values (:meth:`_Stored.copy`): ``(key, copy)`` for each
    of ``extras``, ``version`` and ``data`` that is a container — a flat object copied in C, the AI
    envelope by :func:`_copy_envelope`, anything else by :func:`_json_copy`. A stored aggregate keeps
    its plan (its shape only changes with a new version), so its copies make none of these checks."""
    plan: list[tuple[str, Callable[[Any], Any]]] = []
    for key in ("extras", "version", "data"):
        value = msg.get(key)
        if value is None or not (type(value) in _NESTED_TYPES or isinstance(value, _NESTED)):
            continue  # shared as is (a scalar)
        if type(value) is dict and _SCALARS.issuperset(map(type, value.values())):
            plan.append((key, dict.copy))
        elif key == "extras" and _is_envelope(value):
            plan.append((key, _copy_envelope))
        else:
            plan.append((key, _json_copy))
    return tuple(plan)


def _copier(msg: Mapping[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """How to copy ``msg`` (and every aggregate of its shape): :func:`_copy_plan` as one function,
    a dedicated one for the commonest plans (an AI envelope and a flat version; a flat version)."""
    plan = _copy_plan(msg)
    if plan == _ENVELOPED:
        return _copy_enveloped
    if plan == _VERSIONED:
        return _copy_versioned
    if not plan:
        return dict.copy

    def copy_planned(aggregate: dict[str, Any]) -> dict[str, Any]:
        out = aggregate.copy()
        for key, copy_value in plan:
            out[key] = copy_value(out[key])
        return out

    return copy_planned


_ENVELOPED = (("extras", _copy_envelope), ("version", dict.copy))
_VERSIONED = (("version", dict.copy),)


def _copy_message(msg: Mapping[str, Any]) -> InboundMessage:
    """A copy of ``msg`` whose containers are its own (one copy: no :func:`_copy_plan`, which pays
    only for a stored aggregate copied again and again)."""
    out = dict(msg)
    for key in ("extras", "version", "data"):
        value = out.get(key)
        if value is not None and (type(value) in _NESTED_TYPES or isinstance(value, _NESTED)):
            out[key] = _json_copy(value)
    return out  # type: ignore[return-value]
