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
with a warning. Closed streams are kept as tombstones (the version only) for the decoder's life.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from typing import Any, Final

from .._shapes import MAPPING
from .headers import MISSING, NAME_INPUT, NAME_OUTPUT, js_to_string, parse_json

__all__ = ["DecodeResult", "Decoder"]

logger = logging.getLogger("ai_transport.codec.decoder")

_CREATE: Final = "message.create"
_UPDATE: Final = "message.update"
_DELETE: Final = "message.delete"
_APPEND: Final = "message.append"

#: Ably's numeric actions (index) -> ably-js names; only the four the decoder acts on.
_ACTION_BY_INT: Final = {0: _CREATE, 1: _UPDATE, 2: _DELETE, 5: _APPEND}
_ACTION_NAMES: Final = frozenset((_CREATE, _UPDATE, _DELETE, _APPEND, "meta", "message.summary"))


#: A header / property that is absent (JavaScript ``undefined``, distinct from ``null``).
_ABSENT: Final = MISSING


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
# JavaScript value semantics at the wire boundary (headers are untrusted JSON)


def _json_field(headers: Mapping[str, Any], key: str) -> Any:
    """0.8.0 ``jsonField(key).read``: ``JSON.parse(headers[key])``; absent or unparseable -> ``_ABSENT``."""
    v = headers.get(key, _ABSENT)
    if v is _ABSENT:
        return _ABSENT
    if type(v) is str:
        if v.isdigit() and len(v) < 16 and v.isascii() and (v[0] != "0" or len(v) == 1):
            return int(v)  # the common case: an index
    else:
        if v is None or isinstance(v, (bool, int, float)):
            return v  # JSON.parse(String(v)) round-trips JSON scalars
        v = js_to_string(v)
    value = parse_json(v)
    if value is _ABSENT:
        logger.warning("decode(); header %r is not valid JSON (%.80r), reading it as absent", key, v)
    return value


def _str_field(headers: Mapping[str, Any], key: str, default: Any = _ABSENT) -> Any:
    """0.8.0 ``strField(key, fallback).read``: ``headers[key] ?? fallback``."""
    v = headers.get(key)
    return default if v is None else v


def _bool_field(headers: Mapping[str, Any], key: str, default: Any = _ABSENT) -> Any:
    """0.8.0 ``boolField(key, fallback).read``: ``"true"`` -> True, other present value -> False."""
    if key not in headers:
        return default
    return headers[key] == "true"


def _prop(obj: Any, key: str) -> Any:
    """``obj?.[key]`` for a JSON value: a dict's value, else ``_ABSENT`` (incl. null / primitives)."""
    if _is_map(obj):
        return obj.get(key, _ABSENT)
    return _ABSENT


def _nullish(v: Any, default: Any) -> Any:
    """``v ?? default``."""
    return default if v is None or v is _ABSENT else v


def _strip(bag: dict[str, Any]) -> dict[str, Any]:
    """``stripUndefined``: drop absent values."""
    return {k: v for k, v in bag.items() if v is not _ABSENT}


_EMPTY: Final[Mapping[str, Any]] = {}


def _is_map(v: Any) -> bool:
    return type(v) is dict or isinstance(v, MAPPING)


def _tier(extras: Any, tier: str) -> Mapping[str, Any]:
    """One tier of ``extras.ai`` (``{}`` when missing or not an object; arrays read as empty). Not copied."""
    if type(extras) is not dict and not isinstance(extras, MAPPING):
        return _EMPTY
    ai = extras.get("ai")
    if type(ai) is not dict and not isinstance(ai, MAPPING):
        if ai is not None:
            logger.warning(
                "decode(); extras.ai is not an object (%s), reading it as empty", type(ai).__name__
            )
        return _EMPTY
    sub = ai.get(tier)
    if type(sub) is dict or isinstance(sub, MAPPING):
        return sub
    if sub is not None:
        logger.warning(
            "decode(); extras.ai.%s is not an object (%s), reading it as empty", tier, type(sub).__name__
        )
    return _EMPTY


def _warn_data(data: Any, serial: Any) -> None:
    if data is not None and data is not _ABSENT:
        logger.warning("decode(); stream %r: data is %s, not a string; ignored", serial, type(data).__name__)


def _has_ai_envelope(extras: Any) -> bool:
    if not _is_map(extras):
        return False
    ai = extras.get("ai")
    return _is_map(ai) or isinstance(ai, list)


