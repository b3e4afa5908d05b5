"""Streamed messages as the generic decoder tracks them (sans-I/O).

One :class:`_Tracker` per stream ``serial`` (``StreamSequenceState`` of 0.8.0): version-guarded;
a closed stream's serial maps to the shared tombstone :data:`CLOSED`. A codec rebuilds its start /
delta / end events from a tracker's headers; its delta events come from a *delta template* read
once per stream (:func:`delta_template`, :func:`delta_event`).
"""

from __future__ import annotations

from typing import Any, Final

from .inbound import _EMPTY

__all__ = ["CLOSED", "DeltaTemplate", "_Tracker", "delta_event", "delta_template"]

#: ``(proto, key)``: a stream's delta event is a copy of ``proto`` with ``key`` set to the delta
#: (``proto`` already holds ``key``, so the copy keeps the reference's key order); see
#: :func:`delta_template`.
DeltaTemplate = tuple[dict[str, Any], str]

#: ``_Tracker._delta`` before the codec computed the template.
NOT_COMPUTED: Final = False


class _Tracker:
    """Per-serial stream state (``StreamSequenceState``): closed trackers are tombstones."""

    __slots__ = (
        "_delta", "chunks", "closed", "codec", "memo", "name", "publisher", "stream_id", "transport", "version"
    )

    def __init__(
        self,
        name: Any,
        stream_id: Any,
        accumulated: str,
        codec: dict,
        transport: dict,
        version: Any,
        publisher: str | None = None,
    ) -> None:
        self.name = name
        self.stream_id = stream_id
        #: The accumulated text as chunks (joined lazily: appends stay O(1), as JS ropes are).
        self.chunks: list[str] = [accumulated] if accumulated else []
        self.codec = codec
        self.transport = transport
        self.version = version
        self.closed = False
        self._delta: DeltaTemplate | bool | None = False  # False = not computed yet
        #: What the codec read from the start headers and may reuse at the end (None: nothing).
        self.memo: Any = None
        #: Who published the stream (the Ably ``clientId`` of the wire that opened it; None: none).
        self.publisher = publisher

    @property
    def accumulated(self) -> str:
        """The text accumulated so far (create data + appends, or the last replacing update)."""
        chunks = self.chunks
        if len(chunks) > 1:
            joined = "".join(chunks)
            chunks[:] = [joined]
            return joined
        return chunks[0] if chunks else ""

    def close(self) -> None:
        """Close into a tombstone: keep only the version (a closed tracker is never read again)."""
        self.closed = True
        self.chunks = []
        self.codec = self.transport = _EMPTY  # type: ignore[assignment]
        self._delta = None
        self.memo = None

    def set_headers(self, codec: dict, transport: dict) -> None:
        self.codec = codec
        self.transport = transport
        self._delta = False
        self.memo = None


def delta_template(typ: str, fields: dict[str, Any], key: str, type_first: bool) -> DeltaTemplate:
    """The template of delta events made of ``fields`` plus ``key: delta`` and ``type``: ``type``
    first or last, as the codec's reference orders the keys (``key`` is never ``"type"``)."""
    proto: dict[str, Any]
    if type_first:
        proto = {"type": typ}
        proto.update(fields)
        proto[key] = None
    else:
        proto = fields.copy()
        proto[key] = None
        proto["type"] = typ
    return (proto, key)


def delta_event(template: DeltaTemplate, delta: str) -> dict[str, Any]:
    """The delta event ``template`` rebuilds for ``delta`` (a fresh dict)."""
    proto, key = template
    ev = proto.copy()
    ev[key] = delta
    return ev


#: The tombstone of every closed stream (shared: a closed stream keeps no state of its own). Every
#: later message to its serial decodes to nothing, whatever its version, so none is kept.
CLOSED: Final = _Tracker("", "", "", {}, {}, "")
CLOSED.close()
