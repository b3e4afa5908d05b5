"""Conformance of the codec encoder with the real @ably/ai-transport@0.8.0 encoder (node).

Every case runs twice — through ResponsesCodec.createEncoder in node with a recording writer, and
through ai_transport's encoder with the same writer in Python — and the wire logs (every publish /
append / update with name, data, extras, serials) and the per-step outcomes (error code, status
and message) must be identical, key order included.
"""

from __future__ import annotations

import pytest
from codec_encoder_cases import CLOSE, cases
from hypothesis import given
from hypothesis import strategies as st
from strategies_codec_encoder import event_streams, header_maps, inputs
from support_codec_encoder import assert_same_as_js, fixture_names, load_events, outputs, run_py_sync

pytestmark = pytest.mark.js

CASES = cases()


@pytest.mark.parametrize("name", fixture_names())
def test_recorded_stream(node, name):
    """A recorded OpenAI stream encodes exactly as 0.8.0 encodes it."""
    case = {"steps": outputs(load_events(name)) + [CLOSE]}
    py = assert_same_as_js(node, case)
    assert all(r["ok"] for r in py["results"])


@pytest.mark.parametrize("name", fixture_names())
def test_recorded_stream_with_extras_and_no_message_id(node, name):
    """Same, with encoder-level extras.headers and no per-write message id."""
    case = {
        "options": {"extras": {"headers": {"run-id": "r-1", "turn": "2"}}},
        "steps": outputs(load_events(name), message_id=None) + [CLOSE],
    }
    assert_same_as_js(node, case)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_table_case(node, name):
    """Every row of reference §2-4: streamed groups, discrete kinds, drops, rejections, inputs,
    extras.headers merging, cancel, closed-encoder / no-serial errors and append recovery."""
    assert_same_as_js(node, CASES[name])


def test_cases_cover_error_outcomes(node):
    """The case table really exercises the JS error paths it claims to (guards against vacuity)."""
    codes = set()
    for case in CASES.values():
        js = node.call("codec_encoder", "run", **case)
        codes |= {r["error"]["code"] for r in js["results"] if not r["ok"]}
    assert {40003, 104004, 50000, 104000, None} <= codes


@given(
    streams=event_streams(),
    default_headers=header_maps(),
    write_headers=st.one_of(st.none(), header_maps()),
    message_id=st.one_of(st.none(), st.text(max_size=8)),
    close=st.booleans(),
)
def test_generated_streams(node, streams, default_headers, write_headers, message_id, close):
    """Hypothesis: well-formed multi-item streams (text, refusal, reasoning, summaries, function
    calls; unicode text; float logprobs) encode identically to 0.8.0."""
    events, cancel_at = streams
    steps = [
        {"op": "output", "value": e, "messageId": message_id,
         **({"extras": {"headers": write_headers}} if write_headers is not None else {})}
        for e in events
    ]
    if cancel_at is not None:
        steps.insert(cancel_at, {"op": "cancel"})
    if close:
        steps.append(CLOSE)
    case = {"options": {"extras": {"headers": default_headers}}, "steps": steps}
    py = assert_same_as_js(node, case)
    assert all(r["ok"] for r in py["results"])


@given(
    values=st.lists(inputs(), min_size=1, max_size=4),
    default_headers=header_maps(),
    write_headers=st.one_of(st.none(), header_maps()),
    message_id=st.one_of(st.none(), st.text(max_size=8)),
)
def test_generated_inputs(node, values, default_headers, write_headers, message_id):
    """Hypothesis: every input kind with random text / JSON payloads (floats included) encodes
    identically to 0.8.0, with encoder-level and per-write headers."""
    steps = [
        {"op": "input", "value": v, "messageId": message_id,
         **({"extras": {"headers": write_headers}} if write_headers is not None else {})}
        for v in values
    ]
    case = {"options": {"extras": {"headers": default_headers}}, "steps": steps}
    py = assert_same_as_js(node, case)
    assert all(r["ok"] for r in py["results"])


# Malformed events where 0.8.0 crashes with a bare TypeError (no code) or writes garbage; ours
# raises a coded 40003 naming the field instead (or, for null logprobs, reads them as absent).
DEVIATIONS = {
    "part-missing": (
        [{"type": "response.content_part.added", "item_id": "m", "output_index": 0, "content_index": 0}],
        "unable to publish; unsupported event type 'response.content_part.added'",
    ),
    "fc-null-id": (
        [{"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "id": None}}],
        "unable to stream function-call arguments; item has no id",
    ),
    "delta-missing": (
        [{"type": "response.content_part.added", "item_id": "m", "output_index": 0, "content_index": 0,
          "part": {"type": "output_text"}},
         {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0}],
        "unable to append to stream; response.output_text.delta.delta must be a string, got undefined",
    ),
    "done-no-item": (
        [{"type": "response.output_item.done", "output_index": 0}],
        "unable to publish; unsupported output item type 'undefined'",
    ),
    "not-an-object": (["hello"], "unable to publish; output event must be an object (dict or openai model), got string"),
    "logprobs-null": (
        [{"type": "response.output_item.done", "output_index": 0,
          "item": {"type": "message", "id": "m", "content": [{"type": "output_text", "logprobs": None}]}}],
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(DEVIATIONS))
def test_malformed_events_get_coded_errors_where_js_crashes(node, name):
    events, message = DEVIATIONS[name]
    case = {"steps": outputs(events)}
    js = node.call("codec_encoder", "run", **case)
    py = run_py_sync(case)
    js_last, py_last = js["results"][-1], py["results"][-1]
    if message is None:
        assert not js_last["ok"] and js_last["error"]["code"] is None  # JS: TypeError on null.length
        assert py_last["ok"]
        assert py["log"][-1]["message"]["data"] == {"item": {"type": "message", "id": "m"}}
        return
    assert py_last == {"ok": False, "error": {"message": message, "code": 40003, "statusCode": 400}}
    if name == "delta-missing":  # JS appends no data and accumulates the text "undefined"
        assert js_last["ok"] and "data" not in js["log"][-1]["message"]
    elif name == "fc-null-id":  # JS opens a stream with a null stream-id
        assert js_last["ok"] and js["log"][0]["message"]["extras"]["ai"]["transport"]["stream-id"] is None
    elif name == "not-an-object":
        assert js_last["error"]["code"] == 40003
    else:
        assert not js_last["ok"] and js_last["error"]["code"] is None
