"""Hand-written encoder cases covering every row of reference §2-4 (shared by the encoder tests).

Each case is the argument object of tests/js/handlers/codec_encoder.mjs ``run``:
``{"options": {...}, "steps": [...], "writer": {...}}``.
"""

from __future__ import annotations

from typing import Any

MID = "msg-1"


def out(event: dict, message_id: str | None = MID, **kw: Any) -> dict:
    return {"op": "output", "value": event, "messageId": message_id, **kw}


def inp(value: Any, message_id: str | None = MID, **kw: Any) -> dict:
    return {"op": "input", "value": value, "messageId": message_id, **kw}


CLOSE = {"op": "close"}
CANCEL = {"op": "cancel"}


def message_item(item_id: str = "msg_1", status: str = "in_progress", content: list | None = None) -> dict:
    return {"id": item_id, "type": "message", "status": status, "content": content or [], "role": "assistant"}


def text_stream(
    item_id: str = "msg_1",
    out_idx: int = 0,
    content_index: int = 0,
    deltas: tuple[str, ...] = ("Hel", "lo"),
    part_type: str = "output_text",
    with_item: bool = True,
) -> list[dict]:
    """output_item.added (message) -> content part of ``part_type`` -> deltas -> done."""
    delta_type = {"output_text": "response.output_text.delta", "refusal": "response.refusal.delta",
                  "reasoning_text": "response.reasoning_text.delta"}[part_type]
    done_type = delta_type.replace(".delta", ".done")
    text = "".join(deltas)
    part: dict[str, Any] = {"type": part_type}
    if part_type == "output_text":
        part.update({"annotations": [], "logprobs": [], "text": ""})
    elif part_type == "refusal":
        part["refusal"] = ""
    else:
        part["text"] = ""
    evs: list[dict] = []
    if with_item:
        evs.append({"type": "response.output_item.added", "output_index": out_idx,
                    "item": message_item(item_id), "sequence_number": 1})
    evs.append({"type": "response.content_part.added", "item_id": item_id, "output_index": out_idx,
                "content_index": content_index, "part": part, "sequence_number": 2})
    for d in deltas:
        evs.append({"type": delta_type, "item_id": item_id, "output_index": out_idx,
                    "content_index": content_index, "delta": d, "sequence_number": 3})
    done: dict[str, Any] = {"type": done_type, "item_id": item_id, "output_index": out_idx,
                            "content_index": content_index, "sequence_number": 4}
    done["refusal" if part_type == "refusal" else "text"] = text
    evs.append(done)
    evs.append({"type": "response.content_part.done", "item_id": item_id, "output_index": out_idx,
                "content_index": content_index, "part": {**part}, "sequence_number": 5})
    return evs


def summary_stream(item_id: str = "rs_1", out_idx: int = 0, summary_index: int = 0,
                   deltas: tuple[str, ...] = ("Think", "ing")) -> list[dict]:
    evs = [{"type": "response.reasoning_summary_part.added", "item_id": item_id, "output_index": out_idx,
            "summary_index": summary_index, "part": {"type": "summary_text", "text": ""}, "sequence_number": 1}]
    for d in deltas:
        evs.append({"type": "response.reasoning_summary_text.delta", "item_id": item_id,
                    "output_index": out_idx, "summary_index": summary_index, "delta": d,
                    "obfuscation": "xx", "sequence_number": 2})
    evs.append({"type": "response.reasoning_summary_text.done", "item_id": item_id, "output_index": out_idx,
                "summary_index": summary_index, "text": "".join(deltas), "sequence_number": 3})
    evs.append({"type": "response.reasoning_summary_part.done", "item_id": item_id, "output_index": out_idx,
                "summary_index": summary_index, "part": {"type": "summary_text", "text": "".join(deltas)},
                "sequence_number": 4})
    return evs


def fc_stream(item_id: str = "fc_1", out_idx: int = 1, call_id: str = "call_1", name: str = "lookup",
              deltas: tuple[str, ...] = ('{"a":', "1}")) -> list[dict]:
    item = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
            "call_id": call_id, "name": name}
    args = "".join(deltas)
    evs = [{"type": "response.output_item.added", "output_index": out_idx, "item": item, "sequence_number": 1}]
    for d in deltas:
        evs.append({"type": "response.function_call_arguments.delta", "item_id": item_id,
                    "output_index": out_idx, "delta": d, "sequence_number": 2})
    evs.append({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": out_idx,
                "arguments": args, "name": name, "sequence_number": 3})
    evs.append({"type": "response.output_item.done", "output_index": out_idx,
                "item": {**item, "status": "completed", "arguments": args}, "sequence_number": 4})
    return evs


