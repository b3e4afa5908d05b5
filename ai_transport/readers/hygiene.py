"""Replay hygiene for Responses API ``input`` lists (pure functions over plain JSON-shaped dicts).

The API is stricter than its SDK types (see ``openai-responses-wire.md`` §6/§7). This module turns
what :func:`~ai_transport.readers.to_responses_input` rebuilds from a run into an input the API
accepts, saying what it changed:

* :func:`sweep_reasoning` (:mod:`.reasoning_sweep`) — the reasoning pairing sweep: drops every
  ``reasoning`` item that is not immediately followed by its paired output item, strips the ``id``
  of an output item whose reasoning was just dropped, and reports the length of the region a replay
  fingerprint covers.
* :class:`ReplayFingerprint` / :func:`replay_fingerprint` (:mod:`.fingerprints`) — ties replayed
  reasoning to what produced it (model, tools, instructions and the input prefix it was produced
  after).
* :func:`sanitize_input` (here) — the whole replay hygiene in one call; item kinds, predicates and
  :class:`Change` live in :mod:`.input_items`.

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

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from ..errors import InvalidArgumentError, InvalidTypeError, type_name
from .fingerprints import ReplayFingerprint, _PrefixHasher, normalize_tools, replay_fingerprint
from .input_items import (
    _ASSISTANT_BAD_PARTS,
    _ID_OPTIONAL,
    _OUTPUT_CALL_TYPES,
    CALL_OUTPUT_TYPES,
    MODEL_OUTPUT_TYPES,
    STREAM_ONLY_FIELDS,
    Change,
    _call_ids,
    _check_items,
    _describe,
    _has_text,
    _item_kind,
    _output_call_ids,
    _str_or_none,
    _strip_id,
    is_output_item,
    is_paired,
    is_reference,
    reasoning_links,
)
from .reasoning_sweep import DropRule, SweepResult, _sweep, drop_reasoning, sweep_reasoning

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

#: Call types for which an "aborted" output can be synthesised (their output is a plain string).
_SYNTHESISABLE = ("function_call", "custom_tool_call")

#: Output synthesised for a tool call whose turn was interrupted before it was answered.
ABORTED_OUTPUT = '{"error":"aborted","message":"The tool call was interrupted before it returned a result."}'


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
