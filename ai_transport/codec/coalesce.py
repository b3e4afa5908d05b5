"""Kept for existing imports: the module is :mod:`ai_transport.codec.core.coalesce`."""

from .core.coalesce import *  # noqa: F403
from .core.coalesce import __all__ as __all__
