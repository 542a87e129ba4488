"""Pick an experiment file and a node, check it against the node, and run it.

The check is `rocm-console experiment check`'s: the file's own errors (load_experiment), then
ExperimentRunner.check against the node as it is now (partition modes, presets, GPUs), each
problem one line; then what holds the node's GPUs (ExperimentRunner.occupancy): which layouts
fit now and what would have to stop, which ctrl+g offers to stop (the end-process dialog, as the
partition dialog's k: it asks first), checking again after. Run dismisses with the request;
the experiments screen starts it (ExperimentRunner.run, as `experiment run`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from rich.text import Text
from textual.binding import Binding
from textual.markup import escape
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Input, Select

from console.core.experiment.spec import Experiment, ExperimentError, load_experiment, plan_points
from console.core.text import one_line
from console.transport.base import TransportError
from console.ui.model.protocols import console_host
from console.ui.model.start_form import FormError, parse_pairs
from console.ui.screens.form_dialog import FormDialog
from console.ui.workers import run_named


@dataclass(frozen=True)
class ExperimentRequest:
    file: Path
    node: str
    env: dict[str, str]


def local_check(path: Path) -> tuple[Experiment | None, list[str]]:
    """The file's own errors (as `experiment check` prints them, one line each), or the experiment."""
    try:
        return load_experiment(path), []
    except ExperimentError as exc:
        return None, list(exc.problems)
    except OSError as exc:
        return None, [f"{path}: {one_line(exc)}"]


