"""Kept for existing imports: the module is :mod:`ai_transport.codec.responses.codec`."""

from .responses.codec import *  # noqa: F403
from .responses.codec import __all__ as __all__
