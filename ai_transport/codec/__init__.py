"""The OpenAI Responses codec (sans-I/O): header tiers, encoder, decoder and reducer."""

from .types import CodecMessage, OpenAIItem, OpenAIMessage, ToolCallState

__all__ = ["CodecMessage", "OpenAIItem", "OpenAIMessage", "ToolCallState"]
