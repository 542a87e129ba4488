"""`i`: every vLLM instance of every node, with its state, stage or failure, GPUs, port, model, uptime."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import DataTable, Static

from console.core.gpus import gpu_span
from console.services.groups import GroupView, group_views
from console.services.instances import InstanceView
from console.ui.model import instance_board as ib
from console.ui.model.protocols import console_host
from console.ui.widgets.key_bar import KeyBar
from console.ui.widgets.status_bar import StatusBar
from console.ui.widgets.titled_table import titled_table

_LEVEL_STYLE = {
    ib.READY: "green",
    ib.LOADING: "yellow",
    ib.FAILED: "bold red",
    ib.UNMANAGED: "dim",
    ib.ENDED_LEVEL: "dim",
}
_EMPTY = (
    "No vLLM instances yet. Press [b]s[/b] to start one; on the fleet screen, mark GPUs "
    "with [b]space[/b] first and press [b]s[/b] there."
)
COLUMNS = ("Node", "Name", "State", "Stage / reason", "GPUs", "Port", "Up", "Model")
_CAPS = {"Name": 30, "Stage / reason": 26}  # longer values are cut (the line below the table has them whole)
_MODEL_MIN = 14


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def uptime(view: InstanceView, now: float) -> str:
    if view.state not in ib.ACTIVE or not view.started:
        return ""
    s = max(0, int(now - view.started))
    if s >= 86400:
        return f"{s // 86400}d{s % 86400 // 3600:02d}h"
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s"


def row_texts(view: InstanceView, now: float) -> tuple[str, ...]:
    """The cells of one instance as plain text, in COLUMNS order."""
    return (
        "+".join(view.nodes) if view.nodes else view.node,  # a multi-node instance names all its nodes
        view.name,
        f"{ib.glyph(view)} {view.state.value}",
        ib.short_detail(view),
        gpu_span(view.gpus, "-"),
        str(view.port or "-"),
        uptime(view, now),
        view.model or "",
    )


def with_group_rows(views: list[InstanceView]) -> list[InstanceView | GroupView]:
    """The instances with one row per replica group put right above its first replica."""
    groups = {g.name: g for g in group_views(views)}
    out: list[InstanceView | GroupView] = []
    shown: set[str] = set()
    for v in views:
        if v.group and v.group in groups and v.group not in shown:
            shown.add(v.group)
            out.append(groups[v.group])
        out.append(v)
    return out


def group_texts(group: GroupView) -> tuple[str, ...]:
    """A group's row: ready/total in the state column, its first failure beside it."""
    gpus = sorted({g for v in group.replicas for g in v.gpus})
    failed = group.failed
    detail = f"{len(failed)} failed: {ib.short_detail(failed[0])}" if failed else f"{group.total} replicas"
    model = next((v.model for v in group.replicas if v.model), "")
    return (
        ",".join(group.nodes),
        f"▣ {group.name}",
        f"{group.ready}/{group.total} ready",
        detail,
        gpu_span(tuple(gpus), "-"),
        "-",
        "",
        model or "",
    )


def group_level(group: GroupView) -> str:
    if group.failed:
        return ib.FAILED
    if group.ready == group.total:
        return ib.READY
    if any(ib.level(v) == ib.LOADING for v in group.replicas):
        return ib.LOADING
    return ib.ENDED_LEVEL


# What gives way in a narrow terminal, in order: a column cut down to a width, or dropped (None);
# the name goes last (the line below the table has everything whole).
_GIVE_WAY: tuple[tuple[str, int | None], ...] = (
    ("Stage / reason", 14),
    ("Up", None),
    ("Model", 8),
    ("Port", None),
    ("Name", 12),
)


def fit_table(rows: list[tuple[str, ...]], width: int) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The columns that fit `width` and the rows' cells for them: names cut in the middle so that
    they stay distinguishable (their distinguishing end kept), reasons and the model cut, and at
    last the uptime and the port dropped; the node, name, state and GPUs always stay."""
    cols = list(COLUMNS)
    rows = [tuple(r) for r in rows]
    widths = {c: max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(COLUMNS)}
    widths["Name"] = min(widths["Name"], _CAPS["Name"])
    widths["Stage / reason"] = min(widths["Stage / reason"], _CAPS["Stage / reason"])
    model_natural = widths["Model"]
    widths["Model"] = min(model_natural, _MODEL_MIN)  # the model takes what is left, at the end

    def over() -> int:
        return sum(widths[c] + 2 for c in cols) + 2 - width  # cell padding, a scrollbar

    for col, least in _GIVE_WAY:
        if over() <= 0:
            break
        if least is None:
            cols.remove(col)
        else:
            widths[col] -= max(0, min(widths[col] - max(least, len(col)), over()))
    widths["Model"] = max(widths["Model"], min(model_natural, widths["Model"] - over()))
    names = ib.distinct_cuts([r[1] for r in rows], widths["Name"])
    out = []
    for r, name in zip(rows, names):
        cells = dict(zip(COLUMNS, r))
        cells["Name"] = name
        for col in ("Stage / reason", "Model"):
            cells[col] = _cut(cells[col], widths[col])
        out.append(tuple(cells[c] for c in cols))  # a dropped column's cell is left out
    return tuple(cols), out


def fit_rows(rows: list[tuple[str, ...]], width: int) -> list[tuple[str, ...]]:
    """The rows' cells as fit_table cuts them for `width` (its columns)."""
    return fit_table(rows, width)[1]


