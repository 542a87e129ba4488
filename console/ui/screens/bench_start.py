"""Start a benchmark: preset, instance, concurrency (one value, or a list for a sweep),
preset overrides, client environment, label.

The form is checked by console/ui/model/bench_form.py (the preset's own checks); a
problem shows as one line under the fields, nothing typed is lost. The dialog
starts nothing: it dismisses with a BenchRequest (or None), and the caller
pushes BenchScreen with it. ctrl+f instead asks for a latency budget and runs a
find-max search of the preset against the instance (screens/find_max.py).

Enter moves between fields; ctrl+s (or the Run button) runs. The preview says how long the
run will take (the pace of the last stored run of the preset on the node, never less than
its request rate allows); a run longer than LONG_RUN_S asks before it starts. The fields
remember what the preset was last run with on the node (form_dialog: MEMORY).
"""

from __future__ import annotations

import asyncio
from typing import Iterable, Sequence

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.markup import escape
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Select

from console.core.model import BenchPreset
from console.services.instances import InstanceView
from console.ui.model.bench_form import (
    BenchRequest,
    FormError,
    PastRun,
    RunEstimate,
    check_request,
    estimate_run,
    instance_prompt,
    parse_bench_overrides,
    parse_concurrency,
    parse_env,
    parse_label,
    points_text,
    preset_prompt,
)
from console.ui.model.bench_view import dataset_text, rate_text
from console.ui.screens.form_dialog import FormDialog
from console.ui.workers import run_named

_PLACEHOLDERS = {
    "bench-concurrency": "blank: the preset's · 8 · or 1,4,16,64 for a sweep",
    "bench-overrides": "e.g. num_prompts=50 request_rate=4 input_len=1024",
    "bench-env": "KEY=VALUE for the client on the node",
    "bench-label": "optional, stored with the result",
}


# The form memory's entry for the preset last run from this dialog on a node: the dialog
# opens on it (a user who ran `tiny` gets `tiny` again, and ^f searches `tiny`).
LAST_PRESET = "bench-last-preset"
PAST_RUNS = 500  # newest runs of a node read for the estimates (the last run of each preset)


