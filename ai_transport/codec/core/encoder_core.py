"""The generic encoder core (sans-I/O): stream and discrete writes in, Ably :class:`Operation` s out.

:class:`StreamEncoderCore` knows no codec: it holds the stream trackers (``StreamState`` of
0.8.0's ``core/codec/encoder.ts``), builds discrete messages, stream creates, appends, closing
appends, cancels and recovery updates, and hands them out as :class:`Operation` s. A codec
subclasses it with its ``encode_output`` / ``encode_input`` dispatch (the Responses codec's
hand-compiled table, the Vercel codec's descriptor table).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..._shapes import MAPPING
from ...errors import AITransportError, ErrorCode, InvalidArgumentError, InvalidTypeError, type_name
from .headers import MISSING, NAME_OUTPUT

__all__ = ["Operation", "StreamEncoderCore", "StreamState", "WirePart"]

log = logging.getLogger("ai_transport.codec.encoder")

# Transport header keys written by the encoder.
H_STREAM = "stream"
H_STATUS = "status"
H_STREAM_ID = "stream-id"
H_DISCRETE = "discrete"
H_CODEC_MESSAGE_ID = "codec-message-id"


class WirePart(NamedTuple):
    """One wire message before the encoder adds its transport bookkeeping.

    ``data`` may be :data:`MISSING` (no ``data`` key on the message); ``transport`` holds payload
    transport headers (e.g. ``role``), layered after the caller's headers.
    """

    data: Any
    codec: dict[str, str]
    transport: dict[str, Any]


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
# The sans-I/O core


class StreamEncoderCore:
    """The codec-agnostic encoder state machine (no I/O): see the module docstring.

    Args:
        extras: encoder-level ``{"headers": {...}}`` merged into every message's transport tier
            (``EncoderOptions.extras`` of 0.8.0).
        on_ably_message: hook called with each message before it is handed out (not for recovery
            updates); it may mutate the message. Exceptions it raises are logged and ignored.
    """

    def __init__(
        self,
        extras: Mapping[str, Any] | None = None,
        *,
        on_ably_message: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._extras = extras
        self._hook = on_ably_message
        self.streams: dict[str, StreamState] = {}
        self._starting: dict[str, _PendingStart] = {}
        self.closed = False

    def encode_output(
        self, event: Any, *, message_id: str | None = None, extras: Mapping[str, Any] | None = None
    ) -> list[Operation]:
        """Operations for one output event (``publishOutput``): the codec's dispatch."""
        raise NotImplementedError

    def encode_input(
        self, inp: Any, *, message_id: str | None = None, extras: Mapping[str, Any] | None = None
    ) -> list[Operation]:
        """Operations for one input (``publishInput``): the codec's dispatch."""
        raise NotImplementedError

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
        self,
        name: str,
        part: WirePart,
        message_id: str | None,
        extras: Any,
        *,
        batch: bool = False,
        ephemeral: bool = False,
    ) -> dict[str, Any]:
        transport = self._transport(part.transport, message_id, extras)
        transport[H_STREAM] = "false"
        if batch:
            transport[H_DISCRETE] = "true"
        msg: dict[str, Any] = {"name": name}
        if part.data is not MISSING:
            msg["data"] = part.data
        msg["extras"] = {"ai": _ai_extras(transport, part.codec), "ephemeral": True} if ephemeral else {
            "ai": _ai_extras(transport, part.codec)
        }
        self._invoke_hook(msg)
        return msg

    def _discrete(
        self,
        kind: str,
        data: Any,
        codec: dict[str, str],
        message_id: str | None,
        extras: Any,
        *,
        ephemeral: bool = False,
    ) -> Operation:
        """One discrete ``ai-output`` publish (``publishDiscrete``)."""
        self._assert_open()
        part = WirePart(data, codec, {})
        return Operation(
            "publish", self._discrete_message(NAME_OUTPUT, part, message_id, extras, ephemeral=ephemeral)
        )

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

    def _append(self, stream_id: str, data: Any, etype: str, field: str = "delta") -> Operation:
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
                f"unable to append to stream; {etype}.{field} must be a string, got {'undefined' if data is MISSING else type_name(data)}"
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
