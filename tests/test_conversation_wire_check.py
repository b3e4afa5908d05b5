"""The well-formedness check's fast path never changes an answer (issue 21, wake-up cost).

:func:`~ai_transport.conversation.wire_check.wire_problem` first tries a conservative test of the
common shape (plain dicts, every field exactly its type) and falls back to the full check. Hypothesis
builds arbitrary JSON-ish values, wire-shaped dicts with any field of any type (str subclasses, bools
for numbers, mappings that are not dicts, non-string header keys and values, unknown actions), and
checks that ``wire_problem`` answers exactly what the full check answers, and that the fast path
only ever says "well typed" for a message the full check accepts.
"""

from __future__ import annotations

from collections import OrderedDict
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ai_transport.conversation.wire_check import full_problem, plainly_well_typed, wire_problem


class Text(str):
    """A str subclass (what the full check accepts by isinstance, the fast path leaves to it)."""


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.text(max_size=4).map(Text),
    st.binary(max_size=4),
    st.sampled_from(["message.create", "message.append", "message.update", "meta", "bogus", 0, 1, 5, 6, -1, 2.5]),
)
_any = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(max_size=4), inner, max_size=3),
        st.dictionaries(st.one_of(st.integers(), st.text(max_size=2)), inner, max_size=2),
        st.dictionaries(st.text(max_size=3), inner, max_size=2).map(MappingProxyType),
        st.dictionaries(st.text(max_size=3), inner, max_size=2).map(OrderedDict),
    ),
    max_leaves=8,
)
_header_value = st.one_of(st.text(max_size=6), st.text(max_size=3).map(Text), _scalars)
_headers = st.one_of(
    st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=4),  # the common case
    st.dictionaries(st.one_of(st.text(max_size=4), st.integers(), st.text(max_size=2).map(Text)),
                    _header_value, max_size=4),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3).map(MappingProxyType),
    _any,
)
_field = st.one_of(st.text(max_size=6), _any)
_ai = st.fixed_dictionaries({}, optional={"transport": _headers, "codec": _headers, "other": _any})
_extras = st.one_of(st.fixed_dictionaries({}, optional={"ai": st.one_of(_ai, _any), "headers": _any}), _any)
_version = st.one_of(
    st.fixed_dictionaries({}, optional={"serial": _field, "clientId": _field, "timestamp": _any}), _any
)
_wire = st.fixed_dictionaries(
    {},
    optional={
        "name": _field,
        "clientId": _field,
        "serial": _field,
        "id": _field,
        "connectionId": _field,
        "action": st.one_of(st.sampled_from(["message.create", "message.append", "message.update"]), _any),
        "timestamp": st.one_of(st.integers(), st.floats(), _any),
        "version": _version,
        "extras": _extras,
        "data": _any,
    },
)
_messages = st.one_of(_wire, _wire.map(OrderedDict), _wire.map(MappingProxyType), _any)


@settings(max_examples=600, deadline=None)
@given(_messages)
def test_fast_path_answers_as_the_full_check(message: Any) -> None:
    full = full_problem(message)
    assert wire_problem(message) == full
    if plainly_well_typed(message):
        assert full is None


def test_the_common_shape_takes_the_fast_path() -> None:
    wire = {
        "name": "ai-input", "clientId": "alice", "serial": "01", "id": "x:0", "connectionId": "c",
        "action": "message.create", "timestamp": 1.5,
        "version": {"serial": "01", "clientId": "alice", "timestamp": 2},
        "extras": {"ai": {"transport": {"role": "user"}, "codec": {"kind": "user-message"}}},
        "data": {"anything": [1, 2]},
    }
    assert plainly_well_typed(wire)
    assert wire_problem(wire) is None
    for broken, why in (
        ({**wire, "timestamp": True}, "timestamp is boolean, not a number"),
        ({**wire, "action": 9}, "action 9 is not an Ably message action"),
        ({**wire, "extras": {"ai": {"transport": {"role": 1}}}}, "extras.ai.transport['role'] is number, not a string"),
        ({**wire, "extras": {"ai": {"codec": {2: "x"}}}}, "extras.ai.codec has a number key"),
    ):
        assert not plainly_well_typed(broken)
        assert wire_problem(broken) == why


def test_values_the_conversion_would_coerce_are_left_to_the_full_check() -> None:
    """The fast path's msgspec conversion takes a Decimal for a float; the full check does not, so
    a Decimal timestamp (and any number that is not exactly an int or a float) is looked at closer."""
    from decimal import Decimal
    from enum import IntEnum

    class Level(IntEnum):
        ONE = 1

    base = {"name": "ai-input", "serial": "01", "action": "message.create"}
    for wire, why in (
        ({**base, "timestamp": Decimal("1.5")}, "timestamp is Decimal, not a number"),
        ({**base, "version": {"timestamp": Decimal("2")}}, "version.timestamp is Decimal, not a number"),
        ({**base, "timestamp": Level.ONE}, None),
        ({**base, "version": {"serial": "01", "timestamp": Level.ONE}}, None),
    ):
        assert not plainly_well_typed(wire)
        assert wire_problem(wire) == why
