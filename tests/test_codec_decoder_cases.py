"""Hand-written decoder cases, one per behaviour of the reference decoder (reference doc §5).

Each wire is checked twice: against the reference decoder + reducer in node (event by event and the
final messages), and against the behaviour the case is named after (explicit expectations here, so a
shared misunderstanding with the reference shows up too).
"""

from __future__ import annotations

import json
import logging

import pytest
from support_codec_decoder import (
    NO_DATA,
    append,
    assert_matches_js,
    create,
    decode_fold,
    delete,
    discrete_transport,
    fn_codec,
    stream_transport,
    summary_codec,
    text_codec,
    update,
)

from ai_transport.codec.decoder import Decoder, DecodeResult

OUT, IN = "ai-output", "ai-input"
MSG_ITEM = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
RS_ITEM = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "added-blob"}


def added(serial, item, mid="m1"):
    return create(
        serial, OUT, {"item": item}, discrete_transport(mid), {"kind": "response.output_item.added"}
    )


def done(serial, item, mid="m1"):
    return create(serial, OUT, {"item": item}, discrete_transport(mid), {"kind": "response.output_item.done"})


T = stream_transport("msg_1:0")
TC = stream_transport("msg_1:0", status="complete")
TX = stream_transport("msg_1:0", status="cancelled")
C = text_codec()


def text_stream(serial="s02", deltas=("Hel", "lo"), first_version=3, complete=True):
    wire = [create(serial, OUT, "", T, C)]
    v = first_version
    for d in deltas:
        wire.append(append(serial, f"s{v:02d}", d, T, C))
        v += 1
    if complete:
        wire.append(append(serial, f"s{v:02d}", "", TC, C))
    return wire


BASE = [added("s01", MSG_ITEM)]

