"""The codec encoder: a sans-I/O core and a thin asyncio shell (``createEncoder`` of 0.8.0).

:class:`EncoderCore` is a pure state machine (no I/O, no asyncio): it turns one output event or
input into a list of :class:`Operation` s for the caller to perform on an Ably channel —

=========================  ======================================================================
``("publish", msg)``       publish one message (or ``("publish", [msgs])``, one batch). A stream's
                           create carries ``op.stream_id``: report its serials back with
                           :meth:`EncoderCore.stream_started` before encoding the next event.
``("append", msg)``        ``appendMessage`` to a stream (fire-and-forget; ``op.stream_id`` names it)
``("update", msg)``        ``updateMessage`` (recovery of a stream whose append failed)
``("flush", None)``        await every pending append, then recover failed streams
                           (:meth:`EncoderCore.recover`)
=========================  ======================================================================

Operations are :class:`typing.NamedTuple` s, so ``action, message = op[:2]`` reads them as pairs.

:class:`Encoder` is the asyncio shell: ``await publish_output(event)``, ``await publish_input(input)``,
``await cancel_streams()``, ``await close()`` over any writer with ``async publish(msg | [msgs]) ->
serials``, ``async append_message(msg)`` and ``async update_message(msg)``. Appends are
fire-and-forget, collected and awaited at the next flush (a stream's close, a cancel, or
``close()``), like 0.8.0's promise list; an append's coroutine is run to its first suspension at
once (no task at all when the writer completes without suspending, as the in-process channel does).
Writer calls start in call order, so a writer that enqueues before its first suspension point sees
the operations in encoder order. With a writer carrying an enabled ``publish_budget`` the appends go
through a :class:`~ai_transport.codec.coalesce.CoalescingPublisher` instead (merged per stream to
stay within the connection's budget).

The wire is the one of ``@ably/ai-transport@0.8.0`` (reference §1-4), errors included (same code,
status and message). Before encoding, output events may be ``openai`` SDK models (dumped as sent)
and, by default, item ids rotated by a proxy are rewritten to the first id of the item
(:class:`~ai_transport.codec.events.ItemIdNormaliser`); streams with consistent ids encode
byte-identically to 0.8.0.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from .._shapes import MAPPING
from ..errors import AITransportError, ErrorCode, InvalidArgumentError, InvalidTypeError, type_name
from .coalesce import CoalescingPublisher
from .events import ItemIdNormaliser, event_to_dict
from .headers import MISSING, NAME_INPUT, NAME_OUTPUT, js_to_string, write_json, write_str
from .inputs import WirePart, _get, input_parts

__all__ = [
    "ChannelWriter",
    "Encoder",
    "EncoderCore",
    "Operation",
    "StreamState",
    "wire_item",
]

log = logging.getLogger("ai_transport.codec.encoder")

# Transport header keys written by the encoder.
H_STREAM = "stream"
H_STATUS = "status"
H_STREAM_ID = "stream-id"
H_DISCRETE = "discrete"
H_CODEC_MESSAGE_ID = "codec-message-id"

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


class Operation(NamedTuple):
    """One Ably operation: ``action`` is ``publish`` | ``append`` | ``update`` | ``flush``.

    ``message`` is the message dict (a list of them for a batch publish; ``None`` for ``flush``).
    ``stream_id`` names the stream a create/append/update belongs to (``None`` for discrete).
    """

    action: str
    message: Any
    stream_id: str | None = None


@dataclass
class StreamState:
    """An open (or completed) stream, keyed by stream id (``StreamState`` of 0.8.0's encoder core).

    The text sent so far is kept as chunks (appending is O(1)); :attr:`accumulated` joins them.
    """

    serial: str
    name: str
    stream_id: str
    chunks: list[str]
    transport: dict[str, Any]
    codec: dict[str, str]
    cancelled: bool = False
    completed: bool = False

    @property
    def accumulated(self) -> str:
        """Every appended fragment so far, concatenated (what a recovery update carries)."""
        if len(self.chunks) > 1:
            self.chunks[:] = ["".join(self.chunks)]
        return self.chunks[0] if self.chunks else ""


@dataclass
class _PendingStart:
    name: str
    accumulated: str
    transport: dict[str, Any]
    codec: dict[str, str]


def _error(message: str, code: int, status: int) -> AITransportError:
    if code == ErrorCode.INVALID_ARGUMENT:
        return InvalidArgumentError(message, status_code=status)
    return AITransportError(message, code, status_code=status)


def _ai_extras(transport: dict[str, Any], codec: dict[str, str]) -> dict[str, Any]:
    return {"transport": transport, "codec": codec} if codec else {"transport": transport}


def _caller_headers(*layers: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for extras in layers:
        if isinstance(extras, MAPPING):
            headers = extras.get("headers")
            if isinstance(headers, MAPPING):
                out.update(headers)
    return out


# ---------------------------------------------------------------------------------------------
# wireItem (reference §3)


def _has_logprobs(part: Any) -> bool:
    if not isinstance(part, MAPPING) or part.get("type") != "output_text":
        return False
    lp = part.get("logprobs")
    return isinstance(lp, list) and len(lp) > 0


def _pick(item: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: item[k] for k in keys if k in item}


def _unsupported_item(item: Any) -> InvalidArgumentError:
    itype = item.get("type", MISSING) if isinstance(item, MAPPING) else MISSING
    return InvalidArgumentError(
        f"unable to publish; unsupported output item type '{js_to_string(itype)}'", status_code=400
    )


def wire_item(item: Any) -> dict[str, Any]:
    """The reduced item an ``output_item.done`` carries on the wire (``toWireItem`` of 0.8.0).

    ``{type, id, status}`` for message / function_call / reasoning (absent keys stay absent);
    reasoning adds ``encrypted_content`` when it is a string; a message adds ``content`` only when
    some ``output_text`` part has non-empty ``logprobs`` — then one entry per part, index-aligned:
    ``{type: "output_text", logprobs}`` where present, ``{type}`` elsewhere. Any other item type
    raises 40003 ``unable to publish; unsupported output item type '<type>'``.
    """
    if not isinstance(item, MAPPING):
        raise _unsupported_item(item)
    itype = item.get("type")
    if itype == "message":
        out = {"type": "message", **_pick(item, "id", "status")}
        content = item.get("content")
        if isinstance(content, list) and any(_has_logprobs(p) for p in content):
            out["content"] = [
                {"type": "output_text", "logprobs": p["logprobs"]}
                if _has_logprobs(p)
                else (_pick(p, "type") if isinstance(p, MAPPING) else {})
                for p in content
            ]
        return out
    if itype == "function_call":
        return {"type": "function_call", **_pick(item, "id", "status")}
    if itype == "reasoning":
        out = {"type": "reasoning", **_pick(item, "id", "status")}
        if isinstance(item.get("encrypted_content"), str):
            out["encrypted_content"] = item["encrypted_content"]
        return out
    raise _unsupported_item(item)


# ---------------------------------------------------------------------------------------------
# Streamed groups (reference §3)


class _Group(NamedTuple):
    kind: str
    fields: tuple[tuple[str, str], ...]  # (key, "str" | "json")
    delta_type: str
    end_type: str


_CONTENT_FIELDS = (("item_id", "str"), ("output_index", "json"), ("content_index", "json"), ("part", "json"))
_GROUPS = {
    "output_text": _Group("output_text", _CONTENT_FIELDS, "response.output_text.delta", "response.output_text.done"),
    "refusal": _Group("refusal", _CONTENT_FIELDS, "response.refusal.delta", "response.refusal.done"),
    "reasoning_text": _Group(
        "reasoning_text", _CONTENT_FIELDS, "response.reasoning_text.delta", "response.reasoning_text.done"
    ),
    "reasoning_summary_text": _Group(
        "reasoning_summary_text",
        (("item_id", "str"), ("output_index", "json"), ("summary_index", "json"), ("part", "json")),
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
    ),
    "function_call_arguments": _Group(
        "function_call_arguments",
        (("item", "json"), ("output_index", "json")),
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
    ),
}
_DELTA_OR_END: dict[str, tuple[_Group, str]] = {}
for _g in _GROUPS.values():
    _DELTA_OR_END[_g.delta_type] = (_g, "delta")
    _DELTA_OR_END[_g.end_type] = (_g, "end")


def _group_headers(group: _Group, event: Mapping[str, Any]) -> dict[str, str]:
    rec: dict[str, str] = {"kind": group.kind}
    for key, binding in group.fields:
        if binding == "str":
            write_str(rec, key, event.get(key))
        else:
            write_json(rec, key, event.get(key))
    return rec


def _stream_id(group: _Group, event: Mapping[str, Any], phase: str) -> str:
    if group.kind == "function_call_arguments":
        if phase != "start":
            return js_to_string(event.get("item_id", MISSING))
        item = event.get("item")
        item_id = item.get("id") if isinstance(item, MAPPING) else None
        if item_id is None:
            raise InvalidArgumentError(
                "unable to stream function-call arguments; item has no id", status_code=400
            )
        return js_to_string(item_id)
    item_id = js_to_string(event.get("item_id", MISSING))
    if group.kind == "reasoning_summary_text":
        return f"{item_id}:summary:{js_to_string(event.get('summary_index', MISSING))}"
    return f"{item_id}:{js_to_string(event.get('content_index', MISSING))}"


def _start_group(event: Mapping[str, Any]) -> _Group | None:
    etype = event.get("type")
    if etype == "response.content_part.added":
        part = event.get("part")
        ptype = part.get("type") if isinstance(part, MAPPING) else None
        if ptype in ("output_text", "refusal", "reasoning_text"):
            return _GROUPS[ptype]
        return None
    if etype == "response.reasoning_summary_part.added":
        return _GROUPS["reasoning_summary_text"]
    if etype == "response.output_item.added":
        item = event.get("item")
        if isinstance(item, MAPPING) and item.get("type") == "function_call":
            return _GROUPS["function_call_arguments"]
    return None


# ---------------------------------------------------------------------------------------------
# The sans-I/O core


class EncoderCore:
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
        self._extras = extras
        self._hook = on_ably_message
        self._normaliser = ItemIdNormaliser() if normalise_item_ids else None
        self.streams: dict[str, StreamState] = {}
        self._starting: dict[str, _PendingStart] = {}
        self.closed = False

    # -- public API ------------------------------------------------------------------------------

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

    def stream_started(self, stream_id: str, serials: Any) -> StreamState:
        """Record the create's serial for ``stream_id`` (after its publish was acknowledged).

        Raises 50000 ``unable to start stream; no serial returned …`` when ``serials`` has none.
        """
        pending = self._starting.pop(stream_id)
        serial = _first_serial(serials)
        if not serial:
            raise _error(
                f"unable to start stream; no serial returned for stream '{pending.name}' (streamId: {stream_id})",
                ErrorCode.INTERNAL_ERROR,
                500,
            )
        state = StreamState(
            serial, pending.name, stream_id, [pending.accumulated], pending.transport, pending.codec
        )
        self.streams[stream_id] = state
        return state

    def stream_failed(self, stream_id: str) -> None:
        """Forget a create whose publish failed (no stream is recorded)."""
        self._starting.pop(stream_id, None)

    def cancel(self) -> list[Operation]:
        """``cancelStreams``: a ``cancelled`` closing append to each open stream, then a flush.

        Idempotent: streams already cancelled or completed get nothing.
        """
        self._assert_open()
        ops: list[Operation] = []
        for state in self.streams.values():
            if state.cancelled or state.completed:
                continue
            state.cancelled = True
            transport, codec = self._closing_tiers(state, None)
            transport[H_STATUS] = "cancelled"
            msg = {"serial": state.serial, "data": "", "extras": {"ai": _ai_extras(transport, codec)}}
            self._invoke_hook(msg)
            ops.append(Operation("append", msg, state.stream_id))
        ops.append(Operation("flush", None))
        return ops

    def recover(self, failed_stream_ids: Iterable[str]) -> list[Operation]:
        """One ``update`` per failed stream: full accumulated text, start tiers, terminal status."""
        ops: list[Operation] = []
        seen: set[str] = set()
        for stream_id in failed_stream_ids:
            if stream_id in seen:
                continue
            seen.add(stream_id)
            state = self.streams.get(stream_id)
            if state is None:
                continue
            status = "cancelled" if state.cancelled else "complete"
            msg = {
                "serial": state.serial,
                "data": state.accumulated,
                "extras": {"ai": _ai_extras({**state.transport, H_STATUS: status}, dict(state.codec))},
            }
            ops.append(Operation("update", msg, stream_id))
        return ops

    @staticmethod
    def recovery_error(stream_ids: list[str], cause: BaseException | None = None) -> AITransportError:
        """The 104000 error raised when recovery updates fail."""
        err = _error(
            f"unable to flush pending appends; recovery failed for stream(s): {', '.join(stream_ids)}",
            ErrorCode.ENCODER_RECOVERY_FAILED,
            500,
        )
        if cause is not None:
            err.cause = cause
            err.__cause__ = cause
        return err

    def close(self) -> list[Operation]:
        """Mark closed and return the final ``flush`` (empty when already closed).

        Call :meth:`release` after the flush to drop the stream trackers.
        """
        if self.closed:
            return []
        self.closed = True
        return [Operation("flush", None)]

    def release(self) -> None:
        """Drop every stream tracker (end of ``close``)."""
        self.streams.clear()
        self._starting.clear()

    # -- internals -------------------------------------------------------------------------------

    def _assert_open(self) -> None:
        if self.closed:
            raise _error(
                "unable to write to encoder; encoder has been closed", ErrorCode.SESSION_CLOSED, 400
            )

    def _invoke_hook(self, msg: dict[str, Any]) -> None:
        if self._hook is None:
            return
        try:
            self._hook(msg)
        except Exception:
            log.exception("encoder on_ably_message hook raised")

    def _transport(
        self, payload_transport: Mapping[str, Any] | None, message_id: str | None, extras: Any
    ) -> dict[str, Any]:
        transport = _caller_headers(self._extras, extras)
        if payload_transport:
            transport.update(payload_transport)
        if message_id is not None:
            transport[H_CODEC_MESSAGE_ID] = message_id
        return transport

    def _discrete_message(
        self, name: str, part: WirePart, message_id: str | None, extras: Any, *, batch: bool = False
    ) -> dict[str, Any]:
        transport = self._transport(part.transport, message_id, extras)
        transport[H_STREAM] = "false"
        if batch:
            transport[H_DISCRETE] = "true"
        msg: dict[str, Any] = {"name": name}
        if part.data is not MISSING:
            msg["data"] = part.data
        msg["extras"] = {"ai": _ai_extras(transport, part.codec)}
        self._invoke_hook(msg)
        return msg

    def _discrete(
        self, kind: str, data: Any, codec: dict[str, str], message_id: str | None, extras: Any
    ) -> Operation:
        self._assert_open()
        return Operation("publish", self._discrete_message(NAME_OUTPUT, WirePart(data, codec, {}), message_id, extras))

    def _start_stream(
        self, stream_id: str, codec: dict[str, str], message_id: str | None, extras: Any
    ) -> Operation:
        self._assert_open()
        transport = self._transport(None, message_id, extras)
        transport[H_STREAM] = "true"
        transport[H_STATUS] = "streaming"
        transport[H_STREAM_ID] = stream_id
        msg = {"name": NAME_OUTPUT, "data": "", "extras": {"ai": _ai_extras(transport, codec)}}
        self._invoke_hook(msg)
        self._starting[stream_id] = _PendingStart(NAME_OUTPUT, "", transport, codec)
        return Operation("publish", msg, stream_id)

    def _append(self, stream_id: str, data: Any, etype: str) -> Operation:
        self._assert_open()
        state = self.streams.get(stream_id)
        if state is None:
            raise _error(
                f"unable to append to stream; no active stream for streamId '{stream_id}'",
                ErrorCode.INVALID_ARGUMENT,
                400,
            )
        if not isinstance(data, str):
            # 0.8.0 would append the text "undefined"; reject instead, naming the field.
            raise InvalidTypeError(
                f"unable to append to stream; {etype}.delta must be a string, got {'undefined' if data is MISSING else type_name(data)}"
            )
        state.chunks.append(data)
        msg = {
            "serial": state.serial,
            "data": data,
            "extras": {"ai": _ai_extras(dict(state.transport), dict(state.codec))},
        }
        self._invoke_hook(msg)
        return Operation("append", msg, stream_id)

    def _close_stream(self, stream_id: str, codec_overlay: dict[str, str]) -> list[Operation]:
        self._assert_open()
        state = self.streams.get(stream_id)
        if state is None:
            raise _error(
                f"unable to close stream; no active stream for streamId '{stream_id}'",
                ErrorCode.INVALID_ARGUMENT,
                400,
            )
        state.completed = True
        transport, codec = self._closing_tiers(state, codec_overlay)
        transport[H_STATUS] = "complete"
        msg = {"serial": state.serial, "data": "", "extras": {"ai": _ai_extras(transport, codec)}}
        self._invoke_hook(msg)
        return [Operation("append", msg, stream_id), Operation("flush", None)]

    def _closing_tiers(
        self, state: StreamState, codec_overlay: dict[str, str] | None
    ) -> tuple[dict[str, Any], dict[str, str]]:
        transport = {**state.transport, **_caller_headers(self._extras)}
        codec = {**state.codec, **(codec_overlay or {})}
        return transport, codec


def _first_serial(result: Any) -> str | None:
    serials = result
    if isinstance(result, MAPPING):
        serials = result.get("serials")
    elif hasattr(result, "serials"):
        serials = result.serials
    if isinstance(serials, (list, tuple)) and serials:
        first = serials[0]
        return first if isinstance(first, str) and first else None
    return None


# ---------------------------------------------------------------------------------------------
# The asyncio shell


class ChannelWriter(Protocol):
    """What the encoder writes through (a subset of :class:`ai_transport.channels.channel.Channel`)."""

    async def publish(self, message: Any) -> Any:
        """Publish one message dict or a list (one batch); return the serials (``list[str]``)."""

    async def append_message(self, message: dict[str, Any]) -> Any:
        """Append ``message["data"]`` to the message at ``message["serial"]``.

        May also be a plain method returning an :class:`asyncio.Future` (saves a task per append).
        """

    async def update_message(self, message: dict[str, Any]) -> Any:
        """Replace the message at ``message["serial"]``."""


class Encoder:
    """The asyncio encoder over a :class:`ChannelWriter` (``Encoder`` of 0.8.0).

    Built by :meth:`ai_transport.codec.ResponsesCodec.create_encoder`. Not safe for concurrent
    ``publish_*`` calls on the same stream (as 0.8.0: callers await each publish in order).
    """

    def __init__(
        self,
        writer: ChannelWriter,
        extras: Mapping[str, Any] | None = None,
        *,
        on_ably_message: Callable[[dict[str, Any]], None] | None = None,
        normalise_item_ids: bool = True,
        message_id: str | None = None,
    ) -> None:
        self._writer = writer
        self.core = EncoderCore(extras, on_ably_message=on_ably_message, normalise_item_ids=normalise_item_ids)
        #: The encoder-level fallback message id of 0.8.0's options (never stamped on the wire).
        self.message_id = message_id
        self._batch = _AppendBatch()
        self._flushing: asyncio.Future[None] | None = None
        budget = getattr(writer, "publish_budget", None)
        #: Appends merged per stream under the writer's publish budget (None: no budget).
        self.coalescer: CoalescingPublisher | None = (
            CoalescingPublisher(writer, budget, self._append_failed)
            if budget is not None and getattr(budget, "enabled", False)
            else None
        )

    async def publish_output(
        self, event: Any, message_id: str | None = None, *, extras: Mapping[str, Any] | None = None
    ) -> None:
        """Encode and publish one output event (``publishOutput``) on ``ai-output``.

        ``message_id`` is stamped as the transport ``codec-message-id``; ``extras={"headers": {...}}``
        overrides the encoder's headers for this write (0.8.0's ``WriteOptions``).
        """
        ops = self.core.encode_output(event, message_id=message_id, extras=extras)
        if len(ops) == 1 and ops[0].action == "append":  # the per-delta path: no coroutine of _run
            self._append(ops[0].message, ops[0].stream_id or "")
            return
        await self._run(ops)

    async def publish_input(
        self, input: Any, message_id: str | None = None, *, extras: Mapping[str, Any] | None = None
    ) -> None:
        """Encode and publish one input (``publishInput``) on ``ai-input``."""
        await self._run(self.core.encode_input(input, message_id=message_id, extras=extras))

    def cancel_streams(self) -> asyncio.Future[None]:
        """Append ``status: cancelled`` to every open stream, then flush (idempotent).

        The streams are marked cancelled at once and the writes are scheduled immediately, so a
        plain ``encoder.cancel_streams()`` cancels them; ``await encoder.cancel_streams()`` also
        waits for the flush (and raises its error), like 0.8.0's ``await cancelStreams()``.
        """
        try:
            ops = self.core.cancel()
        except Exception as exc:
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed
        return self._start(self._run(ops))

    async def close(self) -> None:
        """Flush pending appends (recovering failures) and release the trackers. Idempotent."""
        ops = self.core.close()
        if not ops:
            return
        try:
            await self._run(ops)
        finally:
            self.core.release()

    # -- internals -------------------------------------------------------------------------------

    @staticmethod
    def _start(coro: Any) -> asyncio.Future[Any]:
        # Eager where the runtime supports it (3.12+): the writer is entered at once, as 0.8.0
        # calls the writer synchronously; otherwise tasks still start in creation order.
        if _EAGER:
            return asyncio.Task(coro, loop=asyncio.get_running_loop(), eager_start=True)  # type: ignore[call-arg]
        return asyncio.ensure_future(coro)

    def _append_failed(self, stream_id: str, exc: BaseException) -> None:
        self._batch.failed.append((stream_id, exc))

    def _append(self, message: dict[str, Any], stream_id: str) -> None:
        """Fire one append; its outcome is collected by the current batch (awaited at flush)."""
        if self.coalescer is not None:
            self.coalescer.append(message, stream_id)
            return
        batch = self._batch
        batch.outstanding += 1
        try:
            result = self._writer.append_message(message)
        except Exception as exc:
            batch.settle(stream_id, exc)
            return
        if asyncio.isfuture(result):
            # Fast path: a writer may return a Future (no task needed).
            batch.tasks.add(result)
            result.add_done_callback(
                lambda f: batch.settle(stream_id, asyncio.CancelledError() if f.cancelled() else f.exception())
            )
        elif asyncio.iscoroutine(result):
            # Run the writer's coroutine to its first suspension here (as an eager task would): a
            # writer that completes at once (the in-process channel) costs no task at all.
            try:
                yielded = result.send(None)
            except StopIteration:
                batch.settle(stream_id, None)
                return
            except (Exception, asyncio.CancelledError) as exc:  # settled as the task path would
                batch.settle(stream_id, exc)
                return
            batch.tasks.add(self._start(self._guarded(batch, _resume(result, yielded), stream_id)))
        else:
            batch.tasks.add(self._start(self._guarded(batch, result, stream_id)))

    @staticmethod
    async def _guarded(batch: _AppendBatch, awaitable: Any, stream_id: str) -> None:
        try:
            await awaitable
        except BaseException as exc:  # settled even when cancelled, so a flush never hangs
            batch.settle(stream_id, exc)
            if not isinstance(exc, Exception):
                raise
        else:
            batch.settle(stream_id, None)

    async def _call(self, fn: Callable[[Any], Any], message: Any) -> Any:
        if self.coalescer is not None:
            return await self.coalescer.call(lambda: self._start(fn(message)))
        return await self._start(fn(message))

    async def _run(self, ops: list[Operation]) -> None:
        for op in ops:
            if op.action == "publish":
                if op.stream_id is not None:
                    try:
                        serials = await self._call(self._writer.publish, op.message)
                    except BaseException:
                        self.core.stream_failed(op.stream_id)
                        raise
                    self.core.stream_started(op.stream_id, serials)
                else:
                    await self._call(self._writer.publish, op.message)
            elif op.action == "append":
                self._append(op.message, op.stream_id or "")
            elif op.action == "update":
                await self._call(self._writer.update_message, op.message)
            elif op.action == "flush":
                await self._flush()

    async def _flush(self) -> None:
        if self.coalescer is not None:
            await self.coalescer.drain()
        if self._flushing is not None:
            await asyncio.shield(self._flushing)
            return
        batch, self._batch = self._batch, _AppendBatch()
        if not batch.outstanding and not batch.failed:
            return
        self._flushing = asyncio.ensure_future(self._do_flush(batch))
        try:
            await asyncio.shield(self._flushing)
        finally:
            self._flushing = None

    async def _do_flush(self, batch: _AppendBatch) -> None:
        if batch.outstanding:
            batch.waiter = asyncio.get_running_loop().create_future()
            await batch.waiter
        failed: list[str] = []
        for stream_id, _exc in batch.failed:
            if stream_id not in failed:
                failed.append(stream_id)
        if not failed:
            return
        log.warning("recovering failed appends for streams %s", failed)
        errors: list[tuple[str, BaseException]] = []
        for op in self.core.recover(failed):
            try:
                await self._call(self._writer.update_message, op.message)
            except Exception as exc:
                errors.append((op.stream_id or "", exc))
        if errors:
            ids = [sid for sid, _ in errors]
            log.error("recovery failed for streams %s", ids)
            raise EncoderCore.recovery_error(ids, errors[0][1])


async def _resume(coro: Any, yielded: Any) -> Any:
    """Continue a coroutine that was started by hand and suspended on ``yielded`` (a future or None)."""
    while True:
        try:
            if yielded is None:
                await asyncio.sleep(0)
            else:
                yielded._asyncio_future_blocking = False
                await asyncio.wait((yielded,))
        except BaseException as exc:  # cancelled while waiting: the coroutine sees it
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            return stop.value


class _AppendBatch:
    """The appends in flight since the last flush (0.8.0's pending-promise snapshot)."""

    __slots__ = ("failed", "outstanding", "tasks", "waiter")

    def __init__(self) -> None:
        self.outstanding = 0
        self.failed: list[tuple[str, BaseException]] = []
        self.tasks: set[asyncio.Future[Any]] = set()  # strong refs until the flush
        self.waiter: asyncio.Future[None] | None = None

    def settle(self, stream_id: str, error: BaseException | None) -> None:
        """One append finished (``error`` set when it failed)."""
        if error is not None:
            self.failed.append((stream_id, error))
        self.outstanding -= 1
        if self.outstanding == 0 and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


_EAGER = sys.version_info >= (3, 12)
