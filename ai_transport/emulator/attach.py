"""What an ATTACH asks for, checked as Ably checks it: channel names, modes, channel params.

Pure functions (no I/O, no state):

* :func:`check_channel_name`: 40010 for an empty name, a newline, a name starting with ``:``
  (empty namespace) or a ``[qualifier]`` unclosed or with no name after it; Ably fails that
  channel only, not the connection.
* :func:`requested_modes`: the mode bits asked for, from ``params.modes`` (comma-separated
  names, which win, as in Ably) or the ATTACH ``flags``; :data:`~.protocol.DEFAULT_MODES` when
  neither asks.
* :func:`granted_modes`: the mode bits a principal's capability allows on a channel (ATTACHED
  grants ``requested & granted``, recomputed when the connection re-authorises).
* :func:`echoed_params`: the channel params ATTACHED echoes (``modes``, ``delta``, ``rewind``,
  ``occupancy``); others (e.g. ``agent``) are accepted and not echoed.
"""

from __future__ import annotations

from typing import Any

from .._channel_names import INVALID_CHANNEL_NAME, channel_name_problem
from .auth import Principal
from .protocol import DEFAULT_MODES, MODE_MASK, EmulatorError, Flag

__all__ = [
    "ECHOED_PARAMS",
    "MODE_NAMES",
    "check_channel_name",
    "echoed_params",
    "granted_modes",
    "requested_modes",
]

#: Channel mode names (``params.modes`` / ably-js ``modes``) and their flag bits.
MODE_NAMES: dict[str, int] = {
    "presence": int(Flag.PRESENCE),
    "publish": int(Flag.PUBLISH),
    "subscribe": int(Flag.SUBSCRIBE),
    "presence_subscribe": int(Flag.PRESENCE_SUBSCRIBE),
    "annotation_publish": int(Flag.ANNOTATION_PUBLISH),
    "annotation_subscribe": int(Flag.ANNOTATION_SUBSCRIBE),
}

#: Channel params ATTACHED echoes back when the ATTACH carried them.
ECHOED_PARAMS = ("modes", "delta", "rewind", "occupancy")


def check_channel_name(name: Any) -> str:
    """Return ``name`` if Ably accepts it as a channel name; raise 40010 otherwise (the rule is
    :func:`ai_transport._channel_names.channel_name_problem`, shared with the in-process channel)."""
    problem = channel_name_problem(name)
    if problem is not None:
        raise EmulatorError(problem, INVALID_CHANNEL_NAME, 400)
    return str(name)


def requested_modes(flags: Any, params: dict[str, Any]) -> int:
    """The mode bits an ATTACH asks for (``params.modes`` first, then ``flags``, else the default)."""
    modes_param = params.get("modes")
    if modes_param not in (None, ""):
        if not isinstance(modes_param, str):
            raise EmulatorError("params.modes must be a comma-separated string", 40000, 400)
        bits = 0
        for name in modes_param.split(","):
            bit = MODE_NAMES.get(name.strip().lower())
            if bit is None:
                raise EmulatorError(f"params.modes: unknown channel mode {name.strip()!r}", 40000, 400)
            bits |= bit
        return bits
    mode_bits = flags & MODE_MASK if isinstance(flags, int) and not isinstance(flags, bool) else 0
    return mode_bits or int(DEFAULT_MODES)


def echoed_params(params: dict[str, Any]) -> dict[str, str]:
    """The params ATTACHED echoes: every :data:`ECHOED_PARAMS` entry the ATTACH carried."""
    return {k: str(params[k]) for k in ECHOED_PARAMS if params.get(k) not in (None, "")}


def granted_modes(principal: Principal, channel: str) -> int:
    """The mode bits ``principal``'s capability allows on ``channel``."""
    granted = 0
    if principal.allows(channel, "publish"):
        granted |= Flag.PUBLISH
    if principal.allows(channel, "subscribe"):
        granted |= Flag.SUBSCRIBE
    if principal.allows(channel, "presence"):
        granted |= Flag.PRESENCE
    if principal.allows(channel, "subscribe") or principal.allows(channel, "presence"):
        granted |= Flag.PRESENCE_SUBSCRIBE
    if principal.allows(channel, "annotation-publish"):
        granted |= Flag.ANNOTATION_PUBLISH
    if principal.allows(channel, "annotation-subscribe") or principal.allows(channel, "subscribe"):
        granted |= Flag.ANNOTATION_SUBSCRIBE
    return int(granted)
