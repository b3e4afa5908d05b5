"""The emulator's msgspec frame/body codec is equivalent to the stdlib ``json`` / ``msgpack`` it replaced.

The reference is what the emulator did before (``json.loads`` / ``json.dumps`` and
``msgpack.unpackb(raw=False, strict_map_key=False)`` / ``msgpack.packb(use_bin_type=True)``), which is
also what the test websocket client (tests/support_emulator.py) and ably-python use. Values are compared
with their types and map key order (``1`` vs ``1.0`` vs ``True``, ``bytes`` vs ``str``, ``-0.0``).
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgpack  # type: ignore[import-untyped]
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_transport.emulator.protocol import (
    EmulatorError,
    decode_frame,
    dumps_json,
    encode_frame,
    encode_json,
    encode_msgpack,
    loads_json,
    loads_msgpack,
    message_size,
)


def canon(value: Any) -> Any:
    """A type-, order- and sign-exact view of a decoded value (NaN equal to itself)."""
    if isinstance(value, bool) or value is None:
        return ("atom", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else repr(value))
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, (bytes, bytearray)):
        return ("bin", bytes(value))
    if isinstance(value, (msgspec.msgpack.Ext, msgpack.ExtType)):
        return ("ext", value.code, bytes(value.data))
    if isinstance(value, (list, tuple)):
        return ("list", [canon(v) for v in value])
    if isinstance(value, dict):
        return ("map", [(canon(k), canon(v)) for k, v in value.items()])
    return ("other", type(value).__name__, repr(value))


scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text()
    | st.binary(max_size=40)
)
map_keys = st.text(max_size=8) | st.integers(-(2**63), 2**64 - 1)
wire_values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(map_keys, kids, max_size=5),
    max_leaves=20,
)
json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=20,
)


# -- msgpack ---------------------------------------------------------------------------------------


@given(wire_values)
def test_msgpack_encoding_is_byte_identical_to_msgpack_packb(value: Any) -> None:
    """Same bytes as ``msgpack.packb(use_bin_type=True)``: bytes -> bin, str -> str, order, widths."""
    assert encode_msgpack(value) == msgpack.packb(value, use_bin_type=True)
    frame = {"action": 15, "messages": [{"data": value}]}
    assert encode_frame(frame, "msgpack") == msgpack.packb(frame, use_bin_type=True)


@given(wire_values)
def test_msgpack_decoding_matches_msgpack_unpackb(value: Any) -> None:
    """bin -> bytes, str -> str, int/float kept, key order kept."""
    packed = msgpack.packb(value, use_bin_type=True)
    assert canon(loads_msgpack(packed)) == canon(msgpack.unpackb(packed, raw=False, strict_map_key=False))


def test_msgpack_bytearray_and_memoryview_are_bin() -> None:
    """Every bytes-like is ``bin`` (``0xc4``), never an array or str."""
    for value in (bytearray(b"ab"), memoryview(b"ab"), b"ab"):
        assert encode_msgpack(value) == b"\xc4\x02ab"
    assert encode_msgpack("ab") == b"\xa2ab"
    assert type(loads_msgpack(b"\xc4\x02ab")) is bytes


def _msgpack_outcome(fn: Any, raw: bytes) -> Any:
    try:
        return ("ok", canon(fn(raw)))
    except Exception:
        return ("error",)


def _known_difference(value: Any) -> bool:
    """msgpack-python rejects this; msgspec takes it: an array as a map key (a tuple key). Ably
    SDKs send none."""
    if isinstance(value, dict):
        return any(
            isinstance(k, tuple) or _known_difference(k) or _known_difference(v) for k, v in value.items()
        )
    if isinstance(value, (list, tuple)):
        return any(_known_difference(v) for v in value)
    return False


def _holds_ext(value: Any) -> bool:
    """Whether msgpack-python's decoding holds an ext type (``ExtType``, ``Timestamp``), keys too."""
    if isinstance(value, (msgpack.ExtType, msgpack.Timestamp)):
        return True
    if isinstance(value, dict):
        return any(_holds_ext(k) or _holds_ext(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_ext(v) for v in value)
    return False


ext_values = st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=9)) | st.builds(
    msgpack.Timestamp, st.integers(-(2**40), 2**40), st.integers(0, 10**9 - 1)
)
wire_values_with_ext = st.recursive(
    scalars | ext_values,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(map_keys | ext_values, kids, max_size=4),
    max_leaves=12,
)


