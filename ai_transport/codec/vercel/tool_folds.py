"""The Vercel reducer's tool folds (``fold-tool-input.ts``, ``fold-tool-output.ts``,
``tool-transitions.ts`` and the tool resolutions of ``fold-input.ts`` of 0.8.0).

A tool part is ``dynamic-tool`` (with ``toolName``) or ``tool-<name>``; every transition keeps the
part's representation and replaces the part (never mutates it). Client resolutions (tool result,
error, approval response) target the assistant by codec-message-id and wait in
``pending_resolutions`` until its tool part arrives.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..core.headers import MISSING, parse_json
from .state import Part, ToolTracker, UIMessage, UIProjection, is_tool_part

__all__ = [
    "MAX_PENDING_RESOLUTIONS",
    "fold_tool_input",
    "fold_tool_output",
    "resolve_or_pend",
    "retry_pending",
    "seed_fork",
]

Chunk = dict[str, Any]

#: The most tool resolutions one projection keeps waiting for their tool part **per publisher**
#: (answers come off the wire: past this that publisher's oldest is dropped, so a flood of answers to
#: unknown calls stays bounded and never evicts another publisher's answer).
MAX_PENDING_RESOLUTIONS = 1024


def _strip(bag: Chunk) -> Chunk:
    return {k: v for k, v in bag.items() if v is not MISSING}


def tool_base(c: Chunk) -> Part:
    """``toolBase``: the identity of a new tool part (``dynamic-tool`` when ``dynamic`` is truthy)."""
    get = c.get
    if get("dynamic"):
        return _strip(
            {
                "type": "dynamic-tool",
                "toolCallId": get("toolCallId", MISSING),
                "toolName": get("toolName", MISSING),
                "title": get("title", MISSING),
                "providerExecuted": get("providerExecuted", MISSING),
            }
        )
    name = get("toolName", MISSING)
    return _strip(
        {
            "type": f"tool-{_js_str(name)}",
            "toolCallId": get("toolCallId", MISSING),
            "title": get("title", MISSING),
            "providerExecuted": get("providerExecuted", MISSING),
        }
    )


def _js_truthy(v: Any) -> bool:
    if v is MISSING or v is None or v is False or v == "" or (isinstance(v, (int, float)) and not v):
        return False
    return not (isinstance(v, float) and v != v)


def _js_str(v: Any) -> str:
    from ..core.headers import js_to_string

    return js_to_string(v)


def tool_identity(part: Part) -> Part:
    """``toolIdentity``: an existing part's identity, in its own representation."""
    get = part.get
    bag: Chunk = {"type": part["type"], "toolCallId": get("toolCallId", MISSING)}
    if part["type"] == "dynamic-tool":
        bag["toolName"] = get("toolName", MISSING)
    bag["title"] = get("title", MISSING)
    bag["providerExecuted"] = get("providerExecuted", MISSING)
    return _strip(bag)


def transition(part: Part, chunk: Chunk) -> Part:
    """``transitionToolPart``: the part in the state ``chunk`` (a tool output chunk) describes."""
    base = tool_identity(part)
    t = chunk["type"]
    inp = part.get("input", MISSING)
    if t == "tool-output-available":
        return _strip(
            {
                **base,
                "state": "output-available",
                "input": inp,
                "output": chunk.get("output", MISSING),
                "preliminary": chunk.get("preliminary", MISSING),
            }
        )
    if t == "tool-output-error":
        return _undefined_kept({**base, "state": "output-error", "input": inp, "errorText": chunk.get("errorText", MISSING)})
    if t == "tool-output-denied":
        return _undefined_kept({**base, "state": "output-denied", "input": inp, "approval": {"id": "", "approved": False}})
    # tool-approval-request
    return _undefined_kept(
        {**base, "state": "approval-requested", "input": inp, "approval": {"id": chunk.get("approvalId", MISSING)}}
    )


def _undefined_kept(part: Part) -> Part:
    # JS keeps `input: undefined` as a key; JSON (and so every reader) drops it: drop it here too.
    return _strip(part)


