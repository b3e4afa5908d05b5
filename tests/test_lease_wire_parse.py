"""The lease wire body is read as ``json.loads`` reads it, whichever parser decodes it.

:func:`~ai_transport.lease.parse_lease_wire` decodes the common body with msgspec (typed, in C) and
falls back to ``json.loads`` and a check per field for anything else. The two must agree on every
answer: which bodies are accepted, what they read as, which are "malformed". The oracle below is
the ``json.loads`` reading alone.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ai_transport.lease import LEASE_NAME, LeaseWire, lease_body, parse_lease_wire

TRUSTED = {"agent"}


def _wire(data: Any) -> dict[str, Any]:
    return {
        "name": LEASE_NAME,
        "clientId": "agent",
        "serial": "00000001",
        "timestamp": 5,
        "action": "message.create",
        "data": data,
    }


def _oracle(data: Any) -> LeaseWire | str:
    """What the wire reads as with ``json.loads`` and a type check of each field (the rule)."""
    try:
        body = json.loads(data) if isinstance(data, (str, bytes)) else data
    except ValueError:
        return "malformed lease wire"
    if not isinstance(body, dict):
        return "malformed lease wire"
    run_id, keys, claimant = body.get("runId"), body.get("callIds"), body.get("claimant")
    done, handoff = body.get("done", False), body.get("handoff", False)
    restates, conn = body.get("restates"), body.get("connectionId")
    if (
        not isinstance(run_id, str)
        or not isinstance(claimant, str)
        or not claimant
        or claimant.startswith("?")
        or not isinstance(keys, list)
        or not all(isinstance(k, str) for k in keys)
        or not isinstance(done, bool)
        or not isinstance(handoff, bool)
        or not (restates is None or isinstance(restates, str))
        or not (conn is None or isinstance(conn, str))
    ):
        return "malformed lease wire"
    return LeaseWire("00000001", 5.0, run_id, tuple(keys), claimant, done, restates, conn, handoff, "agent")


def _same(data: Any) -> None:
    assert parse_lease_wire(_wire(data), TRUSTED) == _oracle(data)


GOOD = json.dumps(lease_body("r", ["k"], "c", "inv", done=True, restates="7", connection_id="x"))


def test_a_well_formed_body_reads_as_json_loads_reads_it() -> None:
    parsed = parse_lease_wire(_wire(GOOD), TRUSTED)
    assert isinstance(parsed, LeaseWire)
    assert (parsed.run_id, parsed.keys, parsed.claimant, parsed.done, parsed.restates) == (
        "r",
        ("k",),
        "c",
        True,
        "7",
    )
    assert parsed.connection_id == "x"
    _same(GOOD)


def test_nan_and_infinity_are_taken_where_json_loads_takes_them() -> None:
    # json.loads reads NaN / Infinity (msgspec refuses them): a body holding one in a field it does
    # not read still counts; in a field it reads, the wrong type is malformed either way
    for literal in ("NaN", "Infinity", "-Infinity", "1e400"):
        text = GOOD[:-1] + f', "extra": {literal}}}'
        assert isinstance(parse_lease_wire(_wire(text), TRUSTED), LeaseWire), literal
        _same(text)
        assert parse_lease_wire(_wire(GOOD.replace("true", literal)), TRUSTED) == "malformed lease wire"
    assert isinstance(parse_lease_wire(_wire(GOOD.replace('"inv"', "NaN")), TRUSTED), LeaseWire)


def test_the_last_of_duplicate_keys_wins() -> None:
    text = '{"runId": "r", "callIds": ["k"], "claimant": "first", "claimant": "second", "done": true, "done": false}'
    parsed = parse_lease_wire(_wire(text), TRUSTED)
    assert isinstance(parsed, LeaseWire) and parsed.claimant == "second" and parsed.done is False
    _same(text)
    refused = '{"runId": "r", "callIds": ["k"], "claimant": "c", "claimant": 1}'
    assert parse_lease_wire(_wire(refused), TRUSTED) == "malformed lease wire"


def test_an_integer_json_loads_refuses_is_refused_wherever_it_sits() -> None:
    # json.loads refuses integers of more digits than sys.get_int_max_str_digits(): the whole body
    # is malformed, even when the integer is in a field the ledger never reads
    limit = sys.get_int_max_str_digits()
    assert limit  # the interpreter's default limit (4300 digits)
    huge = "9" * (limit + 1)
    for text in (
        GOOD[:-1] + f', "extra": {huge}}}',
        GOOD.replace('"inv"', huge),
        GOOD.replace('"inv"', f"[{huge}]"),
    ):
        assert parse_lease_wire(_wire(text), TRUSTED) == "malformed lease wire"
        _same(text)
    fits = GOOD[:-1] + f', "extra": {"9" * 400}}}'  # beyond 64 bits, within the limit
    assert isinstance(parse_lease_wire(_wire(fits), TRUSTED), LeaseWire)
    _same(fits)


def test_a_body_that_is_not_an_object_is_malformed() -> None:
    for text in ("[1]", "null", '"x"', "3", "true", "", " ", "{", f"[{GOOD}]", GOOD + "x"):
        assert parse_lease_wire(_wire(text), TRUSTED) == "malformed lease wire", text
        _same(text)


def test_bytes_and_decoded_bodies_read_as_a_json_text_does() -> None:
    for data in (GOOD.encode(), GOOD.encode("utf-16"), json.loads(GOOD), b"\xff" + GOOD.encode()):
        _same(data)
    assert isinstance(parse_lease_wire(_wire(GOOD.encode("utf-16")), TRUSTED), LeaseWire)
    assert parse_lease_wire(_wire(b"\xff" + GOOD.encode()), TRUSTED) == "malformed lease wire"


def test_lone_surrogates_and_unusual_claimants_read_as_json_loads_reads_them() -> None:
    for text in (
        GOOD.replace('"c"', '"\\ud800"'),  # a lone-surrogate escape: json.loads keeps it
        GOOD.replace('"c"', '"\ud800"'),  # a lone surrogate character (not UTF-8 encodable)
        GOOD.replace('"c"', '"?c"'),  # the unknown-holder prefix is the ledger's own
        GOOD.replace('"c"', '""'),
        GOOD.replace('"runId"', '"run\\u0049d"'),  # an escaped key is the same key
    ):
        _same(text)


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)
_FIELD_VALUES = st.one_of(
    _VALUES, st.sampled_from(["r", "c", "?c", ""]), st.lists(st.sampled_from(["k", "run:r"]), max_size=3)
)
_FIELDS = st.sampled_from(
    ["runId", "callIds", "claimant", "invocationId", "done", "handoff", "restates", "connectionId", "extra"]
)


@st.composite
def _bodies(draw: st.DrawFn) -> str:
    """A body text: a well-formed body with some fields replaced, dropped, repeated or added (each
    value any JSON value, NaN and Infinity included), or a text cut short."""
    body: list[tuple[str, Any]] = list(json.loads(GOOD).items())
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["set", "drop", "repeat"]))
        key = draw(_FIELDS)
        if op == "drop":
            body = [(k, v) for k, v in body if k != key]
        else:
            value = draw(_FIELD_VALUES)
            body = (
                body + [(key, value)] if op == "repeat" else [(k, value if k == key else v) for k, v in body]
            )
            if key not in dict(body):
                body.append((key, value))
    text = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in body) + "}"
    if draw(st.booleans()) and draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


@settings(max_examples=400, deadline=None)
@given(_bodies())
@example('{"runId": "r", "callIds": ["k"], "claimant": "c", "extra": NaN}')
@example('{"runId": "r", "callIds": ["k"], "claimant": "c", "done": null}')
@example('{"runId": "r", "callIds": ["k", 1], "claimant": "c"}')
@example('{"runId": "r", "callIds": ["k"], "claimant": "c", "restates": 1.5}')
def test_every_body_reads_as_json_loads_reads_it(text: str) -> None:
    _same(text)