CASES: dict[str, list] = {
    "live text stream": BASE + text_stream(),
    "duplicate append dropped by version guard": BASE
    + [create("s02", OUT, "", T, C), append("s02", "s03", "Hel", T, C), append("s02", "s03", "Hel", T, C)]
    + [append("s02", "s04", "lo", T, C), append("s02", "s05", "", TC, C)],
    "stale append dropped": BASE
    + [create("s02", OUT, "", T, C), append("s02", "s04", "Hel", T, C), append("s02", "s03", "XX", T, C)]
    + [append("s02", "s05", "lo", TC, C)],
    "append without version.serial defaults to the serial and is dropped": BASE
    + [
        create("s02", OUT, "", T, C),
        {**append("s02", "x", "A", T, C), "version": {}},
        append("s02", "s03", "B", TC, C),
    ],
    "streamed create without a version: its serial is the version": BASE
    + [
        {k: v for k, v in create("s02", OUT, "", T, C).items() if k != "version"},
        append("s02", "s02", "A", T, C),
        append("s02", "s03", "B", TC, C),
    ],
    "streamed create with an empty version serial: its serial is the version": BASE
    + [
        {**create("s02", OUT, "", T, C), "version": {"serial": ""}},
        append("s02", "s01", "A", T, C),
        append("s02", "s03", "B", TC, C),
    ],
    "streamed create with a newer version serial": BASE
    + [
        {**create("s02", OUT, "", T, C), "version": {"serial": "s05"}},
        append("s02", "s04", "A", T, C),
        append("s02", "s06", "B", TC, C),
    ],
    "streamed create without a codec tier": BASE
    + [create("s02", OUT, "", T), append("s02", "s03", "B", TC)],
    "duplicate streamed create ignored": BASE
    + [create("s02", OUT, "", T, C), create("s02", OUT, "", T, C), append("s02", "s03", "A", TC, C)],
    "tombstone: append after complete dropped": BASE + text_stream() + [append("s02", "s09", "more", T, C)],
    "tombstone: update after complete dropped": BASE
    + text_stream()
    + [update("s02", "s09", OUT, "Hello world", TC, C)],
    "cancelled append closes without end": BASE
    + [create("s02", OUT, "", T, C), append("s02", "s03", "Hel", T, C), append("s02", "s04", "", TX, C)]
    + [append("s02", "s05", "lo", T, C)],
    "prefix update emits only the suffix and closes": BASE
    + [create("s02", OUT, "", T, C), append("s02", "s03", "Hel", T, C)]
    + [update("s02", "s04", OUT, "Hello", TC, {**C, "output_index": "7"})],
    "prefix update without new data still applies complete": BASE
    + [
        create("s02", OUT, "", T, C),
        append("s02", "s03", "Hello", T, C),
        update("s02", "s04", OUT, "Hello", TC, C),
    ],
    "non-prefix update replaces silently": BASE
    + [create("s02", OUT, "", T, C), append("s02", "s03", "Hel", T, C)]
    + [
        update("s02", "s04", OUT, "Goodbye", T, C),
        append("s02", "s05", "!", T, C),
        append("s02", "s06", "", TC, C),
    ],
    "non-prefix update replaces the headers too": BASE
    + [added("s01b", {**MSG_ITEM, "id": "msg_2"})]
    + [create("s02", OUT, "", T, C), append("s02", "s03", "Hel", T, C)]
    + [
        update("s02", "s04", OUT, "X", T, text_codec(item_id="msg_2")),
        append("s02", "s05", "Y", TC, text_codec(item_id="msg_2")),
    ],
    "update with older version dropped": BASE
    + [
        create("s02", OUT, "", T, C),
        append("s02", "s05", "Hello", T, C),
        update("s02", "s04", OUT, "Hello world", T, C),
    ],
    "delete closes the stream": BASE
    + [
        create("s02", OUT, "", T, C),
        append("s02", "s03", "Hel", T, C),
        delete("s02", "s04"),
        append("s02", "s05", "lo", TC, C),
    ],
    "delete of an unknown serial": BASE + [delete("zz", "zz1")],
    "first contact from update (late join, streaming)": BASE
    + [
        update("s02", "s04", OUT, "Hel", T, C),
        append("s02", "s05", "lo", T, C),
        append("s02", "s06", "", TC, C),
    ],
    "first contact from update (history, complete)": BASE + [update("s02", "s06", OUT, "Hello", TC, C)],
    "first contact from update (cancelled)": BASE
    + [update("s02", "s06", OUT, "Hel", TX, C), append("s02", "s07", "x", T, C)],
    "first contact from update with empty data": BASE
    + [update("s02", "s06", OUT, "", T, C), append("s02", "s07", "A", TC, C)],
    "first contact from update without item added (mid-stream-join repair)": [
        update("s02", "s06", OUT, "Hello", TC, C)
    ],
    "first contact at content_index 1 leaves a hole": [
        update("s02", "s06", OUT, "B", TC, text_codec(content_index=1))
    ],
    "hole filled later": [
        update("s03", "s06", OUT, "B", TC, text_codec(content_index=1)),
        update("s02", "s07", OUT, "A", TC, text_codec(content_index=0)),
    ],
    "append without tracker with envelope (no name: no events)": BASE + [append("s02", "s05", "lo", T, C)],
    "append without tracker then live appends": BASE
    + [append("s02", "s05", "lo", T, C), append("s02", "s06", "!", TC, C)],
    "foreign append (no extras.ai)": BASE
    + [{"action": "message.append", "serial": "f1", "version": {"serial": "f2"}, "data": "x"}],
    "foreign create, update and delete": BASE
    + [
        {
            "action": "message.create",
            "name": "chat",
            "serial": "f1",
            "data": "hi",
            "extras": {"headers": {"a": "b"}},
        },
        {
            "action": "message.update",
            "name": "chat",
            "serial": "f1",
            "version": {"serial": "f2"},
            "data": "hi!",
        },
        {"action": "message.delete", "serial": "f1", "version": {"serial": "f3"}},
        {"action": "message.create", "serial": "f4", "data": {"item": {}}},
    ],
    "ai-output name without envelope": [
        {"action": "message.create", "name": OUT, "serial": "f1", "data": {"item": MSG_ITEM}}
    ],
    "numeric actions": [
        {**added("s01", MSG_ITEM), "action": 0},
        {**create("s02", OUT, "", T, C), "action": 0},
        {**append("s02", "s03", "Hi", T, C), "action": 5},
        {**update("s02", "s04", OUT, "Hi!", T, C), "action": 1},
        {**delete("s02", "s05"), "action": 2},
    ],
    "missing action is a create (Ably omits action 0)": [
        {k: v for k, v in added("s01", MSG_ITEM).items() if k != "action"},
        {k: v for k, v in create("s02", OUT, "", T, C).items() if k != "action"},
        {**append("s02", "s03", "Hi", TC, C), "action": None},
    ],
    "unknown numeric actions ignored": BASE
    + [{**create("s02", OUT, "", T, C), "action": 9}, {**create("s03", OUT, "", T, C), "action": 1.5}],
    "other actions ignored": BASE
    + [{**create("s02", OUT, "", T, C), "action": "meta"}, {**create("s03", OUT, "", T, C), "action": 4}],
    "discrete update re-decodes every time": [
        added("s01", MSG_ITEM),
        {**added("s01", MSG_ITEM), "action": "message.update"},
    ]
    + [{**added("s01", MSG_ITEM), "action": "message.update", "version": {"serial": "s09"}}],
    "streamed ai-input is not rebuilt": [
        create("i1", IN, "", stream_transport("x"), {"kind": "user-message", "partType": "input_text"}),
        append("i1", "i2", "abc", stream_transport("x", status="complete"), {"kind": "user-message"}),
    ],
    "refusal stream": BASE
    + [
        create("s02", OUT, "", T, text_codec(kind="refusal")),
        append("s02", "s03", "No.", TC, text_codec(kind="refusal")),
    ],
    "reasoning text stream": [added("s01", RS_ITEM)]
    + [create("s02", OUT, "", T, text_codec("rs_1", kind="reasoning_text"))]
    + [append("s02", "s03", "think", TC, text_codec("rs_1", kind="reasoning_text"))],
    "reasoning summary streams (two parts)": [added("s01", RS_ITEM)]
    + [create("s02", OUT, "", stream_transport("rs_1:summary:0"), summary_codec())]
    + [append("s02", "s03", "First.", stream_transport("rs_1:summary:0", status="complete"), summary_codec())]
    + [create("s04", OUT, "", stream_transport("rs_1:summary:1"), summary_codec(summary_index=1))]
    + [
        append(
            "s04",
            "s05",
            "Second.",
            stream_transport("rs_1:summary:1", status="complete"),
            summary_codec(summary_index=1),
        )
    ]
    + [done("s06", {"id": "rs_1", "type": "reasoning", "encrypted_content": "done-blob"})],
    "summary first contact at index 1 leaves a hole": [
        added("s01", RS_ITEM),
        update(
            "s04",
            "s05",
            OUT,
            "Second.",
            stream_transport("rs_1:summary:1", status="complete"),
            summary_codec(summary_index=1),
        ),
    ],
    "function call arguments stream": [
        create("s01", OUT, "", stream_transport("fc_1"), fn_codec()),
        append("s01", "s02", '{"city":', stream_transport("fc_1"), fn_codec()),
        append("s01", "s03", '"Paris"}', stream_transport("fc_1"), fn_codec()),
        append("s01", "s04", "", stream_transport("fc_1", status="complete"), fn_codec()),
        done("s05", {"type": "function_call", "id": "fc_1", "status": "completed"}),
    ],
    # The end event reads the closing append's headers, not the start's (whatever the start parsed).
    "function call stream closed under other item headers": [
        create("s01", OUT, "", stream_transport("fc_1"), fn_codec()),
        append("s01", "s02", "{}", stream_transport("fc_1"), fn_codec()),
        append("s01", "s03", "", stream_transport("fc_1", status="complete"), fn_codec("fc_9", name="other")),
        create("s04", OUT, "", stream_transport("fc_2"), fn_codec("fc_2")),
        append("s04", "s05", "", stream_transport("fc_2", status="complete"), {"kind": "function_call_arguments"}),
    ],
    "function call first contact from history": [
        update("s01", "s04", OUT, '{"a":1}', stream_transport("fc_1", status="complete"), fn_codec())
    ],
    "function call stream with an unparseable item header": [
        create(
            "s01",
            OUT,
            "",
            stream_transport("fc_1"),
            {"kind": "function_call_arguments", "item": "{nope", "output_index": "x"},
        ),
        append(
            "s01",
            "s02",
            "{}",
            stream_transport("fc_1", status="complete"),
            {"kind": "function_call_arguments", "item": '{"type":"other","id":5}'},
        ),
    ],
    "message output_item.done with logprobs and status": BASE
    + text_stream()
    + [
        done(
            "s09",
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "content": [{"type": "output_text", "logprobs": [{"token": "Hel"}]}],
            },
        )
    ],
    "output_item.done for an unseen item is ignored": [
        done("s09", {"type": "message", "id": "nope", "status": "completed"})
    ],
    "output_item.done type mismatch is ignored": BASE
    + [done("s09", {"type": "reasoning", "id": "msg_1", "status": "completed"})],
    "reasoning done sets encrypted_content and drops an absent status": [
        added("s01", {**RS_ITEM, "status": "in_progress"}),
        done("s02", {"type": "reasoning", "id": "rs_1", "encrypted_content": "final"}),
    ],
    "unmodelled output item type skipped": [
        added("s01", {"id": "ws_1", "type": "web_search_call", "status": "completed"})
    ],
    "id-less items pushed each time": [added("s01", {"type": "message", "role": "assistant", "content": []})]
    * 2,
    "re-added item keeps the first copy": [
        added("s01", MSG_ITEM),
        added("s02", {**MSG_ITEM, "status": "completed", "extra": 1}),
    ],
    "function_call_output appended, no dedup": [
        create(
            "s01",
            OUT,
            {"item": {"type": "function_call_output", "call_id": "c1", "output": "42"}},
            discrete_transport(),
            {"kind": "function_call_output"},
        ),
        create(
            "s02",
            OUT,
            {"item": {"type": "function_call_output", "call_id": "c1", "output": "42"}},
            discrete_transport(),
            {"kind": "function_call_output"},
        ),
    ],
    "tool-approval-request (state only, no item)": [
        create(
            "s01",
            OUT,
            '{"x":1}',
            discrete_transport(),
            {"kind": "tool-approval-request", "call_id": "c1", "name": "rm"},
        ),
    ],
    "tool-approval-request defaults": [
        create("s01", OUT, {"not": "a string"}, discrete_transport(), {"kind": "tool-approval-request"})
    ],
    "discrete item event with string data has no item": [
        create("s01", OUT, "junk", discrete_transport(), {"kind": "response.output_item.added"})
    ],
    "discrete item event with null data (reference throws)": [
        create("s01", OUT, None, discrete_transport(), {"kind": "response.output_item.added"}),
        added("s02", MSG_ITEM),
    ],
    "discrete item event without data (reference throws)": [
        create("s01", OUT, NO_DATA, discrete_transport(), {"kind": "function_call_output"}),
        added("s02", MSG_ITEM),
    ],
    "stream group kind sent as discrete decodes to nothing": [
        create("s01", OUT, "x", discrete_transport(), {"kind": "output_text"})
    ],
    "unknown output kind": [
        create("s01", OUT, "x", discrete_transport(), {"kind": "response.web_search_call.completed"})
    ],
    "event without codec-message-id is not folded": [added("s01", MSG_ITEM, mid=None)],
    "unknown stream group: only the synthetic item": [
        create("s01", OUT, "", T, {**C, "kind": "mystery"}),
        append("s01", "s02", "x", TC, {**C, "kind": "mystery"}),
    ],
    "missing item_id: no synthetic item, start omits it": BASE
    + [create("s02", OUT, "", T, {k: v for k, v in C.items() if k != "item_id"})]
    + [append("s02", "s03", "x", TC, {k: v for k, v in C.items() if k != "item_id"})],
    "missing part: no synthetic item": BASE
    + [create("s02", OUT, "", T, {k: v for k, v in C.items() if k != "part"})],
    "summary part on a content group synthesises a reasoning item": [
        create("s02", OUT, "", T, {**C, "part": '{"type":"summary_text","text":""}'}),
    ],
    "unparseable index headers": BASE
    + [create("s02", OUT, "", T, {**C, "output_index": "zero", "content_index": "NaN"})]
    + [append("s02", "s03", "x", TC, {**C, "output_index": "zero", "content_index": "Infinity"})],
    "null index headers": BASE
    + [create("s02", OUT, "", T, {**C, "output_index": "null", "content_index": "null"})]
    + [append("s02", "s03", "x", TC, {**C, "output_index": "null", "content_index": "null"})],
    "string content_index header": BASE
    + [create("s02", OUT, "", T, {**C, "content_index": '"0"'}), append("s02", "s03", "x", TC, C)],
    "streamed create data is ignored": BASE
    + [create("s02", OUT, "IGNORED", T, C), append("s02", "s03", "x", TC, C)],
    "non-string data on a stream": BASE
    + [
        create("s02", OUT, {"a": 1}, T, C),
        append("s02", "s03", {"b": 2}, T, C),
        append("s02", "s04", "ok", TC, C),
    ],
}

