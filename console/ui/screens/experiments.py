"""Layout experiments, live: every state file in the experiments folder, its progress over the
whole plan, the step running now, failed layouts, and for the selected one the best layout so
far per latency budget and its last events.

n picks an experiment file and a node, checks it and runs it here (ExperimentRunner.run, as
`rocm-console experiment run` does, in a worker of the app: leaving the screen does not end
it); c cancels a run started here (the layout's group is stopped, finished points stay, a
later run resumes). Runs of `experiment run` processes show the same way: this screen reads
the state files every run writes after every step, once a second.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import DataTable, Static

from console.core.experiment.report import build_report
from console.core.experiment.spec import ExperimentError, ExperimentState, load_experiment
from console.core.node_json import loads_document
from console.core.text import one_line
from console.ui.model.experiment_runs import ExperimentRun, ExperimentRuns, experiment_files
from console.ui.widgets.key_bar import KeyBar
from console.ui.widgets.titled_table import titled_table
from console.ui.workers import run_named

# The runs each console started here: they outlive the screen (a worker of the app).
_RUNS: weakref.WeakKeyDictionary[object, ExperimentRuns] = weakref.WeakKeyDictionary()


def runs_of(app: object) -> ExperimentRuns:
    runs = _RUNS.get(app)
    if runs is None:
        runs = _RUNS[app] = ExperimentRuns()
    return runs


COLUMNS = ("Experiment", "Node", "Progress", "Now", "Failed layouts", "Updated")
MAX_FILES = 50


@dataclass(frozen=True, slots=True)
class Entry:
    path: Path
    state: ExperimentState
    mtime: float


def read_states(folder: Path) -> list[Entry]:
    """The readable state files of the folder, newest first (others are skipped: not ours)."""
    try:
        files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[:MAX_FILES]
    except OSError:
        return []
    out = []
    for path in files:
        try:
            state = ExperimentState.from_dict(loads_document(path.read_text(encoding="utf-8")))  # W2: depth-safe
            out.append(Entry(path, state, path.stat().st_mtime))
        except (OSError, ValueError):
            continue
    return out


def progress_bar(done: int, planned: int, width: int = 12) -> str:
    if planned <= 0:
        return f"{done} done"
    filled = round(width * min(done, planned) / planned)
    return f"{'█' * filled}{'░' * (width - filled)} {done}/{planned}"


def row_texts(entry: Entry, now: float) -> tuple[str, ...]:
    s = entry.state
    ago = max(0, int(now - entry.mtime))
    current = "finished" if s.finished else (s.current or "waiting")
    return (
        s.experiment,
        s.node,
        progress_bar(len(s.done), s.planned),
        current,
        ", ".join(s.failed_layouts) or "",
        f"{ago // 60}m{ago % 60:02d}s ago" if ago < 3600 else f"{ago // 3600}h ago",
    )


def _energy(row) -> str:
    """' · 1.23 tokens/J · throttled 4.0 %' where the point recorded them (issue P)."""
    out = f" · {row.tokens_per_joule:.3g} tokens/J" if row.tokens_per_joule is not None else ""
    if row.throttled_pct is not None:
        out += f" · throttled {row.throttled_pct:.1f} %"
    return out


def detail_text(entry: Entry, run: ExperimentRun | None = None) -> str:
    s = entry.state
    lines = [f"[b]{escape(s.experiment)}[/b] on {escape(s.node)} · {escape(str(entry.path))}"]
    if run is not None:
        how = "running here (c cancels)" if run.running else (run.outcome or "ended")
        lines.append(f"[b]{escape(how)}[/b]: {escape(run.line)}")
    if s.file and (s.finished or run is not None):
        lines.append(
            "results: in the history (H) · report: "
            + escape(f"rocm-console experiment report {s.file} --node {s.node} --state {entry.path}")
        )
    for key, reason in s.failed_layouts.items():
        lines.append(f"[red]{escape(key)}: {escape(reason)}[/red]")
    if s.file:
        try:
            report = build_report(load_experiment(s.file), s)
        except Exception as exc:  # the file moved or changed: the state still shows
            lines.append(f"[dim]{escape(s.file)}: {escape(' '.join(str(exc).split())[:200])}[/dim]")
        else:
            for w in report.winners:
                best = (
                    f"{w.row.layout} at {w.row.load_kind} {w.row.load:g}: {w.row.tok_s_per_node:.1f} tok/s per node"
                    + _energy(w.row)
                    if w.row
                    else "none meets it yet"
                )
                if w.efficient is not None and w.efficient is not w.row:
                    e = w.efficient
                    best += f"; most efficient {e.layout} at {e.load_kind} {e.load:g}{_energy(e)}"
                lines.append(f"budget {escape(w.budget.name)} ({escape(w.budget.describe())}): {escape(best)}")
            if report.pareto:
                front = ", ".join(f"{r.layout} @{r.load:g}{_energy(r)}" for r in report.pareto[:5])
                lines.append(f"Pareto front: {escape(front)}")
            bound = [r for r in report.rows if r.client_bound]
            if bound:
                lines.append(
                    "[red]client-bound: "
                    + escape(", ".join(f"{r.layout} @{r.load:g}" for r in bound[:5]))
                    + " (the benchmark client, not the server, set those numbers)[/red]"
                )
    for event in s.events[-6:]:
        lines.append(f"[dim]{escape(event)}[/dim]")
    return "\n".join(lines)


class ExperimentsScreen(Screen):
    # no id: not in the [keys] table (the help screen lists the keys of the main screens)
    BINDINGS = [
        Binding("escape,backspace", "back", "Back"),
        Binding("n", "new_run", "Run…"),
        Binding("c", "cancel_run", "Cancel run"),
    ]

    def __init__(self, folder: Path | None = None, *, refresh_every: float = 1.0) -> None:
        super().__init__(id="experiments-screen")
        if folder is None:
            from console.services.experiments import experiments_folder

            folder = experiments_folder()
        self.folder = folder
        self.refresh_every = refresh_every
        self._entries: list[Entry] = []
        self._waiting: list[ExperimentRun] = []  # runs started here that have not written their state yet
        self._drawn: tuple | None = None

    def compose(self) -> ComposeResult:
        yield from titled_table("experiments", COLUMNS)
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.reload()
        self.set_interval(self.refresh_every, self.reload)

    def reload(self) -> None:
        self._entries = read_states(self.folder)
        now = time.time()
        runs = runs_of(self.app)
        rows = tuple(row_texts(e, now) for e in self._entries)
        # a run started here that has not written its state yet (checking the node) shows too
        waiting = [r for r in runs.all() if r.running and not r.state_path.exists()]
        self._waiting = waiting
        rows += tuple((Path(r.file).stem, r.node, "", r.line, "", "") for r in waiting)
        running = sum(1 for e in self._entries if not e.state.finished)
        title = (
            f" [b]Layout experiments[/b] {len(self._entries)} in {escape(str(self.folder))}"
            + (f" · [$text-warning]{running} not finished[/]" if running else "")
            if self._entries
            else f" [b]Layout experiments[/b]: none yet in {escape(str(self.folder))}. "
            "n runs one here (or `rocm-console experiment run FILE --node NODE`)."
        )
        if (rows, title) != self._drawn:
            self._drawn = (rows, title)
            table = self.query_one(DataTable)
            row = table.cursor_row
            table.clear()
            for i, texts in enumerate(rows):
                cells = [Text(t) for t in texts]
                entry = self._entries[i] if i < len(self._entries) else None
                if entry is not None and entry.state.failed_layouts:
                    cells[4].stylize("red")
                cells[2].stylize("green" if entry is not None and entry.state.finished else "yellow")
                table.add_row(*cells)
            if rows and row is not None:
                table.move_cursor(row=min(row, len(rows) - 1), animate=False)
            self.query_one("#experiments-title", Static).update(title)
        self._show_detail()

    def _show_detail(self) -> None:
        table = self.query_one(DataTable)
        row = table.cursor_row
        detail = self.query_one("#experiments-detail", Static)
        if not self._entries or row is None or not 0 <= row < len(self._entries):
            detail.update("")
            return
        entry = self._entries[row]
        detail.update(detail_text(entry, runs_of(self.app).get(entry.path)))

    def on_data_table_row_highlighted(self, _: DataTable.RowHighlighted) -> None:
        self._show_detail()

    # ------------------------------------------------------------ run / cancel

    def action_new_run(self) -> None:
        from console.core.profiles import PROFILES_DIR
        from console.ui.screens.experiment_dialog import ExperimentDialog, ExperimentRequest

        files = experiment_files([PROFILES_DIR / "experiments", self.folder])

        def chosen(request: ExperimentRequest | None) -> None:
            if request is not None:
                self.start_run(request.file, request.node, request.env)

        self.app.push_screen(ExperimentDialog(files), chosen)

    def start_run(self, file: Path, node: str, env: dict[str, str] | None = None) -> ExperimentRun | None:
        """Run the experiment on the node as `experiment run` does, in a worker of the app."""
        from console.services.experiments import default_state_path

        try:
            exp = load_experiment(file)
        except ExperimentError as exc:
            self.app.notify(exc.problems[0], title="experiment refused", severity="error", markup=False)
            return None
        state_path = default_state_path(exp, node, self.folder)
        runs = runs_of(self.app)
        if runs.running(state_path):
            self.app.notify(f"{exp.name} on {node} runs already (c cancels it)", markup=False)
            return None
        run = runs.add(ExperimentRun(str(file), node, state_path))
        worker = run_named(self.app, _run_experiment(self.app, run, exp, env or {}), f"experiment:{state_path}")
        run.cancel = worker.cancel
        self.reload()
        return run

    def action_cancel_run(self) -> None:
        from console.ui.screens.confirm import ConfirmScreen

        table = self.query_one(DataTable)
        row = table.cursor_row
        if row is not None and 0 <= row - len(self._entries) < len(self._waiting):
            early = self._waiting[row - len(self._entries)]  # still checking the node: nothing started yet
            if early.cancel is not None and early.running:
                early.line = "cancelled before its first step"
                early.cancel()
            return
        if not self._entries or row is None or not 0 <= row < len(self._entries):
            self.app.notify("no experiment selected", markup=False)
            return
        entry = self._entries[row]
        run = runs_of(self.app).get(entry.path)
        if run is None or not run.running:
            why = (
                "it has finished"
                if entry.state.finished
                else "it is not run by this console: stop its `rocm-console experiment run` (Ctrl-C)"
            )
            self.app.notify(f"{entry.state.experiment} on {entry.state.node}: nothing to cancel, {why}", markup=False)
            return
        question = (
            f"Cancel {entry.state.experiment} on {entry.state.node}?\n"
            f"The layout's group is stopped; the {len(entry.state.done)} points done stay, "
            "and running it again resumes."
        )

        def answered(yes: bool | None) -> None:
            if yes and run.cancel is not None and run.running:
                run.line = "cancelling: stopping the layout's group"
                run.cancel()

        self.app.push_screen(ConfirmScreen("Cancel experiment", question, "Cancel run"), answered)

    def action_back(self) -> None:
        self.app.pop_screen()


async def _run_experiment(app, run: ExperimentRun, exp, env: dict[str, str]) -> None:
    """ExperimentRunner.run on a pool of its own (a resumed link closes it, never the fleet's),
    storing each point in the results store, as `rocm-console experiment run` does."""
    from console.services.experiments import ExperimentProgressed, ExperimentRunner
    from console.services.transports import TransportPool
    from console.ui.model.protocols import console_host
    from console.ui.results_store import result_store

    host = console_host(app)
    pool = TransportPool()

    def progress(event: ExperimentProgressed) -> None:
        run.line = f"[{event.done}/{event.planned}] {event.line}"

    from console.ui.model.events_view import timeline_of

    try:
        runner = ExperimentRunner(pool, store=result_store(app), timeline=timeline_of(app))  # its switches: events
        state = await runner.run(
            exp,
            host.fleet.spec(run.node),
            host.profile,
            run.state_path,
            on_event=progress,
            extra_env=env,
            link_retries=10,
        )
    except asyncio.CancelledError:
        run.outcome, run.line = "cancelled", f"cancelled: {run.line}; run it again to resume"
        raise
    except ExperimentError as exc:
        run.outcome, run.line = "refused", "; ".join(exc.problems)
        app.notify(exc.problems[0], title=f"{exp.name}: refused", severity="error", timeout=10, markup=False)
    except Exception as exc:  # a worker never ends without a word
        run.outcome, run.line = "failed", one_line(exc)
        app.notify(one_line(exc), title=f"{exp.name}: failed", severity="error", timeout=10, markup=False)
    else:
        failed = len(state.failed_layouts)
        run.outcome = "failed" if failed else "finished"
        app.notify(
            f"{exp.name} on {run.node}: {len(state.done)} of {state.planned} points"
            + (f", {failed} layouts failed" if failed else ""),
            title="experiment finished",
            severity="warning" if failed else "information",
            markup=False,
        )
    finally:
        run.running = False
        await asyncio.shield(pool.close())
