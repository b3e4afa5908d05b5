"""Render a conversation (``CodecMessage`` list + tool-call states + runs) as a readable transcript.

Two layers, both free of I/O decisions:

* :func:`transcript_blocks` turns a snapshot of the conversation into a list of :class:`Block` —
  one per user text, reasoning text, assistant text, refusal, tool call and tool result — each with
  a stable ``key`` so successive snapshots can be compared.
* :class:`LivePrinter` is fed successive snapshots (as a stream grows) and writes only what is new:
  the new suffix of a growing text, or a fresh line when a tool call changes state. Its output is
  append-only, so it reads the same on a terminal, in a pipe or in a log file.

Styling uses ``rich`` when it is installed and the output is a terminal; otherwise plain text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal, TextIO

from ..codec.types import CodecMessage, OpenAIMessage

BlockKind = Literal["user", "reasoning", "assistant", "refusal", "call", "result"]

#: Kinds whose text grows by appends (printed incrementally); the others are status lines.
STREAMED_KINDS: frozenset[str] = frozenset({"user", "reasoning", "assistant", "refusal"})

_LABELS: dict[str, str] = {
    "user": "you",
    "reasoning": "thinking",
    "assistant": "assistant",
    "refusal": "refusal",
    "call": "tool",
    "result": "result",
}


@dataclass(frozen=True)
class Block:
    """One renderable piece of a conversation.

    Attributes:
        key: stable identity across snapshots (codec message id + item position / call id).
        kind: ``user`` | ``reasoning`` | ``assistant`` | ``refusal`` | ``call`` | ``result``.
        text: the text (streamed kinds) or the one-line description (status kinds).
        status: for ``call`` blocks the call's state label (``streaming``, ``called``,
            ``awaiting approval``, ``approved``, ``denied``, ``done``, ``failed``); else ``""``.
        message_id: the codec message id of the message the block comes from.
    """

    key: str
    kind: str
    text: str
    status: str = ""
    message_id: str = ""

    def line(self) -> str:
        """The block as one plain line (no trailing newline)."""
        label = _LABELS.get(self.kind, self.kind)
        if self.kind == "call":
            return f"  [{label}] {self.text} -- {self.status}"
        if self.kind == "result":
            return f"  [{label}] {self.text}"
        return f"{label}> {self.text}"


def _short(value: Any, limit: int = 160) -> str:
    """A compact one-line rendering of a tool argument / output value."""
    if not isinstance(value, str):
        try:
            value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            value = repr(value)
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _text_of_parts(parts: Any, types: tuple[str, ...], field: str = "text") -> str:
    if not isinstance(parts, list):
        return ""
    out: list[str] = []
    for part in parts:
        if isinstance(part, dict) and part.get("type") in types:
            value = part.get(field)
            if isinstance(value, str):
                out.append(value)
    return "".join(out)


def _as_message(m: Any) -> tuple[str, OpenAIMessage]:
    """Accept a :class:`CodecMessage`, a JS-shaped ``{codecMessageId, message}`` dict, or a bare message."""
    if isinstance(m, CodecMessage):
        return m.codec_message_id, m.message
    if isinstance(m, OpenAIMessage):
        return "", m
    if isinstance(m, dict):
        if "message" in m:
            return str(m.get("codecMessageId", m.get("codec_message_id", ""))), OpenAIMessage.from_dict(
                m["message"]
            )
        return "", OpenAIMessage.from_dict(m)
    raise TypeError(f"cannot render {type(m).__name__} as a conversation message")


def call_status(state: Mapping[str, Any] | None, item: Mapping[str, Any] | None, output: Any, has_output: bool) -> str:
    """The display state of one tool call from its item, its ``toolCallStates`` entry and its output."""
    state = state or {}
    approval = state.get("approval")
    if approval == "denied":
        reason = state.get("reason")
        return f"denied ({reason})" if reason else "denied"
    if state.get("result") == "failed":
        return "failed"
    if has_output:
        return "done"
    if approval == "pending":
        return "awaiting approval"
    if approval == "approved":
        return "approved, running"
    if item is not None and item.get("status") == "in_progress":
        return "streaming"
    return "called"


def transcript_blocks(messages: Iterable[Any]) -> list[Block]:
    """Blocks of a conversation snapshot, in conversation order.

    ``messages`` is a sequence of :class:`CodecMessage` (what a View's ``get_messages()`` returns),
    JS-shaped dicts or bare :class:`OpenAIMessage`. Tool calls show their approval / result state
    (from ``tool_call_states`` of the message holding the call and from any
    ``function_call_output`` in the conversation).
    """
    pairs = [_as_message(m) for m in messages]
    outputs: dict[str, Any] = {}
    names: dict[str, str] = {}
    for _, msg in pairs:
        for item in msg.items:
            if item.get("type") == "function_call_output" and isinstance(item.get("call_id"), str):
                outputs[item["call_id"]] = item.get("output")
            elif item.get("type") == "function_call" and isinstance(item.get("call_id"), str):
                names[item["call_id"]] = str(item.get("name", ""))

    out: list[Block] = []
    for index, (mid, msg) in enumerate(pairs):
        blocks: list[Block] = []
        base = mid or f"#{index}"
        seen_calls: set[str] = set()
        for i, item in enumerate(msg.items):
            item_id = item.get("id")
            key = f"{base}/{item_id}" if isinstance(item_id, str) and item_id else f"{base}/#{i}"
            kind = item.get("type")
            if kind == "message":
                content = item.get("content")
                if msg.role == "user" or item.get("role") == "user":
                    if isinstance(content, str):
                        text = content
                    else:
                        text = _text_of_parts(content, ("input_text", "output_text"))
                    blocks.append(Block(key, "user", text))
                    continue
                text = _text_of_parts(content, ("output_text",))
                refusal = _text_of_parts(content, ("refusal",), "refusal")
                if text or not refusal:
                    blocks.append(Block(key, "assistant", text))
                if refusal:
                    blocks.append(Block(key + "/refusal", "refusal", refusal))
            elif kind == "reasoning":
                text = _text_of_parts(item.get("summary"), ("summary_text",))
                raw = _text_of_parts(item.get("content"), ("reasoning_text",))
                blocks.append(Block(key, "reasoning", text or raw))
            elif kind == "function_call":
                call_id = str(item.get("call_id", ""))
                seen_calls.add(call_id)
                desc = f"{item.get('name', '?')}({_short(item.get('arguments', ''))})"
                status = call_status(
                    msg.tool_call_states.get(call_id), item, outputs.get(call_id), call_id in outputs
                )
                blocks.append(Block(f"call:{call_id or key}", "call", desc, status))
            elif kind == "function_call_output":
                call_id = str(item.get("call_id", ""))
                state = msg.tool_call_states.get(call_id) or {}
                if state.get("approval") == "denied":
                    continue  # the rejection output is shown on the call line
                name = names.get(call_id, call_id)
                blocks.append(Block(f"result:{call_id or key}", "result", f"{name} -> {_short(item.get('output'))}"))
        # States without a call item in this message (e.g. an approval request published alone).
        for call_id, state in msg.tool_call_states.items():
            if call_id in seen_calls or call_id in names:
                continue
            desc = f"{state.get('name', '?')}({_short(state.get('arguments', ''))})"
            status = call_status(state, None, outputs.get(call_id), call_id in outputs)
            blocks.append(Block(f"call:{call_id}", "call", desc, status))
        out.extend(replace(b, message_id=mid) for b in blocks)
    return out


def render_transcript(messages: Iterable[Any]) -> str:
    """The whole conversation as plain text, one block per line (a static rendering)."""
    return "".join(b.line() + "\n" for b in transcript_blocks(messages) if b.text or b.kind not in STREAMED_KINDS)


# -------------------------------------------------------------------------------------------------
# Live output


class _Styler:
    """Plain or rich styling of labels; ``write`` never adds a newline by itself."""

    _STYLES: ClassVar[dict[str, str]] = {
        "user": "bold cyan",
        "reasoning": "dim italic",
        "assistant": "bold green",
        "refusal": "bold red",
        "call": "bold yellow",
        "result": "magenta",
        "note": "dim",
        "error": "bold red",
    }

    def __init__(self, out: TextIO, color: bool | None) -> None:
        self.out = out
        self._console: Any = None
        want = color if color is not None else bool(getattr(out, "isatty", lambda: False)())
        if want:
            try:
                from rich.console import Console
            except ImportError:  # rich is an optional extra (ai-transport[cli])
                Console = None  # type: ignore[assignment,misc]
            if Console is not None:
                self._console = Console(file=out, highlight=False, soft_wrap=True, force_terminal=True)

    def write(self, text: str, style: str | None = None) -> None:
        if not text:
            return
        if self._console is not None:
            from rich.text import Text

            self._console.print(Text(text, style=self._STYLES.get(style or "", "")), end="")
        else:
            self.out.write(text)
        self.out.flush()


class LivePrinter:
    """Writes a growing conversation incrementally (append-only output).

    Call :meth:`update` with each new snapshot (a list of messages); it prints the new suffix of
    texts that grew, opens a new labelled line for a new block (or when another block interrupted
    the one being streamed), and prints a fresh status line each time a tool call changes state.
    :meth:`note` prints a free line (run started / suspended / ended). Call :meth:`close` at the end.
    """

    def __init__(self, out: TextIO, *, color: bool | None = None, show_reasoning: bool = True) -> None:
        self._style = _Styler(out, color)
        self._printed: dict[str, str] = {}
        self._open: str | None = None
        self.show_reasoning = show_reasoning

    def _end_line(self) -> None:
        if self._open is not None:
            self._style.write("\n")
            self._open = None

    def note(self, text: str, style: str = "note") -> None:
        """Print one line of its own (closing any streamed line first)."""
        self._end_line()
        self._style.write(text + "\n", style)

    def update(self, messages: Sequence[Any]) -> None:
        """Print what changed since the previous snapshot."""
        self.update_blocks(transcript_blocks(messages))

    def update_blocks(self, blocks: Sequence[Block]) -> None:
        """Like :meth:`update` for precomputed blocks."""
        for block in blocks:
            if block.kind == "reasoning" and not self.show_reasoning:
                continue
            prev = self._printed.get(block.key)
            if block.kind in STREAMED_KINDS:
                self._stream(block, prev)
            else:
                shown = f"{block.text}\x00{block.status}"
                if prev == shown:
                    continue
                # Arguments still streaming: the call is printed once they are complete.
                if block.status == "streaming":
                    continue
                self._printed[block.key] = shown
                self._end_line()
                self._style.write(block.line() + "\n", block.kind)

    def _stream(self, block: Block, prev: str | None) -> None:
        text = block.text
        if prev is None:
            if not text:
                return
            self._end_line()
            self._style.write(f"{_LABELS[block.kind]}> ", block.kind)
            self._style.write(text)
        elif text.startswith(prev):
            suffix = text[len(prev):]
            if not suffix:
                return
            if self._open != block.key:
                self._end_line()
                self._style.write(f"{_LABELS[block.kind]} (cont.)> ", block.kind)
            self._style.write(suffix)
        else:
            self._end_line()
            self._style.write(f"{_LABELS[block.kind]} (revised)> ", block.kind)
            self._style.write(text)
        self._printed[block.key] = text
        self._open = block.key

    def close(self) -> None:
        """Finish the current line."""
        self._end_line()
