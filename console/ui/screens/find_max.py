"""The find-max search, drawn live: ctrl+f in the benchmark dialog (its preset, instance,
overrides, environment and label) asks for the budget and the search's knobs
(FindMaxDialog), then this screen runs `bench find-max` against the instance
(console/services/runs/find_max.py: every point a stored run) and draws each point as
it is measured (met / broke / repeated near a limit), the bracket the search has
narrowed to, the running point's progress, and the answer.

Data flow, as the benchmark screen's: one worker runs the search; its callback only
posts messages; their handler feeds the view model (console/ui/model/find_max_view.py,
no Textual) and marks the screen dirty; a 4 Hz clock redraws. Tests drive the screen
without a service: service=None and feed(event).

Keys: Esc leaves (a search left this way is stopped: the point running is cancelled on
the node, every point measured stays stored); x stops the search.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from textual.app import ComposeResult
from textual.binding import Binding
from textual.markup import escape
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Input, Select, Static

from console.core.bench.find_max import DIMENSIONS, SearchSpec
from console.core.model import BenchPreset, NodeSpec
from console.core.text import one_line
from console.services.instances import InstanceView
from console.services.runs.find_max import FindMaxError, FindMaxRunEvent, FindMaxService, FindMaxStopped
from console.services.runs.serving import BenchProgressed, BenchRunError
from console.transport.base import TransportError
from console.ui.model.bench_form import FormError
from console.ui.model.find_max_view import POINT_COLUMNS, FindMaxView, SearchFailed, SearchStopped, read_search
from console.ui.screens.form_dialog import FormDialog
from console.ui.widgets.key_bar import KeyBar
from console.ui.workers import run_named

REDRAW_INTERVAL = 0.25


class FindMaxDialog(FormDialog["tuple[SearchSpec, int | None] | None"]):
    """The budget and the search's knobs; dismisses with (spec, prompts per point) or None."""

    PREFIX = "find-max"
    TITLE_TEXT = "Find the highest load within a budget"
    GO_LABEL = "Search"
    PREVIEW = True
    FIRST_FIELD = "#find-max-budget"
    MEMORY = "find-max"
    MEMORY_FIELDS = ("find-max-budget", "find-max-by", "find-max-start", "find-max-max", "find-max-prompts")
    BINDINGS = [Binding("escape", "cancel", "Cancel")]  # ctrl+s searches (FormDialog)

    def __init__(self, preset: BenchPreset, instance: InstanceView, *, cursor_blink: bool | None = None) -> None:
        super().__init__(id="find-max-dialog")
        self.preset = preset
        self.instance = instance
        self.cursor_blink = cursor_blink

    def fields(self):
        yield "Budget", Input(placeholder="e.g. p99_ttft_ms=2000,p99_itl_ms=50", id="find-max-budget", compact=True)
        yield "By", Select([(d, d) for d in DIMENSIONS], value="concurrency", id="find-max-by", compact=True)
        yield "Start", Input(placeholder="1", id="find-max-start", compact=True)
        yield "Max", Input(placeholder="blank: 1024 (rate 512)", id="find-max-max", compact=True)
        # compact as the others: a bordered Input in a one-line grid row was drawn as a squashed border
        yield (
            "Prompts",
            Input(placeholder=f"per point; blank: {self.preset.num_prompts}", id="find-max-prompts", compact=True),
        )

    def memory_key(self) -> tuple[str, str] | None:
        return (self.preset.name, self.instance.node)

    def form_mounted(self) -> None:
        self.show_preview(
            f"every point a stored run of [b]{escape(self.preset.name)}[/b] against "
            f"[b]{escape(self.instance.name)}[/b] on {escape(self.instance.node)}"
        )

    def read_form(self) -> tuple[SearchSpec, int | None]:
        by = self.choice("find-max-by")
        return read_search(
            self.typed("find-max-budget"),
            by=str(by) if isinstance(by, str) else "concurrency",
            start=self.typed("find-max-start"),
            top=self.typed("find-max-max"),
            prompts=self.typed("find-max-prompts"),
        )

    def submit(self) -> None:
        try:
            answer = self.read_form()
        except FormError as exc:
            self.show_error(str(exc))
            return
        self.remember_values()
        self.dismiss(answer)