# ---------------------------------------------------------------------------------------------
# Stream trackers and the output descriptor groups

_CONTENT_ADDED: Final = "response.content_part.added"
_SUMMARY_ADDED: Final = "response.reasoning_summary_part.added"
_ITEM_ADDED: Final = "response.output_item.added"


class _Group:
    """A streamed output group (``kind``) and how it rebuilds its start / delta / end events."""

    __slots__ = ("delta_type", "end_field", "end_type", "index_key", "kind", "start_type")

    def __init__(self, kind: str, delta_type: str, end_type: str, end_field: str, index_key: str) -> None:
        self.kind = kind
        self.start_type = _SUMMARY_ADDED if index_key == "summary_index" else _CONTENT_ADDED
        self.delta_type = delta_type
        self.end_type = end_type
        self.end_field = end_field
        self.index_key = index_key


_FN_ARGS: Final = "function_call_arguments"

_GROUPS: Final[dict[str, _Group]] = {
    g.kind: g
    for g in (
        _Group(
            "output_text", "response.output_text.delta", "response.output_text.done", "text", "content_index"
        ),
        _Group("refusal", "response.refusal.delta", "response.refusal.done", "refusal", "content_index"),
        _Group(
            "reasoning_text",
            "response.reasoning_text.delta",
            "response.reasoning_text.done",
            "text",
            "content_index",
        ),
        _Group(
            "reasoning_summary_text",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "text",
            "summary_index",
        ),
    )
}

_FN_DELTA: Final = "response.function_call_arguments.delta"
_FN_DONE: Final = "response.function_call_arguments.done"

_MESSAGE_PARTS: Final = ("output_text", "refusal")
_REASONING_PARTS: Final = ("reasoning_text", "summary_text")


class _Tracker:
    """Per-serial stream state (``StreamSequenceState``): closed trackers are tombstones."""

    __slots__ = ("_delta", "chunks", "closed", "codec", "name", "stream_id", "transport", "version")

    def __init__(
        self, name: Any, stream_id: Any, accumulated: str, codec: dict, transport: dict, version: Any
    ) -> None:
        self.name = name
        self.stream_id = stream_id
        #: The accumulated text as chunks (joined lazily: appends stay O(1), as JS ropes are).
        self.chunks: list[str] = [accumulated] if accumulated else []
        self.codec = codec
        self.transport = transport
        self.version = version
        self.closed = False
        self._delta: tuple[str, dict[str, Any]] | bool | None = False  # False = not computed yet

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

    def set_headers(self, codec: dict, transport: dict) -> None:
        self.codec = codec
        self.transport = transport
        self._delta = False

    def delta_template(self) -> tuple[str, dict[str, Any]] | None:
        """``(type, fields)`` of this stream's delta events, read once from the start headers.

        ``None`` when the stream is not an ``ai-output`` stream of a known group (no delta events).
        """
        cached = self._delta
        if cached is not False:
            return cached  # type: ignore[return-value]
        template: tuple[str, dict[str, Any]] | None = None
        if self.name == NAME_OUTPUT:
            kind = self.codec.get("kind")
            if kind is None:
                kind = ""
            group = _GROUPS.get(kind) if type(kind) is str else None
            if group is not None:
                template = (
                    group.delta_type,
                    _strip(
                        {
                            "item_id": _str_field(self.codec, "item_id"),
                            group.index_key: _json_field(self.codec, group.index_key),
                        }
                    ),
                )
            elif kind == _FN_ARGS:
                item = _json_field(self.codec, "item")
                template = (
                    _FN_DELTA,
                    {
                        "item_id": _nullish(_prop(item, "id"), ""),
                        "output_index": _nullish(_json_field(self.codec, "output_index"), 0),
                    },
                )
        # Cache only immutable field values, so events never share a mutable object.
        if template is None or all(not isinstance(v, (dict, list)) for v in template[1].values()):
            self._delta = template
        return template


def _version_le(a: Any, b: Any) -> bool:
    """``a <= b`` as JavaScript compares serials (strings lexicographically, numbers numerically)."""
    if type(a) is str and type(b) is str:
        return a <= b
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return a <= b
    return False


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Reading an inbound message (dict or ably-python Message)


class _Inbound:
    """The fields of an inbound message the decoder reads (``action`` normalised, ``version`` defaulted)."""

    __slots__ = ("action", "data", "extras", "name", "serial", "version")

    action: Any
    name: Any
    serial: Any
    version: Any
    data: Any
    extras: Any


