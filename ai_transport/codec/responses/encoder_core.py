"""The Responses encoder's sans-I/O core: Responses events and inputs in, Ably :class:`Operation` s out.

:class:`EncoderCore` is the generic :class:`~ai_transport.codec.core.encoder_core.StreamEncoderCore`
with the Responses dispatch (the output descriptor table of 0.8.0's ``openai`` entry compiled by hand
into one branch per event type); see
:mod:`ai_transport.codec.encoder` for the operations it hands out and the asyncio shell that
performs them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..._shapes import MAPPING
from ...errors import InvalidArgumentError
from ..core.encoder_core import Operation, StreamEncoderCore, StreamState, _ai_extras, log
from ..core.headers import MISSING, NAME_INPUT, js_to_string, write_str
from .events import ItemIdNormaliser, event_to_dict
from .inputs import _get, input_parts
from .output_wire import (
    _DELTA_OR_END,
    _group_headers,
    _start_group,
    _stream_id,
    _unsupported_item,
    wire_item,
)

__all__ = ["DROPPED_TYPES", "EncoderCore", "Operation", "StreamState", "log"]

#: Output event types 0.8.0 keeps off the wire (nothing published, no error).
DROPPED_TYPES = frozenset(
    {
        "response.completed",
        "response.incomplete",
        "response.failed",
        "response.created",
        "response.in_progress",
        "response.queued",
        "error",
        "response.content_part.done",
        "response.reasoning_summary_part.done",
    }
)

_MODELLED_ITEM_TYPES = ("message", "reasoning", "function_call")

#: Delta type -> the index key of its stream id (None: the item id alone), for the per-delta path.
_DELTA_INDEX: dict[str, str | None] = {
    "response.output_text.delta": "content_index",
    "response.refusal.delta": "content_index",
    "response.reasoning_text.delta": "content_index",
    "response.reasoning_summary_text.delta": "summary_index",
    "response.function_call_arguments.delta": None,
}


class EncoderCore(StreamEncoderCore):
    """The encoder state machine: events/inputs in, :class:`Operation` s out (no I/O).

    Args:
        extras: encoder-level ``{"headers": {...}}`` merged into every message's transport tier
            (``EncoderOptions.extras`` of 0.8.0).
        on_ably_message: hook called with each message before it is handed out (not for recovery
            updates); it may mutate the message. Exceptions it raises are logged and ignored.
        normalise_item_ids: rewrite rotated item ids (see :class:`ItemIdNormaliser`); default on.
    """

    def __init__(
        self,
        extras: Mapping[str, Any] | None = None,
        *,
        on_ably_message: Callable[[dict[str, Any]], None] | None = None,
        normalise_item_ids: bool = True,
    ) -> None:
        super().__init__(extras, on_ably_message=on_ably_message)
        self._normaliser = ItemIdNormaliser() if normalise_item_ids else None

    # -- public API ------------------------------------------------------------------------------

    def encode_delta(self, event: Any) -> tuple[dict[str, Any], str] | None:
        """The per-delta path: ``(append message, stream id)`` of a well-formed text / arguments delta
        to an open stream, else None (then :meth:`encode_output` decides, errors included).

        The same message :meth:`encode_output` hands out, without its general dispatch.
        """
        if type(event) is not dict or self.closed:
            return None
        etype = event.get("type")
        if type(etype) is not str or etype not in _DELTA_INDEX:
            return None
        if self._normaliser is not None:
            event = self._normaliser.normalise(event)
        item_id = event.get("item_id")
        delta = event.get("delta")
        if type(item_id) is not str or type(delta) is not str:
            return None
        index_key = _DELTA_INDEX[etype]
        if index_key is None:
            stream_id = item_id
        else:
            index = event.get(index_key)
            if type(index) is not int:
                return None
            stream_id = f"{item_id}:summary:{index}" if index_key == "summary_index" else f"{item_id}:{index}"
        state = self.streams.get(stream_id)
        if state is None:
            return None
        state.chunks.append(delta)
        msg = {"serial": state.serial, "data": delta, "extras": {"ai": _ai_extras(dict(state.transport), dict(state.codec))}}
        if self._hook is not None:
            self._invoke_hook(msg)
        return msg, stream_id

    def encode_output(
        self, event: Any, *, message_id: str | None = None, extras: Mapping[str, Any] | None = None
    ) -> list[Operation]:
        """Operations for one output event (``publishOutput``). Raises on a rejected event."""
        ev = event_to_dict(event)
        if self._normaliser is not None:
            ev = self._normaliser.normalise(ev)
        etype = ev.get("type", MISSING)

        # Delta / end types are never start types, so testing them first changes nothing.
        phased = _DELTA_OR_END.get(etype) if type(etype) is str else None
        if phased is not None:
            group, phase = phased
            stream_id = _stream_id(group, ev, phase)
            if phase == "delta":
                return [self._append(stream_id, ev.get("delta", MISSING), etype)]
            return self._close_stream(stream_id, _group_headers(group, ev))
        starts = _start_group(ev)
        if starts is not None:
            stream_id = _stream_id(starts, ev, "start")
            return [self._start_stream(stream_id, _group_headers(starts, ev), message_id, extras)]

        if etype == "response.output_item.added":
            item = ev.get("item")
            if not (isinstance(item, MAPPING) and item.get("type") in _MODELLED_ITEM_TYPES):
                raise _unsupported_item(item)
            return [self._discrete(etype, {"item": item}, {"kind": etype}, message_id, extras)]
        if etype == "response.output_item.done":
            data = {"item": wire_item(ev.get("item"))}
            return [self._discrete(etype, data, {"kind": etype}, message_id, extras)]
        if etype == "function_call_output":
            data = {"item": ev["item"]} if "item" in ev else {}
            return [self._discrete(etype, data, {"kind": etype}, message_id, extras)]
        if etype == "tool-approval-request":
            codec = {"kind": etype}
            write_str(codec, "call_id", ev.get("call_id"))
            write_str(codec, "name", ev.get("name"))
            return [self._discrete(etype, _get(ev, "arguments"), codec, message_id, extras)]
        if etype in DROPPED_TYPES:
            return []
        raise InvalidArgumentError(
            f"unable to publish; unsupported event type '{js_to_string(etype)}'", status_code=400
        )

    def encode_input(
        self, inp: Any, *, message_id: str | None = None, extras: Mapping[str, Any] | None = None
    ) -> list[Operation]:
        """Operations for one input (``publishInput``): one publish (a batch for a user message)."""
        parts, batch = input_parts(inp)
        self._assert_open()
        if batch:
            msgs = [self._discrete_message(NAME_INPUT, p, message_id, extras, batch=True) for p in parts]
            return [Operation("publish", msgs)]
        return [Operation("publish", self._discrete_message(NAME_INPUT, parts[0], message_id, extras))]

