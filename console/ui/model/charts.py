"""Chart data for the detail screen, read from the fleet's ring buffers (pure, no Textual)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from console.core.model import GpuStatic, NodeSnapshot
from console.core.series import BlockSeries, RingSeries
from console.ui.model.format import MIB_PER_GIB

SeriesLookup = Callable[[str, int, str], "RingSeries | BlockSeries | None"]


@dataclass(frozen=True, slots=True)
class Trace:
    label: str
    times: Sequence[float]
    values: Sequence[float | None]


@dataclass(frozen=True, slots=True)
class ChartSet:
    """The four charts of a detail screen; `note` says whose values they are."""

    util: list[Trace]
    power: list[Trace]
    temps: list[Trace]
    vram: list[Trace]
    vram_total_gib: float | None
    note: str = ""


def _trace(series: RingSeries | BlockSeries | None, label: str, scale: float = 1.0) -> Trace:
    if series is None:
        return Trace(label, [], [])
    times, values = [], []
    for t, v in series:
        times.append(t)
        values.append(None if v is None else v / scale)
    return Trace(label, times, values)


def _has_values(trace: Trace) -> bool:
    return any(v is not None for v in trace.values)


def primary_of(snapshot: NodeSnapshot, static: GpuStatic | None) -> GpuStatic | None:
    """The first partition of the same physical GPU (the one that reports power/thermals)."""
    if static is None or static.partition_id == 0:
        return None
    return next((g for g in snapshot.static if g.physical == static.physical and g.partition_id == 0), None)


def gpu_charts(snapshot: NodeSnapshot, gpu: int, series: SeriesLookup) -> ChartSet:
    node = snapshot.name
    static = next((g for g in snapshot.static if g.index == gpu), None)
    primary = primary_of(snapshot, static)

    def pick(metric: str, label: str) -> tuple[Trace, bool]:
        own = _trace(series(node, gpu, metric), label)
        if _has_values(own) or primary is None:
            return own, False
        # Secondary partitions report N/A for device-wide figures: show the
        # physical GPU's values once, and say so in the title.
        return _trace(series(node, primary.index, metric), label), True

    util, u_phys = pick("util_pct", "util %")
    power, p_phys = pick("power_w", "power W")
    tj, t_phys = pick("temp_junction_c", "junction")
    tmem, _ = pick("temp_mem_c", "memory")
    vram = _trace(series(node, gpu, "vram_used_mib"), "used GiB", MIB_PER_GIB)
    total = static.vram_total_mib / MIB_PER_GIB if static and static.vram_total_mib else None
    note = f"physical GPU {static.physical}" if static and (u_phys or p_phys or t_phys) else ""
    return ChartSet([util], [power], [tj, tmem], [vram], total, note)


def _combine(traces: Iterable[Trace], how: Callable[[list[float]], float], label: str) -> Trace:
    """Per timestamp, combine the known values of many GPUs (frames share timestamps)."""
    buckets: dict[float, list[float]] = {}
    order: list[float] = []
    for trace in traces:
        for t, v in zip(trace.times, trace.values):
            if t not in buckets:
                buckets[t] = []
                order.append(t)
            if v is not None:
                buckets[t].append(v)
    order.sort()
    return Trace(label, order, [how(buckets[t]) if buckets[t] else None for t in order])


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def node_charts(snapshot: NodeSnapshot, series: SeriesLookup) -> ChartSet:
    node = snapshot.name
    indexes = [g.index for g in snapshot.static] or ([g.index for g in snapshot.latest.gpus] if snapshot.latest else [])

    def each(metric: str, scale: float = 1.0) -> list[Trace]:
        return [_trace(series(node, i, metric), "", scale) for i in indexes]

    total = sum(g.vram_total_mib or 0 for g in snapshot.static) / MIB_PER_GIB or None
    return ChartSet(
        util=[_combine(each("util_pct"), _mean, "mean util %")],
        power=[_combine(each("power_w"), sum, "total W")],
        temps=[
            _combine(each("temp_junction_c"), max, "hottest junction"),
            _combine(each("temp_mem_c"), max, "hottest memory"),
        ],
        vram=[_combine(each("vram_used_mib", MIB_PER_GIB), sum, "used GiB")],
        vram_total_gib=total,
        note=f"all {len(indexes)} GPUs",
    )
