"""The codec encoder beyond the JS table cases: the sans-I/O core, the asyncio shell (fire-and-forget
appends, ordering, recovery), item-id normalisation, openai SDK events, factories, and the
ResponsesCodec facade (encode -> decode -> fold round trip)."""

from __future__ import annotations

import asyncio
import copy
import json
import logging

import pytest
from codec_encoder_cases import fc_stream, summary_stream, text_stream, user_message
from hypothesis import given
from hypothesis import strategies as st
from strategies_codec_encoder import event_streams
from support_codec_encoder import (
    RecordingWriter,
    fixture_names,
    load_events,
    ordered_equal,
    outputs,
    run_py_sync,
)

from ai_transport.codec import (
    EncoderCore,
    ItemIdNormaliser,
    Operation,
    ResponsesCodec,
    event_to_dict,
    wire_item,
)
from ai_transport.errors import AITransportError, InvalidArgumentError, InvalidTypeError

# ---------------------------------------------------------------------------------------------
# Sans-I/O core


def test_core_emits_operations_and_needs_the_create_serial():
    core = EncoderCore({"headers": {"run-id": "r"}})
    ev = text_stream()
    assert core.encode_output(ev[0], message_id="m") == [
        Operation("publish", {
            "name": "ai-output",
            "data": {"item": ev[0]["item"]},
            "extras": {"ai": {"transport": {"run-id": "r", "codec-message-id": "m", "stream": "false"},
                              "codec": {"kind": "response.output_item.added"}}},
        })
    ]
    (start,) = core.encode_output(ev[1], message_id="m")
    action, msg = start[:2]
    assert (action, start.stream_id) == ("publish", "msg_1:0")
    assert msg["extras"]["ai"]["transport"]["status"] == "streaming"
    # Until the serial is known the stream does not exist.
    with pytest.raises(InvalidArgumentError) as exc:
        core.encode_output(ev[2])
    assert exc.value.code == 40003 and "no active stream for streamId 'msg_1:0'" in exc.value.message
    core.stream_started("msg_1:0", ["s9"])
    (app,) = core.encode_output(ev[2])
    assert app.action == "append" and app.message["serial"] == "s9" and app.message["data"] == "Hel"
    assert "name" not in app.message
    core.encode_output(ev[3])
    close_ops = core.encode_output(ev[4])
    assert [o.action for o in close_ops] == ["append", "flush"]
    assert close_ops[0].message["extras"]["ai"]["transport"]["status"] == "complete"
    assert core.streams["msg_1:0"].accumulated == "Hello"
    assert core.encode_output(ev[5]) == []  # content_part.done is dropped


def test_core_no_serial_is_50000():
    core = EncoderCore()
    (start,) = core.encode_output(text_stream()[1])
    with pytest.raises(AITransportError) as exc:
        core.stream_started(start.stream_id, [])
    assert (exc.value.code, exc.value.status_code) == (50000, 500)
    assert exc.value.message == (
        "unable to start stream; no serial returned for stream 'ai-output' (streamId: msg_1:0)"
    )
    assert "msg_1:0" not in core.streams


def test_core_recover_builds_one_update_per_stream():
    core = EncoderCore()
    evs = text_stream(deltas=("a", "b", "c"))
    core.encode_output(evs[0])
    (start,) = core.encode_output(evs[1], message_id="m")
    core.stream_started(start.stream_id, ["s1"])
    for e in evs[2:5]:
        core.encode_output(e)
    ups = core.recover(["msg_1:0", "msg_1:0", "unknown"])
    assert len(ups) == 1
    assert ups[0].action == "update"
    assert ups[0].message["data"] == "abc"
    assert ups[0].message["serial"] == "s1"
    assert ups[0].message["extras"]["ai"]["transport"]["status"] == "complete"
    assert ups[0].message["extras"]["ai"]["codec"] == start.message["extras"]["ai"]["codec"]


