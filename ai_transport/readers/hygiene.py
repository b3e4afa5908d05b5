"""Replay hygiene for Responses API ``input`` lists (pure functions over plain JSON-shaped dicts).

The API is stricter than its SDK types (see ``openai-responses-wire.md`` §6/§7). This module turns
what :func:`~ai_transport.readers.to_responses_input` rebuilds from a run into an input the API
accepts, saying what it changed:

* :func:`sweep_reasoning` — the reasoning pairing sweep: drops every ``reasoning`` item that is not
  immediately followed by its paired output item, strips the ``id`` of an output item whose
  reasoning was just dropped, and reports the length of the region a replay fingerprint covers.
* :class:`ReplayFingerprint` / :func:`replay_fingerprint` — ties replayed reasoning to what
  produced it (model, tools, instructions and the input prefix it was produced after).
* :func:`sanitize_input` — the whole replay hygiene in one call.

Everything here is lossless: unknown fields pass through, the caller's lists and dicts are never
mutated (an item is copied only when something in it changes; untouched items are returned as the
very same objects), and items are never reordered (the only insertion is a synthesised output for
an interrupted tool call, placed right after the calls of its step).

**What "paired" means.** A reasoning item is paired when the item directly after it is an output
item the model produced in the same response: an assistant ``message`` (``type`` ``"message"`` or
absent, ``role: "assistant"``) or a model-produced call item (``function_call``,
``custom_tool_call``, ``web_search_call``, ``shell_call``, … see :data:`MODEL_OUTPUT_TYPES`).
Another ``reasoning`` item, a user/system/developer message, a tool output or an
``item_reference`` directly after a reasoning item leave it unpaired (the API answers
``Item 'rs_…' of type 'reasoning' was provided without its required following item.``). When the
caller knows which reasoning produced which item (:func:`reasoning_links`, recorded from the
response's ``output``), the following item must also have been produced by *this* reasoning item:
an item linked to a different reasoning item does not pair.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ..errors import InvalidArgumentError, InvalidTypeError, type_name

__all__ = [
    "ABORTED_OUTPUT",
    "CALL_OUTPUT_TYPES",
    "MODEL_OUTPUT_TYPES",
    "STREAM_ONLY_FIELDS",
    "Change",
    "ReplayFingerprint",
    "SanitizeResult",
    "SweepResult",
    "drop_reasoning",
    "is_output_item",
    "is_paired",
    "is_reference",
    "normalize_tools",
    "reasoning_links",
    "replay_fingerprint",
    "sanitize_input",
    "sweep_reasoning",
]

log = logging.getLogger("ai_transport.readers.hygiene")

#: Fields that exist only on stream events; never sent back (the API answers ``unknown_parameter``).
STREAM_ONLY_FIELDS: tuple[str, ...] = ("obfuscation", "sequence_number")

#: Item types the model produces (besides assistant messages and reasoning): each can be the item a
#: reasoning item is paired with.
MODEL_OUTPUT_TYPES: frozenset[str] = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "shell_call",
        "local_shell_call",
        "computer_call",
        "apply_patch_call",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "tool_search_call",
    }
)

#: Call item type -> the output item type that answers it (paired by ``call_id``).
CALL_OUTPUT_TYPES: Mapping[str, str] = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "shell_call": "shell_call_output",
    "computer_call": "computer_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
_OUTPUT_CALL_TYPES = {v: k for k, v in CALL_OUTPUT_TYPES.items()}
#: Call types for which an "aborted" output can be synthesised (their output is a plain string).
_SYNTHESISABLE = ("function_call", "custom_tool_call")

#: Output synthesised for a tool call whose turn was interrupted before it was answered.
ABORTED_OUTPUT = '{"error":"aborted","message":"The tool call was interrupted before it returned a result."}'

# Types whose ``id`` is optional on input (SDK 3.57 params), so a clashing id, or one that points at
# a dropped reasoning item, can be stripped instead of dropping the item (an assistant message loses
# ``status`` too: the id-less assistant form has none).
_ID_OPTIONAL = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "computer_call_output",
        "tool_search_call",
        "mcp_approval_response",
    }
)
# Output items the server produced and ran itself (their ``id`` is required): when the reasoning
# that produced one is dropped, the item is dropped too — its results live on in later items.
_SERVER_SIDE = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call", "mcp_list_tools"}
)


def _item_kind(item: Mapping[str, Any]) -> str | None:
    t = item.get("type")
    if t is None and "role" in item:
        return "message"
    return t if isinstance(t, str) else None


@dataclass(frozen=True)
class Change:
    """One change a hygiene pass made to an input.

    Attributes:
        action: what was done — ``"dropped_item"``, ``"removed_field"``, ``"added_field"``,
            ``"converted_part"``, ``"dropped_part"``, ``"stripped_id"``, ``"set_field"`` or
            ``"added_output"``.
        reason: why, as a stable code (``"duplicate_id"``, ``"reasoning_unpaired"``,
            ``"orphan_output"``, ``"unanswered_call"``, ``"reasoning_status"``, …).
        index: position of the affected item in the input that was given (``None`` for none).
        detail: a human-readable sentence (also ``str(change)``).
        item_id: the affected item's ``id``, when it has one.
        call_id: the affected item's ``call_id``, when it has one.
    """

    action: str
    reason: str
    index: int | None
    detail: str
    item_id: str | None = None
    call_id: str | None = None

    def __str__(self) -> str:
        return self.detail

    def to_dict(self) -> dict[str, Any]:
        """JSON shape ``{action, reason, index, detail, item_id?, call_id?}``."""
        out: dict[str, Any] = {
            "action": self.action,
            "reason": self.reason,
            "index": self.index,
            "detail": self.detail,
        }
        if self.item_id is not None:
            out["item_id"] = self.item_id
        if self.call_id is not None:
            out["call_id"] = self.call_id
        return out


# ---------------------------------------------------------------------------------------------
# Item predicates


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def is_output_item(item: Any) -> bool:
    """Whether ``item`` is a model-produced output item other than reasoning.

    True for an assistant message (``type`` ``"message"`` or absent, ``role: "assistant"``) and for
    every type in :data:`MODEL_OUTPUT_TYPES`.
    """
    if not isinstance(item, Mapping):
        return False
    t = item.get("type")
    if t in MODEL_OUTPUT_TYPES:
        return True
    return (t is None or t == "message") and item.get("role") == "assistant"


def is_paired(reasoning: Mapping[str, Any], following: Any, links: Mapping[str, str] | None = None) -> bool:
    """Whether ``following`` (the item right after ``reasoning``, or ``None``) is its paired item.

    Paired means: an output item (:func:`is_output_item`) and, when ``links`` (item id -> id of the
    reasoning item that produced it, see :func:`reasoning_links`) names the following item, linked
    to this very reasoning item.
    """
    if not is_output_item(following):
        return False
    if links:
        fid = following.get("id")
        if isinstance(fid, str) and fid in links and links[fid] != reasoning.get("id"):
            return False
    return True


def reasoning_links(items: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """``{item id: reasoning id}``: which reasoning item produced each output item.

    Each output item with an ``id`` is linked to the nearest reasoning item before it in the same
    response. Over one response's ``output`` that is simply the last reasoning item before it; over
    a whole input or stored history, a response ends where a non-output item (a tool output, a user
    message) appears, so links never cross one. The API requires that reasoning item whenever the
    linked item is replayed *with its id* (``Item 'fc_…' of type 'function_call' was provided
    without its required 'reasoning' item: 'rs_…'.``) — e.g. the second of two parallel calls.
    Record it per response (or compute it from the stored history) and pass it as ``links``.
    """
    links: dict[str, str] = {}
    current: str | None = None
    for item in items:
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "reasoning":
            current = _str_or_none(item.get("id"))
            continue
        if not is_output_item(item):
            current = None
            continue
        iid = item.get("id")
        if current is not None and isinstance(iid, str):
            links[iid] = current
    return links


# ---------------------------------------------------------------------------------------------
# Fingerprints


def normalize_tools(tools: Sequence[Any] | None) -> list[Any] | None:
    """``tools`` as the request should carry it: ``None`` (omit the field) when there are none.

    ``None`` and ``[]`` both mean "no tools" and both become ``None``; anything else is returned as
    a list. Fingerprints apply the same rule on both sides, so the two never differ.
    """
    if tools is None:
        return None
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        raise InvalidTypeError(f"tools must be an array or None, got {type_name(tools)}")
    listed = list(tools)
    return listed or None


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()


class _PrefixHasher:
    """Digest of ``items[:n]`` for growing ``n`` (each item hashed once)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self._digests = [self._hash.hexdigest()]

    def digest(self, items: Sequence[Any], n: int) -> str | None:
        if n > len(items) or n < 0:
            return None
        while len(self._digests) <= n:
            item = items[len(self._digests) - 1]
            self._hash.update(_canonical(item))
            self._hash.update(b"\n")
            self._digests.append(self._hash.hexdigest())
        return self._digests[n]


