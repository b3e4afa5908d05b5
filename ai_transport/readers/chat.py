"""Chat Completions conversation shape (for providers reached through Chat Completions).

Pure functions over plain Chat Completions message dicts (``{"role": ..., "content": ...}``):

* every ``tool_calls`` entry of an assistant message must be answered by a ``role: "tool"``
  message with the same ``tool_call_id`` *directly after it* (in the run of tool messages that
  follows the assistant message): :func:`unanswered_tool_calls`, :func:`answer_unanswered_tool_calls`;
* :func:`trim_turns` keeps the newest whole turns;
* :func:`build_request_messages` / :func:`with_context` build a cache-friendly request: a stable
  system prompt, the history, then the current user message carrying live state;
* :func:`to_chat_completions_messages` turns our Responses-item conversation into Chat
  Completions messages.

**Turn.** A turn starts at a ``user`` message and runs until the next turn starts: the user
message, the assistant replies, their tool calls and the tool messages answering them. A user
message placed between a tool call and one of its answers does not start a turn (so a call is never
separated from its answers). Messages before the first user message form a leading turn of their
own. Nothing here mutates its arguments; new lists are returned and untouched messages are the
caller's objects.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Union

from ..codec.types import OpenAIMessage
from ..errors import InvalidArgumentError, InvalidTypeError, type_name
from .input_items import _object_array

__all__ = [
    "CONTEXT_PREAMBLE",
    "DEFAULT_UNANSWERED_RESULT",
    "TrimResult",
    "answer_unanswered_tool_calls",
    "build_request_messages",
    "note_message",
    "split_turns",
    "to_chat_completions_messages",
    "trim_turns",
    "unanswered_tool_calls",
    "with_context",
]

log = logging.getLogger("ai_transport.readers.chat")

ChatMessage = dict[str, Any]

#: Added to the system prompt when a context block is in use (see :func:`build_request_messages`).
CONTEXT_PREAMBLE = (
    "The latest user message may end with a <context> block. It is not written by the user: it holds "
    "the live application state at the time of that message. Prefer it over older information in the "
    "conversation."
)

#: Default content of a synthesised answer (JSON-encoded by :func:`answer_unanswered_tool_calls`).
DEFAULT_UNANSWERED_RESULT = {"error": "no_result", "message": "The tool call was not answered."}


def _check_messages(messages: Any, name: str = "messages") -> list[Mapping[str, Any]]:
    return _object_array(messages, name, "messages")


def _tool_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [c for c in calls if isinstance(c, Mapping)]


def _answer_run_end(messages: Sequence[Mapping[str, Any]], i: int) -> int:
    """Index just past the run of ``tool`` messages after ``messages[i]``."""
    j = i + 1
    while j < len(messages) and messages[j].get("role") == "tool":
        j += 1
    return j


def unanswered_tool_calls(turn: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``tool_calls`` entries not answered by a ``tool`` message directly after their assistant message.

    "Directly after" is the run of ``role: "tool"`` messages right after the assistant message. An
    answer found anywhere else does not count (the API rejects it there). Returns the entries
    themselves, in order.
    """
    messages = _check_messages(turn, "turn")
    missing: list[Mapping[str, Any]] = []
    for i, message in enumerate(messages):
        calls = _tool_calls(message)
        if not calls:
            continue
        end = _answer_run_end(messages, i)
        answered = {m.get("tool_call_id") for m in messages[i + 1 : end]}
        missing.extend(c for c in calls if c.get("id") not in answered)
    return missing


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def answer_unanswered_tool_calls(
    turn: Sequence[Mapping[str, Any]],
    result: Any = DEFAULT_UNANSWERED_RESULT,
) -> list[ChatMessage]:
    """A copy of ``turn`` where every tool call is answered directly after its assistant message.

    For each assistant message, the missing answers are placed right after its existing answers,
    in ``tool_calls`` order. A ``tool`` message answering the call that sits anywhere else in the
    turn (misplaced) is moved there; otherwise a ``{"role": "tool", "tool_call_id", "content"}``
    message is created whose content is ``result`` — called with the tool call entry when callable
    — used as-is when a string and JSON-encoded otherwise. Afterwards :func:`unanswered_tool_calls`
    is empty. Other messages keep their order and identity.
    """
    messages = _check_messages(turn, "turn")
    n = len(messages)
    in_place: set[int] = set()
    missing: dict[int, list[Mapping[str, Any]]] = {}
    for i, message in enumerate(messages):
        calls = _tool_calls(message)
        if not calls:
            continue
        ids = {c.get("id") for c in calls}
        answered: set[Any] = set()
        for j in range(i + 1, _answer_run_end(messages, i)):
            cid = messages[j].get("tool_call_id")
            if cid in ids and cid not in answered:
                answered.add(cid)
                in_place.add(j)
        todo = [c for c in calls if c.get("id") not in answered]
        if todo:
            missing[i] = todo
    movable: dict[Any, list[int]] = {}
    for j, m in enumerate(messages):
        if m.get("role") == "tool" and j not in in_place:
            movable.setdefault(m.get("tool_call_id"), []).append(j)
    moved: set[int] = set()
    insert_at: dict[int, list[ChatMessage]] = {}
    for i, calls in missing.items():
        extra: list[ChatMessage] = []
        done: set[Any] = set()
        for call in calls:
            cid = call.get("id")
            if cid in done:
                continue
            done.add(cid)
            candidates = movable.get(cid)
            if candidates:
                j = candidates.pop(0)
                moved.add(j)
                extra.append(messages[j])  # type: ignore[arg-type]
                continue
            value = result(call) if callable(result) else result
            extra.append({"role": "tool", "tool_call_id": cid, "content": _content(value)})
        insert_at[_answer_run_end(messages, i)] = extra
    out: list[ChatMessage] = []
    for k in range(n + 1):
        if k in insert_at:
            out.extend(insert_at[k])
        if k < n and k not in moved:
            out.append(messages[k])  # type: ignore[arg-type]
    return out


