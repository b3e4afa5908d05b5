"""Codec-agnostic types of the codec layer (``CodecMessage`` of 0.8.0's ``core/codec/types.ts``)."""

from __future__ import annotations

from typing import Any

__all__ = ["CodecMessage"]


class CodecMessage:
    """A reduced message with its identity: ``codec_message_id`` and ``message`` (``getMessages`` entry).

    ``message`` is the codec's message: an :class:`~ai_transport.codec.OpenAIMessage` (Responses
    codec) or a ``UIMessage`` dict (Vercel codec).
    """

    __slots__ = ("codec_message_id", "message")

    def __init__(self, codec_message_id: str, message: Any) -> None:
        self.codec_message_id = codec_message_id
        self.message = message

    def to_dict(self) -> dict[str, Any]:
        """JS JSON shape ``{codecMessageId, message}``."""
        to_dict = getattr(self.message, "to_dict", None)
        return {"codecMessageId": self.codec_message_id, "message": to_dict() if to_dict is not None else self.message}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CodecMessage):
            return NotImplemented
        return self.codec_message_id == other.codec_message_id and self.message == other.message

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CodecMessage(codec_message_id={self.codec_message_id!r}, message={self.message!r})"
