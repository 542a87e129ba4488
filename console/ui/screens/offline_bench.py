"""Offline benchmarks in the TUI: a dialog (preset, GPUs, overrides, label) and a
screen that runs `vllm bench latency|throughput` on the node's free GPUs, shows
its progress, vLLM's last lines and the result, and stores it.

Opened from the command palette ("NODE: offline benchmark"). The keys are the
benchmark screen's own (same ids, so a [keys] remap applies to both). The
worker only posts messages; the handlers draw.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Select, Static

from console.core.bench.offline import OfflinePreset, offline_headline
from console.core.bench.output import parse_progress
from console.core.model import NodeSpec
from console.core.results.reference import ReferenceRow, reference_matches
from console.core.text import printable
from console.services.results import ResultStore
from console.services.runs.offline import (
    OfflineFinished,
    OfflineLogLine,
    OfflineOutcome,
    OfflineProgressed,
    OfflineRunError,
    OfflineRunner,
    OfflineStarted,
)
from console.services.runs.outcome import RunRecorder
from console.transport.base import TransportError
from console.ui.model.offline_form import OfflineRequest, check_offline_request, preset_key, preset_prompt
from console.ui.model.start_form import FormError
from console.ui.screens.form_dialog import FormDialog
from console.ui.widgets.key_bar import KeyBar
from console.ui.workers import run_named

LOG_LINES = 12  # vLLM's last lines shown (bounded)


class OfflineBenchDialog(FormDialog["OfflineRequest | None"]):
    PREFIX = "offline-start"
    FIRST_FIELD = "#offline-gpus"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="cancel-bench-start"),
        Binding("ctrl+s", "submit", "Run", id="submit-bench-start"),
    ]

    def __init__(self, node: str, presets: Sequence[OfflinePreset], *, cursor_blink: bool | None = None) -> None:
        super().__init__(id="offline-start-dialog")
        self.node = node
        self.presets = tuple(presets)
        self.cursor_blink = cursor_blink

    def box_title(self) -> str:
        return f"Offline benchmark on {self.node}"

    def fields(self) -> Iterable[tuple[str, Widget]]:
        yield (
            "Preset",
            Select(
                [(Text(preset_prompt(p)), preset_key(p)) for p in self.presets],
                value=preset_key(self.presets[0]) if self.presets else Select.BLANK,
                allow_blank=not self.presets,
                id="offline-preset",
                compact=True,
            ),
        )
        yield "GPUs", Input(placeholder="e.g. 0,1,2,3 — free GPUs; TP = their number", id="offline-gpus", compact=True)
        yield (
            "Overrides",
            Input(placeholder="e.g. model=/models/m input_len=128 batch_size=4", id="offline-overrides", compact=True),
        )
        yield "Label", Input(placeholder="optional, stored with the result", id="offline-label", compact=True)

    def submit(self) -> None:
        value = self.choice("offline-preset")
        try:
            request = check_offline_request(
                self.node,
                value if isinstance(value, str) else None,
                self.presets,
                self.typed("offline-gpus"),
                self.typed("offline-overrides"),
                self.typed("offline-label"),
            )
        except FormError as exc:
            self.show_error(str(exc))
            return
        self.dismiss(request)


class OfflineBenchScreen(Screen):
    CSS_PATH = Path(__file__).with_name("offline_bench.tcss")
    BINDINGS = [
        Binding("escape", "leave", "Back", id="close-bench"),
        Binding("x", "cancel_run", "Cancel run", id="cancel-bench"),
    ]

    @dataclass
    class Fed(Message):
        """A runner event (started, progressed, a log line, finished)."""

        event: object

    @dataclass
    class Stored(Message):
        run_id: str | None
        reference: str | None

    @dataclass
    class Refused(Message):
        text: str

    def __init__(
        self,
        node: NodeSpec,
        request: OfflineRequest,
        *,
        runner: OfflineRunner,
        store: ResultStore | None,
        reference_rows: Sequence[ReferenceRow] = (),
    ) -> None:
        super().__init__()
        self.node = node
        self.request = request
        self.runner = runner
        self.store = store
        self.reference_rows = tuple(reference_rows)
        self.run_name: str | None = None
        self.notes = ""
        self.running = True
        self.outcome: OfflineOutcome | None = None
        self.stored_id: str | None = None
        self.log_lines: collections.deque[str] = collections.deque(maxlen=LOG_LINES)

    def compose(self) -> ComposeResult:
        p = self.request.preset
        gpus = ",".join(map(str, self.request.gpus))
        yield Static(Text(f"{p.kind} · {p.name} · {self.node.name} GPUs {gpus} · TP {p.tp}"), id="offline-title")
        yield Static(Text("checking that the GPUs are free…"), id="offline-status")
        yield Static(id="offline-progress")
        yield Static(id="offline-result")
        yield Static(id="offline-log")
        yield KeyBar()

    def on_mount(self) -> None:
        run_named(self, self._go(), f"offline-bench:{self.node.name}", group="offline-bench", exclusive=True)

    async def _go(self) -> None:
        try:
            check = await self.runner.preflight(self.node, self.request.gpus, self.request.preset.tp)
            outcome = await self.runner.run(
                self.node,
                self.request.preset,
                self.request.gpus,
                version=check.version,
                on_event=self._feed,
            )
        except (OfflineRunError, TransportError) as exc:
            self.post_message(self.Refused(str(exc)))
            return
        if outcome.result_json is None:
            return
        try:
            recorded = await RunRecorder(self.runner.pool, self.store).offline(
                self.node,
                outcome,
                self.request.preset,
                self.request.gpus,
                snapshot=check.snapshot,
                version=check.version,
                overrides=dict(self.request.overrides),
                label=self.request.label,
            )
        except Exception as exc:  # never a traceback on the screen: the result stays on the node
            self.post_message(self.Refused(f"{outcome.run}: not stored ({' '.join(str(exc).split())})"))
            return
        if recorded.reason is not None:  # kept on the node (or not parsable): the line says where
            self.post_message(self.Refused(f"not stored ({recorded.reason})"))
            return
        run = recorded.record
        matches = reference_matches(run, self.reference_rows) if run is not None and self.reference_rows else []
        reference = None
        if matches:
            row = matches[0].row
            key = "latency_s" if outcome.kind == "latency" else "throughput_tok_s"
            reference = f"seed {row.seed} reference ({row.gpu} TP{row.tp}): {row.metrics.get(key)} {key}"
        self.post_message(self.Stored(recorded.stored_id, reference))

    def _feed(self, event) -> None:
        self.post_message(self.Fed(event))

    # ------------------------------------------------------------ drawing (messages only)

    def on_offline_bench_screen_fed(self, message: Fed) -> None:
        event = message.event
        if isinstance(event, OfflineStarted):
            self.run_name = event.run
            self.notes = "".join(f"\nnote: {n}" for n in event.notes)  # what the node's vLLM refuses, and what was done
            notes = self.notes
            self.query_one("#offline-status", Static).update(Text(f"running {event.run} on {event.node}{notes}"))
        elif isinstance(event, OfflineProgressed):
            p = event.progress.progress
            width = 30
            filled = int(width * p.fraction)
            bar = "█" * filled + "·" * (width - filled)
            self.query_one("#offline-progress", Static).update(Text(f"{event.progress.phase:<9} {bar} {p.n}/{p.total}"))
        elif isinstance(event, OfflineLogLine):
            if parse_progress(event.text) is not None:
                return  # tqdm redraws: the progress line shows them
            self.log_lines.append(printable(event.text[-200:]))
            self.query_one("#offline-log", Static).update(Text("\n".join(self.log_lines)))
        elif isinstance(event, OfflineFinished):
            self.running = False
            self.outcome = event.outcome
            self.query_one("#offline-result", Static).update(Text(_result_text(event.outcome)))
            self.query_one("#offline-status", Static).update(
                Text(f"{event.outcome.run}: {'finished' if event.outcome.ok else 'FAILED'}{self.notes}")
            )

    def on_offline_bench_screen_stored(self, message: Stored) -> None:
        self.stored_id = message.run_id
        box = self.query_one("#offline-result", Static)
        text = _result_text(self.outcome) if self.outcome else ""
        if message.run_id:
            text += f"\nstored as {message.run_id} (h: results)"
        if message.reference:
            text += f"\n{message.reference}"
        box.update(Text(text))

    def on_offline_bench_screen_refused(self, message: Refused) -> None:
        self.running = False
        self.query_one("#offline-status", Static).update(Text(message.text, style="bold red"))

    def action_leave(self) -> None:
        if self.running and self.run_name:
            self.app.notify(f"{self.run_name} goes on on the node: bench runs / --attach", markup=False)
        self.app.pop_screen()

    async def action_cancel_run(self) -> None:
        if self.running and self.run_name:
            self.query_one("#offline-status", Static).update(Text(f"stopping {self.run_name}…"))
            try:
                await self.runner.cancel(self.node, self.run_name)
            except TransportError as exc:
                self.app.notify(f"could not stop {self.run_name}: {exc}", severity="error", markup=False)


def _result_text(outcome: OfflineOutcome) -> str:
    if not outcome.ok:
        return f"FAILED: {outcome.reason}"
    figures, note = offline_headline(outcome.kind, outcome.result_json)
    return " · ".join(figures) + (f" {note}" if note else "")
