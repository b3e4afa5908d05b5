"""Columnar storage of a message's appends (the emulator store's per-append bookkeeping).

A stream appends thousands of small fragments to one message; each append is an event, a version
and a live delivery, but none of those is kept as an object. An :class:`AppendRun` holds the
appends between two other versions of a message (create / update / delete) as columns:

* the data: fragments gathered as parts, every :data:`JOIN_EVERY` of them joined into a chunk
  (the whole data is joined only when read, so appending never copies what came before) and, per
  append, the data's length after it;
* per append, its version serial and timestamp (a :class:`Column`: about one byte per value);
* the rest of an append (extras, name, encoding, version ``clientId``/``description``/``metadata``,
  whether it carried data) as an attribute tuple stored only where it differs from the previous
  append's, so a stream repeating its extras costs nothing per append.

The message dicts (the live delivery, the aggregate as of an append) are rebuilt on demand.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator
from typing import Any

from .protocol import MessageAction

__all__ = ["JOIN_EVERY", "SERIAL_WIDTH", "AppendRun", "Column", "fmt_serial"]

SERIAL_WIDTH = 20

#: Appended fragments held before they are joined into the run's data.
JOIN_EVERY = 256

_STEP = 64  # a Column keeps an absolute value every _STEP values
_ESC = 255  # a delta that does not fit a byte: kept in Column._big


def fmt_serial(n: int) -> str:
    """The serial string of counter value ``n`` (zero-padded: sorts like the integer)."""
    return f"{n:0{SERIAL_WIDTH}d}"


class Column:
    """A sequence of ints appended in small non-negative steps: one byte per value.

    Each value is stored as its delta from the previous one (a byte; larger or negative deltas
    in a side dict) with an absolute checkpoint every 64 values, so random access sums at most
    63 bytes.
    """

    __slots__ = ("_big", "_cp", "_d", "_last")

    def __init__(self) -> None:
        self._d = array("B")
        self._cp = array("q")
        self._big: dict[int, int] = {}
        self._last = 0

    def append(self, value: int) -> None:
        """Add ``value`` at the end."""
        n = len(self._d)
        if n % _STEP == 0:
            self._cp.append(value)
            self._d.append(0)
        else:
            delta = value - self._last
            if 0 <= delta < _ESC:
                self._d.append(delta)
            else:
                self._d.append(_ESC)
                self._big[n] = delta
        self._last = value

    def __len__(self) -> int:
        return len(self._d)

    @property
    def last(self) -> int:
        """The last value appended."""
        return self._last

    def __getitem__(self, i: int) -> int:
        n = len(self._d)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        base = i - i % _STEP
        value = self._cp[i // _STEP]
        if i > base:
            seg = self._d[base + 1 : i + 1]
            value += sum(seg)
            if seg.count(_ESC):
                d, big = self._d, self._big
                value += sum(big[j] - _ESC for j in range(base + 1, i + 1) if d[j] == _ESC)
        return value

    def iter_from(self, start: int) -> Iterator[int]:
        """The values from index ``start`` on."""
        if start >= len(self._d):
            return
        value = self[start]
        yield value
        d, big = self._d, self._big
        for j in range(start + 1, len(d)):
            if j % _STEP == 0:
                value = self._cp[j // _STEP]
            else:
                step = d[j]
                value += big[j] if step == _ESC else step
            yield value

    def memory(self) -> int:
        """Bytes held (arrays and side dict), for benchmarks."""
        return self._d.buffer_info()[1] + 8 * len(self._cp) + 100 * len(self._big)


# An append's attributes: (has data, its encoding, extras after it, name after it, version extras)
Attrs = tuple[bool, Any, Any, Any, Any]


class AppendRun:
    """The appends to one message after one of its other versions (``base``, never mutated)."""

    __slots__ = (
        "_agg",
        "_attr_at",
        "_attrs",
        "_chunks",
        "_parts",
        "base",
        "ends",
        "first_data",
        "first_enc",
        "serials",
        "stamps",
        "start",
    )

    def __init__(self, base: dict[str, Any]) -> None:
        self.base = base
        data = base.get("data")
        self._chunks: list[Any] = [data] if isinstance(data, (str, bytes)) else []
        self._parts: list[Any] = []
        #: the data's length before the first append
        self.start = len(data) if isinstance(data, (str, bytes)) else 0
        #: index of the first append that gave a data-less message its data (-1: none yet)
        self.first_data = -1 if data is None else 0
        self.first_enc: Any = None
        self.ends = Column()
        self.serials = Column()
        self.stamps = Column()
        self._attr_at = array("q")
        self._attrs: list[Attrs] = []
        self._agg: dict[str, Any] | None = None

    # -- writes ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.serials)

    def data_type(self) -> type | None:
        """The type of the message's data now (None when it has none)."""
        if self._chunks:
            return type(self._chunks[0])
        if self._parts:
            return type(self._parts[0])
        return type(self.base["data"]) if self.base.get("data") is not None else None

    def add(self, serial: int, ts: int, msg: dict[str, Any], vextra: dict[str, Any]) -> int:
        """Record an append (validated by the store); return its index."""
        i = len(self.serials)
        frag = msg.get("data")
        prev = self._attrs[-1] if self._attrs else None
        name = msg.get("name")
        if name is None:
            name = prev[3] if prev is not None else self.base.get("name")
        extras = msg.get("extras")
        if extras is not None and prev is not None and extras == prev[2]:
            extras = prev[2]
        enc = msg.get("encoding") or None if frag is not None else None
        if prev is not None and vextra == prev[4]:
            vextra = prev[4]
        attrs: Attrs = (frag is not None, enc, extras, name, vextra)
        if prev is None or attrs != prev:
            self._attr_at.append(i)
            self._attrs.append(attrs)
        length = self.ends.last if i else self.start
        if frag is not None:
            if self.first_data < 0:
                self.first_data = i
                self.first_enc = enc
            self._parts.append(frag)
            length += len(frag)
            if len(self._parts) >= JOIN_EVERY:
                self._chunks.append(self._joined(self._parts))
                self._parts = []
        self.ends.append(length)
        self.serials.append(serial)
        self.stamps.append(ts)
        self._agg = None
        return i

    @staticmethod
    def _joined(parts: list[Any]) -> Any:
        return b"".join(parts) if isinstance(parts[0], bytes) else "".join(parts)

    def data(self) -> Any:
        """The data after the last append (None if the message still has none)."""
        if len(self._chunks) + len(self._parts) > 1:
            self._chunks = [self._joined(self._chunks + self._parts)]
            self._parts = []
        elif self._parts:
            self._chunks, self._parts = self._parts, []
        return self._chunks[0] if self._chunks else None

    # -- reads -------------------------------------------------------------------------------

    def attrs(self, i: int) -> Attrs:
        """Append ``i``'s attributes."""
        return self._attrs[bisect_right(self._attr_at, i) - 1]

    def index_after(self, serial: str) -> int:
        """The first append whose serial sorts after ``serial``."""
        return bisect_right(self.serials, serial, key=fmt_serial)

    def version(self, i: int, attrs: Attrs) -> dict[str, Any]:
        """Append ``i``'s version record."""
        return {"serial": fmt_serial(self.serials[i]), "timestamp": self.stamps[i], **attrs[4]}

    def live(self, i: int, frag: Any = None) -> dict[str, Any]:
        """Append ``i`` as delivered to a receiver holding the message (``frag``: its data, if known)."""
        base = self.base
        attrs = self.attrs(i)
        live: dict[str, Any] = {"id": base.get("id")}
        if attrs[3] is not None:
            live["name"] = attrs[3]
        if attrs[0]:
            if frag is None:
                lo = self.ends[i - 1] if i else self.start
                frag = self.data()[lo : self.ends[i]]
            live["data"] = frag
            if attrs[1]:
                live["encoding"] = attrs[1]
        if attrs[2] is not None:
            live["extras"] = attrs[2]
        for key in ("clientId", "connectionId", "timestamp"):
            if base.get(key) is not None:
                live[key] = base[key]
        live["serial"] = base["serial"]
        live["action"] = int(MessageAction.APPEND)
        live["version"] = self.version(i, attrs)
        return live

    def aggregate(self, i: int) -> dict[str, Any]:
        """The message as of append ``i`` (built on demand; the latest one is cached)."""
        last = i == len(self.serials) - 1
        if last and self._agg is not None:
            return self._agg
        attrs = self.attrs(i)
        agg = dict(self.base)
        data = self.data() if 0 <= self.first_data <= i else None
        if data is not None:
            end = self.ends[i]
            agg["data"] = data if len(data) == end else data[:end]
            if self.base.get("data") is None and self.first_enc:
                agg["encoding"] = self.first_enc
        if attrs[2] is not None:
            agg["extras"] = attrs[2]
        else:
            agg.pop("extras", None)
        if attrs[3] is not None:
            agg["name"] = attrs[3]
        if agg.get("action") != MessageAction.DELETE:
            agg["action"] = int(MessageAction.UPDATE)
        agg["version"] = self.version(i, attrs)
        if last:
            self._agg = agg
        return agg
