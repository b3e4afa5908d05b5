"""``read_json`` is ``JSON.parse`` (node), value for value, on JSON and near-JSON strings.

The real ``JSON.parse`` runs in node (tests/js/handlers/json_parse.mjs). Results are compared tagged:
numbers by their JavaScript ``String(n)`` text (so ``1`` and ``1.0`` agree, as in JS, while ``-0``,
``Infinity`` and integers beyond 2**53 are told apart), strings exactly, objects as key -> value
(key order is ``JSON.stringify``'s business: ``js_json_dumps``), failures as :data:`MISSING`.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_transport.codec.headers import MISSING, js_number, read_json


def js_tag(value: Any) -> Any:
    """The Python twin of json_parse.mjs's ``tag`` (objects as dicts: order-insensitive)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isinf(value):
            return {"n": "Infinity" if value > 0 else "-Infinity"}
        if isinstance(value, float) and value == 0 and math.copysign(1, value) < 0:
            return {"n": "-0"}
        return {"n": js_number(value)}
    if isinstance(value, str):
        return {"s": value}
    if isinstance(value, list):
        return {"a": [js_tag(v) for v in value]}
    assert isinstance(value, dict), type(value)
    return {"o": {k: js_tag(v) for k, v in value.items()}}


def from_node(result: dict[str, Any]) -> Any:
    if not result["ok"]:
        return "MISSING"
    return _objects_as_dicts(result["value"])


def _objects_as_dicts(tagged: Any) -> Any:
    if isinstance(tagged, dict) and "o" in tagged:
        return {"o": {k: _objects_as_dicts(v) for k, v in tagged["o"]}}
    if isinstance(tagged, dict) and "a" in tagged:
        return {"a": [_objects_as_dicts(v) for v in tagged["a"]]}
    return tagged


def ours(text: str) -> Any:
    value = read_json({"h": text}, "h")
    return "MISSING" if value is MISSING else js_tag(value)


def js_parse(node: Any, texts: list[str]) -> list[Any]:
    return [from_node(r) for r in node.call("json_parse", "parseMany", textsJson=json.dumps(texts))]


TOKENS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "-0.0",
    "0",
    "01",
    "-01",
    "1.",
    ".5",
    "1e",
    "1e+",
    "-",
    "+1",
    "1E5",
    "2.5e-3",
    "9007199254740993",
    "123456789012345678901234567890",
    "18446744073709551616",
    "1" * 400,
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    " ",
    "\t",
    "\n",
    "\r",
    "\f",
    "\v",
    "\u00a0",
    "\ufeff",
    '"a"',
    '"\\ud800"',
    '"\\udc00\\ud800"',
    '"\\ud83d\\ude00"',
    '"\\u0000"',
    '"\\x41"',
    '"\\\'"',
    "'a'",
    '"\x01"',
    '"\ud800"',
    "true",
    "false",
    "null",
    "nul",
    "True",
    "None",
    '"\\/"',
    "[1,]",
    '{"a":1,}',
    '{"a":1,"a":2}',
    "{a:1}",
    '{"1":1,"0":0}',
    "/*c*/",
]

near_json = st.one_of(
    st.text(max_size=24),
    st.builds("".join, st.lists(st.sampled_from(TOKENS), min_size=1, max_size=6)),
    st.from_regex(r"\A-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,20})?([eE][-+]?[0-9]{1,3})?\Z"),
    st.from_regex(r"\A[-+]?0[0-9]{1,4}(\.[0-9]*)?\Z"),
    st.builds(
        json.dumps,
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
            lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=4), kids, max_size=4),
            max_leaves=10,
        ),
    ),
)


@pytest.mark.js
@given(st.lists(near_json, min_size=1, max_size=25))
def test_read_json_is_json_parse(node: Any, texts: list[str]) -> None:
    """Random and near-JSON strings: invalid in JS -> MISSING, otherwise the same value as JSON.parse."""
    assert [ours(t) for t in texts] == js_parse(node, texts)


@pytest.mark.js
def test_read_json_edge_cases_against_node(node: Any) -> None:
    """Every hand-picked token alone, and in an array, agrees with JSON.parse."""
    texts = TOKENS + [f"[{t}]" for t in TOKENS] + [f'{{"k":{t}}}' for t in TOKENS]
    assert [ours(t) for t in texts] == js_parse(node, texts)


def test_read_json_javascript_semantics() -> None:
    """Where Python's json and JSON.parse differ, read_json sides with JSON.parse."""
    assert read_json({"h": "NaN"}, "h") is MISSING
    assert read_json({"h": "[Infinity]"}, "h") is MISSING
    assert read_json({"h": "-Infinity"}, "h") is MISSING
    assert read_json({"h": "1e400"}, "h") == math.inf
    negative_zero = read_json({"h": "-0"}, "h")
    assert negative_zero == 0 and math.copysign(1, negative_zero) == -1
    assert read_json({"h": "9007199254740993"}, "h") == 9007199254740992.0
    assert read_json({"h": "9007199254740992"}, "h") == 2**53
    assert type(read_json({"h": "42"}, "h")) is int
    assert read_json({"h": '"\\ud800"'}, "h") == "\ud800"
    assert read_json({"h": '{"a":1,"a":2}'}, "h") == {"a": 2}
    assert read_json({"h": "[" * 100_000}, "h") is MISSING
    assert read_json({"h": 5}, "h") is MISSING and read_json({"h": None}, "h") is MISSING


@pytest.mark.js
def test_decoder_reads_json_headers_as_json_parse(node: Any) -> None:
    """The decoder's JSON header fields (here a stream start's ``output_index``) go through the same
    ``JSON.parse`` as ``read_json``: ``-0`` stays negative zero, integers beyond 2**53 become doubles,
    invalid JSON reads as absent (so the rebuilt event omits the field)."""
    from ai_transport.codec.decoder import Decoder

    texts = ["-0", "12345678901234567890", "9007199254740993", "1e400", "NaN", "07", "3"]
    expected = js_parse(node, texts)
    for text, js in zip(texts, expected):
        wire = {
            "name": "ai-output",
            "action": "message.create",
            "serial": "s1",
            "version": {"serial": "s1"},
            "data": "",
            "extras": {"ai": {
                "transport": {"stream": "true", "status": "streaming", "stream-id": "m:0", "codec-message-id": "m"},
                "codec": {"kind": "output_text", "item_id": "m", "output_index": text, "content_index": "0",
                          "part": '{"type":"output_text","text":""}'},
            }},
        }
        outputs = Decoder().decode(wire).outputs
        added = next(e for e in outputs if e["type"] == "response.content_part.added")
        got = added.get("output_index", MISSING)
        assert ("MISSING" if got is MISSING else js_tag(got)) == js, text
