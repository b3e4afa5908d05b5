"""Kept for existing imports: the module is :mod:`ai_transport.codec.responses.types`."""

from .responses.types import *  # noqa: F403
from .responses.types import CodecMessage as CodecMessage
