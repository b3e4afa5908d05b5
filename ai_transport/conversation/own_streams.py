"""A foreign append never outlives the agent: the live agent restores its own stream's text.

History returns one aggregate per message, and Ably merges into it every append anyone with the
capability (a wildcard or leaked token, ``message-update-any``) made to the agent's stream. The live
agent refuses such an append (:mod:`.admission`: the mutator, ``version.clientId``, is not a trusted
agent identity; with a key, :mod:`.live_integrity` also refuses one under the agent's own identity),
but the aggregate keeps it, and when the agent appended after it even ``version.clientId`` names the
agent: a resumed agent would feed the rogue text to its model.

So the agent remembers what it wrote to each stream of its live runs (:class:`OwnStreams`: the text
of the create and of every append it published, and the tiers of its closing append), and when it
sees someone else's append (or update) to one of them, it restores the stream with one
``update_message`` carrying the whole text it wrote, its closing tiers (terminal ``status``) and, with
a key, a ``v4.`` tag of that text, as soon as the stream has ended (its closing append published):
the aggregate history then returns is the agent's own, last mutated by the agent, with or without a
key. A foreign append seen after the stream ended is answered at once. ``@ably/ai-transport@0.8.0``
clients fold the update as a stream replacement, so a JS view that showed the rogue text shows the
agent's again.

Not covered: an append under the agent's identity without a key (indistinguishable from the agent's
own); one landing after the run ended and its worker let go of the stream (the run deregistered).
Pure bookkeeping: :meth:`OwnStreams.appended` / :meth:`OwnStreams.foreign` return the update to
publish, the caller publishes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..codec.headers import codec_headers, transport_headers
from .signing import SIGNATURE_HEADER

__all__ = ["OwnStreams"]

_TERMINAL: Final = ("complete", "cancelled")


class _Stream:
    __slots__ = ("chunks", "closing", "dirty", "owner")

    def __init__(self, owner: Any, text: str) -> None:
        self.owner = owner
        self.chunks = [text] if text else []
        #: The tiers of the agent's closing append, once published.
        self.closing: tuple[dict[str, Any], dict[str, Any]] | None = None
        self.dirty = False

    def restore(self, serial: str) -> dict[str, Any]:
        assert self.closing is not None
        transport, codec = self.closing
        ai: dict[str, Any] = {"transport": dict(transport)}
        if codec:
            ai["codec"] = dict(codec)
        self.dirty = False
        return {"serial": serial, "data": "".join(self.chunks), "extras": {"ai": ai}}


class OwnStreams:
    """What the agent wrote to each stream of its live runs, by message serial (see the module)."""

    def __init__(self) -> None:
        self._streams: dict[str, _Stream] = {}

    def __contains__(self, serial: object) -> bool:
        return serial in self._streams

    def started(self, owner: Any, serial: str, message: Mapping[str, Any]) -> None:
        """The agent published a stream's create (``message``) at ``serial`` for run ``owner``."""
        data = message.get("data")
        self._streams[serial] = _Stream(owner, data if isinstance(data, str) else "")

    def appended(self, serial: str, message: Mapping[str, Any]) -> dict[str, Any] | None:
        """The agent published an append to ``serial``; returns the restoring update when it closed
        a stream someone else wrote into."""
        stream = self._streams.get(serial)
        if stream is None:
            return None
        data = message.get("data")
        if isinstance(data, str) and data:
            stream.chunks.append(data)
        transport = transport_headers(message.get("extras"))
        if transport.get("status") not in _TERMINAL:
            return None
        tiers = {k: v for k, v in transport.items() if k != SIGNATURE_HEADER}
        stream.closing = (tiers, dict(codec_headers(message.get("extras"))))
        return stream.restore(serial) if stream.dirty else None

    def replaced(self, serial: str, message: Mapping[str, Any]) -> None:
        """The agent published a whole-text update of ``serial`` (the encoder's recovery)."""
        stream = self._streams.get(serial)
        data = message.get("data")
        if stream is not None and isinstance(data, str):
            stream.chunks = [data]
            transport = transport_headers(message.get("extras"))
            if transport.get("status") in _TERMINAL:
                tiers = {k: v for k, v in transport.items() if k != SIGNATURE_HEADER}
                stream.closing = (tiers, dict(codec_headers(message.get("extras"))))

    def foreign(self, serial: Any) -> dict[str, Any] | None:
        """Someone else appended to (or updated) ``serial``; returns the restoring update when the
        agent's stream has already ended (else it is restored when it ends)."""
        stream = self._streams.get(serial) if isinstance(serial, str) else None
        if stream is None:
            return None
        stream.dirty = True
        return stream.restore(serial) if stream.closing is not None else None

    def forget(self, owner: Any) -> None:
        """Drop the streams of run ``owner`` (ended or suspended: its worker lets go of them)."""
        for serial in [s for s, stream in self._streams.items() if stream.owner is owner]:
            del self._streams[serial]
