"""The four pure readers of ``@ably/ai-transport@0.8.0`` (``openai`` entry), over run messages.

They are the interop contract a resuming agent relies on, so they match 0.8.0 exactly — including
its known weaknesses, each written down in the docstring. All run in linear time.

Each accepts a sequence whose members are :class:`~ai_transport.codec.types.OpenAIMessage` objects
or dicts in the JS JSON shape ``{role, items, toolCallStates?}`` (mixed freely).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..codec.types import OpenAIItem, OpenAIMessage
from ..errors import InvalidTypeError, type_name

MessageLike = OpenAIMessage | Mapping[str, Any]

__all__ = [
    "CallIdSet",
    "MessageLike",
    "approved_unexecuted_calls",
    "resolved_call_ids",
    "to_responses_input",
    "unanswered_calls",
]


class CallIdSet(set):
    """A ``set`` of call ids that iterates in insertion order (like the JS ``Set`` it mirrors).

    Equality, membership and every set operation are those of ``set``; only iteration order (and
    so ``list()``/``repr``) follows the order the ids were first added.
    """

    __slots__ = ("_order",)

    def __init__(self, ids: Iterable[Any] = ()) -> None:
        order = dict.fromkeys(ids)
        super().__init__(order)
        self._order = order

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._order))

    def __repr__(self) -> str:
        return f"CallIdSet({list(self._order)!r})"

    @classmethod
    def _adopt(cls, order: dict[Any, None]) -> CallIdSet:
        """A set over the keys of ``order`` that takes ownership of that dict (no copy)."""
        self = cls.__new__(cls)
        set.update(self, order)
        self._order = order
        return self

    def add(self, value: Any) -> None:
        super().add(value)
        self._order.setdefault(value, None)

    def discard(self, value: Any) -> None:
        super().discard(value)
        self._order.pop(value, None)

    def remove(self, value: Any) -> None:
        super().remove(value)
        self._order.pop(value, None)

    def pop(self) -> Any:
        if not self._order:
            raise KeyError("pop from an empty set")
        value = next(iter(self._order))
        self.remove(value)
        return value

    def clear(self) -> None:
        super().clear()
        self._order.clear()

    def update(self, *others: Iterable[Any]) -> None:
        for other in others:
            for value in other:
                self.add(value)


def _message_parts(message: Any, index: int) -> tuple[list[OpenAIItem], Mapping[str, Any]]:
    """``(items, tool_call_states)`` of a message, validating the message-level shape."""
    items: Any
    states: Any
    if isinstance(message, OpenAIMessage):
        items, states = message.items, message.tool_call_states
    elif isinstance(message, Mapping):
        items = message.get("items")
        states = message.get("toolCallStates")
        if states is None:
            states = message.get("tool_call_states")
    else:
        raise InvalidTypeError(
            f"messages[{index}] must be an OpenAIMessage or an object with 'items', got {type_name(message)}"
        )
    if not isinstance(items, list):
        raise InvalidTypeError(f"messages[{index}].items must be an array, got {type_name(items)}")
    if states is None:
        states = {}
    elif not isinstance(states, Mapping):
        raise InvalidTypeError(
            f"messages[{index}].toolCallStates must be an object, got {type_name(states)}"
        )
    return items, states


def _check_messages(messages: Any) -> Sequence[Any]:
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise InvalidTypeError(f"messages must be a sequence of messages, got {type_name(messages)}")
    return messages if isinstance(messages, Sequence) else list(messages)


def _bad_item(items: list[Any], index: int) -> InvalidTypeError:
    """The error for the first item of ``items`` that is not an object (called off the hot path)."""
    for j, item in enumerate(items):
        if not isinstance(item, Mapping):
            return InvalidTypeError(f"messages[{index}].items[{j}] must be an object, got {type_name(item)}")
    raise AssertionError("no bad item")  # pragma: no cover


def to_responses_input(messages: Sequence[MessageLike]) -> list[OpenAIItem]:
    """Every message's items, in message then item order, as Responses API input.

    Mirrors ``toResponsesInput``: the item objects themselves (no copies) and tool call states are
    ignored. Like 0.8.0 it does no replay hygiene (reasoning ``status``, ``store: false`` id rules,
    call/output pairing); use :mod:`ai_transport.readers.hygiene` / ``preflight`` for that.
    """
    out: list[OpenAIItem] = []
    for i, message in enumerate(_check_messages(messages)):
        items, _ = _message_parts(message, i)
        for item in items:
            if item.__class__ is not dict and not isinstance(item, Mapping):
                raise _bad_item(items, i)
        out.extend(items)
    return out


_OUTPUT = "function_call_output"
_CALL = "function_call"


def _resolved_general(messages: Sequence[Any]) -> dict[Any, None]:
    """Insertion-ordered output call ids, validating message by message (the reference path)."""
    found: dict[Any, None] = {}
    for i, message in enumerate(messages):
        items, _ = _message_parts(message, i)
        try:
            for item in items:
                if item.get("type") == _OUTPUT:
                    found[item.get("call_id")] = None
        except AttributeError:
            raise _bad_item(items, i) from None
    return found


# The fast paths below take plain input only: every message a ``dict`` or an ``OpenAIMessage``, its
# items a ``list`` and its states a ``dict`` or absent. They return ``None`` at the first message
# that is not plain, and raise AttributeError/TypeError on a bad item or an unhashable call id; the
# caller then runs the general path, which raises the right error. Each message is read just
# before its items (one pass over memory: at 1M items the readers are bound by cache misses), and
# the message-level reads are written out in each loop rather than called per message.


def _resolved_plain(messages: Sequence[Any]) -> dict[Any, None] | None:
    found: dict[Any, None] = {}
    for message in messages:
        cls = message.__class__
        if cls is dict:
            items = message.get("items")
            states = message.get("toolCallStates")
            if states is None:
                states = message.get("tool_call_states")
        elif cls is OpenAIMessage:
            items = message.items
            states = message.tool_call_states
        else:
            return None
        if items.__class__ is not list or (states is not None and states.__class__ is not dict):
            return None
        for item in items:
            if item["type"] == _OUTPUT:  # subscript: faster than .get; a typeless item -> general path
                found[item.get("call_id")] = None
    return found


def _resolved(messages: Sequence[Any]) -> dict[Any, None]:
    """Output call ids in first-seen order (as dict keys)."""
    try:
        found = _resolved_plain(messages)
    except (AttributeError, TypeError, KeyError):
        found = None  # a bad or typeless item, an unhashable call id: the general path decides
    return _resolved_general(messages) if found is None else found


def resolved_call_ids(messages: Sequence[MessageLike]) -> CallIdSet:
    """The ``call_id`` of every ``function_call_output`` item, in any message of any role.

    Mirrors ``resolvedCallIds``: an insertion-ordered set; an output counts whether or not a
    matching call exists (an output *before* its call resolves it too). As in 0.8.0, an output
    without a ``call_id`` contributes ``None`` (JS ``undefined``), which resolves calls that also
    lack one.
    """
    return CallIdSet._adopt(_resolved(_check_messages(messages)))


def _approval(state: Any) -> Any:
    """Whether a (non-``None``) tool call state says ``approval == "approved"`` (as 0.8.0 tests it)."""
    if state.__class__ is dict:
        return state.get("approval") == "approved"
    return isinstance(state, Mapping) and state.get("approval") == "approved"


def _open_calls_general(messages: Sequence[Any], approved: bool) -> list[OpenAIItem]:
    """The reference path of :func:`_open_calls`: message by message, item by item."""
    resolved = _resolved_general(messages)
    calls: list[OpenAIItem] = []
    for i, message in enumerate(messages):
        items, states = _message_parts(message, i)
        try:
            for item in items:
                if item.get("type") != _CALL:
                    continue
                call_id = item.get("call_id")
                if call_id in resolved:
                    continue
                state = states.get(call_id) if states and isinstance(call_id, str) else None
                if (state is not None and _approval(state)) == approved:
                    calls.append(item)
        except AttributeError:
            raise _bad_item(items, i) from None
    return calls


def _open_calls_plain(messages: Sequence[Any], approved: bool) -> list[OpenAIItem] | None:
    # One scan: the outputs' ids, and each call with its id and its message's states (parallel
    # lists, read while the item is hot); then only the calls are looked at.
    resolved: dict[Any, None] = {}
    calls: list[OpenAIItem] = []
    call_ids: list[Any] = []
    call_states: list[Any] = []
    add_call = calls.append
    add_id = call_ids.append
    add_states = call_states.append
    for message in messages:
        cls = message.__class__
        if cls is dict:
            items = message.get("items")
            states = message.get("toolCallStates")
            if states is None:
                states = message.get("tool_call_states")
        elif cls is OpenAIMessage:
            items = message.items
            states = message.tool_call_states
        else:
            return None
        if items.__class__ is not list or (states is not None and states.__class__ is not dict):
            return None
        for item in items:
            kind = item["type"]  # a typeless item raises KeyError: the general path handles it
            if kind == _OUTPUT:
                resolved[item.get("call_id")] = None
            elif kind == _CALL:
                add_call(item)
                add_id(item.get("call_id"))
                add_states(states)
    found: list[OpenAIItem] = []
    add = found.append
    for item, call_id, states in zip(calls, call_ids, call_states):
        if call_id in resolved:
            continue
        if states and isinstance(call_id, str):
            state = states.get(call_id)
            if (state is not None and _approval(state)) == approved:
                add(item)
        elif not approved:
            add(item)
    return found


def _open_calls(messages: Sequence[MessageLike], approved: bool) -> list[OpenAIItem]:
    messages = _check_messages(messages)
    try:
        found = _open_calls_plain(messages, approved)
    except (AttributeError, TypeError, KeyError):
        found = None  # a bad or typeless item, an unhashable call id: the general path decides
    return _open_calls_general(messages, approved) if found is None else found


def unanswered_calls(messages: Sequence[MessageLike]) -> list[OpenAIItem]:
    """``function_call`` items with no output anywhere and not approved in their own message.

    Mirrors ``unansweredCalls``: message then item order, the item objects themselves. Known
    weaknesses kept for interop (0.8.0 behaviour): approval state is looked up only in the message
    that holds the call (an approval recorded on another message does not count); a call id
    repeated in two messages is listed twice; a denial recorded without its rejection output
    (hand-built states only) still counts as unanswered.
    """
    return _open_calls(messages, approved=False)


def approved_unexecuted_calls(messages: Sequence[MessageLike]) -> list[OpenAIItem]:
    """Unresolved ``function_call`` items whose same-message state is ``approval == "approved"``.

    Mirrors ``approvedUnexecutedCalls``: these are the calls a resuming agent owes an execution.
    Same 0.8.0 weaknesses as :func:`unanswered_calls` (same-message lookup only, no dedup of a call
    id repeated across messages: it is returned once per message approving it).
    """
    return _open_calls(messages, approved=True)