@given(
    st.binary(max_size=40)
    | st.builds(
        lambda v, tail: msgpack.packb(v, use_bin_type=True) + tail, wire_values_with_ext, st.binary(max_size=3)
    )
)
def test_msgpack_accepts_and_rejects_what_msgpack_does(raw: bytes) -> None:
    """Random / trailing-garbage bytes: both decoders fail, or both give the same value; besides
    :func:`_known_difference`, an ext type (a timestamp too) is refused wherever it is (no JSON
    peer could be sent it: a stored one broke every JSON reader of its channel)."""
    ours = _msgpack_outcome(loads_msgpack, raw)
    ref = _msgpack_outcome(lambda r: msgpack.unpackb(r, raw=False, strict_map_key=False), raw)
    if ref[0] == "ok" and _holds_ext(msgpack.unpackb(raw, raw=False, strict_map_key=False)):
        assert ours == ("error",), raw
    elif ours[0] == "ok" and ref[0] == "error":
        assert _known_difference(loads_msgpack(raw)), raw
    else:
        assert ours == ref


# -- JSON ------------------------------------------------------------------------------------------


@given(json_values)
def test_json_encoding_round_trips_and_keeps_order(value: Any) -> None:
    """Parsed back by ``json.loads``: the same value, types and key order (floats by value)."""
    encoded = encode_json(value)
    assert canon(json.loads(encoded)) == canon(json.loads(json.dumps(value)))
    assert dumps_json(value) == encoded.decode("utf-8")


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda k: st.lists(k, max_size=4) | st.dictionaries(st.text(max_size=6), k, max_size=4),
        max_leaves=15,
    )
)
def test_json_encoding_without_floats_is_byte_identical(value: Any) -> None:
    """No floats: exactly the old compact ``json.dumps`` bytes (lone surrogates escaped as before)."""
    old = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        expected = old.encode("utf-8")
    except UnicodeEncodeError:
        expected = json.dumps(value, separators=(",", ":")).encode("ascii")
    assert encode_json(value) == expected
    assert message_size({"extras": {"k": value}}) == len(expected) + len('{"k":}')


def test_json_encoding_specifics() -> None:
    """Bytes as base64; None/bool keys as the stdlib writes them; NaN/Infinity as ``null`` (JSON.stringify)."""
    assert encode_json({"data": b"\x00\xff"}) == b'{"data":"AP8="}'
    assert encode_json({None: 1, True: 2}) == b'{"null":1,"true":2}'
    assert encode_json("\ud800é") == b'"\\ud800\\u00e9"'
    assert encode_json([math.nan, math.inf, -math.inf]) == b"[null,null,null]"
    assert json.loads(encode_json([1e-7, 1e21, 2**70, -0.0])) == [1e-7, 1e21, 2**70, -0.0]


near_json = st.one_of(
    st.text(max_size=30),
    st.builds(json.dumps, json_values),
    st.builds(
        lambda parts: "".join(parts),
        st.lists(
            st.sampled_from(
                [
                    "NaN",
                    "Infinity",
                    "-Infinity",
                    "1e400",
                    "-0",
                    "01",
                    "1.",
                    ".5",
                    "[1,]",
                    '{"a":1,}',
                    '"\\ud800"',
                    '"\\udc00\\ud800"',
                    "123456789012345678901234567890",
                    " ",
                    "\ufeff",
                    '"\x01"',
                    "[",
                    "]",
                    "{",
                    "}",
                    ",",
                    ":",
                    '"a"',
                    "true",
                    "nul",
                    "1e",
                    "-",
                    "\\u0000",
                ]
            ),
            min_size=1,
            max_size=6,
        ),
    ),
)


def _json_outcome(fn: Any, raw: Any) -> Any:
    try:
        return ("ok", canon(fn(raw)))
    except ValueError:
        return ("error",)


@given(
    near_json  # and JSON text holding raw lone surrogates (only a str can)
    | st.text(st.characters(categories=["Cs", "Ll", "Po"]), max_size=6).map(
        lambda t: json.dumps(t, ensure_ascii=False)
    )
)
def test_json_decoding_matches_json_loads(text: str) -> None:
    """``NaN``, lone surrogates, ``1e400``, big ints, duplicate keys: decoded exactly as ``json.loads``."""
    assert _json_outcome(loads_json, text) == _json_outcome(json.loads, text)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        return
    assert _json_outcome(loads_json, raw) == _json_outcome(json.loads, raw)


