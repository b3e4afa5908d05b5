"""ai_transport: carry OpenAI Responses agent runs over Ably realtime channels.

Wire-compatible with the npm package ``@ably/ai-transport@0.8.0`` (``openai`` entry), so a browser
running that SDK and a Python agent built on this library share one channel.
"""

from .codec.types import CodecMessage, OpenAIMessage, ToolCallState
from .errors import AITransportError, ErrorCode, InvalidArgumentError, InvalidTypeError
from .readers import (
    approved_unexecuted_calls,
    resolved_call_ids,
    to_responses_input,
    unanswered_calls,
)

__version__ = "0.1.0"

__all__ = [
    "AITransportError",
    "CodecMessage",
    "ErrorCode",
    "InvalidArgumentError",
    "InvalidTypeError",
    "OpenAIMessage",
    "ToolCallState",
    "__version__",
    "approved_unexecuted_calls",
    "resolved_call_ids",
    "to_responses_input",
    "unanswered_calls",
]