def _read_inbound(msg: Any) -> _Inbound | None:
    m = _Inbound()
    if type(msg) is dict or isinstance(msg, MAPPING):
        get = msg.get
        m.action = get("action")
        m.name = get("name")
        m.serial = get("serial")
        m.data = get("data", _ABSENT)
        m.extras = get("extras")
        version = get("version")
    elif hasattr(msg, "action") and hasattr(msg, "serial") and hasattr(msg, "extras"):
        m.action = getattr(msg, "action", None)
        m.name = getattr(msg, "name", None)
        m.serial = getattr(msg, "serial", None)
        m.data = getattr(msg, "data", _ABSENT)
        m.extras = getattr(msg, "extras", None)
        version = getattr(msg, "version", None)
    else:
        return None
    # ably-js fills version.serial from the message serial when missing (Message.fromValues).
    if type(version) is dict or isinstance(version, MAPPING):
        vs = version.get("serial")
    elif version is not None:
        vs = getattr(version, "serial", None)
    else:
        vs = None
    if not vs and m.serial:
        vs = m.serial
    m.version = _ABSENT if vs is None else vs
    action = m.action
    if type(action) is not str:
        m.action = _wire_action(action)
    elif action not in _ACTION_NAMES:
        m.action = None
    return m


_ACTIONS_BY_KEY: Final = {"0": _CREATE, "1": _UPDATE, "2": _DELETE, "5": _APPEND}


def _wire_action(action: Any) -> str | None:
    """ably-js's ``stringifyAction``: ``actions[action || 0] ?? 'unknown'`` (as it decodes the wire).

    A missing action is a create: Ably omits the zero action on the wire (ably-python then gives
    ``None``), and ably-js reads it as ``message.create``. Unknown values are ignored (``None``).
    """
    if action is None or action is False:
        return _CREATE
    if isinstance(action, int):  # MessageAction (IntEnum) and plain ints
        return _ACTION_BY_INT.get(int(action)) if action is not True else None
    if isinstance(action, float):
        if action == 0 or math.isnan(action):
            return _CREATE
        return _ACTION_BY_INT.get(int(action)) if action.is_integer() else None
    if isinstance(action, list):
        return _ACTIONS_BY_KEY.get(js_to_string(action))
    return None


# ---------------------------------------------------------------------------------------------
# The decoder


class _Malformed(Exception):
    """A message the reference would throw on; skipped with a warning."""