def test_bad_event_shapes_raise_coded_errors():
    core = EncoderCore()
    with pytest.raises(InvalidTypeError) as exc:
        core.encode_output(["not", "an", "event"])
    assert exc.value.code == 40003 and "array" in exc.value.message
    with pytest.raises(InvalidTypeError) as exc:
        core.encode_input("hello")
    assert exc.value.code == 40003
    with pytest.raises(InvalidTypeError) as exc:
        core.encode_input({"kind": "user-message", "message": None})
    assert "input.message must be an object" in exc.value.message
    (start,) = core.encode_output(text_stream()[1])
    core.stream_started(start.stream_id, ["s1"])
    with pytest.raises(InvalidTypeError) as exc:
        core.encode_output({"type": "response.output_text.delta", "item_id": "msg_1", "content_index": 0})
    assert "response.output_text.delta.delta must be a string, got undefined" in exc.value.message


# ---------------------------------------------------------------------------------------------
# The asyncio shell


class SlowWriter(RecordingWriter):
    """Appends take a while, so several are in flight at once."""

    def __init__(self, **kw):
        super().__init__(delay=0.01, **kw)
        self.in_flight = 0
        self.max_in_flight = 0
        self.completed_appends = 0

    async def append_message(self, msg):
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await super().append_message(msg)  # records, then takes 10 ms
        finally:
            self.in_flight -= 1
            self.completed_appends += 1


async def test_appends_are_fire_and_forget_and_awaited_at_close():
    writer = SlowWriter()
    enc = ResponsesCodec.create_encoder(writer)
    evs = text_stream(deltas=tuple("abcdef"))
    for e in evs[:-2]:  # up to the last delta, no close yet
        await enc.publish_output(e, "m")
    assert writer.completed_appends == 0  # publish_output did not wait for any append
    await enc.close()
    assert writer.completed_appends == 6
    assert writer.max_in_flight == 6


async def test_writer_calls_start_in_encoder_order():
    """A discrete publish after deltas reaches the writer after them (as in 0.8.0)."""
    writer = SlowWriter()
    enc = ResponsesCodec.create_encoder(writer)
    evs = text_stream(deltas=("a", "b"))
    for e in evs[:4]:
        await enc.publish_output(e)
    await enc.publish_output({"type": "function_call_output", "item": {"call_id": "c"}})
    await enc.close()
    ops = [(x["op"], x["message"].get("data")) for x in writer.log]
    assert ops[2:] == [("append", "a"), ("append", "b"), ("publish", {"item": {"call_id": "c"}})]


async def test_recovery_sends_exactly_one_update_with_full_text():
    writer = RecordingWriter(fail_appends=[0, 2, 3])
    enc = ResponsesCodec.create_encoder(writer)
    evs = text_stream(deltas=("x", "y", "z"))
    for e in evs:
        await enc.publish_output(e, "m")
    updates = [x for x in writer.log if x["op"] == "update"]
    assert len(updates) == 1
    up = updates[0]["message"]
    start = writer.log[1]["message"]
    assert up["serial"] == "s2" and up["data"] == "xyz"
    assert up["extras"]["ai"]["codec"] == start["extras"]["ai"]["codec"]
    assert up["extras"]["ai"]["transport"] == {**start["extras"]["ai"]["transport"], "status": "complete"}
    await enc.close()
    assert len([x for x in writer.log if x["op"] == "update"]) == 1


async def test_recovery_failure_is_104000_with_cause():
    writer = RecordingWriter(fail_appends=[1], fail_updates=True)
    enc = ResponsesCodec.create_encoder(writer)
    evs = text_stream(deltas=("x", "y"))
    for e in evs[:4]:
        await enc.publish_output(e)
    with pytest.raises(AITransportError) as exc:
        await enc.publish_output(evs[4])
    assert exc.value.code == 104000 and exc.value.status_code == 500
    assert exc.value.message == "unable to flush pending appends; recovery failed for stream(s): msg_1:0"
    assert isinstance(exc.value.__cause__, RuntimeError)
    await enc.close()  # nothing pending any more: closes cleanly


