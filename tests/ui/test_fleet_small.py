"""The fleet at 80×24: the sorted fleet (a snapshot), and an NVIDIA node with MIG instances
whose GPU and partition labels fit their columns."""

from __future__ import annotations

from textual.app import App, ComposeResult

from console.core.model import GpuMetrics, GpuStatic, NodeHealth, NodeSnapshot, TelemetryFrame
from console.ui.widgets.gpu_table import GpuTable
from tests.ui.scenes.registry import SCENES

from .conftest import screen_text

SIZE = (80, 24)
_MIG = ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb+me")


def h100_with_mig() -> NodeSnapshot:
    """Seven whole H100s and GPU 7 split into four MIG instances (logical 7-10), as the agent reports them."""
    static, gpus = [], []
    for i in range(11):
        physical = min(i, 7)
        mig = i >= 7
        static.append(
            GpuStatic(
                index=i,
                physical=physical,
                partition_id=i - 7 if mig else 0,
                model="NVIDIA H100 80GB HBM3",
                vram_total_mib=81559.0,
                compute_partition="MIG" if mig else None,
                memory_partition=_MIG[i - 7] if mig else None,
            )
        )
        first = not mig or i == 7
        gpus.append(
            GpuMetrics(
                index=i,
                util_pct=None if mig else 10.0 * i,
                vram_used_mib=1024.0 * i,
                vram_total_mib=81559.0,
                power_w=100.0 + i if first else None,
                power_cap_w=700.0 if first else None,
                temp_junction_c=40.0 + i if first else None,
            )
        )
    return NodeSnapshot(
        name="h100",
        health=NodeHealth.LIVE,
        source="NVIDIA nvml",
        static=tuple(static),
        latest=TelemetryFrame(100.0, 0, tuple(gpus)),
        last_sample_ts=100.0,
    )


class TableApp(App):
    def compose(self) -> ComposeResult:
        yield GpuTable(lambda node, gpu, metric: None)

    def on_mount(self) -> None:
        self.query_one(GpuTable).show([h100_with_mig()], {"h100": 1}, 1, 100.0)


async def test_mig_labels_fit_at_80_columns():
    app = TableApp()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        lines = screen_text(app).splitlines()
        mig_rows = [line for line in lines if any(glyph in line for glyph in "┬├└")]
        assert len(mig_rows) == 4
        # the GPU column names the physical GPU on the first MIG row, the tree the others
        assert mig_rows[0].lstrip().startswith("7┬  7") and mig_rows[3].lstrip().startswith("└ 10")
        for row, profile in zip(mig_rows, _MIG):
            assert f" {profile} " in row, row  # the whole profile, never cut with …
        assert "…" not in "".join(mig_rows[:3])
        whole = next(line for line in lines if line.startswith("      6 "))
        assert " - " in whole and "?" not in whole  # a whole NVIDIA GPU: no partition mode


def test_the_fleet_sorted_across_nodes_at_80x24(snap_compare):
    app, prepare = SCENES["fleet-80x24"].make()

    async def sorted_fleet(pilot) -> None:
        await prepare(pilot)
        await pilot.press("F", "T")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=sorted_fleet)


class BoardApp(App):
    """Two instances of one preset on GPUs 0 and 1, whose names differ only at their ends."""

    NAMES = ("llama-3.1-8b-fp8-g4", "llama-3.1-8b-fp8-cpx-g1")

    def compose(self) -> ComposeResult:
        yield GpuTable(lambda node, gpu, metric: None)

    def on_mount(self) -> None:
        from console.core.instance_view import InstanceState, InstanceView
        from console.ui.model import instance_board as ib

        board = ib.InstanceBoard(["h100"])
        views = [
            InstanceView(node="h100", name=name, state=InstanceState.READY, gpus=(gpu,), pid=100 + gpu, port=8000)
            for gpu, name in enumerate(self.NAMES)
        ]
        board.set_polled("h100", views)
        self.query_one(GpuTable).show([h100_with_mig()], {"h100": 1}, 1, 100.0, instances=board)


async def test_instance_names_stay_distinguishable_at_80_columns():
    app = BoardApp()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        lines = screen_text(app).splitlines()
        cells = [line.split("●", 1)[1].strip() for line in lines if "●" in line and "live" not in line]
        assert len(cells) == 2, lines
        assert cells[0] != cells[1] and "…" in cells[0]  # cut, yet told apart by their ends
        assert cells[0].split()[0].endswith("g4") and cells[1].split()[0].endswith("g1")