def _tool_part(message: UIMessage, trackers: Any, tool_call_id: Any) -> tuple[ToolTracker, Part] | None:
    """``getToolPart``."""
    try:
        tracker = trackers.tools.get(tool_call_id)
    except TypeError:
        return None
    if tracker is None:
        return None
    parts = message.get("parts")
    if not isinstance(parts, list) or not 0 <= tracker.part_index < len(parts):
        return None
    part = parts[tracker.part_index]
    return (tracker, part) if is_tool_part(part) else None


def fold_tool_input(state: UIProjection, c: Chunk, mid: Any) -> None:
    """``foldToolInput``: tool-input-start / -delta / -available / -error."""
    message = state.ensure_message(mid)
    trackers = state.ensure_trackers(mid)
    parts = message["parts"]
    t = c["type"]
    tool_call_id = c.get("toolCallId", MISSING)
    if t == "tool-input-start":
        index = len(parts)
        parts.append({**tool_base(c), "state": "input-streaming"})
        _set_tracker(trackers, tool_call_id, ToolTracker(index))
        return
    if t == "tool-input-delta":
        try:
            tracker = trackers.tools.get(tool_call_id)
        except TypeError:
            return
        if tracker is None:
            return
        delta = c.get("inputTextDelta", MISSING)
        tracker.input_text += delta if type(delta) is str else _js_str(delta)
        parsed = parse_json(tracker.input_text)
        found = _tool_part(message, trackers, tool_call_id)
        if found is None:
            return
        parts[found[0].part_index] = _strip({**tool_identity(found[1]), "state": "input-streaming", "input": parsed})
        return
    if t == "tool-input-available":
        found = _tool_part(message, trackers, tool_call_id)
        if found is None:
            return
        parts[found[0].part_index] = _strip(
            {**tool_identity(found[1]), "state": "input-available", "input": c.get("input", MISSING)}
        )
        return
    # tool-input-error
    found = _tool_part(message, trackers, tool_call_id)
    error = {"state": "output-error", "input": c.get("input", MISSING), "errorText": c.get("errorText", MISSING)}
    if found is not None:
        parts[found[0].part_index] = _strip({**tool_identity(found[1]), **error})
    else:
        index = len(parts)
        parts.append(_strip({**tool_base(c), **error}))
        _set_tracker(trackers, tool_call_id, ToolTracker(index))


def _set_tracker(trackers: Any, tool_call_id: Any, tracker: ToolTracker) -> None:
    with contextlib.suppress(TypeError):
        trackers.tools[tool_call_id] = tracker


def _owner_anywhere(state: UIProjection, tool_call_id: Any) -> tuple[UIMessage, ToolTracker, Part] | None:
    for entry in state.entries:
        trackers = state.trackers.get(entry.codec_message_id) if _hashable(entry.codec_message_id) else None
        if trackers is None:
            continue
        found = _tool_part(entry.message, trackers, tool_call_id)
        if found is not None:
            return entry.message, found[0], found[1]
    return None


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def fold_tool_output(state: UIProjection, c: Chunk, mid: Any) -> None:
    """``foldToolOutput``: outputs fold onto whichever message holds the call; approval requests
    and denials onto the run's own message."""
    t = c["type"]
    tool_call_id = c.get("toolCallId", MISSING)
    if t in ("tool-output-available", "tool-output-error"):
        owner = _owner_anywhere(state, tool_call_id)
        if owner is not None:
            message, tracker, part = owner
            message["parts"][tracker.part_index] = transition(part, c)
        return
    message = state.ensure_message(mid)
    trackers = state.ensure_trackers(mid)
    found = _tool_part(message, trackers, tool_call_id)
    if found is not None:
        message["parts"][found[0].part_index] = transition(found[1], c)


# -- client resolutions ------------------------------------------------------------------------


def _find_owner(state: UIProjection, cmid: Any, tool_call_id: Any) -> tuple[UIMessage, ToolTracker, Part] | None:
    entry = state.find(cmid)
    if entry is None:
        return None
    found = _tool_part(entry.message, state.ensure_trackers(cmid), tool_call_id)
    return None if found is None else (entry.message, found[0], found[1])