INPUT_CASES: dict[str, list] = {
    "user-message parts merge": [
        create(
            "u1",
            IN,
            "Hello ",
            discrete_transport("u-msg", role="user"),
            {"kind": "user-message", "partType": "input_text"},
        ),
        create(
            "u2",
            IN,
            "world",
            discrete_transport("u-msg", role="user"),
            {"kind": "user-message", "partType": "input_text"},
        ),
    ],
    "user-message defaults (no role, non-string data)": [
        create("u1", IN, 5, discrete_transport("u-msg"), {"kind": "user-message", "partType": "input_text"}),
    ],
    "user-message with another partType or none": [
        create(
            "u1", IN, "x", discrete_transport("u-msg"), {"kind": "user-message", "partType": "input_image"}
        ),
        create("u2", IN, "x", discrete_transport("u-msg"), {"kind": "user-message"}),
    ],
    "user-message assistant role header": [
        create(
            "u1",
            IN,
            "hi",
            discrete_transport("u-msg", role="assistant"),
            {"kind": "user-message", "partType": "input_text"},
        ),
    ],
    "tool-result": [
        create(
            "t1",
            IN,
            {"output": {"temp": 20}},
            discrete_transport("m1"),
            {"kind": "tool-result", "call_id": "c1"},
        )
    ],
    "tool-result defaults": [
        create("t1", IN, "not an object", discrete_transport(None), {"kind": "tool-result"}),
        create(
            "t2", IN, {"no": "output"}, discrete_transport("m1"), {"kind": "tool-result", "call_id": "c2"}
        ),
        create("t3", IN, [1, 2], discrete_transport("m1"), {"kind": "tool-result", "call_id": "c3"}),
    ],
    "tool-result-error": [
        create(
            "t1",
            IN,
            {"message": "boom"},
            discrete_transport("m1"),
            {"kind": "tool-result-error", "call_id": "c1"},
        )
    ],
    "tool-result-error defaults": [
        create("t1", IN, {"message": 5}, discrete_transport("m1"), {"kind": "tool-result-error"})
    ],
    "tool-approval-response approved": [
        create(
            "a1",
            IN,
            "",
            discrete_transport("m1"),
            {"kind": "tool-approval-response", "call_id": "c1", "approved": "true"},
        ),
    ],
    "tool-approval-response denied with reason": [
        create(
            "a1",
            IN,
            "",
            discrete_transport("m1"),
            {"kind": "tool-approval-response", "call_id": "c1", "approved": "false", "reason": "no"},
        ),
    ],
    "tool-approval-response defaults": [
        create("a1", IN, "", discrete_transport("m1"), {"kind": "tool-approval-response"}),
        create(
            "a2",
            IN,
            "",
            discrete_transport("m1"),
            {"kind": "tool-approval-response", "call_id": "c2", "approved": "TRUE"},
        ),
    ],
    "regenerate and unknown kinds decode to nothing": [
        create("r1", IN, "", discrete_transport("m1", **{"msg-regenerate": "x"}), {"kind": "regenerate"}),
        create("r2", IN, "", discrete_transport("m1"), {"kind": "mystery"}),
        create("r3", IN, "", discrete_transport("m1")),
    ],
    "input update re-decodes": [
        {
            **create(
                "t1", IN, {"output": 1}, discrete_transport("m1"), {"kind": "tool-result", "call_id": "c1"}
            ),
            "action": "message.update",
        },
    ],
}

