"""The fleet's GPU table: a Line API widget that renders only the lines on screen.

A DataTable would keep every cell of 4096 rows as state and rebuild them each
tick; here the table keeps the latest snapshots and renders a visible line on
demand, caching each line until its node's data generation changes.
"""

from __future__ import annotations

from typing import Callable, ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBarRender
from textual.strip import Strip

from console.core.model import NodeHealth, NodeSnapshot
from console.core.series import BlockSeries, RingSeries
from console.core.telemetry import is_nvidia_source
from console.core.text import printable
from console.ui.model import format as fmt
from console.ui.model import health_view as hv
from console.ui.model import instance_board as ib
from console.ui.model.gpu_columns import GAP, NODE_MAX, fit, gpu_label, layout_columns, part_label, vram_total
from console.ui.model.rows import (
    GpuPair,
    Row,
    RowFilter,
    RowKey,
    build_rows,
    change_mark,
    gpu_pairs,
    header_tail,
)
from console.ui.model.sort import DEFAULT_ORDER, SortOrder

SeriesLookup = Callable[[str, int, str], "RingSeries | BlockSeries | None"]

_CACHE_LIMIT = 4096  # lines; cleared wholesale past this (bounded memory)


class WholeCellScrollBar(ScrollBarRender):
    """A scrollbar whose thumb ends on whole cells. Textual's draws the thumb's ends with the
    block glyphs ▁..▇ for 1/8-cell precision: beside a table of sparklines (and in a 256-colour
    terminal, where the bar's colours fade into the background) those read as stray chart cells
    at the table's right edge, seen after a filter changed the row count."""

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * len(ScrollBarRender.VERTICAL_BARS)


