"""The codecs (sans-I/O): a codec-agnostic core and one package per codec.

- :mod:`.core`: header tiers and field bindings, the stream encoder core and its asyncio shell, the
  stream decoder, the decode lifecycle tracker, the descriptor-table drivers;
- :mod:`.responses`: the OpenAI Responses codec (:class:`ResponsesCodec`, 0.8.0's ``openai`` entry);
- :mod:`.vercel`: the Vercel AI SDK UI message codec (:class:`UIMessageCodec`, 0.8.0's ``vercel``
  entry).

The Responses names are re-exported here (and its module paths ``codec.decoder``, ``codec.reducer``
… are kept).
"""

from .core.types import CodecMessage
from .responses.codec import ResponsesCodec
from .responses.decoder import Decoder, DecodeResult
from .responses.encoder import Encoder, EncoderCore, Operation, wire_item
from .responses.events import ItemIdNormaliser, event_to_dict
from .responses.inputs import (
    create_regenerate,
    create_tool_approval_response,
    create_tool_result,
    create_tool_result_error,
    create_user_message,
)
from .responses.reducer import ReducerState
from .responses.types import OpenAIItem, OpenAIMessage, ToolCallState
from .vercel import UIMessageCodec, UIProjection, approved_pending_tool_calls, pending_tool_calls

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
    "UIMessageCodec",
    "UIProjection",
    "approved_pending_tool_calls",
    "create_regenerate",
    "create_tool_approval_response",
    "create_tool_result",
    "create_tool_result_error",
    "create_user_message",
    "event_to_dict",
    "pending_tool_calls",
    "wire_item",
]
