"""Reading an inbound Ably message as the decoder sees it (sans-I/O).

A dict in Ably's JSON shape or an ably-python ``Message`` becomes an :class:`_Inbound` (the action
normalised as ably-js reads the wire, ``version.serial`` defaulted to the ``serial``); the header
tiers of ``extras.ai`` are read with JavaScript value semantics (headers are untrusted JSON: a bad
one reads as absent, with a warning on the ``ai_transport.codec.decoder`` logger).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any, Final

from ..._shapes import MAPPING
from .headers import MISSING, js_to_string, parse_json

logger = logging.getLogger("ai_transport.codec.decoder")

_CREATE: Final = "message.create"
_UPDATE: Final = "message.update"
_DELETE: Final = "message.delete"
_APPEND: Final = "message.append"

#: Ably's numeric actions (index) -> ably-js names; only the four the decoder acts on.
_ACTION_BY_INT: Final = {0: _CREATE, 1: _UPDATE, 2: _DELETE, 5: _APPEND}
_ACTION_NAMES: Final = frozenset((_CREATE, _UPDATE, _DELETE, _APPEND, "meta", "message.summary"))


#: A header / property that is absent (JavaScript ``undefined``, distinct from ``null``).
_ABSENT: Final = MISSING


# ---------------------------------------------------------------------------------------------
# JavaScript value semantics at the wire boundary (headers are untrusted JSON)


def _json_field(headers: Mapping[str, Any], key: str) -> Any:
    """0.8.0 ``jsonField(key).read``: ``JSON.parse(headers[key])``; absent or unparseable -> ``_ABSENT``."""
    v = headers.get(key, _ABSENT)
    if v is _ABSENT:
        return _ABSENT
    if type(v) is str:
        if v.isdigit() and len(v) < 16 and v.isascii() and (v[0] != "0" or len(v) == 1):
            return int(v)  # the common case: an index
    else:
        if v is None or isinstance(v, (bool, int, float)):
            return v  # JSON.parse(String(v)) round-trips JSON scalars
        v = js_to_string(v)
    value = parse_json(v)
    if value is _ABSENT:
        logger.warning("decode(); header %r is not valid JSON (%.80r), reading it as absent", key, v)
    return value


def _str_field(headers: Mapping[str, Any], key: str, default: Any = _ABSENT) -> Any:
    """0.8.0 ``strField(key, fallback).read``: ``headers[key] ?? fallback``."""
    v = headers.get(key)
    return default if v is None else v


def _bool_field(headers: Mapping[str, Any], key: str, default: Any = _ABSENT) -> Any:
    """0.8.0 ``boolField(key, fallback).read``: ``"true"`` -> True, other present value -> False."""
    if key not in headers:
        return default
    return headers[key] == "true"


def _prop(obj: Any, key: str) -> Any:
    """``obj?.[key]`` for a JSON value: a dict's value, else ``_ABSENT`` (incl. null / primitives)."""
    if _is_map(obj):
        return obj.get(key, _ABSENT)
    return _ABSENT


def _nullish(v: Any, default: Any) -> Any:
    """``v ?? default``."""
    return default if v is None or v is _ABSENT else v


def _strip(bag: dict[str, Any]) -> dict[str, Any]:
    """``stripUndefined``: drop absent values."""
    return {k: v for k, v in bag.items() if v is not _ABSENT}


_EMPTY: Final[Mapping[str, Any]] = {}


def _is_map(v: Any) -> bool:
    return type(v) is dict or isinstance(v, MAPPING)


def _tier(extras: Any, tier: str) -> Mapping[str, Any]:
    """One tier of ``extras.ai`` (``{}`` when missing or not an object; arrays read as empty). Not copied."""
    if type(extras) is not dict and not isinstance(extras, MAPPING):
        return _EMPTY
    ai = extras.get("ai")
    if type(ai) is not dict and not isinstance(ai, MAPPING):
        if ai is not None:
            logger.warning(
                "decode(); extras.ai is not an object (%s), reading it as empty", type(ai).__name__
            )
        return _EMPTY
    sub = ai.get(tier)
    if type(sub) is dict or isinstance(sub, MAPPING):
        return sub
    if sub is not None:
        logger.warning(
            "decode(); extras.ai.%s is not an object (%s), reading it as empty", tier, type(sub).__name__
        )
    return _EMPTY