def user_message(*texts: str, role: str = "user") -> dict:
    return {"kind": "user-message", "message": {"role": role, "items": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t} for t in texts]}]}}


DROPPED = [
    {"type": "response.created", "response": {"id": "r"}, "sequence_number": 0},
    {"type": "response.in_progress", "response": {"id": "r"}, "sequence_number": 1},
    {"type": "response.queued", "response": {"id": "r"}, "sequence_number": 1},
    {"type": "response.completed", "response": {"id": "r"}, "sequence_number": 9},
    {"type": "response.incomplete", "response": {"id": "r"}, "sequence_number": 9},
    {"type": "response.failed", "response": {"id": "r"}, "sequence_number": 9},
    {"type": "error", "code": "x", "message": "boom", "param": None, "sequence_number": 2},
    {"type": "response.content_part.done", "item_id": "m", "output_index": 0, "content_index": 0,
     "part": {"type": "output_text", "text": "x"}},
    {"type": "response.reasoning_summary_part.done", "item_id": "r", "output_index": 0, "summary_index": 0,
     "part": {"type": "summary_text", "text": "x"}},
]

REJECTED_TYPES = [
    "response.output_text.annotation.added",
    "response.audio.delta", "response.audio.done", "response.audio.transcript.delta",
    "response.audio.transcript.done",
    "response.web_search_call.in_progress", "response.web_search_call.searching",
    "response.web_search_call.completed",
    "response.file_search_call.in_progress", "response.file_search_call.searching",
    "response.file_search_call.completed",
    "response.code_interpreter_call.in_progress", "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call.completed", "response.code_interpreter_call_code.delta",
    "response.code_interpreter_call_code.done",
    "response.image_generation_call.in_progress", "response.image_generation_call.generating",
    "response.image_generation_call.partial_image", "response.image_generation_call.completed",
    "response.mcp_call.in_progress", "response.mcp_call.completed", "response.mcp_call.failed",
    "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
    "response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed",
    "response.mcp_list_tools.failed",
    "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done",
    "something.else", "",
]


def _logprob(token: str, lp: float) -> dict:
    return {"token": token, "logprob": lp, "bytes": list(token.encode()), "top_logprobs": []}


