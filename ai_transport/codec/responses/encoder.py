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

The core is in :mod:`.encoder_core`, what it writes per output event in :mod:`.output_wire`;
this module is the shell, and re-exports both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..core.encoder import ChannelWriter, StreamEncoder
from .encoder_core import EncoderCore, Operation, StreamState
from .output_wire import wire_item

__all__ = [
    "ChannelWriter",
    "Encoder",
    "EncoderCore",
    "Operation",
    "StreamState",
    "wire_item",
]


class Encoder(StreamEncoder):
    """The asyncio Responses encoder over a :class:`ChannelWriter` (``Encoder`` of 0.8.0).

    Built by :meth:`ai_transport.codec.ResponsesCodec.create_encoder`: the generic
    :class:`~ai_transport.codec.core.encoder.StreamEncoder` over a Responses :class:`EncoderCore`.
    Not safe for concurrent ``publish_*`` calls on the same stream (as 0.8.0: callers await each
    publish in order).
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
        core = EncoderCore(extras, on_ably_message=on_ably_message, normalise_item_ids=normalise_item_ids)
        #: The encoder-level fallback message id of 0.8.0's options (never stamped on the wire).
        super().__init__(writer, core, message_id=message_id)
        self.core: EncoderCore = core