ALL = {**CASES, **INPUT_CASES}


@pytest.fixture(scope="module")
def js_results(node):
    names = list(ALL)
    results = node.call("codec_decoder", "decodeFoldBatch", wires=[ALL[n] for n in names])
    return dict(zip(names, results))


@pytest.mark.parametrize("name", list(ALL))
def test_case_matches_reference(name, js_results):
    wire = ALL[name]
    assert_matches_js(decode_fold(wire), js_results[name], wire)


# ---------------------------------------------------------------------------------------------
# What each case means (independent of the reference)


def outputs(name):
    return [r["outputs"] for r in decode_fold(ALL[name])["decoded"]]


def inputs(name):
    return [r["inputs"] for r in decode_fold(ALL[name])["decoded"]]


def messages(name):
    return decode_fold(ALL[name])["messages"]


def texts(name):
    return [p.get("text", p.get("refusal")) for p in messages(name)[0]["message"]["items"][0]["content"]]


def types(evs):
    return [e["type"] for e in evs]


def test_live_text_stream_events():
    o = outputs("live text stream")
    assert types(o[1]) == [
        "response.output_item.added",
        "response.content_part.added",
    ]  # synthetic then start
    assert o[1][0]["item"] == {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    assert o[1][1] == {
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "part": {"type": "output_text", "text": "", "annotations": []},
        "type": "response.content_part.added",
    }
    assert o[2] == [
        {"item_id": "msg_1", "content_index": 0, "delta": "Hel", "type": "response.output_text.delta"}
    ]
    assert o[4] == [
        {
            "type": "response.output_text.done",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "text": "Hello",
        }
    ]
    assert texts("live text stream") == ["Hello"]


def test_version_guard_and_tombstones():
    assert outputs("duplicate append dropped by version guard")[3] == []
    assert texts("duplicate append dropped by version guard") == ["Hello"]
    assert outputs("stale append dropped")[3] == []
    assert outputs("append without version.serial defaults to the serial and is dropped")[2] == []
    assert outputs("duplicate streamed create ignored")[2] == []
    assert outputs("tombstone: append after complete dropped")[-1] == []
    assert outputs("tombstone: update after complete dropped")[-1] == []
    assert texts("cancelled append closes without end") == ["Hel"]
    assert outputs("cancelled append closes without end")[3:] == [[], []]
    assert outputs("update with older version dropped")[3] == []
    for name in (
        "streamed create without a version: its serial is the version",
        "streamed create with an empty version serial: its serial is the version",
        "streamed create with a newer version serial",
    ):
        assert outputs(name)[2] == [] and texts(name) == ["B"], name
    assert texts("streamed create without a codec tier") == []


def test_prefix_and_non_prefix_updates():
    o = outputs("prefix update emits only the suffix and closes")[3]
    assert types(o) == ["response.output_text.delta", "response.output_text.done"]
    assert o[0]["delta"] == "lo" and o[1]["text"] == "Hello" and o[1]["output_index"] == 7  # closing headers
    assert types(outputs("prefix update without new data still applies complete")[3]) == [
        "response.output_text.done"
    ]
    o = outputs("non-prefix update replaces silently")
    assert o[3] == [] and o[4][0]["delta"] == "!" and o[5][0]["text"] == "Goodbye!"
    # the fold saw "Hel" + "!" as deltas, then the done replaced the text with the accumulated one
    assert texts("non-prefix update replaces silently") == ["Goodbye!"]
    o = outputs("non-prefix update replaces the headers too")
    assert o[5][0]["item_id"] == "msg_2" and o[5][1]["text"] == "XY"


def test_missing_action_is_a_create():
    o = outputs("missing action is a create (Ably omits action 0)")
    assert types(o[0]) == ["response.output_item.added"]
    assert types(o[1]) == ["response.output_item.added", "response.content_part.added"]
    # an append whose action is missing reads as a (duplicate) create of a tracked stream: nothing
    assert o[2] == []
    assert outputs("unknown numeric actions ignored")[1:] == [[], []]


def test_streamed_create_data_is_ignored():
    o = outputs("streamed create data is ignored")
    assert types(o[1]) == ["response.output_item.added", "response.content_part.added"]
    assert o[2][-1]["text"] == "x"


def test_delete_and_foreign():
    o = outputs("delete closes the stream")
    assert o[3] == [] and o[4] == []
    assert outputs("delete of an unknown serial")[1] == []
    assert all(r == [] for r in outputs("foreign create, update and delete")[1:])
    assert outputs("foreign append (no extras.ai)")[1] == []
    assert outputs("ai-output name without envelope") == [[]]


def test_first_contact():
    o = outputs("first contact from update (late join, streaming)")[1]
    assert types(o) == [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert texts("first contact from update (late join, streaming)") == ["Hello"]
    o = outputs("first contact from update (history, complete)")[1]
    assert types(o)[-1] == "response.output_text.done" and o[-1]["text"] == "Hello"
    assert outputs("first contact from update (cancelled)")[2] == []
    assert types(outputs("first contact from update with empty data")[1]) == [
        "response.output_item.added",
        "response.content_part.added",
    ]
    m = messages("first contact from update without item added (mid-stream-join repair)")
    assert m[0]["message"]["items"][0]["content"][0]["text"] == "Hello"
    assert m[0]["message"]["items"][0]["status"] == "in_progress"


def test_append_without_tracker_is_first_contact_without_name(caplog):
    with caplog.at_level(logging.WARNING, logger="ai_transport.codec.decoder"):
        o = outputs("append without tracker with envelope (no name: no events)")
    assert o[1] == []
    assert "no tracker" in caplog.text
    # It is tracked now: later appends of that stream decode to nothing either (not an ai-output tracker).
    assert outputs("append without tracker then live appends")[2] == []


def test_holes_compact_to_the_dense_prefix():
    m = messages("first contact at content_index 1 leaves a hole")
    assert m[0]["message"]["items"][0]["content"] == []
    assert texts("hole filled later") == ["A", "B"]
    m = messages("summary first contact at index 1 leaves a hole")
    assert m[0]["message"]["items"][0]["summary"] == []


def test_reasoning_and_function_calls():
    item = messages("reasoning summary streams (two parts)")[0]["message"]["items"][0]
    assert item["summary"] == [
        {"type": "summary_text", "text": "First."},
        {"type": "summary_text", "text": "Second."},
    ]
    assert item["encrypted_content"] == "done-blob"
    o = outputs("function call arguments stream")
    assert o[0] == [
        {
            "item": {
                "id": "fc_1",
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": "call_1",
                "name": "get_weather",
            },
            "output_index": 0,
            "type": "response.output_item.added",
        }
    ]
    assert o[1] == [
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": '{"city":',
        }
    ]
    assert o[3] == [
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": '{"city":"Paris"}',
            "name": "get_weather",
        }
    ]
    fc = messages("function call arguments stream")[0]["message"]["items"][0]
    assert fc["arguments"] == '{"city":"Paris"}' and fc["status"] == "completed"
    o = outputs("function call stream with an unparseable item header")
    assert o[0] == [{"type": "response.output_item.added"}]  # no item, no output_index; no synthetic item
    assert o[1][0] == {
        "type": "response.function_call_arguments.delta",
        "item_id": "",
        "output_index": 0,
        "delta": "{}",
    }
    assert o[1][1]["item_id"] == 5 and o[1][1]["name"] == ""
    o = outputs("function call stream closed under other item headers")
    assert o[1][0]["item_id"] == "fc_1"
    assert o[2] == [
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_9",
            "output_index": 0,
            "arguments": "{}",
            "name": "other",
        }
    ]
    assert o[4] == [
        {
            "type": "response.function_call_arguments.done",
            "item_id": "",
            "output_index": 0,
            "arguments": "",
            "name": "",
        }
    ]


