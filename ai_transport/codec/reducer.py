"""Kept for existing imports: the module is :mod:`ai_transport.codec.responses.reducer`."""

from .responses.reducer import *  # noqa: F403
from .responses.reducer import __all__ as __all__
