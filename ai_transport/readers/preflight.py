"""Offline prediction of the HTTP 400s the Responses API answers to a bad replay ``input``.

:func:`preflight` lists the problems, each with the API's exact message text, ``param`` and
``code`` (``openai-responses-wire.md`` §7); :func:`check` raises the first one;
:func:`repair` returns an input :func:`preflight` accepts, changing as little as possible and
saying what it changed.

**Order.** The list is ordered as the API would report, so ``problems[0]`` is the error the API
would answer. The API validates the request shape first, so problems come in these phases, each in
input order: (1) shape — ``Missing required parameter``, ``Unknown parameter``, ``Invalid value``
(per item in that order); (2) duplicate ids; (3) ids the server cannot find (``store: false``);
(4) reasoning pairing; (5) tool call / output pairing. Within a phase the lowest input index comes
first. The phases' relative order is our model of the server (each recorded error body documents
one mistake at a time), not something a recording shows.

**Which texts are recorded.** ``Problem.recorded`` is ``True`` when the exact text is a recorded
API message (or the same template with another index/id); it is ``False`` for the texts we derive
by analogy for other tool-call families (``custom tool call``, ``computer call``, …) and for the
``input_image``/``input_file`` variants of the assistant-content message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ..errors import AITransportError, InvalidTypeError, type_name
from .hygiene import ABORTED_OUTPUT, _run
from .input_items import (
    _ASSISTANT_BAD_PARTS,
    _OUTPUT_CALL_TYPES,
    CALL_OUTPUT_TYPES,
    STREAM_ONLY_FIELDS,
    Change,
    _call_ids,
    _object_array,
    _output_call_ids,
    is_output_item,
    is_paired,
    is_reference,
)

__all__ = [
    "PREFLIGHT_ERROR_CODE",
    "REASONING_REPLAY_KINDS",
    "PreflightError",
    "Problem",
    "RepairResult",
    "check",
    "parse_api_error",
    "preflight",
    "repair",
]

#: ``code`` of the :class:`PreflightError` that :func:`check` raises.
PREFLIGHT_ERROR_CODE = "E_OPENAI_RESPONSES_INPUT_REJECTED"

_KIND = {
    "function_call": "function call",
    "custom_tool_call": "custom tool call",
    "shell_call": "shell call",
    "computer_call": "computer call",
    "apply_patch_call": "apply patch call",
}
_RECORDED_ORPHAN = ("function_call", "shell_call")

#: Problem kinds that mean "the API rejected how reasoning was replayed" (pairing of reasoning and
#: its output item). A client maps these to ``E_OPENAI_RESPONSES_REASONING_REPLAY_REJECTED``.
REASONING_REPLAY_KINDS = frozenset({"reasoning_unpaired", "reasoning_missing"})
_RECORDED_UNANSWERED = ("function_call",)


@dataclass(frozen=True)
class Problem:
    """One 400 the API would answer.

    Attributes:
        message: the API's message text, exactly (``error.message``).
        param: the API's ``error.param`` (``"input"``, ``"input[3].status"``, …).
        code: the API's ``error.code`` (``None``, ``"missing_required_parameter"``, …).
        index: the input index of the offending item.
        kind: our stable name for the rule (``"duplicate_id"``, ``"reasoning_unpaired"``, …).
        recorded: ``True`` when this text template is a recorded API message (see module doc).
        type: the API's ``error.type`` (always ``"invalid_request_error"``).
        status: the HTTP status (400).
    """

    message: str
    param: str | None
    code: str | None
    index: int | None
    kind: str
    recorded: bool = True
    type: str = "invalid_request_error"
    status: int = 400

    def to_error_body(self) -> dict[str, Any]:
        """The API's error body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def __str__(self) -> str:
        return self.message


class PreflightError(AITransportError, ValueError):
    """The API would reject this input; ``message`` is the first problem's exact text.

    Attributes:
        problems: every :class:`Problem`, in the order the API would report them.
        param: the first problem's ``param``; ``api_code``: its ``code``.
    """

    def __init__(self, problems: Sequence[Problem]) -> None:
        first = problems[0]
        super().__init__(first.message, PREFLIGHT_ERROR_CODE, status_code=400)
        self.problems = list(problems)
        self.param = first.param
        self.api_code = first.code