def styled(view: InstanceView | GroupView, texts: tuple[str, ...]) -> tuple[Text, ...]:
    level = group_level(view) if isinstance(view, GroupView) else ib.level(view)
    cells = [Text(t) for t in texts]  # Text: names and reasons are not markup
    cells[2].stylize(_LEVEL_STYLE.get(level, ""))
    if level == ib.FAILED:
        cells[3].stylize("red")
    elif level == ib.LOADING:
        cells[3].stylize("yellow")
    return tuple(cells)


class InstancesScreen(Screen):
    BINDINGS = [
        # priority: the table's own Enter would hide this one from the footer
        Binding("enter", "open_log", "Log", id="open-log", priority=True),
        Binding("l", "open_log", "Log", show=False, id="instance-log"),
        Binding("s", "start_instance", "Start", id="start-instance"),
        Binding("x", "stop_instance", "Stop", id="stop-instance"),  # on a group's row: the group
        Binding("b", "benchmark", "Benchmark", id="start-bench"),
        Binding("d", "forget_instance", "Forget ended", show=False, id="forget-instance"),
        Binding("escape,backspace", "back", "Back", id="close-instances"),
    ]

    def __init__(self) -> None:
        super().__init__(id="instances-screen")
        self._drawn: tuple | None = None
        self._keys: list[tuple[str, str]] = []
        self._groups: dict[str, GroupView] = {}
        self._ready = False

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status-bar")
        yield from titled_table("instances", COLUMNS)
        yield KeyBar()

    def on_mount(self) -> None:
        self._ready = True
        self.query_one(DataTable).focus()
        self.redraw(console_host(self.app).clock())

    def on_screen_resume(self) -> None:
        self.set_class(getattr(self.app, "paused", False), "-paused")
        if self._ready and not getattr(self.app, "paused", False):
            self.redraw(console_host(self.app).clock())

    # ------------------------------------------------------------ drawing

    @property
    def board(self) -> ib.InstanceBoard:
        return console_host(self.app).board

    def redraw(self, now: float) -> None:
        if not self._ready:
            return
        app = console_host(self.app)
        self.query_one(StatusBar).show(app.fleet.snapshots(), app.sampling_interval)
        views = self.board.views()
        entries = with_group_rows(views)
        texts = [group_texts(e) if isinstance(e, GroupView) else row_texts(e, now) for e in entries]
        columns, fitted = fit_table(texts, self.size.width)
        rows = tuple(fitted)
        title = self._title(views)
        key = (columns, rows, title)
        if key != self._drawn:
            self._drawn = key
            self.query_one("#instances-title", Static).update(title)
            self._set_columns(columns)
            self._fill(entries, rows)
        self._show_detail()

    def _title(self, views: list[InstanceView]) -> str:
        counts: dict[str, int] = {}
        for v in views:
            counts[ib.level(v)] = counts.get(ib.level(v), 0) + 1
        nodes = len({n for v in views for n in (v.nodes or (v.node,))})
        parts = [f" [b]vLLM instances[/b] {len(views)} on {nodes} node{'s' if nodes != 1 else ''}"]
        for level, var in (
            (ib.READY, "$text-success"),
            (ib.LOADING, "$text-warning"),
            (ib.FAILED, "$text-error"),
            (ib.UNMANAGED, "$text-muted"),
            (ib.ENDED_LEVEL, "$text-muted"),
        ):
            if counts.get(level):
                parts.append(f"[{var}]{counts[level]} {level}[/]")
        board = self.board
        fleet = console_host(self.app).fleet
        for node in fleet.node_names:
            if node in board.errors:
                parts.append(f"[$text-error]{escape(board.errors[node])}[/]")
            elif node not in board.polled_once:
                parts.append(f"[i]{escape(node)}: not read yet[/i]")
            elif fleet.snapshot(node).health.value in ("down", "stale"):
                parts.append(f"[$text-warning]{escape(node)} {fleet.snapshot(node).health.value}: last known[/]")
        return " · ".join(parts)

    def _set_columns(self, columns: tuple[str, ...]) -> None:
        """A narrow terminal drops the uptime and port columns (fit_table); a wider one has them back."""
        table = self.query_one(DataTable)
        if tuple(str(c.label) for c in table.columns.values()) != columns:
            table.clear(columns=True)
            table.add_columns(*columns)

    def _fill(self, views: list[InstanceView | GroupView], rows: tuple) -> None:
        table = self.query_one(DataTable)
        current = self.selected_key
        table.clear()
        # a group's row is keyed ("", name): no instance has an empty node
        self._keys = [("", v.name) if isinstance(v, GroupView) else (v.node, v.name) for v in views]
        self._groups = {v.name: v for v in views if isinstance(v, GroupView)}
        for view, (node, name), texts in zip(views, self._keys, rows):
            table.add_row(*styled(view, texts), key=f"{node}\0{name}")
        if current in self._keys:
            table.move_cursor(row=self._keys.index(current), animate=False)
        if not views:
            self.query_one("#instances-detail", Static).update(_EMPTY)

    def _show_detail(self) -> None:
        group = self.selected_group
        if group is not None:
            lines = [f"[b]group {escape(group.name)}[/b]: {group.ready} of {group.total} replicas ready"]
            for v in group.failed[:3]:
                lines.append(f"[red]{escape(v.name)}: {escape(ib.detail(v))}[/red]")
            lines.append("[dim]x stops every replica of the group[/dim]")
            self.query_one("#instances-detail", Static).update("\n".join(lines))
            return
        view = self.selected
        if view is None:
            if self._keys:
                self.query_one("#instances-detail", Static).update("")
            return
        where = ", ".join(view.nodes) + f" (head {view.node})" if view.nodes else view.node
        lines = [f"[b]{escape(view.name)}[/b] on {escape(where)}: {escape(ib.detail(view))}"]
        facts = []
        if view.preset:
            facts.append(f"preset {view.preset}")
        if view.pid:
            facts.append(f"pid {view.pid}")
        if view.version:
            facts.append(f"vLLM {view.version}")
        if view.exit_code is not None:
            facts.append(f"exit code {view.exit_code}")
        if view.exit_signal:
            facts.append(f"signal {view.exit_signal}")
        if facts:
            lines.append("[dim]" + escape(" · ".join(facts)) + "[/dim]")
        self.query_one("#instances-detail", Static).update("\n".join(lines))

    def on_data_table_row_highlighted(self, _: DataTable.RowHighlighted) -> None:
        self._show_detail()

    # ------------------------------------------------------------ selection

    @property
    def selected_key(self) -> tuple[str, str] | None:
        table = self.query_one(DataTable)
        if not self._keys or table.cursor_row is None or not 0 <= table.cursor_row < len(self._keys):
            return None
        return self._keys[table.cursor_row]

    @property
    def selected(self) -> InstanceView | None:
        key = self.selected_key
        return self.board.find(*key) if key and key[0] else None

    @property
    def selected_group(self) -> GroupView | None:
        key = self.selected_key
        return self._groups.get(key[1]) if key and not key[0] else None

    def select(self, node: str, name: str) -> bool:
        if (node, name) not in self._keys:
            return False
        self.query_one(DataTable).move_cursor(row=self._keys.index((node, name)), animate=False)
        return True

    # ------------------------------------------------------------ keys

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_open_log(self) -> None:
        view = self.selected
        if view is not None:
            console_host(self.app).open_log(view.node, view.name)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_log()

    def action_stop_instance(self) -> None:
        group = self.selected_group
        if group is not None:
            self._confirm_stop_group(group)
            return
        view = self.selected
        if view is None:
            self.app.notify("no instance selected", markup=False)
            return
        console_host(self.app).confirm_stop(view.node, view.name)

    def _confirm_stop_group(self, group: GroupView) -> None:
        from console.ui.screens.confirm import ConfirmScreen

        running = [v for v in group.replicas if ib.level(v) in (ib.READY, ib.LOADING)]
        if not running:
            self.app.notify(f"group {group.name}: no replica is running", markup=False)
            return
        question = (
            f"Stop group {group.name}?\n{len(running)} of {group.total} replicas run on "
            f"{', '.join(group.nodes)}.\nEach vLLM gets SIGINT, then SIGTERM after 30 s, then SIGKILL."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                for v in running:  # the app's own stop worker, one per replica
                    console_host(self.app).stop_instance(v.node, v.name)

        self.app.push_screen(ConfirmScreen("Stop group", question, "Stop"), answered)

    def action_benchmark(self) -> None:
        group = self.selected_group
        if group is not None:  # the whole group, one client per replica
            from console.ui.screens.group_bench import GroupBenchScreen

            if not group.ready:
                self.app.notify(f"group {group.name}: no replica is ready", markup=False)
                return
            from console.ui.results_store import result_store

            self.app.push_screen(GroupBenchScreen(group, store=result_store(self.app)))
            return
        console_host(self.app).open_bench_dialog(self.selected)

    def action_forget_instance(self) -> None:
        view = self.selected
        if view is not None:
            console_host(self.app).confirm_forget(view.node, view.name)

    def action_start_instance(self) -> None:
        view = self.selected
        node = view.node if view is not None else None
        console_host(self.app).open_start_dialog(node)
