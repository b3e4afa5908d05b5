"""JavaScript value semantics the reducer's fold reproduces (pure).

Index keys that tell ``1`` from ``"1"`` and ``true`` (:func:`_key`), JS ``+`` / truthiness /
``Number()``, and positional slots of sparse JS arrays (:data:`_HOLE`, :func:`_get_slot`,
:func:`_set_slot`, :func:`_dense`), so a fold matches ``@ably/ai-transport@0.8.0`` on any input.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Final

from ..core.headers import MISSING, js_to_string

logger = logging.getLogger("ai_transport.codec.reducer")

#: The largest positional gap a slot write may open (JS keeps arbitrarily sparse arrays; a slot
#: that far past the end could only surface after that many earlier slots fill in).
_MAX_SLOT_GAP: Final = 65536
_MAX_ARRAY_INDEX: Final = 4294967294


#: A missing property (JavaScript ``undefined``), distinct from ``None`` (``null``).
_ABSENT: Final = MISSING


class _Token:
    """A module-level singleton marker: copies, deep copies and pickles are the same object."""

    __slots__ = ("_global", "name")

    def __init__(self, name: str, global_name: str) -> None:
        self.name = name
        self._global = global_name

    def __repr__(self) -> str:
        return self.name

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self

    def __reduce__(self) -> str:
        return self._global


#: An unset slot of a positional array (a hole of a sparse JS array).
_HOLE: Final = _Token("HOLE", "_HOLE")


# ---------------------------------------------------------------------------------------------
# JavaScript value semantics used by the fold

# Tags in index keys.
_NULL_KEY: Final = _Token("null", "_NULL_KEY")
_UNDEF_KEY: Final = _Token("undefined", "_UNDEF_KEY")
_BOOL_TAG: Final = _Token("bool", "_BOOL_TAG")
_NUM_TAG: Final = _Token("number", "_NUM_TAG")


def _key(v: Any) -> Any:
    """A dict key with JS ``Map`` / ``===`` identity (``"1"`` != ``1`` != ``True``; objects never equal)."""
    t = type(v)
    if t is str:
        return v
    if v is None:
        return _NULL_KEY
    if v is _ABSENT:
        return _UNDEF_KEY
    if t is bool:
        return (_BOOL_TAG, v)
    if t is int or t is float:
        return (_NUM_TAG, float(v))
    return object()  # an object / array: identity, never equal to another value


def _js_to_number(v: Any) -> float:
    if v is None or v is False:
        return 0.0
    if v is True:
        return 1.0
    if isinstance(v, (int, float)):
        return float(v)
    return math.nan


def _js_plus(a: Any, b: Any) -> Any:
    """JavaScript ``a + b`` (string concatenation unless both sides are non-strings primitives)."""
    if type(a) is str and type(b) is str:
        return a + b
    if isinstance(a, (str, dict, list)) or isinstance(b, (str, dict, list)):
        return js_to_string(a) + js_to_string(b)
    if type(a) is int and type(b) is int:
        return a + b
    return _js_to_number(a) + _js_to_number(b)


def _truthy(v: Any) -> bool:
    if v is None or v is _ABSENT or v is False:
        return False
    if type(v) is str:
        return v != ""
    if isinstance(v, (int, float)):
        return v != 0 and not math.isnan(v)
    return True


def _slot_index(v: Any) -> int | None:
    """The array index a JS property key denotes, or None (a non-index property: invisible)."""
    t = type(v)
    if t is int:
        return v if 0 <= v <= _MAX_ARRAY_INDEX else None
    if t is float:
        return int(v) if v.is_integer() and 0 <= v <= _MAX_ARRAY_INDEX else None
    if t is str:
        if v.isascii() and v.isdigit() and (v == "0" or v[0] != "0"):
            i = int(v)
            return i if i <= _MAX_ARRAY_INDEX else None
        return None
    return None


def _get_slot(arr: list[Any], raw_index: Any) -> Any:
    i = _slot_index(raw_index)
    if i is None or i >= len(arr):
        return None
    v = arr[i]
    return None if v is _HOLE else v


def _set_slot(arr: list[Any], raw_index: Any, value: Any) -> None:
    i = _slot_index(raw_index)
    if i is None:
        return  # a non-index property on a JS array: never visible
    n = len(arr)
    if i < n:
        arr[i] = value
    elif i == n:
        arr.append(value)
    elif i - n <= _MAX_SLOT_GAP:
        arr.extend([_HOLE] * (i - n))
        arr.append(value)
    else:
        logger.warning("fold(); slot index %d is too far past the end (%d), ignoring", i, n)


#: The JSON containers :func:`_clone` copies (exactly these types: a subclass is shared as it is).
_CONTAINERS: Final = frozenset((dict, list))


def _clone(v: Any) -> Any:
    """``structuredClone`` of a JSON value: every dict and list copied, anything else shared."""
    t = type(v)
    if t is not dict and t is not list:
        return v
    out = v.copy()  # then only the nested containers are cloned (no call per scalar)
    for k, x in (v.items() if t is dict else enumerate(v)):
        if type(x) in _CONTAINERS:
            # an empty container's clone is its copy (the empty "content" / "annotations" /
            # "logprobs" of every item and part the reducer clones): no call for it; nor for
            # the second level (a user message's "content" list): its containers are cloned here
            y = x.copy()
            if x:
                for k2, z in (x.items() if type(x) is dict else enumerate(x)):
                    if type(z) in _CONTAINERS:
                        y[k2] = _clone(z)
            out[k] = y
    return out


def _dense(slots: list[Any]) -> list[Any]:
    """The dense prefix of a positional array (the same list when it has no hole)."""
    for i, v in enumerate(slots):
        if v is _HOLE:
            return slots[:i]
    return slots