def _approval(part: Part, approved: Any, reason: Any) -> Part:
    if approved:
        prior = part.get("approval", MISSING)
        if isinstance(prior, dict):
            approval_id = prior.get("id", MISSING)
        elif _js_truthy(prior):
            approval_id = MISSING  # `part.approval.id` of a non-object: undefined
        else:
            approval_id = ""
        approval = _strip({"id": approval_id, "approved": True, "reason": reason})
        return _strip(
            {**tool_identity(part), "state": "approval-responded", "input": part.get("input", MISSING), "approval": approval}
        )
    return transition(part, {"type": "tool-output-denied", "toolCallId": part.get("toolCallId")})


def _apply(owner: tuple[UIMessage, ToolTracker, Part], tool_call_id: Any, resolution: dict[str, Any]) -> None:
    message, tracker, part = owner
    kind = resolution["kind"]
    if kind == "tool-result":
        new = transition(
            part, {"type": "tool-output-available", "toolCallId": tool_call_id, "output": resolution["output"]}
        )
    elif kind == "tool-result-error":
        new = transition(part, {"type": "tool-output-error", "toolCallId": tool_call_id, "errorText": resolution["message"]})
    else:
        new = _approval(part, resolution["approved"], resolution.get("reason", MISSING))
    message["parts"][tracker.part_index] = new


def resolve_or_pend(
    state: UIProjection, cmid: Any, tool_call_id: Any, resolution: dict[str, Any], author: str | None = None
) -> None:
    """Apply a client resolution onto its tool part, or keep it until the part arrives.

    ``author`` is the publisher of the answer (Ably's verified ``clientId``); each author keeps at
    most :data:`MAX_PENDING_RESOLUTIONS` waiting, past which their own oldest is dropped.
    """
    owner = _find_owner(state, cmid, tool_call_id)
    if owner is not None:
        _apply(owner, tool_call_id, resolution)
        return
    if type(author) is not str:
        author = None
    pending = state.pending_resolutions
    if not isinstance(pending, list):  # (none waits yet)
        pending = state.pending_resolutions = []
    counts = state.pending_by_author
    held = counts.get(author, 0)
    if held >= MAX_PENDING_RESOLUTIONS:
        for i, waiting in enumerate(pending):
            if waiting[3] == author:
                del pending[i]
                break
    else:
        counts[author] = held + 1
    pending.append((cmid, tool_call_id, resolution, author))


def retry_pending(state: UIProjection) -> None:
    """``retryPendingResolutions``: apply every pending resolution whose tool part is now present."""
    waiting = []
    counts = state.pending_by_author
    for pending in state.pending_resolutions:
        cmid, tool_call_id, resolution, author = pending
        owner = _find_owner(state, cmid, tool_call_id)
        if owner is None:
            waiting.append(pending)
            continue
        _apply(owner, tool_call_id, resolution)
        state.run = None  # a part was replaced
        left = counts[author] - 1
        if left:
            counts[author] = left
        else:
            del counts[author]
    state.pending_resolutions = waiting if waiting else ()


def seed_fork(state: UIProjection, target: Any, seed: Any) -> None:
    """``seedForkIfAbsent``: rebuild a fork continuation's run from its seed when the target is absent."""
    if not isinstance(seed, dict) or state.find(target) is not None:
        return
    for entry in seed.get("messages") or ():
        cmid = entry["codecMessageId"]
        if state.find(cmid) is not None:
            continue
        parts = list(entry["message"]["parts"])
        state.push(cmid, {**entry["message"], "parts": parts})
        if state.seeded is None:
            state.seeded = set()
        state.seeded.add(cmid)  # (a string: read_fork_seed keeps no other)
        trackers = state.ensure_trackers(cmid)
        for index, part in enumerate(parts):
            if is_tool_part(part):
                _set_tracker(trackers, part["toolCallId"], ToolTracker(index))
