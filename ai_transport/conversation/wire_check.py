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
recognised first by :func:`_plainly_well_typed`, a conservative test that only ever answers "well
typed" or "look closer"; anything else takes the full check, whose answers (and refusal texts) are
the only ones a caller sees (``tests/test_conversation_wire_check.py`` compares both on arbitrary
values).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._shapes import MAPPING
from ..channels.channel import ACTIONS, action_name
from ..errors import type_name

__all__ = ["wire_problem"]

_STRING_FIELDS = ("name", "clientId", "serial", "id", "connectionId")
_VERSION_STRING_FIELDS = ("serial", "clientId")
_ONLY_STR = frozenset((str,))
_ACTION_NAMES = frozenset(ACTIONS)
_FAST_FIELDS = (*_STRING_FIELDS, "action", "timestamp", "version", "extras")
_FAST_VERSION_FIELDS = ("serial", "clientId", "timestamp")
_TIERS = ("transport", "codec")


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
            return f"extras.ai.{tier}[{key!r}] is {type_name(value)}, not a string"
    return None


def _plainly_well_typed(message: Any) -> bool:
    """True when ``message`` has the common shape with every field checked exactly of its type
    (then :func:`_full_problem` finds nothing); False means "look closer", never "malformed"."""
    if type(message) is not dict:
        return False
    # every field read in one pass in C (one lookup each, no Python-level call per field)
    name, client_id, serial, id_, connection_id, action, timestamp, version, extras = map(
        message.get, _FAST_FIELDS
    )
    if not (
        (name is None or type(name) is str)
        and (client_id is None or type(client_id) is str)
        and (serial is None or type(serial) is str)
        and (id_ is None or type(id_) is str)
        and (connection_id is None or type(connection_id) is str)
    ):
        return False
    if action is not None and not (type(action) is str and action in _ACTION_NAMES):
        return False
    if timestamp is not None and type(timestamp) is not int and type(timestamp) is not float:
        return False
    if version is not None:
        if type(version) is not dict:
            return False
        vserial, vclient_id, vts = map(version.get, _FAST_VERSION_FIELDS)
        if not ((vserial is None or type(vserial) is str) and (vclient_id is None or type(vclient_id) is str)):
            return False
        if vts is not None and type(vts) is not int and type(vts) is not float:
            return False
    if extras is None:
        return True
    if type(extras) is not dict:
        return False
    ai = extras.get("ai")
    if ai is None:
        return True
    if type(ai) is not dict:
        return False
    for tier in map(ai.get, _TIERS):
        if tier is None:
            continue
        if type(tier) is not dict:
            return False
        try:  # in C: raises unless every key and every value is a str
            "".join(tier)
            "".join(tier.values())
        except TypeError:
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
    if _plainly_well_typed(message):
        return None
    return _full_problem(message)


def _full_problem(message: Any) -> str | None:
    """:func:`wire_problem` without its fast path (what names the problem)."""
    if not isinstance(message, MAPPING):
        return f"message is {type_name(message)}, not an object"
    for key in _STRING_FIELDS:
        value = message.get(key)
        if value is not None and not isinstance(value, str):
            return f"{key} is {type_name(value)}, not a string"
    action = message.get("action")
    if action is not None and action_name(action) is None:
        return f"action {action!r} is not an Ably message action"
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