async def test_concurrent_flushes_share_one_recovery():
    writer = RecordingWriter(fail_appends=[0])
    enc = ResponsesCodec.create_encoder(writer)
    evs = text_stream(deltas=("x",))
    for e in evs[:3]:
        await enc.publish_output(e)
    await asyncio.gather(enc.cancel_streams(), enc.close())
    assert len([x for x in writer.log if x["op"] == "update"]) == 1


async def test_cancel_is_idempotent_and_closed_encoder_refuses():
    writer = RecordingWriter()
    enc = ResponsesCodec.create_encoder(writer)
    for e in text_stream()[:3] + fc_stream()[:2]:
        await enc.publish_output(e)
    await enc.cancel_streams()
    await enc.cancel_streams()
    cancels = [x for x in writer.log if x["message"].get("extras", {}).get("ai", {}).get("transport", {})
               .get("status") == "cancelled"]
    assert len(cancels) == 2
    await enc.close()
    await enc.close()
    for call in (enc.cancel_streams(), enc.publish_input(user_message("x")),
                 enc.publish_output(fc_stream()[0])):
        with pytest.raises(AITransportError) as exc:
            await call
        assert (exc.value.code, exc.value.status_code) == (104004, 400)
        assert exc.value.message == "unable to write to encoder; encoder has been closed"


async def test_hook_sees_every_message_and_may_stamp_the_stream(caplog):
    seen = []

    def hook(msg):
        seen.append(msg)
        msg["extras"]["ai"]["transport"]["x-hook"] = str(len(seen))
        if len(seen) == 4:
            raise RuntimeError("hook bug")

    writer = RecordingWriter(fail_appends=[0])
    enc = ResponsesCodec.create_encoder(writer, on_ably_message=hook)
    with caplog.at_level(logging.ERROR, logger="ai_transport.codec.encoder"):
        for e in text_stream(deltas=("a", "b")):
            await enc.publish_output(e)
    assert "hook raised" in caplog.text
    # Hook ran for added, create, 2 appends, close — not for the recovery update.
    assert len(seen) == 5
    assert [x["op"] for x in writer.log] == ["publish", "publish", "append", "append", "append", "update"]
    # The stamp on the create persists into the stream's appends (the start tiers are shared, as 0.8.0).
    update = writer.log[-1]["message"]
    assert update["extras"]["ai"]["transport"]["x-hook"] == "2"


async def test_publish_failure_of_a_create_leaves_no_stream():
    writer = RecordingWriter(fail_publish=[0])
    enc = ResponsesCodec.create_encoder(writer)
    evs = text_stream()
    with pytest.raises(RuntimeError):
        await enc.publish_output(evs[1])
    assert enc.core.streams == {} and enc.core._starting == {}
    with pytest.raises(InvalidArgumentError):
        await enc.publish_output(evs[2])


def test_writer_may_return_serials_object():
    class W(RecordingWriter):
        async def publish(self, msg):
            return {"serials": await super().publish(msg)}

    async def go():
        w = W()
        enc = ResponsesCodec.create_encoder(w)
        for e in text_stream():
            await enc.publish_output(e)
        await enc.close()
        return w.log

    log = asyncio.run(go())
    assert log[2]["message"]["serial"] == "s2"


# ---------------------------------------------------------------------------------------------
# Item-id rotation (reference §15.1, responses-wire §5.3)


def rotate_ids(events: list[dict], tag: str = "rot") -> list[dict]:
    """What an id-rotating proxy does: every event of an item gets a fresh item id."""
    out = []
    for n, ev in enumerate(copy.deepcopy(events)):
        if isinstance(ev.get("item"), dict) and "id" in ev["item"] and ev.get("type") != "function_call_output":
            ev["item"]["id"] = f"{tag}-{n}"
        if "item_id" in ev:
            ev["item_id"] = f"{tag}-{n}"
        out.append(ev)
    return out


