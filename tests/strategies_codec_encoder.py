"""Hypothesis strategies for the encoder tests: well-formed Responses event streams."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
IDS = st.from_regex(r"[a-z]{2,4}_[0-9a-f]{1,6}", fullmatch=True)


def header_maps() -> st.SearchStrategy[dict[str, str]]:
    # Integer-like keys are excluded: JS orders them first in objects, a JSON-level artefact.
    keys = st.one_of(
        st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True),
        st.sampled_from(["stream", "status", "stream-id", "codec-message-id", "role", "run-id", "discrete"]),
    )
    return st.dictionaries(keys, TEXT, max_size=3)


@st.composite
def logprobs(draw: Any) -> list[dict]:
    return [
        {"token": t, "logprob": draw(FLOATS), "bytes": list(t.encode("utf-8")),
         "top_logprobs": [{"token": t, "logprob": draw(FLOATS), "bytes": []}] if draw(st.booleans()) else []}
        for t in draw(st.lists(TEXT, max_size=2))
    ]


@st.composite
def content_part(draw: Any, item_id: str, out_idx: int, ci: int, ptype: str) -> tuple[list[dict], dict]:
    deltas = draw(st.lists(TEXT, max_size=4))
    text = "".join(deltas)
    if ptype == "output_text":
        lp = draw(logprobs()) if draw(st.booleans()) else []
        part = {"type": "output_text", "annotations": [], "logprobs": lp, "text": ""}
        final = {"type": "output_text", "annotations": [], "logprobs": draw(logprobs()), "text": text}
        dt = "response.output_text.delta"
    elif ptype == "refusal":
        part = {"type": "refusal", "refusal": ""}
        final = {"type": "refusal", "refusal": text}
        dt = "response.refusal.delta"
    else:
        part = {"type": "reasoning_text", "text": ""}
        final = {"type": "reasoning_text", "text": text}
        dt = "response.reasoning_text.delta"
    base = {"item_id": item_id, "output_index": out_idx, "content_index": ci}
    evs = [{"type": "response.content_part.added", **base, "part": part}]
    for d in deltas:
        ev = {"type": dt, **base, "delta": d}
        if ptype == "output_text" and draw(st.booleans()):
            ev["logprobs"] = draw(logprobs())
        evs.append(ev)
    done = {"type": dt.replace(".delta", ".done"), **base, ("refusal" if ptype == "refusal" else "text"): text}
    evs.append(done)
    evs.append({"type": "response.content_part.done", **base, "part": final})
    return evs, final


@st.composite
def message_item(draw: Any, item_id: str, out_idx: int) -> list[dict]:
    item = {"id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
    evs = [{"type": "response.output_item.added", "output_index": out_idx, "item": item}]
    finals = []
    for ci, ptype in enumerate(draw(st.lists(st.sampled_from(["output_text", "refusal"]), max_size=3))):
        part_evs, final = draw(content_part(item_id, out_idx, ci, ptype))
        evs += part_evs
        finals.append(final)
    evs.append({"type": "response.output_item.done", "output_index": out_idx,
                "item": {**item, "status": "completed", "content": finals}})
    return evs


@st.composite
def reasoning_item(draw: Any, item_id: str, out_idx: int) -> list[dict]:
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
    if draw(st.booleans()):
        item["encrypted_content"] = draw(TEXT)
    evs = [{"type": "response.output_item.added", "output_index": out_idx, "item": item}]
    summaries = []
    for si in range(draw(st.integers(0, 2))):
        deltas = draw(st.lists(TEXT, max_size=3))
        base = {"item_id": item_id, "output_index": out_idx, "summary_index": si}
        evs.append({"type": "response.reasoning_summary_part.added", **base,
                    "part": {"type": "summary_text", "text": ""}})
        evs += [{"type": "response.reasoning_summary_text.delta", **base, "delta": d} for d in deltas]
        evs.append({"type": "response.reasoning_summary_text.done", **base, "text": "".join(deltas)})
        evs.append({"type": "response.reasoning_summary_part.done", **base,
                    "part": {"type": "summary_text", "text": "".join(deltas)}})
        summaries.append({"type": "summary_text", "text": "".join(deltas)})
    for ci in range(draw(st.integers(0, 1))):
        part_evs, _ = draw(content_part(item_id, out_idx, ci, "reasoning_text"))
        evs += part_evs
    done = {**item, "summary": summaries}
    if draw(st.booleans()):
        done["encrypted_content"] = draw(st.one_of(TEXT, st.none()))
    evs.append({"type": "response.output_item.done", "output_index": out_idx, "item": done})
    return evs


@st.composite
def function_call_item(draw: Any, item_id: str, out_idx: int) -> list[dict]:
    name = draw(TEXT)
    item = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
            "call_id": "call_" + item_id, "name": name}
    deltas = draw(st.lists(TEXT, max_size=4))
    evs = [{"type": "response.output_item.added", "output_index": out_idx, "item": item}]
    evs += [{"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": out_idx,
             "delta": d} for d in deltas]
    evs.append({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": out_idx,
                "arguments": "".join(deltas), "name": name})
    evs.append({"type": "response.output_item.done", "output_index": out_idx,
                "item": {**item, "status": "completed", "arguments": "".join(deltas)}})
    return evs


@st.composite
def response_events(draw: Any, interleave: bool = True) -> list[dict]:
    """One response: several items at distinct output indices, optionally interleaved."""
    kinds = draw(st.lists(st.sampled_from(["message", "reasoning", "function_call"]), min_size=1, max_size=4))
    ids = draw(st.lists(IDS, min_size=len(kinds), max_size=len(kinds), unique=True))
    per_item = []
    for out_idx, (kind, item_id) in enumerate(zip(kinds, ids)):
        strat = {"message": message_item, "reasoning": reasoning_item, "function_call": function_call_item}[kind]
        per_item.append(draw(strat(item_id, out_idx)))
    if interleave and draw(st.booleans()):
        order = draw(st.permutations([i for i, evs in enumerate(per_item) for _ in evs]))
        cursors = [0] * len(per_item)
        events = []
        for i in order:
            events.append(per_item[i][cursors[i]])
            cursors[i] += 1
    else:
        events = [e for evs in per_item for e in evs]
    out = []
    if draw(st.booleans()):
        out.append({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}})
    out += events
    if draw(st.booleans()):
        out.append({"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}})
    with_seq = draw(st.booleans())
    if with_seq:
        for seq, ev in enumerate(out):
            ev["sequence_number"] = seq
    return out


@st.composite
def event_streams(draw: Any) -> tuple[list[dict], int | None]:
    """(events of 1-2 responses back to back, an optional step index to insert a cancel at)."""
    events = draw(response_events())
    if draw(st.booleans()):
        # A second response with fresh ids: output indices restart at 0.
        second = draw(response_events())
        first_ids = {e.get("item_id") or (e.get("item") or {}).get("id") for e in events}
        second_ids = {e.get("item_id") or (e.get("item") or {}).get("id") for e in second}
        if not (first_ids & second_ids - {None}):
            events = events + second
    cancel_at = draw(st.one_of(st.none(), st.integers(0, len(events))))
    return events, cancel_at


JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), FLOATS, TEXT)
JSON = st.recursive(
    JSON_LEAF,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3),
        st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), kids, max_size=3),
    ),
    max_leaves=8,
)


@st.composite
def inputs(draw: Any) -> dict:
    """Any well-formed codec input (every kind), with random text and JSON payloads."""
    kind = draw(st.sampled_from(
        ["user-message", "regenerate", "tool-result", "tool-result-error", "tool-approval-response"]))
    call_id = draw(st.one_of(TEXT, st.none()))
    if kind == "user-message":
        texts = draw(st.lists(TEXT, max_size=4))
        return {"kind": kind, "message": {"role": draw(st.sampled_from(["user", "assistant"])), "items": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t} for t in texts]}]}}
    if kind == "regenerate":
        return {"kind": kind, "target": draw(TEXT), "parent": draw(TEXT)}
    payload: dict[str, Any] = {"call_id": call_id} if call_id is not None else {}
    if kind == "tool-result":
        payload["output"] = draw(JSON)
    elif kind == "tool-result-error":
        payload["message"] = draw(TEXT)
    else:
        payload["approved"] = draw(st.booleans())
        reason = draw(st.one_of(st.none(), TEXT))
        if reason is not None:
            payload["reason"] = reason
    return {"kind": kind, "codecMessageId": draw(TEXT), "payload": payload}
