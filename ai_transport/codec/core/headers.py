"""Header tiers and field encodings of the ``@ably/ai-transport@0.8.0`` wire (pure).

An AI Transport message carries ``extras = {"ai": {"transport": {...}, "codec": {...}}}``: two flat
string-to-string maps. The transport tier holds session/stream bookkeeping (``stream``, ``status``,
``stream-id``, ``codec-message-id``, ``run-id`` …), the codec tier the payload fields the codec needs
(``kind``, ``item_id``, ``output_index`` …). A message without an object ``extras.ai`` is *foreign*.

Field bindings (as 0.8.0's ``strField`` / ``boolField`` / ``jsonField``):

============  ==============================  ==============================================
binding       write                           read
============  ==============================  ==============================================
string        the value if it is a ``str``    missing -> default
boolean       ``"true"`` / ``"false"``        ``"true"`` -> True, other string -> False
JSON          ``JSON.stringify`` unless None  ``JSON.parse``; failure -> absent
============  ==============================  ==============================================

:func:`js_json_dumps` renders exactly what ``JSON.stringify`` renders (numbers included), so a header
written here is byte-identical to the JS encoder's.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec
from typing_extensions import Self

from ..._shapes import MAPPING

__all__ = [
    "AI",
    "CODEC",
    "MISSING",
    "NAME_INPUT",
    "NAME_OUTPUT",
    "TRANSPORT",
    "build_extras",
    "codec_headers",
    "has_ai_envelope",
    "js_json_dumps",
    "js_number",
    "js_to_string",
    "parse_json",
    "read_bool",
    "read_json",
    "read_str",
    "transport_headers",
    "write_bool",
    "write_json",
    "write_str",
]

AI: Final = "ai"
TRANSPORT: Final = "transport"
CODEC: Final = "codec"

NAME_INPUT: Final = "ai-input"
NAME_OUTPUT: Final = "ai-output"


class _Missing:
    """Sentinel for an absent value: JavaScript ``undefined``, distinct from ``None`` (JSON ``null``).

    One instance; copies, deep copies and pickles are that instance (the codec's decoder and
    reducer keep it inside their state).
    """

    __slots__ = ()
    _instance: Self | None = None

    def __new__(cls) -> Self:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __copy__(self) -> _Missing:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Missing:
        return self

    def __reduce__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


#: JavaScript ``undefined``: returned by :func:`read_json` when the header is absent or not valid
#: JSON; the decoder and reducer use it for absent properties.
MISSING: Final = _Missing()


# ---------------------------------------------------------------------------------------------
# Tiers


def has_ai_envelope(extras: Any) -> bool:
    """True when ``extras.ai`` is an object (the message is an AI Transport message)."""
    return isinstance(extras, MAPPING) and isinstance(extras.get(AI), MAPPING)


def _tier(extras: Any, tier: str) -> dict[str, str]:
    """The general read of one tier (:func:`transport_headers` / :func:`codec_headers` try plain dicts first)."""
    if not isinstance(extras, MAPPING):
        return {}
    ai = extras.get(AI)
    if not isinstance(ai, MAPPING):
        return {}
    sub = ai.get(tier)
    if not isinstance(sub, MAPPING):
        return {}
    return sub  # type: ignore[return-value]


def transport_headers(extras: Any) -> dict[str, str]:
    """The transport tier of ``extras`` (``{}`` when missing or not an object). Not copied."""
    if type(extras) is dict:  # the common case (plain dicts all the way down): read here, in one call
        ai = extras.get(AI)
        if type(ai) is dict:
            sub = ai.get(TRANSPORT)
            if type(sub) is dict:
                return sub
    return _tier(extras, TRANSPORT)


def codec_headers(extras: Any) -> dict[str, str]:
    """The codec tier of ``extras`` (``{}`` when missing or not an object). Not copied."""
    if type(extras) is dict:  # the common case (plain dicts all the way down): read here, in one call
        ai = extras.get(AI)
        if type(ai) is dict:
            sub = ai.get(CODEC)
            if type(sub) is dict:
                return sub
    return _tier(extras, CODEC)


def build_extras(transport: Mapping[str, str], codec: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``{"ai": {"transport": {...}, "codec": {...}}}``; the codec tier is omitted when empty."""
    ai: dict[str, Any] = {TRANSPORT: dict(transport)}
    if codec:
        ai[CODEC] = dict(codec)
    return {AI: ai}


# ---------------------------------------------------------------------------------------------
# Field bindings


def write_str(headers: dict[str, str], key: str, value: Any) -> None:
    """Set ``headers[key] = value`` only when ``value`` is a string."""
    if isinstance(value, str):
        headers[key] = value


def write_bool(headers: dict[str, str], key: str, value: Any) -> None:
    """Set ``"true"``/``"false"`` only when ``value`` is a bool."""
    if isinstance(value, bool):
        headers[key] = "true" if value else "false"


def write_json(headers: dict[str, str], key: str, value: Any) -> None:
    """Set ``JSON.stringify(value)`` unless ``value`` is None."""
    if value is not None:
        headers[key] = js_json_dumps(value)


def read_str(headers: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """The string at ``key``, else ``default`` (a non-string value reads as missing)."""
    value = headers.get(key)
    return value if type(value) is str or isinstance(value, str) else default


def read_bool(headers: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """``True`` for ``"true"``, ``False`` for any other string, ``default`` when missing."""
    value = headers.get(key)
    if value is None:
        return default
    return value == "true"


_JSON_DECODER = msgspec.json.Decoder()
_DIGIT_RUNS = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))  # digit -> "0", else " "
_SIXTEEN_DIGITS = b"0" * 16
_NEGATIVE_ZERO = re.compile(rb"-0(?![.0-9eE])")


