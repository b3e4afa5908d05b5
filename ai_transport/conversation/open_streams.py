"""Which streams of each run are still open: the ledger a recovering worker reads.

The agent session feeds :class:`OpenStreams` with every trusted stream it folds (live and from
history; the latest version of a stream wins). A worker that takes a run over closes each stream
still open (:mod:`ai_transport.sessions.recovery` publishes the closes; this module only decides
which are open, and before which serial). Pure state, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._shapes import MAPPING
from ..codec.headers import codec_headers, transport_headers
from .lifecycle import H_RUN_ID, OUTPUT_WIRE_NAMES
from .signing import SIGNATURE_HEADER

__all__ = ["OpenStream", "OpenStreams"]

_APPEND = "message.append"


@dataclass
class OpenStream:
    """One streamed ``ai-output`` message as last seen: its serial, version and header tiers (the
    transport tier with the last wire's tag, if any)."""

    serial: str
    version: str
    transport: dict[str, str]
    codec: dict[str, str]

    @property
    def is_open(self) -> bool:
        """True while the stream's status is ``streaming`` (no closing append seen)."""
        return self.transport.get("status") == "streaming"


def _same_tiers(known: OpenStream, transport: Mapping[str, Any], codec: Mapping[str, Any]) -> bool:
    """Whether a wire repeats ``known``'s tiers apart from the tag (then taken over in place)."""
    if known.codec != codec:
        return False
    tag = transport.get(SIGNATURE_HEADER)
    if tag is None:
        known.transport.pop(SIGNATURE_HEADER, None)
    else:
        known.transport[SIGNATURE_HEADER] = tag
    return known.transport == transport


class OpenStreams:
    """Ledger of the streams of each run, fed with every trusted agent wire (live or history)."""

    def __init__(self) -> None:
        #: Per run, per stream serial: the stream as last seen while open, or only its version once
        #: closed (all a closed stream's record decides: which later view of it is newer). A woken
        #: worker's history is mostly closed streams: a version is an object the cyclic GC does not
        #: track, nor a run's dict of versions only.
        self._by_run: dict[str, dict[str, OpenStream | str]] = {}

    def note(self, message: Mapping[str, Any], transport: Mapping[str, Any] | None = None) -> None:
        """Record ``message`` when it is a stream's create, append or aggregate. ``transport``: its
        transport tier when the caller read it already (read once per wire)."""
        name = message.get("name")
        if name not in OUTPUT_WIRE_NAMES:
            return
        extras = message.get("extras")
        if transport is None:
            transport = transport_headers(extras)
        if transport.get("stream") != "true" or "status" not in transport:
            return
        run_id = transport.get(H_RUN_ID)
        serial = message.get("serial")
        if not isinstance(run_id, str) or not isinstance(serial, str):
            return
        version_info = message.get("version")
        version = version_info.get("serial") if isinstance(version_info, MAPPING) else None
        version = version if isinstance(version, str) else serial
        streams = self._by_run.setdefault(run_id, {})
        known = streams.get(serial)
        append = message.get("action") == _APPEND
        if known is not None:
            known_version = known.version if isinstance(known, OpenStream) else known
            if known_version > version or (append and known_version == version):
                return  # an older view of the stream (a history page folded after newer live appends)
        streaming = transport.get("status") == "streaming"
        if not streaming and not isinstance(known, OpenStream):
            # closed and not open before (a history aggregate): its version is all that is kept,
            # and neither branch below would read the codec tier, so it is not read
            streams[serial] = version
            return
        codec = codec_headers(extras)
        if isinstance(known, OpenStream) and _same_tiers(known, transport, codec):
            known.version = version  # an append repeating its stream's headers: no copies
            return
        if streaming:
            streams[serial] = OpenStream(serial, version, dict(transport), dict(codec))
        else:
            streams[serial] = version  # closed: its version only

    def twin(self) -> OpenStreams:
        """An empty ledger (what a refold fills)."""
        return OpenStreams()

    def open_streams(self, run_id: str, before: str | None = None) -> list[OpenStream]:
        """The run's streams still open (those created before serial ``before``, if given)."""
        return [
            s
            for s in self._by_run.get(run_id, {}).values()
            if isinstance(s, OpenStream) and s.is_open and (before is None or s.serial < before)
        ]

    def clear(self) -> None:
        """Forget everything (the session rebuilds from history after a continuity loss)."""
        self._by_run.clear()
