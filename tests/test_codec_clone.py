"""The reducer's ``structuredClone`` of a JSON value (Hypothesis): equal to the value, sharing no
dict or list with it (a later fold never mutates what an event or another item holds)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ai_transport.codec.responses.js_values import _clone

_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=3), inner, max_size=4)),
    max_leaves=20,
)


def _containers(value: Any) -> list[Any]:
    if type(value) is dict:
        return [value, *(c for v in value.values() for c in _containers(v))]
    if type(value) is list:
        return [value, *(c for v in value for c in _containers(v))]
    return []


@given(_json)
def test_a_clone_is_equal_and_shares_no_container(value: Any) -> None:
    clone = _clone(value)
    assert clone == value
    assert list(map(type, _containers(clone))) == list(map(type, _containers(value)))
    originals = {id(c) for c in _containers(value)}
    assert not any(id(c) in originals for c in _containers(clone))


def test_key_order_is_kept_and_other_values_are_shared() -> None:
    odd = OrderedDict(a=1)  # not a JSON object of the wire's shape: shared as it is
    value = {"b": [{"z": 1, "a": [odd]}], "a": odd}
    clone = _clone(value)
    assert list(clone) == ["b", "a"] and list(clone["b"][0]) == ["z", "a"]
    assert clone["a"] is odd and clone["b"][0]["a"][0] is odd
