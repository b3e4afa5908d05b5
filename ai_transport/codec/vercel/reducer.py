"""The Vercel codec reducer: inputs and UI message stream chunks folded into ``UIMessage`` dicts.

Mirrors ``vercel/codec/reducer.ts`` and its ``fold-*`` modules of ``@ably/ai-transport@0.8.0``:
``fold(state, direction, event, message_id)`` mutates and returns the :class:`UIProjection`;
``get_messages`` gives ``CodecMessage(codec_message_id, UIMessage)`` in publication order. The
reducer correlates strictly on the codec-message-id (``message.id`` is kept verbatim from the
stream's ``start.messageId`` or the caller's message). A chunk without a codec-message-id, a
chunk type it does not project, an orphan tool output: dropped silently, as 0.8.0 does.
"""

from __future__ import annotations

import logging
from typing import Any

from ..core.headers import MISSING
from ..core.types import CodecMessage
from .state import Repair, UIProjection
from .tool_folds import fold_tool_input, fold_tool_output, resolve_or_pend, retry_pending, seed_fork

__all__ = ["UIProjection", "fold", "get_messages", "init"]

logger = logging.getLogger("ai_transport.codec.vercel")

Chunk = dict[str, Any]


def init() -> UIProjection:
    """An empty projection (``init``)."""
    return UIProjection()


def get_messages(state: UIProjection) -> list[CodecMessage]:
    """The projection's messages, each a :class:`CodecMessage` over a ``UIMessage`` dict."""
    return state.messages()


def fold(
    state: UIProjection,
    direction: str,
    event: Any,
    message_id: str | None = None,
    serial: str = "",
    author: str | None = None,
) -> UIProjection:
    """Fold one ``"input"`` / ``"output"`` event (``fold``); ``message_id`` is the codec-message-id.

    ``author`` is the publisher of the wire the event came from, as Ably verified it (its
    ``clientId``): a tool answer waiting for its tool part counts against its author's bound only.
    """
    kind = type(event)
    if kind is dict or kind is Repair:
        if direction == "output" and message_id is not None and event.get("type") == "text-delta":
            run = state.run
            delta = event.get("delta")
            if (
                run is not None
                and type(delta) is str
                and event.get("id") is run[1]
                and (message_id is run[0] or (type(message_id) is str and message_id == run[0]))
            ):
                # One more delta of the text part the last fold appended to (nothing else folded
                # since, so the same message and stream id resolve to the same part).
                run[2].append(delta)
            else:
                state.run = None
                if not _text_delta(state, event, message_id):
                    _fold_chunk(state, event, message_id)
        elif direction == "input":
            state.run = None
            _fold_input(state, event, message_id, author)
        elif message_id is not None:
            state.run = None
            _fold_chunk(state, event, message_id)
        if state.pending_resolutions:
            retry_pending(state)
    return state


def _text_delta(state: UIProjection, c: Chunk, mid: str) -> bool:
    """The per-delta fast path of an open text stream; False: take the general fold."""
    trackers = state.trackers.get(mid)
    stream_id = c.get("id")
    delta = c.get("delta")
    if trackers is None or type(stream_id) is not str or type(delta) is not str:
        return False
    index = trackers.text.get(stream_id)
    entry = state.find(mid)
    if index is None or entry is None:
        return False
    parts = entry.message["parts"]
    if 0 <= index < len(parts):
        part = parts[index]
        if type(part) is dict and part.get("type") == "text":
            chunks = state.append_text(part, delta)
            if type(mid) is str:
                state.run = (mid, stream_id, chunks)
    return True


# -- inputs (fold-input.ts) ------------------------------------------------------------------------


def _payload(event: Chunk) -> Chunk:
    payload = event.get("payload")
    return payload if type(payload) is dict else {}


