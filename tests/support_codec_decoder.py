"""Shared helpers for the decoder / reducer tests: wire builders, wire views, and fold drivers."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from ai_transport.codec import reducer
from ai_transport.codec.decoder import Decoder

# ---------------------------------------------------------------------------------------------
# Raw header values


def raw_header_values(usual: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """A header tier's raw value as a member may send it: mostly ``usual`` (the encoder's own), else
    absent, not a string, not valid JSON, JSON of another type or past a float's / an int's range."""
    return st.one_of(
        usual,
        usual,
        st.none(),
        st.integers(-2, 3),
        st.booleans(),
        st.text(max_size=3),
        st.sampled_from(["0", "1", "64", "07", "-0", "null", "[1]", "{}", "x", '"s"', "1e400", "9007199254740993"]),
    )


# ---------------------------------------------------------------------------------------------
# Building inbound messages by hand


def extras(transport: dict[str, str] | None = None, codec: dict[str, str] | None = None) -> dict[str, Any]:
    ai: dict[str, Any] = {"transport": dict(transport or {})}
    if codec:
        ai["codec"] = dict(codec)
    return {"ai": ai}


def create(
    serial: str, name: str | None, data: Any, transport: dict, codec: dict | None = None, **kw: Any
) -> dict:
    msg: dict[str, Any] = {"action": "message.create", "serial": serial, "version": {"serial": serial}}
    if name is not None:
        msg["name"] = name
    if data is not _NO_DATA:
        msg["data"] = data
    msg["extras"] = extras(transport, codec)
    msg.update(kw)
    return msg


def append(serial: str, version: str, data: Any, transport: dict, codec: dict | None = None) -> dict:
    return {
        "action": "message.append",
        "serial": serial,
        "version": {"serial": version},
        "data": data,
        "extras": extras(transport, codec),
    }


def update(
    serial: str, version: str, name: str | None, data: Any, transport: dict, codec: dict | None = None
) -> dict:
    msg: dict[str, Any] = {"action": "message.update", "serial": serial, "version": {"serial": version}}
    if name is not None:
        msg["name"] = name
    msg["data"] = data
    msg["extras"] = extras(transport, codec)
    return msg


def delete(serial: str, version: str) -> dict:
    return {"action": "message.delete", "serial": serial, "version": {"serial": version}, "data": ""}


class _NoData:
    pass


_NO_DATA: Any = _NoData()
NO_DATA = _NO_DATA


def stream_transport(stream_id: str, mid: str = "m1", status: str = "streaming", **more: str) -> dict:
    return {"stream": "true", "status": status, "stream-id": stream_id, "codec-message-id": mid, **more}


def discrete_transport(mid: str | None = "m1", **more: str) -> dict:
    t = {"stream": "false", **more}
    if mid is not None:
        t["codec-message-id"] = mid
    return t


def text_codec(
    item_id: str = "msg_1", content_index: int = 0, output_index: int = 0, kind: str = "output_text"
) -> dict:
    part_type = {"output_text": "output_text", "refusal": "refusal", "reasoning_text": "reasoning_text"}[kind]
    part: dict[str, Any] = {"type": part_type}
    if part_type == "refusal":
        part["refusal"] = ""
    else:
        part["text"] = ""
    if part_type == "output_text":
        part["annotations"] = []
    return {
        "kind": kind,
        "item_id": item_id,
        "output_index": json.dumps(output_index),
        "content_index": json.dumps(content_index),
        "part": json.dumps(part, separators=(",", ":")),
    }


def summary_codec(item_id: str = "rs_1", summary_index: int = 0, output_index: int = 0) -> dict:
    return {
        "kind": "reasoning_summary_text",
        "item_id": item_id,
        "output_index": json.dumps(output_index),
        "summary_index": json.dumps(summary_index),
        "part": '{"type":"summary_text","text":""}',
    }


def fn_codec(
    item_id: str = "fc_1", call_id: str = "call_1", name: str = "get_weather", output_index: int = 0
) -> dict:
    item = {
        "id": item_id,
        "type": "function_call",
        "status": "in_progress",
        "arguments": "",
        "call_id": call_id,
        "name": name,
    }
    return {
        "kind": "function_call_arguments",
        "item": json.dumps(item, separators=(",", ":")),
        "output_index": json.dumps(output_index),
    }


# ---------------------------------------------------------------------------------------------
# Decoding + folding in Python (the same driver the JS handler uses)


def message_id_of(msg: Any) -> Any:
    try:
        t = msg["extras"]["ai"]["transport"]
        v = t.get("codec-message-id") if isinstance(t, dict) else None
    except (KeyError, TypeError):
        return None
    return v


def decode_fold(wire: Iterable[Any], fold: bool = True) -> dict[str, Any]:
    """Python counterpart of the ``decodeFold`` handler: per-message decode results + getMessages."""
    decoder = Decoder()
    state = reducer.init()
    decoded = []
    for raw in wire:
        result = decoder.decode(raw)
        decoded.append(result.to_dict())
        if not fold:
            continue
        mid = message_id_of(raw)
        serial = raw.get("serial", "") if isinstance(raw, dict) else ""
        for ev in result.inputs:
            reducer.fold(state, "input", ev, mid, serial)
        for ev in result.outputs:
            reducer.fold(state, "output", ev, mid, serial)
    return {"decoded": decoded, "messages": [m.to_dict() for m in reducer.get_messages(state)]}


def messages_of(wire: Iterable[Any]) -> list[dict[str, Any]]:
    return decode_fold(wire)["messages"]


def js_json(value: Any) -> Any:
    """``JSON.parse(JSON.stringify(value))`` as Python sees it (drops nothing here; normalises tuples)."""
    return json.loads(json.dumps(value))


def assert_matches_js(py: dict[str, Any], js: dict[str, Any], wire: list[Any] | None = None) -> None:
    """Per-message decode results and the final messages equal the reference's."""
    assert len(py["decoded"]) == len(js["decoded"])
    for i, (p, j) in enumerate(zip(py["decoded"], js["decoded"])):
        ctx = f"message {i}: {json.dumps(wire[i])[:400] if wire else ''}"
        if "error" in j:
            # The reference throws on this message; we skip it (empty result) and carry on.
            assert p == {"inputs": [], "outputs": []}, ctx
        else:
            assert js_json(p) == j, ctx
    if js.get("foldError") is None and js.get("getMessagesError") is None:
        assert js_json(py["messages"]) == js["messages"]


