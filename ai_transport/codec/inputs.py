"""Kept for existing imports: the module is :mod:`ai_transport.codec.responses.inputs`."""

from .responses.inputs import *  # noqa: F403
from .responses.inputs import __all__ as __all__
