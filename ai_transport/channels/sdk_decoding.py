"""Tolerant decoding for the ``ably`` SDK: a message it cannot decode is kept undecoded.

ably-python raises on a message or presence member it cannot decode (``encoding: "vcdiff"`` with
no delta decoder, ``json`` over text that is not JSON, a non-string ``name`` or ``id``), which
another member of a channel can publish at will: live, every message of the frame holding it was
skipped; in history, the page and every page after it failed (no fresh ably-python worker could wake
up on the channel again); in presence, the SDK's transport handler dropped the SYNC holding it and
``presence.get()`` hung. :func:`tolerate_undecodable` makes a class's ``from_encoded`` keep such a
message as ably-js keeps one: its data as received, its ``encoding`` kept, a text field of another
type dropped; the session's trust rules then judge it as any other wire. A delta that fails against
its base (40018) still raises: the SDK recovers from that by re-attaching. The change is for the
process, made once per class by the modules that wrap the SDK (on import).
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["tolerate_sdk_decoding", "tolerate_undecodable"]

logger = logging.getLogger("ai_transport.channels.sdk_decoding")

#: The fields the SDK requires to be text when present (a message with another type fails to decode).
_TEXT_FIELDS = frozenset(("id", "name", "clientId", "connectionId"))

#: The SDK's delta decode failure, which its channel recovers from by re-attaching.
_DELTA_FAILURE = 40018


def tolerate_undecodable(cls: Any, kind: str) -> None:
    """Make ``cls.from_encoded`` (an SDK ``Message`` or ``PresenceMessage``) keep what it cannot
    decode (see the module docstring); ``kind`` names it in the log. Idempotent."""
    original = cls.from_encoded
    if getattr(original, "tolerant", False):
        return

    def from_encoded(obj: Any, cipher: Any = None, context: Any = None) -> Any:
        try:
            return original(obj, cipher, context)
        except Exception as exc:
            if getattr(exc, "code", None) == _DELTA_FAILURE or not isinstance(obj, dict):
                raise
            raw = {k: v for k, v in obj.items() if not (k in _TEXT_FIELDS and v is not None and not isinstance(v, str))}
            try:
                kept = original({**raw, "encoding": ""}, cipher, None)
            except Exception:
                raise exc from None
            encoding = raw.get("encoding")
            if isinstance(encoding, str) and encoding:
                kept.encoding = encoding
            logger.warning("%s %r from %r kept undecoded: %s", kind, raw.get("id"), raw.get("clientId"), exc)
            return kept

    from_encoded.tolerant = True  # type: ignore[attr-defined]
    cls.from_encoded = staticmethod(from_encoded)


def tolerate_sdk_decoding() -> None:
    """The SDK's ``Message`` and ``PresenceMessage`` keep what they cannot decode (idempotent)."""
    try:
        from ably.types.message import Message
        from ably.types.presence import PresenceMessage
    except ImportError:  # pragma: no cover - the SDK is a dependency
        return
    tolerate_undecodable(Message, "message")
    tolerate_undecodable(PresenceMessage, "presence message")