def test_done_reductions():
    item = messages("message output_item.done with logprobs and status")[0]["message"]["items"][0]
    assert item["status"] == "completed" and item["content"][0]["logprobs"] == [{"token": "Hel"}]
    assert messages("output_item.done for an unseen item is ignored") == []
    assert (
        messages("output_item.done type mismatch is ignored")[0]["message"]["items"][0]["status"]
        == "in_progress"
    )
    item = messages("reasoning done sets encrypted_content and drops an absent status")[0]["message"][
        "items"
    ][0]
    assert item["encrypted_content"] == "final" and "status" not in item


def test_items_and_tool_states():
    assert messages("unmodelled output item type skipped") == []
    assert len(messages("id-less items pushed each time")[0]["message"]["items"]) == 2
    items = messages("re-added item keeps the first copy")[0]["message"]["items"]
    assert items == [MSG_ITEM]
    assert len(messages("function_call_output appended, no dedup")[0]["message"]["items"]) == 2
    m = messages("tool-approval-request (state only, no item)")[0]["message"]
    assert m == {
        "role": "assistant",
        "items": [],
        "toolCallStates": {"c1": {"approval": "pending", "name": "rm", "arguments": '{"x":1}'}},
    }
    assert outputs("tool-approval-request defaults")[0] == [
        {"call_id": "", "name": "", "arguments": "", "type": "tool-approval-request"}
    ]
    assert outputs("discrete item event with string data has no item")[0] == [
        {"type": "response.output_item.added"}
    ]
    assert messages("event without codec-message-id is not folded") == []


