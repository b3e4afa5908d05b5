"""Header field bindings (``strField`` / ``boolField`` / ``jsonField`` / ``enumField`` of 0.8.0).

A :class:`Field` binds one codec-tier header key to its value type once, so a descriptor table
writes a chunk's property and reads it back through the same binding (encode and decode cannot
drift). Reads take untrusted headers with JavaScript semantics (an absent or unparseable value is
:data:`~ai_transport.codec.core.headers.MISSING`, or the field's fallback); writes skip a value of
the wrong type. A field's key names both the header and the chunk property it carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .headers import MISSING, js_json_dumps
from .inbound import _bool_field, _json_field, _str_field

__all__ = [
    "KIND",
    "PART_TYPE",
    "Field",
    "bool_field",
    "enum_field",
    "json_field",
    "read_fields",
    "str_field",
    "write_fields",
]

#: The codec-tier header naming a message's descriptor (``KIND_HEADER``).
KIND: Final = "kind"
#: The codec-tier header naming a batch part's type (``PART_TYPE_HEADER``).
PART_TYPE: Final = "partType"

_STR, _BOOL, _JSON, _ENUM = 0, 1, 2, 3


class Field:
    """One header binding: ``read(headers)`` and ``write(headers, value)``."""

    __slots__ = ("allowed", "fallback", "key", "type")

    def __init__(self, key: str, type_: int, fallback: Any = MISSING, allowed: tuple[str, ...] = ()) -> None:
        self.key = key
        self.type = type_
        self.fallback = fallback
        self.allowed = allowed

    def read(self, headers: Mapping[str, Any]) -> Any:
        """The value at ``key`` as 0.8.0 reads it (``MISSING`` or the fallback when absent)."""
        t = self.type
        if t == _STR:
            return _str_field(headers, self.key, self.fallback)
        if t == _BOOL:
            return _bool_field(headers, self.key, self.fallback)
        if t == _JSON:
            return _json_field(headers, self.key)
        raw = headers.get(self.key)
        return raw if type(raw) is str and raw in self.allowed else self.fallback

    def write(self, headers: dict[str, str], value: Any) -> None:
        """Write ``value`` when it has the field's type (JSON: anything but null / undefined)."""
        t = self.type
        if t == _BOOL:
            if value is True or value is False:
                headers[self.key] = "true" if value else "false"
        elif t == _JSON:
            if value is not None and value is not MISSING:
                headers[self.key] = js_json_dumps(value)
        elif type(value) is str or isinstance(value, str):
            headers[self.key] = value

    def __repr__(self) -> str:
        return f"Field({self.key!r})"


def str_field(key: str, fallback: Any = MISSING) -> Field:
    """``strField(key, fallback?)``: a string header; absent reads as ``fallback``."""
    return Field(key, _STR, fallback)


def bool_field(key: str, fallback: Any = MISSING) -> Field:
    """``boolField(key, fallback?)``: ``"true"`` / ``"false"``; any other present value reads False."""
    return Field(key, _BOOL, fallback)


def json_field(key: str) -> Field:
    """``jsonField(key)``: ``JSON.stringify`` on write, ``JSON.parse`` on read (failure: absent)."""
    return Field(key, _JSON)


def enum_field(key: str, allowed: tuple[str, ...], fallback: str) -> Field:
    """``enumField(key, allowed, fallback)``: one of ``allowed``, else ``fallback``."""
    return Field(key, _ENUM, fallback, allowed)


def write_fields(
    fields: tuple[Field, ...], kind: str, source: Mapping[str, Any], keys: tuple[str, ...] | None = None
) -> dict[str, str]:
    """``writeFields``: ``{kind, ...}`` from ``source``'s properties (only ``keys`` when given)."""
    rec = {KIND: kind}
    get = source.get
    for field in fields:
        if keys is not None and field.key not in keys:
            continue
        field.write(rec, get(field.key, MISSING))
    return rec


def read_fields(fields: tuple[Field, ...], headers: Mapping[str, Any]) -> dict[str, Any]:
    """``readFields``: each field's value, absent ones omitted."""
    values: dict[str, Any] = {}
    for field in fields:
        value = field.read(headers)
        if value is not MISSING:
            values[field.key] = value
    return values