# ---------------------------------------------------------------------------------------------
# Wire views: what a subscriber sees live, from history, or joining late


def _aggregate(ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The message at ``ops[0]["serial"]`` after ``ops`` (its create then appends / updates)."""
    first = ops[0]
    if len(ops) == 1 and first["action"] == "message.create":
        return copy.deepcopy(first)
    agg: dict[str, Any] = {"action": "message.update", "serial": first["serial"]}
    if "name" in first:
        agg["name"] = first["name"]
    data = first.get("data", "")
    ext = first.get("extras")
    version = first["version"]["serial"]
    deleted = False
    for op in ops[1:]:
        version = op["version"]["serial"]
        if op["action"] == "message.append":
            data = (data if isinstance(data, str) else "") + (
                op.get("data") if isinstance(op.get("data"), str) else ""
            )
            ext = op.get("extras", ext)
        elif op["action"] == "message.update":
            data = op.get("data")
            ext = op.get("extras", ext)
        elif op["action"] == "message.delete":
            deleted = True
    if deleted:
        return {
            "action": "message.delete",
            "serial": first["serial"],
            "version": {"serial": version},
            "data": "",
        }
    agg["version"] = {"serial": version}
    agg["data"] = data
    if ext is not None:
        agg["extras"] = copy.deepcopy(ext)
    return agg


def history_view(wire: list[dict[str, Any]], upto: int | None = None) -> list[dict[str, Any]]:
    """Every message of ``wire[:upto]`` once, as its aggregate (oldest first), as history gives it."""
    ops_by_serial: dict[str, list[dict[str, Any]]] = {}
    for op in wire[:upto]:
        ops_by_serial.setdefault(op["serial"], []).append(op)
    return [_aggregate(ops) for ops in ops_by_serial.values()]


def late_join(wire: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """A subscriber that first sees the aggregate of everything before ``k``, then ``wire[k:]`` live."""
    return history_view(wire, k) + copy.deepcopy(wire[k:])


# ---------------------------------------------------------------------------------------------
# Recorded streams


def split_responses(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split a recorded stream into responses (each starts at ``response.created``)."""
    out: list[list[dict[str, Any]]] = []
    for ev in events:
        if ev.get("type") == "response.created" or not out:
            out.append([])
        out[-1].append(ev)
    return out


def recorded_runs(fixtures_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """``{file stem: [{messageId, events}]}`` — one run (pipe) per recorded response."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((fixtures_dir / "vercel-ai").glob("*.chunks.txt")):
        events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        stem = path.name.removesuffix(".chunks.txt")
        runs[stem] = [
            {"messageId": f"{stem}-r{i}", "events": resp} for i, resp in enumerate(split_responses(events))
        ]
    return runs


def fold_events(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Python counterpart of the ``foldEvents`` handler: ``[{direction, event, messageId?}]`` -> messages."""
    state = reducer.init()
    for e in events:
        reducer.fold(state, e["direction"], e["event"], e.get("messageId"))
    return [m.to_dict() for m in reducer.get_messages(state)]


def out(event: dict[str, Any], mid: str | None = "m1") -> dict[str, Any]:
    """An output fold step."""
    d: dict[str, Any] = {"direction": "output", "event": event}
    if mid is not None:
        d["messageId"] = mid
    return d


def inp(event: dict[str, Any], mid: str | None = "m1") -> dict[str, Any]:
    """An input fold step."""
    d: dict[str, Any] = {"direction": "input", "event": event}
    if mid is not None:
        d["messageId"] = mid
    return d


# ---------------------------------------------------------------------------------------------
# Hypothesis strategies: realistic live wires (what the 0.8.0 encoder publishes) and mutations

MIDS = ("m1", "m2")
CALL_IDS = ("c1", "c2")
TEXT = st.text(alphabet='ab é😀 "{}\\', max_size=4)
_SLOT_KINDS = {
    "output_text": ("msg_a", "msg_b"),
    "refusal": ("msg_a", "msg_b"),
    "reasoning_text": ("rs_a", "rs_b"),
    "reasoning_summary_text": ("rs_a", "rs_b"),
    "function_call_arguments": ("fc_a", "fc_b"),
}


@st.composite
def stream_unit(draw: Any, used: set) -> dict[str, Any] | None:
    kind = draw(st.sampled_from(sorted(_SLOT_KINDS)))
    item_id = draw(st.sampled_from(_SLOT_KINDS[kind]))
    index = draw(st.integers(0, 2))
    mid = draw(st.sampled_from(MIDS))
    out_index = draw(st.integers(0, 2))
    if kind == "function_call_arguments":
        slot = (item_id, "args")
        codec = fn_codec(item_id, call_id=draw(st.sampled_from(CALL_IDS)), output_index=out_index)
        stream_id = item_id
    elif kind == "reasoning_summary_text":
        slot = (item_id, "summary", index)
        codec = summary_codec(item_id, summary_index=index, output_index=out_index)
        stream_id = f"{item_id}:summary:{index}"
    else:
        slot = (item_id, "content", index)
        codec = text_codec(item_id, content_index=index, output_index=out_index, kind=kind)
        stream_id = f"{item_id}:{index}"
    if slot in used:
        return None
    used.add(slot)
    deltas = draw(st.lists(TEXT, max_size=4))
    terminal = draw(st.sampled_from(["complete", "complete", "cancelled", None]))
    t = stream_transport(stream_id, mid)
    ops = [{"action": "message.create", "name": "ai-output", "data": "", "extras": extras(t, codec)}]
    for d in deltas:
        ops.append({"action": "message.append", "data": d, "extras": extras(t, codec)})
    if terminal is not None:
        closing = dict(codec)
        ops.append(
            {
                "action": "message.append",
                "data": draw(st.sampled_from(["", "!"])),
                "extras": extras({**t, "status": terminal}, closing),
            }
        )
    return {"ops": ops}


@st.composite
def discrete_unit(draw: Any) -> dict[str, Any]:
    choice = draw(st.integers(0, 8))
    mid = draw(st.sampled_from(MIDS))
    call_id = draw(st.sampled_from(CALL_IDS))
    if choice <= 1:
        item_id = draw(st.sampled_from(("msg_a", "msg_b", "rs_a", "rs_b")))
        if item_id.startswith("msg"):
            item: dict[str, Any] = {
                "id": item_id,
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
        else:
            item = {"id": item_id, "type": "reasoning", "summary": [], "encrypted_content": "added"}
        if draw(st.booleans()) and choice == 1:
            item.pop("id")
        kind, data, codec = "response.output_item.added", {"item": item}, {}
    elif choice == 2:
        item_id = draw(st.sampled_from(("msg_a", "msg_b", "rs_a", "rs_b", "fc_a", "fc_b")))
        typ = {"m": "message", "r": "reasoning", "f": "function_call"}[item_id[0]]
        item = {"type": typ, "id": item_id, "status": draw(st.sampled_from(["completed", "incomplete"]))}
        if typ == "reasoning":
            item["encrypted_content"] = "done"
            if draw(st.booleans()):
                item.pop("status")
        if typ == "message" and draw(st.booleans()):
            item["content"] = [{"type": "output_text", "logprobs": [{"token": "x"}]}, {"type": "refusal"}]
        kind, data, codec = "response.output_item.done", {"item": item}, {}
    elif choice == 3:
        kind, codec = "function_call_output", {}
        data = {"item": {"type": "function_call_output", "call_id": call_id, "output": draw(TEXT)}}
    elif choice == 4:
        kind, data, codec = "tool-approval-request", draw(TEXT), {"call_id": call_id, "name": "tool"}
    else:
        return draw(input_unit(mid, call_id, choice))
    codec = {"kind": kind, **codec}
    return {
        "ops": [
            {
                "action": "message.create",
                "name": "ai-output",
                "data": data,
                "extras": extras(discrete_transport(mid), codec),
            }
        ]
    }


@st.composite
def input_unit(draw: Any, mid: str, call_id: str, choice: int) -> dict[str, Any]:
    if choice == 5:
        t = discrete_transport(draw(st.sampled_from(("u1", "u2"))), role="user")
        codec = {"kind": "user-message", "partType": "input_text"}
        data: Any = draw(TEXT)
    elif choice == 6:
        t, codec, data = (
            discrete_transport(mid),
            {"kind": "tool-result", "call_id": call_id},
            {"output": draw(TEXT)},
        )
    elif choice == 7:
        t, codec, data = (
            discrete_transport(mid),
            {"kind": "tool-result-error", "call_id": call_id},
            {"message": draw(TEXT)},
        )
    else:
        codec = {
            "kind": "tool-approval-response",
            "call_id": call_id,
            "approved": draw(st.sampled_from(["true", "false"])),
        }
        if draw(st.booleans()):
            codec["reason"] = draw(TEXT)
        t, data = discrete_transport(mid), ""
    return {
        "ops": [{"action": "message.create", "name": "ai-input", "data": data, "extras": extras(t, codec)}]
    }


@st.composite
def live_wires(draw: Any, max_units: int = 7) -> list[dict[str, Any]]:
    """A live wire: streams with unique slots and discrete messages, interleaved, serials minted in order."""
    used: set = set()
    units = []
    for _ in range(draw(st.integers(1, max_units))):
        unit = draw(st.one_of(stream_unit(used), discrete_unit()))
        if unit is not None:
            units.append(unit)
    queues = [list(u["ops"]) for u in units]
    serial_of: dict[int, str] = {}
    wire: list[dict[str, Any]] = []
    counter = 0
    active = [i for i, q in enumerate(queues) if q]
    while active:
        i = active[draw(st.integers(0, len(active) - 1))] if len(active) > 1 else active[0]
        op = dict(queues[i].pop(0))
        counter += 1
        version = f"s{counter:05d}"
        if i not in serial_of:
            serial_of[i] = version
        op["serial"] = serial_of[i]
        op["version"] = {"serial": version}
        wire.append(op)
        active = [j for j, q in enumerate(queues) if q]
    return wire


def is_append(op: dict[str, Any]) -> bool:
    return op.get("action") == "message.append"


def is_stream_create(op: dict[str, Any]) -> bool:
    try:
        return op["action"] == "message.create" and op["extras"]["ai"]["transport"].get("stream") == "true"
    except (KeyError, TypeError, AttributeError):
        return False


FOREIGN = st.fixed_dictionaries(
    {
        "action": st.sampled_from(
            ["message.create", "message.append", "message.update", "message.delete", 0, 1, 2, 5]
        ),
        "serial": st.integers(0, 5).map(lambda i: f"f{i}"),
        "version": st.integers(0, 9).map(lambda i: {"serial": f"f{i}"}),
        "data": st.one_of(TEXT, st.none(), st.dictionaries(st.sampled_from(["item", "output"]), TEXT)),
    },
    optional={
        "name": st.sampled_from(["chat", "ai-output", "ai-input"]),
        "extras": st.sampled_from([{}, {"headers": {"a": "b"}}, {"ai": None}, {"ai": 5}, {"ai": "x"}]),
    },
)

JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False), TEXT
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "ai", "item", "type", "id", "serial"]), children, max_size=3)
    ),
    max_leaves=10,
)
HEADER_KEYS = st.sampled_from(
    [
        "kind",
        "partType",
        "item_id",
        "output_index",
        "content_index",
        "summary_index",
        "part",
        "item",
        "call_id",
        "name",
        "approved",
        "reason",
        "stream",
        "status",
        "stream-id",
        "codec-message-id",
        "role",
    ]
)
HEADER_VALUES = st.one_of(
    JSON_VALUES,
    st.sampled_from(
        [
            "true",
            "streaming",
            "complete",
            "cancelled",
            "0",
            "1",
            "null",
            "{",
            '{"type":"output_text"}',
            '{"type":"summary_text"}',
            '{"id":"fc_a","type":"function_call"}',
            "output_text",
            "function_call_arguments",
            "reasoning_summary_text",
            "response.output_item.added",
            "response.output_item.done",
            "function_call_output",
            "tool-approval-request",
            "user-message",
            "input_text",
            "tool-result",
            "tool-result-error",
            "tool-approval-response",
            "msg_a",
        ]
    ),
)
JUNK_MESSAGES = st.one_of(
    JSON_VALUES,
    st.fixed_dictionaries(
        {},
        optional={
            "action": st.one_of(
                st.sampled_from(
                    ["message.create", "message.append", "message.update", "message.delete", "meta"]
                ),
                st.integers(-1, 7),
                JSON_VALUES,
            ),
            "serial": st.one_of(st.sampled_from(["s1", "s2", ""]), JSON_VALUES),
            "name": st.one_of(st.sampled_from(["ai-output", "ai-input"]), JSON_VALUES),
            "version": st.one_of(
                st.fixed_dictionaries({"serial": st.sampled_from(["s1", "s2", "s3"])}), JSON_VALUES
            ),
            "data": JSON_VALUES,
            "extras": st.one_of(
                JSON_VALUES,
                st.fixed_dictionaries(
                    {
                        "ai": st.fixed_dictionaries(
                            {},
                            optional={
                                "transport": st.one_of(
                                    st.dictionaries(HEADER_KEYS, HEADER_VALUES, max_size=5), JSON_VALUES
                                ),
                                "codec": st.one_of(
                                    st.dictionaries(HEADER_KEYS, HEADER_VALUES, max_size=5), JSON_VALUES
                                ),
                            },
                        )
                    }
                ),
            ),
        },
    ),
)


