"""Capabilities: a token's capability (request ∩ key) never grants what either side does not, and
keeps what both grant on exact channels; invalid capabilities are refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ai_transport.emulator.capability import capability_allows, intersect, parse_capability
from ai_transport.emulator.protocol import EmulatorError

OPS = ["publish", "subscribe", "presence", "history"]
resources = st.sampled_from(["*", "[*]*", "a", "a:*", "a:b", "a:b*", "b", "b:*", "ab*"])
op_lists = st.one_of(st.just(["*"]), st.lists(st.sampled_from(OPS), min_size=1, max_size=3, unique=True))
capabilities = st.dictionaries(resources, op_lists, min_size=1, max_size=4)
channels = st.sampled_from(["a", "a:b", "a:bc", "a:x", "ab", "abc", "b", "b:y", "[q]a", "zz"])


@given(capabilities, capabilities, channels, st.sampled_from(OPS))
def test_intersection_is_sound(requested: dict, granted: dict, channel: str, op: str) -> None:
    try:
        result = intersect(requested, granted)
    except EmulatorError as err:
        assert err.code == 40160
        return
    if capability_allows(result, channel, op):
        assert capability_allows(requested, channel, op) and capability_allows(granted, channel, op)


@given(capabilities, capabilities, st.sampled_from(["a", "a:b", "b"]), st.sampled_from(OPS))
def test_intersection_keeps_what_both_grant_on_a_requested_name(
    requested: dict, granted: dict, channel: str, op: str
) -> None:
    requested = {**requested, channel: [op]}
    if not capability_allows(granted, channel, op):
        return
    assert capability_allows(intersect(requested, granted), channel, op)


def test_absent_sides_and_examples() -> None:
    key = {"channel2": ["publish", "subscribe"], "canpublish:*": ["publish"]}
    assert intersect(None, key) == key and intersect(key, None) == key
    assert intersect({"channel2": ["*"]}, key) == {"channel2": ["publish", "subscribe"]}
    assert intersect({"canpublish:check": ["publish"]}, key) == {"canpublish:check": ["publish"]}
    with pytest.raises(EmulatorError) as err:
        intersect({"canpublish:test": ["subscribe"]}, key)
    assert (err.value.code, err.value.status_code) == (40160, 401)


@pytest.mark.parametrize(
    "bad", ['{"c": ["publish_"]}', '{"c": ["*", "publish"]}', '{"c": []}', "[1]", "{not json", '{"c": "publish"}']
)
def test_invalid_capabilities_are_400(bad: str) -> None:
    with pytest.raises(EmulatorError) as err:
        parse_capability(bad)
    assert (err.value.code, err.value.status_code) == (40000, 400)


def test_a_capability_nested_past_the_recursion_limit_is_invalid_json() -> None:
    """``json.loads`` raised RecursionError (a token request's capability: HTTP 500)."""
    with pytest.raises(EmulatorError) as info:
        parse_capability('{"a":' + "[" * 5000 + "]" * 5000 + "}")
    assert (info.value.code, info.value.status_code) == (40000, 400)
