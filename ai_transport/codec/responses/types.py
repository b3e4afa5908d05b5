"""Types of the OpenAI Responses codec, mirroring ``@ably/ai-transport@0.8.0``'s ``openai`` entry.

Items, events and inputs are plain JSON-shaped ``dict`` objects (typed with ``TypedDict`` for
readers of the code); nothing a newer API adds is dropped. :class:`OpenAIMessage` is the one class:
a run message with ``role``, ``items`` and ``tool_call_states``, convertible to and from the JS
JSON shape ``{role, items, toolCallStates?}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from ...errors import InvalidArgumentError, InvalidTypeError, type_name
from ..core.types import CodecMessage as CodecMessage

Role = Literal["user", "assistant"]
Approval = Literal["pending", "approved", "denied"]
ToolResult = Literal["ok", "failed"]

#: An OpenAI Responses item (output ``message`` / ``reasoning`` / ``function_call``, input
#: ``function_call_output`` / ``message``). Kept as a plain dict so unknown fields survive.
OpenAIItem = dict[str, Any]


class ToolCallState(TypedDict, total=False):
    """Per-``call_id`` state of a tool call (``OpenAIToolCallState`` in JS). All keys optional."""

    approval: Approval
    result: ToolResult
    name: str
    arguments: str
    reason: str


# ---------------------------------------------------------------------------------------------
# Inputs (client -> agent). Optional routing fields on all: parent, target, codecMessageId.


class UserMessageInput(TypedDict, total=False):
    """``{kind: "user-message", message: {role, items}}``."""

    kind: Literal["user-message"]
    message: dict[str, Any]
    parent: str
    target: str
    codecMessageId: str


class RegenerateInput(TypedDict, total=False):
    """``{kind: "regenerate", target, parent}`` (wire-only; decodes to nothing)."""

    kind: Literal["regenerate"]
    target: str
    parent: str
    codecMessageId: str


class ToolResultPayload(TypedDict):
    """Payload of a ``tool-result`` input."""

    call_id: str
    output: Any


class ToolResultInput(TypedDict, total=False):
    """``{kind: "tool-result", codecMessageId, payload: {call_id, output}}``."""

    kind: Literal["tool-result"]
    codecMessageId: str
    payload: ToolResultPayload
    parent: str
    target: str


class ToolResultErrorPayload(TypedDict):
    """Payload of a ``tool-result-error`` input."""

    call_id: str
    message: str


class ToolResultErrorInput(TypedDict, total=False):
    """``{kind: "tool-result-error", codecMessageId, payload: {call_id, message}}``."""

    kind: Literal["tool-result-error"]
    codecMessageId: str
    payload: ToolResultErrorPayload
    parent: str
    target: str


class ToolApprovalPayload(TypedDict, total=False):
    """Payload of a ``tool-approval-response`` input; ``reason`` only when set."""

    call_id: str
    approved: bool
    reason: str


class ToolApprovalResponseInput(TypedDict, total=False):
    """``{kind: "tool-approval-response", codecMessageId, payload: {call_id, approved, reason?}}``."""

    kind: Literal["tool-approval-response"]
    codecMessageId: str
    payload: ToolApprovalPayload
    parent: str
    target: str


Input = (
    UserMessageInput | RegenerateInput | ToolResultInput | ToolResultErrorInput | ToolApprovalResponseInput
)

# ---------------------------------------------------------------------------------------------
# Outputs (agent -> client): Responses stream events (dicts with a "type") plus two codec events.


class FunctionCallOutputEvent(TypedDict):
    """``{type: "function_call_output", item}`` — a tool output published by the agent."""

    type: Literal["function_call_output"]
    item: dict[str, Any]


class ToolApprovalRequestEvent(TypedDict):
    """``{type: "tool-approval-request", call_id, name, arguments}`` — a gated call awaiting a decision."""

    type: Literal["tool-approval-request"]
    call_id: str
    name: str
    arguments: str


#: Any output event: a Responses stream event dict or one of the two codec events above.
OutputEvent = dict[str, Any]

_ROLES = ("user", "assistant")


class OpenAIMessage:
    """One run message: ``role``, ``items`` (Responses items) and ``tool_call_states``.

    ``items`` is kept by reference: :meth:`from_dict` does not copy the list or the item dicts, so
    readers such as :func:`ai_transport.readers.to_responses_input` hand back the very objects.
    """

    __slots__ = ("items", "role", "tool_call_states")

    def __init__(
        self,
        role: str = "assistant",
        items: list[OpenAIItem] | None = None,
        tool_call_states: dict[str, ToolCallState] | None = None,
    ) -> None:
        self.role = role
        self.items: list[OpenAIItem] = items if items is not None else []
        self.tool_call_states: dict[str, ToolCallState] = (
            tool_call_states if tool_call_states is not None else {}
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, path: str = "message") -> OpenAIMessage:
        """Read the JS JSON shape ``{role, items, toolCallStates?}``.

        Raises :class:`~ai_transport.errors.InvalidTypeError` / ``InvalidArgumentError`` naming the
        field (e.g. ``messages[2].items[0]``) when the shape is wrong. Unknown keys are ignored.
        """
        if isinstance(d, OpenAIMessage):
            return d
        if not isinstance(d, Mapping):
            raise InvalidTypeError(f"{path} must be an object with 'role' and 'items', got {type_name(d)}")
        role = d.get("role", "assistant")
        if not isinstance(role, str):
            raise InvalidTypeError(f"{path}.role must be a string, got {type_name(role)}")
        if role not in _ROLES:
            raise InvalidArgumentError(f"{path}.role must be 'user' or 'assistant', got {role!r}")
        items = d.get("items")
        if not isinstance(items, list):
            raise InvalidTypeError(f"{path}.items must be an array, got {type_name(items)}")
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise InvalidTypeError(f"{path}.items[{i}] must be an object, got {type_name(item)}")
        states = d.get("toolCallStates", d.get("tool_call_states"))
        if states is None:
            states = {}
        elif not isinstance(states, dict):
            raise InvalidTypeError(f"{path}.toolCallStates must be an object, got {type_name(states)}")
        else:
            for call_id, state in states.items():
                if not isinstance(state, dict):
                    raise InvalidTypeError(
                        f"{path}.toolCallStates[{call_id!r}] must be an object, got {type_name(state)}"
                    )
        return cls(role, items, states)

    def to_dict(self) -> dict[str, Any]:
        """Write the JS JSON shape; ``toolCallStates`` (a copy) only when non-empty."""
        out: dict[str, Any] = {"role": self.role, "items": self.items}
        if self.tool_call_states:
            out["toolCallStates"] = {k: dict(v) for k, v in self.tool_call_states.items()}
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpenAIMessage):
            return NotImplemented
        return (
            self.role == other.role
            and self.items == other.items
            and self.tool_call_states == other.tool_call_states
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"OpenAIMessage(role={self.role!r}, items={self.items!r}, "
            f"tool_call_states={self.tool_call_states!r})"
        )
