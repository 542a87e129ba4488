"""`b` on a replica group's row: one benchmark of the whole group, live.

One `vllm bench serve --save-detailed` client per ready replica (console/services/group_bench.py).
While it runs: the group's total progress and one line per replica; then the group's result
(throughputs summed, latencies merged over every request) above each replica's own.

Data flow: the worker's callback only posts messages; their handler updates plain state; a
4 Hz clock redraws. ctrl+s runs (Enter in the concurrency field does not: it only moves
to the preset, issue U2); Esc leaves (the clients go on, detached on the nodes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.markup import escape
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, Select, Static

from console.core.bench.output_events import BenchProgress
from console.core.model import BenchPreset
from console.services.groups import GroupView
from console.services.instances import InstanceError
from console.services.results import ResultStore
from console.services.runs.group import GroupBenchOutcome, GroupBenchRunner, format_group_outcome
from console.services.runs.outcome import RunRecorder
from console.services.runs.serving import BenchProgressed, BenchRunError
from console.transport.base import TransportError
from console.ui.model.protocols import console_host
from console.ui.widgets.key_bar import KeyBar
from console.ui.workers import run_named


def progress_lines(progress: dict[str, BenchProgress], replicas: list[str], width: int = 20) -> list[str]:
    """The group's total, then one line per replica ('-' for a client not followed live)."""

    def bar(n: int, total: int) -> str:
        filled = round(width * n / total) if total else 0
        return "█" * filled + "░" * (width - filled)

    done = sum(p.n for p in progress.values())
    total = sum(p.total for p in progress.values())
    lines = [f"group   {bar(done, total)} {done}/{total} requests (the clients followed live)"]
    for name in replicas:
        p = progress.get(name)
        short = name.rsplit("-", 1)[-1]
        if p is None:
            lines.append(f"  {short:<5} {'·' * width} waiting for its client")
        else:
            rate = f"  {p.rate:.1f} req/s" if p.rate else ""
            lines.append(f"  {short:<5} {bar(p.n, p.total)} {p.n}/{p.total}{rate}")
    return lines


