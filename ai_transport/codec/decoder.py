"""Kept for existing imports: the module is :mod:`ai_transport.codec.responses.decoder`."""

from .responses.decoder import *  # noqa: F403
from .responses.decoder import __all__ as __all__
