"""GPU or node detail: charts from the ring buffers, the process list, static facts.

The panels above the charts (facts, health, processes) take their whole height in a region
that scrolls with the keys (up/down, page up/down, home/end): in a short terminal the
health rows below ECC (throttle, PCIe, XGMI) and the verdict's reasons are a key away,
never cut off. Left/right stay the previous/next GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Static

from console.core.model import GpuMetrics, GpuStatic, NodeHealth, NodeSnapshot
from console.core.text import printable
from console.ui.model import format as fmt
from console.ui.model.charts import ChartSet, gpu_charts, node_charts
from console.ui.model.fleet_view import FleetView
from console.ui.model.health_rows import health_rows, health_title
from console.ui.model.health_view import GLYPHS, gpu_health, node_summary, physical_of
from console.ui.model.protocols import console_host
from console.ui.model.rows import gpu_pairs
from console.ui.widgets.key_bar import KeyBar
from console.ui.widgets.metric_plot import MetricPlot
from console.ui.widgets.status_bar import StatusBar

_STEP = Binding.Group("Prev/next", compact=True)
NARROW_WIDTH = 110  # columns below which a GPU's detail leaves out its process list


class DetailScreen(Screen):
    """`gpu` None: the whole node (aggregated charts, every process)."""

    CSS_PATH = Path(__file__).with_name("detail.tcss")
    BINDINGS = [
        Binding("up", "scroll_info(-1)", "Scroll", show=False, id="detail-scroll-up"),
        Binding("down", "scroll_info(1)", "Scroll", show=False, id="detail-scroll-down"),
        Binding("pageup", "scroll_info(-10)", "Page up", show=False, id="detail-page-up"),
        Binding("pagedown", "scroll_info(10)", "Page down", show=False, id="detail-page-down"),
        Binding("home", "scroll_info(-1000)", "Top", show=False, id="detail-top"),
        Binding("end", "scroll_info(1000)", "Bottom", show=False, id="detail-bottom"),
        Binding("escape,backspace", "back", "Back", id="back"),
        Binding("left,left_square_bracket", "step(-1)", "Previous", id="detail-prev", group=_STEP),
        Binding("right,right_square_bracket", "step(1)", "Next", id="detail-next", group=_STEP),
        Binding("K", "end_processes", "End processes", id="detail-end-processes"),
    ]

    def __init__(self, view: FleetView, node: str, gpu: int | None) -> None:
        super().__init__(id="detail-screen")
        self.view = view
        self.node = node
        self.gpu = gpu
        self._drawn: tuple | None = None
        self._procs: tuple | None = None
        self._ready = False

    def watched_nodes(self) -> set[str]:
        return {self.node}

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status-bar")
        yield Static(id="detail-title")
        with Horizontal(id="detail-info"):
            yield Static(id="detail-facts")
            # Every health counter with its rate and since when (a GPU's detail only); the
            # verdict's reasons above it, wrapped (a border title would cut them).
            with Vertical(id="detail-health-box"):
                yield Static(id="detail-health-why")
                health: DataTable[Any] = DataTable(id="detail-health", cursor_type="none", zebra_stripes=True)
                health.can_focus = False
                health.add_columns("Counter", "Now", "Rate · since")
                yield health
            # Not focusable: the arrow keys belong to prev/next; the mouse still scrolls it.
            processes: DataTable[Any] = DataTable(id="detail-processes", cursor_type="none", zebra_stripes=True)
            processes.can_focus = False
            processes.add_columns("GPU", "PID", "Process", "VRAM GiB")
            yield processes
        with Grid(id="detail-charts"):
            yield MetricPlot("Utilization %", ylim=(0, 100), id="chart-util")
            yield MetricPlot("Power W", id="chart-power")
            yield MetricPlot("Temperature °C", id="chart-temps")
            yield MetricPlot("VRAM GiB", id="chart-vram")
        yield KeyBar()

    def on_resize(self, event: events.Resize) -> None:
        # Narrow: a GPU's health needs the room more than its process list (the fleet row says it).
        self.set_class(event.size.width < NARROW_WIDTH, "-narrow")

    def on_mount(self) -> None:
        self.set_class(self.app.size.width < NARROW_WIDTH, "-narrow")
        self._ready = True
        load_history = getattr(self.view.fleet, "load_history", None)  # scene fleets have none
        if load_history is not None:
            load_history(self.node)  # Prometheus-fed nodes: the charts' past from query_range
        self.redraw(console_host(self.app).clock())

    def on_screen_resume(self) -> None:
        self.set_class(getattr(self.app, "paused", False), "-paused")

    @property
    def snapshot(self) -> NodeSnapshot:
        return self.view.fleet.snapshot(self.node)

    # ------------------------------------------------------------ drawing

    def redraw(self, now: float) -> None:
        if not self._ready:  # the clock can tick between push and mount
            return
        snap = self.snapshot
        self.query_one(StatusBar).show(self.view.fleet.snapshots(), console_host(self.app).sampling_interval)
        self.set_class(snap.health == NodeHealth.STALE, "-stale")
        self.set_class(snap.health == NodeHealth.DOWN, "-down")
        self.set_class(self.gpu is None, "-node")
        self.set_class(self.gpu is not None, "-gpu")
        self.query_one("#detail-title", Static).update(self._title(snap, now))
        key = (self.view.generation.get(self.node, 0), self.gpu)
        if key == self._drawn:
            return
        self._drawn = key
        static, metrics = gpu_pairs(snap).get(self.gpu, (None, None)) if self.gpu is not None else (None, None)
        facts = self._gpu_facts(snap, static, metrics) if self.gpu is not None else self._node_facts(snap)
        self.query_one("#detail-facts", Static).update(_facts_table(facts))
        self._show_processes(snap)
        if self.gpu is not None:
            self._show_health(snap, now)
        series = self.view.fleet.series
        charts = gpu_charts(snap, self.gpu, series) if self.gpu is not None else node_charts(snap, series)
        self._plot(charts, snap)

    def _title(self, snap: NodeSnapshot, now: float) -> Text:
        text = Text()
        if self.gpu is None:
            text.append(f" {snap.name}", "bold")
            text.append("  node")
        else:
            text.append(f" {snap.name}", "bold")
            text.append(f"  GPU {self.gpu}", "bold")
        text.append(f"  {fmt.state_text(snap, now)}")
        health = gpu_health(snap, self.gpu) if self.gpu is not None else None
        if health is not None:
            state = health.verdict.state
            text.append(f"  {GLYPHS.get(state, '?')} {state}", _LEVEL_STYLE.get(state, "dim"))
        facts = fmt.node_facts(snap)
        if facts:
            text.append("  " + " · ".join(facts), "dim")
        return text

    def _plot(self, charts: ChartSet, snap: NodeSnapshot) -> None:
        # x: seconds before the node's last sample (agent clock: no skew with ours).
        now = snap.latest.ts if snap.latest else 0.0
        suffix = f" ({charts.note})" if charts.note else ""
        suffix += " · x: seconds ago"
        self.query_one("#chart-util", MetricPlot).replot(charts.util, now, f"Utilization %{suffix}")
        self.query_one("#chart-power", MetricPlot).replot(charts.power, now, f"Power W{suffix}")
        self.query_one("#chart-temps", MetricPlot).replot(charts.temps, now, f"Temperature °C{suffix}")
        ylim = (0.0, charts.vram_total_gib) if charts.vram_total_gib else None
        self.query_one("#chart-vram", MetricPlot).replot(charts.vram, now, "VRAM GiB · x: seconds ago", ylim=ylim)

    def _show_health(self, snap: NodeSnapshot, now: float) -> None:
        assert self.gpu is not None
        health = gpu_health(snap, self.gpu)
        physical = physical_of(snap, self.gpu)
        readings = getattr(self.view.fleet, "health_readings", None)  # the tracker's bounded history
        history = readings(snap.name, physical) if readings is not None else ()
        table = self.query_one("#detail-health", DataTable)
        table.clear()
        for row in health_rows(health, history, now):
            style = _LEVEL_STYLE.get(row.level, "")
            mark = f"{GLYPHS[row.level]} " if row.level else ""
            table.add_row(
                Text(printable(row.label)),
                Text(mark + printable(row.value), style),
                Text(row.rate, "dim" if not row.level else style).append(f"  {row.since}" if row.since else "", "dim"),
            )
        table.styles.height = table.row_count + 1  # every row and the header: #detail-info scrolls
        title, _, why = printable(health_title(health, now)).partition(": ")
        box = self.query_one("#detail-health-box", Vertical)
        box.border_title = title
        self.query_one("#detail-health-why", Static).update(Text(why))
        self.query_one("#detail-health-why", Static).display = bool(why)
        state = health.verdict.state if health is not None else ""
        box.set_class(state == "warn", "-warn")
        box.set_class(state == "fail", "-fail")

    def _show_processes(self, snap: NodeSnapshot) -> None:
        rows = []
        for gpu in snap.latest.gpus if snap.latest else ():
            if self.gpu is not None and gpu.index != self.gpu:
                continue
            for p in gpu.processes:
                vram = "N/A" if p.vram_mib is None else f"{p.vram_mib / fmt.MIB_PER_GIB:.1f}"
                rows.append((str(gpu.index), str(p.pid), p.name, vram))
        rows_t = tuple(rows)
        if rows_t == self._procs:
            return
        self._procs = rows_t
        table = self.query_one("#detail-processes", DataTable)
        table.clear()
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))  # Text: process names are not markup
        table.styles.height = len(rows) + 3  # header and border: every row, #detail-info scrolls
        table.border_title = f"Processes ({len(rows)})"

    def _gpu_facts(self, snap: NodeSnapshot, s: GpuStatic | None, m: GpuMetrics | None) -> list[tuple[str, str]]:
        def opt(value: str | None) -> str:
            return value if value else "N/A"

        facts = [("Node", snap.name)]
        if s is None:
            return facts + [("GPU", f"{self.gpu} (no static facts yet)")]
        where = f"logical {s.index} · physical {s.physical}"
        if s.compute_partition not in (None, "SPX"):
            where += f" · partition {s.partition_id}"
        total = m.vram_total_mib if m and m.vram_total_mib is not None else s.vram_total_mib
        facts += [
            ("GPU", where),
            ("Model", opt(s.model)),
            ("BDF", opt(s.bdf)),
            ("Serial", opt(s.serial)),
            ("VBIOS", opt(s.vbios)),
            (
                "Partition",
                fmt.partition_text(s.compute_partition, s.memory_partition)
                + (f" (memory modes {', '.join(s.memory_caps)})" if s.memory_caps else ""),
            ),
            ("VRAM GiB", fmt.gib_pair(m.vram_used_mib if m else None, total)),
        ]
        if m is not None:
            facts += [
                ("Power W", fmt.watts_pair(m.power_w, m.power_cap_w)),
                ("Clocks MHz", f"gfx {fmt.mhz(m.gfx_clock_mhz)} · mem {fmt.mhz(m.mem_clock_mhz)}"),
            ]
        return facts

    def _node_facts(self, snap: NodeSnapshot) -> list[tuple[str, str]]:
        probe = snap.probe
        spec = self.view.fleet.spec(snap.name)
        facts = [
            ("Node", f"{snap.name} ({spec.transport}: {spec.host})"),
            ("State", snap.health.value + (f": {snap.error}" if snap.error else "")),
            ("Source", snap.source or "?"),
            ("GPUs", " · ".join(fmt.node_facts(snap)[:2]) or "?"),
        ]
        summary, _worst = node_summary(snap)
        if summary:
            facts.append(("Health", summary.removeprefix("health ")))
        if probe is not None:
            facts += [
                ("Hostname", probe.hostname or "?"),
                ("ROCm", probe.rocm or "?"),
                ("amdsmi", probe.amdsmi or "?"),
                ("vLLM", probe.vllm or "not installed"),
                ("Python", probe.python or "?"),
                ("NUMA balancing", {"0": "off", "1": "on"}.get(probe.numa_balancing or "", "?")),
            ]
        return facts

    # ------------------------------------------------------------ keys

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_scroll_info(self, lines: int) -> None:
        """up/down (a line), page up/down, home/end: the facts, health and processes panels."""
        self.query_one("#detail-info", Horizontal).scroll_relative(y=lines, animate=False)

    def action_end_processes(self) -> None:
        """K: end this GPU's processes (SIGTERM, then SIGKILL; confirmed in the dialog), as nvitop does."""
        from console.core.partition_rules import Blocker
        from console.ui.screens.process_end import ProcessEndScreen

        _, metrics = gpu_pairs(self.snapshot).get(self.gpu, (None, None)) if self.gpu is not None else (None, None)
        processes = [
            Blocker(p.pid, p.name, (self.gpu,)) for p in (metrics.processes if metrics else ()) if self.gpu is not None
        ]
        if not processes:
            what = f"GPU {self.gpu}" if self.gpu is not None else "a node view (pick a GPU)"
            self.notify(f"{self.node}: no process on {what} to end", markup=False)
            return
        fleet = self.view.fleet
        self.app.push_screen(ProcessEndScreen(fleet.spec(self.node), processes, pool=fleet.pool))

    def action_step(self, delta: int) -> None:
        """Previous/next GPU of the node, or previous/next node in the node view."""
        if self.gpu is None:
            names = self.view.fleet.node_names
            self.node = names[(names.index(self.node) + delta) % len(names)]
        else:
            indexes = sorted(gpu_pairs(self.snapshot))
            if not indexes:
                return
            pos = indexes.index(self.gpu) if self.gpu in indexes else 0
            self.gpu = indexes[(pos + delta) % len(indexes)]
        self._drawn = None
        self._procs = None
        self.redraw(console_host(self.app).clock())


# Rich styles of a health state or a row's level (the same in both themes: they mean alarm).
_LEVEL_STYLE = {"ok": "green", "warn": "bold yellow", "fail": "bold red", "unknown": "dim"}


def _facts_table(facts: list[tuple[str, str]]) -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in facts:
        # Text, not str: a str cell is read as markup, and these values come from the node
        # (a hostname or a version with "[/]" in it would fail to draw, or restyle the table).
        table.add_row(Text(printable(key)), Text(printable(value)))
    return table
