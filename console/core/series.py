"""Bounded time series: every buffer in the console has a fixed capacity."""

from __future__ import annotations

from collections import deque
from typing import Iterator


class RingSeries:
    """(timestamp, value) pairs, oldest dropped first. None values are kept as gaps."""

    __slots__ = ("_ts", "_values")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self._ts: deque[float] = deque(maxlen=capacity)
        self._values: deque[float | None] = deque(maxlen=capacity)

    @property
    def capacity(self) -> int:
        return self._ts.maxlen or 0

    def append(self, ts: float, value: float | None) -> None:
        self._ts.append(ts)
        self._values.append(value)

    def __len__(self) -> int:
        return len(self._ts)

    def __iter__(self) -> Iterator[tuple[float, float | None]]:
        return zip(self._ts, self._values)

    def values(self, last: int | None = None) -> list[float | None]:
        if last is None or last >= len(self._values):
            return list(self._values)
        return list(self._values)[-last:]

    def times(self) -> list[float]:
        return list(self._ts)

    def latest(self) -> float | None:
        return self._values[-1] if self._values else None

    def since(self, t0: float) -> list[tuple[float, float | None]]:
        return [(t, v) for t, v in zip(self._ts, self._values) if t >= t0]


def capacity_for(window_s: float, interval_s: float) -> int:
    """How many samples a window holds at an interval (at least 2)."""
    return max(2, int(window_s / max(interval_s, 0.05)) + 1)