class GroupBenchScreen(Screen):
    BINDINGS = [  # no ids: not in the [keys] table
        Binding("ctrl+s", "start_run", "Run"),
        Binding("escape", "leave", "Back"),
    ]

    @dataclass
    class Fed(Message):
        replica: str
        event: object

    @dataclass
    class Done(Message):
        outcome: GroupBenchOutcome | None
        error: str | None

    def __init__(self, group: GroupView, *, store: ResultStore | None = None) -> None:
        super().__init__(id="group-bench-screen")
        self.group = group
        self.store = store  # where the results go, like the single-instance screen (None: not stored)
        self.stored: str | None = None
        self.preset: BenchPreset | None = None
        self.progress: dict[str, BenchProgress] = {}
        self.outcome: GroupBenchOutcome | None = None
        self.error: str | None = None
        self.running = False
        self.started: float | None = None

    def compose(self) -> ComposeResult:
        app = console_host(self.app)
        presets = [(p.name, p.name) for p in app.profile.bench_presets]
        yield Static(id="group-bench-title")
        with Horizontal(id="group-bench-form"):
            yield Select(presets, value=presets[0][1] if presets else Select.BLANK, id="group-bench-preset")
            yield Input(placeholder="concurrency (group total)", id="group-bench-concurrency")
        yield Static(id="group-bench-body")
        yield KeyBar()

    def on_mount(self) -> None:
        self.set_interval(0.25, self.redraw)
        self.redraw()

    def _title(self) -> str:
        g = self.group
        state = "running" if self.running else ("finished" if self.outcome or self.error else "ctrl+s starts")
        return f" [b]Benchmark group {escape(g.name)}[/b] · {g.ready}/{g.total} replicas ready · {state}"

    def redraw(self, now: float | None = None) -> None:  # the app's clock passes its time
        self.query_one("#group-bench-title", Static).update(self._title())
        names = [v.name for v in self.group.replicas if v.state.value == "ready"]
        lines: list[str] = []
        if self.running or self.outcome is not None:
            lines += [escape(line) for line in progress_lines(self.progress, names)]
        if self.outcome is not None:
            lines += ["", escape(format_group_outcome(self.outcome))]
            if self.stored:
                lines.append(f"  {escape(self.stored)}")
        if self.error:
            lines += ["", f"[red]{escape(self.error)}[/red]"]
        if not lines:
            lines = ["One client per ready replica, the concurrency split evenly; ctrl+s starts it."]
        self.query_one("#group-bench-body", Static).update("\n".join(lines))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()  # Enter in a field starts nothing: the preset is the next field
        self.query_one("#group-bench-preset", Select).focus()

    def action_start_run(self) -> None:
        self.start()

    def start(self) -> None:
        if self.running:
            return
        preset_name = self.query_one("#group-bench-preset", Select).value
        app = console_host(self.app)
        preset = next((p for p in app.profile.bench_presets if p.name == preset_name), None)
        if preset is None:
            self.error = "no bench preset in the profile ([bench.NAME] tables)"
            return
        text = self.query_one("#group-bench-concurrency", Input).value.strip()
        concurrency: int | None = preset.max_concurrency[0] if preset.max_concurrency else None
        if text:
            if not text.isdigit() or int(text) < 1:
                self.error = f"concurrency {text!r}: a positive number"
                return
            concurrency = int(text)
        self.error, self.outcome, self.progress, self.stored = None, None, {}, None
        self.preset = preset
        self.running, self.started = True, time.monotonic()
        run_named(self, self._run(preset, concurrency), f"group-bench:{self.group.name}")

    async def _run(self, preset, concurrency: int | None) -> None:
        app = console_host(self.app)
        nodes = [app.fleet.spec(n) for n in self.group.nodes]

        def fed(replica: str, event: object) -> None:  # the worker only posts
            self.post_message(self.Fed(replica, event))

        try:
            outcome = await GroupBenchRunner(app.fleet.pool).run(
                nodes,
                self.group,
                preset,
                concurrency=concurrency,
                on_event=fed,
            )
        except (BenchRunError, InstanceError, TransportError) as exc:
            self.post_message(self.Done(None, " ".join(str(exc).split())))
        else:
            self.post_message(self.Done(outcome, None))

    def on_group_bench_screen_fed(self, message: Fed) -> None:
        event = message.event
        if isinstance(event, BenchProgressed) and event.progress.phase == "main":
            self.progress[message.replica] = event.progress

    @dataclass
    class Stored(Message):
        text: str

    def on_group_bench_screen_done(self, message: Done) -> None:
        self.running = False
        self.outcome, self.error = message.outcome, message.error
        if self.store is not None and self.outcome is not None and self.preset is not None:
            run_named(self, self._store(self.outcome, self.preset), f"group-bench-store:{self.group.name}")
        self.redraw()

    async def _store(self, outcome: GroupBenchOutcome, preset: BenchPreset) -> None:
        """As `bench run --group` stores it (runs/outcome.py); reports through a message."""
        recorder = RunRecorder(console_host(self.app).fleet.pool, self.store)
        try:
            recorded = await recorder.group(outcome, self.group, preset)
        except Exception as exc:  # never a traceback on the screen
            self.post_message(self.Stored(f"not stored: {' '.join(str(exc).split())}"))
            return
        if recorded.reason is not None:
            self.post_message(self.Stored(f"not stored: {recorded.reason}"))
        elif recorded.ids:
            ids = recorded.ids
            self.post_message(self.Stored(f"stored as {ids[-1]} (the group), with {len(ids) - 1} replica results"))

    def on_group_bench_screen_stored(self, message: Stored) -> None:
        self.stored = message.text
        self.redraw()

    def action_leave(self) -> None:
        self.app.pop_screen()
