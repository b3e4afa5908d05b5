"""Kept for existing imports: the module is :mod:`ai_transport.codec.responses.encoder`."""

from .responses.encoder import *  # noqa: F403
from .responses.encoder import __all__ as __all__
