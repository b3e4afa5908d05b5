"""Live verification of signed agent output: with a key, a live wire is folded only when its tag
vouches for what the message then holds.

History returns aggregates, and :class:`~.signing.HistoryIntegrity` verifies each one. Live, the
agent sees the wires themselves; a wire from a trusted agent identity says nothing about who sent it
when a token is wildcard or leaked. So an :class:`~ai_transport.sessions.agent.AgentSession` holding a ``signing_key``
also checks every live ``ai-output`` wire (after the identity rules of :mod:`.admission`) with a
:class:`LiveVerifier`, which tracks, per message serial, the text it *accepted* (a running SHA-256)
and the version serial it last accepted:

* a lifecycle wire (``ai-run-start`` ... ``ai-step-end``) is discrete: it must verify as it stands
  (``v3.``, bound to the channel and its run), else it is refused.
* a create, an update or a delete carries the message's whole content: it must verify as an
  aggregate would (``v4.`` over the hash of its text, or ``v3.`` over its data). A verified one
  sets the message's running hash (a first-sight aggregate delivered as ``message.update`` to an
  attachment that joined mid-stream included). An update never shortens a stream's accepted text
  (a replay of an earlier state is refused).
* an append must carry a ``v4.`` tag of the accepted text plus its fragment, with its own tiers;
  only then is the fragment added. One that does not is *pending* (held, not folded): the agent's
  next append settles it. When that one verifies (it is tagged over the accepted text *without* the
  pending fragments), every pending append of the message is refused: someone else wrote it. When a
  verified update comes first (the encoder's recovery of an append of its own that failed to publish,
  which leaves its later appends tagged over a text nobody received), the update supersedes them and
  they are dropped unreported. So a rogue append never moves the running hash, and the aggregate
  history then returns fails, which is right. A rolled-up delivery (Ably's ``appendRollupWindow``
  merges appends) verifies by its last tag when all of it is the agent's. One that merges a rogue
  append with the agent's is split (:data:`SPLIT`, deliveries up to :data:`SPLIT_LIMIT` characters):
  when the tag vouches for the accepted text plus only a suffix of the data (the rogue append came
  first) or only a prefix (the rogue one came last, copying the agent's tiers and tag), that part is
  folded and the wire is refused; a single rogue append carrying the agent's latest tag is refused at
  once that way. Otherwise (a rogue append between two of the agent's in one delivery) it stays
  pending with the stream's later appends: the text stops there and the run reports 104090.
* an append to a closed stream may only repeat the final text (an empty closing append, e.g. a
  recovering worker's ``cancelled`` close racing the real close); an append to a stream whose create
  failed is refused.
* a wire whose version serial the verifier already accepted (a re-delivery after a resume, a live
  append already inside an aggregate folded from history) is dropped: nothing is hashed twice, and
  the decoder would have ignored it anyway; a re-delivered pending one is held once.
* an append for a serial the verifier knows nothing of (its create was before this session
  attached and no aggregate has been seen, or the state was dropped by a refold) is *unvouched*:
  held, neither folded nor reported, until a verified aggregate of the message (history, or the
  first-sight ``message.update`` a mid-stream attachment gets) sets the running hash; then the held
  appends newer than it are checked in order. At most :data:`HELD_PER_MESSAGE` appends are held per
  message and :data:`HELD_TOTAL` in all; the oldest is dropped beyond, counted as skipped.

A refused wire is handled as history handles a tampered aggregate (see :class:`~ai_transport.sessions.agent.AgentSession`):
not folded, kept in ``tampered`` with the reason, skipped / logged / counted, and the run's model input
/ owed calls raise 104090 naming it. Other actions (``meta``, summaries) carry no content and pass.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from typing import Any, Final

from .._shapes import MAPPING
from ..channels.channel import action_name
from ..codec.headers import NAME_OUTPUT, codec_headers, transport_headers
from .held import HeldWires
from .signing import LIFECYCLE_NAMES, SIGNATURE_HEADER, StreamTagger, verify_output

__all__ = ["DROP", "FOLD", "HELD_PER_MESSAGE", "HELD_TOTAL", "HOLD", "SPLIT", "SPLIT_LIMIT", "LiveVerifier"]

#: Verdicts of :meth:`LiveVerifier.check` besides a refusal (a reason string).
FOLD: Final = "fold"
#: The wire is already incorporated (same or older version): drop it silently.
DROP: Final = "drop"
#: The wire cannot be verified yet (no running hash for its message): held by the verifier.
HOLD: Final = "hold"
#: A rolled-up delivery holding someone else's text: fold :meth:`LiveVerifier.take_substitute` instead
#: (the agent's part); the wire itself is refused (:meth:`LiveVerifier.take_refused`).
SPLIT: Final = "split"
#: Longest delivery :meth:`LiveVerifier.check` tries to split (each try is one HMAC).
SPLIT_LIMIT: Final = 256

#: Unvouched appends held per message / in all; the oldest is dropped beyond.
HELD_PER_MESSAGE: Final = 1000
HELD_TOTAL: Final = 10_000

_TERMINAL: Final = ("complete", "cancelled")
_WHOLE: Final = (None, "message.create", "message.update", "message.delete")
_MUTATIONS: Final = ("message.update", "message.append", "message.delete")
_FAILS: Final = "fails its signing_key check (content changed, or tag missing)"


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class _Message:
    """What the verifier accepted of one message: the version, the running hash of an open stream's
    text (``sha``), or the final text's hex digest once closed (``digest``), the text's length, and
    the tagger of its last tiers (reused while they repeat)."""

    __slots__ = ("digest", "length", "refused", "sha", "tagger", "version")

    def __init__(self, version: str, base: hmac.HMAC, channel: str) -> None:
        self.version = version
        self.sha: Any = None
        self.digest: str | None = None
        self.length = 0
        self.refused = False
        self.tagger = StreamTagger(base, channel)


class LiveVerifier:
    """Checks live agent wires (``ai-output`` and lifecycle) of trusted agent identities on
    ``channel`` against ``key`` (see the module docstring); ``on_dropped(message, why)`` is told of a
    held append dropped for room."""

    def __init__(self, key: bytes, on_dropped: Callable[[Mapping[str, Any], str], None], channel: str = "") -> None:
        self._key = key
        self._channel = channel
        self._hmac = hmac.new(key, digestmod="sha256")
        self._on_dropped = on_dropped
        self._messages: dict[str, _Message] = {}
        #: Unvouched appends: message serial -> version serial -> wire (a re-delivery held once).
        self._held = HeldWires(
            HELD_PER_MESSAGE,
            HELD_TOTAL,
            on_dropped,
            "unverified agent output append dropped (too many held for its message)",
            "unverified agent output append dropped (too many held)",
        )
        self._released: list[Mapping[str, Any]] = []
        self._refused: list[tuple[Mapping[str, Any], str]] = []
        self._substitute: Mapping[str, Any] = {}

    def twin(self) -> LiveVerifier:
        """An empty verifier with the same key (what a refold fills from history)."""
        return LiveVerifier(self._key, self._on_dropped, self._channel)

    def clear(self) -> None:
        """Forget every message (continuity unknown: appends wait for an aggregate again)."""
        self._messages.clear()
        self._held.clear()
        self._released.clear()
        self._refused.clear()

    def accepted_sha256(self, serial: str) -> str | None:
        """Hex SHA-256 of the text accepted of the open stream ``serial`` (every byte of it vouched
        for by a verified tag: what a recovering worker may sign its ``cancelled`` close over), or
        None when the stream is unknown, closed or its create failed."""
        state = self._messages.get(serial)
        return None if state is None or state.sha is None else str(state.sha.hexdigest())

    def pending(self) -> list[Mapping[str, Any]]:
        """Appends held because their tag did not vouch for the accepted text (a stream whose
        message is known): until the agent's next wire settles them, the stream's text is not known
        to be the agent's (see :meth:`~.signing.HistoryIntegrity.check_runs`)."""
        return [m for serial, held in self._held.by_key() if serial in self._messages for m in held]

    @property
    def unsettled(self) -> bool:
        """True when :meth:`take_refused` or :meth:`take_released` has something."""
        return bool(self._refused or self._released)

    def take_released(self) -> list[Mapping[str, Any]]:
        """Held appends whose message got a running hash since the last call (to check again, in order)."""
        released, self._released = self._released, []
        return released

    def take_refused(self) -> list[tuple[Mapping[str, Any], str]]:
        """Pending appends found to be someone else's since the last call, with the reason."""
        refused, self._refused = self._refused, []
        return refused

    def check(self, message: Mapping[str, Any]) -> str:
        """:data:`FOLD`, :data:`DROP`, :data:`HOLD`, or why the wire is refused. Only agent output
        is checked (a wire admitted by identity named ``ai-output``, or a mutation that is name-less
        or of a message the verifier knows); anything else is :data:`FOLD`."""
        serial = message.get("serial")
        action = action_name(message.get("action"))
        name = message.get("name")
        if name in LIFECYCLE_NAMES:  # discrete and whole: it verifies as it stands, or not at all
            if action in _WHOLE and verify_output(self._key, message, channel=self._channel):
                return FOLD
            return f"live agent lifecycle wire {_FAILS}"
        if name != NAME_OUTPUT and (action not in _MUTATIONS or (name and serial not in self._messages)):
            return FOLD
        if not isinstance(serial, str):
            return FOLD if action in _WHOLE and verify_output(self._key, message, channel=self._channel) else f"agent output {_FAILS}"
        version_info = message.get("version")
        version = version_info.get("serial") if isinstance(version_info, MAPPING) else None
        version = version if isinstance(version, str) and version else serial
        known = self._messages.get(serial)
        if known is not None and version <= known.version:
            return DROP
        if action == "message.append":
            if known is None:
                self._held.hold(serial, version, message)
                return HOLD
            return self._append(serial, known, message, version)
        if action not in _WHOLE:
            return FOLD
        named = message if name or action is None or action == "message.create" else {
            **message, "name": NAME_OUTPUT}
        if not verify_output(self._key, named, channel=self._channel):
            if known is None and action in (None, "message.create"):
                refused = self._messages[serial] = _Message(version, self._hmac, self._channel)
                refused.refused = True
            return f"live agent output {_FAILS}"
        data = message.get("data")
        text = "" if data is None else data
        if known is not None and not known.refused and isinstance(text, str) and len(text) < known.length:
            return "live agent output update shortens the text the agent streamed (a replay of an earlier state)"
        self._establish(serial, version, message, text)
        return FOLD

    def adopt(self, message: Mapping[str, Any]) -> None:
        """A verified aggregate of a trusted ``ai-output`` folded from history: it sets the message's
        running hash when newer than what was accepted live (held appends then get checked)."""
        serial = message.get("serial")
        if not isinstance(serial, str):
            return
        version_info = message.get("version")
        version = version_info.get("serial") if isinstance(version_info, MAPPING) else None
        version = version if isinstance(version, str) and version else serial
        known = self._messages.get(serial)
        if known is not None and version <= known.version:
            return
        data = message.get("data")
        self._establish(serial, version, message, "" if data is None else data)

    def _establish(self, serial: str, version: str, message: Mapping[str, Any], text: Any) -> None:
        state = self._messages[serial] = _Message(version, self._hmac, self._channel)
        transport = transport_headers(message.get("extras"))
        if isinstance(text, str):
            state.length = len(text)
            sha = hashlib.sha256(_utf8(text))
            if transport.get("stream") == "true" and transport.get("status") == "streaming":
                state.sha = sha
            else:
                state.digest = sha.hexdigest()
        self._released.extend(self._held.release(serial))

    def _append(self, serial: str, state: _Message, message: Mapping[str, Any], version: str) -> str:
        if state.refused:
            return "live append to an agent output whose create failed its signing_key check"
        data = message.get("data")
        if data is None:
            data = ""
        if not isinstance(data, str):
            return "live append to an agent output carries no text"
        extras = message.get("extras")
        transport = transport_headers(extras)
        tag = transport.get(SIGNATURE_HEADER)
        if not isinstance(tag, str):
            return f"live append to agent output {_FAILS}"
        if state.sha is not None:
            trial = state.sha.copy()
            if data:
                trial.update(_utf8(data))
            sha_hex = trial.hexdigest()
        elif data or state.digest is None:
            return "live append of text to an agent output already closed"
        else:
            trial, sha_hex = None, state.digest
        state.tagger.absorb(transport, codec_headers(extras))
        verdict = FOLD
        if not hmac.compare_digest(state.tagger.tag(sha_hex), tag):
            if trial is None:
                return f"live append to a closed agent output {_FAILS}"
            split = self._split(state, data, tag)
            if split is None:
                self._held.hold(serial, version, message)  # pending: the agent's next tag tells whether it was its own
                return HOLD
            trial, data = split  # a rolled-up delivery: the agent's part is folded, the wire reported
            merged = ": it merges someone else's text with the agent's" if data else ""
            self._refused.append((message, f"live append to agent output {_FAILS}{merged}"))
            self._substitute = {**message, "data": data}
            verdict = SPLIT
        # the agent's tag vouches for its text without those held: someone else's fragments
        self._refused.extend((m, f"live append to agent output {_FAILS}") for m in self._held.release(serial))
        state.version = version
        if trial is not None:
            state.sha = trial
            state.length += len(data)
            if transport.get("status") in _TERMINAL:
                state.sha, state.digest = None, trial.hexdigest()
        return verdict

    def _split(self, state: _Message, data: str, tag: str) -> tuple[Any, str] | None:
        """The running hash and the agent's part of a delivery whose tag vouches for the accepted text
        plus only a suffix of ``data`` (someone's append rolled up before the agent's) or only a
        prefix (someone's append copying the agent's tiers rolled up after it); None when neither
        (or ``data`` is longer than :data:`SPLIT_LIMIT`)."""
        if len(data) > SPLIT_LIMIT:
            return None
        tagger, base = state.tagger, state.sha
        for k in range(1, len(data) + 1):
            trial = base.copy()
            trial.update(_utf8(data[k:]))
            if hmac.compare_digest(tagger.tag(trial.hexdigest()), tag):
                return trial, data[k:]
        trial = base.copy()
        for k in range(len(data)):
            if k:
                trial.update(_utf8(data[k - 1]))
            if hmac.compare_digest(tagger.tag(trial.hexdigest()), tag):
                return trial, data[:k]
        return None

    def take_substitute(self) -> Mapping[str, Any]:
        """The agent's part of the wire :meth:`check` answered :data:`SPLIT` for (to fold instead)."""
        substitute, self._substitute = self._substitute, {}
        return substitute
