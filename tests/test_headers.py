"""Header tiers and field bindings (ai_transport.codec.headers)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_transport.codec.headers import (
    MISSING,
    build_extras,
    codec_headers,
    has_ai_envelope,
    js_json_dumps,
    js_number,
    read_bool,
    read_json,
    read_str,
    transport_headers,
    write_bool,
    write_json,
    write_str,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


@pytest.mark.js
@given(st.lists(json_values, min_size=1, max_size=20))
def test_js_json_dumps_is_json_stringify(node, values):
    # -0.0 is the one float whose JSON text differs from its value's identity; JS prints "0" too.
    assert [js_json_dumps(v) for v in values] == node.call("json", "stringifyMany", values=values)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_js_number_round_trips(x):
    assert float(js_number(x)) == x or (x == 0 and js_number(x) == "0")


def test_js_number_non_finite_is_null():
    assert js_number(math.inf) == "null" and js_number(math.nan) == "null"
    assert js_json_dumps({"a": [1.0, 1e-7, 1e21]}) == '{"a":[1,1e-7,1e+21]}'


def test_tiers_read_leniently():
    assert transport_headers(None) == {} and codec_headers("x") == {}
    assert transport_headers({"ai": []}) == {}
    assert transport_headers({"ai": {"transport": "nope"}}) == {}
    assert not has_ai_envelope({"headers": {}}) and has_ai_envelope({"ai": {}})
    extras = build_extras({"stream": "true"}, {})
    assert extras == {"ai": {"transport": {"stream": "true"}}}
    assert codec_headers(build_extras({}, {"kind": "x"})) == {"kind": "x"}


def test_field_bindings_match_0_8_0():
    h: dict[str, str] = {}
    write_str(h, "a", 1)
    write_str(h, "b", "x")
    write_bool(h, "c", "true")
    write_bool(h, "d", False)
    write_json(h, "e", None)
    write_json(h, "f", 0)
    write_json(h, "g", {"type": "output_text", "text": ""})
    assert h == {"b": "x", "d": "false", "f": "0", "g": '{"type":"output_text","text":""}'}
    assert read_str(h, "b") == "x" and read_str(h, "zz", "") == ""
    assert read_bool({"x": "TRUE"}, "x") is False and read_bool({"x": "true"}, "x") is True
    assert read_bool({}, "x", False) is False
    assert read_json({"x": "{bad"}, "x") is MISSING and read_json({}, "x") is MISSING
    assert read_json({"x": "null"}, "x") is None
    assert read_json(h, "g") == json.loads(h["g"])
