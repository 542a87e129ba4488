"""The node/GPU view shared by `status --json`, the table output and the UI."""

from __future__ import annotations

from dataclasses import asdict

from console.core.model import GpuMetrics, GpuStatic, NodeSnapshot


def merged_gpu_rows(snapshot: NodeSnapshot) -> list[tuple[GpuStatic | None, GpuMetrics | None]]:
    """Pair each logical GPU's static facts with its latest metrics, by index."""
    static = {g.index: g for g in snapshot.static}
    metrics = {g.index: g for g in snapshot.latest.gpus} if snapshot.latest else {}
    return [(static.get(i), metrics.get(i)) for i in sorted(set(static) | set(metrics))]


def gpu_dict(static: GpuStatic | None, m: GpuMetrics | None) -> dict:
    index = static.index if static else m.index  # type: ignore[union-attr]
    return {
        "index": index,
        "physical": static.physical if static else None,
        "partition_id": static.partition_id if static else None,
        "model": static.model if static else None,
        "bdf": static.bdf if static else None,
        "compute_partition": static.compute_partition if static else None,
        "memory_partition": static.memory_partition if static else None,
        "util_pct": m.util_pct if m else None,
        "vram_used_mib": m.vram_used_mib if m else None,
        "vram_total_mib": (
            m.vram_total_mib if m and m.vram_total_mib is not None else static.vram_total_mib if static else None
        ),
        "power_w": m.power_w if m else None,
        "power_cap_w": m.power_cap_w if m else None,
        "temp_junction_c": m.temp_junction_c if m else None,
        "temp_mem_c": m.temp_mem_c if m else None,
        "gfx_clock_mhz": m.gfx_clock_mhz if m else None,
        "processes": [asdict(p) for p in m.processes] if m else [],
    }


def node_dict(snapshot: NodeSnapshot) -> dict:
    return {
        "name": snapshot.name,
        "state": snapshot.health.value,
        "error": snapshot.error,
        "source": snapshot.source,
        "sample_ts": snapshot.latest.ts if snapshot.latest else None,
        "probe": asdict(snapshot.probe) if snapshot.probe else None,
        "gpus": [gpu_dict(s, m) for s, m in merged_gpu_rows(snapshot)],
    }


def fmt_num(value: float | None, fmt: str = "{:.0f}", na: str = "N/A") -> str:
    return na if value is None else fmt.format(value)