def test_reference_throws_we_skip_and_log(caplog):
    with caplog.at_level(logging.WARNING, logger="ai_transport.codec.decoder"):
        o = outputs("discrete item event with null data (reference throws)")
    assert o[0] == [] and types(o[1]) == ["response.output_item.added"]
    assert "malformed" in caplog.text


def test_decoded_inputs_and_defaults():
    i = inputs("user-message parts merge")
    assert i[0] == [
        {
            "kind": "user-message",
            "message": {
                "role": "user",
                "items": [
                    {"type": "message", "role": "user", "content": [{"text": "Hello ", "type": "input_text"}]}
                ],
            },
        }
    ]
    m = messages("user-message parts merge")
    assert m == [
        {
            "codecMessageId": "u-msg",
            "message": {
                "role": "user",
                "items": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [
                            {"text": "Hello ", "type": "input_text"},
                            {"text": "world", "type": "input_text"},
                        ],
                    }
                ],
            },
        }
    ]
    assert (
        inputs("user-message defaults (no role, non-string data)")[0][0]["message"]["items"][0]["content"][0][
            "text"
        ]
        == ""
    )
    assert inputs("user-message with another partType or none") == [[], []]
    assert messages("user-message assistant role header")[0]["message"]["role"] == "assistant"
    assert inputs("tool-result")[0] == [
        {"kind": "tool-result", "codecMessageId": "m1", "payload": {"call_id": "c1", "output": {"temp": 20}}}
    ]
    i = inputs("tool-result defaults")
    assert i[0][0] == {"kind": "tool-result", "codecMessageId": "", "payload": {"call_id": "", "output": ""}}
    assert i[1][0]["payload"] == {"call_id": "c2"} and i[2][0]["payload"] == {"call_id": "c3"}
    assert inputs("tool-result-error defaults")[0][0]["payload"] == {"call_id": "", "message": ""}
    assert inputs("tool-approval-response denied with reason")[0][0]["payload"] == {
        "call_id": "c1",
        "approved": False,
        "reason": "no",
    }
    i = inputs("tool-approval-response defaults")
    assert i[0][0]["payload"] == {"call_id": "", "approved": False}
    assert i[1][0]["payload"] == {"call_id": "c2", "approved": False}
    assert inputs("regenerate and unknown kinds decode to nothing") == [[], [], []]
    m = messages("tool-approval-response denied with reason")[0]["message"]
    assert m["items"] == [{"type": "function_call_output", "call_id": "c1", "output": "no"}]
    assert m["toolCallStates"] == {"c1": {"approval": "denied", "reason": "no"}}