def _warn_data(data: Any, serial: Any) -> None:
    if data is not None and data is not _ABSENT:
        logger.warning("decode(); stream %r: data is %s, not a string; ignored", serial, type(data).__name__)


def _has_ai_envelope(extras: Any) -> bool:
    if not _is_map(extras):
        return False
    ai = extras.get("ai")
    return _is_map(ai) or isinstance(ai, list)


def _version_le(a: Any, b: Any) -> bool:
    """``a <= b`` as JavaScript compares serials (strings lexicographically, numbers numerically)."""
    if type(a) is str and type(b) is str:
        return a <= b
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return a <= b
    return False


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Reading an inbound message (dict or ably-python Message)


class _Inbound:
    """The fields of an inbound message the decoder reads (``action`` normalised, ``version`` defaulted)."""

    __slots__ = ("action", "data", "extras", "name", "publisher", "serial", "version")

    action: Any
    name: Any
    serial: Any
    version: Any
    data: Any
    extras: Any
    #: The Ably-verified publisher (``clientId``; None when it is not a string).
    publisher: str | None


def _publisher(client_id: Any) -> str | None:
    """A wire's publisher as the decoder keys per-publisher state: its Ably ``clientId``, None (the
    anonymous publisher) when it has none or it is not a string."""
    return client_id if isinstance(client_id, str) else None


def _read_inbound(msg: Any) -> _Inbound | None:
    m = _Inbound()
    if type(msg) is dict or isinstance(msg, MAPPING):
        get = msg.get
        m.action = get("action")
        m.name = get("name")
        m.serial = get("serial")
        m.data = get("data", _ABSENT)
        m.extras = get("extras")
        m.publisher = _publisher(get("clientId"))
        version = get("version")
    elif hasattr(msg, "action") and hasattr(msg, "serial") and hasattr(msg, "extras"):
        m.action = getattr(msg, "action", None)
        m.name = getattr(msg, "name", None)
        m.serial = getattr(msg, "serial", None)
        m.data = getattr(msg, "data", _ABSENT)
        m.extras = getattr(msg, "extras", None)
        m.publisher = _publisher(getattr(msg, "client_id", None))
        version = getattr(msg, "version", None)
    else:
        return None
    # ably-js fills version.serial from the message serial when missing (Message.fromValues).
    if type(version) is dict or isinstance(version, MAPPING):
        vs = version.get("serial")
    elif version is not None:
        vs = getattr(version, "serial", None)
    else:
        vs = None
    if not vs and m.serial:
        vs = m.serial
    m.version = _ABSENT if vs is None else vs
    action = m.action
    if type(action) is not str:
        m.action = _wire_action(action)
    elif action not in _ACTION_NAMES:
        m.action = None
    return m


_ACTIONS_BY_KEY: Final = {"0": _CREATE, "1": _UPDATE, "2": _DELETE, "5": _APPEND}


def _wire_action(action: Any) -> str | None:
    """ably-js's ``stringifyAction``: ``actions[action || 0] ?? 'unknown'`` (as it decodes the wire).

    A missing action is a create: Ably omits the zero action on the wire (ably-python then gives
    ``None``), and ably-js reads it as ``message.create``. Unknown values are ignored (``None``).
    """
    if action is None or action is False:
        return _CREATE
    if isinstance(action, int):  # MessageAction (IntEnum) and plain ints
        return _ACTION_BY_INT.get(int(action)) if action is not True else None
    if isinstance(action, float):
        if action == 0 or math.isnan(action):
            return _CREATE
        return _ACTION_BY_INT.get(int(action)) if action.is_integer() else None
    if isinstance(action, list):
        return _ACTIONS_BY_KEY.get(js_to_string(action))
    return None


# ---------------------------------------------------------------------------------------------
# What the decoder skips


class _Malformed(Exception):
    """A message the reference would throw on; skipped with a warning."""
