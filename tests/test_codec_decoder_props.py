"""Properties of decode + fold that hold whatever the reference does (Hypothesis).

* re-delivered (duplicate or stale) appends and stream creates change nothing;
* a late join at any point — the aggregate of everything so far as updates, then the rest live —
  folds to the same messages as the live wire (at the end: the whole history);
* foreign messages and arbitrary junk interleaved anywhere change nothing, and never raise.
"""

from __future__ import annotations

import copy
import logging

from hypothesis import given
from hypothesis import strategies as st
from support_codec_decoder import (
    FOREIGN,
    JUNK_MESSAGES,
    history_view,
    is_append,
    is_stream_create,
    late_join,
    live_wires,
    messages_of,
)

from ai_transport.codec.decoder import Decoder, DecodeResult

OUR_MESSAGE_IDS = {"m1", "m2", "u1", "u2"}


def ours(messages):
    return [m for m in messages if m["codecMessageId"] in OUR_MESSAGE_IDS]


@st.composite
def with_redeliveries(draw):
    wire = draw(live_wires())
    out = copy.deepcopy(wire)
    candidates = [i for i, op in enumerate(wire) if is_append(op) or is_stream_create(op)]
    if not candidates:
        return wire, out
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.sampled_from(candidates))
        # insert a copy anywhere after the original (later than its first delivery)
        pos_of_original = next(j for j, op in enumerate(out) if op == wire[i])
        at = draw(st.integers(pos_of_original + 1, len(out)))
        out.insert(at, copy.deepcopy(wire[i]))
    return wire, out


@given(with_redeliveries())
def test_duplicate_and_stale_redeliveries_change_nothing(pair):
    wire, redelivered = pair
    assert messages_of(redelivered) == messages_of(wire)


@given(live_wires(), st.data())
def test_late_join_at_any_point_folds_like_live(wire, data):
    k = data.draw(st.integers(0, len(wire)), label="join point")
    assert messages_of(late_join(wire, k)) == messages_of(wire)


@given(live_wires())
def test_history_folds_like_live(wire):
    assert messages_of(history_view(wire)) == messages_of(wire)


@given(live_wires(), st.lists(st.tuples(st.integers(0, 10**6), FOREIGN), max_size=6))
def test_foreign_messages_change_nothing(wire, foreign):
    mixed = copy.deepcopy(wire)
    for pos, msg in foreign:
        mixed.insert(pos % (len(mixed) + 1), msg)
    assert messages_of(mixed) == messages_of(wire)


@given(live_wires(), st.lists(st.tuples(st.integers(0, 10**6), JUNK_MESSAGES), max_size=6))
def test_junk_interleaved_never_raises_and_changes_nothing_of_ours(wire, junk):
    mixed = copy.deepcopy(wire)
    for pos, msg in junk:
        mixed.insert(pos % (len(mixed) + 1), msg)
    assert ours(messages_of(mixed)) == ours(messages_of(wire))


@given(st.lists(JUNK_MESSAGES, max_size=12))
def test_decoder_never_raises_on_junk(junk):
    d = Decoder()
    for msg in junk:
        r = d.decode(msg)
        assert isinstance(r, DecodeResult)
        assert isinstance(r.inputs, list) and isinstance(r.outputs, list)
        assert all(isinstance(e, dict) for e in r.inputs + r.outputs)


def test_junk_is_logged(caplog):
    d = Decoder()
    with caplog.at_level(logging.WARNING, logger="ai_transport.codec.decoder"):
        for junk in [None, 5, "text", [1, 2]]:
            assert d.decode(junk) == DecodeResult()
    assert caplog.text.count("not an Ably message") == 4