class ExperimentDialog(FormDialog["ExperimentRequest | None"]):
    PREFIX = "exp"
    TITLE_TEXT = "Run a layout experiment"
    SUBTITLE_TEXT = "^s runs · ^t checks · ↵ next field · Esc cancels"
    GO_LABEL = "Run"
    PREVIEW = True
    FIRST_FIELD = "#exp-env"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="cancel-experiment"),
        Binding("ctrl+t", "check", "Check", id="check-experiment"),
        Binding("ctrl+g", "free_gpus", "Free the GPUs", id="free-experiment-gpus"),
    ]

    class Checked(Message):
        def __init__(self, key: tuple[str, str], lines: Sequence[str], ok: bool, busy: object = None) -> None:
            super().__init__()
            self.key = key
            self.lines = tuple(lines)
            self.ok = ok
            self.busy = busy  # the Occupancy of the node (what ctrl+g stops), None when nothing holds it

    def __init__(self, files: Sequence[Path], node: str | None = None) -> None:
        super().__init__(id="experiment-dialog")
        self.files = list(files)
        self.node = node
        self.checked: dict[tuple[str, str], tuple[tuple[str, ...], bool]] = {}  # (file, node) -> lines, ok
        self.busy: dict[tuple[str, str], Any] = {}  # (file, node) -> what holds the GPUs (Occupancy)

    def fields(self) -> Iterable[tuple[str, Widget]]:
        nodes = console_host(self.app).fleet.node_names
        options = [(Text(f"{p.name}  ({p.parent})"), str(p)) for p in self.files]  # paths are not markup
        yield "File", Select(options, id="exp-file", compact=True, prompt="no experiment files found")
        node = self.node if self.node in nodes else (nodes[0] if nodes else None)
        yield "Node", Select([(n, n) for n in nodes], value=node or Select.BLANK, id="exp-node", compact=True)
        yield "Env", Input(placeholder="KEY=VALUE for servers and clients (optional)", id="exp-env", compact=True)

    def form_mounted(self) -> None:
        self.query_one("#exp-buttons").mount(Button("Check", id="exp-check"), before="#exp-go")
        if self.files:
            self.query_one("#exp-file", Select).value = str(self.files[0])
        self._refresh_preview()

    def _chosen(self) -> tuple[Path | None, str | None]:
        file, node = self.choice("exp-file"), self.choice("exp-node")
        return (Path(file) if isinstance(file, str) else None, node if isinstance(node, str) else None)

    def _refresh_preview(self) -> None:
        path, node = self._chosen()
        if path is None:
            self.show_preview("Put experiment files in profiles/experiments/ or the data dir's experiments/")
            return
        exp, problems = local_check(path)
        if exp is None:
            self.show_preview("\n".join(f"[$text-error]{escape(p)}[/]" for p in problems))
            return
        layouts = ", ".join(layout.label for layout in exp.layouts)
        lines = [f"[b]{escape(exp.name)}[/b]: {len(plan_points(exp))} points over {escape(layouts)}"]
        done = self.checked.get((str(path), node or ""))
        if done is None:
            lines.append(
                "[dim]not checked against the node yet: ctrl+t or Check (the runner checks again at start)[/dim]"
            )
        else:
            colour = "$text-success" if done[1] else "$text-error"
            lines += [f"[{colour}]{escape(line)}[/]" for line in done[0]]
        self.show_preview("\n".join(lines))

    def on_select_changed(self, _: Select.Changed) -> None:
        self.show_error("")
        self._refresh_preview()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        # Textual calls FormDialog's handler after this one (Go, Cancel) unless prevented
        if event.button.id == "exp-check":
            event.stop()
            event.prevent_default()
            self.action_check()

    def action_check(self) -> None:
        path, node = self._chosen()
        if path is None or node is None:
            self.show_error("choose a file and a node")
            return
        exp, problems = local_check(path)
        if exp is None:
            self.show_error(problems[0])
            return
        self.show_error(f"checking {path.name} against {node}…", "busy")
        run_named(self, self._check(exp, path, node), "experiment-check", exclusive=True)

    async def _check(self, exp: Experiment, path: Path, node: str) -> None:
        """ExperimentRunner.check, on a pool of its own (as `experiment check` does)."""
        from console.services.experiments import ExperimentRunner
        from console.services.transports import TransportPool

        app = console_host(self.app)
        pool = TransportPool()
        spec = app.fleet.spec(node)
        try:
            runner = ExperimentRunner(pool)
            snapshot = await runner.check(exp, spec, app.profile)
            busy = await runner.occupancy(exp, spec, snapshot)
            fit, lines = busy.fit_lines(exp, snapshot)
            lines[0] = f"{path}: {lines[0]}"
            if busy:
                lines.append("ctrl+g stops them (it asks first), as the partition dialog's k does")
            self.post_message(self.Checked((str(path), node), lines, fit == len(exp.layouts), busy or None))
        except ExperimentError as exc:
            self.post_message(self.Checked((str(path), node), exc.problems, False))
        except (TransportError, OSError) as exc:
            self.post_message(self.Checked((str(path), node), [one_line(exc)], False))
        except Exception as exc:  # never a traceback in the dialog
            self.post_message(self.Checked((str(path), node), [f"{type(exc).__name__}: {one_line(exc)}"], False))
        finally:
            await pool.close()

    def on_experiment_dialog_checked(self, message: Checked) -> None:
        self.checked[message.key] = (message.lines, message.ok)
        self.busy[message.key] = message.busy
        self.refresh_bindings()
        self.show_error("" if message.ok else message.lines[0])
        self._refresh_preview()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "free_gpus":
            path, node = self._chosen()
            return self.busy.get((str(path), node or "")) is not None
        return super().check_action(action, parameters)

    def action_free_gpus(self) -> None:
        """ctrl+g: stop the instances and end the processes the check found on the node's GPUs
        (the end-process dialog asks first), then check again."""
        from console.ui.screens.process_end import ProcessEndScreen

        path, node = self._chosen()
        busy = self.busy.get((str(path), node or ""))
        if busy is None or node is None:
            return
        app = console_host(self.app)

        def done(_: object) -> None:
            self.busy.pop((str(path), node), None)
            self.action_check()

        ender = ProcessEndScreen(app.fleet.spec(node), busy.processes, instances=busy.instances, pool=app.fleet.pool)
        self.app.push_screen(ender, done)

    def submit(self) -> None:
        path, node = self._chosen()
        if path is None:
            self.show_error("file: choose an experiment file")
            return
        if node is None:
            self.show_error("node: choose one")
            return
        exp, problems = local_check(path)
        if exp is None:
            self.show_error(problems[0])
            return
        try:
            env = parse_pairs(self.typed("exp-env"), "env")
        except FormError as exc:
            self.show_error(str(exc))
            return
        self.dismiss(ExperimentRequest(path, node, env))
