"""The generic decoder: inbound Ably messages -> decoded inputs and output events (sans-I/O).

Mirrors ``core/codec/decoder.ts`` of ``@ably/ai-transport@0.8.0``, which knows no codec: one
:class:`StreamDecoder` serves a whole session, live deliveries and history alike: streamed messages
are tracked by their Ably ``serial`` and every tracker is *version-guarded*, so a delivery whose
``version.serial`` the tracker already incorporated decodes to nothing.

==========================  ==================================================================
action                      behaviour
==========================  ==================================================================
``message.create``          ``stream:"true"`` -> new tracker + start events (duplicate: nothing);
                            otherwise a discrete decode (the codec's tables)
``message.append``          tracked -> version guard, delta events, ``complete`` -> end events;
                            untracked: foreign (no ``extras.ai``) -> nothing, else first contact
``message.update``          untracked -> first contact (start + delta + end); tracked -> version
                            guard, then prefix-extension (delta of the suffix) or silent replace
``message.delete``          closes the tracker; emits nothing
==========================  ==================================================================

A codec supplies the events (its hooks, see :class:`StreamDecoder`). The decoder never raises on a
malformed message: it logs a warning on the ``ai_transport.codec.decoder`` logger and returns an
empty :class:`DecodeResult`. Inbound messages may be plain dicts in Ably's JSON shape (``action`` as
the ably-js string or the Ably integer) or ``ably.types.message.Message`` objects from ably-python.
As ably-js reads the wire, a missing action is a create (Ably omits the zero action) and a missing
``version.serial`` is the message ``serial``. A closed stream's serial is kept as a tombstone for the
decoder's life (the shared :data:`~.streams.CLOSED`: whatever comes later to it decodes to nothing).
A codec's hooks learn who published each wire (its Ably ``clientId``: a stream's
``_Tracker.publisher``, a discrete message's ``publisher`` argument; None for a wire without one), so
the state a codec keeps off the wire can be bounded per publisher.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from ...errors import one_line, quoted
from ..core.headers import NAME_INPUT, NAME_OUTPUT
from ..core.inbound import (
    _ABSENT,
    _APPEND,
    _CREATE,
    _DELETE,
    _EMPTY,
    _UPDATE,
    _has_ai_envelope,
    _hashable,
    _Inbound,
    _Malformed,
    _nullish,
    _publisher,
    _read_inbound,
    _tier,
    _version_le,
    _warn_data,
    logger,
)
from .streams import CLOSED, DeltaTemplate, _Tracker, delta_event

__all__ = ["OPEN_STREAMS_PER_PUBLISHER", "DecodeResult", "StreamDecoder"]

#: Streams one publisher may hold open in a decoder (each tracker keeps copies of its headers). Past
#: twice this many streams tracked (open, or closed tombstones), its closed ones are forgotten and
#: its oldest open ones past this many too: a flood of streams costs only the flooder's own; a live
#: agent has a few open.
OPEN_STREAMS_PER_PUBLISHER: Final = 256


class DecodeResult:
    """What one inbound message decodes to: ``inputs`` (from ``ai-input``) and ``outputs``.

    Both are lists of plain dicts in the JS JSON shape (``DecodedMessage`` of 0.8.0). At most one
    of the two is non-empty: the message ``name`` fixes the direction of everything it decodes to.
    """

    __slots__ = ("inputs", "outputs")

    def __init__(
        self, inputs: list[dict[str, Any]] | None = None, outputs: list[dict[str, Any]] | None = None
    ):
        self.inputs: list[dict[str, Any]] = inputs if inputs is not None else []
        self.outputs: list[dict[str, Any]] = outputs if outputs is not None else []

    def to_dict(self) -> dict[str, Any]:
        """JS JSON shape ``{inputs, outputs}``."""
        return {"inputs": self.inputs, "outputs": self.outputs}

    def __iter__(self) -> Iterator[list[dict[str, Any]]]:  # allows ``inputs, outputs = decoder.decode(msg)``
        yield self.inputs
        yield self.outputs

    def __bool__(self) -> bool:
        return bool(self.inputs or self.outputs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DecodeResult):
            return NotImplemented
        return self.inputs == other.inputs and self.outputs == other.outputs

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DecodeResult(inputs={self.inputs!r}, outputs={self.outputs!r})"


# ---------------------------------------------------------------------------------------------
# The decoder


#: A :class:`DecodeResult` without its ``__init__`` (a Python frame per wire): the caller sets both lists.
_new_result: Final = object.__new__


def _result(name: Any, events: list[dict[str, Any]]) -> DecodeResult:
    """``events`` as the result of a wire named ``name``: inputs for ``ai-input``, else outputs
    (built without ``__init__``: every history wire's result is made here)."""
    result = _new_result(DecodeResult)
    if name == NAME_INPUT:
        result.inputs = events
        result.outputs = []
    else:
        result.inputs = []
        result.outputs = events
    return result


class StreamDecoder:
    """The generic stateful decoder for one session (``DecoderCore`` of 0.8.0's ``core/codec``).

    Call :meth:`decode` with every inbound message, live and from history, in channel order.
    A codec subclasses it with its hooks: :meth:`_start_events`, :meth:`_delta_template`,
    :meth:`_end_events` (streams), optionally :meth:`_closed_stream_events` (the same events of a
    stream opened and closed by one contact, a history aggregate, built without a tracker) and
    :meth:`_discrete` (discrete messages).
    """

    __slots__ = ("_opened", "_trackers")

    def __init__(self) -> None:
        self._trackers: dict[Any, _Tracker] = {}
        #: publisher -> the serials of the streams it opened, oldest first (closed ones included
        #: until the next prune: see :data:`OPEN_STREAMS_PER_PUBLISHER`).
        self._opened: dict[str | None, dict[Any, None]] = {}

    # -- public ---------------------------------------------------------------------------

    def decode(self, inbound: Any) -> DecodeResult:
        """Decode one inbound Ably message into ``DecodeResult(inputs, outputs)``.

        Never raises: a malformed message is skipped (empty result) and logged as a warning.
        """
        action = inbound.get("action") if type(inbound) is dict else None
        if action == _APPEND:
            # Hot path: an append to a tracked stream (string serials, dict envelope).
            serial = inbound.get("serial")
            tracker = self._trackers.get(serial) if type(serial) is str else None
            version = inbound.get("version")
            if tracker is not None and type(version) is dict:
                vs = version.get("serial") or serial
                tv = tracker.version
                if type(vs) is str and type(tv) is str:
                    if vs <= tv or tracker.closed:
                        return DecodeResult()
                    extras = inbound.get("extras")
                    ai = extras.get("ai") if type(extras) is dict else None
                    transport = ai.get("transport") if type(ai) is dict else None
                    if type(transport) is dict:
                        tracker.version = vs
                        data = inbound.get("data")
                        template = tracker._delta
                        if template is False:  # the stream's first append: read its template once
                            try:
                                template = self._delta_template(tracker)
                            except Exception:  # pragma: no cover - defensive: the append below logs
                                template = None
                        if template and type(data) is str and data:
                            # The commonest message of all: one more fragment of an open output
                            # stream whose delta template is known (streams.delta_event, inlined).
                            status = transport.get("status")
                            if status != "complete" and status != "cancelled" and inbound.get("name") != NAME_INPUT:
                                tracker.chunks.append(data)
                                ev = template[0].copy()  # type: ignore[index]
                                ev[template[1]] = data  # type: ignore[index]
                                result = _new_result(DecodeResult)
                                result.inputs = []
                                result.outputs = [ev]
                                return result
                        try:
                            return self._tracked_append(inbound, serial, tracker, extras, transport)
                        except Exception:  # pragma: no cover - defensive: never crash
                            logger.warning("decode(); skipping append (serial %r)", serial, exc_info=True)
                            return DecodeResult()
        elif action in (_CREATE, _UPDATE):
            # The common shape: ``extras.ai`` and its transport tier plain dicts, the codec tier a plain
            # dict or missing (empty); read here, in this call (every history wire comes this way).
            extras = inbound.get("extras")
            ai = extras.get("ai") if type(extras) is dict else None
            transport = ai.get("transport") if type(ai) is dict else None
            codec = ai.get("codec") if type(transport) is dict else _ABSENT  # type: ignore[union-attr]
            if codec is None or type(codec) is dict:
                read = self._dict_create if action == _CREATE else self._dict_first_update
                try:
                    events = read(inbound, transport, _EMPTY if codec is None else codec)  # type: ignore[arg-type]
                except _Malformed as exc:
                    logger.warning(
                        "decode(); skipping malformed message (serial %s): %s",
                        quoted(inbound.get("serial")),
                        one_line(str(exc)),
                    )
                    return DecodeResult()
                except Exception:  # pragma: no cover - defensive: the decoder must never crash
                    logger.warning(
                        "decode(); skipping message (serial %r) that failed to decode",
                        inbound.get("serial"),
                        exc_info=True,
                    )
                    return DecodeResult()
                if events is not None:
                    return _result(inbound.get("name"), events)
        m = _read_inbound(inbound)
        if m is None:
            logger.warning("decode(); not an Ably message (%s), skipping", type(inbound).__name__)
            return DecodeResult()
        try:
            events = self._decode(m)
        except _Malformed as exc:
            logger.warning(
                "decode(); skipping malformed message (serial %s): %s", quoted(m.serial), one_line(str(exc))
            )
            return DecodeResult()
        except Exception:  # pragma: no cover - defensive: the decoder must never crash
            logger.warning(
                "decode(); skipping message (serial %r) that failed to decode", m.serial, exc_info=True
            )
            return DecodeResult()
        return _result(m.name, events)

    def _dict_create(
        self, inbound: dict[str, Any], transport: dict[str, Any], codec: Mapping[str, Any]
    ) -> list[dict[str, Any]] | None:
        """The events of a create in the common shape (plain-dict tiers, see :meth:`decode`; a string serial), read
        directly; None: not that shape, :meth:`_decode` reads it."""
        name = inbound.get("name")
        if transport.get("stream") != "true":
            client_id = inbound.get("clientId")  # (_publisher, inlined: a str is the common case)
            return self._discrete(
                name,
                transport,
                codec,
                inbound.get("data", _ABSENT),
                client_id if type(client_id) is str or isinstance(client_id, str) else None,
            )
        serial = inbound.get("serial")
        version = inbound.get("version")
        if type(serial) is not str or not serial or (version is not None and type(version) is not dict):
            return None
        if serial in self._trackers:
            logger.debug("decode(); duplicate create for tracked stream %r", serial)
            return []
        # As ably-js reads it: a missing (or empty) version.serial is the message serial.
        vs = version.get("serial") if version is not None else None
        return self._open_stream(serial, vs or serial, name, transport, codec, _publisher(inbound.get("clientId")))

    def _dict_first_update(
        self, inbound: dict[str, Any], transport: dict[str, Any], codec: Mapping[str, Any]
    ) -> list[dict[str, Any]] | None:
        """The events of an update of a serial not tracked yet (what history holds: a stream's
        aggregate) in the common shape (plain-dict tiers, see :meth:`decode`; a non-empty string serial), read
        directly; None: another shape, or a tracked stream, which :meth:`_decode` reads."""
        serial = inbound.get("serial")
        version = inbound.get("version")
        if (
            type(serial) is not str
            or not serial
            or (version is not None and type(version) is not dict)
            or serial in self._trackers
        ):
            return None
        name = inbound.get("name")
        data = inbound.get("data", _ABSENT)
        client_id = inbound.get("clientId")  # (_publisher, inlined: a str is the common case)
        publisher = client_id if type(client_id) is str or isinstance(client_id, str) else None
        if transport.get("stream") != "true":
            return self._discrete(name, transport, codec, data, publisher)
        status = transport.get("status")
        if (status == "complete" or status == "cancelled") and type(data) is str:
            # A stream this contact opens and closes (a history aggregate, the commonest first
            # contact): the codec may build its events straight from the headers, no tracker kept
            # (what _first_contact would do first, here: a call less per aggregate).
            out = self._closed_stream_events(name, data, codec, status == "complete")
            if out is not None:
                self._track(serial, CLOSED, publisher)
                return out
        # As ably-js reads it: a missing (or empty) version.serial is the message serial.
        vs = version.get("serial") if version is not None else None
        return self._first_contact(name, data, vs or serial, transport, codec, serial, publisher)

    def _tracked_append(
        self, inbound: dict[str, Any], serial: Any, tracker: _Tracker, extras: Any, transport: Any
    ) -> DecodeResult:
        """An append that passed the version guard (the common case of a live stream)."""
        data = inbound.get("data")
        out: list[dict[str, Any]] = []
        is_output = tracker.name == NAME_OUTPUT
        if type(data) is not str:
            _warn_data(data, serial)
        elif data:
            tracker.chunks.append(data)
            if is_output:
                self._delta_events(tracker, data, out)
        status = transport.get("status")
        if status == "complete":
            if is_output:
                self._end_events(tracker, _tier(extras, "codec"), out)
            self._trackers[serial] = CLOSED
        elif status == "cancelled":
            self._trackers[serial] = CLOSED
        if inbound.get("name") == NAME_INPUT:
            return DecodeResult(out, [])
        return DecodeResult([], out)

    @property
    def tracked_streams(self) -> int:
        """How many stream serials are tracked (open streams plus closed tombstones)."""
        return len(self._trackers)

    # -- dispatch -------------------------------------------------------------------------

    def _decode(self, m: _Inbound) -> list[dict[str, Any]]:
        action = m.action
        if action == _APPEND:
            return self._append(m)
        if action == _CREATE:
            transport = _tier(m.extras, "transport")
            if transport.get("stream") == "true":
                return self._streamed_create(m, transport)
            return self._discrete(m.name, transport, _tier(m.extras, "codec"), m.data, m.publisher)
        if action == _UPDATE:
            return self._update(m)
        if action == _DELETE:
            serial = m.serial
            if not serial or not _hashable(serial):
                return []
            if serial in self._trackers:
                self._trackers[serial] = CLOSED
            return []
        return []

    # -- streams --------------------------------------------------------------------------

    def _streamed_create(self, m: _Inbound, transport: Mapping[str, Any]) -> list[dict[str, Any]]:
        serial = m.serial
        if not serial:
            return []
        if not _hashable(serial):
            raise _Malformed(f"unusable serial {serial!r}")
        if serial in self._trackers:
            logger.debug("decode(); duplicate create for tracked stream %r", serial)
            return []
        version = m.version
        return self._open_stream(
            serial,
            serial if version is _ABSENT else version,
            m.name,
            transport,
            _tier(m.extras, "codec"),
            m.publisher,
        )

    def _open_stream(
        self,
        serial: Any,
        version: Any,
        name: Any,
        transport: Mapping[str, Any],
        codec: Mapping[str, Any],
        publisher: str | None,
    ) -> list[dict[str, Any]]:
        """Track a new stream (its serial not tracked yet) of ``publisher`` and return its start events."""
        tracker = _Tracker(
            _nullish(name, ""),
            _nullish(transport.get("stream-id"), ""),
            "",
            dict(codec),
            dict(transport),
            version,
            publisher,
        )
        self._track(serial, tracker, publisher)
        return self._start_events(tracker)

    def _track(self, serial: Any, tracker: _Tracker, publisher: str | None) -> None:
        """Track the stream ``serial`` of ``publisher`` (open, or :data:`CLOSED`), within its bound."""
        self._trackers[serial] = tracker
        opened = self._opened.get(publisher)
        if opened is None:
            opened = self._opened[publisher] = {}
        opened[serial] = None
        if len(opened) > 2 * OPEN_STREAMS_PER_PUBLISHER:  # (amortised: a prune halves it at least)
            self._prune(opened, publisher)

    def _prune(self, opened: dict[Any, None], publisher: str | None) -> None:
        """Forget ``publisher``'s closed streams and all but its newest open ones."""
        trackers = self._trackers
        still = []
        for serial in opened:
            if trackers.get(serial, CLOSED).closed:
                trackers.pop(serial, None)  # (a re-delivery decodes again: the tree drops it)
            else:
                still.append(serial)
        evicted = still[: max(0, len(still) - OPEN_STREAMS_PER_PUBLISHER)]
        for serial in evicted:
            del trackers[serial]
        opened.clear()
        opened.update(dict.fromkeys(still[len(evicted) :]))
        if evicted:
            logger.warning(
                "decode(); %d streams of %s left open forgotten (over %d open streams of one publisher)",
                len(evicted),
                quoted(publisher),
                OPEN_STREAMS_PER_PUBLISHER,
            )

    def _already_incorporated(self, tracker: _Tracker, version: Any) -> bool:
        if version is not _ABSENT and _version_le(version, tracker.version):
            return True
        if tracker.closed:
            return True
        if version is not _ABSENT:
            tracker.version = version
        return False

    def _append(self, m: _Inbound) -> list[dict[str, Any]]:
        serial = m.serial
        if not serial:
            return []
        try:
            tracker = self._trackers.get(serial)
        except TypeError:
            raise _Malformed(f"unusable serial {serial!r}") from None
        if tracker is None:
            if not _has_ai_envelope(m.extras):
                logger.debug("decode(); foreign append %r, ignoring", serial)
                return []
            logger.warning("decode(); append with no tracker (serial %r), treating as first contact", serial)
            return self._update(m)
        if self._already_incorporated(tracker, m.version):
            return []
        data = m.data
        out: list[dict[str, Any]] = []
        if type(data) is not str:
            _warn_data(data, serial)
        elif data:
            tracker.chunks.append(data)
            if tracker.name == NAME_OUTPUT:
                self._delta_events(tracker, data, out)
        status = _tier(m.extras, "transport").get("status")
        if status == "complete":
            if tracker.name == NAME_OUTPUT:
                self._end_events(tracker, _tier(m.extras, "codec"), out)
            self._trackers[serial] = CLOSED
        elif status == "cancelled":
            self._trackers[serial] = CLOSED
        return out

    def _update(self, m: _Inbound) -> list[dict[str, Any]]:
        serial = m.serial
        if not serial:
            return []
        if not _hashable(serial):
            raise _Malformed(f"unusable serial {serial!r}")
        transport = _tier(m.extras, "transport")
        codec = _tier(m.extras, "codec")
        streamed = transport.get("stream") == "true"
        status = transport.get("status")
        tracker = self._trackers.get(serial)
        if tracker is None:
            if not streamed:
                return self._discrete(m.name, transport, codec, m.data, m.publisher)
            version = m.version
            return self._first_contact(
                m.name, m.data, serial if version is _ABSENT else version, transport, codec, serial, m.publisher
            )
        if self._already_incorporated(tracker, m.version):
            return []
        if type(m.data) is not str:
            _warn_data(m.data, serial)
        data = m.data if type(m.data) is str else ""
        acc = tracker.accumulated
        if data.startswith(acc):
            out: list[dict[str, Any]] = []
            if len(data) > len(acc):
                delta = data[len(acc) :]
                tracker.chunks = [data]
                if tracker.name == NAME_OUTPUT:
                    self._delta_events(tracker, delta, out)
            if status == "complete":
                if tracker.name == NAME_OUTPUT:
                    self._end_events(tracker, codec, out)
                self._trackers[serial] = CLOSED
            elif status == "cancelled":
                self._trackers[serial] = CLOSED
            return out
        # Not a prefix extension: replace silently.
        tracker.chunks = [data] if data else []
        tracker.set_headers(dict(codec), dict(transport))
        logger.debug("decode(); stream %r replaced by a non-prefix update", serial)
        return []

    def _first_contact(
        self,
        name: Any,
        data: Any,
        version: Any,
        transport: Mapping[str, Any],
        codec: Mapping[str, Any],
        serial: Any,
        publisher: str | None,
    ) -> list[dict[str, Any]]:
        """Start tracking ``serial`` (a stream of ``publisher``) from an update or append that is the
        first the decoder sees of it: start events, then the delta of its data and, when it
        completes, the end events."""
        if type(data) is not str:
            _warn_data(data, serial)
            data = ""
        status = transport.get("status")
        closes = status == "complete" or status == "cancelled"
        tracker = _Tracker(
            _nullish(name, ""),
            _nullish(transport.get("stream-id"), ""),
            data,
            # a stream that closes here is never read again: its headers need no copy of their own
            codec if closes else dict(codec),  # type: ignore[arg-type]
            transport if closes else dict(transport),  # type: ignore[arg-type]
            version,
            publisher,
        )
        self._track(serial, tracker, publisher)
        out = self._start_events(tracker)
        if tracker.name == NAME_OUTPUT:
            if data:
                self._delta_events(tracker, data, out)
            if status == "complete":
                self._end_events(tracker, codec, out)
        if closes:
            self._trackers[serial] = CLOSED
        return out

    # -- the codec's hooks ---------------------------------------------------------------

    def _start_events(self, tracker: _Tracker) -> list[dict[str, Any]]:
        """The events a stream's create rebuilds (none by default)."""
        return []

    def _closed_stream_events(
        self, name: Any, data: str, codec: Mapping[str, Any], complete: bool
    ) -> list[dict[str, Any]] | None:
        """The events of a stream named ``name`` that its first contact opens and closes (``data``:
        its whole text; ``complete``: closed by completion, else cancelled), exactly those of
        :meth:`_start_events`, :meth:`_delta_events` and (``complete``) :meth:`_end_events` of a
        tracker of these headers; None (the default): the decoder builds that tracker and asks them.
        Asked for a plain-dict first update (:meth:`_dict_first_update`, what history holds); any
        other first contact goes through a tracker (the same events, by this contract)."""
        return None

    def _delta_template(self, tracker: _Tracker) -> DeltaTemplate | None:
        """The stream's delta template, cached on ``tracker._delta`` (None: no delta events)."""
        tracker._delta = None
        return None

    def _delta_events(self, tracker: _Tracker, delta: str, out: list[dict[str, Any]]) -> None:
        template = tracker._delta
        if template is False:
            template = self._delta_template(tracker)
        if template is not None:
            out.append(delta_event(template, delta))  # type: ignore[arg-type]

    def _end_events(self, tracker: _Tracker, closing: Mapping[str, Any], out: list[dict[str, Any]]) -> None:
        """Append the events a stream's completion rebuilds to ``out`` (none by default)."""

    def _discrete(
        self, name: Any, transport: Mapping[str, Any], codec: Mapping[str, Any], data: Any, publisher: str | None
    ) -> list[dict[str, Any]]:
        """The events a discrete message of ``publisher`` (its Ably ``clientId``; None: none)
        decodes to (none by default)."""
        return []
