"""Sorting and the use/heat filter words of the fleet table, without an app (console/ui/model)."""

from __future__ import annotations

import pytest

from console.core.model import GpuMetrics, GpuProcess, GpuStatic, NodeHealth, NodeSnapshot, TelemetryFrame
from console.ui.model import format as fmt
from console.ui.model.gpu_columns import gpu_label, layout_columns, part_label
from console.ui.model.rows import RowFilter, build_rows, node_rows
from console.ui.model.sort import DEFAULT_ORDER, SortOrder


def node(name: str, physical: int, parts: int, tj: dict[int, float], util: dict[int, float] | None = None, procs=()):
    """`physical` GPUs of `parts` partitions; device-wide values (TJ, power) on each first partition only."""
    util = util or {}
    static, gpus = [], []
    for p in range(physical):
        for k in range(parts):
            i = p * parts + k
            static.append(
                GpuStatic(
                    index=i,
                    physical=p,
                    partition_id=k,
                    model="AMD Instinct MI300X",
                    compute_partition="CPX" if parts > 1 else "SPX",
                    memory_partition="NPS1",
                )
            )
            first = k == 0
            gpus.append(
                GpuMetrics(
                    index=i,
                    util_pct=util.get(i, 0.0),
                    vram_used_mib=100.0 * (i + 1),
                    temp_junction_c=tj.get(p) if first else None,
                    power_w=100.0 + p if first else None,
                    processes=(GpuProcess(1000 + i, "python3"),) if i in procs else (),
                )
            )
    return NodeSnapshot(
        name=name, health=NodeHealth.LIVE, static=tuple(static), latest=TelemetryFrame(0.0, 0, tuple(gpus))
    )


def gpus(rows):
    return [r.gpu for r in rows if r.gpu is not None]


def test_a_sorted_cpx_node_keeps_each_partition_under_its_physical_gpu():
    snap = node("cpx", 3, 4, tj={0: 50.0, 1: 90.0, 2: 70.0})
    rows = node_rows(snap, RowFilter(), SortOrder().pressed("temp"))
    assert rows[0].is_header
    # physical 1 (90 °C) first, then 2, then 0; each with its four partitions, in order
    assert gpus(rows) == [4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3]
    assert [r.physical for r in rows[1:5]] == [1] * 4
    assert [gpu_label(r) for r in rows[1:5]] == ["1┬  4", "├  5", "├  6", "└  7"]
    # the same key again: coolest first
    rows = node_rows(snap, RowFilter(), SortOrder().pressed("temp").pressed("temp"))
    assert gpus(rows)[:4] == [0, 1, 2, 3]


def test_each_column_sorts_by_the_physical_gpus_aggregate():
    # utilization: the mean of the partitions (physical 0: 10 %, physical 1: 40 %)
    snap = node("cpx", 2, 2, tj={}, util={0: 0.0, 1: 20.0, 2: 80.0, 3: 0.0})
    assert gpus(node_rows(snap, RowFilter(), SortOrder().pressed("util"))) == [2, 3, 0, 1]
    # VRAM: the partitions' sum (physical 1 holds more)
    assert gpus(node_rows(snap, RowFilter(), SortOrder().pressed("vram"))) == [2, 3, 0, 1]
    # power: reported by the first partition only, still the physical GPU's
    assert gpus(node_rows(snap, RowFilter(), SortOrder().pressed("power"))) == [2, 3, 0, 1]


def test_gpus_without_a_reading_sort_last_either_way():
    snap = node("n", 3, 1, tj={0: 60.0, 2: 80.0})  # GPU 1 reports no temperature
    assert gpus(node_rows(snap, RowFilter(), SortOrder().pressed("temp"))) == [2, 0, 1]
    assert gpus(node_rows(snap, RowFilter(), SortOrder().pressed("temp").pressed("temp"))) == [0, 2, 1]


def test_across_the_fleet_the_hottest_gpu_of_any_node_comes_first_without_headers():
    a = node("a", 2, 1, tj={0: 60.0, 1: 70.0})
    b = node("b", 2, 4, tj={0: 95.0, 1: 40.0})
    order = SortOrder().pressed("temp").toggled_scope()
    rows = build_rows([a, b], RowFilter(), order)
    assert not any(r.is_header for r in rows)
    assert [(r.node, r.gpu) for r in rows][:5] == [("b", 0), ("b", 1), ("b", 2), ("b", 3), ("a", 1)]
    assert [r.tree for r in rows[:4]] == ["┬", "├", "├", "└"]  # partitions still under their GPU
    assert order.describe() == "sort TJ ▼ across the fleet, no node headers"
    assert SortOrder().pressed("temp").describe() == "sort TJ ▼ per node"
    # the table gets a NODE column to say whose GPU each row is
    cols, _ = layout_columns(80, 6)
    assert cols[0].key == "node" and cols[0].title == "NODE"


