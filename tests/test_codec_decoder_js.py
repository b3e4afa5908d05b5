"""Conformance of the decoder + reducer with @ably/ai-transport@0.8.0 running in node.

The same wire goes to both sides (``ResponsesCodec.createDecoder().decode`` + ``fold`` +
``getMessages`` in node; :class:`~ai_transport.codec.decoder.Decoder` + :mod:`ai_transport.codec.reducer`
here) and every decoded message, event by event, plus the final messages must be equal.
"""

from __future__ import annotations

import pytest

from support_codec_decoder import assert_matches_js, decode_fold, history_view, late_join, recorded_runs


@pytest.fixture(scope="module")
def recorded_wires(node, fixtures_dir):
    """Each recorded stream, one run per response, encoded by the reference encoder (live wire)."""
    out = {}
    for stem, runs in recorded_runs(fixtures_dir).items():
        result = node.call("codec_decoder", "encodeWire", runs=runs, prefix=f"{stem}@")
        assert result["rejected"] == []
        out[stem] = result["wire"]
    return out


def _views(wire):
    yield "live", wire
    yield "history", history_view(wire)
    step = max(1, len(wire) // 12)
    for k in range(0, len(wire) + 1, step):
        yield f"late-join@{k}", late_join(wire, k)


def test_recorded_streams_live_history_and_late_join_match_reference(node, recorded_wires):
    """Live deliveries, history aggregates and late joins at many points decode and fold identically."""
    names, views = [], []
    for stem, wire in recorded_wires.items():
        for view_name, view in _views(wire):
            names.append(f"{stem}/{view_name}")
            views.append(view)
    js_results = node.call("codec_decoder", "decodeFoldBatch", wires=views)
    for name, view, js in zip(names, views, js_results):
        assert js["foldError"] is None and js["getMessagesError"] is None, name
        assert_matches_js(decode_fold(view), js, view)


def test_recorded_streams_fold_to_the_responses_final_items(recorded_wires):
    """Sanity on what the conformance compares: the live fold holds every response's final output items."""
    from support_codec_decoder import messages_of

    msgs = messages_of(recorded_wires["openai-reasoning-encrypted-content.1"])
    assert len(msgs) == 4
    first = msgs[0]["message"]["items"]
    assert [i["type"] for i in first] == ["reasoning", "function_call"]
    assert first[0]["summary"][0]["type"] == "summary_text" and first[0]["summary"][0]["text"]
    assert first[1]["arguments"].startswith("{") and first[1]["status"] == "completed"
    last = msgs[3]["message"]["items"][0]
    assert last["content"][0]["text"] == "The final result is **570**."