class GpuTable(ScrollView, can_focus=True):
    """One header line per node, then one line per logical GPU under its physical GPU."""

    DEFAULT_CSS = """
    GpuTable { height: 1fr; background: $surface; overflow-x: hidden; }
    GpuTable > .gpu-table--columns { text-style: bold; color: $text-muted; background: $panel; }
    GpuTable > .gpu-table--node { text-style: bold; background: $boost; }
    GpuTable > .gpu-table--live { color: $text-success; }
    GpuTable > .gpu-table--stale { color: $text-warning; text-style: bold; }
    GpuTable > .gpu-table--down { color: $text-error; text-style: bold; }
    GpuTable > .gpu-table--connecting { color: $text-muted; }
    GpuTable > .gpu-table--warn { color: $text-warning; }
    GpuTable > .gpu-table--crit { color: $text-error; text-style: bold; }
    GpuTable > .gpu-table--spark { color: $accent; }
    GpuTable > .gpu-table--muted { color: $text-muted; }
    GpuTable > .gpu-table--aged { text-style: dim; }
    GpuTable > .gpu-table--cursor { background: $block-cursor-blurred-background; }
    GpuTable:focus > .gpu-table--cursor { background: $block-cursor-background; }
    GpuTable > .gpu-table--selected { color: $text-accent; text-style: bold; }
    GpuTable > .gpu-table--ready { color: $text-success; }
    GpuTable > .gpu-table--loading { color: $text-warning; }
    GpuTable > .gpu-table--failed { color: $text-error; text-style: bold; }
    GpuTable > .gpu-table--unmanaged { color: $text-muted; }
    """

    COMPONENT_CLASSES = {
        "gpu-table--columns",
        "gpu-table--node",
        "gpu-table--live",
        "gpu-table--stale",
        "gpu-table--down",
        "gpu-table--connecting",
        "gpu-table--warn",
        "gpu-table--crit",
        "gpu-table--spark",
        "gpu-table--muted",
        "gpu-table--aged",
        "gpu-table--cursor",
        "gpu-table--selected",
        "gpu-table--ready",
        "gpu-table--loading",
        "gpu-table--failed",
        "gpu-table--unmanaged",
    }

    BINDINGS = [
        Binding("enter", "activate", "Detail", id="open-detail"),
        Binding("up,k", "cursor(-1)", "Up", show=False, id="cursor-up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="cursor-down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="page-up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="page-down"),
        Binding("home", "jump(0)", "First row", show=False, id="first-row"),
        Binding("end", "jump(-1)", "Last row", show=False, id="last-row"),
        Binding("right_square_bracket", "node_step(1)", "Next node", show=False, id="next-node"),
        Binding("left_square_bracket", "node_step(-1)", "Previous node", show=False, id="prev-node"),
        Binding("space", "toggle_select", "Mark GPU for s (on a node: all)", show=False, id="select-gpu"),
    ]

    class CursorMoved(Message):
        """The row under the cursor or the marks changed (the key bar follows them)."""

    class RowActivated(Message):
        """Enter or a double click on a row: open its detail."""

        def __init__(self, key: RowKey) -> None:
            super().__init__()
            self.key = key

    def __init__(self, series: SeriesLookup, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._series = series
        self._board: ib.InstanceBoard | None = None
        self._drawn_igen: dict[str, int] = {}  # instance generation per node, as drawn
        # GPUs marked with space, for the start dialog: one node at a time.
        self._selected_node: str | None = None
        self._selected: set[int] = set()
        self._snapshots: dict[str, NodeSnapshot] = {}
        self._pairs: dict[str, dict[int, GpuPair]] = {}
        self._drawn_gen: dict[str, int] = {}
        self._layout_version = -1
        self._filter = RowFilter()
        self._order = DEFAULT_ORDER
        self._sorted_at = 0.0  # when the rows were last ordered (clock seconds)
        self._resort_due = False  # new numbers since then (a sort by a metric takes them at the next second)
        self._announced: tuple = ()  # (cursor row, marks) last told with CursorMoved
        self._rows: list[Row] = []
        self._row_index: dict[RowKey, int] = {}
        self._cursor = 0
        self._now = 0.0
        # Rendered lines by row identity -> (data key, strip): a line is rebuilt only
        # when its node's generation (or the cursor, width, clock second) moved.
        self._cache: dict[tuple, tuple[tuple, Strip]] = {}
        self._styles: dict[str, Style] = {}  # resolved component styles, until the CSS changes
        self._pairs_gen: dict[str, int] = {}
        self.redraws = 0  # how many times new data was taken in (tests, perf)

    # ------------------------------------------------------------ data in

    def show(
        self,
        snapshots: list[NodeSnapshot],
        generation: dict[str, int],
        layout_version: int,
        now: float,
        instances: ib.InstanceBoard | None = None,
    ) -> bool:
        """Take the fleet's current state; repaint only the lines on screen that can differ."""
        moved: set[str] = set()  # nodes whose data or instances changed
        self._board = instances
        for snap in snapshots:
            gen = generation.get(snap.name, 0)
            if self._drawn_gen.get(snap.name) != gen or snap.name not in self._snapshots:
                self._snapshots[snap.name] = snap
                self._drawn_gen[snap.name] = gen
                moved.add(snap.name)
            igen = instances.generation.get(snap.name, 0) if instances is not None else 0
            if self._drawn_igen.get(snap.name) != igen:
                self._drawn_igen[snap.name] = igen
                moved.add(snap.name)
        changed = bool(moved)
        relayout = layout_version != self._layout_version
        # busy/idle filters and a sort by a metric depend on the latest metrics, not only on the
        # topology. A sort alone re-sorts at most once a second: rows that jump at every sample
        # cannot be read, and a 4096-row sort is the costliest part of a redraw.
        self._resort_due = self._resort_due or (changed and self._order.key != "name")
        resort = self._resort_due and int(now) != int(self._sorted_at)
        ticked = int(now) != int(self._now)
        self._now = now
        if relayout or (changed and self._filter) or resort:
            self._layout_version = layout_version
            self._rebuild_rows()
            self.redraws += 1
            self.refresh()
        elif changed or ticked:  # rows in place: repaint only the lines that differ
            self.redraws += 1
            self._refresh_lines(moved, ticked)
        return changed

    def _refresh_lines(self, moved: set[str], ticked: bool) -> None:
        """Repaint the lines on screen of the nodes that moved, and the node headers when the
        clock second moved (their sample age): an idle console with one node's new sample
        repaints that node's rows, not the screen (the compositor renders only those lines),
        and of those only the ones whose text or colours differ."""
        top = int(self.scroll_offset.y)
        width = max(self.virtual_size.width, self.size.width)
        regions: list[Region] = []
        start = -1
        rows = self._rows[top : top + self._body_height()]
        for y, row in enumerate(rows, start=1):
            dirty = row.node in moved or (ticked and row.gpu is None)
            if dirty:  # built now (render_line keeps it): a line that reads the same is not repainted
                before = self._cache.get(row.key)
                dirty = before is None or before[1] != self.render_line(y)
            if dirty and start < 0:
                start = y
            elif not dirty and start >= 0:
                regions.append(Region(0, start, width, y - start))
                start = -1
        if start >= 0:
            regions.append(Region(0, start, width, len(rows) + 1 - start))
        if regions:
            self.refresh(*regions)

    def set_filter(self, text: str) -> None:
        self._filter = RowFilter(text)
        self._rebuild_rows()
        self.refresh()

    @property
    def filter_text(self) -> str:
        return self._filter.text

    @property
    def row_order(self) -> SortOrder:
        return self._order

    def set_sort(self, order: SortOrder) -> None:
        """A new order; the cursor goes to the first GPU row (the largest value: one key finds the hottest)."""
        if order == self._order:
            return
        self._order = order
        self._rebuild_rows()
        first = next((i for i, row in enumerate(self._rows) if row.gpu is not None), 0)
        self._move(first)
        self.scroll_to(y=0 if first <= 1 else first, animate=False)
        self.refresh()

    @property
    def rows(self) -> list[Row]:
        return self._rows

    @property
    def cursor_row(self) -> Row | None:
        return self._rows[self._cursor] if self._rows else None

    # ------------------------------------------------------------ GPU selection (space)

    @property
    def selection(self) -> tuple[str | None, tuple[int, ...]]:
        """(node, GPUs) marked with space; (None, ()) when none are."""
        if not self._selected:
            return None, ()
        return self._selected_node, tuple(sorted(self._selected))

    def clear_selection(self) -> bool:
        had = bool(self._selected)
        self._selected = set()
        self._selected_node = None
        if had:
            self._cache.clear()
            self.refresh()
            self._announce()
        return had

    def set_selection(self, node: str, gpus: set[int] | tuple[int, ...]) -> None:
        self._selected_node = node if gpus else None
        self._selected = set(gpus)
        self._cache.clear()
        self.refresh()
        self._announce()

    def action_toggle_select(self) -> None:
        """Space: mark or unmark the GPU (a node header: all its GPUs shown); marks stay on one node."""
        row = self.cursor_row
        if row is None:
            return
        current = self._selected if self._selected_node == row.node else set()
        if row.is_header:
            gpus = {r.gpu for r in self._rows if r.node == row.node and r.gpu is not None}
            chosen = set() if gpus and gpus <= current else current | gpus
        else:
            chosen = current ^ ({row.gpu} if row.gpu is not None else set())
        self.set_selection(row.node, chosen)
        if not row.is_header:
            self._move(self._cursor + 1)
        self._announce()

    def is_selected(self, row: Row) -> bool:
        return row.node == self._selected_node and row.gpu in self._selected

    def select(self, key: RowKey) -> bool:
        index = self._row_index.get(key)
        if index is None:
            return False
        self._move(index)
        return True

    def _rebuild_rows(self) -> None:
        current = self.cursor_row
        snaps = list(self._snapshots.values())
        self._sorted_at, self._resort_due = self._now, False
        self._rows = build_rows(snaps, self._filter, self._order, self._occupied)
        self._row_index = {row.key: i for i, row in enumerate(self._rows)}
        self._cache.clear()
        width = self._content_width() or 80
        self.virtual_size = Size(width, len(self._rows) + 1)
        index = self._row_index.get(current.key) if current else None
        if index is None and current is not None:
            index = self._row_index.get((current.node, None))
        self._cursor = min(index if index is not None else self._cursor, max(0, len(self._rows) - 1))
        self._scroll_to_cursor()
        self._announce()

    def _occupied(self, node: str, gpu: int) -> bool:
        """An active instance holds the GPU (the free/busy filter words)."""
        if self._board is None:
            return False
        return any(v.state in ib.ACTIVE for v in self._board.on_gpus(node).get(gpu, ()))

    def _announce(self) -> None:
        row = self.cursor_row
        now = (row.key if row is not None else None, self._selected_node, len(self._selected))
        if now != self._announced:
            self._announced = now
            self.post_message(self.CursorMoved())

    def _node_width(self) -> int:
        """The NODE column's width when the fleet is sorted across nodes (0: no column)."""
        if not self._order.fleet:
            return 0
        return min(NODE_MAX, max((cell_len(printable(n)) for n in self._snapshots), default=4))

    def visible_nodes(self) -> set[str]:
        """The nodes with a row on screen now (the fleet refreshes those first)."""
        top = int(self.scroll_offset.y)
        return {row.node for row in self._rows[top : top + self._body_height()]}

    # ------------------------------------------------------------ navigation

    def _body_height(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _scroll_to_cursor(self) -> None:
        top = int(self.scroll_offset.y)
        height = self._body_height()
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False)
        elif self._cursor >= top + height:
            self.scroll_to(y=self._cursor - height + 1, animate=False)

    def _move(self, index: int) -> None:
        if not self._rows:
            return
        index = max(0, min(len(self._rows) - 1, index))
        if index != self._cursor:
            self._cursor = index
            self.refresh()
        self._scroll_to_cursor()
        self._announce()

    def action_cursor(self, delta: int) -> None:
        self._move(self._cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move(self._cursor + direction * self._body_height())

    def action_jump(self, where: int) -> None:
        self._move(0 if where == 0 else len(self._rows) - 1)

    def action_node_step(self, direction: int) -> None:
        headers = [i for i, row in enumerate(self._rows) if row.is_header]
        if direction > 0:
            target = next((i for i in headers if i > self._cursor), None)
        else:
            target = next((i for i in reversed(headers) if i < self._cursor), None)
        if target is not None:
            self._move(target)

    def action_activate(self) -> None:
        row = self.cursor_row
        if row is not None:
            self.post_message(self.RowActivated(row.key))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:
            return
        index = int(self.scroll_offset.y) + offset.y - 1
        if 0 <= index < len(self._rows):
            self._move(index)
            if event.chain >= 2:
                self.action_activate()

    def on_mount(self) -> None:
        # per instance, as Textual documents it (its ClassVar annotation says otherwise)
        self.vertical_scrollbar.renderer = WholeCellScrollBar  # type: ignore[misc]

    def on_resize(self, event: events.Resize) -> None:
        self._cache.clear()
        self.virtual_size = Size(event.size.width, len(self._rows) + 1)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._forget_styles()

    def on_focus(self) -> None:
        self._forget_styles()  # the cursor colour depends on :focus

    def on_blur(self) -> None:
        self._forget_styles()

    def _forget_styles(self) -> None:
        self._styles.clear()
        self._cache.clear()

    # ------------------------------------------------------------ rendering

    def _content_width(self) -> int:
        # Without the vertical scrollbar: a line as wide as the widget would lose its last cells.
        return self.scrollable_content_region.width

    def render_line(self, y: int) -> Strip:
        width = self._content_width()
        if y == 0:
            return self._cached("columns", (width, self._order), lambda: self._columns_strip(width))
        index = int(self.scroll_offset.y) + y - 1
        if index >= len(self._rows):
            if index == 0 and self._filter:
                note = f" nothing matches the filter {self._filter.text!r} (Esc clears it)"
                return Strip([Segment(note, self._style("base") + self._style("muted"))]).adjust_cell_length(
                    width, self._style("base")
                )
            return Strip.blank(width, self._style("base"))
        row = self._rows[index]
        gen = (self._drawn_gen.get(row.node, 0), self._drawn_igen.get(row.node, 0))
        cursor = index == self._cursor
        gpu = row.gpu
        if gpu is None:  # the node's header
            version: tuple = (gen, width, cursor, int(self._now))
            return self._cached(row.key, version, lambda: self._node_strip(row, width, cursor))
        version = (gen, width, cursor, row.tree, self.is_selected(row), self._order.fleet)
        return self._cached(row.key, version, lambda: self._gpu_strip(row, gpu, width, cursor))

    def _cached(self, key, version: tuple, build: Callable[[], Strip]) -> Strip:
        hit = self._cache.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        if hit is None and len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        strip = build()
        self._cache[key] = (version, strip)
        return strip

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self._resolve_style(name)
        return style

    def _resolve_style(self, name: str) -> Style:
        if name == "base":
            return self.rich_style
        # Resolved in full, because theme colours such as $boost and $text-muted are
        # translucent and must be blended over the background. Only the classes that
        # set a background keep it; the others are laid over cursor and header rows.
        style = self.get_component_rich_style(f"gpu-table--{name}")
        if name in ("columns", "node", "cursor"):
            return style
        return Style(color=style.color, bold=style.bold, dim=style.dim, italic=style.italic)

    def _node_pairs(self, node: str) -> dict[int, GpuPair]:
        """Static facts and metrics by GPU index, rebuilt lazily: only for nodes on screen."""
        gen = self._drawn_gen.get(node, 0)
        if self._pairs_gen.get(node) != gen or node not in self._pairs:
            self._pairs[node] = gpu_pairs(self._snapshots[node])
            self._pairs_gen[node] = gen
        return self._pairs[node]

    def _columns_strip(self, width: int) -> Strip:
        cols, spark = layout_columns(width, self._node_width())
        base = self._style("base") + self._style("columns")
        cells = []
        order = self._order
        for col in cols:
            title = col.title
            if col.key == order.column and not order.is_default:
                title = (title + order.arrow) if col.right else (title + " " + order.arrow)
            if spark and col.key in ("util", "power"):
                cells.append(fit(title, col.width, col.right) + " " + " " * spark)
            else:
                cells.append(fit(title, col.width, col.right))
        text = (" " * GAP).join(cells)
        return Strip([Segment(fit(text, width, False), base)], width)

    def _row_base(self, cursor: bool, kind: str | None = None) -> Style:
        base = self._style("base")
        if kind:
            base = base + self._style(kind)
        return base + self._style("cursor") if cursor else base

    def _node_strip(self, row: Row, width: int, cursor: bool) -> Strip:
        snap = self._snapshots[row.node]
        base = self._row_base(cursor, "node")
        state_style = base + self._style(snap.health.value)
        marker = {"live": "●", "stale": "◐", "down": "✖", "connecting": "○"}[snap.health.value]
        segments = [
            Segment(f" {marker} ", state_style),
            Segment(printable(snap.name), base),
            Segment("  ", base),
            # segments are written as they are: text from the node is made printable
            Segment(printable(fmt.state_text(snap, self._now)), state_style),
        ]
        health_text, worst = hv.node_summary(snap)
        if health_text:
            segments.append(Segment("  " + health_text, base + self._style(_HEALTH_STYLE.get(worst, "muted"))))
        summary = ib.node_summary(self._board.counts(row.node)) if self._board is not None else ""
        if summary:
            segments.append(Segment("  " + summary, base))
        # after health and instances, which a narrow terminal must still show; the mark (versions
        # changed since last seen, B acknowledges) after the GPU model and mode, before versions
        mark = change_mark(row.node, getattr(self.app, "node_changes", None) or {})
        facts_style = base if cursor else base + self._style("muted")
        for text, is_mark in header_tail(snap, mark):
            segments.append(Segment("  " + printable(text), base + self._style("warn") if is_mark else facts_style))
        return Strip(segments).adjust_cell_length(width, base)

    def _gpu_strip(self, row: Row, gpu: int, width: int, cursor: bool) -> Strip:
        snap = self._snapshots[row.node]
        static, m = self._node_pairs(row.node).get(gpu, (None, None))
        base = self._row_base(cursor)
        # Muted grey is unreadable on the cursor bar: the cursor row keeps its own colour.
        muted = Style() if cursor else self._style("muted")
        cells = self._gpu_cells(row, static, m, muted)
        cols, spark = layout_columns(width, self._node_width())
        segments: list[Segment] = []
        for col in cols:
            text, style = cells[col.key]
            if segments:
                segments.append(Segment(" " * GAP, base))
            if col.key == "vllm":
                segments.extend(self._vllm_segments(row.node, gpu, col.width, base))
                continue
            if col.key == "gpu" and self.is_selected(row):
                text, style = "✓" + fit(text, col.width - 1, True), self._style("selected")
            segments.append(Segment(fit(text, col.width, col.right), base + style if style else base))
            if spark and col.key in _SPARKS:
                metric, top = _SPARKS[col.key](m)
                series = self._series(row.node, gpu, metric)
                values = series.values(spark) if series is not None else []
                segments.append(Segment(" " + fmt.sparkline(values, spark, top), base + self._style("spark")))
        strip = Strip(segments).adjust_cell_length(width, base)
        if snap.health != NodeHealth.LIVE:
            strip = strip.apply_style(self._style("aged"))  # last values, visibly old
        return strip

    def _gpu_cells(self, row: Row, static, m, muted: Style) -> dict[str, tuple[str, Style | None]]:
        """Text and threshold style of every column for one logical GPU."""
        # Partitions after a physical GPU's first report N/A for device-wide values:
        # those cells stay empty rather than repeat or invent a number.
        later_partition = row.tree in ("├", "└")

        def device(value: float | None, text: str, style: Style | None) -> tuple[str, Style | None]:
            if value is None:
                return ("", None) if later_partition else (text, muted)
            return text, style

        def temp(value: float | None, limits: tuple[float, float]) -> tuple[str, Style | None]:
            return device(value, fmt.temp(value), self._level(fmt.level(value, limits)))

        util = m.util_pct if m else None
        used, total = (m.vram_used_mib if m else None), vram_total(static, m)
        dev = self._device_metrics(row, static, m)
        power, cap = (dev.power_w, dev.power_cap_w) if dev else (None, None)
        gfx = dev.gfx_clock_mhz if dev else None
        part = part_label(static, is_nvidia_source(self._snapshots[row.node].source))
        health = hv.health_of(self._snapshots[row.node], row.physical if row.physical is not None else row.gpu or 0)
        mark = hv.mark(health)
        quiet = mark.state in ("", hv.UNKNOWN) or (later_partition and mark.state == hv.OK)
        return {
            "node": ("" if later_partition else row.node, None),  # named once per physical GPU
            "gpu": (gpu_label(row), muted if later_partition else None),
            # a partition shows its physical GPU's state (later partitions: ok muted, as device-wide cells)
            "health": (mark.text, muted if quiet else self._health_style(mark)),
            "util": (fmt.pct(util), muted if util is None else None),
            "vram": (fmt.gib_pair(used, total), self._level(fmt.fraction_level(used, total, fmt.VRAM_FRACTION))),
            "power": device(
                power, fmt.watts_pair(power, cap), self._level(fmt.fraction_level(power, cap, fmt.POWER_FRACTION))
            ),
            "tj": temp(dev.temp_junction_c if dev else None, fmt.TEMP_JUNCTION),
            "tmem": temp(dev.temp_mem_c if dev else None, fmt.TEMP_MEM),
            "gfx": device(gfx, fmt.mhz(gfx), None),
            "part": (part, muted),
            "vllm": ("", None),  # drawn by _vllm_segments
        }

    def _device_metrics(self, row: Row, static, m):
        """Whose device-wide values (power, temperatures, clock) a row shows: its own; on the
        first row a filter kept of a partitioned GPU, its physical GPU's (its first partition's),
        so a filtered tree still says how hot and loaded each physical GPU is."""
        if row.tree not in ("┬", "─") or static is None or static.partition_id == 0:
            return m
        for other, metrics in self._node_pairs(row.node).values():
            if other is not None and other.physical == row.physical and other.partition_id == 0:
                return metrics
        return m

    def _vllm_segments(self, node: str, gpu: int, width: int, base: Style) -> list[Segment]:
        """'● tiny-g12 ready': the state's glyph and word coloured; the name is cut first."""
        if width <= 0:
            return []
        views = self._board.on_gpus(node).get(gpu) if self._board is not None else None
        if not views:
            return [Segment(" " * width, base)]
        name, word, level = ib.gpu_text(views)
        style = base + self._style(level if level != ib.ENDED_LEVEL else "muted")
        head = ib.glyph(views[0]) + " "
        tail = " " + word
        room = width - cell_len(head) - cell_len(tail)
        if room < min(8, cell_len(name)):  # too narrow for all three: glyph and name
            tail = ""
            room = width - cell_len(head)
        return [
            Segment(head, style),
            # cut in the middle: instances of one preset differ in their ends (…fp8-g4, …cpx-g1)
            Segment(fit(ib.middle_cut(name, max(0, room)), max(0, min(room, cell_len(name))), False), base),
            Segment(fit(tail, width - cell_len(head) - min(max(0, room), cell_len(name)), False), style),
        ]

    def _health_style(self, mark: hv.Mark) -> Style:
        return self._style(_HEALTH_STYLE.get(mark.state, "muted"))

    def _level(self, level: str) -> Style | None:
        return None if level == fmt.OK else self._style(level)


# Health state -> component class (no reading yet: muted).
_HEALTH_STYLE = {hv.OK: "live", hv.WARN: "warn", hv.FAIL: "crit", hv.UNKNOWN: "muted"}

# Sparkline after these columns: (metric, top of the scale) for a GPU's latest metrics.
_SPARKS = {
    "util": lambda m: ("util_pct", 100.0),
    "power": lambda m: ("power_w", m.power_cap_w if m else None),
}