class FindMaxScreen(Screen):
    """A find-max search of `preset` against `instance` on `node`, drawn as it goes."""

    CSS_PATH = Path(__file__).with_name("find_max.tcss")
    BINDINGS = [
        Binding("escape", "leave", "Back"),
        Binding("x", "stop_search", "Stop search"),
    ]

    class Fed(Message):
        def __init__(self, event: object) -> None:
            super().__init__()
            self.event = event

        def can_replace(self, message: Message) -> bool:
            # a point's progress coalesces: the newest replaces one still queued
            def progress(m: Message) -> bool:
                return (
                    isinstance(m, FindMaxScreen.Fed)
                    and isinstance(m.event, FindMaxRunEvent)
                    and isinstance(m.event.event, BenchProgressed)
                )

            return progress(self) and progress(message)

    def __init__(
        self,
        node: NodeSpec,
        instance: InstanceView,
        preset: BenchPreset,
        spec: SearchSpec,
        *,
        service: FindMaxService | None,
        overrides: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        label: str | None = None,
        prompts: int | None = None,
        redraw_interval: float = REDRAW_INTERVAL,
    ) -> None:
        super().__init__(id="find-max-screen")
        self.node = node
        self.instance = instance
        self.preset = preset
        self.spec = spec
        self.service = service
        self.overrides = dict(overrides or {})
        self.extra_env = dict(extra_env or {})
        self.label = label
        self.prompts = prompts
        self.redraw_interval = redraw_interval
        self.view = FindMaxView(dimension=spec.dimension, budget=spec.budget.describe(), top=spec.top)
        self.redraws = 0
        self._dirty = True
        self._worker: Any = None

    def compose(self) -> ComposeResult:
        yield Static(id="find-max-title")
        yield Static(id="find-max-state")
        yield Static(id="find-max-ladder")
        yield Static(id="find-max-bracket")
        table: DataTable[Any] = DataTable(id="find-max-points", cursor_type="none", zebra_stripes=True)
        table.can_focus = False
        table.border_title = "Points (every one stored: h lists them)"
        table.add_columns(*POINT_COLUMNS)
        yield table
        yield Static(id="find-max-answer")
        yield KeyBar()

    def on_mount(self) -> None:
        self.set_interval(self.redraw_interval, self._tick, name="find-max-clock")
        if self.service is not None:
            self._worker = run_named(self, self._search(), f"find-max:{self.node.name}:{self.instance.name}")
        self.draw_now()

    # ------------------------------------------------------------ events in

    def feed(self, event: object) -> None:
        if self.view.apply(event):
            self._dirty = True

    def on_find_max_screen_fed(self, message: Fed) -> None:
        message.stop()
        self.feed(message.event)

    def _post(self, event: object) -> None:
        self.post_message(self.Fed(event))

    async def _search(self) -> None:
        service = self.service
        assert service is not None
        try:
            await service.search_instance(
                self.node,
                self.instance,
                self.preset,
                self.spec,
                overrides=self.overrides,
                extra_env=self.extra_env,
                num_prompts=self.prompts,
                label=self.label,
                on_event=self._post,
            )
        except FindMaxStopped:  # `bench cancel` on its point, from elsewhere: a stop, not a failure
            self._post(SearchStopped())
        except (FindMaxError, BenchRunError, TransportError) as exc:
            self._post(SearchFailed(one_line(exc)))

    # ------------------------------------------------------------ drawing

    def _tick(self) -> None:
        if self._dirty:
            self.draw_now()

    def draw_now(self) -> None:
        self._dirty = False
        self.redraws += 1
        v = self.view
        self.query_one("#find-max-title", Static).update(
            f"[b]find-max[/b] · {escape(self.preset.name)} against [b]{escape(self.instance.name)}[/b] on "
            f"{escape(self.node.name)} · by {v.dimension} · budget {escape(v.budget)}"
        )
        state = self.query_one("#find-max-state", Static)
        state.update(escape(v.state_line()))
        state.set_class(v.failed is not None, "-failed")
        self.query_one("#find-max-ladder", Static).update(escape(v.ladder()))
        self.query_one("#find-max-bracket", Static).update(escape(v.bracket_line()))
        table = self.query_one("#find-max-points", DataTable)
        rows = v.rows()
        if table.row_count != len(rows) or any(
            tuple(str(c) for c in table.get_row_at(i)) != row for i, row in enumerate(rows)
        ):
            table.clear()
            for row in rows:
                table.add_row(*row)
        answer = self.query_one("#find-max-answer", Static)
        lines = v.answer_lines()
        answer.display = bool(lines)
        answer.update(escape("\n".join(lines)))
        self.refresh_bindings()

    # ------------------------------------------------------------ keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop_search" and not (self.view.running and self._worker is not None):
            return False  # hidden once the search has ended (or there is none to stop)
        return True

    def action_stop_search(self) -> None:
        if self._worker is not None and self.view.running:
            self._worker.cancel()  # the service cancels the point's client on the node
            self.feed(SearchStopped())

    def action_leave(self) -> None:
        if self._worker is not None and self.view.running:
            self._worker.cancel()
        self.app.pop_screen()


def find_max_screen(
    app: Any,
    view: InstanceView,
    preset: BenchPreset,
    spec: SearchSpec,
    overrides: Mapping[str, str],
    env: Mapping[str, str],
    label: str | None,
    prompts: int | None,
) -> FindMaxScreen:
    """The screen for a search started from the benchmark dialog: the app's own links to the
    nodes (its fleet's pool) when it has them, the default results store."""
    from console.services.transports import TransportPool
    from console.ui.results_store import result_store

    fleet = getattr(app, "fleet", None)
    pool = getattr(fleet, "pool", None) or TransportPool()
    profile = getattr(app, "profile", None)
    node = profile.node(view.node) if profile is not None else None
    if node is None and fleet is not None:
        node = fleet.spec(view.node)
    if node is None:  # the dialog lists the app's instances: their nodes are the profile's
        raise FormError(f"node {view.node}: not in the profile")
    return FindMaxScreen(
        node,
        view,
        preset,
        spec,
        service=FindMaxService(
            pool, result_store(app), timeline=getattr(getattr(app, "health_watch", None), "record", None)
        ),
        overrides=overrides,
        extra_env=env,
        label=label,
        prompts=prompts,
    )
