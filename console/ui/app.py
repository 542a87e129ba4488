"""The Textual app. For now a single live GPU table over the fleet service."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import DataTable, Footer, Header

from console.core.model import Profile
from console.core.status_view import fmt_num, merged_gpu_rows
from console.services.fleet import FleetTelemetry


class ConsoleApp(App):
    TITLE = "rocm-console"
    BINDINGS = [("q", "quit", "Quit")]

    def __init__(self, profile: Profile, *, interval: float = 1.0) -> None:
        super().__init__()
        self.profile = profile
        self.fleet = FleetTelemetry(profile.nodes, interval=interval)

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="gpu-table", cursor_type="row")
        yield Footer()

    async def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("node", "state", "gpu", "part", "util", "vram GiB", "power W", "Tj", "Tmem")
        await self.fleet.start()
        self.set_interval(0.5, self.redraw)

    def redraw(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for snap in self.fleet.snapshots():
            rows = merged_gpu_rows(snap)
            if not rows:
                table.add_row(snap.name, snap.health.value, "", "", "", "", "", "", snap.error or "")
            for static, m in rows:
                vram = ""
                if m and m.vram_used_mib is not None and m.vram_total_mib:
                    vram = f"{m.vram_used_mib / 1024:.0f}/{m.vram_total_mib / 1024:.0f}"
                table.add_row(
                    snap.name, snap.health.value, str(static.index if static else m.index),
                    f"{static.compute_partition}/{static.memory_partition}" if static else "",
                    fmt_num(m.util_pct if m else None, "{:.0f}%"), vram,
                    fmt_num(m.power_w if m else None), fmt_num(m.temp_junction_c if m else None),
                    fmt_num(m.temp_mem_c if m else None),
                )

    async def on_unmount(self) -> None:
        await self.fleet.stop()


def run_app(profile: Profile, *, interval: float = 1.0) -> int:
    ConsoleApp(profile, interval=interval).run()
    return 0
