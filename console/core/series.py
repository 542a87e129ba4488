"""Bounded time series: every buffer in the console has a fixed capacity."""

from __future__ import annotations

import math
from array import array
from typing import Iterator

_NAN = float("nan")


class _Ring:
    """What RingSeries and SeriesBlock share: a preallocated ring of timestamps and
    the slot the next sample takes (the oldest once the ring is full)."""

    __slots__ = ("_ts", "_start", "_size")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self._ts = array("d", bytes(8 * capacity))
        self._start = 0
        self._size = 0

    @property
    def capacity(self) -> int:
        return len(self._ts)

    def __len__(self) -> int:
        return self._size

    def _claim(self, ts: float) -> int:
        """Stamp the next slot with `ts` and return its index for the values."""
        cap = len(self._ts)
        if self._size < cap:
            i = (self._start + self._size) % cap
            self._size += 1
        else:
            i = self._start
            self._start = (self._start + 1) % cap
        self._ts[i] = ts
        return i


class RingSeries(_Ring):
    """(timestamp, value) pairs, oldest dropped first. None values are kept as gaps.

    Backed by two preallocated ``array('d')`` rings rather than deques of float
    objects: a 64-node CPX fleet holds ~25k series of 600 samples, and millions
    of boxed floats made every garbage-collection pass stall the UI for ~0.1 s.
    (The fleet keeps its history in SeriesBlocks, below: a third of the memory.)
    Gaps are stored as NaN.
    """

    __slots__ = ("_values",)

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._values = array("d", bytes(8 * capacity))

    def append(self, ts: float, value: float | None) -> None:
        self._values[self._claim(ts)] = _NAN if value is None else value

    def _ordered(self, ring: array, last: int | None = None) -> list[float]:
        """The ring's content oldest first; only the newest ``last`` when given."""
        return _ordered(ring, self._start, self._size, last)

    def __iter__(self) -> Iterator[tuple[float, float | None]]:
        return zip(self.times(), self.values())

    def values(self, last: int | None = None) -> list[float | None]:
        return _gaps_as_none(self._ordered(self._values, last))

    def times(self) -> list[float]:
        return self._ordered(self._ts)

    def latest(self) -> float | None:
        return _newest(self._values, self._start, self._size)

    def since(self, t0: float) -> list[tuple[float, float | None]]:
        return [(t, v) for t, v in self if t >= t0]


def _ordered(ring: array, start: int, size: int, last: int | None) -> list[float]:
    """A ring's content oldest first; only the newest ``last`` when given."""
    n = size if last is None else max(0, min(last, size))
    begin = start + size - n
    end = start + size
    cap = len(ring)
    if begin >= cap:
        return ring[begin - cap : end - cap].tolist()
    if end <= cap:
        return ring[begin:end].tolist()
    return ring[begin:].tolist() + ring[: end - cap].tolist()


def _gaps_as_none(values: list[float]) -> list[float | None]:
    return [None if math.isnan(v) else v for v in values]


def _newest(ring: array, start: int, size: int) -> float | None:
    """A ring's newest value (None: empty, or a gap)."""
    if not size:
        return None
    v = ring[(start + size - 1) % len(ring)]
    return None if math.isnan(v) else v


class SeriesBlock(_Ring):
    """Several series sampled together (the metrics of one logical GPU): one ring of
    timestamps shared by every column, values stored as float32.

    A 64-node CPX fleet keeps 4096 GPUs x 6 metrics x 601 samples: as separate
    RingSeries of doubles that is ~240 MB, here ~80 MB (one timestamp per sample
    instead of one per value; float32 holds 7 significant digits, more than the
    readings have: amdsmi reports these metrics as integers). Preallocated, so
    the memory of a full history is taken at the first sample, not after 10 min.
    Gaps are stored as NaN; ``column(i)`` reads like a RingSeries.
    """

    __slots__ = ("_cols",)

    def __init__(self, capacity: int, width: int) -> None:
        super().__init__(capacity)
        if width < 1:
            raise ValueError("width must be >= 1")
        self._cols = tuple(array("f", bytes(4 * capacity)) for _ in range(width))

    @property
    def width(self) -> int:
        return len(self._cols)

    def append(self, ts: float, values) -> None:
        """One sample of every column (``values`` in column order; None is a gap)."""
        i = self._claim(ts)
        for col, value in zip(self._cols, values):
            col[i] = _NAN if value is None else value

    def column(self, index: int) -> BlockSeries:
        return BlockSeries(self, index)

    def resized(self, capacity: int) -> SeriesBlock:
        """A block of another capacity holding the newest samples of this one."""
        block = SeriesBlock(capacity, len(self._cols))
        keep = min(self._size, capacity)
        times = _ordered(self._ts, self._start, self._size, keep)
        columns = [_ordered(col, self._start, self._size, keep) for col in self._cols]
        block._ts[:keep] = array("d", times)
        for mine, values in zip(block._cols, columns):
            mine[:keep] = array("f", values)
        block._size = keep
        return block

    @property
    def nbytes(self) -> int:
        return len(self._ts) * (8 + 4 * len(self._cols))


class BlockSeries:
    """One column of a SeriesBlock, read like a RingSeries (a view: it follows the block)."""

    __slots__ = ("_block", "_col")

    def __init__(self, block: SeriesBlock, index: int) -> None:
        self._block = block
        self._col = block._cols[index]

    @property
    def capacity(self) -> int:
        return self._block.capacity

    def __len__(self) -> int:
        return self._block._size

    def __iter__(self) -> Iterator[tuple[float, float | None]]:
        return zip(self.times(), self.values())

    def values(self, last: int | None = None) -> list[float | None]:
        b = self._block
        return _gaps_as_none(_ordered(self._col, b._start, b._size, last))

    def times(self) -> list[float]:
        b = self._block
        return _ordered(b._ts, b._start, b._size, None)

    def latest(self) -> float | None:
        return _newest(self._col, self._block._start, self._block._size)

    def since(self, t0: float) -> list[tuple[float, float | None]]:
        return [(t, v) for t, v in self if t >= t0]


def capacity_for(window_s: float, interval_s: float) -> int:
    """How many samples a window holds at an interval (at least 2)."""
    return max(2, int(window_s / max(interval_s, 0.05)) + 1)
