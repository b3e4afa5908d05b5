"""The demo's weather scenario as Vercel AI SDK UI message stream chunks (for :class:`UIMessageCodec`).

The same conversation as :mod:`.scenario` (a weather question, the gated ``get_weather`` tool), but
the scripted model speaks what ``streamText(...).toUIMessageStream()`` sends to ``useChat``:

* :func:`scripted_ui_turn` — the chunks of one pass, read from the conversation so far (a list of
  ``UIMessage`` dicts): on a fresh question, reasoning, text and a ``get_weather`` call followed by
  a ``tool-approval-request`` (the run then suspends); once the call was approved and executed
  (``output-available``), the final answer; once it was denied (``output-denied``), an answer from
  general knowledge naming the denial's reason.
* :func:`execute_tool` — runs an approved call (``{"toolCallId", "toolName", "input"}``).

Shapes follow the AI SDK's recorded UI streams: ``start`` (with the assistant's ``messageId`` on the
first pass), ``start-step`` … ``finish-step``, ``finish`` with ``finishReason`` ``tool-calls`` or
``stop``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from .scenario import _city, chunks, get_weather

__all__ = ["TOOL_NAME", "execute_tool", "last_question", "scripted_ui_turn", "tool_part"]

#: The gated tool (its UI part type is ``tool-get_weather``).
TOOL_NAME = "get_weather"


def _message(m: Any) -> Mapping[str, Any]:
    message = getattr(m, "message", m)
    return message if isinstance(message, Mapping) else {}


def _parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, Mapping)] if isinstance(parts, list) else []


def last_question(messages: Iterable[Any]) -> str:
    """The text of the last user message (``""`` when there is none)."""
    text = ""
    for m in messages:
        message = _message(m)
        if message.get("role") == "user":
            text = "".join(str(p.get("text", "")) for p in _parts(message) if p.get("type") == "text")
    return text


def tool_part(messages: Iterable[Any]) -> Mapping[str, Any] | None:
    """The ``tool-get_weather`` part answering the last question (after the last user message)."""
    part: Mapping[str, Any] | None = None
    for m in messages:
        message = _message(m)
        if message.get("role") == "user":
            part = None
        elif message.get("role") == "assistant":
            for p in _parts(message):
                if p.get("type") == f"tool-{TOOL_NAME}":
                    part = p
    return part


def execute_tool(call: Mapping[str, Any]) -> dict[str, Any]:
    """Run an approved ``get_weather`` call (a reader's ``{"toolCallId", "toolName", "input"}``)."""
    if call.get("toolName") != TOOL_NAME:
        raise ValueError(f"unknown tool {call.get('toolName')!r}")
    raw = call.get("input")
    args: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return get_weather(str(args.get("city", "Paris")), str(args.get("unit", "celsius")))


def _text(kind: str, stream_id: str, text: str) -> list[dict[str, Any]]:
    return [
        {"type": f"{kind}-start", "id": stream_id},
        *({"type": f"{kind}-delta", "id": stream_id, "delta": d} for d in chunks(text)),
        {"type": f"{kind}-end", "id": stream_id},
    ]


def _answer(part: Mapping[str, Any], question: str) -> tuple[str, str]:
    """(reasoning, text) of the final answer, from the tool part's outcome."""
    weather = part.get("output")
    if part.get("state") == "output-available" and isinstance(weather, Mapping) and "conditions" in weather:
        unit = "°C" if weather.get("unit") == "celsius" else "°F"
        advice = ("Yes, take an umbrella: rain is expected." if weather.get("rain_expected")
                  else "No umbrella needed: no rain is expected.")
        return ("The tool returned the current conditions; I can answer directly.",
                f"Right now in {weather.get('city')} it is {weather.get('temperature')}{unit} with "
                f"{weather.get('conditions')} (humidity {weather.get('humidity')}%). {advice}")
    raw = part.get("approval")
    approval: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    reason = str(approval.get("reason") or part.get("errorText") or "you did not approve the lookup").strip()
    return ("The weather lookup was not approved, so I answer from general knowledge.",
            f"I did not check the live weather ({reason}). In general, {_city(question)} sees rain on "
            "about one day in three at this time of year, so a small umbrella is a safe bet.")


def scripted_ui_turn(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """The UI message chunks of the scripted model's next pass over ``messages`` (``UIMessage``
    dicts, or :class:`~ai_transport.codec.CodecMessage` s of them)."""
    messages = list(messages)
    question = last_question(messages)
    part = tool_part(messages)
    if part is not None and part.get("state") in ("output-available", "output-denied", "output-error"):
        reasoning, text = _answer(part, question)
        # The pass continues the suspended assistant message (useChat appends it there), so it has no
        # `start` of its own: a `start` would carry a new messageId (the encoder stamps the pass's
        # codec-message-id) and useChat would show the message twice. The decoders open the pass
        # (`start`, `start-step`) before its first stream. A denial reaches useChat as the AI SDK
        # sends it, a tool-output-denied chunk (it folds onto the message holding the call).
        denied = ([{"type": "tool-output-denied", "toolCallId": part.get("toolCallId")}]
                  if part.get("state") == "output-denied" else [])
        return [
            *denied,
            *_text("reasoning", "r2", reasoning),
            *_text("text", "t2", text),
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "stop"},
        ]
    city = _city(question)
    call_id = f"call_{uuid.uuid4().hex[:16]}"
    arguments = json.dumps({"city": city, "unit": "celsius"}, separators=(",", ":"))
    return [
        {"type": "start", "messageId": f"msg_{uuid.uuid4().hex[:16]}"},
        {"type": "start-step"},
        *_text("reasoning", "r1", f"The user asks about the current weather in {city}. I need the "
                                  "get_weather tool, which requires their approval."),
        *_text("text", "t1", f"Let me look up the current weather in {city} for you."),
        {"type": "tool-input-start", "toolCallId": call_id, "toolName": TOOL_NAME},
        *({"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": d}
          for d in (arguments[:9], arguments[9:])),
        {"type": "tool-input-available", "toolCallId": call_id, "toolName": TOOL_NAME,
         "input": json.loads(arguments)},
        {"type": "tool-approval-request", "toolCallId": call_id, "approvalId": f"approval_{call_id[5:]}"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "tool-calls"},
    ]