def test_direction_follows_the_message_name():
    d = Decoder()
    r = d.decode(INPUT_CASES["tool-result"][0])
    assert r.outputs == [] and len(r.inputs) == 1
    r = d.decode(added("s01", MSG_ITEM))
    assert r.inputs == [] and len(r.outputs) == 1
    _inputs, outputs_ = r  # unpackable
    assert outputs_ == r.outputs
    assert DecodeResult().to_dict() == {"inputs": [], "outputs": []}


def test_ably_python_message_objects_decode_like_dicts():
    from ably.types.message import Message, MessageAction, MessageVersion

    wire = CASES["live text stream"]
    objs = []
    for m in wire:
        action = {
            "message.create": MessageAction.MESSAGE_CREATE,
            "message.append": MessageAction.MESSAGE_APPEND,
        }[m["action"]]
        objs.append(
            Message(
                name=m.get("name"),
                data=m.get("data"),
                extras=m.get("extras"),
                serial=m["serial"],
                action=action,
                version=MessageVersion(serial=m["version"]["serial"]),
            )
        )
    d1, d2 = Decoder(), Decoder()
    assert [d1.decode(o).to_dict() for o in objs] == [d2.decode(m).to_dict() for m in wire]
    # version given as a plain dict on the object is read too
    obj = Message(
        name=OUT, data="", extras=wire[1]["extras"], serial="zz", action=MessageAction.MESSAGE_CREATE
    )
    obj._Message__version = {"serial": "zz"}  # as some SDK paths leave it
    assert json.dumps(Decoder().decode(obj).to_dict())


def test_malformed_parts_are_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="ai_transport.codec.decoder"):
        outputs("non-string data on a stream")
        assert "not a string" in caplog.text
        caplog.clear()
        outputs("unparseable index headers")
        assert "not valid JSON" in caplog.text
        caplog.clear()
        d = Decoder()
        assert (
            d.decode(
                {"action": "message.create", "name": OUT, "serial": "x", "extras": {"ai": {"transport": 5}}}
            )
            == DecodeResult()
        )
        assert (
            d.decode({"action": "message.create", "name": OUT, "serial": "y", "extras": {"ai": "x"}})
            == DecodeResult()
        )
        assert (
            "extras.ai.transport is not an object" in caplog.text
            and "extras.ai is not an object" in caplog.text
        )
        caplog.clear()
        outputs("live text stream")
        outputs("foreign create, update and delete")
        assert caplog.text == ""  # well-formed and foreign traffic is not warned about
