"""The Responses codec's streamed messages (sans-I/O): the output
descriptor groups (``output_text``, ``refusal``, reasoning text / summary, function call
arguments), and the Responses events a stream's start, deltas and end rebuild — the start preceded
by the synthetic ``response.output_item.added`` of 0.8.0's mid-stream-join repair.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..core.headers import NAME_OUTPUT
from ..core.inbound import _ABSENT, _json_field, _nullish, _prop, _str_field, _strip
from ..core.streams import DeltaTemplate, _Tracker, delta_event, delta_template

# ---------------------------------------------------------------------------------------------
# Stream trackers and the output descriptor groups

_CONTENT_ADDED: Final = "response.content_part.added"
_SUMMARY_ADDED: Final = "response.reasoning_summary_part.added"
_ITEM_ADDED: Final = "response.output_item.added"


class _Group:
    """A streamed output group (``kind``) and how it rebuilds its start / delta / end events."""

    __slots__ = ("delta_type", "end_field", "end_type", "index_key", "kind", "start_type")

    def __init__(self, kind: str, delta_type: str, end_type: str, end_field: str, index_key: str) -> None:
        self.kind = kind
        self.start_type = _SUMMARY_ADDED if index_key == "summary_index" else _CONTENT_ADDED
        self.delta_type = delta_type
        self.end_type = end_type
        self.end_field = end_field
        self.index_key = index_key


_FN_ARGS: Final = "function_call_arguments"

_GROUPS: Final[dict[str, _Group]] = {
    g.kind: g
    for g in (
        _Group(
            "output_text", "response.output_text.delta", "response.output_text.done", "text", "content_index"
        ),
        _Group("refusal", "response.refusal.delta", "response.refusal.done", "refusal", "content_index"),
        _Group(
            "reasoning_text",
            "response.reasoning_text.delta",
            "response.reasoning_text.done",
            "text",
            "content_index",
        ),
        _Group(
            "reasoning_summary_text",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "text",
            "summary_index",
        ),
    )
}

_FN_DELTA: Final = "response.function_call_arguments.delta"
_FN_DONE: Final = "response.function_call_arguments.done"

_MESSAGE_PARTS: Final = ("output_text", "refusal")
_REASONING_PARTS: Final = ("reasoning_text", "summary_text")


def _group_template(group: _Group, item_id: Any, index: Any) -> DeltaTemplate:
    return delta_template(group.delta_type, _strip({"item_id": item_id, group.index_key: index}), "delta", False)


def _fn_template(item: Any, output_index: Any) -> DeltaTemplate:
    fields = {"item_id": _nullish(_prop(item, "id"), ""), "output_index": _nullish(output_index, 0)}
    return delta_template(_FN_DELTA, fields, "delta", True)


def _immutable(v: Any) -> bool:
    return not isinstance(v, (dict, list))


def _keep_template(tracker: _Tracker, template: DeltaTemplate | None) -> None:
    # Cache only immutable field values, so events never share a mutable object.
    if template is None or all(_immutable(v) for v in template[0].values()):
        tracker._delta = template


def _delta_template(self: _Tracker) -> DeltaTemplate | None:
    """The delta template (:data:`~ai_transport.codec.core.streams.DeltaTemplate`) of this stream's delta events, read once from the start headers.

    ``None`` when the stream is not an ``ai-output`` stream of a known group (no delta events).
    Usually :func:`_start_events` has already read it (from the values it parsed).
    """
    cached = self._delta
    if cached is not False:
        return cached  # type: ignore[return-value]
    template: DeltaTemplate | None = None
    if self.name == NAME_OUTPUT:
        kind = self.codec.get("kind")
        if kind is None:
            kind = ""
        group = _GROUPS.get(kind) if type(kind) is str else None
        if group is not None:
            template = _group_template(
                group, _str_field(self.codec, "item_id"), _json_field(self.codec, group.index_key)
            )
        elif kind == _FN_ARGS:
            template = _fn_template(_json_field(self.codec, "item"), _json_field(self.codec, "output_index"))
    _keep_template(self, template)
    return template


# ---------------------------------------------------------------------------------------------
# Event rebuilding


def _start_events(tracker: _Tracker) -> list[dict[str, Any]]:
    if tracker.name != NAME_OUTPUT:
        return []
    codec = tracker.codec
    out: list[dict[str, Any]] = []
    kind = _nullish(codec.get("kind"), "")
    group = _GROUPS.get(kind) if type(kind) is str else None
    item_id = _str_field(codec, "item_id")
    output_index = _json_field(codec, "output_index")  # each header parsed once
    part: Any = _ABSENT
    # Mid-stream-join repair: the opening output_item.added of the part's container.
    if item_id is not _ABSENT:
        part = _json_field(codec, "part")
        part_type = _prop(part, "type")
        container: dict[str, Any] | None = None
        if part_type in _MESSAGE_PARTS and type(part_type) is str:
            container = {
                "id": item_id,
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
        elif part_type in _REASONING_PARTS and type(part_type) is str:
            container = {"id": item_id, "type": "reasoning", "summary": []}
        if container is not None:
            index = _nullish(output_index, 0)
            if isinstance(index, (dict, list)):  # never share a mutable value between events
                index = _json_field(codec, "output_index")
            out.append({"type": _ITEM_ADDED, "item": container, "output_index": index})
    elif group is not None:
        part = _json_field(codec, "part")
    if group is not None:
        index = _json_field(codec, group.index_key)
        bag = _strip({"item_id": item_id, "output_index": output_index, group.index_key: index, "part": part})
        bag["type"] = group.start_type
        out.append(bag)
        if _immutable(item_id) and _immutable(index):  # the delta template, from the same reads
            tracker._delta = _group_template(group, item_id, index)
            raw_output, raw_index = codec.get("output_index"), codec.get(group.index_key)
            if (
                type(raw_output) is str
                and type(raw_index) is str
                and type(output_index) is int
                and type(index) is int
            ):  # what the end reads of the same raw headers (see _end_fields)
                tracker.memo = (raw_output, raw_index, output_index, index)
    elif kind == _FN_ARGS:
        item = _json_field(codec, "item")
        bag = _strip({"item": item, "output_index": output_index})
        bag["type"] = _ITEM_ADDED
        out.append(bag)
        if _immutable(output_index):
            # The delta template and what the end reads of the item (its id, type and name), so
            # neither parses the item again (the closing append repeats the start's headers).
            item_id = _prop(item, "id")
            name = _prop(item, "name")
            if _immutable(item_id) and _immutable(name):
                tracker._delta = _fn_template(item, output_index)
                raw = codec.get("item")
                if type(raw) is str:
                    tracker.memo = (raw, item_id, _prop(item, "type"), name)
    return out

#: ``JSON.parse`` of the index headers an encoder writes (``"0"`` .. ``"63"``), read by one lookup:
#: what :func:`~ai_transport.codec.core.inbound._json_field` reads them as (ints, no warning).
_SMALL_INDEXES: Final[dict[str, int]] = {str(i): i for i in range(64)}


def _closed_stream_events(name: Any, data: str, codec: Mapping[str, Any], complete: bool) -> list[dict[str, Any]] | None:
    """The events of an ``ai-output`` stream of a known group that its first contact opens and
    closes (a history aggregate; the decoder's ``_closed_stream_events`` hook), built from its
    headers with no tracker: :func:`_start_events`, the one delta of ``data`` and (``complete``)
    :func:`_end_events`, as they read a tracker of these headers, in the common shape only (a string
    ``item_id``, both indexes small integers, as the encoder writes them); None: another shape,
    which the decoder reads through a tracker.

    Equivalent because: the start reads ``item_id`` / ``output_index`` / the group's index / ``part``
    once each (``part`` parsed once, as there); with both indexes ints, its delta template is cached
    and the end's memo holds (the closing headers are these very headers), so the delta and the
    end reuse the same item id and integers; ``data`` is the accumulated text."""
    if name != NAME_OUTPUT:
        return []  # (no start, delta or end events but an ai-output stream's)
    kind = codec.get("kind")
    group = _GROUPS.get(kind) if type(kind) is str else None
    item_id = codec.get("item_id")
    if group is None or type(item_id) is not str:
        return None
    raw = codec.get("output_index")
    output_index = _SMALL_INDEXES.get(raw) if type(raw) is str else None
    index_key = group.index_key
    raw = codec.get(index_key)
    index = _SMALL_INDEXES.get(raw) if type(raw) is str else None
    if output_index is None or index is None:
        return None
    part = _json_field(codec, "part")
    part_type = part.get("type", _ABSENT) if type(part) is dict else _prop(part, "type")
    out: list[dict[str, Any]] = []
    # Mid-stream-join repair: the opening output_item.added of the part's container.
    if part_type in _MESSAGE_PARTS and type(part_type) is str:
        out.append(
            {
                "type": _ITEM_ADDED,
                "item": {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []},
                "output_index": output_index,
            }
        )
    elif part_type in _REASONING_PARTS and type(part_type) is str:
        out.append(
            {"type": _ITEM_ADDED, "item": {"id": item_id, "type": "reasoning", "summary": []}, "output_index": output_index}
        )
    start: dict[str, Any] = {"item_id": item_id, "output_index": output_index, index_key: index}
    if part is not _ABSENT:
        start["part"] = part
    start["type"] = group.start_type
    out.append(start)
    if data:
        out.append({"item_id": item_id, index_key: index, "delta": data, "type": group.delta_type})
    if complete:
        out.append(
            {
                "type": group.end_type,
                "item_id": item_id,
                "output_index": output_index,
                index_key: index,
                group.end_field: data,
            }
        )
    return out


def _delta_events(tracker: _Tracker, delta: str, out: list[dict[str, Any]]) -> None:
    template = tracker._delta
    if template is False:
        template = _delta_template(tracker)
    if template is not None:
        out.append(delta_event(template, delta))  # type: ignore[arg-type]

def _end_fields(tracker: _Tracker, closing: Mapping[str, Any], group: _Group) -> tuple[Any, Any, Any]:
    """``item_id``, ``output_index`` and the index of ``group``'s end event, read from the closing
    headers; the two integers are kept from the start (``tracker.memo``: its raw strings and the
    integers they parsed to) when the closing headers repeat those strings, as a history aggregate's
    always do."""
    memo = tracker.memo
    if memo is not None:
        item_id, output_index, index = closing.get("item_id"), closing.get("output_index"), closing.get(group.index_key)
        if (
            type(item_id) is str  # read as it is: only the two integers are kept
            and type(output_index) is str
            and output_index == memo[0]
            and type(index) is str
            and index == memo[1]
        ):
            return item_id, memo[2], memo[3]
    return (
        _nullish(_str_field(closing, "item_id"), ""),
        _nullish(_json_field(closing, "output_index"), 0),
        _nullish(_json_field(closing, group.index_key), 0),
    )


def _end_events(tracker: _Tracker, closing: Mapping[str, Any], out: list[dict[str, Any]]) -> None:
    kind = _nullish(tracker.codec.get("kind"), "")
    group = _GROUPS.get(kind) if type(kind) is str else None
    if group is not None:
        item_id, output_index, index = _end_fields(tracker, closing, group)
        out.append(
            {
                "type": group.end_type,
                "item_id": item_id,
                "output_index": output_index,
                group.index_key: index,
                group.end_field: tracker.accumulated,
            }
        )
    elif kind == _FN_ARGS:
        memo = tracker.memo
        raw = closing.get("item", _ABSENT)
        if memo is not None and type(raw) is str and raw == memo[0]:
            item_id, item_type, name = memo[1], memo[2], memo[3]
        else:
            item = _json_field(closing, "item")
            item_id, item_type, name = _prop(item, "id"), _prop(item, "type"), _prop(item, "name")
        ev = {
            "type": _FN_DONE,
            "item_id": _nullish(item_id, ""),
            "output_index": _nullish(_json_field(closing, "output_index"), 0),
            "arguments": tracker.accumulated,
        }
        if item_type == "function_call":
            if name is not _ABSENT:
                ev["name"] = name
        else:
            ev["name"] = ""
        out.append(ev)
