"""The demo's scenario: a weather question, a gated ``get_weather`` tool, and a scripted model.

* :data:`WEATHER_TOOL` — the function tool definition sent to the model (real API or scripted).
* :func:`get_weather` — the tool itself (deterministic, offline).
* :func:`scripted_turn` — what the local scripted model answers to a Responses request body, as the
  list of stream events the real API would send: reasoning summary, text and a ``get_weather``
  function call on the first turn; a final answer once the call has an output (the weather, or the
  rejection text of a denied call); a malformed body raises :class:`~ai_transport.responses.BadRequest`.

Events follow the shapes recorded from the real API (``response.created`` … ``response.completed``,
``sequence_number`` from 0, reasoning items without ``status``, ``item_id``/``output_index`` on every
delta), so the real :class:`~ai_transport.responses.ResponsesClient` and codec are exercised.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from ..responses.replies import BadRequest

#: Tools that need a human's approval before the agent runs them.
GATED_TOOLS: frozenset[str] = frozenset({"get_weather"})

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city. Needs the user's approval (it reveals their location).",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
    "strict": True,
}

INSTRUCTIONS = (
    "You are a concise assistant. Use get_weather for any question about current weather; "
    "if a tool call is not approved, answer from general knowledge and say so."
)

_CONDITIONS = ["sunny", "light rain", "overcast", "showers", "clear skies", "drizzle"]


def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """The demo tool: a deterministic fake forecast for ``city`` (no network)."""
    seed = sum(ord(c) for c in city.lower())
    temp_c = 8 + seed % 17
    conditions = _CONDITIONS[seed % len(_CONDITIONS)]
    temperature = temp_c if unit == "celsius" else round(temp_c * 9 / 5 + 32)
    return {
        "city": city,
        "temperature": temperature,
        "unit": unit,
        "conditions": conditions,
        "humidity": 60 + seed % 35,
        "rain_expected": "rain" in conditions or "shower" in conditions or "drizzle" in conditions,
    }


def run_tool(name: str, arguments: str) -> str:
    """Run a demo tool by name with its JSON ``arguments``; the output string for the model."""
    if name != "get_weather":
        raise ValueError(f"unknown tool {name!r}")
    args = json.loads(arguments or "{}")
    return json.dumps(get_weather(str(args.get("city", "")), str(args.get("unit", "celsius"))))


# -------------------------------------------------------------------------------------------------
# The scripted model


def chunks(text: str) -> list[str]:
    """Split a text into small word-sized deltas, as a model streams it."""
    return re.findall(r"\S+\s*|\s+", text) or [text]


class _Events:
    """Builds one response's event list with contiguous ``sequence_number``."""

    def __init__(self, model: str, body: Mapping[str, Any]) -> None:
        self.encrypted = "reasoning.encrypted_content" in (body.get("include") or [])
        self.events: list[dict[str, Any]] = []
        self.output: list[dict[str, Any]] = []
        self.response = {
            "id": f"resp_{uuid.uuid4().hex[:24]}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "error": None,
            "incomplete_details": None,
            "model": model,
            "output": [],
            "usage": None,
            "store": False,
            "instructions": body.get("instructions"),
            "metadata": {},
            "parallel_tool_calls": True,
            "temperature": 1.0,
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": list(body.get("tools") or []),
            "top_p": 1.0,
        }

    def add(self, event: dict[str, Any]) -> None:
        event["sequence_number"] = len(self.events)
        self.events.append(event)

    def start(self) -> None:
        self.add({"type": "response.created", "response": dict(self.response)})
        self.add({"type": "response.in_progress", "response": dict(self.response)})

    def reasoning(self, summary: str) -> None:
        idx = len(self.output)
        rid = f"rs_{uuid.uuid4().hex[:24]}"
        self.add({"type": "response.output_item.added", "output_index": idx,
                  "item": {"id": rid, "type": "reasoning", "summary": []}})
        part = {"type": "summary_text", "text": ""}
        self.add({"type": "response.reasoning_summary_part.added", "item_id": rid, "output_index": idx,
                  "summary_index": 0, "part": part})
        for d in chunks(summary):
            self.add({"type": "response.reasoning_summary_text.delta", "item_id": rid, "output_index": idx,
                      "summary_index": 0, "delta": d})
        self.add({"type": "response.reasoning_summary_text.done", "item_id": rid, "output_index": idx,
                  "summary_index": 0, "text": summary})
        self.add({"type": "response.reasoning_summary_part.done", "item_id": rid, "output_index": idx,
                  "summary_index": 0, "part": {"type": "summary_text", "text": summary}})
        item: dict[str, Any] = {"id": rid, "type": "reasoning",
                                "summary": [{"type": "summary_text", "text": summary}]}
        if self.encrypted:  # the API returns the blob only when the request includes it
            item["encrypted_content"] = "gAAAAB" + uuid.uuid4().hex * 4
        self.add({"type": "response.output_item.done", "output_index": idx, "item": item})
        self.output.append(item)

    def message(self, text: str) -> None:
        idx = len(self.output)
        mid = f"msg_{uuid.uuid4().hex[:24]}"
        self.add({"type": "response.output_item.added", "output_index": idx,
                  "item": {"id": mid, "type": "message", "status": "in_progress", "content": [],
                           "role": "assistant"}})
        empty = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        self.add({"type": "response.content_part.added", "item_id": mid, "output_index": idx,
                  "content_index": 0, "part": empty})
        for d in chunks(text):
            self.add({"type": "response.output_text.delta", "item_id": mid, "output_index": idx,
                      "content_index": 0, "delta": d, "logprobs": []})
        self.add({"type": "response.output_text.done", "item_id": mid, "output_index": idx,
                  "content_index": 0, "text": text, "logprobs": []})
        full = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
        self.add({"type": "response.content_part.done", "item_id": mid, "output_index": idx,
                  "content_index": 0, "part": full})
        item = {"id": mid, "type": "message", "status": "completed", "content": [full], "role": "assistant"}
        self.add({"type": "response.output_item.done", "output_index": idx, "item": item})
        self.output.append(item)

    def function_call(self, name: str, arguments: str) -> None:
        idx = len(self.output)
        fid = f"fc_{uuid.uuid4().hex[:24]}"
        call_id = f"call_{uuid.uuid4().hex[:24]}"
        added = {"id": fid, "type": "function_call", "status": "in_progress", "arguments": "",
                 "call_id": call_id, "name": name}
        self.add({"type": "response.output_item.added", "output_index": idx, "item": added})
        for d in re.findall(r".{1,8}", arguments, flags=re.DOTALL):
            self.add({"type": "response.function_call_arguments.delta", "item_id": fid, "output_index": idx,
                      "delta": d})
        self.add({"type": "response.function_call_arguments.done", "item_id": fid, "output_index": idx,
                  "arguments": arguments})
        item = dict(added, status="completed", arguments=arguments)
        self.add({"type": "response.output_item.done", "output_index": idx, "item": item})
        self.output.append(item)

    def finish(self) -> list[dict[str, Any]]:
        done = dict(self.response, status="completed", output=self.output,
                    usage={"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                           "output_tokens": 60, "output_tokens_details": {"reasoning_tokens": 24},
                           "total_tokens": 180})
        self.add({"type": "response.completed", "response": done})
        return self.events


