"""GPU health for the scenes and the UI tests: a few sick GPUs in the demo fleet.

The replayed traces carry no health lines, so the scenes' fleet (HealthFleet) lays
verdicts over its snapshots, judged by the real rules (core/health.py HealthTracker)
from reading histories made here; the events screen's scenes read an events.jsonl
written here.  Times are fixed (T0), so the SVGs do not move.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from console.core.events import Event
from console.core.health import EccBlock, GpuFault, HealthReading, HealthTracker, LinkHealth
from console.core.model import GpuHealth, NodeSnapshot
from console.services.events import EventLog
from console.services.fleet import FleetTelemetry

T0 = 1767225600.0  # the traces' last sample time (as tests/ui/scenes/fleet.py)
STEP = 10.0  # seconds between two health readings
READINGS = 13  # two minutes of history

# (node, physical GPU) -> what is wrong with it; every other GPU is well.
SICK = {
    ("mi300x-spx", 2): "power_throttle",
    ("mi300x-spx", 5): "ecc_uncorrectable",
    ("mi300x-spx", 6): "pcie_degraded",
    ("mi300x-cpx", 3): "xgmi_down",
    ("mi355x", 1): "ecc_correctable",
}


def reading(node: str, gpu: int, i: int, kind: str | None = None) -> HealthReading:
    """The i-th reading (0 = oldest) of one GPU with the fault `kind` developing half-way."""
    t = T0 - (READINGS - 1 - i) * STEP
    on = kind is not None and i >= READINGS // 2
    throttle = kind == "power_throttle" and on
    seed = (gpu + 1) * 1000 + len(node)
    correctable = 2 + (3 * (i - READINGS // 2) if kind == "ecc_correctable" and on else 0)
    uncorrectable = 2 if kind == "ecc_uncorrectable" and on else 0
    return HealthReading(
        t=t,
        gpu=gpu,
        vendor="amd",
        ecc_correctable=correctable,
        ecc_uncorrectable=uncorrectable,
        ecc_deferred=0,
        ecc_blocks=(
            EccBlock("UMC", correctable, uncorrectable, 0),
            EccBlock("GFX", 0, 0, 0),
        ),
        pages_retired=0,
        pages_pending=1 if kind == "ecc_uncorrectable" and on else 0,
        pages_unreservable=0,
        throttle_reasons=("power",) if throttle else (),
        idle=False,
        residency=(("power", 6.0 * max(0, i - READINGS // 2) if kind == "power_throttle" else 0.0), ("thermal", 0.0)),
        residency_clock=None,
        pcie_gen=5,
        pcie_gen_max=5,
        pcie_width=8 if kind == "pcie_degraded" and on else 16,
        pcie_width_max=16,
        pcie_replay=3 if kind == "pcie_degraded" else 0,
        pcie_recovery=0,
        link_kind="xgmi",
        links=tuple(LinkHealth(n, not (kind == "xgmi_down" and on and n == 3), 0) for n in range(7)),
        faults=(GpuFault("reset", t - 2, None, "GPU reset"),) if kind == "xgmi_down" and i == READINGS // 2 else (),
        energy_j=seed * 1000.0 + 650.0 * STEP * i,
    )


def history(node: str, gpu: int) -> tuple[HealthReading, ...]:
    kind = SICK.get((node, gpu))
    return tuple(reading(node, gpu, i, kind) for i in range(READINGS))


def gpu_health(node: str, gpu: int) -> GpuHealth:
    """The verdict the real rules give on the GPU's history, and since when it holds."""
    tracker = HealthTracker()
    since = None
    state = None
    for r in history(node, gpu):
        verdict = tracker.add(r)
        if verdict.state != state:
            state, since = verdict.state, r.t
    return GpuHealth(gpu, tracker.verdict, tracker.last, since)