def cases() -> dict[str, dict]:
    c: dict[str, dict] = {}
    # --- streamed groups -------------------------------------------------------------------------
    for pt in ("output_text", "refusal", "reasoning_text"):
        c[f"stream-{pt}"] = {"steps": [out(e) for e in text_stream(part_type=pt)]}
    c["stream-reasoning_summary_text"] = {"steps": [out(e) for e in summary_stream()]}
    c["stream-function_call_arguments"] = {"steps": [out(e) for e in fc_stream()]}
    c["stream-two-parts-and-summaries"] = {"steps": [out(e) for e in (
        summary_stream("rs_1", 0, 0) + summary_stream("rs_1", 0, 1, ("más", " 💡"))
        + text_stream("msg_1", 1, 0) + text_stream("msg_1", 1, 1, ("x",), with_item=False)
    )] + [CLOSE]}
    c["stream-empty-deltas"] = {"steps": [out(e) for e in text_stream(deltas=())]}
    interleaved = text_stream("msg_a", 0)
    other = fc_stream("fc_b", 1)
    c["stream-interleaved"] = {"steps": [out(e) for e in [
        interleaved[0], interleaved[1], other[0], interleaved[2], other[1], interleaved[3], other[2],
        interleaved[4], other[3], other[4], interleaved[5]]]}
    c["stream-no-message-id"] = {"steps": [out(e, None) for e in text_stream()]}
    c["stream-delta-after-close"] = {"steps": [out(e) for e in text_stream()] + [
        out({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
             "content_index": 0, "delta": "late"}),
        out({"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0,
             "content_index": 0, "text": "late"})]}
    c["stream-restart-same-id"] = {"steps": [out(e) for e in text_stream() + text_stream(deltas=("again",))]}
    c["stream-done-overlays-fields"] = {"steps": [out(e) for e in text_stream()[:3]] + [
        out({"type": "response.output_text.done", "item_id": "msg_1", "output_index": 7,
             "content_index": 0, "text": "Hel", "logprobs": []})]}
    c["fc-no-id"] = {"steps": [out({"type": "response.output_item.added", "output_index": 0,
                                    "item": {"type": "function_call", "call_id": "c", "name": "n",
                                             "arguments": ""}})]}
    c["delta-unknown-stream"] = {"steps": [out({"type": "response.output_text.delta", "item_id": "nope",
                                                "output_index": 0, "content_index": 3, "delta": "x"})]}
    c["done-unknown-stream"] = {"steps": [out({"type": "response.refusal.done", "item_id": "nope",
                                               "output_index": 0, "content_index": 0, "refusal": "x"})]}
    c["summary-delta-unknown-stream"] = {"steps": [out({"type": "response.reasoning_summary_text.delta",
                                                        "item_id": "rs", "output_index": 0, "summary_index": 2,
                                                        "delta": "x"})]}
    c["fc-delta-unknown-stream"] = {"steps": [out({"type": "response.function_call_arguments.done",
                                                   "item_id": "fc_x", "output_index": 0, "arguments": "{}"})]}
    # --- discrete kinds --------------------------------------------------------------------------
    c["added-message"] = {"steps": [out({"type": "response.output_item.added", "output_index": 0,
                                         "item": message_item(), "sequence_number": 2})]}
    c["added-reasoning"] = {"steps": [out({"type": "response.output_item.added", "output_index": 0,
                                           "item": {"id": "rs_1", "type": "reasoning", "summary": [],
                                                    "encrypted_content": "gAAA"}})]}
    c["added-unsupported-item"] = {"steps": [out({"type": "response.output_item.added", "output_index": 0,
                                                  "item": {"id": "ws_1", "type": "web_search_call",
                                                           "status": "in_progress"}})]}
    c["done-message-lean"] = {"steps": [out({"type": "response.output_item.done", "output_index": 0,
                                             "item": message_item(status="completed", content=[
                                                 {"type": "output_text", "text": "hi", "annotations": [],
                                                  "logprobs": []}])})]}
    c["done-message-logprobs"] = {"steps": [out({"type": "response.output_item.done", "output_index": 0,
                                                 "item": message_item(status="completed", content=[
                                                     {"type": "output_text", "text": "hi", "annotations": [],
                                                      "logprobs": [_logprob("hi", -0.0001234),
                                                                   _logprob("é", -1e-7)]},
                                                     {"type": "refusal", "refusal": "no"},
                                                     {"type": "output_text", "text": "x", "annotations": []},
                                                 ])})]}
    c["done-message-no-content"] = {"steps": [out({"type": "response.output_item.done", "output_index": 0,
                                                   "item": {"type": "message", "id": "m"}})]}
    c["done-reasoning"] = {"steps": [out({"type": "response.output_item.done", "output_index": 0,
                                          "item": {"id": "rs_1", "type": "reasoning", "summary": [
                                              {"type": "summary_text", "text": "s"}],
                                                   "encrypted_content": "gBBB", "status": "completed"}})]}
    c["done-reasoning-null-encrypted"] = {"steps": [out({"type": "response.output_item.done",
                                                         "output_index": 0,
                                                         "item": {"id": "rs_1", "type": "reasoning",
                                                                  "summary": [], "encrypted_content": None}})]}
    c["done-function-call"] = {"steps": [out(fc_stream()[-1])]}
    c["done-unsupported-item"] = {"steps": [out({"type": "response.output_item.done", "output_index": 0,
                                                 "item": {"id": "mcp_1", "type": "mcp_call"}})]}
    c["function_call_output"] = {"steps": [out({"type": "function_call_output", "item": {
        "type": "function_call_output", "call_id": "call_1", "output": "{\"ok\":true}"}})]}
    c["function_call_output-no-item"] = {"steps": [out({"type": "function_call_output"})]}
    c["tool-approval-request"] = {"steps": [out({"type": "tool-approval-request", "call_id": "call_1",
                                                 "name": "delete", "arguments": "{\"id\":3}"})]}
    c["tool-approval-request-bare"] = {"steps": [out({"type": "tool-approval-request"})]}
    c["content-part-unknown-type"] = {"steps": [out({"type": "response.content_part.added", "item_id": "m",
                                                     "output_index": 0, "content_index": 0,
                                                     "part": {"type": "output_audio"}})]}
    c["no-type"] = {"steps": [out({"delta": "x"})]}
    for _i, ev in enumerate(DROPPED):
        c[f"dropped-{ev['type']}"] = {"steps": [out(ev)]}
    for t in REJECTED_TYPES:
        c[f"rejected-{t or 'empty'}"] = {"steps": [out({"type": t, "item_id": "x", "output_index": 0})]}
    # --- inputs ----------------------------------------------------------------------------------
    c["input-user-one"] = {"steps": [inp(user_message("hello"))]}
    c["input-user-multi"] = {"steps": [inp(user_message("a", "bé", "🙂"))]}
    c["input-user-empty"] = {"steps": [inp(user_message())]}
    c["input-user-assistant-role"] = {"steps": [inp(user_message("x", role="assistant"))]}
    c["input-user-no-role"] = {"steps": [inp({"kind": "user-message", "message": {"items": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}]}})]}
    c["input-user-missing-text"] = {"steps": [inp({"kind": "user-message", "message": {"role": "user", "items": [
        {"type": "message", "role": "user", "content": [{"type": "input_text"}]}]}})]}
    c["input-user-two-items"] = {"steps": [inp({"kind": "user-message", "message": {"role": "user", "items": [
        user_message("a")["message"]["items"][0], user_message("b")["message"]["items"][0]]}})]}
    c["input-user-zero-items"] = {"steps": [inp({"kind": "user-message", "message": {"role": "user",
                                                                                   "items": []}})]}
    c["input-user-not-message"] = {"steps": [inp({"kind": "user-message", "message": {"role": "user", "items": [
        {"type": "function_call_output", "call_id": "c", "output": "x"}]}})]}
    c["input-user-image"] = {"steps": [inp({"kind": "user-message", "message": {"role": "user", "items": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"},
                                                          {"type": "input_image", "image_url": "u"}]}]}})]}
    c["input-tool-result"] = {"steps": [inp({"kind": "tool-result", "codecMessageId": "m0",
                                             "payload": {"call_id": "call_1", "output": "42"}})]}
    c["input-tool-result-object"] = {"steps": [inp({"kind": "tool-result", "codecMessageId": "m0",
                                                    "payload": {"call_id": "call_1",
                                                                "output": [{"type": "input_text", "text": "t"}]}})]}
    c["input-tool-result-null"] = {"steps": [inp({"kind": "tool-result", "payload": {"call_id": "c",
                                                                                    "output": None}})]}
    c["input-tool-result-missing"] = {"steps": [inp({"kind": "tool-result", "payload": {}})]}
    c["input-tool-result-no-payload"] = {"steps": [inp({"kind": "tool-result", "codecMessageId": "m0"})]}
    c["input-tool-result-error"] = {"steps": [inp({"kind": "tool-result-error", "codecMessageId": "m0",
                                                   "payload": {"call_id": "call_1", "message": "boom"}})]}
    c["input-tool-approval-yes"] = {"steps": [inp({"kind": "tool-approval-response", "codecMessageId": "m0",
                                                   "payload": {"call_id": "call_1", "approved": True}})]}
    c["input-tool-approval-no-reason"] = {"steps": [inp({"kind": "tool-approval-response",
                                                         "codecMessageId": "m0",
                                                         "payload": {"call_id": "call_1", "approved": False,
                                                                     "reason": "too risky"}})]}
    c["input-tool-approval-no-payload"] = {"steps": [inp({"kind": "tool-approval-response"})]}
    c["input-regenerate"] = {"steps": [inp({"kind": "regenerate", "target": "a1", "parent": "u1"})]}
    c["input-regenerate-no-id"] = {"steps": [inp({"kind": "regenerate", "target": "a1", "parent": "u1"}, None)]}
    c["input-unknown-kind"] = {"steps": [inp({"kind": "shout"})]}
    c["input-no-kind"] = {"steps": [inp({"payload": {}})]}
    # --- extras.headers ----------------------------------------------------------------------------
    ex = {"options": {"extras": {"headers": {"run-id": "run-1", "stream": "spoof", "x-a": "A"}}}}
    c["extras-default"] = {**ex, "steps": [out(e) for e in text_stream() + fc_stream()] + [
        inp(user_message("a", "b")), inp({"kind": "regenerate"}), CLOSE]}
    c["extras-per-write"] = {**ex, "steps": [
        out(e, extras={"headers": {"x-a": "per-write", "x-b": "B"}}) for e in text_stream()] + [
        inp(user_message("a"), extras={"headers": {"role": "spoof", "x-b": "B"}}),
        out({"type": "function_call_output", "item": {"call_id": "c"}},
            extras={"headers": {"codec-message-id": "over", "x-a": "w"}})]}
    c["extras-cancel"] = {**ex, "steps": [out(e, extras={"headers": {"x-a": "per-write"}})
                                          for e in text_stream()[:3]] + [CANCEL]}
    # --- cancel ------------------------------------------------------------------------------------
    ts, fs = text_stream(), fc_stream()
    c["cancel-open-streams"] = {"steps": [out(e) for e in ts[:3] + fs[:2] + summary_stream("rs_1", 2)[:2]] + [
        CANCEL, CANCEL, out(ts[3]), CANCEL]}
    c["cancel-skips-completed"] = {"steps": [out(e) for e in ts + fs[:2]] + [CANCEL, CANCEL, CLOSE]}
    c["cancel-nothing-open"] = {"steps": [CANCEL, CLOSE, CANCEL]}
    # --- errors / lifecycle ------------------------------------------------------------------------
    c["closed-encoder"] = {"steps": [out(e) for e in ts[:3]] + [CLOSE, CLOSE, out(ts[3]), out(ts[4]),
        out(DROPPED[0]), out({"type": "response.web_search_call.searching"}),
        out({"type": "response.output_item.added", "output_index": 0, "item": {"type": "mcp_call"}}),
        out({"type": "response.output_item.added", "output_index": 0, "item": message_item()}),
        out(fs[0]), out({"type": "response.output_item.added", "output_index": 0,
                         "item": {"type": "function_call"}}),
        inp(user_message("x")), inp({"kind": "nope"}), inp({"kind": "tool-result"}),
        inp({"kind": "user-message", "message": {"role": "user", "items": []}}), CANCEL]}
    c["no-serial"] = {"writer": {"noSerial": True}, "steps": [out(e) for e in ts]}
    c["publish-fails"] = {"writer": {"failPublish": [1]}, "steps": [out(e) for e in ts]}
    # --- recovery ----------------------------------------------------------------------------------
    long_text = text_stream(deltas=("a", "b", "c", "d"))
    c["recover-one-append"] = {"writer": {"failAppends": [1]}, "steps": [out(e) for e in long_text] + [CLOSE]}
    c["recover-many-appends"] = {"writer": {"failAppends": [0, 2, 4]},
                                 "steps": [out(e) for e in long_text] + [CLOSE]}
    c["recover-closing-append"] = {"writer": {"failAppends": [4]}, "steps": [out(e) for e in long_text]}
    c["recover-fails"] = {"writer": {"failAppends": [1], "failUpdates": True},
                          "steps": [out(e) for e in long_text] + [CLOSE]}
    c["recover-other-stream-on-close"] = {"writer": {"failAppends": [0]}, "steps": [
        out(e) for e in fc_stream()[:2] + text_stream()] + [CLOSE]}
    c["recover-cancelled"] = {"writer": {"failAppends": [1]}, "steps": [out(e) for e in long_text[:4]] + [
        CANCEL, CLOSE]}
    c["recover-cancel-append-fails"] = {"writer": {"failAppends": [2], "failUpdates": True},
                                        "steps": [out(e) for e in long_text[:4]] + [CANCEL, CLOSE]}
    c["recover-on-close-only"] = {"writer": {"failAppends": [0]}, "steps": [out(e) for e in long_text[:3]] + [
        CLOSE]}
    c["recover-on-close-fails"] = {"writer": {"failAppends": [0], "failUpdates": True},
                                   "steps": [out(e) for e in long_text[:3]] + [CLOSE, CLOSE]}
    return c
