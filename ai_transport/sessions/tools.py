"""Helpers for an agent's tool loop: the output that answers a call, and approval gating of a turn."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from typing import Any

__all__ = ["aiter_any", "function_call_output", "gate_calls"]


def function_call_output(call: Mapping[str, Any], output: Any) -> dict[str, Any]:
    """The discrete output that answers ``call``: ``{"type": "function_call_output", "item": {...}}``.

    ``output`` that is not a string is JSON-encoded (the Responses API takes a string).
    """
    import json

    text = (
        output if isinstance(output, str) else json.dumps(output, separators=(",", ":"), ensure_ascii=False)
    )
    return {
        "type": "function_call_output",
        "item": {"type": "function_call_output", "call_id": call.get("call_id", ""), "output": text},
    }


async def gate_calls(
    events: AsyncIterable[Any] | Iterable[Any], needs_approval: Callable[[Mapping[str, Any]], bool]
) -> AsyncIterable[Any]:
    """Pass a model turn's events through, then ask approval for its gated calls.

    After the last event, yields one ``{"type": "tool-approval-request", call_id, name, arguments}``
    per ``function_call`` item (from its ``response.output_item.done``) for which
    ``needs_approval(item)`` is true — on the same pipe, so the requests land on the message that
    holds the calls (where a client's approval folds).
    """
    gated: list[Mapping[str, Any]] = []
    async for event in aiter_any(events):
        yield event
        etype = event.get("type") if isinstance(event, Mapping) else getattr(event, "type", None)
        if etype == "response.output_item.done":
            item = event.get("item") if isinstance(event, Mapping) else getattr(event, "item", None)
            if item is not None and not isinstance(item, Mapping):
                item = item.model_dump() if hasattr(item, "model_dump") else dict(item)
            if isinstance(item, Mapping) and item.get("type") == "function_call" and needs_approval(item):
                gated.append(item)
    for item in gated:
        yield {
            "type": "tool-approval-request",
            "call_id": item.get("call_id", ""),
            "name": item.get("name", ""),
            "arguments": item.get("arguments", ""),
        }


async def aiter_any(source: Any) -> Any:
    """Iterate a sync or async iterable asynchronously."""
    if hasattr(source, "__aiter__"):
        async for x in source:
            yield x
    else:
        for x in source:
            yield x

