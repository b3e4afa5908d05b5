"""Shared pieces of the parity tests (steering, branch selection, run read models)."""

from __future__ import annotations

import asyncio
from typing import Any

from ai_transport.responses.local_server import ScriptedText, build_response_events


def user_text(message: Any) -> str:
    """The text of a user message (``OpenAIMessage``); '' for any other role."""
    if message.role != "user":
        return ""
    return "".join(
        p.get("text", "") for it in message.items if it.get("type") == "message" for p in it.get("content", [])
    )


def texts(messages: list[Any]) -> list[str]:
    """Each message as its user text, or ``assistant``."""
    return [user_text(m.message) if m.message.role == "user" else "assistant" for m in messages]


def text_turn(text: str, seed: int) -> list[dict[str, Any]]:
    """A model answer streaming ``text`` (11 events; event 5 follows the first delta)."""
    return build_response_events([ScriptedText(text)], seed=seed)


def gated_model(
    gate: asyncio.Event, answers: list[str], at: int = 5, streaming: asyncio.Event | None = None
) -> Any:
    """A model whose first answer, before its event ``at``, sets ``streaming`` and waits on ``gate``
    (event 5 follows the text's first delta: the message is on the channel); answer ``n`` is
    ``answers[n]``."""
    calls = {"n": 0}

    async def model(items: list[dict[str, Any]]) -> Any:
        n = calls["n"]
        calls["n"] += 1
        events = text_turn(answers[n], n + 1)
        for i, event in enumerate(events):
            if n == 0 and i == at:
                if streaming is not None:
                    streaming.set()
                await asyncio.wait_for(gate.wait(), 10)
            yield event
            await asyncio.sleep(0)

    return model


async def steer_loop(run: Any, model: Any) -> list[list[dict[str, Any]]]:
    """The agent loop of 0.8.0's steering docs: one pass per ``has_input()``; returns the model inputs."""
    inputs = []
    while run.has_input():
        items = run.input_items()
        inputs.append(items)
        result = await run.pipe(model(items))
        assert result.reason == "complete", result
    return inputs