def _fold_input(state: UIProjection, event: Chunk, message_id: str | None, author: str | None) -> None:
    kind = event.get("kind")
    if kind == "user-message":
        message = event.get("message")
        if type(message) is not dict:
            return
        parts = message.get("parts")
        # The event stays as decoded (a refold replays it): the projection owns a copy.
        own = {**message, "parts": list(parts)} if isinstance(parts, list) else dict(message)
        if message_id is None:
            state.push(message.get("id", MISSING), own)
            return
        existing = state.find(message_id)
        if existing is None:
            state.push(message_id, own)
        elif isinstance(parts, list):
            existing.message["parts"].extend(parts)
    elif kind == "tool-result":
        p = _payload(event)
        seed_fork(state, event.get("codecMessageId"), p.get("forkSeed"))
        resolve_or_pend(
            state,
            event.get("codecMessageId"),
            p.get("toolCallId"),
            {"kind": kind, "output": p.get("output", MISSING)},
            author,
        )
    elif kind == "tool-result-error":
        p = _payload(event)
        seed_fork(state, event.get("codecMessageId"), p.get("forkSeed"))
        resolve_or_pend(
            state,
            event.get("codecMessageId"),
            p.get("toolCallId"),
            {"kind": kind, "message": p.get("message", MISSING)},
            author,
        )
    elif kind == "tool-approval-response":
        p = _payload(event)
        resolution: Chunk = {"kind": kind, "approved": p.get("approved", MISSING)}
        if "reason" in p:
            resolution["reason"] = p["reason"]
        resolve_or_pend(state, event.get("codecMessageId"), p.get("toolCallId"), resolution, author)
    # regenerate: a wire-only signal, nothing to fold


# -- output chunks ------------------------------------------------------------------------------------


def _fold_chunk(state: UIProjection, c: Chunk, mid: str) -> None:
    t = c.get("type")
    arm = _ARMS.get(t) if type(t) is str else None
    if arm is not None:
        arm(state, c, mid)
    elif type(t) is str and t.startswith("data-"):
        _fold_data(state, c, mid)


def _fold_start(state: UIProjection, c: Chunk, mid: str) -> None:
    message = state.ensure_message(mid)
    if c.get("messageId", MISSING) is not MISSING:
        message["id"] = c["messageId"]
    if c.get("messageMetadata", MISSING) is not MISSING:
        message["metadata"] = c["messageMetadata"]


def _fold_start_step(state: UIProjection, c: Chunk, mid: str) -> None:
    steps = state.open_steps
    try:  # (an unhashable id from the wire: never found, never kept)
        if type(c) is Repair and steps is not None and mid in steps:
            return  # a pre-roll the decoder judged in arrival order: this step started already
        if steps is None:
            steps = state.open_steps = set()
        steps.add(mid)
    except TypeError:
        pass
    state.ensure_message(mid)["parts"].append({"type": "step-start"})


def _fold_finish_step(state: UIProjection, c: Chunk, mid: str) -> None:
    state.open_steps = None  # (the decoder re-arms the run's start-step: its next stream is pre-rolled)
    trackers = state.trackers.get(mid)
    if trackers is not None:  # a follow-up step may reuse stream ids
        trackers.text.clear()
        trackers.reasoning.clear()


def _fold_finish(state: UIProjection, c: Chunk, mid: str) -> None:
    state.open_steps = None  # (the decoder forgets the run: its next stream is pre-rolled)
    _fold_metadata(state, c, mid)


def _fold_run_end(state: UIProjection, c: Chunk, mid: str) -> None:
    """``abort`` / ``error``: run termination is the run-end event's, not the projection's (the
    decoder forgets the run: its next stream is pre-rolled)."""
    state.open_steps = None


def _fold_metadata(state: UIProjection, c: Chunk, mid: str) -> None:
    metadata = c.get("messageMetadata", MISSING)
    if metadata is MISSING:
        return
    entry = state.find(mid)
    if entry is not None:
        entry.message["metadata"] = metadata