def expected_after_rotation(original: list[dict], rotated: list[dict]) -> list[dict]:
    """The rotated stream with each item's id replaced by the rotated id of the item's first event.

    Computed from the original (consistent) ids, independently of the normaliser.
    """
    first: dict[str, str] = {}
    out = []
    for ev, rot in zip(original, copy.deepcopy(rotated)):
        oid = ev.get("item_id") or (ev.get("item") or {}).get("id")
        rid = rot.get("item_id") or (rot.get("item") or {}).get("id")
        if oid is None or ev.get("type") == "function_call_output":
            out.append(rot)
            continue
        first.setdefault(oid, rid)
        if "item_id" in rot:
            rot["item_id"] = first[oid]
        else:
            rot["item"]["id"] = first[oid]
        out.append(rot)
    return out


@pytest.mark.parametrize("name", fixture_names())
def test_rotating_ids_encode_like_consistent_ids(node, name):
    events = load_events(name)
    rotated = rotate_ids(events)
    expected = expected_after_rotation(events, rotated)
    consistent = run_py_sync({"steps": outputs(expected) + [{"op": "close"}]}, normalise_item_ids=False)
    py = run_py_sync({"steps": outputs(rotated) + [{"op": "close"}]})
    assert py == consistent
    assert all(r["ok"] for r in py["results"])
    # The consistent form is exactly what 0.8.0 sends for it.
    js_consistent = node.call("codec_encoder", "run", steps=outputs(expected) + [{"op": "close"}])
    assert ordered_equal(py["log"], js_consistent["log"])
    # ... while 0.8.0 itself fails on the rotating stream (why the normaliser exists).
    js = node.call("codec_encoder", "run", steps=outputs(rotated))
    failures = [r["error"] for r in js["results"] if not r["ok"]]
    if any(e.get("type", "").endswith(".delta") for e in events):
        assert failures and failures[0]["code"] == 40003
        assert failures[0]["message"].startswith("unable to append to stream; no active stream for streamId ")
        # With normalisation off we fail exactly like 0.8.0.
        off = run_py_sync({"steps": outputs(rotated)}, normalise_item_ids=False)
        assert off["results"] == js["results"]
        assert ordered_equal(off["log"], js["log"])


def test_rotation_case_from_reference():
    """The Copilot-capture shape: added id != delta item_id != done id, summary stream."""
    evs = rotate_ids(summary_stream("rs_1", 0), tag="capture-id")
    evs.insert(0, {"type": "response.output_item.added", "output_index": 0,
                   "item": {"id": "capture-id-a", "type": "reasoning", "summary": []}})
    evs.append({"type": "response.output_item.done", "output_index": 0,
                "item": {"id": "capture-id-z", "type": "reasoning", "summary": [], "status": "completed"}})
    res = run_py_sync({"steps": outputs(evs)})
    assert all(r["ok"] for r in res["results"])
    ids = {json.dumps(x["message"]["extras"]["ai"].get("codec", {}).get("item_id")) for x in res["log"]}
    assert ids <= {'"capture-id-a"', "null"}
    assert res["log"][-1]["message"]["data"]["item"]["id"] == "capture-id-a"
    off = run_py_sync({"steps": outputs(evs)}, normalise_item_ids=False)
    assert off["results"][2]["error"]["message"] == (
        "unable to append to stream; no active stream for streamId 'capture-id-1:summary:0'"
    )


@given(streams=event_streams())
def test_normalising_consistent_streams_changes_nothing(streams):
    """Wire-neutral: with consistent ids the normaliser returns every event unchanged (same object)."""
    events, _ = streams
    norm = ItemIdNormaliser()
    assert all(norm.normalise(e) is e for e in events)


