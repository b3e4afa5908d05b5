"""The descriptor-driven encoder core (``output-descriptor-encoder`` / ``input-descriptor-encoder``).

:class:`TableEncoderCore` is the generic
:class:`~ai_transport.codec.core.encoder_core.StreamEncoderCore` driven by a codec's compiled
tables (:mod:`.tables`): one dictionary lookup per chunk picks a stream phase, a discrete event, a
dropped type or a wildcard event; an unknown type is rejected (40000, ``unable to publish;
unsupported event type '…'``), as 0.8.0 does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..._shapes import MAPPING
from ...errors import InvalidArgumentError, InvalidTypeError, type_name
from .encoder_core import Operation, StreamEncoderCore, WirePart, _ai_extras
from .fields import KIND, PART_TYPE, write_fields
from .headers import MISSING, NAME_INPUT, js_to_string
from .tables import Batch, CompiledInput, CompiledOutput, Event, Stream, part_for

__all__ = ["HatchContext", "TableEncoderCore"]


class HatchContext(NamedTuple):
    """What an encode hatch is given beside the chunk (``OutputEncodeHatchContext``)."""

    kind: str
    #: the write's ``message_id`` (``opts.messageId``) and ``extras`` (``opts.extras``).
    message_id: str | None
    extras: Mapping[str, Any] | None
    #: the encoder's own ``message_id`` option (``options.messageId``).
    encoder_message_id: str | None
    #: the stream group of a stream-phase hatch (None for a discrete event).
    stream: Stream | None = None


class TableEncoderCore(StreamEncoderCore):
    """A sans-I/O encoder core over compiled output and input tables.

    Args:
        output: the compiled output table.
        inputs: the compiled input table.
        extras: encoder-level ``{"headers": {...}}`` (``options.extras``).
        on_ably_message: hook called with each outgoing message (``options.onAblyMessage``).
        message_id: the encoder's ``options.messageId`` (hatches may use it as a fallback).
    """

    def __init__(
        self,
        output: CompiledOutput,
        inputs: CompiledInput,
        extras: Mapping[str, Any] | None = None,
        *,
        on_ably_message: Callable[[dict[str, Any]], None] | None = None,
        message_id: str | None = None,
    ) -> None:
        super().__init__(extras, on_ably_message=on_ably_message)
        self._out = output
        self._in = inputs
        self.message_id = message_id

    def encode_delta(self, event: Any) -> tuple[dict[str, Any], str] | None:
        """The per-delta path: ``(append message, stream id)`` of a well-formed delta chunk to an open
        stream, else None (then :meth:`encode_output` decides, errors included)."""
        if type(event) is not dict or self.closed:
            return None
        etype = event.get("type")
        stream = self._out.deltas.get(etype) if type(etype) is str else None
        if stream is None:
            return None
        stream_id = event.get(stream.stream_id_key)
        delta = event.get(stream.delta_key)
        if type(stream_id) is not str or type(delta) is not str:
            return None
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
        """Operations for one output chunk (``publishOutput``). Raises on a rejected chunk."""
        if type(event) is not dict:
            if not isinstance(event, MAPPING):
                raise InvalidTypeError(f"unable to publish; an output chunk must be an object, got {type_name(event)}")
            event = dict(event)
        etype = event.get("type", MISSING)
        out = self._out
        phased = out.phases.get(etype) if type(etype) is str else None
        if phased is not None:
            phase, stream = phased
            stream_id = event.get(stream.stream_id_key, MISSING)
            if type(stream_id) is not str:
                raise InvalidTypeError(
                    f"unable to publish; {etype}.{stream.stream_id_key} must be a string, got "
                    f"{'undefined' if stream_id is MISSING else type_name(stream_id)}"
                )
            if phase == "delta":
                return [self._append(stream_id, event.get(stream.delta_key, MISSING), etype, stream.delta_key)]
            if phase == "start":
                codec = write_fields(stream.fields, stream.kind, event)
                return [self._start_stream(stream_id, codec, message_id, extras)]
            if stream.end_encode is not None:
                ctx = HatchContext(stream.kind, message_id, extras, self.message_id, stream)
                return stream.end_encode(self, event, ctx)
            return self._close_stream(stream_id, write_fields(stream.fields, stream.kind, event))
        descriptor: Event | None = out.discrete.get(etype) if type(etype) is str else None
        if descriptor is None:
            if etype in out.dropped:
                return []
            descriptor = out.wildcard(etype)
            if descriptor is None:
                raise InvalidArgumentError(
                    f"unable to publish; unsupported event type '{js_to_string(etype)}'", status_code=400
                )
        if descriptor.encode is not None:
            return descriptor.encode(self, event, HatchContext(etype, message_id, extras, self.message_id))
        data = descriptor.data_encode(event) if descriptor.data_encode is not None else ""
        codec = write_fields(descriptor.fields, etype, event)
        ephemeral = descriptor.ephemeral(event) if descriptor.ephemeral is not None else False
        return [self._discrete(etype, data, codec, message_id, extras, ephemeral=ephemeral)]

    def encode_input(
        self, inp: Any, *, message_id: str | None = None, extras: Mapping[str, Any] | None = None
    ) -> list[Operation]:
        """Operations for one input (``publishInput``): one publish (a batch for a multi-part input)."""
        if not isinstance(inp, MAPPING):
            raise InvalidTypeError(f"unable to publish; an input must be an object, got {type_name(inp)}")
        kind = inp.get("kind", MISSING)
        descriptor = self._in.by_kind.get(kind) if type(kind) is str else None
        if descriptor is None:
            raise InvalidArgumentError(
                f"unable to publish; unsupported input kind '{js_to_string(kind)}'", status_code=400
            )
        if isinstance(descriptor, Batch):
            return [self._batch(descriptor, inp, message_id, extras)]
        self._assert_open()
        if descriptor.wire_only:
            part = WirePart("", {KIND: descriptor.kind}, {})
        else:
            payload = inp.get("payload")
            if not isinstance(payload, MAPPING):
                raise InvalidArgumentError(
                    f"unable to encode input; event '{descriptor.kind}' carries no payload object — "
                    "declare it wireOnly or use an encode escape hatch",
                    status_code=400,
                )
            codec = write_fields(descriptor.fields, descriptor.kind, payload)
            data = descriptor.data_encode(dict(payload)) if descriptor.data_encode is not None else ""
            part = WirePart(data, codec, {})
        return [Operation("publish", self._discrete_message(NAME_INPUT, part, message_id, extras))]

    def _batch(
        self, descriptor: Batch, inp: Mapping[str, Any], message_id: str | None, extras: Any
    ) -> Operation:
        message_codec, message_transport = descriptor.message_headers(inp)  # type: ignore[arg-type]
        parts: list[WirePart] = []
        for part in descriptor.explode(inp):  # type: ignore[arg-type]
            part_type = descriptor.part_type_of(part)
            spec = part_for(descriptor.parts, part_type)
            if spec is None:
                continue
            codec = write_fields(spec.fields, descriptor.kind, part)
            codec.update(message_codec)
            codec[PART_TYPE] = part_type
            data = spec.data_encode(part) if spec.data_encode is not None else ""
            parts.append(WirePart(data, codec, message_transport))
        if not parts:
            parts.append(WirePart("", {KIND: descriptor.kind, **message_codec}, message_transport))
        self._assert_open()
        msgs = [self._discrete_message(NAME_INPUT, p, message_id, extras, batch=True) for p in parts]
        return Operation("publish", msgs)