class RepairResult(NamedTuple):
    """Result of :func:`repair`: the ``input`` to send and the ``changes`` made (``[]`` if none)."""

    input: list[dict[str, Any]]
    changes: list[Change]


def _items(input: Any) -> list[Mapping[str, Any]] | None:
    if isinstance(input, str):
        return None
    if isinstance(input, (bytes, Mapping)) or not isinstance(input, Iterable):
        raise InvalidTypeError(f"input must be a string or an array of items, got {type_name(input)}")
    return _object_array(input, "input", "items")


def _missing(i: int, field: str, kind: str) -> Problem:
    param = f"input[{i}].{field}"
    return Problem(f"Missing required parameter: '{param}'.", param, "missing_required_parameter", i, kind)


def _unknown(i: int, field: str, kind: str) -> Problem:
    param = f"input[{i}].{field}"
    return Problem(f"Unknown parameter: '{param}'.", param, "unknown_parameter", i, kind)


def _shape_problems(i: int, item: Mapping[str, Any]) -> list[Problem]:
    missing: list[Problem] = []
    unknown: list[Problem] = []
    invalid: list[Problem] = []
    t = item.get("type")
    if t == "reasoning":
        if not isinstance(item.get("id"), str):
            missing.append(_missing(i, "id", "reasoning_without_id"))
        if item.get("summary") is None:
            missing.append(_missing(i, "summary", "missing_summary"))
        if "status" in item:
            unknown.append(_unknown(i, "status", "reasoning_status"))
    elif t == "function_call" and item.get("arguments") is None:
        missing.append(_missing(i, "arguments", "missing_arguments"))
    for key in STREAM_ONLY_FIELDS:
        if key in item:
            unknown.append(_unknown(i, key, "stream_only_field"))
    if (t is None or t == "message") and item.get("role") == "assistant" and isinstance(item.get("content"), list):
        for k, part in enumerate(item["content"]):
            if not isinstance(part, Mapping):
                continue
            for key in STREAM_ONLY_FIELDS:
                if key in part:
                    unknown.append(_unknown(i, f"content[{k}].{key}", "stream_only_field"))
            ptype = part.get("type")
            if ptype == "input_text" or ptype in _ASSISTANT_BAD_PARTS:
                invalid.append(
                    Problem(
                        f"Invalid value: '{ptype}'. Supported values are: 'output_text' and 'refusal'.",
                        f"input[{i}].content[{k}]",
                        "invalid_value",
                        i,
                        "assistant_input_part",
                        recorded=ptype == "input_text",
                    )
                )
    return missing + unknown + invalid


def _not_found(i: int, iid: Any) -> Problem:
    return Problem(
        f"Item with id '{iid}' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input.",
        "input",
        None,
        i,
        "not_persisted",
    )


