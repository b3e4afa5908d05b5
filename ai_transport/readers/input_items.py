"""The items of a Responses API ``input`` list, as replay hygiene sees them.

Their kinds (:data:`MODEL_OUTPUT_TYPES`, :data:`CALL_OUTPUT_TYPES`, :data:`STREAM_ONLY_FIELDS`),
the predicates the passes share (:func:`is_output_item`, :func:`is_paired`, :func:`is_reference`),
which reasoning item produced which output item (:func:`reasoning_links`), and the :class:`Change`
record every pass reports. Pure functions over plain JSON-shaped dicts; see
:mod:`ai_transport.readers.hygiene` for what "paired" means.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidTypeError, type_name

__all__ = [
    "CALL_OUTPUT_TYPES",
    "MODEL_OUTPUT_TYPES",
    "STREAM_ONLY_FIELDS",
    "Change",
    "is_output_item",
    "is_paired",
    "is_reference",
    "reasoning_links",
]

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
# Item helpers (shared by the passes and preflight)


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
