"""Signed agent wires: integrity of an agent's messages beyond what Ably enforces.

History returns one aggregate per message, so an append someone else made to the agent's stream is
merged into the text and, when the agent appended after it, not even visible in
``version.clientId``. With ``AgentSession(..., signing_key=...)`` the agent tags **every** wire it
publishes (its ``ai-output`` and its lifecycle: ``ai-run-start`` / ``-resume`` / ``-suspend`` /
``-end``, ``ai-step-start`` / ``-end``; claims are not signed) with a keyed digest (HMAC-SHA256) bound
to its context: the **channel name**, the wire's **name** (its kind) and both header tiers (the
transport tier holds the **run id**, ``input-client-id``, the codec-message-id...). So a signed run
copied wire by wire into another channel, or into another run (a changed ``run-id``), verifies
nowhere but where the agent published it:

* a stream's create and each of its appends (the closing one included): ``v4.`` over the channel,
  the name, both header tiers of the wire (minus the tag itself; Ably replaces ``extras`` wholesale
  on append, so the aggregate holds the last wire's) and the SHA-256 of the text so far (a running
  hash per stream; the aggregate's data is hashed once to verify), so any aggregate of it verifies
  whether or not the agent lived to finish it. A rogue append, an edited text or a changed header
  leaves no valid tag for what the aggregate then holds;
* a discrete message (a discrete output, every lifecycle wire): ``v3.`` over the channel, the name,
  the whole data (a data-less lifecycle wire's ``None`` and ``""`` are the same) and both tiers;
* an encoder recovery update (a failed append finished with one ``update_message`` of the whole
  text; 0.8.0's ``on_ably_message`` hook is not called for it): ``v4.`` over that text.

Tags of the earlier, context-free forms (``v1.`` / ``v2.``) no longer verify: accepting them would
keep every run signed that way replayable into any channel. A channel holding runs signed by an
older agent reports them as tampered on resume (finish or end such runs before upgrading).

Crash recovery (:mod:`ai_transport.sessions.recovery`): the worker that adopts a run closes each stream the dead worker
left open with a ``cancelled`` closing append, tagged only over the text the adopting agent's live
verifier accepted of the stream (:mod:`.live_integrity`: a verified aggregate from history, then
verified appends), i.e. the dead agent's own. A stream someone else wrote into stays reported: the close
is unsigned, or signed over a text the aggregate no longer matches.

The tag rides the transport header :data:`SIGNATURE_HEADER`, which ``@ably/ai-transport@0.8.0``
ignores: its decoder and tree read transport headers by name only (``src/core/codec/decoder.ts``
reads ``stream`` / ``status`` / ``stream-id``, ``src/core/codec/define-codec.ts`` ``run-id``,
``src/core/transport/tree.ts`` the lifecycle ids), and the codec tier is read field by field from the
codec's own descriptors; an unknown key is only ever copied along. ``tests/test_security_e2e.py``
shows a JS client's view of a signed run equal to the Python client's, and
``tests/test_durable_fleet.py`` a signed worker killed mid-stream adopted without a tamper report.

A resuming agent verifies every agent wire it folds from history; one that fails (or carries no
tag: a tag can be stripped by whoever rewrote the extras) is not folded and is reported
(``AgentSession.tampered``), and the run's model input / owed calls raise
:data:`~ai_transport.errors.ErrorCode.TAMPERED_OUTPUT` naming it (a run whose ``ai-run-start``
fails never starts: its answers stay held and nothing it was approved runs). A live agent verifies
every agent wire of a trusted identity too (:mod:`.live_integrity`): each append against the
running hash of the text it accepted of that message, so a rogue append under the agent's identity
(a wildcard or leaked token) is refused and reported the same way, and never reaches the model of a
run continuing in-process. Not covered: a stream left with an append that failed (not yet
recovered) when its worker died is reported; a replay of an earlier state of a message the agent
signed (an update carrying an older text with that text's tiers and tag) verifies in history (live,
an update that shortens the text is refused); a lifecycle wire replayed in its own channel and run
(an idempotent repeat); every trusted agent identity must hold the key; the key is symmetric
(clients cannot verify, only agents holding the key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from .._shapes import MAPPING
from ..codec.headers import NAME_OUTPUT, codec_headers, transport_headers
from ..errors import AITransportError, ErrorCode
from .lifecycle import RUN_LIFECYCLE_NAMES, STEP_LIFECYCLE_NAMES

__all__ = [
    "LIFECYCLE_NAMES",
    "SIGNATURE_HEADER",
    "HistoryIntegrity",
    "OutputSigner",
    "StreamTagger",
    "content_digest",
    "stream_digest",
    "text_sha256",
    "verify_output",
]

#: Transport header carrying the digest (``v3.`` / ``v4.<base64url>``); unknown to 0.8.0, so ignored there.
SIGNATURE_HEADER: Final = "x-ait-sig"

#: The agent's lifecycle wires (each signed as a discrete message).
LIFECYCLE_NAMES: Final = RUN_LIFECYCLE_NAMES | STEP_LIFECYCLE_NAMES

_TERMINAL = ("complete", "cancelled")
_DISCRETE: Final = "v3."
_STREAM: Final = "v4."


def _data_form(data: Any) -> Any:
    if isinstance(data, (bytes, bytearray)):
        return {"b64": base64.b64encode(bytes(data)).decode()}
    return data


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _mac(key: bytes, payload: str, version: str) -> str:
    mac = hmac.digest(key, payload.encode("utf-8", "surrogatepass"), "sha256")
    return version + base64.urlsafe_b64encode(mac).decode().rstrip("=")


def _tiers(extras: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both header tiers of the canonical form: the transport tier without the tag."""
    transport = {k: v for k, v in transport_headers(extras).items() if k != SIGNATURE_HEADER}
    return transport, dict(codec_headers(extras))


