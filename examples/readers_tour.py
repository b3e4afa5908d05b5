"""What a resuming agent reads from a real conversation (no network, no API key).

Builds the run messages of a recorded two-turn ``store: false`` tool loop (the model called
``lookupVerificationCode``; a client approved it; the agent ran it; the model answered), then
prints what the four readers say at each point. Run: ``python examples/readers_tour.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ai_transport import (
    OpenAIMessage,
    approved_unexecuted_calls,
    resolved_call_ids,
    to_responses_input,
    unanswered_calls,
)

REC = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "openai-responses" / "vercel-ai"


def done_items(name: str) -> list[dict]:
    """The final output items of a recorded stream (its ``response.output_item.done`` events)."""
    events = [json.loads(line) for line in (REC / name).read_text().splitlines() if line.strip()]
    return [e["item"] for e in events if e["type"] == "response.output_item.done"]


def show(stage: str, messages: list[OpenAIMessage]) -> None:
    print(f"\n== {stage}")
    print("  to_responses_input:       ", [it["type"] for it in to_responses_input(messages)])
    print("  resolved_call_ids:        ", list(resolved_call_ids(messages)))
    print("  unanswered_calls:         ", [c["call_id"] for c in unanswered_calls(messages)])
    print("  approved_unexecuted_calls:", [c["call_id"] for c in approved_unexecuted_calls(messages)])


def main() -> None:
    question = OpenAIMessage("user", [{"type": "message", "role": "user",
                                       "content": [{"type": "input_text", "text": "What is the code?"}]}])
    turn1 = OpenAIMessage("assistant", done_items("openai-issue-11239.1.chunks.txt"))
    call = next(it for it in turn1.items if it["type"] == "function_call")
    cid = call["call_id"]

    turn1.tool_call_states[cid] = {"approval": "pending", "name": call["name"], "arguments": call["arguments"]}
    show("model asked for a gated tool call; the run is suspended", [question, turn1])

    turn1.tool_call_states[cid] = {**turn1.tool_call_states[cid], "approval": "approved"}
    show("a client approved it: the agent owes an execution", [question, turn1])

    turn1.items.append({"type": "function_call_output", "call_id": cid, "output": "blue-42"})
    turn2 = OpenAIMessage("assistant", done_items("openai-issue-11239.2.chunks.txt"))
    show("the agent ran it and the model answered", [question, turn1, turn2])
    answer = turn2.items[0]["content"][0]["text"]
    print(f"\nfinal answer: {answer}")


if __name__ == "__main__":
    main()
