"""ai_transport: carry OpenAI Responses agent runs over Ably realtime channels.

Wire-compatible with the npm package ``@ably/ai-transport@0.8.0`` (``openai`` entry), so a browser
running that SDK and a Python agent built on this library share one channel.

The most used names are importable from here; the channel, session and Responses-client names
load lazily (``import ai_transport`` alone does not import the ``ably`` SDK):

- codec: :class:`ResponsesCodec`, :class:`UIMessageCodec` (Vercel AI SDK UI messages),
  :class:`OpenAIMessage`, :class:`CodecMessage` and the input factories (``create_user_message`` …);
- readers: ``to_responses_input``, ``resolved_call_ids``, ``unanswered_calls``,
  ``approved_unexecuted_calls``; for the Vercel codec ``pending_tool_calls``,
  ``approved_pending_tool_calls``; ``sanitize_input``, ``preflight``, ``repair``;
- channels and sessions: :class:`AgentSession`, :class:`ClientSession`, :class:`InProcessHub`,
  :class:`AblyChannel`, :class:`Invocation`;
- model side: :class:`ResponsesClient`;
- errors: :class:`AITransportError` and its subclasses, :class:`ErrorCode`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .codec.types import CodecMessage, OpenAIMessage, ToolCallState
from .errors import AITransportError, ErrorCode, InvalidArgumentError, InvalidTypeError
from .readers.calls import (
    approved_unexecuted_calls,
    resolved_call_ids,
    to_responses_input,
    unanswered_calls,
)

__version__ = "0.1.0"

_LAZY = {
    # codec
    "ResponsesCodec": "ai_transport.codec",
    "UIMessageCodec": "ai_transport.codec",
    "pending_tool_calls": "ai_transport.codec",
    "approved_pending_tool_calls": "ai_transport.codec",
    "create_user_message": "ai_transport.codec",
    "create_tool_result": "ai_transport.codec",
    "create_tool_result_error": "ai_transport.codec",
    "create_tool_approval_response": "ai_transport.codec",
    "create_regenerate": "ai_transport.codec",
    # readers (hygiene / preflight)
    "sanitize_input": "ai_transport.readers",
    "preflight": "ai_transport.readers",
    "repair": "ai_transport.readers",
    # channels and sessions
    "AgentSession": "ai_transport.sessions",
    "ClientSession": "ai_transport.sessions",
    "InProcessHub": "ai_transport.channels",
    "AblyChannel": "ai_transport.channels",
    "Invocation": "ai_transport.sessions",
    "View": "ai_transport.sessions",
    # model side
    "ResponsesClient": "ai_transport.responses",
}

if TYPE_CHECKING:  # pragma: no cover
    from .channels import AblyChannel, InProcessHub
    from .codec import (
        ResponsesCodec,
        UIMessageCodec,
        approved_pending_tool_calls,
        create_regenerate,
        create_tool_approval_response,
        create_tool_result,
        create_tool_result_error,
        create_user_message,
        pending_tool_calls,
    )
    from .readers import preflight, repair, sanitize_input
    from .responses import ResponsesClient
    from .sessions import AgentSession, ClientSession, Invocation, View


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ai_transport' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AITransportError",
    "AblyChannel",
    "AgentSession",
    "ClientSession",
    "CodecMessage",
    "ErrorCode",
    "InProcessHub",
    "InvalidArgumentError",
    "InvalidTypeError",
    "Invocation",
    "OpenAIMessage",
    "ResponsesClient",
    "ResponsesCodec",
    "ToolCallState",
    "UIMessageCodec",
    "View",
    "__version__",
    "approved_pending_tool_calls",
    "approved_unexecuted_calls",
    "create_regenerate",
    "create_tool_approval_response",
    "create_tool_result",
    "create_tool_result_error",
    "create_user_message",
    "pending_tool_calls",
    "preflight",
    "repair",
    "resolved_call_ids",
    "sanitize_input",
    "to_responses_input",
    "unanswered_calls",
]
