"""The fleet's history has a memory budget: big fleets keep a shorter window per GPU, never an unbounded one."""

from __future__ import annotations

from console.core.model import GpuMetrics, GpuStatic, NodeSpec, TelemetryFrame
from console.core.series import capacity_for
from console.services.fleet import _BYTES_PER_SAMPLE, MIN_HISTORY_S, FleetTelemetry

MIN_HISTORY_SAMPLES = capacity_for(MIN_HISTORY_S, 1.0)  # 5 minutes at 1 Hz


def _static(n: int) -> tuple[GpuStatic, ...]:
    return tuple(GpuStatic(index=i, physical=i // 8, partition_id=i % 8) for i in range(n))


def _feed(fleet: FleetTelemetry, node: str, gpus: int, ts: float) -> None:
    frame = TelemetryFrame(ts=ts, seq=int(ts), gpus=tuple(GpuMetrics(index=i, util_pct=ts % 100) for i in range(gpus)))
    fleet.ingest(node, frame, static=_static(gpus), source="test", interval=1.0, sample_at=ts)


def test_a_small_fleet_keeps_the_full_window():
    fleet = FleetTelemetry([NodeSpec(name=f"n{i}", host="h") for i in range(4)], history_s=600, interval=1.0)
    for i in range(4):
        _feed(fleet, f"n{i}", 8, 1.0)
    assert fleet.history_capacity() == 601
    assert fleet.series("n0", 7, "util_pct").capacity == 601


def test_a_big_fleet_gets_a_shorter_window_within_the_budget_from_the_first_contact():
    budget_mib = 4.0
    nodes = [NodeSpec(name=f"n{i}", host="h") for i in range(8)]
    fleet = FleetTelemetry(nodes, history_s=1200, interval=1.0, history_budget_mib=budget_mib)
    _feed(fleet, "n0", 64, 1000.0)
    # The first node's rings are sized for 8 such nodes (512 logical GPUs), not for itself alone.
    fits = int(budget_mib * 2**20) // (_BYTES_PER_SAMPLE * 512)
    assert fleet.series("n0", 0, "util_pct").capacity == max(MIN_HISTORY_SAMPLES, fits) < 1201
    for t in range(3):
        for node in nodes:
            _feed(fleet, node.name, 64, 1000.0 + t)
    assert fleet.history_bytes() <= budget_mib * 2**20 * 1.1
    assert not fleet.rebalance_history()  # nothing to shrink


def test_a_switch_to_cpx_shrinks_the_rings_keeping_their_newest_samples():
    budget_mib = 4.0
    nodes = [NodeSpec(name=f"n{i}", host="h") for i in range(8)]
    fleet = FleetTelemetry(nodes, history_s=1200, interval=1.0, history_budget_mib=budget_mib)
    for t in range(3):
        for node in nodes:
            _feed(fleet, node.name, 8, 1000.0 + t)  # SPX: 64 logical GPUs, the full window fits
    assert fleet.series("n0", 0, "util_pct").capacity == 1201
    for node in nodes:
        _feed(fleet, node.name, 64, 1003.0)  # every node switched to CPX: 512 logical GPUs
    assert fleet.history_bytes() > budget_mib * 2**20 * 1.1
    assert fleet.rebalance_history()
    assert fleet.history_bytes() <= budget_mib * 2**20 * 1.1
    series = fleet.series("n0", 0, "util_pct")
    assert series.capacity == fleet.history_capacity() < 1201
    assert series.times() == [1000.0, 1001.0, 1002.0, 1003.0]  # the samples survived the shrink
    assert not fleet.rebalance_history()


def test_never_below_the_minimum_window():
    nodes = [NodeSpec(name=f"n{i}", host="h") for i in range(2)]
    fleet = FleetTelemetry(nodes, history_s=600, interval=1.0, history_budget_mib=0.01)
    for node in nodes:
        _feed(fleet, node.name, 64, 5.0)
    fleet.rebalance_history()
    assert fleet.history_capacity() == MIN_HISTORY_SAMPLES
    assert fleet.series("n1", 0, "util_pct").capacity == MIN_HISTORY_SAMPLES