@given(streams=event_streams())
def test_rotated_generated_streams_encode_like_consistent(streams):
    """Hypothesis: any well-formed stream (interleaved items, back-to-back responses) with rotated
    ids encodes exactly like the same stream with each item's first id throughout."""
    events, _ = streams
    rotated = rotate_ids(events)
    expected = expected_after_rotation(events, rotated)
    a = run_py_sync({"steps": outputs(rotated) + [{"op": "close"}]})
    b = run_py_sync({"steps": outputs(expected) + [{"op": "close"}]}, normalise_item_ids=False)
    assert a == b and all(r["ok"] for r in a["results"])


def test_output_index_reuse_across_responses_is_not_merged():
    first = text_stream("msg_a", 0)
    second = fc_stream("fc_b", 0)
    norm = ItemIdNormaliser()
    assert [norm.normalise(e) for e in first + second] == first + second
    norm = ItemIdNormaliser()
    created = {"type": "response.created", "response": {}}
    seq = first + [created] + text_stream("msg_c", 0, with_item=False)
    assert [norm.normalise(e) for e in seq] == seq


# ---------------------------------------------------------------------------------------------
# openai SDK event objects


def _parsed(log):
    """The wire log with JSON-valued headers parsed (SDK models order keys by field declaration)."""
    out = copy.deepcopy(log)
    for entry in out:
        msgs = entry["message"] if isinstance(entry["message"], list) else [entry["message"]]
        for m in msgs:
            codec = m.get("extras", {}).get("ai", {}).get("codec", {})
            for k in ("part", "item", "output_index", "content_index", "summary_index"):
                if k in codec:
                    codec[k] = json.loads(codec[k])
    return out


@pytest.mark.parametrize("name", fixture_names())
def test_openai_sdk_events_encode_like_dicts(name):
    from openai._models import construct_type
    from openai.types.responses import ResponseStreamEvent

    events = load_events(name)
    typed = [construct_type(type_=ResponseStreamEvent, value=copy.deepcopy(e)) for e in events]
    assert all(type(t).__name__ != "dict" for t in typed)
    assert [event_to_dict(t) for t in typed] == events

    async def go(evs):
        w = RecordingWriter()
        enc = ResponsesCodec.create_encoder(w)
        for e in evs:
            await enc.publish_output(e, "m")
        await enc.close()
        return w.log

    assert _parsed(asyncio.run(go(typed))) == _parsed(asyncio.run(go(events)))


def test_openai_sdk_models_built_in_code():
    from openai.types.responses import (
        ResponseOutputItemAddedEvent,
        ResponseOutputMessage,
        ResponseTextDeltaEvent,
    )

    item = ResponseOutputMessage(id="msg_1", type="message", status="in_progress", content=[], role="assistant")
    ev = ResponseOutputItemAddedEvent(type="response.output_item.added", output_index=0, item=item,
                                      sequence_number=1)
    assert event_to_dict(ev) == {"type": "response.output_item.added", "output_index": 0,
                                 "item": {"id": "msg_1", "type": "message", "status": "in_progress",
                                          "content": [], "role": "assistant"}, "sequence_number": 1}
    core = EncoderCore()
    (op,) = core.encode_output(ev)
    assert op.message["data"] == {"item": event_to_dict(ev)["item"]}
    delta = ResponseTextDeltaEvent(type="response.output_text.delta", item_id="x", output_index=0,
                                   content_index=0, delta="hi", logprobs=[], sequence_number=2)
    with pytest.raises(InvalidArgumentError):  # no stream yet: the SDK object reached the stream logic
        core.encode_output(delta)


# ---------------------------------------------------------------------------------------------
# Factories, wire_item, facade


def test_factories_match_js(node):
    js = node.call("codec_encoder", "factories")
    assert ResponsesCodec.create_user_message({"role": "user", "items": []}) == js["userMessage"]
    assert ResponsesCodec.create_regenerate("t", "p") == js["regenerate"]
    assert ResponsesCodec.create_tool_result("m", {"call_id": "c", "output": "o"}) == js["toolResult"]
    assert ResponsesCodec.create_tool_result_error("m", {"call_id": "c", "message": "x"}) == js["toolResultError"]
    assert ResponsesCodec.create_tool_approval_response("m", {"call_id": "c", "approved": True}) == js[
        "toolApprovalResponse"]


