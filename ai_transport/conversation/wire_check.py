"""Type checks of every wire field the sessions read, at the boundary (pure).

A channel is shared with clients we do not control, so anything read from it is untrusted input.
The sessions read the message's ``name``, ``action``, ``serial``, ``clientId``, ``timestamp``,
``version`` (``serial``, ``clientId``, ``timestamp``) and the two header tiers
``extras.ai.transport`` / ``extras.ai.codec``, which ``@ably/ai-transport@0.8.0`` writes as flat
string-to-string maps. :func:`wire_problem` names the first field that does not have its wire type;
a session skips such a message whole (logged and counted in ``session.skipped``) instead of letting
a value of the wrong type reach its tree, views or readers. ``data`` is left to the codec decoder,
which already checks it field by field.

A message without an AI envelope (no ``extras.ai``) is a *foreign* message and passes, as long as
the fields above are well typed; a present but non-object ``extras`` / ``extras.ai`` does not.

Every wire of a fold is checked, so the common shape (plain dicts, every field exactly its type) is
recognised first by :func:`plainly_well_typed` (one msgspec conversion to :class:`_Wire`), a
conservative test that only ever answers "well typed" or "look closer"; anything else takes the full
check, whose answers (and refusal texts) are
the only ones a caller sees (``tests/test_conversation_wire_check.py`` compares both on arbitrary
values).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from .._shapes import MAPPING
from ..channels.channel import ACTIONS, action_name
from ..errors import quoted, type_name

__all__ = ["full_problem", "plainly_well_typed", "wire_problem"]

_STRING_FIELDS = ("name", "clientId", "serial", "id", "connectionId")
_VERSION_STRING_FIELDS = ("serial", "clientId")
_ONLY_STR = frozenset((str,))
_convert = msgspec.convert


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tier_problem(ai: Mapping[Any, Any], tier: str) -> str | None:
    headers = ai.get(tier)
    if headers is None:
        return None
    if not isinstance(headers, MAPPING):
        return f"extras.ai.{tier} is {type_name(headers)}, not an object"
    if type(headers) is dict and _ONLY_STR.issuperset(map(type, headers)) and _ONLY_STR.issuperset(
        map(type, headers.values())
    ):
        return None  # the common case, checked in C: every key and value exactly a str
    for key, value in headers.items():
        if not isinstance(key, str):
            return f"extras.ai.{tier} has a {type_name(key)} key"
        if not isinstance(value, str):
            return f"extras.ai.{tier}[{quoted(key)}] is {type_name(value)}, not a string"
    return None


class _Version(msgspec.Struct, gc=False):
    """``version`` as the fast path reads it (other fields are not looked at)."""

    serial: str | None = None
    clientId: str | None = None
    timestamp: Any = None  # checked by plainly_well_typed: msgspec would take a Decimal as a float


class _Ai(msgspec.Struct, gc=False):
    """``extras.ai``: both header tiers flat string-to-string maps."""

    transport: dict[str, str] | None = None
    codec: dict[str, str] | None = None


class _Extras(msgspec.Struct, gc=False):
    """``extras`` (only ``ai`` is read)."""

    ai: _Ai | None = None


class _Wire(msgspec.Struct, gc=False):
    """The fields :func:`wire_problem` checks, each of its wire type (``None``: absent or null)."""

    name: str | None = None
    clientId: str | None = None
    serial: str | None = None
    id: str | None = None
    connectionId: str | None = None
    action: Literal[ACTIONS] | None = None  # type: ignore[valid-type]
    timestamp: Any = None
    version: _Version | None = None
    extras: _Extras | None = None


def plainly_well_typed(message: Any) -> bool:
    """True when ``message`` has the common shape with every field checked exactly of its type
    (then :func:`full_problem` finds nothing); False means "look closer", never "malformed".

    The whole message is checked against :class:`_Wire` in one msgspec conversion (in C, fields it
    does not name skipped unread); the two timestamps, which it leaves alone, must be an exact
    ``int`` or ``float``.
    """
    if type(message) is not dict:
        return False
    try:
        wire = _convert(message, _Wire)
    except (msgspec.ValidationError, TypeError, ValueError):  # (ValueError: a lone surrogate, which
        return False  # msgspec cannot encode; the full check takes it as the string it is)
    timestamp = wire.timestamp
    if timestamp is not None and type(timestamp) is not int and type(timestamp) is not float:
        return False
    version = wire.version
    if version is not None:
        vts = version.timestamp
        if vts is not None and type(vts) is not int and type(vts) is not float:
            return False
    return True


def wire_problem(message: Any) -> str | None:
    """None when every field a session reads has its wire type, else what is wrong (for the log).

    Checked: the message is an object; ``name`` / ``clientId`` / ``serial`` / ``id`` /
    ``connectionId`` are strings when present; ``action`` is a known Ably action; ``timestamp`` a
    number; ``version`` an object whose ``serial`` / ``clientId`` are strings and ``timestamp`` a
    number; ``extras`` and ``extras.ai`` objects; every key and value of ``extras.ai.transport`` and
    ``extras.ai.codec`` a string.
    """
    if plainly_well_typed(message):
        return None
    return full_problem(message)


def full_problem(message: Any) -> str | None:
    """:func:`wire_problem` without its fast path (what names the problem)."""
    if not isinstance(message, MAPPING):
        return f"message is {type_name(message)}, not an object"
    for key in _STRING_FIELDS:
        value = message.get(key)
        if value is not None and not isinstance(value, str):
            return f"{key} is {type_name(value)}, not a string"
    action = message.get("action")
    if action is not None and action_name(action) is None:
        return f"action {quoted(action)} is not an Ably message action"
    timestamp = message.get("timestamp")
    if timestamp is not None and not _is_number(timestamp):
        return f"timestamp is {type_name(timestamp)}, not a number"
    version = message.get("version")
    if version is not None:
        if not isinstance(version, MAPPING):
            return f"version is {type_name(version)}, not an object"
        for key in _VERSION_STRING_FIELDS:
            value = version.get(key)
            if value is not None and not isinstance(value, str):
                return f"version.{key} is {type_name(value)}, not a string"
        vts = version.get("timestamp")
        if vts is not None and not _is_number(vts):
            return f"version.timestamp is {type_name(vts)}, not a number"
    extras = message.get("extras")
    if extras is None:
        return None
    if not isinstance(extras, MAPPING):
        return f"extras is {type_name(extras)}, not an object"
    ai = extras.get("ai")
    if ai is None:
        return None
    if not isinstance(ai, MAPPING):
        return f"extras.ai is {type_name(ai)}, not an object"
    return _tier_problem(ai, "transport") or _tier_problem(ai, "codec")
