"""The Vercel reducer's projection and its lookups (``vercel/codec/reducer-state.ts`` of 0.8.0).

A :class:`UIProjection` holds the run's ``UIMessage`` dicts in publication order, each paired with
its codec-message-id, the per-message stream trackers (text / reasoning stream id -> part index,
tool call id -> part index + streamed input text) and the tool resolutions that arrived before
their assistant. Streamed text is kept as chunks and joined when the messages are read (appends
stay O(1), as JS strings are ropes).
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..core.headers import MISSING
from ..core.types import CodecMessage

__all__ = ["MessageTrackers", "Repair", "ToolTracker", "UIProjection", "is_tool_part", "tool_name"]

Part = dict[str, Any]
UIMessage = dict[str, Any]


class ToolTracker:
    """A tool part being built: its index in ``parts`` and the streamed input text so far."""

    __slots__ = ("input_text", "part_index")

    def __init__(self, part_index: int, input_text: str = "") -> None:
        self.part_index = part_index
        self.input_text = input_text


class MessageTrackers:
    """Per-codec-message-id stream trackers (``MessageTrackers``)."""

    __slots__ = ("reasoning", "text", "tools")

    def __init__(self) -> None:
        self.text: dict[Any, int] = {}
        self.reasoning: dict[Any, int] = {}
        self.tools: dict[Any, ToolTracker] = {}


class Repair(dict[str, Any]):
    """A lifecycle chunk the decoder made up rather than read (a mid-stream join's ``start`` /
    ``start-step`` pre-roll, :func:`~.codec.decode_lifecycle`), equal to the chunk it stands for.
    The decoder judges the pre-roll in arrival order, and history arrives newest page first: a
    stream decoded before its step's ``start-step`` is pre-rolled with one. The reducer folds in
    serial order and knows better: a repaired ``start-step`` while the run's step is open is
    dropped, so history in any page size folds to what live does."""

    __slots__ = ()


class UIProjection:
    """The per-run state of the Vercel reducer (``VercelProjection``); read it with ``get_messages``."""

    __slots__ = (
        "_by_id",
        "_pending_text",
        "entries",
        "open_steps",
        "pending_by_author",
        "pending_resolutions",
        "run",
        "seeded",
        "trackers",
    )

    def __init__(self) -> None:
        #: ``CodecMessage(codec_message_id, UIMessage dict)`` in publication order.
        self.entries: list[CodecMessage] = []
        #: codec-message-id -> index in ``entries`` of its first entry: positions, not the entries
        #: (a dict of atoms the cyclic GC does not track; a woken worker keeps every node's).
        self._by_id: dict[Any, int] = {}
        self.trackers: dict[Any, MessageTrackers] = {}
        #: ``(target codec-message-id, tool call id, resolution dict, author)`` waiting for their tool
        #: part, in arrival order; ``author`` is the publisher Ably verified (None: not known).
        #: ``()`` while none waits (an empty list would be one more GC-tracked object per node).
        self.pending_resolutions: list[tuple[Any, Any, dict[str, Any], str | None]] | tuple[()] = ()
        #: author -> how many of ``pending_resolutions`` are theirs (the bound is per publisher).
        self.pending_by_author: dict[str | None, int] = {}
        #: ``id(part) -> (part, chunks)``: text appended to a part since the last read.
        self._pending_text: dict[int, tuple[Part, list[str]]] = {}
        #: The text run: ``(codec message id, stream id, chunks)`` of the text delta the last fold
        #: appended (the stream id the same object), while nothing else touched the state; None
        #: otherwise. A text delta of the same message and stream appends to ``chunks`` at once.
        self.run: tuple[str, str, list[str]] | None = None
        #: The codec-message-ids of the entries a fork seed made (``forkSeed``: a client's copy of a
        #: run's messages, :func:`~.tool_folds.seed_fork`); None while there are none. What they
        #: hold is the client's word, never the agent's (:func:`~.readers.vouched_calls`).
        self.seeded: set[Any] | None = None
        #: The codec-message-ids with a ``start-step`` folded and no ``finish-step`` / ``finish`` /
        #: ``error`` / ``abort`` since (each resets the run's lifecycle scope in the decoder: the
        #: decoder's judgement, in serial order; a :class:`Repair` of their step is moot); None: none.
        self.open_steps: set[Any] | None = None

    def find(self, codec_message_id: Any) -> CodecMessage | None:
        """The entry of ``codec_message_id`` (``messages.find``), else None."""
        try:
            at = self._by_id.get(codec_message_id)
        except TypeError:  # an unhashable id from the wire: never a key
            return None
        return None if at is None else self.entries[at]

    def push(self, codec_message_id: Any, message: UIMessage) -> CodecMessage:
        """Append a new entry (the first entry of an id is the one ``find`` answers)."""
        entry = CodecMessage(codec_message_id, message)
        with contextlib.suppress(TypeError):
            self._by_id.setdefault(codec_message_id, len(self.entries))
        self.entries.append(entry)
        return entry

    def ensure_message(self, codec_message_id: Any) -> UIMessage:
        """The message of ``codec_message_id``, seeding an empty assistant when none exists."""
        entry = self.find(codec_message_id)
        if entry is None:
            entry = self.push(codec_message_id, {"id": codec_message_id, "role": "assistant", "parts": []})
        return entry.message

    def ensure_trackers(self, codec_message_id: Any) -> MessageTrackers:
        """The trackers of ``codec_message_id`` (created empty)."""
        try:
            trackers = self.trackers.get(codec_message_id)
        except TypeError:
            return MessageTrackers()
        if trackers is None:
            trackers = self.trackers[codec_message_id] = MessageTrackers()
        return trackers

    def append_text(self, part: Part, delta: str) -> list[str]:
        """``part.text += delta``, deferred until the next read; the part's pending chunks."""
        pending = self._pending_text.get(id(part))
        if pending is None or pending[0] is not part:
            chunks = [delta]
            self._pending_text[id(part)] = (part, chunks)
            return chunks
        pending[1].append(delta)
        return pending[1]

    def flush(self) -> None:
        """Join the deferred text into its parts."""
        self.run = None
        if self._pending_text:
            for part, chunks in self._pending_text.values():
                part["text"] = _js_concat(part.get("text", MISSING), "".join(chunks))
            self._pending_text = {}  # (not .clear(): an emptied dict stays GC-tracked until a full collection)

    def messages(self) -> list[CodecMessage]:
        """The entries, text flushed (``getMessages``)."""
        self.flush()
        return list(self.entries)

    def __repr__(self) -> str:
        return f"UIProjection(messages={len(self.entries)})"


def _js_concat(text: Any, suffix: str) -> Any:
    if type(text) is str:
        return text + suffix
    from ..core.headers import js_to_string

    return js_to_string(text) + suffix


def is_tool_part(part: Any) -> bool:
    """``isToolPart``: a ``dynamic-tool`` or ``tool-*`` part carrying ``toolCallId`` and ``state``."""
    if type(part) is not dict:
        return False
    t = part.get("type")
    return (
        isinstance(t, str)
        and (t == "dynamic-tool" or t.startswith("tool-"))
        and "toolCallId" in part
        and "state" in part
    )


def tool_name(part: Part) -> Any:
    """The AI SDK's ``getToolName``: ``toolName`` of a dynamic tool, else the type after ``tool-``."""
    if part.get("type") == "dynamic-tool":
        return part.get("toolName", MISSING)
    return "-".join(str(part["type"]).split("-")[1:])