def with_health(snapshot: NodeSnapshot) -> NodeSnapshot:
    physical = sorted({s.physical for s in snapshot.static})
    if not physical:
        return snapshot
    return replace(snapshot, gpu_health=tuple(gpu_health(snapshot.name, p) for p in physical))


class HealthFleet(FleetTelemetry):
    """The scenes' fleet: the replayed nodes, with the health above laid over their snapshots."""

    def snapshot(self, node: str) -> NodeSnapshot:
        return with_health(super().snapshot(node))

    def snapshots(self) -> list[NodeSnapshot]:
        return [with_health(s) for s in super().snapshots()]

    def health_readings(self, node: str, physical: int) -> tuple[HealthReading, ...]:
        return history(node, physical)


def demo_events(t0: float = T0) -> list[Event]:
    """A morning's timeline of the demo fleet, oldest first."""
    ago = [
        (5400, "node.up", "mi300x-spx", None, None, "info", "mi300x-spx is live"),
        (5400, "node.up", "mi300x-cpx", None, None, "info", "mi300x-cpx is live"),
        (5390, "node.up", "mi355x", None, None, "info", "mi355x is live"),
        (4200, "partition.switched", "mi300x-cpx", None, None, "info", "GPUs 0-7: SPX/NPS1 -> CPX/NPS1"),
        (3720, "instance.started", "mi300x-cpx", 0, "cpx-g0", "info", "cpx-g0 started on GPU 0 (port 8000)"),
        (3650, "instance.ready", "mi300x-cpx", 0, "cpx-g0", "info", "cpx-g0 ready: Llama-3.1-8B-Instruct-FP8-KV"),
        (1800, "benchmark.started", "mi300x-spx", None, "llama-3.1-70b-fp8-tp4", "info", "serving c64 started"),
        (1500, "benchmark.finished", "mi300x-spx", None, "llama-3.1-70b-fp8-tp4", "info", "serving c64: 2,310 tok/s"),
        (420, "gpu.throttle_start", "mi300x-spx", 2, None, "warn", "GPU 2 throttling: power cap"),
        (410, "gpu.reset", "mi300x-cpx", 1, None, "warn", "GPU 1: GPU reset (ring hang on gfx)"),
        (405, "gpu.health", "mi300x-cpx", 1, None, "warn", "GPU 1 ok -> warn: GPU reset at 07:53"),
        (400, "instance.failed", "mi300x-cpx", 13, "cpx-g13", "fail", "cpx-g13 failed: max_model_len too large"),
        (60, "gpu.reset", "mi300x-cpx", 3, None, "warn", "GPU 3: GPU reset"),
        (58, "gpu.health", "mi300x-cpx", 3, None, "warn", "GPU 3 ok -> warn: XGMI link 3 down"),
        (58, "gpu.ecc", "mi300x-spx", 5, None, "fail", "GPU 5: uncorrectable ECC +2, 1 bad page pending"),
        (58, "gpu.health", "mi300x-spx", 5, None, "fail", "GPU 5 ok -> fail: 2 uncorrectable ECC errors"),
        (57, "alert.fired", "mi300x-spx", 5, None, "fail", "alert gpu-fail: mi300x-spx GPU 5 health == fail"),
        (55, "gpu.health", "mi300x-spx", 2, None, "warn", "GPU 2 ok -> warn: throttled (power cap) 30% of last 60 s"),
        (50, "gpu.health", "mi300x-spx", 6, None, "warn", "GPU 6 ok -> warn: PCIe link gen 5 x8 (max gen 5 x16)"),
        (30, "gpu.ecc", "mi355x", 1, None, "warn", "GPU 1: correctable ECC +3"),
    ]
    return [
        Event(t0 - a, kind, node, gpu, inst, sev, msg)
        for a, kind, node, gpu, inst, sev, msg in sorted(ago, key=lambda row: -row[0])
    ]


def write_events(path: Path, t0: float = T0) -> EventLog:
    log = EventLog(path)
    log.append(demo_events(t0))
    return log
