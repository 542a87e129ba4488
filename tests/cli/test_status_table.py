"""`rocm-console status` as a table: the columns stay aligned whatever the cells hold
(MIG profiles, long partition labels and model names)."""

from __future__ import annotations

from console.cli.status import STATUS_COLUMNS, format_status_table
from console.core.model import GpuMetrics, GpuStatic, NodeHealth, NodeSnapshot, TelemetryFrame
from tests.cli.cli_helpers import run


def assert_aligned(text: str) -> int:
    """Every row of every table ends each right-aligned column, and starts each left-aligned
    one, where its header does. Returns how many rows were checked."""
    checked = 0
    header = None
    for line in text.splitlines():
        if line.startswith(" GPU PHY"):
            header = line
            continue
        if not line.strip() or not line.startswith(" ") or header is None:
            header = None if not line.strip() else header
            continue
        for title, right in STATUS_COLUMNS[:-1]:
            at = header.index(title)
            if right:
                end = at + len(title)
                assert line[end - 1] != " " and (end == len(line) or line[end] == " "), (
                    f"{title!r} misaligned:\n{header}\n{line}"
                )
            else:
                assert line[at - 1] == " " and line[at] != " ", f"{title!r} misaligned:\n{header}\n{line}"
        checked += 1
    return checked


def _node(name: str, source: str, statics: list[GpuStatic]) -> NodeSnapshot:
    gpus = tuple(
        GpuMetrics(index=s.index, util_pct=50.0, vram_used_mib=1024.0, vram_total_mib=40960.0) for s in statics
    )
    return NodeSnapshot(
        name=name, health=NodeHealth.LIVE, source=source, static=tuple(statics), latest=TelemetryFrame(0.0, 0, gpus)
    )


def test_mig_profiles_and_long_labels_keep_the_columns_aligned():
    h100 = _node(
        "h100",
        "NVIDIA nvml",
        [
            GpuStatic(index=0, physical=0, partition_id=0, model="NVIDIA H100 80GB HBM3"),
            GpuStatic(
                index=1,
                physical=1,
                partition_id=0,
                model="NVIDIA H100 80GB HBM3",
                compute_partition="MIG",
                memory_partition="1g.10gb+me",
            ),
        ],
    )
    amd = _node(
        "mi300x",
        "amdsmi",
        [
            GpuStatic(
                index=0,
                physical=0,
                partition_id=0,
                model="AMD Instinct MI300X",
                compute_partition="CPX",
                memory_partition="NPS1",
            )
        ],
    )
    text = format_status_table([h100, amd])
    assert "MIG/1g.10gb+me" in text and "NVIDIA H100 80GB HBM3" in text
    assert assert_aligned(text) == 3
    # the two tables share their column positions
    headers = [line for line in text.splitlines() if line.startswith(" GPU PHY")]
    assert len(headers) == 2 and headers[0] == headers[1]


def test_the_demo_status_table_is_aligned_with_mig_instances():
    proc = run("status", "--demo", "--no-probe")
    assert proc.returncode == 0, proc.stderr
    assert "MIG/3g.40gb" in proc.stdout and "NVIDIA H100" in proc.stdout
    assert assert_aligned(proc.stdout) == 8 + 64 + 8 + 11
