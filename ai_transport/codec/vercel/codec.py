"""``UIMessageCodec``: the Vercel AI SDK UI message codec (``createUIMessageCodec()`` of 0.8.0's
``vercel`` entry), on the generic core.

Outputs are the AI SDK's UI message stream chunks (``text-start`` / ``text-delta`` … ``finish``,
plain dicts), inputs the well-known inputs, the projection folds into ``UIMessage`` dicts::

    encoder = UIMessageCodec.create_encoder(channel, extras={"headers": {"run-id": run_id}})
    await encoder.publish_output({"type": "text-start", "id": "t1"}, message_id)
    await encoder.close()

    decoder = UIMessageCodec.create_decoder()
    state = UIMessageCodec.fold(UIMessageCodec.init(), "output", chunk, message_id)
    [m.message for m in UIMessageCodec.get_messages(state)]  # UIMessage dicts

What a newer AI SDK adds to a chunk or a message is kept where 0.8.0 keeps it (header fields are
per descriptor; message dicts are folded as given).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from typing_extensions import Self

from ..core.decoder import StreamDecoder
from ..core.encoder import ChannelWriter, StreamEncoder
from ..core.headers import MISSING
from ..core.lifecycle import LifecycleTracker
from ..core.streams import _Tracker
from ..core.table_decoder import DiscreteHook, LifecyclePolicy, TableDecoder
from ..core.table_encoder import TableEncoderCore
from ..core.types import CodecMessage
from . import reducer
from .inputs import (
    create_regenerate,
    create_tool_approval_response,
    create_tool_result,
    create_tool_result_error,
    create_user_message,
)
from .readers import (
    approved_pending_tool_calls,
    awaiting_approval_calls,
    pending_tool_calls,
    session_calls,
    tool_output,
    vouched_calls,
    vouched_messages,
)
from .state import Repair, UIProjection
from .wire import F_MESSAGE_ID, INPUT, OUTPUT

__all__ = ["UIMessageCodec", "decode_lifecycle"]


def decode_lifecycle() -> LifecyclePolicy:
    """A fresh mid-stream-join repair (``createVercelDecodeLifecycle``), one per decoder.

    A stream start (or a discrete ``tool-input``) of a run with no ``start`` / ``start-step`` on the
    wire yet is preceded by them; ``finish-step`` re-arms ``start-step``; ``finish`` / ``error`` /
    ``abort`` forget the run. Runs are tracked per publisher (the wire's Ably ``clientId``), each
    publisher's bounded on its own (:mod:`~ai_transport.codec.core.lifecycle`): another publisher's
    wires never change what one publisher's run is repaired with.
    """

    def start(ctx: Mapping[str, Any]) -> list[dict[str, Any]]:
        message_id = ctx.get("messageId", MISSING)
        return [Repair(type="start") if message_id is MISSING else Repair(type="start", messageId=message_id)]

    tracker = LifecycleTracker([("start", start), ("start-step", lambda ctx: [Repair(type="start-step")])])

    def mark(key: str) -> DiscreteHook:
        def on(publisher: str | None, run_id: str, codec: Mapping[str, Any]) -> list[dict[str, Any]]:
            tracker.mark_emitted(publisher, run_id, key)
            return []

        return on

    def reset_step(publisher: str | None, run_id: str, codec: Mapping[str, Any]) -> list[dict[str, Any]]:
        tracker.reset_phase(publisher, run_id, "start-step")
        return []

    def clear(publisher: str | None, run_id: str, codec: Mapping[str, Any]) -> list[dict[str, Any]]:
        tracker.clear_scope(publisher, run_id)
        return []

    def ensure(publisher: str | None, run_id: str, codec: Mapping[str, Any]) -> list[dict[str, Any]]:
        return tracker.ensure_phases(publisher, run_id, {"messageId": F_MESSAGE_ID.read(codec)})

    def on_stream_start(publisher: str | None, run_id: str, stream: _Tracker) -> list[dict[str, Any]]:
        return ensure(publisher, run_id, stream.codec)

    return LifecyclePolicy(
        {
            "start": mark("start"),
            "start-step": mark("start-step"),
            "finish-step": reset_step,
            "finish": clear,
            "error": clear,
            "abort": clear,
            "tool-input": ensure,
        },
        on_stream_start,
    )


class UIMessageCodec:
    """The Vercel AI SDK UI message codec (``adapter_tag`` ``"vercel-ai-sdk-ui-message"``). Not
    instantiated."""

    #: The Ably-Agent tag of 0.8.0 (``adapterTag``).
    adapter_tag: ClassVar[str] = "vercel-ai-sdk-ui-message"

    create_user_message = staticmethod(create_user_message)
    create_regenerate = staticmethod(create_regenerate)
    create_tool_result = staticmethod(create_tool_result)
    create_tool_result_error = staticmethod(create_tool_result_error)
    create_tool_approval_response = staticmethod(create_tool_approval_response)

    #: The readers a resuming agent needs (``pendingToolCalls`` / ``approvedPendingToolCalls``).
    pending_tool_calls = staticmethod(pending_tool_calls)
    approved_pending_tool_calls = staticmethod(approved_pending_tool_calls)

    #: What an agent session's run sends for a tool it executed (``run_owed_calls``).
    tool_output = staticmethod(tool_output)

    @staticmethod
    def unanswered_calls(messages: list[Any]) -> list[dict[str, Any]]:
        """The sessions' reader: calls waiting for the user's approval (the run stays suspended)."""
        return session_calls(awaiting_approval_calls(messages))

    @staticmethod
    def approved_unexecuted_calls(messages: list[Any]) -> list[dict[str, Any]]:
        """The sessions' reader: approved calls not executed yet (what a resuming run owes)."""
        return session_calls(approved_pending_tool_calls(messages))

    #: The sessions' check of what they owe: each call as the agent made it, in a run of the same
    #: client (a fork seed's copy is the client's word: :func:`~.readers.vouched_calls`).
    vouched_calls = staticmethod(vouched_calls)
    #: A trusted tree's read of a run holding a fork seed: only the seeded copies of agent messages.
    vouched_messages = staticmethod(vouched_messages)

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:  # a namespace: never returns
        raise TypeError("UIMessageCodec is a namespace; call its static methods")

    @staticmethod
    def init() -> UIProjection:
        """An empty projection (``init``)."""
        return reducer.init()

    #: Fold one ``"input"`` / ``"output"`` event into the projection (``fold``): the reducer's own
    #: function (no wrapper: it runs once per event). ``author``: the publisher Ably verified for
    #: the wire (``clientId``); answers waiting for their tool call are bounded per author.
    fold = staticmethod(reducer.fold)

    @staticmethod
    def get_messages(state: UIProjection) -> list[CodecMessage]:
        """The projection's messages: ``CodecMessage(codec_message_id, UIMessage dict)``."""
        return reducer.get_messages(state)

    @staticmethod
    def create_encoder(
        writer: ChannelWriter,
        extras: Mapping[str, Any] | None = None,
        *,
        on_ably_message: Callable[[dict[str, Any]], None] | None = None,
        message_id: str | None = None,
    ) -> StreamEncoder:
        """A stateful encoder over ``writer`` (``createEncoder(writer, options)``).

        Args:
            writer: ``async publish(msg | [msgs]) -> serials``, ``async append_message(msg)``,
                ``async update_message(msg)`` (e.g. a :class:`~ai_transport.channels.channel.Channel`).
            extras: ``{"headers": {...}}`` merged into every message's transport tier.
            on_ably_message: hook called with each outgoing message (``options.onAblyMessage``).
            message_id: ``options.messageId``: the ``messageId`` a ``start`` chunk without one carries.
        """
        core = TableEncoderCore(OUTPUT, INPUT, extras, on_ably_message=on_ably_message, message_id=message_id)
        return StreamEncoder(writer, core, message_id=message_id)

    @staticmethod
    def create_decoder() -> StreamDecoder:
        """A stateful decoder (``createDecoder``): ``decode(inbound) -> DecodeResult(inputs, outputs)``."""
        return TableDecoder(OUTPUT, INPUT, decode_lifecycle())
