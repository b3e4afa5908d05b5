"""The OpenAI Responses codec (sans-I/O): header tiers, encoder, decoder and reducer."""

from .codec import ResponsesCodec
from .decoder import Decoder, DecodeResult
from .encoder import Encoder, EncoderCore, Operation, wire_item
from .events import ItemIdNormaliser, event_to_dict
from .inputs import (
    create_regenerate,
    create_tool_approval_response,
    create_tool_result,
    create_tool_result_error,
    create_user_message,
)
from .reducer import ReducerState
from .types import CodecMessage, OpenAIItem, OpenAIMessage, ToolCallState

__all__ = [
    "CodecMessage",
    "DecodeResult",
    "Decoder",
    "Encoder",
    "EncoderCore",
    "ItemIdNormaliser",
    "OpenAIItem",
    "OpenAIMessage",
    "Operation",
    "ReducerState",
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
