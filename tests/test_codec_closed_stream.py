"""A stream that its first contact opens and closes (a history aggregate) decodes, through the
Responses codec's ``_closed_stream_events`` (events built straight from the headers, no tracker),
exactly as through a tracker and the start / delta / end hooks (Hypothesis): the same events with
the same key order, no mutable value shared between two events, the same tombstone after."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support_codec_decoder import raw_header_values, stream_transport, update

from ai_transport.codec.core.decoder import StreamDecoder
from ai_transport.codec.decoder import Decoder


class _ThroughTracker(Decoder):
    """The Responses decoder without the closed-stream hook: every stream goes through a tracker."""

    __slots__ = ()

    _closed_stream_events = StreamDecoder._closed_stream_events


_index = st.sampled_from(["0", "1", "12", "63"])  # the usual headers: small integers as strings
_raw = raw_header_values(_index)
_part = st.sampled_from(
    [
        '{"type":"output_text","annotations":[],"logprobs":[],"text":""}',
        '{"type":"refusal","refusal":""}',
        '{"type":"reasoning_text","text":""}',
        '{"type":"summary_text","text":""}',
        '{"type":["output_text"]}',
        '["output_text"]',
        "null",
        "nope",
    ]
)
_headers = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(
            ["output_text", "refusal", "reasoning_text", "reasoning_summary_text", "function_call_arguments", "x"]
        )
    },
    optional={
        "item_id": st.one_of(st.sampled_from(["msg_1", "rs_1"]), _raw),
        "output_index": _raw,
        "content_index": _raw,
        "summary_index": _raw,
        "part": _part,
        "item": st.sampled_from(['{"type":"function_call","id":"fc_1","name":"f"}', "{}", "x"]),
    },
)
_usual = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["output_text", "refusal", "reasoning_text", "reasoning_summary_text"]),
        "item_id": st.sampled_from(["msg_1", "rs_1"]),
        "output_index": _index,
        "content_index": _index,
        "summary_index": _index,
        "part": _part,
    }
)


def _containers(value: Any, seen: list[int]) -> list[int]:
    if type(value) is dict or type(value) is list:
        seen.append(id(value))
        for v in value.values() if type(value) is dict else value:
            _containers(v, seen)
    return seen


def _decode_both(name: str | None, data: Any, headers: dict[str, Any], status: str) -> tuple[Any, Any]:
    wire = update("0001", "0001", name, data, stream_transport("s:0", status=status), headers)
    fast, tracked = Decoder(), _ThroughTracker()
    got, want = fast.decode(wire), tracked.decode(wire)
    # the same events, the same key order
    assert repr(got.to_dict()) == repr(want.to_dict())
    # never a mutable value shared between two events (a fold mutates what it keeps)
    for events in (got.inputs, got.outputs):
        ids = [i for ev in events for i in _containers(ev, [])]
        assert len(ids) == len(set(ids))
    # the same tombstone: whatever comes later to the serial decodes to nothing
    later = update("0001", "0002", name, f"{data}!", stream_transport("s:0", status="streaming"), headers)
    assert not fast.decode(later) and not tracked.decode(later)
    assert fast.tracked_streams == tracked.tracked_streams == 1
    return got, want


@settings(max_examples=400)
@given(
    st.sampled_from(["ai-output", "ai-output", "ai-input", None]),
    st.one_of(st.text(alphabet='ab é"{', max_size=4), st.none(), st.integers(0, 2)),
    _headers,
    st.sampled_from(["complete", "cancelled"]),
)
def test_a_closed_stream_decodes_as_through_a_tracker(name, data, headers, status):
    _decode_both(name, data, headers, status)


@given(_usual, st.text(alphabet="ab é", max_size=4), st.sampled_from(["complete", "cancelled"]))
def test_the_usual_aggregate_takes_the_direct_path(headers, data, status):
    assert Decoder._closed_stream_events("ai-output", data, headers, status == "complete") is not None
    got, _ = _decode_both("ai-output", data, headers, status)
    try:
        part = json.loads(headers["part"])
    except ValueError:
        part = None
    repaired = type(part) is dict and part.get("type") in ("output_text", "refusal", "reasoning_text", "summary_text")
    assert len(got.outputs) == repaired + 1 + bool(data) + (status == "complete")
    if status == "complete":
        assert got.outputs[-1]["type"].endswith(".done") and data in got.outputs[-1].values()


#: Near-indexes: what is no small JSON integer, or not JSON at all (JSON.parse: leading zeros,
#: signs, blanks, non-ASCII digits are errors; ``-0`` / ``1.0`` / ``1e1`` are numbers).
NEAR_INDEXES = ["64", "07", "00", "-0", "-1", "1.0", "1e1", " 1", "+1", "\u0663", "", "0x1", "null", "[0]"]
_near_index = st.sampled_from(NEAR_INDEXES)
_changes = st.dictionaries(
    st.sampled_from(["item_id", "output_index", "content_index", "summary_index", "part"]),
    st.one_of(_near_index, _raw, _part),
    min_size=1,
    max_size=2,
)


@settings(max_examples=400)
@given(_usual, _changes, st.text(alphabet="ab", max_size=2), st.sampled_from(["complete", "cancelled"]))
def test_a_near_usual_aggregate_decodes_as_through_a_tracker(headers, changes, data, status):
    headers.update(changes)  # one or two headers off the usual shape: absent, junk, not an index
    _decode_both("ai-output", data, {k: v for k, v in headers.items() if v is not None}, status)


@pytest.mark.parametrize("key", ["output_index", "content_index", "summary_index"])
@pytest.mark.parametrize("raw", NEAR_INDEXES)
def test_an_index_off_the_usual_shape_decodes_as_through_a_tracker(key, raw):
    for kind in ("output_text", "reasoning_summary_text"):
        headers = {"kind": kind, "item_id": "msg_1", "output_index": "1", "content_index": "2", "summary_index": "3"}
        headers[key] = raw
        headers["part"] = '{"type":"output_text","text":""}'
        _decode_both("ai-output", "ab", headers, "complete")