class StartBenchDialog(FormDialog["BenchRequest | None"]):
    """presets: the profile's bench presets; instances: the ready instances to choose from.

    instance: (node, name) to preselect (e.g. the selected row); preset: a preset name
    to preselect (e.g. the last one used).
    """

    PREFIX = "bench-start"
    TITLE_TEXT = "Run a benchmark"
    PREVIEW = True
    FIRST_FIELD = "#bench-concurrency"
    MEMORY = "bench"
    MEMORY_FIELDS = ("bench-concurrency", "bench-overrides", "bench-env", "bench-label")
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="cancel-bench-start"),
        Binding("ctrl+s", "submit", "Run", id="submit-bench-start"),
        Binding("ctrl+f", "find_max", "Find max load", id="find-max-bench-start"),
    ]

    def __init__(
        self,
        presets: Sequence[BenchPreset],
        instances: Sequence[InstanceView],
        *,
        instance: tuple[str, str] | None = None,
        preset: str | None = None,
        cursor_blink: bool | None = None,
    ) -> None:
        super().__init__(id="bench-start-dialog")
        self.presets = tuple(presets)
        self.instances = tuple(instances)
        names = [p.name for p in self.presets]
        keys = [(v.node, v.name) for v in self.instances]
        self.instance_key = instance if instance in keys else (keys[0] if keys else None)
        if preset is None and self.instance_key is not None:
            preset = self._last_preset(self.instance_key[0])  # the one last run on this node
        self.preset_name = preset if preset in names else (names[0] if names else None)
        self.cursor_blink = cursor_blink
        self.past: dict[tuple[str, str], PastRun | None] = {}  # (node, preset) -> its last stored run

    class PastRead(Message):
        def __init__(self, past: dict[tuple[str, str], PastRun]) -> None:
            super().__init__()
            self.past = past

    # ------------------------------------------------------------ layout

    def fields(self) -> Iterable[tuple[str, Widget]]:
        yield (
            "Preset",
            Select(
                [(Text(preset_prompt(p)), p.name) for p in self.presets],
                value=self.preset_name if self.preset_name else Select.BLANK,
                allow_blank=not self.presets,
                id="bench-preset",
                compact=True,
            ),
        )
        yield (
            "Instance",
            Select(
                [(Text(instance_prompt(v)), (v.node, v.name)) for v in self.instances],
                value=self.instance_key if self.instance_key else Select.BLANK,
                allow_blank=not self.instances,
                id="bench-instance",
                compact=True,
            ),
        )
        for label, widget_id in (
            ("Concurrency", "bench-concurrency"),
            ("Overrides", "bench-overrides"),
            ("Env", "bench-env"),
            ("Label", "bench-label"),
        ):
            yield label, Input(placeholder=_PLACEHOLDERS[widget_id], id=widget_id, compact=True)

    def form_mounted(self) -> None:
        if not self.presets:
            self.show_error("no bench presets in the profile ([bench.NAME] tables)")
        elif not self.instances:
            self.show_error("no ready instance to benchmark: start one first (s)")
        self._refresh_preview()
        nodes = sorted({v.node for v in self.instances})
        run_named(self, self._read_past(nodes), "bench-start-past", exclusive=True)

    async def _read_past(self, nodes: list[str]) -> None:
        """The last stored run of each preset on each node, read off the UI thread."""

        from console.ui.results_store import result_store

        store = result_store(self.app)  # the face's one store

        def read() -> dict[tuple[str, str], PastRun]:
            found: dict[tuple[str, str], PastRun] = {}
            try:
                for node in nodes:
                    # newest first, one page (the store's index): the first of each preset stays
                    for run in store.list_runs(node=node, limit=PAST_RUNS):
                        preset = run.context.get("bench_preset")
                        took, done = run.metrics.get("duration"), run.metrics.get("completed")
                        if isinstance(preset, str) and took and done and (node, preset) not in found:
                            found[(node, preset)] = PastRun(int(done), float(took), str(run.setup.get("date") or ""))
            except Exception:  # no estimate is better than a dialog that fails: the rate floor stays
                return found
            return found

        self.post_message(self.PastRead(await asyncio.to_thread(read)))

    def on_start_bench_dialog_past_read(self, message: PastRead) -> None:
        self.past.update(message.past)
        self._refresh_preview()

    def memory_key(self) -> tuple[str, str] | None:
        preset, view = self._preset(), self._instance()
        return (preset.name, view.node) if preset is not None and view is not None else None

    def estimate(self, request: BenchRequest) -> RunEstimate | None:
        effective, _ = check_request(request.preset, request.overrides, None)  # the points are the request's
        return estimate_run(effective, request.points, self.past.get((request.node, request.preset.name)))

    # ------------------------------------------------------------ reading the form

    def _preset(self) -> BenchPreset | None:
        name = self.choice("bench-preset")
        return next((p for p in self.presets if p.name == name), None)

    def _instance(self) -> InstanceView | None:
        key = self.choice("bench-instance")
        return next((v for v in self.instances if (v.node, v.name) == key), None)

    def read_form(self) -> BenchRequest:
        """The request the fields describe, or FormError with one line."""
        preset = self._preset()
        if preset is None:
            raise FormError("preset: choose one" if self.presets else "no bench presets in the profile")
        view = self._instance()
        if view is None:
            raise FormError("instance: choose one" if self.instances else "no ready instance to benchmark")
        concurrency = parse_concurrency(self.typed("bench-concurrency"))
        overrides = parse_bench_overrides(self.typed("bench-overrides"))
        env = parse_env(self.typed("bench-env"))
        label = parse_label(self.typed("bench-label"))
        _, points = check_request(preset, overrides, concurrency)
        return BenchRequest(view.node, view, preset, points, overrides, env, label)

    def _refresh_preview(self) -> None:
        preset, view = self._preset(), self._instance()
        if preset is None or view is None:
            self.show_preview("")
            return
        try:
            concurrency = parse_concurrency(self.typed("bench-concurrency"))
        except FormError:
            concurrency = None
        try:
            effective, points = check_request(preset, parse_bench_overrides(self.typed("bench-overrides")), concurrency)
        except FormError:  # the error line says what is wrong; preview what is known
            effective, points = preset, concurrency or (tuple(preset.max_concurrency) or (None,))
        what = (
            f"a sweep of {len(points)} runs (concurrency {points_text(points)})"
            if len(points) > 1
            else f"one run at concurrency {points_text(points)}"
            if points[0]
            else "one run, no concurrency limit"
        )
        line = (
            f"[b]{escape(what)}[/b] · {escape(dataset_text(effective))} · {effective.num_prompts} prompts "
            f"{'each ' if len(points) > 1 else ''}· {escape(rate_text(effective))}\n"
            f"against [b]{escape(view.name)}[/b] on {escape(view.node)} "
            f"({escape(view.served_models[0] if view.served_models else view.model or '?')})"
        )
        took = estimate_run(effective, points, self.past.get((view.node, preset.name)))
        if took is None:
            line += "\ntakes: unknown (no run of it here yet, no rate limit)"
        elif took.long:
            line += f"\n[$text-warning]⚠ a long run: {escape(took.text())}: ^s asks before it starts[/]"
        else:
            line += f"\ntakes {escape(took.text())}"
        self.show_preview(line)

    # ------------------------------------------------------------ events

    @on(Select.Changed)
    def _select_changed(self, _: Select.Changed) -> None:
        self.show_error("")
        self.recall_values()  # another preset or node: what it was last run with
        self._refresh_preview()

    @on(Input.Changed)
    def _input_changed(self, _: Input.Changed) -> None:
        self.show_error("")
        self._refresh_preview()

    def action_find_max(self) -> None:
        """The highest load within a budget, for this preset and instance: the budget is asked
        next (FindMaxDialog), then the search runs on its own screen (points stored as it goes)."""
        from console.ui.screens.find_max import FindMaxDialog, find_max_screen

        try:
            preset, view = self._preset(), self._instance()
            if preset is None or view is None:
                raise FormError("choose a preset and an instance first")
            overrides = parse_bench_overrides(self.typed("bench-overrides"))
            env = parse_env(self.typed("bench-env"))
            label = parse_label(self.typed("bench-label"))
            check_request(preset, overrides, None)
        except FormError as exc:
            self.show_error(str(exc))
            return
        app = self.app

        def chosen(answer) -> None:
            if answer is None:
                return
            spec, prompts = answer
            try:
                screen = find_max_screen(app, view, preset, spec, overrides, env, label, prompts)
            except FormError as exc:
                app.notify(str(exc), severity="error", markup=False)
                return
            app.push_screen(screen)

        self.dismiss(None)
        app.push_screen(FindMaxDialog(preset, view, cursor_blink=self.cursor_blink), chosen)

    def submit(self) -> None:
        try:
            request = self.read_form()
            took = self.estimate(request)
        except FormError as exc:
            self.show_error(str(exc))
            return
        if took is None or not took.long:
            self._run(request)
            return
        from console.ui.screens.confirm import ConfirmScreen

        what = f"{request.preset.name} against {request.instance.name} on {request.node}"
        question = f"This run takes {took.text()}.\n{what}: the node is busy until it ends (x cancels it)."

        def answered(yes: bool | None) -> None:
            if yes:
                self._run(request)

        self.app.push_screen(ConfirmScreen("A long run", question, "Run"), answered)

    def _run(self, request: BenchRequest) -> None:
        self.remember_values()
        self._memory().remember(LAST_PRESET, "*", request.node, {"preset": request.preset.name})
        self.dismiss(request)

    @staticmethod
    def _last_preset(node: str) -> str | None:
        """The preset last run from this dialog on the node (the form memory), if any."""
        from console.services.form_memory import FormMemory

        found = FormMemory().recall(LAST_PRESET, "*", node)
        return found.values.get("preset") if found is not None else None
