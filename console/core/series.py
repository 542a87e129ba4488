"""Bounded time series: every buffer in the console has a fixed capacity."""

from __future__ import annotations

import functools
import math
import struct
from array import array
from typing import Callable, Iterator, Sequence

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
    """Several series sampled together: one ring of timestamps shared by every column,
    values stored as float32. Gaps are stored as NaN; ``column(i)`` reads like a RingSeries.
    (The fleet keeps a NodeHistory per node, below: one block for all of a node's GPUs.)
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
        col = self._cols[index]
        return BlockSeries(self, lambda start, size, last: _ordered(col, start, size, last))

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
    """One column of a SeriesBlock or a NodeHistory, read like a RingSeries (a view: it
    follows the ring it was taken from). ``read(start, size, last)`` gives the column's
    values oldest first, as floats with NaN gaps."""

    __slots__ = ("_ring", "_read")

    def __init__(self, ring: _Ring, read: Callable[[int, int, int | None], list[float]]) -> None:
        self._ring = ring
        self._read = read

    @property
    def capacity(self) -> int:
        return self._ring.capacity

    def __len__(self) -> int:
        return self._ring._size

    def __iter__(self) -> Iterator[tuple[float, float | None]]:
        return zip(self.times(), self.values())

    def values(self, last: int | None = None) -> list[float | None]:
        r = self._ring
        return _gaps_as_none(self._read(r._start, r._size, last))

    def times(self) -> list[float]:
        r = self._ring
        return _ordered(r._ts, r._start, r._size, None)

    def latest(self) -> float | None:
        r = self._ring
        if not r._size:
            return None
        v = self._read(r._start, r._size, 1)[0]
        return None if math.isnan(v) else v

    def since(self, t0: float) -> list[tuple[float, float | None]]:
        return [(t, v) for t, v in self if t >= t0]


@functools.lru_cache(maxsize=64)
def _row_struct(width: int) -> struct.Struct:
    return struct.Struct(f"={width}e")


class NodeHistory(_Ring):
    """The history of every logical GPU of one node: one timestamp ring and one block of
    half-precision values, ``capacity`` rows of ``gpus x metrics`` (time-major).

    One object and two arrays per node, whatever its GPU count: a 1,024-node CPX fleet
    (65,536 logical GPUs x 6 metrics) keeps 5 minutes at 1 Hz in ~230 MB, with ~2,000
    arrays for the garbage collector to look at instead of ~400,000 (a SeriesBlock of
    float32 columns per GPU took 24 bytes a GPU-sample and ~7 objects a GPU). Half
    precision keeps 3 significant digits, more than a chart shows; ``scales`` divides
    a metric before it is stored (VRAM in MiB goes past the format's 65,504) and
    multiplies it back when read. Gaps (None, a GPU missing from a frame) are NaN.
    """

    __slots__ = ("_vals", "_order", "_slots", "_metrics", "_scales", "_row")

    def __init__(self, capacity: int, gpus: Sequence[int], scales: Sequence[float]) -> None:
        super().__init__(capacity)
        if not scales:
            raise ValueError("at least one metric")
        self._order = tuple(gpus)
        self._slots = {gpu: i for i, gpu in enumerate(self._order)}
        self._metrics = len(scales)
        self._scales = tuple(float(s) for s in scales)
        self._row = len(self._order) * self._metrics
        # uint16 holds the raw half floats: struct packs and unpacks them at C speed.
        self._vals = array("H", _nan_row(self._row) * capacity)

    @property
    def gpus(self) -> tuple[int, ...]:
        return self._order

    def times(self) -> list[float]:
        return _ordered(self._ts, self._start, self._size, None)

    def values(self, gpu: int, metric: int) -> list[float | None]:
        """One GPU's metric, oldest first (KeyError: no such GPU)."""
        offset = self._slots[gpu] * self._metrics + metric
        return _gaps_as_none(self._read(offset, self._start, self._size, None))

    def covers(self, gpus: Sequence[int]) -> bool:
        slots = self._slots
        return all(g in slots for g in gpus)

    def append(self, ts: float, gpus: Sequence[int], values: list[float | None]) -> None:
        """One sample of some of the node's GPUs: ``values`` is their metrics, GPU after GPU in
        the order of ``gpus`` (every GPU must be covered; the others get a gap)."""
        m = self._metrics
        for k, scale in enumerate(self._scales):
            if scale != 1.0:
                values[k::m] = [None if v is None else v / scale for v in values[k::m]]
        row = self._row
        if tuple(gpus) != self._order:  # a GPU missing, or another order: place each GPU's values
            placed: list[float | None] = [None] * row
            slots = self._slots
            for n, gpu in enumerate(gpus):
                s = slots[gpu] * m
                placed[s : s + m] = values[n * m : n * m + m]
            values = placed
        i = self._claim(ts)
        if not row:
            return
        pack = _row_struct(row).pack_into
        try:
            pack(self._vals, 2 * i * row, *values)
        except (TypeError, OverflowError, struct.error):  # a gap, or a value past the format
            pack(self._vals, 2 * i * row, *[_half(v) for v in values])

    def column(self, gpu: int, metric: int) -> BlockSeries | None:
        slot = self._slots.get(gpu)
        if slot is None or not 0 <= metric < self._metrics:
            return None
        return BlockSeries(self, functools.partial(self._read, slot * self._metrics + metric))

    def _read(self, offset: int, start: int, size: int, last: int | None) -> list[float]:
        n = size if last is None else max(0, min(last, size))
        cap = len(self._ts)
        begin = (start + size - n) % cap if n else 0
        row, vals = self._row, self._vals
        if begin + n <= cap:
            raw = vals[begin * row + offset : (begin + n) * row : row]
        else:
            raw = vals[begin * row + offset :: row] + vals[offset : (begin + n - cap) * row : row]
        out = list(struct.unpack(f"={len(raw)}e", raw.tobytes()))
        scale = self._scales[offset % self._metrics]
        return [v * scale for v in out] if scale != 1.0 else out

    def relayout(self, gpus: Sequence[int], capacity: int | None = None) -> NodeHistory:
        """A history of these GPUs (and this capacity) with the newest samples of this one:
        the GPUs both have keep their values, new ones start with gaps."""
        other = NodeHistory(capacity or self.capacity, gpus, self._scales)
        keep = min(self._size, other.capacity)
        if not keep:
            return other
        other._ts[:keep] = array("d", _ordered(self._ts, self._start, self._size, keep))
        other._size = keep
        m = self._metrics
        for gpu, slot in other._slots.items():
            mine = self._slots.get(gpu)
            if mine is None:
                continue
            for k in range(m):
                raw = self._raw(mine * m + k, keep)
                other._vals[slot * m + k : keep * other._row : other._row] = raw
        return other

    def _raw(self, offset: int, last: int) -> array:
        """The newest ``last`` stored values of one column, oldest first, as raw halves."""
        n = min(last, self._size)
        cap = len(self._ts)
        begin = (self._start + self._size - n) % cap
        row, vals = self._row, self._vals
        if begin + n <= cap:
            return vals[begin * row + offset : (begin + n) * row : row]
        return vals[begin * row + offset :: row] + vals[offset : (begin + n - cap) * row : row]

    @property
    def nbytes(self) -> int:
        return len(self._ts) * 8 + len(self._vals) * 2


def _half(value: float | None) -> float:
    if value is None:
        return _NAN
    try:
        struct.pack("=e", value)
    except (OverflowError, struct.error):
        return math.copysign(65504.0, value)  # past the format: its largest value
    return value


@functools.lru_cache(maxsize=64)
def _nan_row(width: int) -> bytes:
    """A row of gaps, as stored."""
    return struct.pack(f"={width}e", *([_NAN] * width))


def capacity_for(window_s: float, interval_s: float) -> int:
    """How many samples a window holds at an interval (at least 2)."""
    return max(2, int(window_s / max(interval_s, 0.05)) + 1)
