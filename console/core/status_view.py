"""The node/GPU view shared by `status --json`, the table output and the UI."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from console.core.health import FAIL, WARN
from console.core.model import GpuHealth, GpuMetrics, GpuStatic, NodeSnapshot


def merged_gpu_rows(snapshot: NodeSnapshot) -> list[tuple[GpuStatic | None, GpuMetrics | None]]:
    """Pair each logical GPU's static facts with its latest metrics, by index."""
    static = {g.index: g for g in snapshot.static}
    metrics = {g.index: g for g in snapshot.latest.gpus} if snapshot.latest else {}
    return [(static.get(i), metrics.get(i)) for i in sorted(set(static) | set(metrics))]


def health_dict(health: GpuHealth | None) -> dict | None:
    """A physical GPU's health for `status --json`: state, reasons (one line each), since."""
    if health is None:
        return None
    return {
        "state": health.verdict.state,
        "reasons": [f.text for f in health.verdict.findings],
        "rules": [f.rule for f in health.verdict.findings],
        "since": round(health.since, 3) if health.since is not None else None,
        "read_at": round(health.reading.t, 3) if health.reading is not None else None,
    }


def gpu_dict(static: GpuStatic | None, m: GpuMetrics | None, health: GpuHealth | None = None) -> dict:
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
        # the physical GPU's health (null: not read, e.g. an agent or exporter without health)
        "health": health_dict(health),
    }


def node_dict(snapshot: NodeSnapshot) -> dict:
    return {
        "name": snapshot.name,
        "state": snapshot.health.value,
        "error": snapshot.error,
        "source": snapshot.source,
        "sample_ts": snapshot.latest.ts if snapshot.latest else None,
        "probe": asdict(snapshot.probe) if snapshot.probe else None,
        "gpus": [gpu_dict(s, m, _health_of(snapshot, s, m)) for s, m in merged_gpu_rows(snapshot)],
    }


def _health_of(snapshot: NodeSnapshot, static: GpuStatic | None, m: GpuMetrics | None) -> GpuHealth | None:
    physical = static.physical if static else (m.index if m else None)
    return snapshot.health_of(physical) if physical is not None else None


def physical_of(snapshot: NodeSnapshot, logical: int) -> int:
    """The physical GPU a logical one belongs to (itself when the node's layout is not known)."""
    return next((g.physical for g in snapshot.static if g.index == logical), logical)


def health_refusal(snapshot: NodeSnapshot, gpus: Sequence[int]) -> str | None:
    """Why a serve start on these logical GPUs is refused: the first one whose physical GPU is
    in fail health, e.g. "GPU 3 is in fail health: 2 uncorrectable ECC errors (--force to start anyway)"."""
    for logical in gpus:
        physical = physical_of(snapshot, logical)
        health = snapshot.health_of(physical)
        if health is not None and health.verdict.state == FAIL:
            fails = [f.text for f in health.verdict.findings if f.severity == FAIL]
            where = f"GPU {logical}" + (f" (physical GPU {physical})" if physical != logical else "")
            return f"{where} is in fail health: {'; '.join(fails) or health.verdict.reasons} (--force to start anyway)"
    return None


def health_warnings(snapshot: NodeSnapshot, gpus: Sequence[int]) -> list[str]:
    """One line per chosen GPU in warn health (the start dialog and `serve start` show them)."""
    out = []
    seen: set[int] = set()
    for logical in gpus:
        physical = physical_of(snapshot, logical)
        health = snapshot.health_of(physical)
        if physical in seen or health is None or health.verdict.state != WARN:
            continue
        seen.add(physical)
        out.append(f"GPU {logical} health warn: {health.verdict.reasons}")
    return out


def fmt_num(value: float | None, fmt: str = "{:.0f}", na: str = "N/A") -> str:
    return na if value is None else fmt.format(value)


def align_row(cells: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    """One line of a text table: each cell padded to its column's width (right- or left-aligned),
    one space between columns, two before the last (free text, not padded)."""
    parts = []
    last = len(cells) - 1
    for i, cell in enumerate(cells):
        if i == last:
            parts.append(" " + cell)
        else:
            parts.append(cell.rjust(widths[i]) if right[i] else cell.ljust(widths[i]))
    return (" " + " ".join(parts)).rstrip()