def _prefix_digest(items: Sequence[Any]) -> str:
    hasher = _PrefixHasher()
    digest = hasher.digest(items, len(items))
    assert digest is not None
    return digest


@dataclass(frozen=True)
class ReplayFingerprint:
    """What a turn's reasoning was produced from; replayed only when all of it still holds.

    Recorded when the turn is produced (:func:`replay_fingerprint` over the request's model, tools,
    instructions and the covered input prefix) and checked at replay by :func:`sanitize_input`
    (``fingerprints={rs_id: fp}``): the model must be the same, the tools and instructions digests
    the same, and the replayed input's first ``prefix_length`` items must hash to ``prefix``.

    Attributes:
        model: the model that produced the reasoning (as requested, e.g. ``"gpt-5.2"``).
        tools: sha256 of the canonical JSON of the tools, ``None`` when there were none (``[]`` too).
        instructions: sha256 of the canonical JSON of the instructions, ``None`` when absent or empty.
        prefix_length: how many input items the request's covered region held.
        prefix: sha256 chain digest of those items (canonical JSON, sorted keys).
    """

    model: str
    tools: str | None
    instructions: str | None
    prefix_length: int
    prefix: str

    def to_dict(self) -> dict[str, Any]:
        """JSON shape ``{model, tools, instructions, prefixLength, prefix}`` for storage."""
        return {
            "model": self.model,
            "tools": self.tools,
            "instructions": self.instructions,
            "prefixLength": self.prefix_length,
            "prefix": self.prefix,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplayFingerprint:
        """Read :meth:`to_dict`'s shape back (raises ``InvalidTypeError`` naming a bad field)."""
        if not isinstance(d, Mapping):
            raise InvalidTypeError(f"fingerprint must be an object, got {type_name(d)}")
        model, length, prefix = d.get("model"), d.get("prefixLength"), d.get("prefix")
        if not isinstance(model, str):
            raise InvalidTypeError(f"fingerprint.model must be a string, got {type_name(model)}")
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise InvalidTypeError(f"fingerprint.prefixLength must be a non-negative integer, got {length!r}")
        if not isinstance(prefix, str):
            raise InvalidTypeError(f"fingerprint.prefix must be a string, got {type_name(prefix)}")
        for key in ("tools", "instructions"):
            if d.get(key) is not None and not isinstance(d.get(key), str):
                raise InvalidTypeError(f"fingerprint.{key} must be a string or null, got {type_name(d.get(key))}")
        return cls(model, d.get("tools"), d.get("instructions"), length, prefix)

    def for_reasoning(self, output: Iterable[Mapping[str, Any]]) -> dict[str, ReplayFingerprint]:
        """``{rs_id: self}`` for every reasoning item in a response's ``output`` (what to record)."""
        return {
            item["id"]: self
            for item in output
            if isinstance(item, Mapping) and item.get("type") == "reasoning" and isinstance(item.get("id"), str)
        }

    def same_context(self, *, model: str, tools: Sequence[Any] | None, instructions: Any) -> bool:
        """Whether model, tools and instructions match (the prefix is checked separately)."""
        return (
            self.model == model
            and self.tools == _tools_digest(tools)
            and self.instructions == _instructions_digest(instructions)
        )

    def matches(
        self, *, model: str, tools: Sequence[Any] | None, instructions: Any, input: Sequence[Any]
    ) -> bool:
        """Whether a replay with this context, whose input starts with ``input``, may replay it."""
        if not self.same_context(model=model, tools=tools, instructions=instructions):
            return False
        if self.prefix_length > len(input):
            return False
        return _prefix_digest(list(input[: self.prefix_length])) == self.prefix


def _tools_digest(tools: Sequence[Any] | None) -> str | None:
    normal = normalize_tools(tools)
    return None if normal is None else _digest(normal)


def _instructions_digest(instructions: Any) -> str | None:
    if instructions is None or instructions == "" or instructions == []:
        return None
    return _digest(instructions)


def replay_fingerprint(
    *,
    model: str,
    tools: Sequence[Any] | None = None,
    instructions: Any = None,
    prefix: Sequence[Mapping[str, Any]] = (),
) -> ReplayFingerprint:
    """The fingerprint to record for the reasoning a request produces.

    ``prefix`` is the request's input *covered region*: ``result.input[:result.covered_length]`` of
    the :func:`sanitize_input` / :func:`sweep_reasoning` call that built it (a trailing context
    block is outside it, so live state does not invalidate replay). ``tools=None`` and ``tools=[]``
    give the same fingerprint.
    """
    if not isinstance(model, str) or not model:
        raise InvalidArgumentError(f"model must be a non-empty string, got {model!r}")
    items = list(prefix)
    return ReplayFingerprint(
        model=model,
        tools=_tools_digest(tools),
        instructions=_instructions_digest(instructions),
        prefix_length=len(items),
        prefix=_prefix_digest(items),
    )


# ---------------------------------------------------------------------------------------------
# The pairing sweep


class SweepResult(NamedTuple):
    """Result of :func:`sweep_reasoning`.

    Attributes:
        input: the swept items followed by the trailing items (a new list).
        covered_length: how many leading items of ``input`` the sweep covered (the region a
            reasoning-replay fingerprint covers); trailing items come after it.
        dropped: the items that were dropped (the caller's objects), in order: reasoning items,
            and server-side tool items whose reasoning item was dropped.
        changes: every change made (drops and stripped ids), as :class:`Change` records.
    """

    input: list[dict[str, Any]]
    covered_length: int
    dropped: list[dict[str, Any]]
    changes: list[Change]


def _object_array(value: Any, name: str, what: str) -> list[Any]:
    """``value`` as a list, checked: an array (not a string / bytes / object) of objects; the
    :class:`InvalidTypeError` names ``name`` (and the index) and says an array of ``what``."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidTypeError(f"{name} must be an array of {what}, got {type_name(value)}")
    listed = list(value)
    for i, item in enumerate(listed):
        if not isinstance(item, Mapping):
            raise InvalidTypeError(f"{name}[{i}] must be an object, got {type_name(item)}")
    return listed


def _check_items(items: Any, name: str = "input") -> list[Any]:
    return _object_array(items, name, "items")


def _strip_id(item: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in item.items() if k != "id"}
    if _item_kind(item) == "message":
        out.pop("status", None)
    return out


def _describe(item: Mapping[str, Any]) -> str:
    iid = item.get("id")
    t = item.get("type") or ("message" if "role" in item else "item")
    return f"{t} {iid!r}" if isinstance(iid, str) else f"{t} without id"


#: ``(item, out_so_far) -> reason or None``: an extra reason to drop a reasoning item.
DropRule = Callable[[Mapping[str, Any], Sequence[Mapping[str, Any]]], "str | None"]


def _sweep(
    entries: list[tuple[int | None, dict[str, Any]]],
    links: Mapping[str, str] | None,
    should_drop: DropRule | None,
) -> tuple[list[tuple[int | None, dict[str, Any]]], list[dict[str, Any]], list[Change]]:
    out: list[tuple[int | None, dict[str, Any]]] = []
    out_items: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    changes: list[Change] = []
    kept_reasoning: set[str] = set()
    after_dropped: str | None = None  # id of the reasoning dropped right before this item
    n = len(entries)
    for k, (index, item) in enumerate(entries):
        if item.get("type") == "reasoning":
            rid = _str_or_none(item.get("id"))
            following = entries[k + 1][1] if k + 1 < n else None
            reason: str | None = None
            if rid is None:
                reason = "reasoning_without_id"
            if reason is None and should_drop is not None:
                reason = should_drop(item, out_items)
            if reason is None and not is_paired(item, following, links):
                reason = "reasoning_unpaired"
            if reason is not None:
                dropped.append(item)
                changes.append(
                    Change("dropped_item", reason, index, f"dropped reasoning {rid!r} ({_REASONS.get(reason, reason)})", rid)
                )
                after_dropped = rid if rid is not None else ""
                continue
            kept_reasoning.add(rid)  # type: ignore[arg-type]
            after_dropped = None
            out.append((index, item))
            out_items.append(item)
            continue
        iid = item.get("id")
        if isinstance(iid, str) and is_output_item(item):
            required = links.get(iid) if links else None
            reason = None
            if after_dropped is not None:
                reason, why = "reasoning_dropped", "its reasoning item was dropped"
            elif required is not None and required not in kept_reasoning:
                reason, why = "reasoning_missing", f"its required reasoning item {required!r} is not in the input"
            kind = _item_kind(item)
            if reason is not None and kind in _SERVER_SIDE:
                dropped.append(item)
                changes.append(
                    Change("dropped_item", reason, index, f"dropped {_describe(item)}: {why}", iid)
                )
                continue  # the next item now directly follows the dropped reasoning
            if reason is not None and kind in _ID_OPTIONAL:
                call_id = _str_or_none(item.get("call_id"))
                kind_text = item.get("type") or "message"
                item = _strip_id(item)
                changes.append(
                    Change("stripped_id", reason, index, f"stripped id {iid!r} from {kind_text}: {why}", iid, call_id)
                )
            elif reason is not None:
                # id required and answered by the client (computer_call, local_shell_call,
                # mcp_approval_request): neither stripping nor dropping keeps the input valid.
                log.debug("sweep: %s keeps its id although %s", _describe(item), why)
        after_dropped = None
        out.append((index, item))
        out_items.append(item)
    return out, dropped, changes


def sweep_reasoning(
    items: Sequence[Mapping[str, Any]],
    *,
    trailing: Sequence[Mapping[str, Any]] | None = None,
    links: Mapping[str, str] | None = None,
    should_drop: DropRule | None = None,
) -> SweepResult:
    """The reasoning pairing sweep.

    Walks ``items`` left to right and drops every ``reasoning`` item that is not immediately
    followed by its paired output item (see the module docstring for "paired"; a reasoning item
    without an ``id`` is dropped too, the API requires one). The output item right after a dropped
    reasoning item has its ``id`` stripped (and, for a message, its ``status``), so the API does not
    look for the dropped reasoning; with ``links`` an output item whose linked reasoning item is not
    kept loses its id as well. ``should_drop(item, kept_so_far)`` may give an extra reason to drop a
    reasoning item (a fingerprint or ``store: false`` rule); its follower is then stripped the same
    way. The links the input itself shows (:func:`reasoning_links`) are always used, so every item
    of a dropped reasoning item's response (e.g. both of two parallel calls) loses its id.

    ``trailing`` items (e.g. a context block for this request) are appended after the sweep, outside
    the covered region; ``covered_length`` says where they start. Never reorders; never mutates.
    """
    listed = _check_items(items)
    entries = list(enumerate(listed))
    links = {**reasoning_links(listed), **(links or {})}
    out, dropped, changes = _sweep(entries, links, should_drop)  # type: ignore[arg-type]
    result = [item for _, item in out]
    covered = len(result)
    if trailing is not None:
        result.extend(_check_items(trailing, "trailing"))
    return SweepResult(result, covered, dropped, changes)


def drop_reasoning(items: Sequence[Mapping[str, Any]], *, reason: str = "reasoning_dropped_by_caller") -> SweepResult:
    """``items`` without any reasoning item, the ids that pointed at them stripped (a sweep).

    For the retry after an ``invalid_encrypted_content`` 400: every reasoning item goes, and each
    output item that directly followed one loses its id (server-side tool items are dropped), so
    the retried input is still accepted. ``reason`` is recorded on each drop.
    """
    return sweep_reasoning(items, should_drop=lambda _item, _out: reason)


_REASONS = {
    "reasoning_unpaired": "not immediately followed by its output item",
    "reasoning_without_id": "it has no id",
    "reasoning_without_encrypted_content": "store is false and it has no encrypted_content",
    "reasoning_fingerprint_mismatch": "produced under a different model, tools, instructions or prefix",
    "reasoning_unfingerprinted": "no fingerprint was recorded for it",
}


# ---------------------------------------------------------------------------------------------
# The full pipeline (shared with preflight.repair)


class _Pipeline:
    """Copy-on-write passes over ``(original index, item)`` entries."""

    def __init__(self, items: Sequence[Mapping[str, Any]]) -> None:
        self.entries: list[tuple[int | None, dict[str, Any]]] = [
            (i, item) for i, item in enumerate(_check_items(items))
        ]
        self.changes: list[Change] = []

    def note(self, action: str, reason: str, index: int | None, detail: str, item: Mapping[str, Any]) -> None:
        self.changes.append(
            Change(action, reason, index, detail, _str_or_none(item.get("id")), _str_or_none(item.get("call_id")))
        )

    # -- per-item schema fixes ---------------------------------------------------------------
    def fix_items(self, store: bool) -> None:
        kept: list[tuple[int | None, dict[str, Any]]] = []
        for index, item in self.entries:
            fixed = self._fix_item(index, item, store)
            if fixed is not None:
                kept.append((index, fixed))
        self.entries = kept

    def _fix_item(self, index: int | None, item: dict[str, Any], store: bool) -> dict[str, Any] | None:
        t = item.get("type")
        if not store and is_reference(item):
            self.note(
                "dropped_item",
                "not_persisted",
                index,
                f"dropped item reference {item.get('id')!r}: items are not persisted when store is false",
                item,
            )
            return None
        copy: dict[str, Any] | None = None

        def w() -> dict[str, Any]:
            nonlocal copy
            if copy is None:
                copy = dict(item)
            return copy

        for key in STREAM_ONLY_FIELDS:
            if key in item:
                del w()[key]
                self.note("removed_field", "stream_only_field", index, f"removed stream-only field {key!r} from {_describe(item)}", item)
        if t == "reasoning":
            if "status" in item:
                del w()["status"]
                self.note("removed_field", "reasoning_status", index, f"removed 'status' from reasoning {item.get('id')!r}", item)
            if item.get("summary") is None:
                w()["summary"] = []
                self.note("added_field", "missing_summary", index, f"added 'summary': [] to reasoning {item.get('id')!r}", item)
        elif t == "function_call":
            if item.get("arguments") is None:
                w()["arguments"] = "{}"
                self.note(
                    "added_field",
                    "missing_arguments",
                    index,
                    f"added 'arguments': '{{}}' to function_call {item.get('call_id')!r}",
                    item,
                )
        elif (t is None or t == "message") and item.get("role") == "assistant" and isinstance(item.get("content"), list):
            parts = item["content"]
            new_parts: list[Any] = []
            changed = False
            for k, part in enumerate(parts):
                ptype = part.get("type") if isinstance(part, Mapping) else None
                if isinstance(part, Mapping):
                    stream_keys = [key for key in STREAM_ONLY_FIELDS if key in part]
                    if stream_keys:
                        part = {key: v for key, v in part.items() if key not in STREAM_ONLY_FIELDS}
                        changed = True
                        for key in stream_keys:
                            self.note("removed_field", "stream_only_field", index, f"removed stream-only field {key!r} from content[{k}]", item)
                if ptype == "input_text":
                    converted = dict(part)
                    converted["type"] = "output_text"
                    converted.setdefault("annotations", [])
                    new_parts.append(converted)
                    changed = True
                    self.note(
                        "converted_part",
                        "assistant_input_part",
                        index,
                        f"converted assistant content[{k}] from input_text to output_text",
                        item,
                    )
                elif ptype in _ASSISTANT_BAD_PARTS:
                    changed = True
                    self.note(
                        "dropped_part",
                        "assistant_input_part",
                        index,
                        f"dropped assistant content[{k}] of type {ptype!r} (assistant content must be output_text or refusal)",
                        item,
                    )
                else:
                    new_parts.append(part)
            if changed:
                w()["content"] = new_parts
        return copy if copy is not None else item

    # -- interrupted turns ----------------------------------------------------------------------
    def fix_in_progress(self) -> None:
        answered = _output_call_ids(item for _, item in self.entries)
        kept: list[tuple[int | None, dict[str, Any]]] = []
        for index, item in self.entries:
            if item.get("status") != "in_progress" or item.get("type") == "reasoning":
                kept.append((index, item))
                continue
            t = item.get("type")
            if (t is None or t == "message") and item.get("role") == "assistant":
                if _has_text(item):
                    fixed = dict(item)
                    fixed["status"] = "incomplete"
                    self.note("set_field", "in_progress", index, f"marked interrupted {_describe(item)} as incomplete", item)
                    kept.append((index, fixed))
                else:
                    self.note("dropped_item", "in_progress", index, f"dropped interrupted {_describe(item)} (no text)", item)
                continue
            if t in CALL_OUTPUT_TYPES and (t, item.get("call_id")) in answered:
                kept.append((index, item))  # a call that has its output is never dropped
                continue
            self.note("dropped_item", "in_progress", index, f"dropped interrupted {_describe(item)}", item)
        self.entries = kept

    # -- duplicate ids ----------------------------------------------------------------------------
    def dedupe(self, previous_items: Sequence[Mapping[str, Any]]) -> None:
        held = {item.get("id") for item in previous_items if isinstance(item.get("id"), str)}
        first: dict[str, dict[str, Any]] = {}
        kept: list[tuple[int | None, dict[str, Any]]] = []
        for index, item in self.entries:
            iid = item.get("id")
            if not isinstance(iid, str):
                kept.append((index, item))
                continue
            if iid in held:
                self.note(
                    "dropped_item",
                    "held_by_previous_response",
                    index,
                    f"dropped {_describe(item)}: previous_response_id already holds it",
                    item,
                )
                continue
            if iid not in first:
                first[iid] = item
                kept.append((index, item))
                continue
            if first[iid] == item or _item_kind(item) not in _ID_OPTIONAL:
                self.note("dropped_item", "duplicate_id", index, f"dropped duplicate {_describe(item)}", item)
                continue
            self.note("stripped_id", "duplicate_id", index, f"stripped duplicate id {iid!r} from a different {_describe(item)}", item)
            kept.append((index, _strip_id(item)))
        self.entries = kept

    # -- call/output pairing --------------------------------------------------------------------
    def pair_calls(
        self,
        previous_items: Sequence[Mapping[str, Any]],
        unanswered: Literal["abort", "drop"],
        aborted_output: str,
    ) -> None:
        items = [item for _, item in self.entries]
        calls = _call_ids([*previous_items, *items])
        outputs = _output_call_ids([*previous_items, *items])
        kept: list[tuple[int | None, dict[str, Any]]] = []
        pending: list[tuple[int | None, dict[str, Any]]] = []  # synthesised outputs awaiting the end of the step
        for index, item in self.entries:
            t = item.get("type")
            if pending and t not in CALL_OUTPUT_TYPES and t not in _OUTPUT_CALL_TYPES:
                kept.extend(pending)
                pending = []
            if t in _OUTPUT_CALL_TYPES:
                cid = item.get("call_id")
                if isinstance(cid, str) and (_OUTPUT_CALL_TYPES[t], cid) not in calls:
                    self.note("dropped_item", "orphan_output", index, f"dropped {t} {cid!r}: no matching call in the input", item)
                    continue
            elif t in CALL_OUTPUT_TYPES:
                cid = item.get("call_id")
                if isinstance(cid, str) and (t, cid) not in outputs:
                    if unanswered == "abort" and t in _SYNTHESISABLE:
                        synthetic = {"type": CALL_OUTPUT_TYPES[t], "call_id": cid, "output": aborted_output}
                        pending.append((None, synthetic))
                        self.note("added_output", "unanswered_call", index, f"added an aborted {CALL_OUTPUT_TYPES[t]} for unanswered {t} {cid!r}", item)
                    else:
                        self.note("dropped_item", "unanswered_call", index, f"dropped unanswered {t} {cid!r}", item)
                        continue
            kept.append((index, item))
        kept.extend(pending)
        self.entries = kept

    # -- reasoning ---------------------------------------------------------------------------------
    def sweep(self, links: Mapping[str, str] | None, should_drop: DropRule | None) -> None:
        self.entries, _, changes = _sweep(self.entries, links, should_drop)
        self.changes.extend(changes)

    @property
    def items(self) -> list[dict[str, Any]]:
        return [item for _, item in self.entries]


_ASSISTANT_BAD_PARTS = frozenset({"input_image", "input_file", "input_audio"})


def is_reference(item: Mapping[str, Any]) -> bool:
    """Whether ``item`` is an ``item_reference`` (explicit, or an object holding only ``id``).

    Stream-only fields do not count: ``{"id", "sequence_number"}`` is still a reference.
    """
    t = item.get("type")
    if t == "item_reference":
        return True
    return t is None and "id" in item and set(item) <= {"id", "type", *STREAM_ONLY_FIELDS}


def _has_text(item: Mapping[str, Any]) -> bool:
    content = item.get("content")
    if isinstance(content, str):
        return bool(content)
    if isinstance(content, list):
        return any(
            isinstance(p, Mapping) and ((isinstance(p.get("text"), str) and p["text"]) or p.get("refusal"))
            for p in content
        )
    return False


def _call_ids(items: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    return {
        (item["type"], item["call_id"])
        for item in items
        if item.get("type") in CALL_OUTPUT_TYPES and isinstance(item.get("call_id"), str)
    }


def _output_call_ids(items: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    return {
        (_OUTPUT_CALL_TYPES[item["type"]], item["call_id"])
        for item in items
        if item.get("type") in _OUTPUT_CALL_TYPES and isinstance(item.get("call_id"), str)
    }


def _store_rule(store: bool) -> DropRule | None:
    if store:
        return None

    def rule(item: Mapping[str, Any], _out: Sequence[Mapping[str, Any]]) -> str | None:
        enc = item.get("encrypted_content")
        if not isinstance(enc, str) or not enc:
            return "reasoning_without_encrypted_content"
        return None

    return rule


def _fingerprint_rule(
    fingerprints: Mapping[str, ReplayFingerprint | Mapping[str, Any]],
    model: str,
    tools: Sequence[Any] | None,
    instructions: Any,
    unfingerprinted: Literal["keep", "drop"],
) -> DropRule:
    hasher = _PrefixHasher()
    parsed = {
        k: (v if isinstance(v, ReplayFingerprint) else ReplayFingerprint.from_dict(v)) for k, v in fingerprints.items()
    }

    def rule(item: Mapping[str, Any], out: Sequence[Mapping[str, Any]]) -> str | None:
        fp = parsed.get(item.get("id"))  # type: ignore[arg-type]
        if fp is None:
            return "reasoning_unfingerprinted" if unfingerprinted == "drop" else None
        if not fp.same_context(model=model, tools=tools, instructions=instructions):
            return "reasoning_fingerprint_mismatch"
        if hasher.digest(out, fp.prefix_length) != fp.prefix:
            return "reasoning_fingerprint_mismatch"
        return None

    return rule


def _chain(*rules: DropRule | None) -> DropRule | None:
    active = [r for r in rules if r is not None]
    if not active:
        return None

    def rule(item: Mapping[str, Any], out: Sequence[Mapping[str, Any]]) -> str | None:
        for r in active:
            reason = r(item, out)
            if reason is not None:
                return reason
        return None

    return rule


class SanitizeResult(NamedTuple):
    """Result of :func:`sanitize_input`.

    Attributes:
        input: the input to send (a new list; untouched items are the caller's objects).
        report: every change made, in pass order, as :class:`Change` records.
        covered_length: ``input[:covered_length]`` is the region a replay fingerprint covers;
            the ``trailing`` items follow it.
    """

    input: list[dict[str, Any]]
    report: list[Change]
    covered_length: int

    def fingerprint(
        self, *, model: str, tools: Sequence[Any] | None = None, instructions: Any = None
    ) -> ReplayFingerprint:
        """The :class:`ReplayFingerprint` to record for reasoning this request produces."""
        return replay_fingerprint(
            model=model, tools=tools, instructions=instructions, prefix=self.input[: self.covered_length]
        )


def _run(
    items: Sequence[Mapping[str, Any]],
    *,
    store: bool,
    previous_items: Sequence[Mapping[str, Any]] | None,
    links: Mapping[str, str] | None,
    in_progress: Literal["drop", "keep"],
    unanswered: Literal["abort", "drop"],
    aborted_output: str,
    extra_rule: DropRule | None,
) -> _Pipeline:
    if unanswered not in ("abort", "drop"):
        raise InvalidArgumentError(f"unanswered must be 'abort' or 'drop', got {unanswered!r}")
    if in_progress not in ("drop", "keep"):
        raise InvalidArgumentError(f"in_progress must be 'drop' or 'keep', got {in_progress!r}")
    if not isinstance(aborted_output, str):
        raise InvalidTypeError(f"aborted_output must be a string, got {type_name(aborted_output)}")
    previous = _check_items(previous_items or [], "previous_items")
    pipeline = _Pipeline(items)
    # what the input itself shows (reasoning -> the items after it), then what the caller recorded
    links = {**reasoning_links(pipeline.items), **(links or {})}
    pipeline.fix_items(store)
    if in_progress == "drop":
        pipeline.fix_in_progress()
    pipeline.dedupe(previous)
    pipeline.pair_calls(previous, unanswered, aborted_output)
    pipeline.sweep(links, _chain(_store_rule(store), extra_rule))
    return pipeline


def sanitize_input(
    items: Sequence[Mapping[str, Any]],
    store: bool = False,
    *,
    previous_items: Sequence[Mapping[str, Any]] | None = None,
    links: Mapping[str, str] | None = None,
    fingerprints: Mapping[str, ReplayFingerprint | Mapping[str, Any]] | None = None,
    model: str | None = None,
    tools: Sequence[Any] | None = None,
    instructions: Any = None,
    unfingerprinted: Literal["keep", "drop"] = "keep",
    in_progress: Literal["drop", "keep"] = "drop",
    unanswered: Literal["abort", "drop"] = "abort",
    aborted_output: str = ABORTED_OUTPUT,
    trailing: Sequence[Mapping[str, Any]] | None = None,
) -> SanitizeResult:
    """Replay hygiene for an input rebuilt from stored items (e.g. ``to_responses_input`` output).

    Passes, in order (each change is reported):

    1. per item: drop stream-only fields (:data:`STREAM_ONLY_FIELDS`); reasoning: strip ``status``,
       always emit ``summary`` (``[]`` when missing); ``function_call`` without ``arguments`` gets
       ``"{}"``; assistant ``input_text`` parts become ``output_text`` (other input parts in an
       assistant message are dropped); under ``store=False`` ``item_reference`` / id-only items are
       dropped;
    2. interrupted turns (``in_progress="drop"``): an ``in_progress`` assistant message with text
       is kept as ``status: "incomplete"`` (without text it is dropped); any other ``in_progress``
       item is dropped, except a call that has its output;
    3. dedupe by ``id`` (first wins; a later item that differs from the first keeps its content and
       loses the id when the id is optional for its type); items whose id is in
       ``previous_items`` (what ``previous_response_id`` holds) are dropped;
    4. pair every ``call_id``: outputs without a call are dropped; a call without an output gets a
       synthesised ``aborted_output`` right after its step's calls (``unanswered="abort"``, for
       ``function_call``/``custom_tool_call``) or is dropped (``"drop"``, and for other call types);
    5. the reasoning sweep (:func:`sweep_reasoning`): reasoning is dropped when unpaired, without an
       id, under ``store=False`` without ``encrypted_content``, or — when ``fingerprints``
       (``{rs_id: ReplayFingerprint}``) are given — when its fingerprint does not match ``model`` /
       ``tools`` / ``instructions`` / the input prefix (``unfingerprinted="drop"`` also drops
       reasoning with no recorded fingerprint). The item after a dropped reasoning loses its id.

    ``trailing`` items are appended afterwards, outside the covered region. Never mutates; never
    reorders.
    """
    extra: DropRule | None = None
    if fingerprints:
        if not isinstance(model, str) or not model:
            raise InvalidArgumentError("model is required when fingerprints are given")
        if unfingerprinted not in ("keep", "drop"):
            raise InvalidArgumentError(f"unfingerprinted must be 'keep' or 'drop', got {unfingerprinted!r}")
        extra = _fingerprint_rule(fingerprints, model, tools, instructions, unfingerprinted)
    pipeline = _run(
        items,
        store=store,
        previous_items=previous_items,
        links=links,
        in_progress=in_progress,
        unanswered=unanswered,
        aborted_output=aborted_output,
        extra_rule=extra,
    )
    result = pipeline.items
    covered = len(result)
    if trailing is not None:
        result.extend(_check_items(trailing, "trailing"))
    return SanitizeResult(result, pipeline.changes, covered)
