"""The models screen: per node, the models it holds (size, revision, complete, used by), its free
space and its pulls with their progress; pull, remove, start.

A worker reads every node (services/models.py: the agent's `models list` and `pulls`) every few
seconds and posts what it read; the table is rebuilt from that message only. Pulls run on the
node under its supervisor: closing the screen or the console leaves them running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from console.core.text import one_line, printable
from console.ui.model.protocols import console_host
from console.ui.widgets.key_bar import KeyBar
from console.ui.widgets.status_bar import StatusBar
from console.ui.workers import run_named

REFRESH_S = 2.0  # between two reads of every node (a pull's bytes change every few seconds)
PULL_HINT = "pull: a hub repo id, e.g. amd/Llama-3.1-8B-Instruct-FP8-KV (Enter pulls onto the selected node, Esc)"


@dataclass(frozen=True)
class ModelRow:
    """One row: a model on a node, a pull, or a node's header (free space, or why it did not answer)."""

    key: str
    node: str
    cells: tuple[str, ...]
    model: str | None = None
    kind: str = "model"  # model | pull | node


@dataclass(frozen=True)
class NodeRead:
    node: str
    models: Any = None  # NodeModels
    pulls: tuple[Any, ...] = ()  # PullStatus
    error: str | None = None


def model_rows(reads: Sequence[NodeRead]) -> list[ModelRow]:
    """The table's rows, node by node: a header with the free space, the pulls, the models."""
    from console.services.models import size_text

    rows: list[ModelRow] = []
    for read in reads:
        if read.error:
            rows.append(ModelRow(f"{read.node}:", read.node, (read.node, read.error, "", "", "", ""), kind="node"))
            continue
        spaces = read.models.spaces if read.models is not None else ()
        free = ", ".join(f"{size_text(s.free_bytes)} free of {size_text(s.total_bytes)}" for s in spaces)
        rows.append(
            ModelRow(f"{read.node}:", read.node, (read.node, free or "free space unknown", "", "", "", ""), kind="node")
        )
        pulled = set()
        for p in read.pulls:
            if p.state == "done":
                continue  # the model row below says it
            pulled.add(p.model)
            state = {"running": "pulling", "failed": "pull failed", "stopped": "pull stopped"}.get(p.state, p.state)
            detail = p.error if p.state == "failed" and p.error else p.progress_text()
            rows.append(
                ModelRow(
                    f"{read.node}:pull:{p.model}",
                    read.node,
                    ("", p.model, size_text(p.total_bytes), (p.revision or "-")[:12], f"{state}: {detail}", ""),
                    model=p.model,
                    kind="pull",
                )
            )
        for m in read.models.models if read.models is not None else ():
            if m.name in pulled and not m.complete:
                continue  # its pull row shows it
            state = "complete" if m.complete else f"incomplete ({m.incomplete_reason})"
            rows.append(
                ModelRow(
                    f"{read.node}:{m.name}:{m.revision or m.path}",
                    read.node,
                    ("", m.name, size_text(m.size_bytes), (m.revision or "-")[:12], state, ", ".join(m.used_by) or "-"),
                    model=m.name,
                )
            )
    return rows


def _pool(app: Any) -> Any:
    """The fleet's transports (one link per node, shared with telemetry and instances)."""
    return getattr(app.fleet, "pool", None)


