"""The Responses codec decoder: inbound Ably messages -> decoded inputs and output events (sans-I/O).

Mirrors ``ResponsesCodec.createDecoder()`` of ``@ably/ai-transport@0.8.0`` (``core/codec/decoder.ts``
with the OpenAI descriptor tables and decode-lifecycle repair). One :class:`Decoder` serves a whole
session, live deliveries and history alike: streamed messages are tracked by their Ably ``serial``
and every tracker is *version-guarded*, so a delivery whose ``version.serial`` the tracker already
incorporated decodes to nothing.

==========================  ==================================================================
action                      behaviour
==========================  ==================================================================
``message.create``          ``stream:"true"`` -> new tracker + start events (duplicate: nothing);
                            otherwise a discrete decode (``ai-input`` / ``ai-output`` table)
``message.append``          tracked -> version guard, delta events, ``complete`` -> end events;
                            untracked: foreign (no ``extras.ai``) -> nothing, else first contact
``message.update``          untracked -> first contact (start + delta + end); tracked -> version
                            guard, then prefix-extension (delta of the suffix) or silent replace
``message.delete``          closes the tracker; emits nothing
==========================  ==================================================================

Every stream start whose codec headers have ``item_id`` and a ``part`` is preceded by a synthetic
``response.output_item.added`` (the mid-stream-join repair of 0.8.0), on live streams too.

The decoder never raises on a malformed message: it logs a warning on the
``ai_transport.codec.decoder`` logger and returns an empty :class:`DecodeResult`.
Inbound messages may be plain dicts in Ably's JSON shape (``action`` as the ably-js string or the
Ably integer) or ``ably.types.message.Message`` objects from ably-python. As ably-js reads the
wire, a missing action is a create (Ably omits the zero action) and a missing ``version.serial``
is the message ``serial``.

Where 0.8.0 itself throws (an item event whose ``data`` is null or absent) the message is skipped
with a warning. A closed stream's serial is kept as a tombstone for the decoder's
life (whatever comes later to it decodes to nothing).

Its parts: the generic :class:`~ai_transport.codec.core.decoder.StreamDecoder` (reading a message,
tracking its streams), :mod:`.streams` rebuilds the Responses events of a stream, :mod:`.discrete`
decodes the ``ai-input`` / ``ai-output`` tables.
"""

from __future__ import annotations

from ..core.decoder import DecodeResult, StreamDecoder
from .discrete import _decode_discrete
from .streams import _closed_stream_events, _delta_events, _delta_template, _end_events, _start_events

__all__ = ["DecodeResult", "Decoder"]


class Decoder(StreamDecoder):
    """Stateful decoder for one session (``ResponsesCodec.createDecoder()`` of 0.8.0).

    Call :meth:`decode` with every inbound message, live and from history, in channel order.
    """

    __slots__ = ()

    _start_events = staticmethod(_start_events)
    _delta_template = staticmethod(_delta_template)  # type: ignore[assignment]
    _delta_events = staticmethod(_delta_events)
    _end_events = staticmethod(_end_events)
    _closed_stream_events = staticmethod(_closed_stream_events)
    _discrete = staticmethod(_decode_discrete)