class Decoder:
    """Stateful decoder for one session (``ResponsesCodec.createDecoder()`` of 0.8.0).

    Call :meth:`decode` with every inbound message, live and from history, in channel order.
    """

    __slots__ = ("_trackers",)

    def __init__(self) -> None:
        self._trackers: dict[Any, _Tracker] = {}

    # -- public ---------------------------------------------------------------------------

    def decode(self, inbound: Any) -> DecodeResult:
        """Decode one inbound Ably message into ``DecodeResult(inputs, outputs)``.

        Never raises: a malformed message is skipped (empty result) and logged as a warning.
        """
        if type(inbound) is dict and inbound.get("action") == _APPEND:
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
                        try:
                            return self._tracked_append(inbound, serial, tracker, extras, transport)
                        except Exception:  # pragma: no cover - defensive: never crash
                            logger.warning("decode(); skipping append (serial %r)", serial, exc_info=True)
                            return DecodeResult()
        m = _read_inbound(inbound)
        if m is None:
            logger.warning("decode(); not an Ably message (%s), skipping", type(inbound).__name__)
            return DecodeResult()
        try:
            events = self._decode(m)
        except _Malformed as exc:
            logger.warning("decode(); skipping malformed message (serial %r): %s", m.serial, exc)
            return DecodeResult()
        except Exception:  # pragma: no cover - defensive: the decoder must never crash
            logger.warning(
                "decode(); skipping message (serial %r) that failed to decode", m.serial, exc_info=True
            )
            return DecodeResult()
        if m.name == NAME_INPUT:
            return DecodeResult(events, [])
        return DecodeResult([], events)

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
                template = tracker._delta
                if template is False:
                    template = tracker.delta_template()
                if template is not None:
                    typ, fields = template  # type: ignore[misc]
                    if typ is _FN_DELTA:
                        ev: dict[str, Any] = {"type": typ}
                        ev.update(fields)
                        ev["delta"] = data
                    else:
                        ev = fields.copy()
                        ev["delta"] = data
                        ev["type"] = typ
                    out.append(ev)
        status = transport.get("status")
        if status == "complete":
            if is_output:
                self._end_events(tracker, _tier(extras, "codec"), out)
            tracker.close()
        elif status == "cancelled":
            tracker.close()
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
            return self._discrete(m.name, transport, _tier(m.extras, "codec"), m.data)
        if action == _UPDATE:
            return self._update(m)
        if action == _DELETE:
            serial = m.serial
            if not serial or not _hashable(serial):
                return []
            tracker = self._trackers.get(serial)
            if tracker is not None:
                tracker.close()
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
        tracker = _Tracker(
            _nullish(m.name, ""),
            _nullish(transport.get("stream-id"), ""),
            "",
            dict(_tier(m.extras, "codec")),
            dict(transport),
            serial if version is _ABSENT else version,
        )
        self._trackers[serial] = tracker
        return self._start_events(tracker)

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
            tracker.close()
        elif status == "cancelled":
            tracker.close()
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
                return self._discrete(m.name, transport, codec, m.data)
            return self._first_contact(m, transport, codec, status, serial)
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
                tracker.close()
            elif status == "cancelled":
                tracker.close()
            return out
        # Not a prefix extension: replace silently.
        tracker.chunks = [data] if data else []
        tracker.set_headers(dict(codec), dict(transport))
        logger.debug("decode(); stream %r replaced by a non-prefix update", serial)
        return []

    def _first_contact(
        self, m: _Inbound, transport: Mapping[str, Any], codec: Mapping[str, Any], status: Any, serial: Any
    ) -> list[dict[str, Any]]:
        if type(m.data) is not str:
            _warn_data(m.data, serial)
        data = m.data if type(m.data) is str else ""
        version = m.version
        tracker = _Tracker(
            _nullish(m.name, ""),
            _nullish(transport.get("stream-id"), ""),
            data,
            dict(codec),
            dict(transport),
            serial if version is _ABSENT else version,
        )
        self._trackers[serial] = tracker
        out = self._start_events(tracker)
        if tracker.name == NAME_OUTPUT:
            if data:
                self._delta_events(tracker, data, out)
            if status == "complete":
                self._end_events(tracker, codec, out)
        if status == "complete" or status == "cancelled":
            tracker.close()
        return out

    # -- event rebuilding -----------------------------------------------------------------

    @staticmethod
    def _start_events(tracker: _Tracker) -> list[dict[str, Any]]:
        if tracker.name != NAME_OUTPUT:
            return []
        codec = tracker.codec
        out: list[dict[str, Any]] = []
        kind = _nullish(codec.get("kind"), "")
        group = _GROUPS.get(kind) if type(kind) is str else None
        item_id = _str_field(codec, "item_id")
        output_index = _json_field(codec, "output_index")  # each header parsed once
        part: Any = _ABSENT
        # Mid-stream-join repair: the opening output_item.added of the part's container.
        if item_id is not _ABSENT:
            part = _json_field(codec, "part")
            part_type = _prop(part, "type")
            container: dict[str, Any] | None = None
            if part_type in _MESSAGE_PARTS and type(part_type) is str:
                container = {
                    "id": item_id,
                    "type": "message",
                    "role": "assistant",
                    "status": "in_progress",
                    "content": [],
                }
            elif part_type in _REASONING_PARTS and type(part_type) is str:
                container = {"id": item_id, "type": "reasoning", "summary": []}
            if container is not None:
                index = _nullish(output_index, 0)
                if isinstance(index, (dict, list)):  # never share a mutable value between events
                    index = _json_field(codec, "output_index")
                out.append({"type": _ITEM_ADDED, "item": container, "output_index": index})
        elif group is not None:
            part = _json_field(codec, "part")
        if group is not None:
            bag = _strip(
                {
                    "item_id": item_id,
                    "output_index": output_index,
                    group.index_key: _json_field(codec, group.index_key),
                    "part": part,
                }
            )
            bag["type"] = group.start_type
            out.append(bag)
        elif kind == _FN_ARGS:
            bag = _strip({"item": _json_field(codec, "item"), "output_index": output_index})
            bag["type"] = _ITEM_ADDED
            out.append(bag)
        return out

    @staticmethod
    def _delta_events(tracker: _Tracker, delta: str, out: list[dict[str, Any]]) -> None:
        template = tracker.delta_template()
        if template is None:
            return
        typ, fields = template
        ev: dict[str, Any]
        if typ is _FN_DELTA:
            ev = {"type": typ}
            ev.update(fields)
            ev["delta"] = delta
        else:
            ev = dict(fields)
            ev["delta"] = delta
            ev["type"] = typ
        out.append(ev)

    @staticmethod
    def _end_events(tracker: _Tracker, closing: Mapping[str, Any], out: list[dict[str, Any]]) -> None:
        kind = _nullish(tracker.codec.get("kind"), "")
        group = _GROUPS.get(kind) if type(kind) is str else None
        if group is not None:
            out.append(
                {
                    "type": group.end_type,
                    "item_id": _nullish(_str_field(closing, "item_id"), ""),
                    "output_index": _nullish(_json_field(closing, "output_index"), 0),
                    group.index_key: _nullish(_json_field(closing, group.index_key), 0),
                    group.end_field: tracker.accumulated,
                }
            )
        elif kind == _FN_ARGS:
            item = _json_field(closing, "item")
            ev = {
                "type": _FN_DONE,
                "item_id": _nullish(_prop(item, "id"), ""),
                "output_index": _nullish(_json_field(closing, "output_index"), 0),
                "arguments": tracker.accumulated,
            }
            if _prop(item, "type") == "function_call":
                name = _prop(item, "name")
                if name is not _ABSENT:
                    ev["name"] = name
            else:
                ev["name"] = ""
            out.append(ev)

    # -- discrete messages ----------------------------------------------------------------

    @staticmethod
    def _discrete(
        name: Any, transport: Mapping[str, Any], codec: Mapping[str, Any], data: Any
    ) -> list[dict[str, Any]]:
        kind = _nullish(codec.get("kind"), "")
        if type(kind) is not str:
            return []
        if name == NAME_INPUT:
            return _decode_input(kind, transport, codec, data)
        if name == NAME_OUTPUT:
            return _decode_output(kind, codec, data)
        return []


