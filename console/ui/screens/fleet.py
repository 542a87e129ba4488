"""The fleet screen (default): every node's header and every logical GPU."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input

from console.core.instance_view import InstanceState, InstanceView
from console.ui.model.fleet_view import FleetView
from console.ui.model.instance_board import ACTIVE
from console.ui.model.protocols import console_host
from console.ui.model.rows import HOT_TEXT
from console.ui.widgets.gpu_table import GpuTable
from console.ui.widgets.key_bar import KeyBar
from console.ui.widgets.status_bar import StatusBar

FILTER_HINT = (
    f"filter: node, model, cpx, nps1, free, busy, hot ({HOT_TEXT}), live, down, sick, warn, throttled, ecc"
    " (Enter keeps, Esc clears)"
)

_SORT = Binding.Group("Sort", compact=True)

# (key, sort column, what the help says): shift+letter as k9s sorts; again reverses.
SORT_KEYS = (
    ("U", "util", "utilization"),
    ("M", "vram", "VRAM used"),
    ("V", "free", "free VRAM, the most free first"),
    ("W", "power", "power"),
    ("T", "temp", "junction temperature"),
    ("C", "clock", "GFX clock"),
    ("N", "name", "name (the default order)"),
)

Hint = tuple[str, str]  # (action, what the key bar says) for the row under the cursor


class FleetScreen(Screen):
    BINDINGS = [
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("escape", "clear_filter", "Clear filter / GPU marks", show=False, id="clear-filter"),
        Binding("r", "restart_node", "Reconnect node", show=False, id="restart-node"),
        Binding("s", "start_instance", "Start vLLM", id="start-instance"),
        Binding("l", "open_log", "vLLM log", show=False, id="instance-log"),
        Binding("x", "stop_instance", "Stop vLLM", show=False, id="stop-instance"),
        Binding("P", "partition", "Partition", show=False, id="partition"),
        Binding("b", "benchmark", "Benchmark", show=False, id="start-bench"),
        *(
            Binding(
                key,
                f"sort('{column}')",
                f"Sort by {words} (again: reverse)",
                show=False,
                id=f"sort-{column}",
                group=_SORT,
            )
            for key, column, words in SORT_KEYS
        ),
        Binding("F", "sort_scope", "Sort per node / across the fleet", show=False, id="sort-scope", group=_SORT),
    ]

    def __init__(self, view: FleetView) -> None:
        super().__init__(id="fleet-screen")
        self.view = view

    def compose(self) -> ComposeResult:
        # The size classes (-short/-tall, App.VERTICAL_BREAKPOINTS) are set before the first
        # frame: Textual sets them at the first Resize, just after it, which restyles and
        # repaints the whole screen once more while the console is starting.
        height = self.app.size.height
        for name in self._get_breakpoint_classes(height, self.app.VERTICAL_BREAKPOINTS or []):
            self.add_class(name)
        yield StatusBar(id="status-bar")
        yield GpuTable(self.view.fleet.series, id="gpu-table")
        yield Input(placeholder=FILTER_HINT, id="filter-input", compact=True)
        yield KeyBar()

    @property
    def table(self) -> GpuTable:
        return self.query_one(GpuTable)

    def watched_nodes(self) -> set[str]:
        return self.table.visible_nodes()

    def on_mount(self) -> None:
        self.query_one("#filter-input", Input).cursor_blink = console_host(self.app).cursor_blink
        self.table.focus()
        self.redraw(console_host(self.app).clock())

    def on_screen_resume(self) -> None:
        if not getattr(self.app, "paused", False):
            self.redraw(console_host(self.app).clock())

    def redraw(self, now: float) -> None:
        snapshots = self.view.fleet.snapshots()
        self.table.show(snapshots, self.view.generation, self.view.layout_version, now, console_host(self.app).board)
        self.query_one(StatusBar).show(
            snapshots,
            console_host(self.app).sampling_interval,
            self.table.filter_text,
            self.table.row_order.describe(),
        )
        self._refresh_hints()  # an instance that started or ended under the cursor

    # ------------------------------------------------------------ sort

    def action_sort(self, column: str) -> None:
        """U M V W T C N: sort by that column, largest first; the same key again reverses."""
        self.table.set_sort(self.table.row_order.pressed(column))
        self._redraw_status()

    def action_sort_scope(self) -> None:
        """F: sort each node's GPUs (headers kept), or every GPU of the fleet in one order."""
        self.table.set_sort(self.table.row_order.toggled_scope())
        self._redraw_status()

    # ------------------------------------------------------------ key bar

    _drawn_hints: tuple = ()

    def key_hints(self) -> list[Hint]:
        """The keys of the row under the cursor, first on the key bar: an instance's l x b, a
        node's P r, the number of GPUs marked with space."""
        node, marked = self.table.selection
        if marked:
            return [("", f"✓ {len(marked)} marked"), ("partition", "Partition"), ("clear_filter", "Unmark")]
        row = self.table.cursor_row
        if row is None:
            return []
        if row.gpu is None:
            return [("partition", "Partition"), ("restart_node", "Reconnect")]
        views = console_host(self.app).board.on_gpus(row.node).get(row.gpu)
        if not views:
            return []
        if views[0].state in ACTIVE:
            return [("open_log", "Log"), ("stop_instance", "Stop"), ("benchmark", "Bench")]
        return [("open_log", "Log")]

    def on_gpu_table_cursor_moved(self, _event: GpuTable.CursorMoved) -> None:
        self._refresh_hints()

    def _refresh_hints(self) -> None:
        hints = tuple(self.key_hints())
        if hints != self._drawn_hints:
            self._drawn_hints = hints
            for bar in self.query(KeyBar):
                bar.refresh()

    # ------------------------------------------------------------ filter

    def action_filter(self) -> None:
        box = self.query_one("#filter-input", Input)
        box.add_class("-open")
        # At once, not with focus() (deferred): "/free" typed or pasted in one burst would
        # send "free" to the table's keys (e: events, r: reconnect) before the box had focus.
        self.set_focus(box)

    def on_key(self, event: events.Key) -> None:
        """Letters typed in one burst with `/` ("/free" typed fast or pasted) were already queued
        for the table when the box took focus: they reach the box, in order, not the table."""
        box = self.query_one("#filter-input", Input)
        if self.focused is not box and any(
            b.action == "filter" for b in self._bindings.key_to_bindings.get(event.key, ())
        ):
            # opened here, as the key arrives, not when it has bubbled up to the app's bindings
            # behind the letters queued after it
            event.stop()
            event.prevent_default()
            self.action_filter()
        elif self.focused is box and event.is_printable and event.character:
            event.stop()
            event.prevent_default()
            box.insert_text_at_cursor(event.character)

    def set_filter(self, text: str) -> None:
        box = self.query_one("#filter-input", Input)
        box.value = text  # Input.Changed applies it to the table
        box.set_class(bool(text), "-open")
        self.table.set_filter(text)
        self._redraw_status()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter-input":
            self.table.set_filter(event.value)
            self._redraw_status()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter-input":
            event.input.set_class(bool(event.value.strip()), "-open")
            self.table.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":
            box = self.query_one("#filter-input", Input)
            return bool(box.value) or box.has_class("-open") or bool(self.table.selection[1])
        return True

    def action_clear_filter(self) -> None:
        """Esc: close the filter first; with no filter, drop the GPU marks."""
        box = self.query_one("#filter-input", Input)
        if box.value or box.has_class("-open"):
            self.set_filter("")
        else:
            self.table.clear_selection()
        self.table.focus()

    def _redraw_status(self) -> None:
        self.query_one(StatusBar).show(
            self.view.fleet.snapshots(),
            console_host(self.app).sampling_interval,
            self.table.filter_text,
            self.table.row_order.describe(),
        )

    # ------------------------------------------------------------ rows

    def on_gpu_table_row_activated(self, event: GpuTable.RowActivated) -> None:
        node, gpu = event.key
        console_host(self.app).open_detail(node, gpu)

    # ------------------------------------------------------------ vLLM instances

    def action_start_instance(self) -> None:
        """s: the marked GPUs (space), else the cursor's GPU; on a node header, the first free ones."""
        node, gpus = self.table.selection
        row = self.table.cursor_row
        if node is None:
            if row is None:
                return
            node, gpus = row.node, (() if row.gpu is None else (row.gpu,))

        def started(view) -> None:
            if view is not None:
                self.table.clear_selection()

        console_host(self.app).open_start_dialog(node, gpus, on_done=started)

    def _cursor_instance(self, verb: str) -> InstanceView | None:
        row = self.table.cursor_row
        if row is None:
            return None
        board = console_host(self.app).board
        if row.gpu is None:
            on_node = [v for v in board.views(row.node) if v.state in (*ACTIVE, InstanceState.FAILED)]
            if len(on_node) == 1:
                return on_node[0]
            self.app.notify(f"{verb}: put the cursor on a GPU row with an instance (i lists them all)", markup=False)
            return None
        views = board.on_gpus(row.node).get(row.gpu)
        if not views:
            self.app.notify(f"no vLLM instance on {row.node} GPU {row.gpu}", markup=False)
            return None
        return views[0]

    def action_open_log(self) -> None:
        view = self._cursor_instance("log")
        if view is not None:
            console_host(self.app).open_log(view.node, view.name)

    def action_stop_instance(self) -> None:
        view = self._cursor_instance("stop")
        if view is not None:
            console_host(self.app).confirm_stop(view.node, view.name)

    def action_benchmark(self) -> None:
        """b: benchmark the instance on the cursor's GPU; on a node header, its one ready
        instance or a choice. A GPU without a ready instance says so: the dialog never
        opens on another GPU's instance."""
        row = self.table.cursor_row
        if row is None:
            return
        host = console_host(self.app)
        if row.gpu is None:
            ready = [v for v in host.board.views(row.node) if v.state == InstanceState.READY]
            host.open_bench_dialog(ready[0] if len(ready) == 1 else None)
            return
        views = host.board.on_gpus(row.node).get(row.gpu)
        if not views:
            self.app.notify(f"no vLLM instance on {row.node} GPU {row.gpu} to benchmark (s starts one)", markup=False)
            return
        view = views[0]
        if view.state != InstanceState.READY:
            self.app.notify(
                f"{view.name} on {row.node} GPU {row.gpu} is {view.state.value}: a benchmark needs a ready instance",
                markup=False,
            )
            return
        host.open_bench_dialog(view)

    def action_partition(self) -> None:
        """P: switch partition modes of the marked GPUs' physical GPUs (none marked: the whole node)."""
        node, gpus = self.table.selection
        if node is None:
            row = self.table.cursor_row
            if row is None:
                return
            node, gpus = row.node, ()
        console_host(self.app).open_partition_dialog(node, gpus)

    def action_restart_node(self) -> None:
        row = self.table.cursor_row
        if row is not None:
            console_host(self.app).restart_node(row.node)
