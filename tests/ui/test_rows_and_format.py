"""The pure parts of the UI (no app): row grouping, the filter, cell text, chart data."""

from __future__ import annotations

from console.core.model import GpuMetrics, GpuProcess, GpuStatic, NodeHealth, NodeSnapshot, TelemetryFrame
from console.core.series import RingSeries
from console.ui.model import format as fmt
from console.ui.model.charts import gpu_charts, node_charts
from console.ui.model.rows import RowFilter, build_rows
from console.ui.widgets.gpu_table import layout_columns


def cpx_node(name="n", health=NodeHealth.LIVE, busy=(0,)) -> NodeSnapshot:
    static = tuple(
        GpuStatic(
            index=i,
            physical=i // 8,
            partition_id=i % 8,
            model="AMD Instinct MI300X",
            vram_total_mib=24574,
            compute_partition="CPX",
            memory_partition="NPS1",
        )
        for i in range(16)
    )
    gpus = tuple(
        GpuMetrics(
            index=i,
            util_pct=50.0 if i % 8 == 0 else None,
            vram_used_mib=100.0,
            processes=(GpuProcess(100 + i, "python3"),) if i in busy else (),
        )
        for i in range(16)
    )
    return NodeSnapshot(name=name, health=health, static=static, latest=TelemetryFrame(0.0, 0, gpus))


def test_rows_group_logical_gpus_under_physical():
    rows = build_rows([cpx_node()], RowFilter())
    assert rows[0].is_header and len(rows) == 17
    assert [r.tree for r in rows[1:9]] == ["┬"] + ["├"] * 6 + ["└"]
    assert [r.physical for r in rows[9:]] == [1] * 8


def test_filter_words_all_match():
    snaps = [cpx_node("a"), cpx_node("b", health=NodeHealth.DOWN, busy=())]
    assert [r.gpu for r in build_rows(snaps, RowFilter("a busy")) if r.gpu is not None] == [0, 8]
    # util >= 10 % also counts as busy (GPU 8 here has 50 % and no process)
    assert [r.key for r in build_rows(snaps, RowFilter("down"))][0] == ("b", None)
    assert len(build_rows(snaps, RowFilter("cpx/nps1"))) == 34
    assert build_rows(snaps, RowFilter("mi355x")) == []
    assert [r.gpu for r in build_rows(snaps, RowFilter("gpu9"))] == [None, 9, None, 9]


def test_headers_of_nodes_without_gpus_follow_the_filter():
    empty = NodeSnapshot(name="far", health=NodeHealth.DOWN, error="far: connection refused")
    assert [r.key for r in build_rows([empty], RowFilter())] == [("far", None)]
    assert [r.key for r in build_rows([empty], RowFilter("down"))] == [("far", None)]
    assert build_rows([empty], RowFilter("live")) == []


def test_cells_and_thresholds():
    assert fmt.gib_pair(185635, 196592) == "181/192"
    assert fmt.gib_pair(20480, 24574) == "20.0/24.0"
    assert fmt.watts_pair(None, 750) == "N/A"
    assert fmt.level(96, fmt.TEMP_JUNCTION) == fmt.CRIT and fmt.level(86, fmt.TEMP_JUNCTION) == fmt.WARN
    assert fmt.fraction_level(720, 750, fmt.POWER_FRACTION) == fmt.CRIT
    assert fmt.fraction_level(181, 192, fmt.VRAM_FRACTION) == fmt.WARN
    assert fmt.fraction_level(None, 192, fmt.VRAM_FRACTION) == fmt.OK
    assert fmt.sparkline([0, 50, 100, None], 6, 100) == "  ▁▅█ "
    assert fmt.age(42.4) == "42s" and fmt.age(125) == "2m05s" and fmt.age(None) == "never"


def test_state_text_says_age_and_reason():
    snap = NodeSnapshot(name="n", health=NodeHealth.DOWN, error="n: timed out", last_sample_ts=100.0)
    assert fmt.state_text(snap, 142.0) == "down, last sample 42s ago: n: timed out"
    assert fmt.state_text(NodeSnapshot(name="n", health=NodeHealth.STALE, last_sample_ts=100.0), 107) == "stale 7s"


def test_columns_fit_80_and_keep_sparklines():
    for width in (80, 100, 120, 200):
        cols, spark = layout_columns(width)
        used = sum(c.width for c in cols) + len(cols) - 1 + 2 * (spark + 1)
        assert used <= width + 1
        assert spark >= 3
    cols, spark = layout_columns(60)
    assert "gfx" not in [c.key for c in cols]


def test_partition_detail_falls_back_to_physical_values():
    snap = cpx_node()
    series = {}
    for i in (8, 9):
        for metric in ("util_pct", "power_w", "temp_junction_c", "temp_mem_c", "vram_used_mib"):
            s = series[(i, metric)] = RingSeries(4)
            for t in range(3):
                s.append(float(t), None if i == 9 and metric != "vram_used_mib" else 10.0 * t)
    charts = gpu_charts(snap, 9, lambda node, gpu, metric: series.get((gpu, metric)))
    assert charts.note == "physical GPU 1"
    assert list(charts.power[0].values) == [0.0, 10.0, 20.0]
    node = node_charts(snap, lambda node, gpu, metric: series.get((gpu, metric)))
    assert list(node.power[0].values) == [0.0, 10.0, 20.0]  # the N/A partition adds nothing
    assert node.note == "all 16 GPUs"
