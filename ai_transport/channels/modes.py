"""Channel modes and SDK registration a session asks for when it attaches (``resolveChannelModes`` /
``OBJECT_MODES`` / ``registerAgent`` of 0.8.0).

* :func:`resolve_channel_modes`: with extra modes requested (``channel_modes=`` of a session), the
  ATTACH asks for the transport's base modes (:data:`AIT_BASE_MODES`) plus those, in Ably's order;
  without, it asks for none (the server's default).
* :func:`channel_agent`: the ``agent`` channel param identifying this library and the codec
  (``ai-transport-python/<version> openai-responses/<version>``; 0.8.0 sends
  ``ai-transport-js/0.8.0 ...``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ..errors import InvalidArgumentError

__all__ = [
    "AIT_BASE_MODES",
    "MODE_FLAGS",
    "MODE_ORDER",
    "OBJECT_MODES",
    "channel_agent",
    "resolve_channel_modes",
    "validate_channel_modes",
]

#: The modes every session needs (publish, subscribe, presence, annotations).
AIT_BASE_MODES: Final = ("PUBLISH", "SUBSCRIBE", "PRESENCE", "PRESENCE_SUBSCRIBE", "ANNOTATION_PUBLISH")
#: The LiveObjects modes (``OBJECT_MODES`` of 0.8.0).
OBJECT_MODES: Final = ("OBJECT_SUBSCRIBE", "OBJECT_PUBLISH")
#: Ably's order of the modes.
MODE_ORDER: Final = (
    "PUBLISH",
    "SUBSCRIBE",
    "PRESENCE",
    "PRESENCE_SUBSCRIBE",
    "OBJECT_PUBLISH",
    "OBJECT_SUBSCRIBE",
    "ANNOTATION_PUBLISH",
    "ANNOTATION_SUBSCRIBE",
)
#: The ATTACH flag bit of each mode (Ably protocol).
MODE_FLAGS: Final = {
    "PRESENCE": 1 << 16,
    "PUBLISH": 1 << 17,
    "SUBSCRIBE": 1 << 18,
    "PRESENCE_SUBSCRIBE": 1 << 19,
    "ANNOTATION_PUBLISH": 1 << 21,
    "ANNOTATION_SUBSCRIBE": 1 << 22,
    "OBJECT_SUBSCRIBE": 1 << 24,
    "OBJECT_PUBLISH": 1 << 25,
}


def validate_channel_modes(modes: object) -> tuple[str, ...] | None:
    """``channel_modes`` as a tuple, or a 40003 naming the bad entry (None: none requested)."""
    if modes is None:
        return None
    if isinstance(modes, (str, bytes)) or not isinstance(modes, Iterable):
        raise InvalidArgumentError("unable to create session; channel_modes must be a list of mode names")
    out = tuple(modes)
    for i, mode in enumerate(out):
        if mode not in MODE_FLAGS:
            raise InvalidArgumentError(
                f"unable to create session; channel_modes[{i}] must be one of {', '.join(MODE_ORDER)}, got {mode!r}"
            )
    return out


def resolve_channel_modes(extra: Iterable[str] | None) -> list[str] | None:
    """The modes to request: None without extra modes, else :data:`AIT_BASE_MODES` plus ``extra``
    in :data:`MODE_ORDER` (unknown names last, sorted)."""
    extra = list(extra or ())
    if not extra:
        return None
    requested = {*AIT_BASE_MODES, *extra}
    return [m for m in MODE_ORDER if m in requested] + sorted(m for m in requested if m not in MODE_ORDER)


def channel_agent(adapter_tag: str | None, version: str) -> str:
    """The ``agent`` channel param: ``ai-transport-python/<version>`` and the codec's tag."""
    agents = [f"ai-transport-python/{version}"]
    if adapter_tag:
        agents.append(f"{adapter_tag}/{version}")
    return " ".join(agents)