@st.composite
def fold_sequences(draw):
    """Decoded events of a generated wire, then reordered, duplicated, dropped and re-addressed."""
    wire = draw(live_wires())
    steps = []
    d = Decoder()
    for msg in wire:
        r = d.decode(msg)
        mid = message_id_of(msg)
        steps += [{"direction": "input", "event": e, "messageId": mid} for e in r.inputs]
        steps += [{"direction": "output", "event": e, "messageId": mid} for e in r.outputs]
    for _ in range(draw(st.integers(0, 6))):
        if not steps:
            break
        i = draw(st.integers(0, len(steps) - 1))
        what = draw(st.sampled_from(["move", "dup", "drop", "readdress"]))
        if what == "move":
            steps.insert(draw(st.integers(0, len(steps) - 1)), steps.pop(i))
        elif what == "dup":
            steps.insert(draw(st.integers(0, len(steps))), copy.deepcopy(steps[i]))
        elif what == "drop":
            del steps[i]
        else:
            steps[i] = {**steps[i], "messageId": draw(st.sampled_from(["m1", "m2", "u1", None]))}
    return [{k: v for k, v in s.items() if v is not None} for s in steps]


def decode_fold_objects(messages: list[Any], message_ids: list[Any]) -> dict[str, Any]:
    """:func:`decode_fold` for message objects (e.g. ably-python ``Message``), ids given alongside."""
    decoder = Decoder()
    state = reducer.init()
    decoded = []
    for raw, mid in zip(messages, message_ids):
        result = decoder.decode(raw)
        decoded.append(result.to_dict())
        for ev in result.inputs:
            reducer.fold(state, "input", ev, mid)
        for ev in result.outputs:
            reducer.fold(state, "output", ev, mid)
    return {"decoded": decoded, "messages": [m.to_dict() for m in reducer.get_messages(state)]}


def added_item_message(serial: str, item_id: str, mid: str = "m1") -> dict[str, Any]:
    """A discrete ``response.output_item.added`` wire message for an assistant message item."""
    item = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    return create(
        serial, "ai-output", {"item": item}, discrete_transport(mid), {"kind": "response.output_item.added"}
    )
