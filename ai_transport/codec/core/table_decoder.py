"""The descriptor-driven decoder (``output-descriptor-decoder`` / ``input-descriptor-decoder`` and the
generic decoder of 0.8.0's ``define-codec``).

:class:`TableDecoder` is the generic :class:`~ai_transport.codec.core.decoder.StreamDecoder` whose
hooks read a codec's compiled tables, with an optional :class:`LifecyclePolicy` (mid-stream-join
repair: lead-in events prepended to a stream's start or to a discrete message, keyed on its
``kind``). Like every decoder it never raises on what the wire holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .decoder import StreamDecoder
from .fields import KIND, PART_TYPE, read_fields
from .headers import MISSING, NAME_INPUT, NAME_OUTPUT, js_to_string
from .inbound import _nullish
from .streams import DeltaTemplate, _Tracker, delta_template
from .tables import Batch, CompiledInput, CompiledOutput, Event, part_for

__all__ = ["DiscreteHook", "LifecyclePolicy", "StreamStartHook", "TableDecoder"]

Chunk = dict[str, Any]


#: ``on_discrete[kind](publisher, run_id, codec_headers)``.
DiscreteHook = Callable[[str | None, str, Mapping[str, Any]], list[Chunk]]
#: ``on_stream_start(publisher, run_id, tracker)``.
StreamStartHook = Callable[[str | None, str, _Tracker], list[Chunk]]


class LifecyclePolicy:
    """Decode-time lifecycle repair (``LifecyclePolicy``): each entry returns lead-in events.

    ``on_discrete[kind](publisher, run_id, codec_headers)`` runs before a discrete ``ai-output`` of
    that kind decodes; ``on_stream_start(publisher, run_id, tracker)`` before a stream's start
    events. ``publisher``: the wire's Ably ``clientId`` (None: it has none), so what a policy keeps
    per run can be kept, and bounded, per publisher (0.8.0's hooks take no publisher).
    """

    __slots__ = ("on_discrete", "on_stream_start")

    def __init__(
        self,
        on_discrete: Mapping[str, DiscreteHook] | None = None,
        on_stream_start: StreamStartHook | None = None,
    ) -> None:
        self.on_discrete = dict(on_discrete or {})
        self.on_stream_start = on_stream_start


def _run_id(transport: Mapping[str, Any]) -> str:
    run_id = _nullish(transport.get("run-id"), "")
    return run_id if type(run_id) is str else js_to_string(run_id)


def _event(descriptor: Event, kind: str, codec: Mapping[str, Any], data: Any) -> Chunk:
    bag = read_fields(descriptor.fields, codec)
    if descriptor.data_decode is not None:
        for key, value in descriptor.data_decode(data).items():
            if value is MISSING:
                bag.pop(key, None)
            else:
                bag[key] = value
    bag["type"] = kind
    return bag


class TableDecoder(StreamDecoder):
    """A stateful decoder over compiled output / input tables (``createDecoder`` of a table codec)."""

    __slots__ = ("_in", "_lifecycle", "_out")

    def __init__(
        self, output: CompiledOutput, inputs: CompiledInput, lifecycle: LifecyclePolicy | None = None
    ) -> None:
        super().__init__()
        self._out = output
        self._in = inputs
        self._lifecycle = lifecycle

    # -- streams --------------------------------------------------------------------------

    def _stream(self, tracker: _Tracker) -> Any:
        kind = _nullish(tracker.codec.get(KIND), "")
        return self._out.streams.get(kind) if type(kind) is str else None

    def _start_events(self, tracker: _Tracker) -> list[Chunk]:
        if tracker.name != NAME_OUTPUT:
            return []
        lifecycle = self._lifecycle
        out: list[Chunk] = []
        if lifecycle is not None and lifecycle.on_stream_start is not None:
            out.extend(lifecycle.on_stream_start(tracker.publisher, _run_id(tracker.transport), tracker))
        stream = self._stream(tracker)
        if stream is not None:
            bag = read_fields(stream.fields, tracker.codec)
            bag["type"] = stream.start_type
            out.append(bag)
        return out

    def _delta_template(self, tracker: _Tracker) -> DeltaTemplate | None:
        stream = self._stream(tracker) if tracker.name == NAME_OUTPUT else None
        if stream is None:
            tracker._delta = None
            return None
        fields = read_fields(stream.delta_fields, tracker.codec)
        template = delta_template(stream.delta_type, fields, stream.delta_key, False)
        if all(not isinstance(v, (dict, list)) for v in fields.values()):
            tracker._delta = template  # only immutable values: events never share a mutable object
        return template

    def _end_events(self, tracker: _Tracker, closing: Mapping[str, Any], out: list[Chunk]) -> None:
        stream = self._stream(tracker)
        if stream is None:
            return
        if stream.end_decode is not None:
            out.extend(stream.end_decode(tracker.stream_id, tracker.accumulated, tracker.codec, closing))
            return
        bag = read_fields(stream.fields, closing)
        bag["type"] = stream.end_type
        out.append(bag)

    # -- discrete -------------------------------------------------------------------------

    def _discrete(
        self, name: Any, transport: Mapping[str, Any], codec: Mapping[str, Any], data: Any, publisher: str | None
    ) -> list[Chunk]:
        kind = _nullish(codec.get(KIND), "")
        if type(kind) is not str:
            return []
        if name == NAME_INPUT:
            return self._decode_input(kind, transport, codec, data)
        if name != NAME_OUTPUT:
            return []
        out: list[Chunk] = []
        lifecycle = self._lifecycle
        if lifecycle is not None:
            repair = lifecycle.on_discrete.get(kind)
            if repair is not None:
                out.extend(repair(publisher, _run_id(transport), codec))
        tables = self._out
        descriptor = tables.discrete.get(kind)
        if descriptor is not None:
            out.append(_event(descriptor, kind, codec, data))
            return out
        stream = tables.streams.get(kind)
        if stream is not None and stream.decode_discrete is not None:
            out.extend(stream.decode_discrete(codec, data))
            return out
        wildcard = tables.wildcard(kind)
        if wildcard is not None:
            out.append(_event(wildcard, kind, codec, data))
        return out

    def _decode_input(
        self, kind: str, transport: Mapping[str, Any], codec: Mapping[str, Any], data: Any
    ) -> list[Chunk]:
        descriptor = self._in.by_kind.get(kind)
        if descriptor is None:
            return []
        if isinstance(descriptor, Batch):
            part_type = _nullish(codec.get(PART_TYPE), "")
            spec = part_for(descriptor.parts, part_type)
            if spec is None:
                return []
            bag = read_fields(spec.fields, codec)
            if spec.data_decode is not None:
                bag.update(spec.data_decode(data))
            bag["type"] = part_type
            part = {k: v for k, v in bag.items() if v is not MISSING}
            return [{"kind": kind, **descriptor.assemble(part, codec, transport)}]
        if descriptor.wire_only:
            return []
        bag = read_fields(descriptor.fields, codec)
        if descriptor.data_decode is not None:
            bag.update(descriptor.data_decode(data))
        payload = {k: v for k, v in bag.items() if v is not MISSING}
        codec_message_id = _nullish(transport.get("codec-message-id"), "")
        return [{"kind": kind, "codecMessageId": codec_message_id, "payload": payload}]
