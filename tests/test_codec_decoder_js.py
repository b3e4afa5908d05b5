"""Conformance of the decoder + reducer with @ably/ai-transport@0.8.0 running in node.

The same wire goes to both sides (``ResponsesCodec.createDecoder().decode`` + ``fold`` +
``getMessages`` in node; :class:`~ai_transport.codec.decoder.Decoder` + :mod:`ai_transport.codec.reducer`
here) and every decoded message, event by event, plus the final messages must be equal.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support_codec_decoder import (
    FOREIGN,
    JUNK_MESSAGES,
    TEXT,
    assert_matches_js,
    decode_fold,
    decode_fold_objects,
    fold_sequences,
    history_view,
    late_join,
    live_wires,
    message_id_of,
    recorded_runs,
)
from support_codec_decoder import (
    decode_fold as _decode_fold,
)


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


# ---------------------------------------------------------------------------------------------
# Hypothesis: generated wires and fold sequences, compared with the reference

_ACTION_INT = {"message.create": 0, "message.update": 1, "message.delete": 2, "message.append": 5}


@st.composite
def mutated_wires(draw):
    """A live wire, then re-deliveries, updates (prefix, aggregate, replacing), deletes, drops and
    numeric actions at random places, with random versions: every decoder path, in any order."""
    wire = copy.deepcopy(draw(live_wires()))
    serials = sorted({op["serial"] for op in wire})
    versions = sorted({op["version"]["serial"] for op in wire})
    for _ in range(draw(st.integers(0, 8))):
        what = draw(
            st.sampled_from(["dup", "update", "update", "delete", "drop", "numeric", "noversion", "foreign"])
        )
        if not wire:
            break
        at = draw(st.integers(0, len(wire)))
        if what == "dup":
            wire.insert(at, copy.deepcopy(draw(st.sampled_from(wire))))
        elif what == "update":
            ours = [
                op
                for op in wire
                if isinstance(op.get("extras"), dict) and isinstance(op["extras"].get("ai"), dict)
            ]
            if not ours:
                continue
            base = draw(st.sampled_from(ours))
            ops = [op for op in wire[:at] if op["serial"] == base["serial"]]
            acc = "".join(op["data"] for op in ops if isinstance(op.get("data"), str))
            data = draw(st.sampled_from([acc, acc + "+", "X" + acc, ""]) | TEXT)
            ext = copy.deepcopy(base.get("extras", {}))
            t = ext.get("ai", {}).get("transport", {})
            t["status"] = draw(st.sampled_from(["streaming", "complete", "cancelled"]))
            version = draw(st.sampled_from(versions) | st.just(f"s{len(wire) + 90000:05d}"))
            upd = {
                "action": "message.update",
                "serial": base["serial"],
                "version": {"serial": version},
                "data": data,
                "extras": ext,
            }
            if draw(st.booleans()):
                upd["name"] = "ai-output"
            wire.insert(at, upd)
        elif what == "delete":
            wire.insert(
                at,
                {
                    "action": "message.delete",
                    "serial": draw(st.sampled_from(serials)),
                    "version": {"serial": draw(st.sampled_from(versions))},
                },
            )
        elif what == "drop":
            del wire[at % len(wire)]
        elif what == "numeric":
            op = wire[at % len(wire)]
            op["action"] = _ACTION_INT.get(op["action"], op["action"])
        elif what == "noversion":
            wire[at % len(wire)].pop("version", None)
        else:
            wire.insert(at, draw(FOREIGN))
    return wire


@given(mutated_wires())
def test_generated_wires_match_reference(node, wire):
    js = node.call("codec_decoder", "decodeFold", wire=wire)
    # (Where the reference's fold throws — e.g. on an item event without an item — only the
    # decoded events are compared; assert_matches_js skips the final messages.)
    assert_matches_js(_decode_fold(wire), js, wire)


@given(st.lists(JUNK_MESSAGES, max_size=8), live_wires())
def test_junk_decodes_like_reference_or_is_skipped(node, junk, wire):
    """Arbitrary JSON messages mixed into a wire: where the reference decodes them we match it; where
    it throws we skip the message (empty result)."""
    mixed = copy.deepcopy(wire)
    for i, msg in enumerate(junk):
        mixed.insert((i * 7) % (len(mixed) + 1), msg)
    js = node.call("codec_decoder", "decodeFold", wire=mixed, fold=False)
    py = _decode_fold(mixed, fold=False)
    assert_matches_js({**py, "messages": None}, {**js, "messages": None, "foldError": "skip"}, mixed)


@given(fold_sequences())
def test_generated_fold_sequences_match_reference(node, steps):
    from support_codec_decoder import fold_events

    js = node.call("codec_decoder", "foldEvents", events=steps)
    assert "error" not in js
    assert fold_events(steps) == js["messages"]


_ACTION_NUM = {"message.create": 0, "message.update": 1, "message.delete": 2, "message.append": 5}


def _protocol_form(msg):
    """A wire message as Ably's protocol carries it: numeric action (omitted for a create), JSON data
    encoded."""
    out = {k: v for k, v in msg.items() if k != "data"}
    if _ACTION_NUM[msg["action"]]:  # Ably's protocol omits the zero action (create)
        out["action"] = _ACTION_NUM[msg["action"]]
    data = msg.get("data")
    if isinstance(data, (dict, list)):
        out["data"], out["encoding"] = json.dumps(data), "json"
    elif data is not None:
        out["data"] = data
    return out


def test_ably_python_sdk_messages_decode_like_the_reference(node, recorded_wires):
    """The same wires as ably-python ``Message`` objects (``Message.from_encoded`` of the protocol
    form: ``MessageAction`` enums, ``MessageVersion`` objects, decoded JSON data) decode exactly as the
    reference decodes the ably-js form."""
    from ably.types.message import Message

    for wire in recorded_wires.values():
        for view in (wire, history_view(wire), late_join(wire, len(wire) // 2)):
            objects = [Message.from_encoded(_protocol_form(m)) for m in view]
            js = node.call("codec_decoder", "decodeFold", wire=view)
            py = decode_fold_objects(objects, [message_id_of(m) for m in view])
            assert_matches_js(py, js, view)