def _expect(value: Any, types: tuple[type, ...], param: str, what: str) -> None:
    if value is not None and not isinstance(value, types):
        raise BadRequest(f"Invalid type for '{param}': expected {what}, but got {type(value).__name__}.", param)


def _check_body(body: Any) -> Mapping[str, Any]:
    """``body`` if the scripted model can answer it, else a :class:`BadRequest` naming the field (the
    local server's 400, as the API refuses a malformed body)."""
    if not isinstance(body, Mapping):
        raise BadRequest("The request body must be a JSON object.")
    _expect(body.get("model"), (str,), "model", "a string")
    _expect(body.get("input"), (str, list), "input", "a string or an array")
    _expect(body.get("tools"), (list,), "tools", "an array")
    _expect(body.get("include"), (list,), "include", "an array")
    _expect(body.get("instructions"), (str,), "instructions", "a string")
    raw = body.get("input")
    for i, item in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(item, Mapping):
            raise BadRequest(f"Invalid type for 'input[{i}]': expected an object, but got {type(item).__name__}.",
                             f"input[{i}]")
        for name in ("type", "role", "call_id"):
            _expect(item.get(name), (str,), f"input[{i}].{name}", "a string")
        _expect(item.get("content"), (str, list), f"input[{i}].content", "a string or an array")
        _expect(item.get("output"), (str, list), f"input[{i}].output", "a string or an array")
        content = item.get("content")
        for j, part in enumerate(content if isinstance(content, list) else []):
            if not isinstance(part, Mapping):
                raise BadRequest(f"Invalid type for 'input[{i}].content[{j}]': expected an object, but got "
                                 f"{type(part).__name__}.", f"input[{i}].content[{j}]")
            _expect(part.get("text"), (str,), f"input[{i}].content[{j}].text", "a string")
    return body


