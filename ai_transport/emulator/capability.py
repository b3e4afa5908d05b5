"""Ably capabilities: parsing, validation, matching and the key/token intersection.

A capability is Ably's JSON map ``{"<channel or pattern>": ["publish", "subscribe", …]}``.
Resource patterns: ``"*"`` (every channel), ``"prefix:*"`` (every channel starting with
``prefix:``), ``"[*]*"`` (every channel, qualified ones included), or an exact name. The
operation ``"*"`` stands for every operation and must be alone in its list.

A token's capability is the **intersection** of what its request asked for with what its key
grants (an empty intersection is refused with 40160, as Ably does); a request without a
capability gets the key's.
"""

from __future__ import annotations

import json
from typing import Any

from .protocol import EmulatorError, loads_json

__all__ = [
    "ALL",
    "OPERATIONS",
    "capability_allows",
    "dumps_capability",
    "intersect",
    "parse_capability",
    "resource_matches",
]

#: The capability that grants everything (a key without a configured capability).
ALL: dict[str, list[str]] = {"*": ["*"]}

#: Every operation name Ably accepts in a capability.
OPERATIONS = frozenset(
    {
        "publish",
        "subscribe",
        "presence",
        "history",
        "stats",
        "channel-metadata",
        "push-subscribe",
        "push-admin",
        "privileged-headers",
        "object-subscribe",
        "object-publish",
        "annotation-publish",
        "annotation-subscribe",
        "message-update-own",
        "message-update-any",
        "message-delete-own",
        "message-delete-any",
    }
)


def resource_matches(pattern: str, channel: str) -> bool:
    """Whether the capability resource ``pattern`` covers the channel (or pattern) ``channel``."""
    if pattern in ("*", "[*]*") or pattern == channel:
        return True
    return pattern.endswith("*") and not pattern.startswith("[") and channel.startswith(pattern[:-1])


def capability_allows(capability: dict[str, list[str]] | None, channel: str, operation: str) -> bool:
    """Whether ``capability`` (None = all) grants ``operation`` on ``channel``."""
    if capability is None:
        return True
    for resource, ops in capability.items():
        if resource_matches(resource, channel) and ("*" in ops or operation in ops):
            return True
    return False


def parse_capability(value: Any) -> dict[str, list[str]] | None:
    """A validated capability from its JSON text or map form; None (= all) when absent.

    Raises 40000 (HTTP 400) for invalid JSON, a non-map, an empty or unknown operation list,
    or ``"*"`` mixed with other operations.
    """
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = loads_json(value)
        except ValueError:  # (nested too deeply too)
            raise EmulatorError("capability is not valid JSON", 40000, 400) from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(o, str) for o in v)
        for k, v in value.items()
    ):
        raise EmulatorError("capability must map channel names to lists of operations", 40000, 400)
    for resource, ops in value.items():
        if not ops:
            raise EmulatorError(f"capability[{resource!r}] has no operations", 40000, 400)
        if "*" in ops and len(ops) > 1:
            raise EmulatorError(f"capability[{resource!r}]: '*' must be the only operation", 40000, 400)
        unknown = [o for o in ops if o != "*" and o not in OPERATIONS]
        if unknown:
            raise EmulatorError(f"capability[{resource!r}]: unknown operation {unknown[0]!r}", 40000, 400)
    return value


def dumps_capability(capability: dict[str, list[str]] | None) -> str:
    """The JSON text of a capability (None = :data:`ALL`)."""
    return json.dumps(capability if capability is not None else ALL, separators=(",", ":"))


def _ops_intersection(asked: list[str], granted: list[str]) -> list[str]:
    if "*" in granted:
        return sorted(asked)
    if "*" in asked:
        return sorted(granted)
    return sorted(set(asked) & set(granted))


def intersect(
    requested: dict[str, list[str]] | None, granted: dict[str, list[str]] | None
) -> dict[str, list[str]] | None:
    """The capability a token gets: ``requested`` ∩ ``granted`` (None = all on either side).

    Raises 40160 (HTTP 401) when nothing is left.
    """
    if requested is None:
        return granted
    if granted is None:
        return requested
    out: dict[str, set[str]] = {}
    for res_r, ops_r in requested.items():
        for res_k, ops_k in granted.items():
            if resource_matches(res_k, res_r):
                resource = res_r
            elif resource_matches(res_r, res_k):
                resource = res_k
            else:
                continue
            ops = _ops_intersection(ops_r, ops_k)
            if ops:
                out.setdefault(resource, set()).update(ops)
    if not out:
        raise EmulatorError(
            "Unable to grant the requested capability: its intersection with the key's is empty", 40160, 401
        )
    return {res: ["*"] if "*" in ops else sorted(ops) for res, ops in out.items()}
