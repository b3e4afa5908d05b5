"""The Vercel codec's wire: header bindings and the output / input descriptor tables (pure).

Mirrors ``vercel/codec/fields.ts``, ``outputs.ts``, ``inputs.ts`` and ``wire-data.ts`` of
``@ably/ai-transport@0.8.0``: UI message stream chunks (``AI.UIMessageChunk``) on ``ai-output``, the
well-known inputs on ``ai-input``. Compiled once, at import (:data:`OUTPUT`, :data:`INPUT`).
Wire ``data`` is untrusted: every decode falls back to the field defaults on a wrong shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._shapes import MAPPING
from ...errors import InvalidArgumentError, InvalidTypeError, type_name
from ..core.encoder_core import Operation
from ..core.fields import bool_field, enum_field, json_field, str_field, write_fields
from ..core.headers import MISSING, parse_json
from ..core.inbound import _is_map
from ..core.table_encoder import HatchContext, TableEncoderCore
from ..core.tables import Batch, BatchPart, Event, InputEvent, Stream, compile_input, compile_output

__all__ = ["INPUT", "OUTPUT", "read_fork_seed"]

Chunk = dict[str, Any]

# -- header bindings (fields.ts) ---------------------------------------------------------------

F_ID = str_field("id")
F_META = json_field("providerMetadata")
F_TOOL_CALL_ID = str_field("toolCallId", "")
F_TOOL_NAME = str_field("toolName", "")
F_DYNAMIC = bool_field("dynamic")
F_TITLE = str_field("title")
F_PROVIDER_EXECUTED = bool_field("providerExecuted")
F_MEDIA_TYPE = str_field("mediaType", "")
F_SOURCE_ID = str_field("sourceId", "")
F_MESSAGE_ID = str_field("messageId")
F_APPROVED = bool_field("approved", False)
F_REASON = str_field("reason")
F_FINISH_REASON = enum_field(
    "finishReason", ("stop", "length", "content-filter", "tool-calls", "error", "other"), "stop"
)
F_MESSAGE_METADATA = json_field("messageMetadata")

_TOOL_FIELDS = (F_TOOL_CALL_ID, F_TOOL_NAME, F_DYNAMIC, F_TITLE, F_PROVIDER_EXECUTED, F_META)


# -- wire data guards (wire-data.ts) -------------------------------------------------------------


def _is_record(data: Any) -> bool:
    return _is_map(data) or isinstance(data, list)  # typeof 'object' and not null


def _prop(data: Any, key: str) -> Any:
    return data.get(key, MISSING) if _is_map(data) else MISSING


def _optional_string(data: Any, key: str) -> bool:
    value = _prop(data, key)
    return _is_record(data) and (value is MISSING or isinstance(value, str))


def _as_string(data: Any) -> str:
    return data if isinstance(data, str) else ""


def _strip(bag: Chunk) -> Chunk:
    return {k: v for k, v in bag.items() if v is not MISSING}


def _parse_json_or_string(value: str) -> Any:
    if not value:
        return MISSING
    parsed = parse_json(value)
    return value if parsed is MISSING else parsed


def _truthy(v: Any) -> bool:
    return v is not MISSING and v is not None and v is not False and v != 0 and v != "" and v == v


def read_fork_seed(data: Any) -> Any:
    """``readForkSeedWireData``: the validated ``forkSeed`` of a tool-result envelope, else MISSING.

    Messages without a string ``codecMessageId`` or a ``parts`` list are dropped; parts that are not
    objects with a string ``type`` are filtered out (they would break the reducer).
    """
    if not _is_record(data):
        return MISSING
    seed = _prop(data, "forkSeed")
    messages = _prop(seed, "messages")
    if not isinstance(messages, list):
        return MISSING
    out = []
    for entry in messages:
        cmid = _prop(entry, "codecMessageId")
        message = _prop(entry, "message")
        parts = _prop(message, "parts")
        if not isinstance(cmid, str) or not isinstance(parts, list):
            continue
        kept = [p for p in parts if _is_map(p) and isinstance(p.get("type"), str)]
        out.append({"codecMessageId": cmid, "message": {**message, "parts": kept}})
    return {"messages": out}


# -- output hatches --------------------------------------------------------------------------------


def _encode_start(core: TableEncoderCore, c: Chunk, ctx: HatchContext) -> list[Operation]:
    message_id = c.get("messageId")
    if message_id is None:  # `c.messageId ?? messageId`
        message_id = ctx.encoder_message_id
    codec = write_fields((F_MESSAGE_ID, F_MESSAGE_METADATA), ctx.kind, {**c, "messageId": message_id})
    return [core._discrete(ctx.kind, "", codec, ctx.message_id, ctx.extras)]


def _encode_tool_input_available(core: TableEncoderCore, c: Chunk, ctx: HatchContext) -> list[Operation]:
    fields = _TOOL_FIELDS
    tool_call_id = c.get("toolCallId")
    try:
        codec = write_fields(fields, ctx.kind, c, ("toolCallId", "toolName", "providerMetadata"))
        return core._close_stream(tool_call_id, codec)  # type: ignore[arg-type]
    except InvalidArgumentError:
        # No active stream for the id: 0.8.0 falls back to a discrete publish (without the write's
        # options: no codec-message-id or per-write headers beyond the encoder's own).
        return [core._discrete(ctx.kind, c.get("input", MISSING), write_fields(fields, ctx.kind, c), None, None)]


def _decode_tool_input_end(
    stream_id: Any, accumulated: str, codec: Mapping[str, Any], closing: Mapping[str, Any]
) -> list[Chunk]:
    name = F_TOOL_NAME.read(closing)
    return [
        _strip(
            {
                "type": "tool-input-available",
                "toolCallId": stream_id,
                "toolName": name if _truthy(name) else F_TOOL_NAME.read(codec),
                "input": _parse_json_or_string(accumulated),
                "providerMetadata": F_META.read(closing),
            }
        )
    ]


def _decode_tool_input_discrete(codec: Mapping[str, Any], data: Any) -> list[Chunk]:
    return [
        _strip(
            {
                "type": "tool-input-start",
                "toolCallId": F_TOOL_CALL_ID.read(codec),
                "toolName": F_TOOL_NAME.read(codec),
                "dynamic": F_DYNAMIC.read(codec),
                "title": F_TITLE.read(codec),
                "providerExecuted": F_PROVIDER_EXECUTED.read(codec),
                "providerMetadata": F_META.read(codec),
            }
        ),
        _strip(
            {
                "type": "tool-input-available",
                "toolCallId": F_TOOL_CALL_ID.read(codec),
                "toolName": F_TOOL_NAME.read(codec),
                "input": data,
                "providerMetadata": F_META.read(codec),
            }
        ),
    ]


def _tool_input_error(data: Any) -> Chunk:
    if _optional_string(data, "errorText"):
        error = _prop(data, "errorText")
        return {"errorText": "" if error is MISSING else error, "input": _prop(data, "input")}
    return {"errorText": ""}


def _tool_output_error(data: Any) -> Chunk:
    error = _prop(data, "errorText") if _optional_string(data, "errorText") else MISSING
    return {"errorText": "" if error is MISSING else error}


OUTPUT = compile_output(
    [
        Stream("text", "id", (F_ID, F_META), "text-start", "text-delta", "delta", "text-end", (F_ID,)),
        Stream(
            "reasoning", "id", (F_ID, F_META), "reasoning-start", "reasoning-delta", "delta", "reasoning-end", (F_ID,)
        ),
        Stream(
            "tool-input",
            "toolCallId",
            _TOOL_FIELDS,
            "tool-input-start",
            "tool-input-delta",
            "inputTextDelta",
            "tool-input-available",
            (F_TOOL_CALL_ID,),
            end_encode=_encode_tool_input_available,
            end_decode=_decode_tool_input_end,
            decode_discrete=_decode_tool_input_discrete,
        ),
        Event("start", (F_MESSAGE_ID, F_MESSAGE_METADATA), encode=_encode_start),
        Event("start-step"),
        Event("finish-step"),
        Event("finish", (F_FINISH_REASON, F_MESSAGE_METADATA)),
        Event("message-metadata", (F_MESSAGE_METADATA,)),
        Event(
            "error",
            data_encode=lambda c: c.get("errorText", MISSING),
            data_decode=lambda d: {"errorText": _as_string(d)},
        ),
        Event(
            "abort",
            data_encode=lambda c: "" if c.get("reason") is None else c["reason"],
            data_decode=lambda d: {"reason": d} if isinstance(d, str) and d else {},
        ),
        Event(
            "file",
            (F_MEDIA_TYPE, F_META),
            data_encode=lambda c: c.get("url", MISSING),
            data_decode=lambda d: {"url": _as_string(d)},
        ),
        Event(
            "source-url",
            (F_SOURCE_ID, F_TITLE, F_META),
            data_encode=lambda c: c.get("url", MISSING),
            data_decode=lambda d: {"url": _as_string(d)},
        ),
        Event("source-document", (F_SOURCE_ID, F_MEDIA_TYPE, str_field("title", ""), str_field("filename"), F_META)),
        Event(
            "tool-input-error",
            _TOOL_FIELDS,
            data_encode=lambda c: _strip({"errorText": c.get("errorText", MISSING), "input": c.get("input", MISSING)}),
            data_decode=_tool_input_error,
        ),
        Event(
            "tool-output-available",
            (F_TOOL_CALL_ID, F_DYNAMIC, F_PROVIDER_EXECUTED, bool_field("preliminary")),
            data_encode=lambda c: _strip({"output": c.get("output", MISSING)}),
            data_decode=lambda d: {"output": _prop(d, "output")} if _is_record(d) else {},
        ),
        Event(
            "tool-output-error",
            (F_TOOL_CALL_ID, F_DYNAMIC, F_PROVIDER_EXECUTED),
            data_encode=lambda c: _strip({"errorText": c.get("errorText", MISSING)}),
            data_decode=_tool_output_error,
        ),
        Event("tool-approval-request", (F_TOOL_CALL_ID, str_field("approvalId", ""))),
        Event("tool-output-denied", (F_TOOL_CALL_ID,)),
        Event(
            "data-*",
            (F_ID, bool_field("transient")),
            data_encode=lambda c: c.get("data", MISSING),
            data_decode=lambda d: {"data": d},
            ephemeral=lambda c: c.get("transient") is True,
        ),
    ]
)


# -- inputs (inputs.ts) ------------------------------------------------------------------------------

_EMPTY_PARTS: tuple[Chunk, ...] = ({"type": "text", "text": ""},)


def _encodable(part: Any) -> bool:
    t = part.get("type") if _is_map(part) else None
    return isinstance(t, str) and (t in ("text", "file") or t.startswith("data-"))


def _explode(inp: Chunk) -> list[Chunk]:
    message = inp.get("message")
    parts = message.get("parts") if isinstance(message, MAPPING) else None
    if not isinstance(parts, list):
        raise InvalidTypeError(
            f"unable to publish; user-message message.parts must be a list, got {type_name(parts)}"
        )
    encodable = [p for p in parts if _encodable(p)]
    return encodable if encodable else [dict(p) for p in _EMPTY_PARTS]


def _message_headers(inp: Chunk) -> tuple[dict[str, str], dict[str, Any]]:
    message = inp["message"]
    codec: dict[str, str] = {}
    F_MESSAGE_ID.write(codec, message.get("id"))
    role = message.get("role", MISSING)
    return codec, ({} if role is MISSING else {"role": role})


def _assemble(part: Chunk, codec: Mapping[str, Any], transport: Mapping[str, Any]) -> Chunk:
    role = transport.get("role")
    message_id = F_MESSAGE_ID.read(codec)
    return {
        "message": {
            "id": "" if message_id is MISSING or message_id is None else message_id,
            "role": "user" if role is None else role,
            "parts": [part],
        }
    }


def _with_seed(bag: Chunk, payload: Chunk) -> Chunk:
    seed = payload.get("forkSeed", MISSING)
    if seed is not MISSING:
        bag["forkSeed"] = seed
    return bag


def _decode_tool_result(d: Any) -> Chunk:
    return {"output": _prop(d, "output") if _is_record(d) else MISSING, "forkSeed": read_fork_seed(d)}


def _decode_tool_result_error(d: Any) -> Chunk:
    message = _prop(d, "message") if _optional_string(d, "message") else MISSING
    return {"message": "" if message is MISSING else message, "forkSeed": read_fork_seed(d)}


INPUT = compile_input(
    [
        InputEvent(
            "tool-result",
            (F_TOOL_CALL_ID,),
            data_encode=lambda p: _with_seed(_strip({"output": p.get("output", MISSING)}), p),
            data_decode=_decode_tool_result,
        ),
        InputEvent(
            "tool-result-error",
            (F_TOOL_CALL_ID,),
            data_encode=lambda p: _with_seed(_strip({"message": p.get("message", MISSING)}), p),
            data_decode=_decode_tool_result_error,
        ),
        InputEvent("tool-approval-response", (F_TOOL_CALL_ID, F_APPROVED, F_REASON)),
        InputEvent("regenerate", wire_only=True),
        Batch(
            "user-message",
            explode=_explode,
            part_type_of=lambda part: part["type"],
            parts=(
                BatchPart(
                    "text", data_encode=lambda x: x.get("text", MISSING), data_decode=lambda d: {"text": _as_string(d)}
                ),
                BatchPart(
                    "file",
                    (F_MEDIA_TYPE,),
                    data_encode=lambda x: x.get("url", MISSING),
                    data_decode=lambda d: {"url": _as_string(d)},
                ),
                BatchPart(
                    "data-*", (F_ID,), data_encode=lambda x: x.get("data", MISSING), data_decode=lambda d: {"data": d}
                ),
            ),
            message_headers=_message_headers,
            assemble=_assemble,
        ),
    ]
)