def text_sha256(text: str) -> str:
    """Hex SHA-256 of ``text`` (UTF-8): what a ``v4.`` tag covers of a stream's text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _discrete_data(name: Any, data: Any) -> Any:
    if name in LIFECYCLE_NAMES and data == "":
        return None  # a data-less lifecycle wire: absent and "" are the same
    return _data_form(data)


def content_digest(key: bytes, channel: str, name: Any, data: Any, extras: Any) -> str:
    """``v3.`` + base64url(HMAC-SHA256(key, canonical JSON of [channel, name, data, transport,
    codec])), the transport tier without :data:`SIGNATURE_HEADER` (the tag of a discrete message:
    a discrete output or a lifecycle wire)."""
    transport, codec = _tiers(extras)
    return _mac(key, _canonical([channel, name, _discrete_data(name, data), transport, codec]), _DISCRETE)


def stream_digest(key: bytes, channel: str, name: Any, sha256_hex: str, extras: Any) -> str:
    """``v4.`` + base64url(HMAC-SHA256(key, canonical JSON of [channel, name, transport, codec,
    {"sha256": sha256_hex}])): the tag of a stream message whose text so far hashes to
    ``sha256_hex`` (:func:`text_sha256`), the transport tier without :data:`SIGNATURE_HEADER`. (The
    text's hash comes last so a signer can absorb the constant part of a stream's wires once.)"""
    transport, codec = _tiers(extras)
    return _mac(key, _canonical([channel, name, transport, codec, {"sha256": sha256_hex}]), _STREAM)


def verify_output(key: bytes, message: Mapping[str, Any], *, channel: str) -> bool:
    """True when ``message`` (a history aggregate of an agent wire on ``channel``) carries a valid
    tag: ``v4.`` over the hash of its text (a stream, finished or not) or ``v3.`` over its data."""
    transport = transport_headers(message.get("extras"))
    tag = transport.get(SIGNATURE_HEADER)
    if not isinstance(tag, str):
        return False
    data = message.get("data")
    if data is None and transport.get("stream") == "true":
        data = ""
    if tag.startswith(_STREAM):
        if not isinstance(data, str):
            return False
        expected = stream_digest(key, channel, message.get("name"), text_sha256(data), message.get("extras"))
    elif tag.startswith(_DISCRETE):
        expected = content_digest(key, channel, message.get("name"), data, message.get("extras"))
    else:
        return False  # a context-free v1 / v2 tag (or none): replayable anywhere, not accepted
    return hmac.compare_digest(expected, tag)


class StreamTagger:
    """The ``v4.`` tags of one ``ai-output`` stream's wires on one channel (:func:`stream_digest`),
    cheaply: the HMAC with everything of the canonical form before the text's hash absorbed is kept
    (a copy of ``base``, ``hmac.new(key, digestmod="sha256")``) and rebuilt only when the header
    tiers change."""

    __slots__ = ("_base", "_prefix", "_prefixed", "codec", "transport")

    def __init__(self, base: hmac.HMAC, channel: str) -> None:
        self._base = base
        self._prefix = "[" + _canonical(channel) + "," + _canonical(NAME_OUTPUT) + ","
        self._prefixed: hmac.HMAC | None = None
        #: The tiers absorbed (``transport`` without :data:`SIGNATURE_HEADER`).
        self.transport: dict[str, Any] | None = None
        self.codec: dict[str, Any] | None = None

    def absorb(self, transport: Mapping[str, Any], codec: Mapping[str, Any]) -> None:
        """Tag with these header tiers from now on (a :data:`SIGNATURE_HEADER` in ``transport`` is
        left out, as the canonical form leaves it out)."""
        if SIGNATURE_HEADER in transport:
            transport = {k: v for k, v in transport.items() if k != SIGNATURE_HEADER}
        if self._prefixed is not None and transport == self.transport and codec == self.codec:
            return
        self.transport, self.codec = dict(transport), dict(codec)
        tiers = _canonical([self.transport, self.codec])[1:-1]
        prefixed = self._base.copy()
        prefixed.update(f'{self._prefix}{tiers},{{"sha256":"'.encode("utf-8", "surrogatepass"))
        self._prefixed = prefixed

    def tag(self, sha256_hex: str) -> str:
        """The ``v4.`` tag of a text hashing to ``sha256_hex`` under the absorbed tiers."""
        assert self._prefixed is not None, "absorb() the tiers first"
        mac = self._prefixed.copy()
        mac.update(sha256_hex.encode() + b'"}]')
        return _STREAM + base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")


class _Running:
    """A stream being signed: the hash of its text so far and its tagger."""

    __slots__ = ("sha", "tagger")

    def __init__(self, text: str, base: hmac.HMAC, channel: str) -> None:
        self.sha = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
        self.tagger = StreamTagger(base, channel)


class OutputSigner:
    """The hook that tags the agent's wires on ``channel`` (installed by :class:`~ai_transport.sessions.agent_run.AgentRun`
    on its encoder and its lifecycle publishes).

    Every wire of a stream (the create and each append) carries a ``v4.`` tag of the text so far,
    kept as a running SHA-256 per stream serial (the canonical form of the header tiers is reused
    while they repeat); a discrete message (a lifecycle wire included) carries a ``v3.`` tag of its
    data; an encoder recovery update (:meth:`on_update`) a ``v4.`` tag of its whole text.
    """

    def __init__(self, key: bytes, channel: str) -> None:
        self._key = key
        self.channel = channel
        self._hmac = hmac.new(key, digestmod="sha256")
        self._streams: dict[str, _Running] = {}
        self._created: dict[Any, str] = {}  # stream-id -> a create's text, when not empty

    def _tag(self, state: _Running, transport: Mapping[str, Any], extras: Any) -> str:
        state.tagger.absorb(transport, codec_headers(extras))
        return state.tagger.tag(state.sha.hexdigest())

    def on_message(self, message: dict[str, Any]) -> None:
        """Tag ``message`` in place (see the class docstring)."""
        extras = message.get("extras")
        transport = transport_headers(extras)
        if not isinstance(transport, dict):
            return
        serial = message.get("serial")
        data = message.get("data")
        if isinstance(serial, str):  # an append to a stream
            state = self._streams.get(serial)
            if state is None:
                text = self._created.pop(transport.get("stream-id"), "")
                state = self._streams[serial] = _Running(text, self._hmac, self.channel)
            if isinstance(data, str) and data:
                state.sha.update(data.encode("utf-8", "surrogatepass"))
            transport[SIGNATURE_HEADER] = self._tag(state, transport, extras)
            if transport.get("status") in _TERMINAL:
                del self._streams[serial]
            return
        if transport.get("stream") == "true":  # a stream's create: its text is the stream's start
            text = data if isinstance(data, str) else ""
            if text:
                self._created[transport.get("stream-id")] = text
            transport[SIGNATURE_HEADER] = stream_digest(
                self._key, self.channel, message.get("name"), text_sha256(text), extras
            )
            return
        transport[SIGNATURE_HEADER] = content_digest(self._key, self.channel, message.get("name"), data, extras)

    def on_update(self, message: dict[str, Any]) -> None:
        """Tag an encoder recovery update (the stream's whole text, a terminal status) in place."""
        transport = transport_headers(message.get("extras"))
        data = message.get("data")
        if not isinstance(transport, dict) or not isinstance(data, str):
            return
        serial = message.get("serial")
        if isinstance(serial, str):
            self._streams.pop(serial, None)
        transport[SIGNATURE_HEADER] = stream_digest(
            self._key, self.channel, NAME_OUTPUT, text_sha256(data), message.get("extras")
        )


class HistoryIntegrity:
    """What a resuming agent checks before folding an agent wire (``ai-output`` or lifecycle)
    aggregate from history on ``channel``.

    Without a key: an aggregate whose last mutator (``version.clientId``) is not a trusted agent is
    tampered. With a key: also one without a valid :data:`SIGNATURE_HEADER` tag. Tampered messages
    are kept in :attr:`tampered` (reported by the runs whose conversation they belong to).
    """

    def __init__(self, key: bytes | str | None, trusted_agent_ids: set[Any], channel: str = "") -> None:
        self.key = key.encode() if isinstance(key, str) else key
        #: The channel name every tag is bound to.
        self.channel = channel
        #: The hook that tags this agent's own wires (None without a key).
        self.signer = OutputSigner(self.key, channel) if self.key else None
        self._trusted = trusted_agent_ids
        #: Agent messages from history that failed the check (most recent last).
        self.tampered: list[Mapping[str, Any]] = []
        self._reasons: list[str] = []
        #: Live appends not settled yet (:meth:`~.live_integrity.LiveVerifier.pending`), set by the session.
        self.pending: Callable[[], list[Mapping[str, Any]]] = list

    def sign_update(self, message: dict[str, Any]) -> None:
        """Tag an encoder recovery update of this agent's stream (nothing without a key)."""
        if self.signer is not None:
            self.signer.on_update(message)

    def sign_lifecycle(self, message: dict[str, Any]) -> None:
        """Tag a lifecycle wire this agent is about to publish (nothing without a key)."""
        if self.signer is not None:
            self.signer.on_message(message)

    def record(self, message: Mapping[str, Any], reason: str) -> None:
        """Keep a tampered message (and why) for the runs to report."""
        self.tampered.append(message)
        self._reasons.append(reason)

    def check_runs(self, run_ids: set[str], for_run: str) -> None:
        """Raise :data:`~ai_transport.errors.ErrorCode.TAMPERED_OUTPUT` when a tampered message, or a
        live append still pending verification, belongs to one of ``run_ids`` (the conversation
        ``for_run`` answers), or to no known run (a rewrite can strip the headers: the whole
        conversation is then suspect)."""
        unsettled = "its appends are not vouched for by the agent's tag (someone else's, or one of its own lost and not recovered)"
        for message, reason in [*zip(self.tampered, self._reasons), *((m, unsettled) for m in self.pending())]:
            headers = transport_headers(message.get("extras"))
            if headers.get("run-id") in run_ids or not isinstance(headers.get("run-id"), str):
                raise AITransportError(
                    f"unable to use the conversation of run {for_run}; agent message "
                    f"{headers.get('codec-message-id')!r} (serial {message.get('serial')!r}) of run "
                    f"{headers.get('run-id')!r} was tampered with: {reason}",
                    ErrorCode.TAMPERED_OUTPUT,
                    500,
                    serial=message.get("serial"),
                    run_id=headers.get("run-id"),
                )

    def problem(self, message: Mapping[str, Any]) -> str | None:
        """Why ``message`` (a history aggregate) must not be folded, or None."""
        name = message.get("name")
        if (name != NAME_OUTPUT and name not in LIFECYCLE_NAMES) or message.get("clientId") not in self._trusted:
            return None
        version = message.get("version")
        mutator = version.get("clientId") if isinstance(version, MAPPING) else None
        action = message.get("action")
        mutated = action not in (None, "message.create", 0)
        if mutated and mutator not in self._trusted:
            return f"agent message last modified by {mutator!r}, not a trusted agent identity"
        if self.key and not verify_output(self.key, message, channel=self.channel):
            return "agent message fails its signing_key check (content changed, or tag missing)"
        return None