@given(near_json | st.binary(max_size=30).map(lambda b: b.decode("latin-1")))
def test_decode_frame_never_crashes(text: str) -> None:
    """A text frame is a ProtocolMessage dict or an EmulatorError 40000, nothing else."""
    for raw in (text, text.encode("utf-8", "surrogatepass")):
        try:
            frame = decode_frame(raw)
        except EmulatorError as err:
            assert err.code == 40000 and err.status_code == 400
            assert err.message.startswith("malformed frame")
        else:
            assert isinstance(frame, dict) and isinstance(frame["action"], int)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            "{bad",
            "malformed frame: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        ("[1]", "malformed frame: a ProtocolMessage must be a map"),
        ('{"action":"x"}', "malformed frame: missing or non-integer action"),
        ('{"action":true}', "malformed frame: missing or non-integer action"),
        (b"\x91\x01", "malformed frame: a ProtocolMessage must be a map"),
        (
            b"\x81\xa6action\x01\x00",
            "malformed frame: MessagePack data is malformed: trailing characters (byte 9)",
        ),
        (b"\xc1", "malformed frame: MessagePack data is malformed: invalid opcode '\\xc1' (byte 0)"),
    ],
)
def test_malformed_frames_give_the_ably_error(raw: str | bytes, message: str) -> None:
    """msgspec DecodeErrors map to the same 40000 error as before; JSON messages keep the stdlib wording."""
    with pytest.raises(EmulatorError) as info:
        decode_frame(raw)
    assert (info.value.code, info.value.status_code, info.value.message) == (40000, 400, message)


def test_json_frame_semantics_kept() -> None:
    """What the stdlib accepted still decodes the same: NaN, lone surrogate escapes, 1e400, big ints."""
    frame = decode_frame(
        '{"action":15,"a":NaN,"b":"\\ud800","c":1e400,"d":123456789012345678901234567890,"e":1,"e":2}'
    )
    assert math.isnan(frame["a"]) and frame["b"] == "\ud800" and frame["c"] == math.inf
    assert frame["d"] == 123456789012345678901234567890 and frame["e"] == 2
    assert list(frame) == ["action", "a", "b", "c", "d", "e"]


@pytest.mark.parametrize(
    "value",
    [
        {"data": msgpack.ExtType(5, b"a")},
        {"version": {"metadata": msgpack.ExtType(0, b"")}},
        {"extras": [1, {"k": msgpack.ExtType(127, b"x" * 300)}]},
        {msgpack.ExtType(1, b"k"): 1},
        {"data": msgpack.Timestamp(1_600_000_000)},  # fixext 4
        {"data": msgpack.Timestamp(1_600_000_000, 5)},  # fixext 8
        {"data": [msgpack.Timestamp(-1, 5)]},  # ext 8 (12 bytes)
        {msgpack.Timestamp(0, 1): "key"},
    ],
)
def test_msgpack_ext_types_are_malformed_input(value: Any) -> None:
    """No ext type (timestamps neither) gets past the decoder: a JSON peer could never be sent it."""
    raw = msgpack.packb({"action": 15, "messages": [value]}, use_bin_type=True)
    with pytest.raises(ValueError, match="not a JSON value"):
        loads_msgpack(raw)
    with pytest.raises(EmulatorError) as info:
        decode_frame(raw)
    assert (info.value.code, info.value.status_code) == (40000, 400)


def test_msgpack_timestamp_heads_in_binary_data_are_not_timestamps() -> None:
    """The bytes a timestamp ext starts with, inside ``bin`` / keys, decode as what they are."""
    value = {"data": b"\xd6\xff\xd7\xff\xc7\x0c\xff", "n": [-1, -42], b"\xd7\xff": -1}
    assert canon(loads_msgpack(msgpack.packb(value, use_bin_type=True))) == canon(value)


def test_deep_input_is_malformed_not_a_recursion_error() -> None:
    """Nesting past the recursion limit: ValueError (and a 40000 frame error), never RecursionError."""
    with pytest.raises(ValueError, match="nested too deeply"):
        loads_json("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        loads_json("[" * 100_000 + '"\\ud800"' + "]" * 100_000)  # (the stdlib's path)
    with pytest.raises(ValueError, match="nested too deeply"):
        loads_msgpack(b"\x91" * 100_000 + b"\xc0")
    with pytest.raises(EmulatorError) as info:
        decode_frame(b"\x81\xa6action" + b"\x91" * 100_000 + b"\xc0")
    assert info.value.code == 40000


stored_values = st.recursive(
    scalars | st.datetimes(timezones=st.just(__import__("datetime").timezone.utc)),
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(map_keys | st.binary(max_size=4) | st.floats(allow_nan=False), kids, max_size=4),
    max_leaves=15,
)


def _strict_json(raw: bytes) -> Any:
    """``JSON.parse``: no NaN / Infinity literals."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(raw, parse_constant=refuse)


@given(stored_values)
def test_json_fallback_path_writes_what_the_fast_path_writes(value: Any) -> None:
    """A lone surrogate anywhere sends the encoder to its stdlib path: that path writes every
    other value as the fast path does (bytes keys, datetimes, NaN as null), as strict JSON."""
    fast = encode_json(value)
    slow = encode_json([value, "\ud800"])
    assert _strict_json(slow) == [_strict_json(fast), "\ud800"]
