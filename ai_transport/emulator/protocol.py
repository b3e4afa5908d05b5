"""Ably wire vocabulary for the emulator: actions, flags, error bodies, frame and data (trans)coding.

Pure functions only; no I/O. Formats: ``"json"`` (text frames / ``application/json``) and
``"msgpack"`` (binary frames / ``application/x-msgpack``: ``bytes`` as ``bin``, ``str`` as ``str``).

Frames and bodies go through reused :mod:`msgspec` encoders/decoders (several times faster than
:mod:`json` / ``msgpack``; see ``benchmarks/bench_emulator.py --frames``). Where msgspec is stricter
than the stdlib decoder (``NaN``/``Infinity`` literals, lone-surrogate escapes, ``1e400``) or
cannot encode a value (lone surrogates, ``None``/``bool`` map keys), the stdlib path runs instead,
so what is accepted and how it decodes is unchanged. Non-finite floats encode as JSON ``null``
(as ``JSON.stringify`` does). MessagePack encodes byte for byte as ``msgpack.packb(use_bin_type=True)``
and decodes as ``msgpack.unpackb(raw=False, strict_map_key=False)``, except for what no Ably SDK sends:
an ext type (the timestamp one included) is refused as malformed input, as a value that is not a JSON
value (a stored one could not be written to a JSON peer: it broke every JSON reader of its channel),
and an array map key decodes to a tuple. Input nested past the recursion limit is malformed too
(``ValueError``, never ``RecursionError``).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import math
from enum import IntEnum
from typing import Any

import msgspec

__all__ = [
    "DEFAULT_MODES",
    "Action",
    "EmulatorError",
    "Flag",
    "MessageAction",
    "decode_frame",
    "dumps_json",
    "encode_frame",
    "encode_json",
    "encode_msgpack",
    "error_body",
    "ingest_data",
    "loads_json",
    "loads_msgpack",
    "message_size",
    "render_message",
    "render_messages",
]


class Action(IntEnum):
    """ProtocolMessage actions."""

    HEARTBEAT = 0
    ACK = 1
    NACK = 2
    CONNECT = 3
    CONNECTED = 4
    DISCONNECT = 5
    DISCONNECTED = 6
    CLOSE = 7
    CLOSED = 8
    ERROR = 9
    ATTACH = 10
    ATTACHED = 11
    DETACH = 12
    DETACHED = 13
    PRESENCE = 14
    MESSAGE = 15
    SYNC = 16
    AUTH = 17
    ACTIVATE = 18
    OBJECT = 19
    OBJECT_SYNC = 20
    ANNOTATION = 21


class MessageAction(IntEnum):
    """Message actions (``message.create`` … ``message.append`` in ably-js)."""

    CREATE = 0
    UPDATE = 1
    DELETE = 2
    META = 3
    SUMMARY = 4
    APPEND = 5


class Flag(IntEnum):
    """ATTACH / ATTACHED flag bits (values are masks)."""

    HAS_PRESENCE = 1 << 0
    HAS_BACKLOG = 1 << 1
    RESUMED = 1 << 2
    TRANSIENT = 1 << 4
    ATTACH_RESUME = 1 << 5
    HAS_OBJECTS = 1 << 7
    PRESENCE = 1 << 16
    PUBLISH = 1 << 17
    SUBSCRIBE = 1 << 18
    PRESENCE_SUBSCRIBE = 1 << 19
    ANNOTATION_PUBLISH = 1 << 21
    ANNOTATION_SUBSCRIBE = 1 << 22


#: Modes granted when an ATTACH requests none (as Ably: annotation_publish, not annotation_subscribe).
DEFAULT_MODES = (
    Flag.PRESENCE | Flag.PUBLISH | Flag.SUBSCRIBE | Flag.PRESENCE_SUBSCRIBE | Flag.ANNOTATION_PUBLISH
)
MODE_MASK = (
    Flag.PRESENCE
    | Flag.PUBLISH
    | Flag.SUBSCRIBE
    | Flag.PRESENCE_SUBSCRIBE
    | Flag.ANNOTATION_PUBLISH
    | Flag.ANNOTATION_SUBSCRIBE
)


class EmulatorError(Exception):
    """An Ably-shaped error: ``code`` (e.g. 40160), HTTP ``status_code`` and ``message``."""

    def __init__(self, message: str, code: int = 40000, status_code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status_code = status_code

    def to_dict(self) -> dict[str, Any]:
        """The ``error`` object Ably puts in ERROR / NACK frames and REST error bodies."""
        return error_body(self.message, self.code, self.status_code)


def error_body(message: str, code: int, status_code: int) -> dict[str, Any]:
    """``{"code", "statusCode", "message", "href"}`` as Ably sends it."""
    return {
        "code": code,
        "statusCode": status_code,
        "message": message,
        "href": f"https://help.ably.io/error/{code}",
    }


def _json_default(value: Any) -> Any:
    """A value the stdlib cannot write, as msgspec writes it (bytes as base64, ``datetime`` as
    RFC 3339 …): the fallback path writes what the fast path does."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    try:
        return msgspec.json.decode(_JSON_ENCODER.encode(value))
    except (TypeError, ValueError):
        raise TypeError(f"not JSON serialisable: {type(value).__name__}") from None


