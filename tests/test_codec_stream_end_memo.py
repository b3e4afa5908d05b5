"""A stream's end event reads ``item_id`` / ``output_index`` / its index as the start read them when
the closing headers repeat the start's raw headers (Hypothesis): the kept values are exactly what
reading the closing headers gives, whatever the raw values (absent, not strings, not valid JSON,
mutable JSON) and whether or not the closing headers differ."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support_codec_decoder import raw_header_values

from ai_transport.codec.core.streams import _Tracker
from ai_transport.codec.responses.streams import _end_events, _start_events

_index = st.sampled_from(["0", "1", "12"])  # the usual headers: integers as strings
_raw = raw_header_values(_index)
_headers = st.fixed_dictionaries(
    {"kind": st.sampled_from(["output_text", "refusal", "reasoning_text", "reasoning_summary_text"])},
    optional={
        "item_id": _raw,
        "output_index": _raw,
        "content_index": _raw,
        "summary_index": _raw,
        "part": st.sampled_from(['{"type":"output_text","text":""}', '{"type":"reasoning_text"}', "nope"]),
    },
)


def _end(start: dict[str, Any], closing: dict[str, Any], keep: bool) -> list[dict[str, Any]]:
    tracker = _Tracker("ai-output", "s:0", "some text", dict(start), {}, "01")
    _start_events(tracker)
    if not keep:
        tracker.memo = None
    out: list[dict[str, Any]] = []
    _end_events(tracker, closing, out)
    return out


_usual = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["output_text", "reasoning_summary_text"]),
        "item_id": st.sampled_from(["msg_1", "msg_2"]),
        "output_index": _index,
        "content_index": _index,
        "summary_index": _index,
    }
)
_changes = st.dictionaries(st.sampled_from(["item_id", "output_index", "content_index", "summary_index"]), _raw, max_size=2)


@settings(max_examples=400)
@given(st.one_of(_usual, _headers), st.one_of(st.none(), _changes, _headers))
def test_the_end_event_is_what_the_closing_headers_read(start: dict[str, Any], other: dict[str, Any] | None) -> None:
    """The closing headers: the start's, the start's with some fields changed, or others."""
    if other is None:
        closing = dict(start)
    elif "kind" in other:
        closing = other
    else:
        closing = {**start, **other}
    assert _end(start, closing, keep=True) == _end(start, closing, keep=False)


def test_the_usual_stream_keeps_its_start_reads() -> None:
    codec = {"kind": "output_text", "item_id": "msg_1", "output_index": "0", "content_index": "2",
             "part": '{"type":"output_text","text":""}'}
    tracker = _Tracker("ai-output", "s:0", "", dict(codec), {}, "01")
    _start_events(tracker)
    assert tracker.memo == ("0", "2", 0, 2)
    out: list[dict[str, Any]] = []
    _end_events(tracker, dict(codec), out)
    assert out == [{"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0,
                    "content_index": 2, "text": ""}]
