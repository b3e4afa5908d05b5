"""Kept for existing imports: the module is :mod:`ai_transport.codec.core.headers`."""

from .core.headers import *  # noqa: F403
from .core.headers import __all__ as __all__