def test_factory_accepts_openai_message():
    from ai_transport.codec import OpenAIMessage

    m = OpenAIMessage("user", [{"type": "message", "role": "user", "content": []}])
    assert ResponsesCodec.create_user_message(m) == {"kind": "user-message", "message": m.to_dict()}


LOGPROB = st.fixed_dictionaries({"token": st.text(max_size=3), "logprob": st.floats(allow_nan=False)})
PART = st.one_of(
    st.fixed_dictionaries({"type": st.just("output_text"), "text": st.text(max_size=3)},
                          optional={"logprobs": st.one_of(st.none(), st.lists(LOGPROB, max_size=2))}),
    st.fixed_dictionaries({"type": st.just("refusal"), "refusal": st.text(max_size=3)}),
)


@given(content=st.lists(PART, max_size=4), status=st.sampled_from(["completed", "incomplete"]))
def test_wire_item_message_invariants(content, status):
    item = {"id": "m", "type": "message", "status": status, "role": "assistant", "content": content}
    w = wire_item(item)
    has = [p["type"] == "output_text" and bool(p.get("logprobs")) for p in content]
    if any(has):
        assert len(w["content"]) == len(content)
        for p, q, h in zip(content, w["content"], has):
            assert q == ({"type": "output_text", "logprobs": p["logprobs"]} if h else {"type": p["type"]})
    else:
        assert w == {"type": "message", "id": "m", "status": status}


def fold_wire(log: list[dict]) -> dict:
    """Turn a recorded wire log into inbound messages, decode and fold them: {codec id: message}."""
    inbound, creates, versions = [], 0, 0
    for entry in log:
        msgs = entry["message"] if isinstance(entry["message"], list) else [entry["message"]]
        for m in msgs:
            if entry["op"] == "publish":
                creates += 1  # the recording writer minted s1, s2 … in publish order
                inbound.append({"action": "message.create", "serial": f"s{creates}", **m,
                                "version": {"serial": f"s{creates}"}})
            else:
                versions += 1
                action = "message.append" if entry["op"] == "append" else "message.update"
                inbound.append({"action": action, **m, "version": {"serial": f"v{versions:06d}"}})
    decoder = ResponsesCodec.create_decoder()
    state = ResponsesCodec.init()
    for msg in inbound:
        r = decoder.decode(msg)
        mid = msg["extras"]["ai"]["transport"].get("codec-message-id")
        for ev in r.inputs:
            state = ResponsesCodec.fold(state, "input", ev, mid, msg["serial"])
        for ev in r.outputs:
            state = ResponsesCodec.fold(state, "output", ev, mid, msg["serial"])
    return {m.codec_message_id: m.message for m in ResponsesCodec.get_messages(state)}


def test_responses_codec_round_trip_through_decoder_and_reducer():
    """encode (ours) -> decode -> fold -> get_messages rebuilds the streamed items."""
    evs = summary_stream("rs_1", 0) + text_stream("msg_1", 1, deltas=("Hé", "llo")) + fc_stream("fc_1", 2)
    evs.insert(0, {"type": "response.output_item.added", "output_index": 0,
                   "item": {"id": "rs_1", "type": "reasoning", "summary": []}})
    res = run_py_sync({"steps": outputs(evs, "m1") + [{"op": "input", "value": user_message("q"),
                                                       "messageId": "u1"}, {"op": "close"}]})
    msgs = fold_wire(res["log"])
    items = msgs["m1"].items
    assert [i["type"] for i in items] == ["reasoning", "message", "function_call"]
    assert items[0]["summary"][0]["text"] == "Thinking"
    assert items[1]["content"][0]["text"] == "Héllo"
    assert items[2]["arguments"] == '{"a":1}' and items[2]["call_id"] == "call_1"
    assert msgs["u1"].role == "user"
    assert msgs["u1"].items[0]["content"] == [{"text": "q", "type": "input_text"}]