def _boundaries(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Start indexes of the turns of ``messages`` (see the module docstring)."""
    n = len(messages)
    call_at: dict[Any, int] = {}
    for i, m in enumerate(messages):
        for call in _tool_calls(m):
            call_at.setdefault(call.get("id"), i)
    # reach[k]: the last answer index of a call made just before k; k is inside [call+1, answer]
    reach = [-1] * (n + 1)
    for j, m in enumerate(messages):
        if m.get("role") == "tool":
            at = call_at.get(m.get("tool_call_id"))
            if at is not None and at < j:
                reach[at + 1] = max(reach[at + 1], j)
    starts = [0] if n else []
    running = -1
    for k in range(1, n):
        running = max(running, reach[k])
        if messages[k].get("role") == "user" and running < k:
            starts.append(k)
    return starts


def split_turns(messages: Sequence[Mapping[str, Any]]) -> list[list[ChatMessage]]:
    """``messages`` cut into turns (each a list; concatenated they are ``messages`` again)."""
    listed = _check_messages(messages)
    starts = _boundaries(listed)
    ends = starts[1:] + [len(listed)]
    return [[dict(m) if not isinstance(m, dict) else m for m in listed[s:e]] for s, e in zip(starts, ends)]


class TrimResult(NamedTuple):
    """Result of :func:`trim_turns`: the kept ``messages`` and how many turns were ``dropped``."""

    messages: list[ChatMessage]
    dropped: int


def trim_turns(turns: Sequence[Any], max: int) -> TrimResult:
    """Keep the newest ``max`` whole turns; return them and how many turns were dropped.

    ``turns`` is either a flat Chat Completions message list (without the system prompt), cut with
    :func:`split_turns` so a tool call always stays with its answers — the kept ``messages`` are
    then flat too — or a list of turns already split (each a list of messages), returned as a list
    of the kept turns. ``max=0`` keeps nothing. ``kept, dropped = trim_turns(...)`` unpacks.
    """
    if not isinstance(max, int) or isinstance(max, bool):
        raise InvalidTypeError(f"max must be an integer, got {type_name(max)}")
    if max < 0:
        raise InvalidArgumentError(f"max must be >= 0, got {max}")
    if isinstance(turns, Sequence) and turns and all(
        isinstance(t, Sequence) and not isinstance(t, (str, bytes, Mapping)) for t in turns
    ):
        pre_split = list(turns)
        keep = pre_split[len(pre_split) - max :] if max < len(pre_split) else pre_split
        return TrimResult(keep, len(pre_split) - len(keep))
    split = split_turns(turns)
    start = len(split) - max if max < len(split) else 0
    kept = split[start:]
    return TrimResult([m for turn in kept for m in turn], len(split) - len(kept))


def with_context(user_text: str, context: Any = None) -> str:
    """The current user message text carrying live state: ``user_text`` then a ``<context>`` block.

    ``context`` may be a string (used as-is) or any JSON-encodable value (encoded compactly,
    keys in their given order). ``None`` means no block.
    """
    if not isinstance(user_text, str):
        raise InvalidTypeError(f"user_text must be a string, got {type_name(user_text)}")
    if context is None:
        return user_text
    block = context if isinstance(context, str) else json.dumps(context, ensure_ascii=False, separators=(",", ":"))
    return f"{user_text}\n\n<context>\n{block}\n</context>"


def note_message(text: str) -> ChatMessage:
    """A mid-conversation note for the model: a ``user`` message (never a ``system`` one).

    A system message in the middle would break the cached prefix and is treated by some providers
    as a new instruction set; a note is information, so it travels as user content.
    """
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be a string, got {type_name(text)}")
    return {"role": "user", "content": f"<note>\n{text}\n</note>"}


def build_request_messages(
    system_prompt: str,
    history: Sequence[Mapping[str, Any]],
    user_text: str,
    context: Any = None,
    *,
    preamble: str = CONTEXT_PREAMBLE,
) -> list[ChatMessage]:
    """``[system, *history, user]`` with a stable (cache-friendly) prefix.

    The system prompt never carries live state: it is ``system_prompt`` alone, or — whenever a
    context block is in use (``context`` is not ``None``) — ``system_prompt`` plus ``preamble``,
    identical on every turn. The live state travels in the current user message after the history
    (:func:`with_context`). Store the user message as sent so the next request's prefix is
    byte-identical. ``history`` must not contain system messages (use :func:`note_message`).
    """
    if not isinstance(system_prompt, str):
        raise InvalidTypeError(f"system_prompt must be a string, got {type_name(system_prompt)}")
    listed = _check_messages(history, "history")
    for i, m in enumerate(listed):
        if m.get("role") in ("system", "developer"):
            raise InvalidArgumentError(
                f"history[{i}] is a {m.get('role')} message; put notes in user messages (note_message) "
                "and instructions in the system prompt"
            )
    system = system_prompt if context is None else f"{system_prompt}\n\n{preamble}" if system_prompt else preamble
    return [
        {"role": "system", "content": system},
        *listed,  # type: ignore[list-item]
        {"role": "user", "content": with_context(user_text, context)},
    ]


# ---------------------------------------------------------------------------------------------
# Responses items -> Chat Completions messages

MessageLike = Union[OpenAIMessage, Mapping[str, Any]]  # noqa: UP007


def _user_part(part: Any) -> dict[str, Any] | None:
    if not isinstance(part, Mapping):
        return None
    t = part.get("type")
    if t in ("input_text", "output_text", "text"):
        return {"type": "text", "text": part.get("text", "")}
    if t == "input_image" and isinstance(part.get("image_url"), str):
        image: dict[str, Any] = {"url": part["image_url"]}
        if part.get("detail") is not None:
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if t == "input_file" and (part.get("file_id") or part.get("file_data")):
        f = {k: part[k] for k in ("file_id", "file_data", "filename") if part.get(k) is not None}
        return {"type": "file", "file": f}
    log.debug("to_chat_completions_messages: content part of type %r has no Chat Completions form; skipped", t)
    return None


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [p for p in (_user_part(x) for x in content) if p is not None]
    if len(parts) == 1 and parts[0]["type"] == "text":
        return parts[0]["text"]
    if all(p["type"] == "text" for p in parts):
        return parts if parts else ""
    return parts


def _assistant_text(content: Any) -> tuple[str, str]:
    if isinstance(content, str):
        return content, ""
    text: list[str] = []
    refusal: list[str] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") in ("output_text", "input_text", "text") and isinstance(part.get("text"), str):
            text.append(part["text"])
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            refusal.append(part["refusal"])
    return "".join(text), "".join(refusal)


def _tool_output_content(output: Any) -> Any:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        parts = [
            {"type": "text", "text": p.get("text", "")}
            for p in output
            if isinstance(p, Mapping) and p.get("type") in ("input_text", "output_text", "text")
        ]
        if len(parts) != len(output):
            log.debug("to_chat_completions_messages: non-text tool output parts skipped")
        return parts if parts else ""
    return _content(output)


def to_chat_completions_messages(openai_messages: Sequence[MessageLike]) -> list[ChatMessage]:
    """Our Responses-item conversation as Chat Completions messages.

    ``openai_messages`` holds :class:`~ai_transport.codec.types.OpenAIMessage` objects or dicts
    ``{role, items, toolCallStates?}``. Items map as follows, in order:

    * input ``message`` (user/system/developer): ``{"role", "content"}``; ``input_text`` parts
      become a string (one part) or text parts, ``input_image`` (URL) an ``image_url`` part,
      ``input_file`` (id or data) a ``file`` part; parts with no Chat Completions form are skipped;
    * consecutive assistant output items (``message`` text and ``function_call`` /
      ``custom_tool_call``) merge into one assistant message: ``content`` (texts joined by a blank
      line, ``None`` when only calls), ``refusal`` when there is one, ``tool_calls``;
    * ``function_call_output`` / ``custom_tool_call_output``: a ``{"role": "tool", "tool_call_id",
      "content"}`` message, placed directly after the assistant message holding its call (moved
      there if it was stored later); an output whose call is not in the conversation is dropped;
    * ``reasoning`` and other items (built-in tool calls) are dropped.

    Calls still waiting for an answer stay unanswered (:func:`answer_unanswered_tool_calls` fills
    them in).
    """
    if isinstance(openai_messages, (str, bytes, Mapping)) or not isinstance(openai_messages, Iterable):
        raise InvalidTypeError(f"messages must be an array of messages, got {type_name(openai_messages)}")
    flat: list[tuple[str, Mapping[str, Any]]] = []
    for i, message in enumerate(openai_messages):
        msg = message if isinstance(message, OpenAIMessage) else OpenAIMessage.from_dict(message, path=f"messages[{i}]")
        flat.extend((msg.role, item) for item in msg.items)

    call_ids = {
        item.get("call_id")
        for _, item in flat
        if item.get("type") in ("function_call", "custom_tool_call") and isinstance(item.get("call_id"), str)
    }
    outputs: dict[str, Mapping[str, Any]] = {}
    for _, item in flat:
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            cid = item.get("call_id")
            if isinstance(cid, str) and cid in call_ids:
                outputs.setdefault(cid, item)
            else:
                log.debug("to_chat_completions_messages: output for unknown call_id %r dropped", cid)

    out: list[ChatMessage] = []
    pending: ChatMessage | None = None  # the assistant message being merged
    texts: list[str] = []
    emitted: set[str] = set()

    def flush() -> None:
        nonlocal pending, texts
        if pending is None:
            return
        pending["content"] = "\n\n".join(texts) if texts else None
        if not pending.get("tool_calls"):
            pending.pop("tool_calls", None)
            if pending["content"] is None and not pending.get("refusal"):
                pending, texts = None, []
                return  # an assistant message with nothing in it is not a valid message
        out.append(pending)
        for call in pending.get("tool_calls", []):
            answer = outputs.get(call["id"])
            if answer is not None and call["id"] not in emitted:
                emitted.add(call["id"])
                out.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": _tool_output_content(answer.get("output"))}
                )
        pending, texts = None, []

    for role, item in flat:
        t = item.get("type")
        item_role = item.get("role")
        if (t is None or t == "message") and item_role == "assistant":
            if pending is None:
                pending = {"role": "assistant", "content": None, "tool_calls": []}
            text, refusal = _assistant_text(item.get("content"))
            if text:
                texts.append(text)
            if refusal:
                pending["refusal"] = (pending.get("refusal", "") + refusal) if pending.get("refusal") else refusal
        elif t in ("function_call", "custom_tool_call"):
            if pending is None:
                pending = {"role": "assistant", "content": None, "tool_calls": []}
            cid = item.get("call_id")
            if t == "function_call":
                entry = {
                    "id": cid,
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"},
                }
            else:
                entry = {"id": cid, "type": "custom", "custom": {"name": item.get("name"), "input": item.get("input", "")}}
            pending["tool_calls"].append(entry)
        elif t in ("function_call_output", "custom_tool_call_output"):
            flush()  # an output ends the assistant step; it is placed after its call
        elif t == "reasoning":
            continue  # no Chat Completions form
        elif t is None or t == "message":
            flush()
            r = item_role if item_role in ("user", "system", "developer") else role
            content = _user_content(item.get("content"))
            if r != "user" and isinstance(content, list):  # system/developer content is text only
                content = "\n".join(p["text"] for p in content if p["type"] == "text")
            out.append({"role": r, "content": content})
        else:
            log.debug("to_chat_completions_messages: item of type %r has no Chat Completions form; skipped", t)
    flush()
    return out


