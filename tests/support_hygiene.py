"""Builders, recorded-turn loaders and Hypothesis strategies for the hygiene/preflight/chat tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

# ---------------------------------------------------------------------------------------------
# Builders (Responses input items)


def user(text: str = "hi") -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str = "ok", item_id: str | None = None, status: str | None = None, **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "message", "role": "assistant"}
    if item_id:
        item["id"] = item_id
    if status:
        item["status"] = status
    item["content"] = [{"type": "output_text", "text": text, "annotations": []}]
    item.update(extra)
    return item


def reasoning(item_id: str | None = "rs_1", enc: str | None = "gAAAA-blob", summary: Any = (), **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning"}
    if item_id:
        item["id"] = item_id
    if summary is not None:
        item["summary"] = list(summary)
    if enc is not None:
        item["encrypted_content"] = enc
    item.update(extra)
    return item


def call(call_id: str = "call_1", item_id: str | None = None, name: str = "lookup", args: str | None = '{"q":1}', **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call", "call_id": call_id, "name": name}
    if args is not None:
        item["arguments"] = args
    if item_id:
        item["id"] = item_id
    item.update(extra)
    return item


def output(call_id: str = "call_1", out: Any = "ok", **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call_output", "call_id": call_id, "output": out}
    item.update(extra)
    return item


# ---------------------------------------------------------------------------------------------
# Recorded turns (tests/fixtures/openai-responses/vercel-ai/openai-issue-11239.{1,2})


def load_chunks(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def fold_done_items(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A response's output items: the ``response.output_item.done`` items, by ``output_index``."""
    by_index: dict[int, dict[str, Any]] = {}
    for event in events:
        if event.get("type") == "response.output_item.done":
            by_index[event["output_index"]] = event["item"]
    return [by_index[k] for k in sorted(by_index)]


def response_model(events: list[dict[str, Any]]) -> str:
    return next(e["response"]["model"] for e in events if e.get("type") == "response.created")


# ---------------------------------------------------------------------------------------------
# Hypothesis strategies: Responses inputs with every replay mistake in reach

_K = st.integers(0, 3)


@st.composite
def _reasoning(draw: Any) -> dict[str, Any]:
    k = draw(_K)
    item: dict[str, Any] = {"type": "reasoning"}
    if draw(st.integers(0, 9)):
        item["id"] = f"rs_{k}"
    if draw(st.integers(0, 4)):
        item["summary"] = draw(st.sampled_from([[], [{"type": "summary_text", "text": "thinking"}]]))
    if draw(st.integers(0, 3)):
        item["encrypted_content"] = f"gAAAA{k}"
    if not draw(st.integers(0, 4)):
        item["status"] = "completed"
    if draw(st.booleans()):
        item["content"] = []
    return item


@st.composite
def _assistant(draw: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "message", "role": "assistant"}
    if draw(st.booleans()):
        item["id"] = f"msg_{draw(_K)}"
        item["status"] = draw(st.sampled_from(["completed", "incomplete", "in_progress"]))
    parts = draw(
        st.lists(
            st.sampled_from(
                [
                    {"type": "output_text", "text": "answer", "annotations": []},
                    {"type": "output_text", "text": "answer", "annotations": [], "logprobs": []},
                    {"type": "input_text", "text": "echo"},
                    {"type": "refusal", "refusal": "no"},
                    {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"},
                    {"type": "output_text", "text": "d", "annotations": [], "obfuscation": "zz"},
                ]
            ),
            max_size=3,
        )
    )
    item["content"] = parts
    if draw(st.booleans()):
        item["phase"] = draw(st.sampled_from(["commentary", "final_answer"]))
    return item


@st.composite
def _call(draw: Any) -> dict[str, Any]:
    t = draw(st.sampled_from(["function_call"] * 6 + ["custom_tool_call", "shell_call"]))
    k = draw(_K)
    item: dict[str, Any] = {"type": t, "call_id": f"call_{k}", "name": "lookup"}
    if t == "function_call":
        if draw(st.integers(0, 6)):
            item["arguments"] = '{"q":1}'
    elif t == "custom_tool_call":
        item["input"] = "raw"
    else:
        item["action"] = {"commands": ["ls"]}
    if draw(st.booleans()):
        item["id"] = f"fc_{draw(_K)}"
    if draw(st.booleans()):
        item["status"] = draw(st.sampled_from(["completed", "in_progress"]))
    return item


@st.composite
def _output(draw: Any) -> dict[str, Any]:
    t = draw(st.sampled_from(["function_call_output"] * 6 + ["custom_tool_call_output", "shell_call_output"]))
    item: dict[str, Any] = {"type": t, "call_id": f"call_{draw(_K)}"}
    item["output"] = "ok" if t != "shell_call_output" else [{"stdout": "", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]
    return item


_OTHER = st.sampled_from(
    [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"role": "user", "content": "hello"},
        {"type": "message", "role": "developer", "content": "be brief"},
        {"type": "item_reference", "id": "rs_0"},
        {"id": "msg_1"},
        {"type": "web_search_call", "id": "ws_0", "status": "completed", "action": {"type": "search", "query": "q"}},
    ]
)


@st.composite
def _with_stream_field(draw: Any, base: Any) -> dict[str, Any]:
    item = dict(draw(base))
    if not draw(st.integers(0, 9)):
        item[draw(st.sampled_from(["sequence_number", "obfuscation"]))] = 3
    return item


ANY_ITEM = _with_stream_field(st.one_of(_reasoning(), _assistant(), _call(), _output(), _OTHER))


@st.composite
def _turn(draw: Any) -> list[dict[str, Any]]:
    """A plausible model turn: [reasoning?, output item]+ then the outputs of its calls."""
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}]
    calls: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            items.append(draw(_reasoning()))
        if draw(st.booleans()):
            c = draw(_call())
            items.append(c)
            calls.append((c["type"], c["call_id"]))  # type: ignore[arg-type]
        else:
            items.append(draw(_assistant()))
    for t, cid in calls:
        if draw(st.integers(0, 4)):
            out_t = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output", "shell_call": "shell_call_output"}[t]
            items.append({"type": out_t, "call_id": cid, "output": "ok" if out_t != "shell_call_output" else []})
    return items


INPUTS = st.one_of(
    st.lists(ANY_ITEM, max_size=14),
    st.lists(_turn(), max_size=4).map(lambda turns: [i for t in turns for i in t]),
)