def test_name_goes_back_to_the_default_order_and_again_reverses():
    a, b = node("a", 2, 1, tj={0: 60.0, 1: 70.0}), node("b", 2, 1, tj={0: 10.0, 1: 90.0})
    default = build_rows([a, b], RowFilter())
    by_name = SortOrder().pressed("temp").pressed("name")
    assert by_name == DEFAULT_ORDER and by_name.describe() == ""
    assert build_rows([a, b], RowFilter(), by_name) == default
    reverse = build_rows([a, b], RowFilter(), by_name.pressed("name"))
    assert [r.key for r in reverse] == [("b", None), ("b", 1), ("b", 0), ("a", None), ("a", 1), ("a", 0)]
    flat = build_rows([a, b], RowFilter(), by_name.pressed("name").toggled_scope())
    assert [r.key for r in flat] == [("b", 1), ("b", 0), ("a", 1), ("a", 0)]
    with pytest.raises(ValueError, match="unknown sort column 'fan'"):
        SortOrder().pressed("fan")


def test_hot_uses_the_temperatures_the_table_colours():
    warn_tj, _ = fmt.TEMP_JUNCTION
    snap = node("n", 3, 1, tj={0: warn_tj - 1, 1: warn_tj, 2: warn_tj + 10})
    assert gpus(build_rows([snap], RowFilter("hot"))) == [1, 2]
    # a CPX GPU: its partitions report no temperature, the physical GPU's first partition does
    cpx = node("cpx", 2, 4, tj={0: 40.0, 1: warn_tj + 1})
    rows = build_rows([cpx], RowFilter("hot"))
    assert gpus(rows) == [4, 5, 6, 7]
    assert [gpu_label(r) for r in rows[1:]] == ["1┬  4", "├  5", "├  6", "└  7"]


def test_free_and_busy_split_the_gpus_by_instance_process_and_load():
    snap = node("n", 5, 1, tj={}, util={3: 95.0}, procs=(1,))
    held = {("n", 2)}  # an active instance holds GPU 2

    def occupied(name: str, gpu: int) -> bool:
        return (name, gpu) in held

    free = gpus(build_rows([snap], RowFilter("free"), occupied=occupied))
    busy = gpus(build_rows([snap], RowFilter("busy"), occupied=occupied))
    assert free == [0, 4]  # 1: a process, 2: the instance, 3: at 95 % (a process the node does not show)
    assert busy == [1, 2, 3]
    assert gpus(build_rows([snap], RowFilter("idle"), occupied=occupied)) == free


def test_a_filtered_cpx_tree_never_draws_a_partition_under_the_wrong_physical_gpu():
    # physical 0: partitions 0-3, physical 1: 4-7; only 5 and 6 busy (processes)
    snap = node("cpx", 2, 4, tj={}, procs=(5, 6))
    rows = build_rows([snap], RowFilter("busy"))
    assert [(r.gpu, r.physical) for r in rows[1:]] == [(5, 1), (6, 1)]
    # the first row shown names physical GPU 1: it does not hang off physical 0's tree
    assert [gpu_label(r) for r in rows[1:]] == ["1┬  5", "└  6"]
    alone = build_rows([snap], RowFilter("gpu6"))
    assert [gpu_label(r) for r in alone[1:]] == ["1─  6"]
    # sorted and filtered at once: still grouped
    both = build_rows([snap], RowFilter("busy"), SortOrder().pressed("vram"))
    assert [gpu_label(r) for r in both[1:]] == ["1┬  5", "└  6"]


def test_mig_instances_show_their_profile_in_the_part_column():
    mig = GpuStatic(index=1, physical=0, partition_id=1, compute_partition="MIG", memory_partition="3g.40gb")
    part_width = next(c.width for c in layout_columns(80)[0] if c.key == "part")
    assert part_label(mig) == "3g.40gb" and len(part_label(mig)) <= part_width
    assert (
        part_label(GpuStatic(index=0, physical=0, partition_id=0, compute_partition="CPX", memory_partition="NPS1"))
        == "CPX/NPS1"
    )
    assert RowFilter("mig").matches(
        NodeSnapshot(name="h", health=NodeHealth.LIVE), mig, None
    )  # still found by the word
