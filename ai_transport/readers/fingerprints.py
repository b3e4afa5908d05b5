"""Replay fingerprints: tie replayed reasoning to what produced it.

A :class:`ReplayFingerprint` (recorded with :func:`replay_fingerprint`) holds the model, digests
of the tools and instructions, and a digest of the input prefix a request's reasoning was produced
after; :func:`~ai_transport.readers.hygiene.sanitize_input` replays reasoning only while all of it
still holds. Pure functions; :func:`normalize_tools` gives ``None`` and ``[]`` the same meaning.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError, InvalidTypeError, type_name

__all__ = ["ReplayFingerprint", "normalize_tools", "replay_fingerprint"]


def normalize_tools(tools: Sequence[Any] | None) -> list[Any] | None:
    """``tools`` as the request should carry it: ``None`` (omit the field) when there are none.

    ``None`` and ``[]`` both mean "no tools" and both become ``None``; anything else is returned as
    a list. Fingerprints apply the same rule on both sides, so the two never differ.
    """
    if tools is None:
        return None
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        raise InvalidTypeError(f"tools must be an array or None, got {type_name(tools)}")
    listed = list(tools)
    return listed or None


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()


class _PrefixHasher:
    """Digest of ``items[:n]`` for growing ``n`` (each item hashed once)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self._digests = [self._hash.hexdigest()]

    def digest(self, items: Sequence[Any], n: int) -> str | None:
        if n > len(items) or n < 0:
            return None
        while len(self._digests) <= n:
            item = items[len(self._digests) - 1]
            self._hash.update(_canonical(item))
            self._hash.update(b"\n")
            self._digests.append(self._hash.hexdigest())
        return self._digests[n]


def _prefix_digest(items: Sequence[Any]) -> str:
    hasher = _PrefixHasher()
    digest = hasher.digest(items, len(items))
    assert digest is not None
    return digest


@dataclass(frozen=True)
class ReplayFingerprint:
    """What a turn's reasoning was produced from; replayed only when all of it still holds.

    Recorded when the turn is produced (:func:`replay_fingerprint` over the request's model, tools,
    instructions and the covered input prefix) and checked at replay by :func:`sanitize_input`
    (``fingerprints={rs_id: fp}``): the model must be the same, the tools and instructions digests
    the same, and the replayed input's first ``prefix_length`` items must hash to ``prefix``.

    Attributes:
        model: the model that produced the reasoning (as requested, e.g. ``"gpt-5.2"``).
        tools: sha256 of the canonical JSON of the tools, ``None`` when there were none (``[]`` too).
        instructions: sha256 of the canonical JSON of the instructions, ``None`` when absent or empty.
        prefix_length: how many input items the request's covered region held.
        prefix: sha256 chain digest of those items (canonical JSON, sorted keys).
    """

    model: str
    tools: str | None
    instructions: str | None
    prefix_length: int
    prefix: str

    def to_dict(self) -> dict[str, Any]:
        """JSON shape ``{model, tools, instructions, prefixLength, prefix}`` for storage."""
        return {
            "model": self.model,
            "tools": self.tools,
            "instructions": self.instructions,
            "prefixLength": self.prefix_length,
            "prefix": self.prefix,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplayFingerprint:
        """Read :meth:`to_dict`'s shape back (raises ``InvalidTypeError`` naming a bad field)."""
        if not isinstance(d, Mapping):
            raise InvalidTypeError(f"fingerprint must be an object, got {type_name(d)}")
        model, length, prefix = d.get("model"), d.get("prefixLength"), d.get("prefix")
        if not isinstance(model, str):
            raise InvalidTypeError(f"fingerprint.model must be a string, got {type_name(model)}")
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise InvalidTypeError(f"fingerprint.prefixLength must be a non-negative integer, got {length!r}")
        if not isinstance(prefix, str):
            raise InvalidTypeError(f"fingerprint.prefix must be a string, got {type_name(prefix)}")
        for key in ("tools", "instructions"):
            if d.get(key) is not None and not isinstance(d.get(key), str):
                raise InvalidTypeError(f"fingerprint.{key} must be a string or null, got {type_name(d.get(key))}")
        return cls(model, d.get("tools"), d.get("instructions"), length, prefix)

    def for_reasoning(self, output: Iterable[Mapping[str, Any]]) -> dict[str, ReplayFingerprint]:
        """``{rs_id: self}`` for every reasoning item in a response's ``output`` (what to record)."""
        return {
            item["id"]: self
            for item in output
            if isinstance(item, Mapping) and item.get("type") == "reasoning" and isinstance(item.get("id"), str)
        }

    def same_context(self, *, model: str, tools: Sequence[Any] | None, instructions: Any) -> bool:
        """Whether model, tools and instructions match (the prefix is checked separately)."""
        return (
            self.model == model
            and self.tools == _tools_digest(tools)
            and self.instructions == _instructions_digest(instructions)
        )

    def matches(
        self, *, model: str, tools: Sequence[Any] | None, instructions: Any, input: Sequence[Any]
    ) -> bool:
        """Whether a replay with this context, whose input starts with ``input``, may replay it."""
        if not self.same_context(model=model, tools=tools, instructions=instructions):
            return False
        if self.prefix_length > len(input):
            return False
        return _prefix_digest(list(input[: self.prefix_length])) == self.prefix


def _tools_digest(tools: Sequence[Any] | None) -> str | None:
    normal = normalize_tools(tools)
    return None if normal is None else _digest(normal)


def _instructions_digest(instructions: Any) -> str | None:
    if instructions is None or instructions == "" or instructions == []:
        return None
    return _digest(instructions)


def replay_fingerprint(
    *,
    model: str,
    tools: Sequence[Any] | None = None,
    instructions: Any = None,
    prefix: Sequence[Mapping[str, Any]] = (),
) -> ReplayFingerprint:
    """The fingerprint to record for the reasoning a request produces.

    ``prefix`` is the request's input *covered region*: ``result.input[:result.covered_length]`` of
    the :func:`sanitize_input` / :func:`sweep_reasoning` call that built it (a trailing context
    block is outside it, so live state does not invalidate replay). ``tools=None`` and ``tools=[]``
    give the same fingerprint.
    """
    if not isinstance(model, str) or not model:
        raise InvalidArgumentError(f"model must be a non-empty string, got {model!r}")
    items = list(prefix)
    return ReplayFingerprint(
        model=model,
        tools=_tools_digest(tools),
        instructions=_instructions_digest(instructions),
        prefix_length=len(items),
        prefix=_prefix_digest(items),
    )