def _refuse_ext(code: int, data: memoryview) -> Any:
    raise ValueError(f"MessagePack ext type {code} is not a JSON value (an Ably message holds no ext types)")


_JSON_ENCODER = msgspec.json.Encoder()
_JSON_DECODER = msgspec.json.Decoder()
_MSGPACK_ENCODER = msgspec.msgpack.Encoder()
_MSGPACK_DECODER = msgspec.msgpack.Decoder(ext_hook=_refuse_ext)  # (not called for timestamps)
#: How a timestamp ext (code -1: ``0xff``) starts: fixext 4, fixext 8, ext 8 of 12 bytes.
_TIMESTAMP_HEADS = (b"\xd6\xff", b"\xd7\xff", b"\xc7\x0c\xff")


def _stdlib_key(key: Any) -> Any:
    """A map key as msgspec writes it (``None`` / ``bool`` ones, which it cannot, as the stdlib does)."""
    if isinstance(key, str) or key is None or isinstance(key, bool):
        return key
    try:
        (text,) = msgspec.json.decode(_JSON_ENCODER.encode({key: None}))
    except (TypeError, ValueError):
        return key  # (the stdlib refuses it too)
    return text


def _for_stdlib(value: Any) -> Any:
    """``value`` as the stdlib encoder can write it the way msgspec does: map keys (binary as
    base64, numbers as msgspec spells them), non-finite floats as ``None`` (``JSON.stringify``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_for_stdlib(v) for v in value]
    if isinstance(value, dict):
        return {_stdlib_key(k): _for_stdlib(v) for k, v in value.items()}
    return value


def _stdlib_dumps_json(value: Any) -> str:
    value = _for_stdlib(value)
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_json_default)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False, default=_json_default)
    return text


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON (insertion order kept; bytes as base64; lone surrogates escaped)."""
    try:
        return _JSON_ENCODER.encode(value)
    except (TypeError, ValueError):  # lone surrogate (UnicodeEncodeError), None/bool map key
        return _stdlib_dumps_json(value).encode("utf-8")


def dumps_json(value: Any) -> str:
    """Compact JSON; non-ASCII kept as is unless it holds lone surrogates (then escaped)."""
    return encode_json(value).decode("utf-8")


def loads_json(raw: str | bytes) -> Any:
    """``json.loads`` semantics (``NaN`` and lone surrogates accepted), msgspec speed.

    Raises ``ValueError`` (``json.JSONDecodeError`` / ``UnicodeDecodeError``) on invalid input.
    """
    try:
        try:
            return _JSON_DECODER.decode(raw)
        except ValueError:  # msgspec is stricter (or a str holds lone surrogates): the stdlib decides
            return json.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def encode_msgpack(value: Any) -> bytes:
    """MessagePack with ``bytes`` as ``bin`` and ``str`` as ``str`` (= ``msgpack.packb(use_bin_type=True)``).

    A lone surrogate (which a JSON peer may send: ``"\\ud800"``) is encoded as U+FFFD, as a UTF-8
    encoder in JS does, instead of failing the whole frame."""
    try:
        return _MSGPACK_ENCODER.encode(value)
    except UnicodeEncodeError:
        return _MSGPACK_ENCODER.encode(_without_lone_surrogates(value))


def loads_msgpack(raw: bytes) -> Any:
    """One MessagePack object: ``bin`` -> ``bytes``, ``str`` -> ``str``, any map key.

    Raises ``ValueError`` (msgspec.DecodeError) on malformed or trailing data, on an ext type
    (a timestamp too: no JSON peer could be sent it) and on nesting past the recursion limit.
    """
    try:
        value = _MSGPACK_DECODER.decode(raw)
    except RecursionError:
        raise ValueError("MessagePack nested too deeply") from None
    if any(head in raw for head in _TIMESTAMP_HEADS) and _holds_datetime(value):
        raise ValueError("a MessagePack timestamp is not a JSON value (an Ably message holds no ext types)")
    return value


