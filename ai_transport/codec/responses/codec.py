"""``ResponsesCodec``: the OpenAI Responses codec facade (``ResponsesCodec`` of 0.8.0's ``openai`` entry).

One namespace bundling the reducer (:meth:`ResponsesCodec.init` / :meth:`~ResponsesCodec.fold` /
:meth:`~ResponsesCodec.get_messages`), the encoder and decoder factories, and the input factories::

    encoder = ResponsesCodec.create_encoder(channel, extras={"headers": {"run-id": run_id}})
    await encoder.publish_output(event, message_id)
    await encoder.close()

    decoder = ResponsesCodec.create_decoder()
    state = ResponsesCodec.fold(ResponsesCodec.init(), "output", event, message_id)

The reducer and decoder live in :mod:`ai_transport.codec.reducer` and :mod:`ai_transport.codec.decoder`
(imported with this module: a fold per history wire must not pay an import lookup).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from typing_extensions import Self

from . import decoder, reducer
from .encoder import ChannelWriter, Encoder
from .inputs import (
    create_regenerate,
    create_tool_approval_response,
    create_tool_result,
    create_tool_result_error,
    create_user_message,
)

__all__ = ["ResponsesCodec"]


class ResponsesCodec:
    """The OpenAI Responses codec (``adapter_tag`` ``"openai-responses"``). Not instantiated."""

    #: The Ably-Agent tag of 0.8.0 (``adapterTag``).
    adapter_tag: ClassVar[str] = "openai-responses"

    create_user_message = staticmethod(create_user_message)
    create_regenerate = staticmethod(create_regenerate)
    create_tool_result = staticmethod(create_tool_result)
    create_tool_result_error = staticmethod(create_tool_result_error)
    create_tool_approval_response = staticmethod(create_tool_approval_response)

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:  # a namespace: never returns
        raise TypeError("ResponsesCodec is a namespace; call its static methods")

    # The reducer's own functions (one call per fold, not two): ``init`` (an empty projection),
    # ``fold(state, direction, event, message_id=None, serial="", author=None)`` (fold one
    # ``"input"`` / ``"output"`` event; ``author``, the wire's verified publisher, is accepted as every
    # codec's fold takes it) and ``get_messages`` (each a
    # :class:`~ai_transport.codec.types.CodecMessage`); see :mod:`ai_transport.codec.reducer`.
    init = staticmethod(reducer.init)
    fold = staticmethod(reducer.fold)
    get_messages = staticmethod(reducer.get_messages)

    @staticmethod
    def create_encoder(
        writer: ChannelWriter,
        extras: Mapping[str, Any] | None = None,
        *,
        on_ably_message: Callable[[dict[str, Any]], None] | None = None,
        message_id: str | None = None,
        normalise_item_ids: bool = True,
    ) -> Encoder:
        """A stateful encoder over ``writer`` (``createEncoder(writer, options)``).

        Args:
            writer: ``async publish(msg | [msgs]) -> serials``, ``async append_message(msg)``,
                ``async update_message(msg)`` (e.g. a :class:`~ai_transport.channels.channel.Channel`).
            extras: ``{"headers": {...}}`` merged into every message's transport tier (0.8.0's
                ``options.extras``).
            on_ably_message: hook called with each outgoing message (``options.onAblyMessage``).
            message_id: 0.8.0's ``options.messageId`` (kept for parity; never stamped on the wire —
                ``codec-message-id`` comes only from each write's ``message_id``).
            normalise_item_ids: rewrite item ids rotated by a proxy (default on; wire-neutral for
                consistent streams).
        """
        return Encoder(
            writer,
            extras,
            on_ably_message=on_ably_message,
            normalise_item_ids=normalise_item_ids,
            message_id=message_id,
        )

    @staticmethod
    def create_decoder() -> Any:
        """A stateful decoder (``createDecoder``): ``decode(inbound) -> DecodeResult(inputs, outputs)``."""
        return decoder.Decoder()