def preflight(
    input: Sequence[Mapping[str, Any]] | str,
    store: bool = False,
    *,
    previous_items: Sequence[Mapping[str, Any]] | None = None,
    links: Mapping[str, str] | None = None,
) -> list[Problem]:
    """The 400s the API would answer to this ``input``, in the order it would report them.

    ``[]`` means none predicted. ``store`` is the request's ``store`` flag (``False`` for this
    library's stateless client). ``previous_items`` are the items ``previous_response_id`` /
    ``conversation`` already hold (re-sending one is a duplicate; their calls and outputs count for
    pairing). ``links`` (``{item id: reasoning id}``, see :func:`~ai_transport.readers.hygiene.reasoning_links`)
    lets it predict ``Item 'fc_…' … without its required 'reasoning' item`` — without it that
    error cannot be known offline. A string ``input`` is always accepted.
    """
    items = _items(input)
    if items is None:
        return []
    previous = _items(previous_items or []) or []
    shape: list[Problem] = []
    duplicates: list[Problem] = []
    not_found: list[Problem] = []
    reasoning: list[Problem] = []
    pairing: list[Problem] = []

    held = {p.get("id") for p in previous if isinstance(p.get("id"), str)}
    seen: set[str] = set()
    for i, item in enumerate(items):
        shape.extend(_shape_problems(i, item))
        iid = item.get("id")
        if isinstance(iid, str):
            if iid in seen or iid in held:
                duplicates.append(
                    Problem(
                        f"Duplicate item found with id {iid}. Remove duplicate items from your input and try again.",
                        "input",
                        None,
                        i,
                        "duplicate_id",
                    )
                )
            seen.add(iid)
        if not store:
            if is_reference(item):
                not_found.append(_not_found(i, iid))
            elif item.get("type") == "reasoning" and isinstance(iid, str):
                enc = item.get("encrypted_content")
                if not isinstance(enc, str) or not enc:
                    not_found.append(_not_found(i, iid))

    # reasoning pairing, and items whose producing reasoning is absent (needs links)
    present_reasoning: set[str] = set()
    for i, item in enumerate(items):
        iid = item.get("id")
        if item.get("type") == "reasoning":
            if isinstance(iid, str):
                present_reasoning.add(iid)
            following = items[i + 1] if i + 1 < len(items) else None
            if not is_paired(item, following, links):
                reasoning.append(
                    Problem(
                        f"Item '{iid}' of type 'reasoning' was provided without its required following item.",
                        "input",
                        None,
                        i,
                        "reasoning_unpaired",
                    )
                )
        elif links and isinstance(iid, str) and iid in links and is_output_item(item):
            required = links[iid]
            if required not in present_reasoning:
                t = item.get("type") or "message"
                reasoning.append(
                    Problem(
                        f"Item '{iid}' of type '{t}' was provided without its required 'reasoning' item: '{required}'.",
                        "input",
                        None,
                        i,
                        "reasoning_missing",
                    )
                )

    # tool call <-> output pairing (by call_id, within each call family)
    calls = _call_ids([*previous, *items])
    outputs = _output_call_ids([*previous, *items])
    for i, item in enumerate(items):
        t = item.get("type")
        cid = item.get("call_id")
        if not isinstance(cid, str) or not isinstance(t, str):
            continue
        if t in CALL_OUTPUT_TYPES and (t, cid) not in outputs:
            pairing.append(
                Problem(
                    f"No tool output found for {_KIND[t]} {cid}.",
                    "input",
                    None,
                    i,
                    "unanswered_call",
                    recorded=t in _RECORDED_UNANSWERED,
                )
            )
        elif t in _OUTPUT_CALL_TYPES and (_OUTPUT_CALL_TYPES[t], cid) not in calls:
            call_type = _OUTPUT_CALL_TYPES[t]
            pairing.append(
                Problem(
                    f"No tool call found for {_KIND[call_type]} output with call_id {cid}.",
                    "input",
                    None,
                    i,
                    "orphan_output",
                    recorded=call_type in _RECORDED_ORPHAN,
                )
            )
    return shape + duplicates + not_found + reasoning + pairing


def check(
    input: Sequence[Mapping[str, Any]] | str,
    store: bool = False,
    *,
    previous_items: Sequence[Mapping[str, Any]] | None = None,
    links: Mapping[str, str] | None = None,
) -> None:
    """Raise :class:`PreflightError` (message = the first problem's exact text) if :func:`preflight` finds any."""
    problems = preflight(input, store, previous_items=previous_items, links=links)
    if problems:
        raise PreflightError(problems)


