"""Cell text and threshold levels for the GPU table and the detail screen.

Pure functions (no Textual): the widgets map a level name to a theme style.
"""

from __future__ import annotations

from typing import Sequence

from console.core.model import NodeHealth, NodeSnapshot, ProbeInfo
from console.core.telemetry import is_nvidia_source

# Levels a cell can be drawn at; the table maps them to component classes.
OK, WARN, CRIT = "ok", "warn", "crit"

# Thresholds: MI300X-class junction throttling starts near 100 °C and HBM near
# 95 °C, so warn a little before; a GPU at 95 % of its power cap is capped.
TEMP_JUNCTION = (85.0, 95.0)
TEMP_MEM = (80.0, 90.0)
POWER_FRACTION = (0.85, 0.95)
VRAM_FRACTION = (0.85, 0.95)
BUSY_UTIL_PCT = 10.0  # a GPU at or above this utilization counts as busy

_SPARK = "▁▂▃▄▅▆▇█"
MIB_PER_GIB = 1024.0


def level(value: float | None, limits: tuple[float, float]) -> str:
    if value is None:
        return OK
    warn, crit = limits
    return CRIT if value >= crit else WARN if value >= warn else OK


def fraction_level(used: float | None, total: float | None, limits: tuple[float, float]) -> str:
    if used is None or not total:
        return OK
    return level(used / total, limits)


def pct(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.0f}%"


def temp(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.0f}°"


def mhz(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.0f}"


def gib_pair(used_mib: float | None, total_mib: float | None) -> str:
    """'152/192' or, for small partitions, '12.1/24.0' (GiB)."""
    if used_mib is None:
        return "N/A"
    used = used_mib / MIB_PER_GIB
    if total_mib is None:
        return f"{used:.0f}/?"
    total = total_mib / MIB_PER_GIB
    if total >= 100:
        return f"{used:.0f}/{total:.0f}"
    return f"{used:.1f}/{total:.1f}"


def watts_pair(power: float | None, cap: float | None) -> str:
    if power is None:
        return "N/A"
    return f"{power:.0f}/{cap:.0f}" if cap else f"{power:.0f}/?"


def sparkline(values: Sequence[float | None], width: int, top: float | None = None) -> str:
    """The last `width` values as block characters, right-aligned; None is a gap."""
    if width <= 0:
        return ""
    tail = list(values)[-width:]
    known = [v for v in tail if v is not None]
    scale = top if top else (max(known) if known else 0.0)
    chars = []
    for v in tail:
        if v is None:
            chars.append(" ")
        elif scale <= 0:
            chars.append(_SPARK[0])
        else:
            idx = int(round(min(1.0, max(0.0, v / scale)) * (len(_SPARK) - 1)))
            chars.append(_SPARK[idx])
    return "".join(chars).rjust(width)


def age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def sample_age(snapshot: NodeSnapshot, now: float) -> float | None:
    return None if snapshot.last_sample_ts is None else now - snapshot.last_sample_ts


def short_model(model: str | None) -> str:
    return (model or "?").replace("AMD Instinct ", "").replace("AMD ", "")


def partition_text(compute: str | None, memory: str | None) -> str:
    if compute is None and memory is None:
        return "?"
    return f"{compute or '?'}/{memory or '?'}"


def state_text(snapshot: NodeSnapshot, now: float) -> str:
    """'live 0s', 'stale 12s', 'down 42s: reason', 'connecting'."""
    health = snapshot.health
    if health == NodeHealth.CONNECTING:
        return "connecting…"
    seen = age(sample_age(snapshot, now))
    if health == NodeHealth.LIVE:
        return f"live {seen}"
    if health == NodeHealth.STALE:
        return f"stale {seen}"
    reason = snapshot.error or "unreachable"
    if snapshot.last_sample_ts is None:
        return f"down: {reason}"
    return f"down, last sample {seen} ago: {reason}"


def node_facts(snapshot: NodeSnapshot) -> list[str]:
    """GPU model, partition modes and versions for the node header, most useful first."""
    facts: list[str] = []
    static = snapshot.static
    if static:
        models = sorted({short_model(g.model) for g in static})
        physical = len({g.physical for g in static})
        count = f"{physical}×{'/'.join(models)}"
        if len(static) != physical:
            count += f" = {len(static)} GPUs"
        facts.append(count)
        modes = sorted({partition_text(g.compute_partition, g.memory_partition) for g in static})
        if is_nvidia_source(snapshot.source):
            # whole NVIDIA GPUs have no partition mode: only MIG profiles are worth a word
            modes = [m for m in modes if m != "?"]
            pending = sorted({g.physical for g in static if g.mig_mode and "after a GPU reset" in g.mig_mode})
            if pending:
                modes.append("MIG change pending a reset on GPU " + ",".join(map(str, pending)))
        if modes:
            facts.append(" ".join(modes))
    probe = probe_facts(snapshot.probe)
    if is_nvidia_source(snapshot.source):  # no ROCm to report on an NVIDIA node
        probe = [f for f in probe if not f.startswith("ROCm ")]
    facts.extend(probe)
    if snapshot.source:
        facts.append(snapshot.source)
    return facts


def probe_facts(probe: ProbeInfo | None) -> list[str]:
    if probe is None:
        return []
    return [f"ROCm {probe.rocm or '?'}", f"vLLM {probe.vllm or 'none'}"]


# ---------------------------------------------------------------- bucket estimates (issue U)

ESTIMATE_MARK = "≈"
ESTIMATE_DIGITS = 2  # significant digits a /metrics histogram estimate may show


def estimate(value: float | None, na: str = "–") -> str:
    """A percentile interpolated inside a /metrics histogram bucket: `≈38`, `≈3.9`, `≈2500`.

    vLLM's latency buckets are tens of percent wide (0.02-0.04 s, 0.25-0.5 s, 2.5-5 s), so the
    interpolation knows at best two significant digits: this is the one place that says how many
    such a number shows, and the mark says it is an estimate, not vLLM's own figure."""
    if value is None or value != value:  # None or NaN
        return na
    if value == 0:
        return f"{ESTIMATE_MARK}0"
    from math import floor, log10

    def digits_after_point(v: float) -> int:
        return max(0, ESTIMATE_DIGITS - 1 - floor(log10(abs(v))))

    rounded = round(value, ESTIMATE_DIGITS - 1 - floor(log10(abs(value))))  # 2480 -> 2500, 3.91 -> 3.9
    return f"{ESTIMATE_MARK}{rounded:.{digits_after_point(rounded)}f}"  # 9.96 -> 10, not 10.0