def _fold_text(state: UIProjection, c: Chunk, mid: str) -> None:
    message = state.ensure_message(mid)
    trackers = state.ensure_trackers(mid)
    t: str = c["type"]
    is_text = t.startswith("text-")
    part_type = "text" if is_text else "reasoning"
    active = trackers.text if is_text else trackers.reasoning
    stream_id = c.get("id", MISSING)
    parts = message["parts"]
    try:
        if t.endswith("-start"):
            active[stream_id] = len(parts)
            parts.append({"type": part_type, "text": ""})
        elif t.endswith("-delta"):
            index = active.get(stream_id)
            if index is not None and 0 <= index < len(parts):
                part = parts[index]
                if type(part) is dict and part.get("type") == part_type:
                    delta = c.get("delta", MISSING)
                    state.append_text(part, delta if type(delta) is str else _js_str(delta))
        else:
            active.pop(stream_id, None)
    except TypeError:  # an unhashable stream id from the wire: no stream to track
        logger.debug("fold(); %s with an unusable id, ignored", t)


def _js_str(v: Any) -> str:
    from ..core.headers import js_to_string

    return js_to_string(v)


def _strip(bag: Chunk) -> Chunk:
    return {k: v for k, v in bag.items() if v is not MISSING}


def _fold_content(state: UIProjection, c: Chunk, mid: str) -> None:
    parts = state.ensure_message(mid)["parts"]
    t = c["type"]
    get = c.get
    if t == "file":
        parts.append(_strip({"type": "file", "mediaType": get("mediaType", MISSING), "url": get("url", MISSING)}))
    elif t == "source-url":
        parts.append(
            _strip(
                {
                    "type": "source-url",
                    "sourceId": get("sourceId", MISSING),
                    "url": get("url", MISSING),
                    "title": get("title", MISSING),
                }
            )
        )
    else:
        parts.append(
            _strip(
                {
                    "type": "source-document",
                    "sourceId": get("sourceId", MISSING),
                    "mediaType": get("mediaType", MISSING),
                    "title": get("title", MISSING),
                    "filename": get("filename", MISSING),
                }
            )
        )


def _fold_data(state: UIProjection, c: Chunk, mid: str) -> None:
    if _truthy(c.get("transient", MISSING)):
        return
    parts = state.ensure_message(mid)["parts"]
    part = _strip({"type": c["type"], "id": c.get("id", MISSING), "data": c.get("data", MISSING)})
    data_id = c.get("id", MISSING)
    if data_id is not MISSING:
        for index, existing in enumerate(parts):
            if (
                type(existing) is dict
                and existing.get("type") == c["type"]
                and "id" in existing
                and existing["id"] == data_id
                and type(existing["id"]) is type(data_id)
            ):
                parts[index] = part
                return
    parts.append(part)


def _truthy(v: Any) -> bool:
    if v is MISSING or v is None or v is False or v == "" or (isinstance(v, (int, float)) and not v):
        return False
    return not (isinstance(v, float) and v != v)


_ARMS = {
    "start": _fold_start,
    "start-step": _fold_start_step,
    "finish-step": _fold_finish_step,
    "finish": _fold_finish,
    "message-metadata": _fold_metadata,
    "abort": _fold_run_end,
    "error": _fold_run_end,
    "text-start": _fold_text,
    "text-delta": _fold_text,
    "text-end": _fold_text,
    "reasoning-start": _fold_text,
    "reasoning-delta": _fold_text,
    "reasoning-end": _fold_text,
    "tool-input-start": fold_tool_input,
    "tool-input-delta": fold_tool_input,
    "tool-input-available": fold_tool_input,
    "tool-input-error": fold_tool_input,
    "tool-output-available": fold_tool_output,
    "tool-output-error": fold_tool_output,
    "tool-output-denied": fold_tool_output,
    "tool-approval-request": fold_tool_output,
    "file": _fold_content,
    "source-url": _fold_content,
    "source-document": _fold_content,
}