def repair(
    input: Sequence[Mapping[str, Any]],
    store: bool = False,
    *,
    previous_items: Sequence[Mapping[str, Any]] | None = None,
    links: Mapping[str, str] | None = None,
    unanswered: Literal["abort", "drop"] = "abort",
    aborted_output: str = ABORTED_OUTPUT,
) -> RepairResult:
    """An input :func:`preflight` accepts, changing as little as possible, and what was changed.

    Each change answers one predicted problem: stream-only fields and reasoning ``status`` are
    removed; a missing ``summary`` becomes ``[]`` and missing ``arguments`` ``"{}"``; assistant
    ``input_text`` parts become ``output_text`` (other input parts there are dropped); duplicates
    are dropped (or lose their id when they differ from the first and the id is optional);
    ``store: false`` references and reasoning without ``encrypted_content`` are dropped; outputs
    without a call are dropped; a call without an output gets an aborted output right after its
    step (``unanswered="abort"``, function/custom tool calls) or is dropped; unpaired reasoning is
    dropped, and the output item after a dropped reasoning item loses its id. A call that has its
    output is never dropped; items are never reordered; an input without problems comes back
    unchanged (``changes == []``), so ``repair`` is idempotent.
    """
    pipeline = _run(
        input,
        store=store,
        previous_items=previous_items,
        links=links,
        in_progress="keep",
        unanswered=unanswered,
        aborted_output=aborted_output,
        extra_rule=None,
    )
    return RepairResult(pipeline.items, pipeline.changes)


_INDEX = re.compile(r"^input\[(\d+)\]")
_TEMPLATES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^No tool output found for .+ \S+\.$"), "unanswered_call"),
    (re.compile(r"^No tool call found for .+ output with call_id \S+\.$"), "orphan_output"),
    (re.compile(r"^Item '[^']*' of type 'reasoning' was provided without its required following item\.$"), "reasoning_unpaired"),
    (re.compile(r"^Item '[^']*' of type '[^']+' was provided without its required 'reasoning' item: '[^']*'\.$"), "reasoning_missing"),
    (re.compile(r"^Item with id '[^']*' not found\."), "not_persisted"),
    (re.compile(r"^Duplicate item found with id \S+\. Remove duplicate items"), "duplicate_id"),
    (re.compile(r"^Invalid value: '[^']+'\. Supported values are: 'output_text' and 'refusal'\.$"), "assistant_input_part"),
    (re.compile(r"^The encrypted content .*could not be verified"), "invalid_encrypted_content"),
]
_MISSING = re.compile(r"^Missing required parameter: 'input\[\d+\]\.([^']+)'\.$")
_UNKNOWN = re.compile(r"^Unknown parameter: 'input\[\d+\]\.([^']+)'\.$")
_MISSING_KINDS = {"summary": "missing_summary", "arguments": "missing_arguments", "id": "reasoning_without_id"}


def parse_api_error(body: Mapping[str, Any]) -> Problem | None:
    """The :class:`Problem` a real API error body describes, or ``None`` for an unknown error.

    ``body`` is the JSON error body (``{"error": {...}}``) or its inner ``error`` object. The kind
    is recognised from the message template (the same texts :func:`preflight` produces), so a
    client can tell a reasoning-pairing rejection (``kind in REASONING_REPLAY_KINDS``) or an
    ``invalid_encrypted_content`` from other 400s. ``index`` comes from an ``input[N]`` param.
    """
    if not isinstance(body, Mapping):
        raise InvalidTypeError(f"body must be an object, got {type_name(body)}")
    error = body.get("error", body)
    if not isinstance(error, Mapping):
        return None
    message, param, code = error.get("message"), error.get("param"), error.get("code")
    if not isinstance(message, str):
        return None
    kind: str | None = None
    for pattern, name in _TEMPLATES:
        if pattern.search(message):
            kind = name
            break
    if kind is None and (m := _MISSING.match(message)):
        kind = _MISSING_KINDS.get(m.group(1), "missing_parameter")
    if kind is None and (m := _UNKNOWN.match(message)):
        field = m.group(1).rsplit(".", 1)[-1]
        kind = "reasoning_status" if m.group(1) == "status" else "stream_only_field" if field in STREAM_ONLY_FIELDS else "unknown_parameter"
    if kind is None and code == "invalid_encrypted_content":
        kind = "invalid_encrypted_content"
    if kind is None:
        return None
    index_match = _INDEX.match(param) if isinstance(param, str) else None
    return Problem(
        message,
        param if isinstance(param, str) else None,
        code if isinstance(code, str) else None,
        int(index_match.group(1)) if index_match else None,
        kind,
        type=etype if isinstance(etype := error.get("type"), str) else "invalid_request_error",
    )