@pytest.mark.parametrize("name", fixture_names())
def test_rotated_stream_folds_to_the_same_items(name):
    """A proxy's rotated ids still fold to one correct item per output item (the whole point)."""
    events = load_events(name)
    rotated = rotate_ids(events)
    straight = fold_wire(run_py_sync({"steps": outputs(events) + [{"op": "close"}]})["log"])
    rot = fold_wire(run_py_sync({"steps": outputs(rotated) + [{"op": "close"}]})["log"])
    assert straight.keys() == rot.keys()
    if "error" not in name:
        assert sum(len(m.items) for m in straight.values()) >= 1
    for mid, msg in straight.items():
        a, b = msg.items, rot[mid].items
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert {k: v for k, v in x.items() if k != "id"} == {k: v for k, v in y.items() if k != "id"}


def test_responses_codec_is_a_namespace():
    assert ResponsesCodec.adapter_tag == "openai-responses"
    with pytest.raises(TypeError):
        ResponsesCodec()


class FutureWriter(RecordingWriter):
    """append_message is a plain method returning a Future resolved later (the fast path)."""

    def append_message(self, msg):  # type: ignore[override]
        n = self._appends
        self._appends += 1
        self.log.append({"op": "append", "message": msg})
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if n in self.fail_appends:
            loop.call_soon(fut.set_exception, RuntimeError("append failed"))
        else:
            loop.call_soon(fut.set_result, "v")
        return fut


class RaisingWriter(RecordingWriter):
    """append_message raises synchronously (a sync writer bug) for the n-th call."""

    def append_message(self, msg):  # type: ignore[override]
        self.log.append({"op": "append", "message": msg})
        raise RuntimeError("sync failure")


@pytest.mark.parametrize("writer_cls", [FutureWriter, RaisingWriter])
async def test_future_and_sync_writers(writer_cls):
    writer = writer_cls(fail_appends=[1])
    enc = ResponsesCodec.create_encoder(writer)
    for e in text_stream(deltas=("a", "b", "c")):
        await enc.publish_output(e)
    await enc.close()
    updates = [x["message"] for x in writer.log if x["op"] == "update"]
    assert len(updates) == 1 and updates[0]["data"] == "abc"


async def test_cancelled_append_counts_as_failed_and_flush_does_not_hang():
    class CancellingWriter(RecordingWriter):
        async def append_message(self, msg):
            await super().append_message(msg)
            raise asyncio.CancelledError

    writer = CancellingWriter()
    enc = ResponsesCodec.create_encoder(writer)
    for e in text_stream(deltas=("a",)):
        await asyncio.wait_for(enc.publish_output(e), 5)
    await asyncio.wait_for(enc.close(), 5)
    assert [x["op"] for x in writer.log].count("update") == 1


async def test_cancel_streams_works_awaited_or_not():
    """``cancel_streams()`` cancels whether or not the caller awaits it (the issue lists it un-awaited)."""
    import asyncio

    from ai_transport.codec import ResponsesCodec

    class Log:
        def __init__(self):
            self.ops = []

        async def publish(self, msg):
            self.ops.append(("publish", msg))
            return [f"s{len(self.ops)}"]

        async def append_message(self, msg):
            self.ops.append(("append", msg))

        async def update_message(self, msg):
            self.ops.append(("update", msg))

    start = {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0,
             "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}
    delta = {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
             "content_index": 0, "delta": "Hi"}
    for awaited in (True, False):
        log = Log()
        enc = ResponsesCodec.create_encoder(log)
        await enc.publish_output(start, message_id="m1")
        await enc.publish_output(delta, message_id="m1")
        if awaited:
            await enc.cancel_streams()
        else:
            enc.cancel_streams()
            await asyncio.sleep(0.01)
        statuses = [op[1]["extras"]["ai"]["transport"]["status"] for op in log.ops if op[0] == "append"]
        assert statuses == ["streaming", "cancelled"], (awaited, statuses)
        await enc.close()