def _js_int(literal: str) -> int | float:
    # JSON.parse yields a double: -0 stays negative, beyond 2**53 integers round (as float() does).
    if literal == "-0":
        return -0.0
    if len(literal) <= 17:
        n = int(literal)
        return n if -(2**53) <= n <= 2**53 else float(n)
    return float(literal)


def _js_constant(literal: str) -> Any:
    raise ValueError(f"{literal} is not JSON")  # JSON.parse rejects NaN / Infinity


_JS_JSON_DECODER = json.JSONDecoder(parse_int=_js_int, parse_constant=_js_constant)


def parse_json(text: str) -> Any:
    """``JSON.parse(text)``; :data:`MISSING` where JavaScript would throw.

    As in JavaScript: ``NaN`` / ``Infinity`` are invalid, numbers are doubles (``-0`` is ``-0.0``,
    integers beyond 2**53 become the nearest float, ``1e400`` is ``inf``), lone-surrogate escapes are
    kept, the last of duplicate keys wins.
    """
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogate characters: only the stdlib parser takes them
        raw = None
    # msgspec (fast) unless an integer literal may need JS rounding; where msgspec is stricter than
    # JSON.parse (lone-surrogate escapes, out-of-range exponents) the stdlib parser decides.
    if (
        raw is not None
        and _SIXTEEN_DIGITS not in raw.translate(_DIGIT_RUNS)
        and not _NEGATIVE_ZERO.search(raw)
    ):
        try:
            return _JSON_DECODER.decode(raw)
        except msgspec.ValidationError:  # a number out of double range: JSON.parse gives +-Infinity
            pass
        except (msgspec.DecodeError, RecursionError):
            if b"\\u" not in raw:  # else maybe a lone-surrogate escape, which JSON.parse accepts
                return MISSING
    try:
        return _JS_JSON_DECODER.decode(text)
    except (ValueError, RecursionError):
        return MISSING


def read_json(headers: Mapping[str, Any], key: str) -> Any:
    """``JSON.parse`` (:func:`parse_json`) of the value at ``key``; :data:`MISSING` when absent, not a
    string or not valid JSON."""
    value = headers.get(key)
    if not isinstance(value, str):
        return MISSING
    return parse_json(value)


# ---------------------------------------------------------------------------------------------
# JSON.stringify-compatible serialisation


def js_number(x: float) -> str:
    """Render a number exactly as JavaScript's ``Number.prototype.toString`` / ``JSON.stringify``."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"
    r = repr(x)
    if "e" not in r and "E" not in r:
        return r.removesuffix(".0")
    mantissa, exp_s = r.split("e")
    exp = int(exp_s)
    digits = mantissa.replace("-", "").replace(".", "")
    neg = x < 0
    # JS: exponent form only when the decimal exponent n satisfies n >= 21 or n <= -6.
    n = exp + 1  # position of the decimal point relative to the digit string
    if 1 <= n <= 21:
        out = digits + "0" * (n - len(digits)) if n >= len(digits) else digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        out = f"{m}e{'+' if exp > 0 else '-'}{abs(exp)}"
    return "-" + out if neg else out



def js_to_string(v: Any) -> str:
    """``String(v)`` for JSON-shaped values: :data:`MISSING` is ``"undefined"``, ``None`` ``"null"``,
    numbers via :func:`js_number`, arrays joined with ``,`` (null / undefined elements empty),
    objects ``"[object Object]"``."""
    if type(v) is str:
        return v
    if type(v) is int:  # an index (bool is not an int here)
        return str(v)
    if v is MISSING:
        return "undefined"
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return js_number(v)
    if isinstance(v, (list, tuple)):
        return ",".join("" if (x is None or x is MISSING) else js_to_string(x) for x in v)
    return "[object Object]"

_MAX_INDEX = 2**32 - 2


def _is_array_index(key: str) -> bool:
    """True for a canonical JS array index ("0", "7", not "07"): JS objects order these first."""
    return key.isdigit() and key.isascii() and (key == "0" or key[0] != "0") and int(key) <= _MAX_INDEX


def _js_key_order(d: dict[Any, Any]) -> list[Any]:
    """Keys in JS property order: array indices ascending, then the rest in insertion order."""
    keys = [str(k) for k in d]
    idx = sorted((k for k in keys if _is_array_index(k)), key=int)
    return idx + [k for k in keys if not _is_array_index(k)] if idx else keys


def _needs_slow(value: Any) -> bool:
    """True when ``json.dumps`` would differ from ``JSON.stringify`` (floats, index-like keys)."""
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any((k.__class__ is not str or k[:1].isdigit()) for k in value) or any(
            _needs_slow(v) for v in value.values()
        )
    if isinstance(value, (list, tuple)):
        return any(_needs_slow(v) for v in value)
    return False


def _js_dumps_slow(value: Any) -> str:
    if value is None or value is True or value is False or isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, dict):
        by_str = {str(k): v for k, v in value.items()}
        return (
            "{"
            + ",".join(
                json.dumps(k, ensure_ascii=False) + ":" + _js_dumps_slow(by_str[k]) for k in _js_key_order(value)
            )
            + "}"
        )
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_js_dumps_slow(v) for v in value) + "]"
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def js_json_dumps(value: Any) -> str:
    """``JSON.stringify(value)`` of the object JS would hold after parsing the same JSON.

    Compact separators, non-ASCII kept, numbers as JS prints them, and keys in JS property order
    (canonical array-index keys such as ``"0"`` first in ascending order, then insertion order).
    """
    if not _needs_slow(value):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return _js_dumps_slow(value)
