"""Scripted model outputs and the realistic Responses event sequence they stream as.

:class:`ScriptedText`, :class:`ScriptedReasoning` and :class:`ScriptedFunctionCall` describe what
the offline "model" answers; :func:`build_response_events` turns them into the events the real API
would stream (ids, deltas, blobs, usage, the terminal event), shaped like the recorded streams.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import string
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Union

__all__ = [
    "ScriptedFunctionCall",
    "ScriptedOutput",
    "ScriptedReasoning",
    "ScriptedText",
    "build_response_events",
]


# -- scripted outputs ----------------------------------------------------------------------------------


@dataclass
class ScriptedText:
    """An assistant message with one ``output_text`` part (``phase``: ``"commentary"`` /
    ``"final_answer"`` on newer models)."""

    text: str
    phase: str | None = None
    id: str | None = None


@dataclass
class ScriptedReasoning:
    """A reasoning item: summary parts (none → ``added`` then ``done`` with nothing between) and the
    ``encrypted_content`` of its ``done`` item (generated when ``None``; the ``added`` item carries a
    different blob, as on the real wire)."""

    summary: list[str] = field(default_factory=list)
    encrypted_content: str | None = None
    id: str | None = None


@dataclass
class ScriptedFunctionCall:
    """A ``function_call`` item; ``arguments`` as a JSON string or a value to encode."""

    name: str
    arguments: Any = field(default_factory=dict)
    call_id: str | None = None
    id: str | None = None


#: One scripted output item.
ScriptedOutput = Union[ScriptedText, ScriptedReasoning, ScriptedFunctionCall]  # noqa: UP007
_SCRIPTED_TYPES = (ScriptedText, ScriptedReasoning, ScriptedFunctionCall)
_TOKEN = re.compile(r"\s*[\w']+|\s*[^\w\s]+|\s+")


def _deltas(text: str, max_len: int = 12) -> list[str]:
    """Split text into token-like deltas (a word with its leading space, a punctuation run)."""
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        piece = match.group(0)
        while len(piece) > max_len:
            out.append(piece[:max_len])
            piece = piece[max_len:]
        if piece:
            out.append(piece)
    return out or ([text] if text else [])


def _blob(rng: random.Random, seed_text: str, size: int = 360) -> str:
    digest = hashlib.sha256(seed_text.encode("utf-8") + rng.randbytes(16)).digest()
    raw = b"\x80" + rng.randbytes(8) + digest * (size // 32 + 1)
    return "gAAAAAB" + base64.urlsafe_b64encode(raw[:size]).decode("ascii")


def _estimate_tokens(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return max(1, len(text) // 4)


def build_response_events(
    outputs: Sequence[ScriptedOutput],
    *,
    request: dict[str, Any] | None = None,
    model: str | None = None,
    status: str = "completed",
    error: dict[str, Any] | None = None,
    seed: int | None = None,
    created_at: int | None = None,
    obfuscation: bool = False,
) -> list[dict[str, Any]]:
    """A realistic Responses event sequence for scripted outputs, shaped like the recorded streams.

    ``response.created`` → ``response.in_progress`` → per output item (``output_index`` 0, 1, …):
    ``output_item.added`` → its content events (summary parts, text deltas, argument deltas) →
    ``output_item.done`` → the terminal event. ``sequence_number`` runs from 0; ids share one
    response-specific suffix (``resp_…``, ``rs_…``, ``msg_…``, ``fc_…``; ``call_…`` for call ids).
    The envelope echoes ``request`` (model, instructions, tools, reasoning, max_output_tokens…).

    ``status``: ``"completed"``, ``"incomplete"`` (``max_output_tokens``; the last message is left
    ``incomplete``) or ``"failed"`` (no output; ``error`` = ``{"code", "message"}`` is sent as a nested
    ``error`` event and as ``response.error``). ``seed`` makes ids and blobs reproducible.
    ``obfuscation`` adds random padding to delta events, as the real API does by default.
    """
    if status not in ("completed", "incomplete", "failed"):
        raise ValueError(f"status: must be 'completed', 'incomplete' or 'failed', got {status!r}")
    rng = random.Random(seed)
    req = request or {}
    suffix = rng.randbytes(24).hex()
    created = int(time.time()) if created_at is None else created_at
    reasoning_req: dict[str, Any] = req["reasoning"] if isinstance(req.get("reasoning"), dict) else {}
    tools = req.get("tools")
    envelope: dict[str, Any] = {
        "id": f"resp_{suffix}",
        "object": "response",
        "created_at": created,
        "status": "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": req.get("instructions"),
        "max_output_tokens": req.get("max_output_tokens"),
        "max_tool_calls": req.get("max_tool_calls"),
        "model": model or req.get("model") or "local-scripted-model",
        "output": [],
        "parallel_tool_calls": req.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "prompt_cache_key": req.get("prompt_cache_key"),
        "prompt_cache_retention": req.get("prompt_cache_retention"),
        "reasoning": {"effort": reasoning_req.get("effort"), "summary": reasoning_req.get("summary")},
        "safety_identifier": req.get("safety_identifier"),
        "service_tier": "auto",
        "store": req.get("store", False),
        "temperature": req.get("temperature", 1),
        "text": req.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": req.get("tool_choice", "auto"),
        "tools": tools if isinstance(tools, list) else [],
        "top_logprobs": req.get("top_logprobs", 0),
        "top_p": req.get("top_p", 1),
        "truncation": req.get("truncation", "disabled"),
        "usage": None,
        "user": req.get("user"),
        "metadata": req.get("metadata") or {},
    }
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    def pad(fields: dict[str, Any]) -> dict[str, Any]:
        if obfuscation:
            n = rng.randint(1, 15)
            fields["obfuscation"] = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))
        return fields

    emit("response.created", response={**envelope})
    emit("response.in_progress", response={**envelope})
    final: list[dict[str, Any]] = []
    output_tokens = 0
    reasoning_tokens = 0
    outputs = [] if status == "failed" else list(outputs)
    for index, spec in enumerate(outputs):
        last = index == len(outputs) - 1
        if isinstance(spec, ScriptedReasoning):
            item_id = spec.id or f"rs_{suffix}{index:02x}"
            done_blob = spec.encrypted_content or _blob(rng, f"done:{item_id}")
            added = {"id": item_id, "type": "reasoning", "encrypted_content": _blob(rng, f"added:{item_id}"),
                     "summary": []}
            emit("response.output_item.added", output_index=index, item=added)
            for k, part_text in enumerate(spec.summary):
                common = {"item_id": item_id, "output_index": index, "summary_index": k}
                emit("response.reasoning_summary_part.added", **common, part={"type": "summary_text", "text": ""})
                for delta in _deltas(part_text):
                    emit("response.reasoning_summary_text.delta", **pad({**common, "delta": delta}))
                emit("response.reasoning_summary_text.done", **common, text=part_text)
                emit("response.reasoning_summary_part.done", **common, part={"type": "summary_text", "text": part_text})
                reasoning_tokens += _estimate_tokens(part_text)
            reasoning_tokens += 16
            item = {"id": item_id, "type": "reasoning", "encrypted_content": done_blob,
                    "summary": [{"type": "summary_text", "text": t} for t in spec.summary]}
        elif isinstance(spec, ScriptedText):
            item_id = spec.id or f"msg_{suffix}{index:02x}"
            head: dict[str, Any] = {"id": item_id, "type": "message", "status": "in_progress", "content": [],
                                    "role": "assistant"}
            if spec.phase is not None:
                head["phase"] = spec.phase
            emit("response.output_item.added", output_index=index, item=head)
            common = {"item_id": item_id, "output_index": index, "content_index": 0}
            emit("response.content_part.added", **common,
                 part={"type": "output_text", "annotations": [], "logprobs": [], "text": ""})
            for delta in _deltas(spec.text):
                emit("response.output_text.delta", **pad({**common, "delta": delta, "logprobs": []}))
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": spec.text}
            emit("response.output_text.done", **common, text=spec.text, logprobs=[])
            emit("response.content_part.done", **common, part=part)
            item_status = "incomplete" if (status == "incomplete" and last) else "completed"
            item = {"id": item_id, "type": "message", "status": item_status, "content": [dict(part)],
                    "role": "assistant"}
            if spec.phase is not None:
                item["phase"] = spec.phase
            output_tokens += _estimate_tokens(spec.text)
        elif isinstance(spec, ScriptedFunctionCall):
            item_id = spec.id or f"fc_{suffix}{index:02x}"
            call_id = spec.call_id or "call_" + "".join(
                rng.choice(string.ascii_letters + string.digits) for _ in range(24)
            )
            arguments = spec.arguments if isinstance(spec.arguments, str) else json.dumps(
                spec.arguments, separators=(",", ":"), ensure_ascii=False
            )
            emit("response.output_item.added", output_index=index,
                 item={"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
                       "call_id": call_id, "name": spec.name})
            for delta in _deltas(arguments, max_len=6):
                emit("response.function_call_arguments.delta",
                     **pad({"item_id": item_id, "output_index": index, "delta": delta}))
            emit("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=arguments)
            item = {"id": item_id, "type": "function_call", "status": "completed", "arguments": arguments,
                    "call_id": call_id, "name": spec.name}
            output_tokens += _estimate_tokens(arguments)
        else:
            raise TypeError(f"outputs[{index}]: expected a scripted output, got {type(spec).__name__}")
        emit("response.output_item.done", output_index=index, item=item)
        final.append(item)
    input_tokens = _estimate_tokens(req.get("input", "")) + _estimate_tokens(req.get("instructions") or "")
    usage = {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": output_tokens + reasoning_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": input_tokens + output_tokens + reasoning_tokens,
    }
    terminal = {**envelope, "status": status, "output": final, "usage": usage}
    if status == "completed":
        emit("response.completed", response=terminal)
    elif status == "incomplete":
        terminal["incomplete_details"] = {"reason": "max_output_tokens"}
        emit("response.incomplete", response=terminal)
    else:
        err = error or {"code": "server_error", "message": "The scripted model failed."}
        emit("error", error={"type": err.get("code"), "code": err.get("code"), "message": err.get("message"),
                             "param": None})
        terminal["error"] = {"code": err.get("code"), "message": err.get("message")}
        terminal["usage"] = None
        emit("response.failed", response=terminal)
    return events
