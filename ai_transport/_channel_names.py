"""Ably's channel-name rule, shared by the in-process channel, the emulator and the CLI (private).

Pure and dependency-free, so that every layer may import it. Ably refuses (error 40010, status 400)
a name that is empty, contains a newline, starts with ``:`` (an empty namespace), or starts with a
``[qualifier]`` that is not closed or is followed by no name (``[?rewind=1]chat`` and ``[meta]log``
are names; ``[meta`` and ``[meta]`` are not).
"""

from __future__ import annotations

from typing import Final

__all__ = ["INVALID_CHANNEL_NAME", "channel_name_problem"]

#: Ably's error code for a refused channel name.
INVALID_CHANNEL_NAME: Final = 40010


def channel_name_problem(name: object) -> str | None:
    """Why Ably refuses ``name`` as a channel name (a sentence naming it), or None if it is valid."""
    if not isinstance(name, str) or not name:
        return "Invalid channel name: a channel name must be a non-empty string"
    if "\n" in name or "\r" in name:
        return f"Invalid channel name {name!r}: a channel name cannot contain a newline"
    if name.startswith(":"):
        return f"Invalid channel name {name!r}: the namespace is empty"
    if name.startswith("["):
        close = name.find("]")
        if close < 0:
            return f"Invalid channel name {name!r}: unclosed channel qualifier"
        if close == len(name) - 1:
            return f"Invalid channel name {name!r}: no channel name after the qualifier"
    return None
