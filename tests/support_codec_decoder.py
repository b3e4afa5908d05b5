"""Shared helpers for the decoder / reducer tests: wire builders, wire views, and fold drivers."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ai_transport.codec import reducer
from ai_transport.codec.decoder import Decoder

# ---------------------------------------------------------------------------------------------
# Building inbound messages by hand


def extras(transport: dict[str, str] | None = None, codec: dict[str, str] | None = None) -> dict[str, Any]:
    ai: dict[str, Any] = {"transport": dict(transport or {})}
    if codec:
        ai["codec"] = dict(codec)
    return {"ai": ai}


def create(serial: str, name: str | None, data: Any, transport: dict, codec: dict | None = None, **kw: Any) -> dict:
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


def update(serial: str, version: str, name: str | None, data: Any, transport: dict, codec: dict | None = None) -> dict:
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


def text_codec(item_id: str = "msg_1", content_index: int = 0, output_index: int = 0, kind: str = "output_text") -> dict:
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


def fn_codec(item_id: str = "fc_1", call_id: str = "call_1", name: str = "get_weather", output_index: int = 0) -> dict:
    item = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call_id, "name": name}
    return {"kind": "function_call_arguments", "item": json.dumps(item, separators=(",", ":")), "output_index": json.dumps(output_index)}


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
            data = (data if isinstance(data, str) else "") + (op.get("data") if isinstance(op.get("data"), str) else "")
            ext = op.get("extras", ext)
        elif op["action"] == "message.update":
            data = op.get("data")
            ext = op.get("extras", ext)
        elif op["action"] == "message.delete":
            deleted = True
    if deleted:
        return {"action": "message.delete", "serial": first["serial"], "version": {"serial": version}, "data": ""}
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
