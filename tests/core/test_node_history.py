"""NodeHistory: one block per node for every logical GPU's history (console/core/series.py)."""

from __future__ import annotations

import gc

import pytest

from console.core.model import GpuMetrics, GpuStatic, NodeSpec, TelemetryFrame
from console.core.series import NodeHistory, RingSeries
from console.services.fleet import FleetTelemetry


def test_ring_wraps_and_each_gpu_reads_like_a_ring_series():
    hist = NodeHistory(4, [0, 1, 2], (1.0, 8.0))
    rings = {(g, k): RingSeries(4) for g in range(3) for k in range(2)}
    for i in range(11):
        values = [float(i), 196_608.0 - 128 * i, None if i % 3 == 0 else 50.0 + i, 1024.0, 7.5, None]
        hist.append(100.0 + i, [0, 1, 2], list(values))
        for g in range(3):
            for k in range(2):
                rings[(g, k)].append(100.0 + i, values[2 * g + k])
    assert len(hist) == 4 and hist.capacity == 4
    for (g, k), ring in rings.items():
        col = hist.column(g, k)
        assert col is not None
        assert col.times() == ring.times() == [107.0, 108.0, 109.0, 110.0]
        assert col.values() == ring.values()
        assert col.values(2) == ring.values(2) and col.values(0) == []
        assert col.latest() == ring.latest()
        assert col.since(108.5) == ring.since(108.5)
    assert hist.column(1, 0).values() == [57.0, 58.0, None, 60.0]  # gaps where a reading was None
    assert hist.column(0, 1).values() == [195_712.0, 195_584.0, 195_456.0, 195_328.0]  # VRAM past 65,504 MiB
    # half floats: 3 significant digits, whatever the value
    hist.append(111.0, [0, 1, 2], [123.456, 191_000.3, 0.1, 2.0, None, None])
    assert hist.column(0, 0).latest() == pytest.approx(123.456, rel=1e-3)
    assert hist.column(0, 1).latest() == pytest.approx(191_000.3, rel=1e-3)
    assert hist.column(3, 0) is None and hist.column(0, 2) is None  # no such GPU, no such metric


def test_a_view_follows_its_history_and_an_empty_one_reads_empty():
    hist = NodeHistory(3, [5], (1.0,))
    col = hist.column(5, 0)
    assert col is not None and col.values() == [] and col.latest() is None and len(col) == 0
    hist.append(1.0, [5], [42.0])
    assert col.values() == [42.0] and col.latest() == 42.0


def test_a_gpu_missing_from_a_frame_is_a_gap_and_relayout_keeps_the_gpus_that_stay():
    hist = NodeHistory(5, [0, 1], (1.0,))
    hist.append(1.0, [0, 1], [10.0, 20.0])
    hist.append(2.0, [1], [21.0])  # GPU 0 missing from this frame
    assert hist.column(0, 0).values() == [10.0, None]
    # Re-enumerated: GPU 0 gone, GPUs 2 and 3 new, a smaller ring.
    moved = hist.relayout([1, 2, 3], capacity=3)
    assert moved.gpus == (1, 2, 3) and moved.capacity == 3
    assert moved.column(1, 0).values() == [20.0, 21.0] and moved.column(1, 0).times() == [1.0, 2.0]
    assert moved.column(2, 0).values() == [None, None] and moved.column(0, 0) is None
    moved.append(3.0, [1, 2, 3], [22.0, 30.0, 40.0])
    moved.append(4.0, [1, 2, 3], [23.0, 31.0, 41.0])
    assert moved.column(1, 0).values() == [21.0, 22.0, 23.0]
    assert moved.column(3, 0).values() == [None, 40.0, 41.0]


def test_bad_capacity_or_no_metric():
    with pytest.raises(ValueError):
        NodeHistory(0, [0], (1.0,))
    with pytest.raises(ValueError):
        NodeHistory(3, [0], ())


def _frame(ts: float, gpus: int) -> TelemetryFrame:
    return TelemetryFrame(
        ts=ts,
        seq=int(ts),
        gpus=tuple(GpuMetrics(index=i, util_pct=float(i), vram_used_mib=100_000.0 + ts) for i in range(gpus)),
    )


def _static(n: int) -> tuple[GpuStatic, ...]:
    return tuple(GpuStatic(index=i, physical=i // 8, partition_id=i % 8) for i in range(n))


def test_fleet_history_survives_partitions_re_enumerated():
    fleet = FleetTelemetry([NodeSpec(name="n", host="h")], history_s=60, interval=1.0)
    for t in range(3):
        fleet.ingest("n", _frame(t, 8), static=_static(8), source="t", interval=1.0, sample_at=t)
    # SPX -> CPX: 64 logical GPUs; 0-7 keep their samples, the new ones start now
    fleet.ingest("n", _frame(3, 64), static=_static(64), source="t", interval=1.0, sample_at=3)
    assert fleet.series("n", 7, "util_pct").values() == [7.0] * 4
    assert fleet.series("n", 63, "util_pct").values() == [None, None, None, 63.0]
    assert fleet.series("n", 63, "vram_used_mib").latest() == pytest.approx(100_003.0, rel=1e-3)
    # back to SPX: GPUs 8-63 are gone with their history
    fleet.ingest("n", _frame(4, 8), static=_static(8), source="t", interval=1.0, sample_at=4)
    assert fleet.series("n", 9, "util_pct") is None
    assert fleet.series("n", 0, "util_pct").times() == [0, 1, 2, 3, 4]


def test_tracked_objects_grow_with_nodes_not_gpus():
    """The garbage collector's work: a node of 64 GPUs costs no more tracked objects than one of 8."""

    def tracked(gpus: int) -> int:
        fleet = FleetTelemetry([NodeSpec(name=f"n{i}", host="h") for i in range(16)], history_s=60)
        gc.collect()
        before = len(gc.get_objects())
        for t in range(3):
            for i in range(16):
                fleet._tracks[f"n{i}"].record(_frame(t, gpus), t)
        for track in fleet._tracks.values():
            track.snapshot = type(track.snapshot)(name=track.spec.name, health=track.snapshot.health)
        gc.collect()
        return len(gc.get_objects()) - before

    assert tracked(64) <= tracked(8) + 16
