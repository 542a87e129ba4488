"""How the fleet table orders its GPUs: a column, a direction, per node or across the fleet.

Pure (no Textual). A physical GPU and its partitions sort as one group, by the group's
aggregate (mean utilization, summed VRAM used or free, the highest temperature, power and clock), so
CPX partitions stay under their physical GPU whatever the order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence, TypeVar

from console.core.model import GpuMetrics

# Sort key -> (the table column it orders, its title in words).
SORT_COLUMNS: dict[str, tuple[str, str]] = {
    "name": ("gpu", "name"),
    "util": ("util", "UTIL"),
    "vram": ("vram", "VRAM"),
    "free": ("vram", "free VRAM"),
    "power": ("power", "POWER"),
    "temp": ("tj", "TJ"),
    "clock": ("gfx", "GFX"),
}

UP, DOWN = "▲", "▼"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _values(members: Sequence[GpuMetrics | None], field: str) -> list[float]:
    out = []
    for m in members:
        value = getattr(m, field) if m is not None else None
        if value is not None:
            out.append(float(value))
    return out


def _free_vram(members: Sequence[GpuMetrics | None]) -> float | None:
    """MiB free on the physical GPU: the free VRAM of its partitions that report used and total."""
    free = [
        m.vram_total_mib - m.vram_used_mib
        for m in members
        if m is not None and m.vram_total_mib is not None and m.vram_used_mib is not None
    ]
    return sum(free) if free else None


# Sort key -> the aggregate of a physical GPU's logical GPUs (None: nothing reported).
# Device-wide values (power, temperature, clock) are reported by the first partition only:
# the highest reported value is the physical GPU's; VRAM is per partition, so it adds up.
_AGGREGATE: dict[str, Callable[[Sequence[GpuMetrics | None]], float | None]] = {
    "util": lambda ms: _mean(_values(ms, "util_pct")),
    "vram": lambda ms: sum(_values(ms, "vram_used_mib")) if _values(ms, "vram_used_mib") else None,
    "free": lambda ms: _free_vram(ms),
    "power": lambda ms: max(_values(ms, "power_w"), default=None),
    "temp": lambda ms: max(_values(ms, "temp_junction_c"), default=None),
    "clock": lambda ms: max(_values(ms, "gfx_clock_mhz"), default=None),
}


@dataclass(frozen=True, slots=True)
class SortOrder:
    """The table's order. The default (by name, per node) is the profile's node order and GPU index."""

    key: str = "name"
    descending: bool = False
    fleet: bool = False  # across the fleet: node headers hidden, groups of every node in one order

    @property
    def is_default(self) -> bool:
        return self.key == "name" and not self.descending and not self.fleet

    @property
    def column(self) -> str:
        return SORT_COLUMNS[self.key][0]

    @property
    def arrow(self) -> str:
        return DOWN if self.descending else UP

    def pressed(self, key: str) -> SortOrder:
        """The key of a column pressed: the same column reverses; another one starts with the
        largest first (the name, with A first), so one key press finds the hottest GPU."""
        if key not in SORT_COLUMNS:
            raise ValueError(f"unknown sort column {key!r} (one of {', '.join(SORT_COLUMNS)})")
        if key == self.key:
            return replace(self, descending=not self.descending)
        return replace(self, key=key, descending=key != "name")

    def toggled_scope(self) -> SortOrder:
        return replace(self, fleet=not self.fleet)

    def describe(self) -> str:
        """'sort TJ ▼ per node', 'sort UTIL ▲ across the fleet, no node headers' (the status line)."""
        if self.is_default:
            return ""
        what = "name" if self.key == "name" else SORT_COLUMNS[self.key][1]
        scope = "across the fleet, no node headers" if self.fleet else "per node"
        return f"sort {what} {self.arrow} {scope}"

    def group_value(self, members: Sequence[GpuMetrics | None]) -> float | None:
        aggregate = _AGGREGATE.get(self.key)
        return aggregate(members) if aggregate is not None else None


DEFAULT_ORDER = SortOrder()


T = TypeVar("T")


def ordered(items: list[T], value: Callable[[T], float | None], descending: bool) -> list[T]:
    """`items` by `value`, ties in their given order; items without a value last, either way."""
    keyed = [(value(item), item) for item in items]
    known = [(v, item) for v, item in keyed if v is not None]
    known.sort(key=lambda pair: pair[0], reverse=descending)
    return [item for _v, item in known] + [item for v, item in keyed if v is None]
