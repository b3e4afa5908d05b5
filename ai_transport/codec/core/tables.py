"""Descriptor tables (``output-descriptors`` / ``input-descriptors`` of 0.8.0's ``core/codec``).

A table codec declares its wire once, as data: per output event type a discrete :class:`Event`, a
streamed :class:`Stream` group (start / delta / end) or a :class:`Drop`; per input kind an
:class:`InputEvent` or a multi-part :class:`Batch`. :func:`compile_output` / :func:`compile_input`
turn a table into dispatch dictionaries once, at import, so the drivers
(:mod:`.table_encoder`, :mod:`.table_decoder`) do one dictionary lookup per chunk.

Hatches (``encode`` / ``end_encode`` / ``end_decode`` / ``decode_discrete``) are plain callables for
what a pure descriptor cannot say; the data codecs take and return JSON-shaped values
(:data:`~ai_transport.codec.core.headers.MISSING` for JavaScript ``undefined``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .fields import Field

__all__ = [
    "Batch",
    "BatchPart",
    "CompiledInput",
    "CompiledOutput",
    "Drop",
    "Event",
    "InputEvent",
    "Stream",
    "compile_input",
    "compile_output",
    "part_for",
]

Chunk = dict[str, Any]


@dataclass(frozen=True)
class Event:
    """A discrete output event: ``type`` (a ``prefix-*`` literal is a wildcard) is the wire ``kind``."""

    type: str
    fields: tuple[Field, ...] = ()
    #: chunk -> wire ``data`` (absent: ``""``); MISSING means no ``data`` key.
    data_encode: Callable[[Chunk], Any] | None = None
    #: wire ``data`` -> the chunk properties it carries.
    data_decode: Callable[[Any], Chunk] | None = None
    ephemeral: Callable[[Chunk], bool] | None = None
    #: escape hatch: ``(core, chunk, ctx) -> operations`` instead of the default publish.
    encode: Callable[..., Any] | None = None

    @property
    def prefix(self) -> str | None:
        """The wildcard prefix (``"data-"`` of ``"data-*"``), else None."""
        return self.type[:-1] if self.type.endswith("-*") else None


@dataclass(frozen=True)
class Stream:
    """A streamed output group: ``kind`` on every phase, ``stream_id`` derived from the chunk."""

    kind: str
    stream_id_key: str
    fields: tuple[Field, ...]
    start_type: str
    delta_type: str
    delta_key: str
    end_type: str
    #: the start-header fields copied onto every rebuilt delta chunk.
    delta_fields: tuple[Field, ...] = ()
    end_encode: Callable[..., Any] | None = None
    end_decode: Callable[..., list[Chunk]] | None = None
    decode_discrete: Callable[[Mapping[str, Any], Any], list[Chunk]] | None = None


@dataclass(frozen=True)
class Drop:
    """An output type the codec keeps off the wire (published as nothing, no error)."""

    type: str


@dataclass(frozen=True)
class InputEvent:
    """A single-message input lensed onto its ``payload`` (``wire_only``: the kind header alone)."""

    kind: str
    fields: tuple[Field, ...] = ()
    data_encode: Callable[[Chunk], Any] | None = None
    data_decode: Callable[[Any], Chunk] | None = None
    wire_only: bool = False


@dataclass(frozen=True)
class BatchPart:
    """One part type of a :class:`Batch` (``part_type`` may be a ``prefix-*`` wildcard)."""

    part_type: str
    fields: tuple[Field, ...] = ()
    data_encode: Callable[[Chunk], Any] | None = None
    data_decode: Callable[[Any], Chunk] | None = None

    @property
    def prefix(self) -> str | None:
        """The wildcard prefix, else None."""
        return self.part_type[:-1] if self.part_type.endswith("-*") else None


@dataclass(frozen=True)
class Batch:
    """A multi-part input: one wire message per part, published as one batch."""

    kind: str
    explode: Callable[[Chunk], list[Chunk]]
    part_type_of: Callable[[Chunk], Any]
    parts: tuple[BatchPart, ...]
    #: input -> ``(codec headers, transport headers)`` stamped on every part.
    message_headers: Callable[[Chunk], tuple[dict[str, str], dict[str, Any]]]
    #: ``(part, codec headers, transport headers) -> the input's properties``.
    assemble: Callable[[Chunk, Mapping[str, Any], Mapping[str, Any]], Chunk]


def part_for(parts: tuple[BatchPart, ...], part_type: Any) -> BatchPart | None:
    """``partFor``: the exact part first, then the first wildcard whose prefix matches."""
    for part in parts:
        if part.prefix is None and part.part_type == part_type:
            return part
    if type(part_type) is str:
        for part in parts:
            if part.prefix is not None and part_type.startswith(part.prefix):
                return part
    return None


@dataclass
class CompiledOutput:
    """An output table as dispatch dictionaries (built once by :func:`compile_output`)."""

    #: chunk type -> ``("start" | "delta" | "end", Stream)``.
    phases: dict[str, tuple[str, Stream]] = field(default_factory=dict)
    discrete: dict[str, Event] = field(default_factory=dict)
    wildcards: list[Event] = field(default_factory=list)
    dropped: frozenset[str] = frozenset()
    #: wire kind -> Stream.
    streams: dict[str, Stream] = field(default_factory=dict)
    #: delta chunk type -> Stream (the per-delta path).
    deltas: dict[str, Stream] = field(default_factory=dict)

    def wildcard(self, kind: Any) -> Event | None:
        """The first wildcard event matching ``kind``."""
        if type(kind) is str:
            for event in self.wildcards:
                if kind.startswith(event.prefix or ""):
                    return event
        return None


def compile_output(table: list[Event | Stream | Drop]) -> CompiledOutput:
    """Validate ``table`` (every dispatch literal declared once) and index it."""
    out = CompiledOutput()
    seen: set[str] = set()
    dropped: set[str] = set()

    def reserve(literal: str) -> None:
        if literal in seen:
            raise ValueError(f"unable to define codec; dispatch literal {literal!r} is declared twice")
        seen.add(literal)

    for d in table:
        if isinstance(d, Stream):
            for phase, literal in (("start", d.start_type), ("delta", d.delta_type), ("end", d.end_type)):
                reserve(literal)
                out.phases[literal] = (phase, d)
            out.streams[d.kind] = d
            out.deltas[d.delta_type] = d
        elif isinstance(d, Drop):
            reserve(d.type)
            dropped.add(d.type)
        elif d.prefix is not None:
            out.wildcards.append(d)
        else:
            reserve(d.type)
            out.discrete[d.type] = d
    out.dropped = frozenset(dropped)
    return out


@dataclass
class CompiledInput:
    """An input table indexed by kind (built once by :func:`compile_input`)."""

    by_kind: dict[str, InputEvent | Batch] = field(default_factory=dict)


def compile_input(table: list[InputEvent | Batch]) -> CompiledInput:
    """Validate ``table`` (every kind declared once) and index it."""
    out = CompiledInput()
    for d in table:
        if d.kind in out.by_kind:
            raise ValueError(f"unable to define codec; input kind {d.kind!r} is declared twice")
        out.by_kind[d.kind] = d
    return out