class ModelsScreen(Screen):
    BINDINGS = [
        Binding("escape", "back", "Back", id="close-models"),
        Binding("a", "pull", "Pull", id="models-pull"),
        Binding("d", "remove", "Remove", id="models-remove"),
        Binding("s", "start", "Start", id="models-start"),
        Binding("r", "refresh", "Refresh", show=False, id="models-refresh"),
    ]

    class Read(Message):
        def __init__(self, reads: list[NodeRead]) -> None:
            super().__init__()
            self.reads = reads

    class Said(Message):
        def __init__(self, text: str, severity: str = "information") -> None:
            super().__init__()
            self.text = text
            self.severity = severity

    def __init__(self) -> None:
        super().__init__(id="models-screen")
        self.rows: list[ModelRow] = []
        self.reads: list[NodeRead] = []
        self._drawn: tuple = ()

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status-bar")
        yield Static("Models on the nodes (reading…)", id="models-title", markup=False)
        yield Input(placeholder=PULL_HINT, id="models-pull-input", compact=True)
        table: DataTable[Any] = DataTable(id="models-table", cursor_type="row", zebra_stripes=True)
        for label, key in (
            ("Node", "node"),
            ("Model", "model"),
            ("Size", "size"),
            ("Revision", "rev"),
            ("State", "state"),
            ("Used by", "used"),
        ):
            table.add_column(label, key=key)
        yield table
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#models-pull-input", Input).display = False
        self.query_one("#models-table", DataTable).focus()
        run_named(self, self._reader(), "models-read", exclusive=True)

    # ------------------------------------------------------------ reading

    async def _reader(self) -> None:
        while True:
            self.post_message(self.Read(await self.read_all()))
            await asyncio.sleep(REFRESH_S)

    async def read_all(self) -> list[NodeRead]:
        from console.services.models import node_models, node_pulls, settings_for
        from console.ui.results_store import history_of

        app = console_host(self.app)
        history = history_of(app)
        pool = _pool(app)
        config = getattr(app.profile, "models", None)
        board = getattr(app, "board", None)
        views = list(board.views()) if board is not None else []

        async def one(node: str) -> NodeRead:
            spec = app.fleet.spec(node)
            settings = settings_for(spec, config)
            try:
                models = await node_models(pool, spec, views, settings)
                pulls = await node_pulls(pool, spec, settings, history=history)  # each pull kept in the store
            except Exception as exc:  # one node that cannot answer is a row, never a dead screen
                return NodeRead(node, error=one_line(exc))
            return NodeRead(node, models, tuple(pulls))

        return list(await asyncio.gather(*(one(n) for n in app.fleet.node_names)))

    def on_models_screen_read(self, message: Read) -> None:
        self.reads = message.reads
        self.redraw()

    def on_models_screen_said(self, message: Said) -> None:
        self.app.notify(message.text, severity=message.severity, markup=False)  # type: ignore[arg-type]

    def redraw(self, now: float | None = None) -> None:
        """From the last read only (the app's clock calls it too: nothing changes without a read)."""
        rows = model_rows(self.reads)
        key = tuple((r.key, r.cells) for r in rows)
        if key == self._drawn:
            return
        self._drawn = key
        self.rows = rows
        table = self.query_one("#models-table", DataTable)
        at = table.cursor_row
        table.clear()
        for r in rows:
            table.add_row(*(printable(c) for c in r.cells), key=r.key)
        if rows:
            table.move_cursor(row=min(max(at, 0), len(rows) - 1))
        pulling = sum(1 for r in rows if r.kind == "pull")
        title = f"Models on {len(self.reads)} node(s)" + (f", {pulling} pull(s)" if pulling else "")
        self.query_one("#models-title", Static).update(title)

    def selected(self) -> ModelRow | None:
        table = self.query_one("#models-table", DataTable)
        if not self.rows or table.cursor_row < 0 or table.cursor_row >= len(self.rows):
            return None
        return self.rows[table.cursor_row]

    # ------------------------------------------------------------ actions

    def action_back(self) -> None:
        field_ = self.query_one("#models-pull-input", Input)
        if field_.display:
            field_.display = False
            self.query_one("#models-table", DataTable).focus()
            return
        self.app.pop_screen()

    def action_refresh(self) -> None:
        run_named(self, self._reader(), "models-read", exclusive=True)

    def action_pull(self) -> None:
        row = self.selected()
        field_ = self.query_one("#models-pull-input", Input)
        field_.value = row.model if row is not None and row.model else ""  # an incomplete one: resumed
        field_.display = True
        field_.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        model = event.value.strip()
        event.input.display = False
        self.query_one("#models-table", DataTable).focus()
        row = self.selected()
        if not model or row is None:
            return
        run_named(self, self._pull(row.node, model), f"models-pull-{row.node}")

    async def _pull(self, node: str, model: str) -> None:
        from console.services.models import ModelsError, settings_for, start_pull
        from console.ui.results_store import history_of

        app = console_host(self.app)
        spec = app.fleet.spec(node)
        try:
            status = await start_pull(
                _pool(app),
                spec,
                model,
                settings=settings_for(spec, getattr(app.profile, "models", None)),
                history=history_of(app),  # the pull's row in the store, as from the CLI
            )
        except (ModelsError, OSError, Exception) as exc:  # the hub's reason, one line
            self.post_message(self.Said(one_line(exc), "error"))
            return
        how = "already running" if status.attached else "started"
        self.post_message(self.Said(f"{node}: pull of {model} {how}"))
        self.post_message(self.Read(await self.read_all()))

    def action_remove(self) -> None:
        from console.ui.screens.confirm import ConfirmScreen

        row = self.selected()
        if row is None or row.kind != "model" or not row.model:
            self.app.notify("select a model to remove", markup=False)
            return
        used = row.cells[5]
        if used != "-":
            self.app.notify(
                f"{row.node}: {row.model} is in use by {used}: stop it first", severity="warning", markup=False
            )
            return

        def answered(yes: bool | None) -> None:
            if yes:
                run_named(self, self._remove(row.node, row.model or ""), f"models-rm-{row.node}")

        question = f"Delete {row.model} ({row.cells[2]}) from {row.node}'s Hugging Face cache?"
        self.app.push_screen(ConfirmScreen("Remove model", question, "Remove"), answered)

    async def _remove(self, node: str, model: str) -> None:
        from console.services.models import remove_model, settings_for, size_text

        app = console_host(self.app)
        spec = app.fleet.spec(node)
        board = getattr(app, "board", None)
        views = list(board.views()) if board is not None else []
        try:
            revisions, freed = await remove_model(
                _pool(app),
                spec,
                model,
                views,
                settings=settings_for(spec, getattr(app.profile, "models", None)),
            )
        except Exception as exc:  # refused (in use, not there) or the node did not answer: one line
            self.post_message(self.Said(one_line(exc), "error"))
            return
        self.post_message(
            self.Said(f"{node}: removed {model} ({len(revisions)} revision(s), {size_text(freed)} freed)")
        )
        self.post_message(self.Read(await self.read_all()))

    def action_start(self) -> None:
        row = self.selected()
        if row is None or not row.model:
            self.app.notify("select a model to start", markup=False)
            return
        app = console_host(self.app)
        preset = next((p.name for p in app.profile.serve_presets if p.model == row.model), None)
        if preset is None:
            self.app.notify(f"no serve preset serves {row.model}: pick one in the start dialog", markup=False)
        app.open_start_dialog(row.node, (), preset)


__all__ = ["ModelRow", "ModelsScreen", "NodeRead", "model_rows"]