def _holds_datetime(value: Any) -> bool:
    """Whether a decoded value holds a ``datetime`` (a timestamp ext), keys included."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, datetime.datetime):
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def decode_frame(raw: str | bytes) -> dict[str, Any]:
    """Decode one websocket frame (text = JSON, binary = msgpack) into a ProtocolMessage dict.

    Raises :class:`EmulatorError` (40000) when the frame is not a map with an integer ``action``.
    """
    try:
        frame = loads_json(raw) if isinstance(raw, str) else loads_msgpack(raw)
    except Exception as exc:
        raise EmulatorError(f"malformed frame: {exc}", 40000, 400) from None
    if not isinstance(frame, dict):
        raise EmulatorError("malformed frame: a ProtocolMessage must be a map", 40000, 400)
    action = frame.get("action")
    if isinstance(action, bool) or not isinstance(action, int):
        raise EmulatorError("malformed frame: missing or non-integer action", 40000, 400)
    return frame


def encode_frame(frame: dict[str, Any], fmt: str) -> bytes:
    """Encode a ProtocolMessage for a peer using ``fmt`` (already rendered for that format).

    ``"msgpack"`` gives a binary frame's payload, ``"json"`` a text frame's UTF-8 payload.
    """
    if fmt == "msgpack":
        return encode_msgpack(frame)
    return encode_json(frame)


def _js_key(key: Any) -> str:
    """A map key as a JS object (Ably's) holds it: ``String(key)``."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    if isinstance(key, float) and key.is_integer() and abs(key) < 1e21:
        return str(int(key))
    if isinstance(key, (bytes, bytearray)):
        return bytes(key).decode("utf-8", "replace")
    return str(key)


def _string_keys(value: Any) -> Any:
    """``value`` with every map key a string as in JS (``value`` itself when all are): a
    MessagePack peer may send integer, binary or other keys, which a reader decoding with string
    keys only (ably-python's MessagePack) cannot take: stored as sent, they broke its history page."""
    if isinstance(value, list):
        items = [_string_keys(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value)) else value
    if not isinstance(value, dict):
        return value
    changed = False
    out: dict[str, Any] = {}
    for k, v in value.items():
        key, inner = _js_key(k), _string_keys(v)
        changed = changed or key is not k or inner is not v
        out[key] = inner
    return out if changed else value


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` with each lone surrogate of its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    return value


def _split_encoding(encoding: Any) -> list[str]:
    if not isinstance(encoding, str) or not encoding:
        return []
    return encoding.split("/")


def ingest_data(message: dict[str, Any], fmt: str) -> dict[str, Any]:
    """Canonicalise ``data``/``encoding`` of an inbound message (in place, returned); 40013 when it
    holds an integer outside the 64-bit range (a JSON peer's: MessagePack cannot carry it, and a
    stored one broke every binary reader's history and live delivery of the channel).

    Binary becomes ``bytes`` with no transport ``base64`` step: a JSON peer's trailing ``base64``
    step is decoded; a msgpack ``bin`` is kept. Anything else (text, ``json``-encoded text,
    maps) is stored verbatim.
    """
    if fmt == "msgpack":  # map keys other than strings (its format has them; JS has none)
        for key in ("data", "extras", "version"):  # (what is stored: version.metadata too)
            value = message.get(key)
            if isinstance(value, (dict, list)):
                message[key] = _string_keys(value)
    else:  # (a msgpack peer's integers fit already: its format has no others)
        try:
            encode_msgpack(message)
        except OverflowError:
            raise EmulatorError(
                "message holds an integer outside the 64-bit range (MessagePack peers cannot receive it)",
                40013,
                400,
            ) from None
        except RecursionError:  # (a lone surrogate's U+FFFD rewrite recurses: past the limit, no peer gets it)
            raise EmulatorError("message is nested too deeply to deliver (a lone surrogate in it)", 40000, 400) from None
    data = message.get("data")
    if isinstance(data, (bytearray, memoryview)):
        message["data"] = bytes(data)
        return message
    steps = _split_encoding(message.get("encoding"))
    if steps and steps[-1] == "base64" and isinstance(data, str):
        try:
            message["data"] = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise EmulatorError("invalid base64 data", 40013, 400) from None
        rest = "/".join(steps[:-1])
        if rest:
            message["encoding"] = rest
        else:
            message.pop("encoding", None)
    elif "encoding" in message and not message.get("encoding"):
        message.pop("encoding", None)
    return message


def render_message(message: dict[str, Any], fmt: str) -> dict[str, Any]:
    """A stored message as a peer of ``fmt`` receives it (binary transcoded for JSON peers)."""
    out = {k: v for k, v in message.items() if v is not None}
    data = out.get("data")
    if isinstance(data, bytes) and fmt != "msgpack":
        out["data"] = base64.b64encode(data).decode("ascii")
        enc = out.get("encoding")
        out["encoding"] = f"{enc}/base64" if enc else "base64"
    return out


def render_messages(messages: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """:func:`render_message` over a list."""
    return [render_message(m, fmt) for m in messages]


def _size_of(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    return len(encode_json(value))


def message_size(message: dict[str, Any]) -> int:
    """Ably's message size: name + clientId + data + extras (JSON) in bytes."""
    return (
        _size_of(message.get("name"))
        + _size_of(message.get("clientId"))
        + _size_of(message.get("data"))
        + _size_of(message.get("extras"))
    )