_ITEM_EVENTS: Final = frozenset(
    ("response.output_item.added", "response.output_item.done", "function_call_output")
)


def _decode_output(kind: str, codec: Mapping[str, Any], data: Any) -> list[dict[str, Any]]:
    if kind in _ITEM_EVENTS:
        if data is None or data is _ABSENT:
            # 0.8.0 reads ``data.item`` unguarded and throws here.
            raise _Malformed(f"'{kind}' without data")
        ev: dict[str, Any] = {}
        item = _prop(data, "item")
        if item is not _ABSENT:
            ev["item"] = item
        ev["type"] = kind
        return [ev]
    if kind == "tool-approval-request":
        return [
            {
                "call_id": _str_field(codec, "call_id", ""),
                "name": _str_field(codec, "name", ""),
                "arguments": data if type(data) is str else "",
                "type": kind,
            }
        ]
    return []


def _decode_input(
    kind: str, transport: Mapping[str, Any], codec: Mapping[str, Any], data: Any
) -> list[dict[str, Any]]:
    if kind == "user-message":
        part_type = _nullish(codec.get("partType"), "")
        if part_type != "input_text" or type(part_type) is not str:
            return []
        part = {"text": data if type(data) is str else "", "type": "input_text"}
        role = _nullish(transport.get("role"), "user")
        return [
            {
                "kind": kind,
                "message": {"role": role, "items": [{"type": "message", "role": "user", "content": [part]}]},
            }
        ]
    payload: dict[str, Any]
    if kind == "tool-result":
        payload = {"call_id": _str_field(codec, "call_id", "")}
        if _is_map(data):
            output = data.get("output", _ABSENT)
            if output is not _ABSENT:
                payload["output"] = output
        elif not isinstance(data, list):
            payload["output"] = ""
    elif kind == "tool-result-error":
        message = data.get("message") if _is_map(data) else None
        payload = {
            "call_id": _str_field(codec, "call_id", ""),
            "message": message if type(message) is str else "",
        }
    elif kind == "tool-approval-response":
        payload = {
            "call_id": _str_field(codec, "call_id", ""),
            "approved": _bool_field(codec, "approved", False),
        }
        reason = _str_field(codec, "reason")
        if reason is not _ABSENT:
            payload["reason"] = reason
    else:  # regenerate is wire-only; unknown kinds decode to nothing
        return []
    return [
        {"kind": kind, "codecMessageId": _nullish(transport.get("codec-message-id"), ""), "payload": payload}
    ]