def _items(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": raw}]}]
    return [i for i in raw or [] if isinstance(i, dict)]


def _last_user_text(items: Iterable[Mapping[str, Any]]) -> str:
    text = ""
    for item in items:
        if item.get("type", "message") == "message" and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                text = content
            elif isinstance(content, list):
                text = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return text


def _city(question: str) -> str:
    m = re.search(r"\bin ([A-Z][\w'-]*(?: [A-Z][\w'-]*)*)", question)
    return m.group(1) if m else "Paris"


def scripted_turn(body: Any) -> list[dict[str, Any]]:
    """The scripted model's whole answer to one Responses request ``body``, as stream events; a body
    that is not a Responses request (not a JSON object, a field of the wrong type) raises
    :class:`~ai_transport.responses.BadRequest` (the local server answers it 400)."""
    body = _check_body(body)
    model = str(body.get("model") or "scripted-model")
    items = _items(body)
    ev = _Events(model, body)
    ev.start()
    question = _last_user_text(items)
    # Only the current turn matters: what follows the last user message.
    last_user = max((i for i, it in enumerate(items) if it.get("type", "message") == "message"
                     and it.get("role") == "user"), default=0)
    items = items[last_user:]
    outputs = {i.get("call_id"): i.get("output") for i in items if i.get("type") == "function_call_output"}
    calls = [i for i in items if i.get("type") == "function_call"]
    if calls and all(c.get("call_id") in outputs for c in calls):
        output = outputs[calls[-1].get("call_id")]
        try:
            weather = json.loads(output) if isinstance(output, str) else output
        except ValueError:
            weather = None
        if isinstance(weather, dict) and all(k in weather for k in ("city", "temperature", "conditions", "humidity")):
            unit = "°C" if weather.get("unit") == "celsius" else "°F"
            advice = (
                "Yes, take an umbrella: rain is expected."
                if weather.get("rain_expected")
                else "No umbrella needed: no rain is expected."
            )
            ev.reasoning("The tool returned the current conditions; I can answer directly.")
            ev.message(
                f"Right now in {weather['city']} it is {weather['temperature']}{unit} with "
                f"{weather['conditions']} (humidity {weather['humidity']}%). {advice}"
            )
        else:
            reason = str(output or "the call was not approved").strip()
            ev.reasoning("The weather lookup was not approved, so I answer from general knowledge.")
            ev.message(
                f"I did not check the live weather ({reason}). In general, "
                f"{_city(question)} sees rain on about one day in three at this time of year, so a small "
                "umbrella is a safe bet."
            )
        return ev.finish()
    city = _city(question)
    ev.reasoning(f"The user asks about the current weather in {city}. I need the get_weather tool, "
                 "which requires their approval.")
    ev.message(f"Let me look up the current weather in {city} for you.")
    ev.function_call("get_weather", json.dumps({"city": city, "unit": "celsius"}, separators=(",", ":")))
    return ev.finish()
