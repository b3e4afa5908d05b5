"""The OpenAI Responses codec (sans-I/O): header tiers, encoder, decoder and reducer."""

from .codec import ResponsesCodec
from .encoder import Encoder, EncoderCore, Operation, wire_item
from .events import ItemIdNormaliser, event_to_dict
from .inputs import (
    create_regenerate,
    create_tool_approval_response,
    create_tool_result,
    create_tool_result_error,
    create_user_message,
)
from .types import CodecMessage, OpenAIItem, OpenAIMessage, ToolCallState

__all__ = [
    "CodecMessage",
    "Encoder",
    "EncoderCore",
    "ItemIdNormaliser",
    "OpenAIItem",
    "OpenAIMessage",
    "Operation",
    "ResponsesCodec",
    "ToolCallState",
    "create_regenerate",
    "create_tool_approval_response",
    "create_tool_result",
    "create_tool_result_error",
    "create_user_message",
    "event_to_dict",
    "wire_item",
]
