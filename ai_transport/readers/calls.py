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


def resolved_call_ids(messages: Sequence[MessageLike]) -> CallIdSet:
    """The ``call_id`` of every ``function_call_output`` item, in any message of any role.

    Mirrors ``resolvedCallIds``: an insertion-ordered set; an output counts whether or not a
    matching call exists (an output *before* its call resolves it too). As in 0.8.0, an output
    without a ``call_id`` contributes ``None`` (JS ``undefined``), which resolves calls that also
    lack one.
    """
    found: dict[Any, None] = {}
    for i, message in enumerate(_check_messages(messages)):
        items, _ = _message_parts(message, i)
        try:
            for item in items:
                if item.get("type") == "function_call_output":
                    found[item.get("call_id")] = None
        except AttributeError:
            raise _bad_item(items, i) from None
    return CallIdSet(found)


def _open_calls(messages: Sequence[MessageLike], approved: bool) -> list[OpenAIItem]:
    messages = _check_messages(messages)
    resolved = resolved_call_ids(messages)
    calls: list[OpenAIItem] = []
    for i, message in enumerate(messages):
        items, states = _message_parts(message, i)
        try:
            for item in items:
                if item.get("type") != "function_call":
                    continue
                call_id = item.get("call_id")
                if call_id in resolved:
                    continue
                state = states.get(call_id) if states and isinstance(call_id, str) else None
                is_approved = state.__class__ is dict and state.get("approval") == "approved"
                if not is_approved and state is not None and state.__class__ is not dict:
                    is_approved = isinstance(state, Mapping) and state.get("approval") == "approved"
                if is_approved == approved:
                    calls.append(item)
        except AttributeError:
            raise _bad_item(items, i) from None
    return calls


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
