"""A benchmark run or sweep against one instance: progress, live charts, the client's
output, then vLLM's own result table (and, for a sweep, a table and Pareto charts).

Data flow. One async worker runs the points one after another with
BenchRunner.run(on_event=...). The callback only posts messages (progress and
live samples coalesce: a newer one replaces one still queued); their handler
feeds the event to the session (console/ui/model/bench_view.py, no Textual) and marks
the screen dirty. The screen's own clock (4 Hz) redraws what changed. Results
are stored by the same RunRecorder as `rocm-console bench run` (runs/outcome.py: the file
I/O in a thread; a result the store cannot take is kept on the node, and the screen says where).

Tests and screenshots drive the same screen without a runner: runner=None and
feed(event) with recorded or synthetic events.

Keys: x cancels the run (after a confirmation); Esc leaves. A run left this way
goes on on the node (it runs detached there); `rocm-console bench runs` lists it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.markup import escape
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Log, ProgressBar, Static

from console.core.bench.argv import apply_bench_overrides
from console.core.model import BenchPreset, NodeSnapshot, NodeSpec
from console.core.results.build import preset_changes
from console.core.results.display import run_title
from console.core.text import one_line
from console.services.fleet import FleetTelemetry
from console.services.instances import InstanceError, InstanceView
from console.services.results import ResultStore
from console.services.runs.outcome import RunRecorder, sweep_id_for
from console.services.runs.serving import (
    BenchFinished,
    BenchProgressed,
    BenchRunError,
    BenchRunner,
    BenchStarted,
    LiveMetricsSampled,
    RunOutcome,
)
from console.transport.base import TransportError
from console.ui.model import bench_view as bv
from console.ui.model.bench_form import BenchRequest
from console.ui.model.protocols import SeriesReader
from console.ui.widgets.bench_plots import LivePlot, ParetoPlot
from console.ui.widgets.key_bar import KeyBar
from console.ui.workers import run_named

REDRAW_INTERVAL = 0.25  # 4 Hz at most
MAX_LOG_LINES = 2000  # in the Log widget

# (widget id, title, LiveSample attributes and legend labels, unit of the values in the title, y limits)
LIVE_CHARTS: tuple[tuple[str, str, tuple[tuple[str, str], ...], str, tuple[float, float] | None], ...] = (
    ("chart-ttft", "TTFT", (("ttft_p50", "p50"), ("ttft_p99", "p99")), " ms", None),
    ("chart-itl", "ITL", (("itl_p50", "p50"), ("itl_p99", "p99")), " ms", None),
    ("chart-tokens", "Output", (("output_tok_s", ""),), " tok/s", None),
    ("chart-requests", "", (("running", "running"), ("waiting", "waiting")), "", None),
    ("chart-kv", "KV cache", (("kv_cache_pct", ""),), "%", (0.0, 100.0)),
    ("chart-e2e", "E2E", (("e2e_p50", "p50"), ("e2e_p99", "p99")), " ms", None),
)
# Charts that mark GPU throttle episodes (issue P): the latencies a throttled GPU stretches.
THROTTLE_MARKED = frozenset({"chart-ttft", "chart-itl"})
# Titles before the first sample.
_EMPTY_TITLES = {
    "chart-ttft": "TTFT ms",
    "chart-itl": "ITL ms",
    "chart-tokens": "Output tok/s",
    "chart-requests": "Requests running · waiting",
    "chart-kv": "KV cache %",
    "chart-e2e": "E2E ms",
}


def chart_title(
    title: str, pairs: Sequence[tuple[str, str]], unit: str, sample, final: Mapping | None = None, ended: bool = False
) -> str:
    """'TTFT p50 ≈2500 · p99 ≈5200 ms · ≈ /metrics bucket estimate', 'Output 2167 tok/s · live' (bench_view)."""
    return bv.live_chart_title(title, pairs, unit, sample, final, ended)


class BenchScreen(Screen):
    """Run `points` (one = a run, several = a sweep) of `preset` against `instance` on `node`.

    fleet: the FleetTelemetry (GPU utilization and power from its ring buffers), or
    None. runner: a BenchRunner, or None to drive the screen with feed(). store: a
    ResultStore to keep each result in (None: not stored).
    """

    CSS_PATH = Path(__file__).with_name("bench.tcss")

    # Its own breakpoints, so the layout fits wherever the screen is hosted: below 32 rows
    # one row of charts (TTFT, ITL, tok/s, GPU util) and a lower bottom pane.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    BINDINGS = [
        Binding("escape", "leave", "Back", id="close-bench"),
        Binding("x", "cancel_run", "Cancel run", id="cancel-bench"),
    ]

    class Fed(Message):
        """An event for the session (from the runner's callback or the worker).

        Progress and live samples of the same run coalesce: the newest replaces
        one still queued (the screen draws at 4 Hz anyway).
        """

        def __init__(self, event: object) -> None:
            super().__init__()
            self.event = event

        def can_replace(self, message: Message) -> bool:
            if not isinstance(message, BenchScreen.Fed):
                return False
            mine, other = self.event, message.event
            kinds = (BenchProgressed, LiveMetricsSampled)
            return (
                type(mine) is type(other)
                and isinstance(mine, kinds)
                and isinstance(other, kinds)
                and mine.run == other.run
            )

    def __init__(
        self,
        fleet: SeriesReader | None,
        node: NodeSpec,
        instance: InstanceView,
        preset: BenchPreset,
        *,
        runner: BenchRunner | None,
        store: ResultStore | None = None,
        points: Sequence[int | None] = (None,),
        overrides: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        label: str | None = None,
        clock: Callable[[], float] = time.time,
        redraw_interval: float = REDRAW_INTERVAL,
    ) -> None:
        super().__init__(id="bench-screen")
        self.fleet = fleet
        self.node = node
        self.instance = instance
        self.preset = preset
        self.runner = runner
        self.store = store
        self.overrides = dict(overrides or {})
        self.extra_env = dict(extra_env or {})
        self.label = label
        self.clock = clock
        self.redraw_interval = redraw_interval
        try:
            self.effective = apply_bench_overrides(preset, self.overrides)
            self.config_error: str | None = None
        except ValueError as exc:
            self.effective = preset
            self.config_error = one_line(exc)
        self.session = bv.BenchSession(list(points) or [None], clock)
        self.outcomes: list[RunOutcome] = []  # the worker's, in point order (for callers and tests)
        self.redraws = 0
        self._dirty = True
        self._ready = False
        self._cancel_sent: str | None = None
        self._drawn: dict[str, object] = {}
        # the client's lines as they came (bounded like the pane), re-wrapped when the pane's width changes
        self._log_raw: collections.deque[str] = collections.deque(maxlen=MAX_LOG_LINES)
        self._log_wrapped_at = -1
        self._gpu_window: tuple[float | None, float | None] = (None, None)  # agent clock
        if self.session.sweep:
            self.add_class("-sweep")

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Static(id="bench-title")
        yield Static(id="bench-banner")
        with Horizontal(id="bench-progress-row"):
            yield ProgressBar(
                total=self.effective.num_prompts or 100, show_eta=False, show_percentage=False, id="bench-progress"
            )
            yield Static(id="bench-progress-text")
        yield Static(id="bench-live-text")
        with Grid(id="bench-charts"):
            for widget_id, _, _, _, ylim in LIVE_CHARTS[:5]:
                yield LivePlot(_EMPTY_TITLES[widget_id], ylim=ylim, id=widget_id)
            yield LivePlot("GPU util %", ylim=(0.0, 100.0), id="chart-gpu-util")
            yield LivePlot("GPU power W", id="chart-gpu-power")
            widget_id, _, _, _, ylim = LIVE_CHARTS[5]
            yield LivePlot(_EMPTY_TITLES[widget_id], ylim=ylim, id=widget_id)
        with Horizontal(id="bench-bottom"):
            log = Log(max_lines=MAX_LOG_LINES, id="bench-log")  # lines wrapped to its width: no scroll sideways
            log.border_title = "Client output"
            yield log
            yield Static(id="bench-result")
            with Vertical(id="bench-sweep-box"):
                table: DataTable[Any] = DataTable(id="bench-sweep", cursor_type="none", zebra_stripes=True)
                table.can_focus = False
                table.border_title = "Sweep"
                table.add_columns(*bv.SWEEP_COLUMNS)
                yield table
                with Horizontal(id="bench-pareto"):
                    yield ParetoPlot("Output tok/s vs median TTFT", "median TTFT ms", id="pareto-ttft")
                    yield ParetoPlot("Output tok/s vs median ITL", "median ITL ms", id="pareto-itl")
        yield KeyBar()

    def on_mount(self) -> None:
        self._ready = True
        self.query_one("#bench-result", Static).border_title = "Result · vLLM's numbers"
        self.set_interval(self.redraw_interval, self._tick, name="bench-clock")
        if self.config_error:
            self.feed(bv.PointFailed(0, f"bench preset {self.preset.name}: {self.config_error}"))
            self.feed(bv.SweepEnded())
        elif self.runner is not None:
            run_named(self, self._run_points(), f"bench:{self.node.name}:{self.instance.name}", exclusive=True)
        self.draw_now()

    # ------------------------------------------------------------ events in

    def feed(self, event: object) -> None:
        """Apply one event (the service's, or bench_view's own) and mark the screen dirty."""
        if isinstance(event, BenchStarted):
            self._gpu_window = (self._agent_now(), None)
        if self.session.apply(event):
            self._dirty = True
        if isinstance(event, BenchFinished):
            self._gpu_window = (self._gpu_window[0], self._agent_now())
        elif isinstance(event, bv.PointFailed) and self._gpu_window[0] is not None:
            self._gpu_window = (self._gpu_window[0], self._agent_now())
        if isinstance(event, BenchStarted) and self.session.cancel_requested:
            self._send_cancel()  # x was pressed before the run had a name
        if isinstance(event, bv.SweepEnded) and self.is_mounted:
            self.refresh_bindings()  # x: nothing left to cancel

    def _post(self, event: object) -> None:
        self.post_message(self.Fed(event))

    def on_bench_screen_fed(self, message: Fed) -> None:
        message.stop()
        self.feed(message.event)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_run" and not self.session.running:
            return False  # hidden: the run has ended, x would do nothing
        if action == "cancel_run" and self.session.cancel_requested:
            return None  # shown dimmed: the cancel is on its way
        return True

    @classmethod
    def from_request(
        cls,
        request: BenchRequest,
        *,
        fleet: FleetTelemetry,
        runner: BenchRunner | None,
        store: ResultStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> BenchScreen:
        """The screen for what StartBenchDialog returned (a bench_form.BenchRequest)."""
        return cls(
            fleet,
            fleet.spec(request.node),
            request.instance,
            request.preset,
            runner=runner,
            store=store,
            points=list(request.points),
            overrides=request.overrides,
            extra_env=request.extra_env,
            label=request.label,
            clock=clock,
        )

    # ------------------------------------------------------------ the worker (no widgets)

    async def _run_points(self) -> None:
        runner = self.runner
        assert runner is not None
        if isinstance(self.fleet, FleetTelemetry) and runner.fleet is None:
            runner.fleet = self.fleet  # the run's GPUs recorded from the stream the console has
        # The fleet's timeline (events.jsonl) gets each point's start and end, when the app keeps one.
        timeline = getattr(self.app, "health_watch", None)
        what = f"{self.preset.name} (concurrency {{}})"
        recorder = RunRecorder(runner.pool, self.store)  # the one path to a record: runs/outcome.py
        sweep_id = sweep_id_for(self.session.points)
        for index, point in enumerate(self.session.points):
            if self.session.cancel_requested:
                break
            self._post(bv.PointBegan(index, point))
            if timeline is not None:
                timeline.benchmark_started(self.node.name, what.format(point or "-"), self.instance.name)
            ok = False
            try:
                outcome = await runner.run(
                    self.node,
                    self.instance,
                    self.preset,
                    overrides=self.overrides,
                    max_concurrency=point,
                    on_event=self._post,
                    extra_env=self.extra_env or None,
                )
                ok = outcome.result_json is not None
            except (BenchRunError, InstanceError, TransportError) as exc:
                self._post(bv.PointFailed(index, one_line(exc)))
                break  # the next point would fail the same way
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never a traceback on the screen
                self._post(bv.PointFailed(index, f"{type(exc).__name__}: {one_line(exc)}"))
                break
            finally:
                if timeline is not None:
                    timeline.benchmark_finished(self.node.name, what.format(point or "-"), self.instance.name, ok=ok)
            if self.store is not None and outcome.result_json is not None:
                await self._record(recorder, outcome, index, point, sweep_id)
            self.outcomes.append(dataclasses.replace(outcome, live=()))  # bounded: the series went to the store
            if outcome.cancelled or self.session.cancel_requested:
                break
        self._post(bv.SweepEnded())

    async def _record(
        self, recorder: RunRecorder, outcome: RunOutcome, index: int, point: int | None, sweep_id: str | None
    ) -> None:
        """Store the point's result as `bench run` does (or keep it on the node, and say where)."""
        try:
            recorded = await recorder.serving(
                self.node,
                self.instance,
                outcome,
                self.effective,
                label=self.label,
                sweep_id=sweep_id,
                point=point,
                snapshot=self._snapshot(),
            )
        except Exception as exc:  # never a traceback on the screen
            self._post(bv.StoreFailed(index, one_line(exc)))
            return
        if recorded.reason is not None:
            self._post(bv.StoreFailed(index, recorded.reason))
        elif recorded.stored_id is not None:
            self._post(bv.RunStored(index, recorded.stored_id))

    # ------------------------------------------------------------ GPU telemetry

    def _snapshot(self) -> NodeSnapshot | None:
        if self.fleet is None:
            return None
        try:
            return self.fleet.snapshot(self.node.name)
        except KeyError:
            return None

    def _agent_now(self) -> float | None:
        snap = self._snapshot()
        return snap.latest.ts if snap is not None and snap.latest is not None else None

    def _to_console(self, snap: NodeSnapshot | None) -> Callable[[float], float]:
        """Agent clock -> console clock (the skew is the last frame's: its ts vs when it arrived)."""
        if snap is None or snap.latest is None or snap.last_sample_ts is None:
            return lambda t: t
        skew = snap.latest.ts - snap.last_sample_ts
        return lambda t: t - skew

    # ------------------------------------------------------------ drawing (the clock)

    def _tick(self) -> None:
        if getattr(self.app, "paused", False):
            return
        snap = self._snapshot()
        gpu_key = snap.latest.ts if snap is not None and snap.latest is not None else None
        second = int(self.clock())
        if not self._dirty and self._drawn.get("gpu") == gpu_key and self._drawn.get("second") == second:
            return
        self.draw_now()

    def redraw(self, now: float) -> None:
        """The console app's clock calls this too: draw only when something changed."""
        self._tick()

    def draw_now(self) -> None:
        if not self._ready:
            return
        now = self.clock()
        self._dirty = False
        self._drawn["second"] = int(now)
        session = self.session
        cur = session.current
        with self.app.batch_update():
            self._draw_title(now)
            self._draw_progress(cur, now)
            self._draw_log()
            self._draw_live(cur)
            self._draw_gpu(cur)
            self._draw_result(cur)
            if session.sweep:
                self._draw_sweep()
        self.redraws += 1

    def _set(self, widget_id: str, content) -> None:
        """Update a Static only when its text changed."""
        key = content.plain if isinstance(content, Text) else str(content)
        if self._drawn.get(widget_id) == key:
            return
        self._drawn[widget_id] = key
        self.query_one(f"#{widget_id}", Static).update(content)

    def _state_word(self) -> tuple[str, str]:
        s = self.session
        cur = s.current
        if s.ended:
            if cur is not None and cur.phase == "cancelled" or s.cancel_requested:
                return "cancelled", "$text-warning"
            if any(not r.ok for r in s.rows) or not s.rows:
                return "failed" if not s.sweep else "finished with failures", "$text-error"
            return "finished", "$text-success"
        if s.cancel_requested:
            return "cancelling…", "$text-warning"
        return (cur.phase if cur is not None else "starting"), "$text-accent"

    def _draw_title(self, now: float) -> None:
        s = self.session
        cur = s.current
        word, var = self._state_word()
        first = (
            f"[b]Benchmark[/b] {escape(run_title(self.preset.name, preset_changes(self.preset, self.effective)))}"
            f" → [b]{escape(self.instance.name)}[/b] "
            f"on [b]{escape(self.node.name)}[/b]"
        )
        if s.sweep:
            index = cur.index + 1 if cur is not None else 0
            first += f" · point {index}/{len(s.points)}"
            if cur is not None:
                first += f" (c{cur.point or '∞'})"
        first += f" · [{var}]{escape(word)}[/]"
        if getattr(self.app, "paused", False):
            first += " · [$text-warning]⏸ paused[/]"
        second = bv.setup_text(self.effective, s.points, self.instance)
        if cur is not None and cur.run:
            second += f" · run {cur.run}"
        self._set("bench-title", first + "\n[dim]" + escape(second) + "[/dim]")
        self._draw_banner()

    def _draw_banner(self) -> None:
        s = self.session
        banner = self.query_one("#bench-banner", Static)
        kind, text = "", ""
        if s.sweep:
            bad = [r for r in s.rows if not r.ok]
            if s.ended and s.rows:
                done = sum(1 for r in s.rows if r.ok)
                stored = sum(1 for r in s.rows if r.stored_id)
                text = f"sweep: {done} of {len(s.points)} points ok · {stored} stored"
                kind = "-ok" if not bad and len(s.rows) == len(s.points) else "-failed"
                if s.cancel_requested:
                    kind = "-cancelled"
            if bad:
                r = bad[0]
                text = (text + " · " if text else "") + f"c{r.point or '∞'}: {r.reason}"
                kind = kind or ("-cancelled" if r.reason == "cancelled" else "-failed")
        else:
            cur = s.current
            if cur is not None and cur.finished:
                failure = bv.failure_text(cur, s.cancel_requested)
                if failure:
                    kind = "-cancelled" if failure == "cancelled" else "-failed"
                    text = ("✖ " if kind == "-failed" else "■ ") + failure
                    if failure == "cancelled" and cur.outcome is not None and cur.outcome.result is not None:
                        text += f" after {int(cur.outcome.result.completed or 0)} completed"
                else:
                    text = "✔ every request completed"
                    kind = "-ok"
                    if cur.stored_id:
                        text += f" · stored as {cur.stored_id}"
        for cls in ("-ok", "-failed", "-cancelled"):
            banner.set_class(cls == kind, cls)
        self._set("bench-banner", Text(text))

    def _draw_progress(self, cur: bv.PointState | None, now: float) -> None:
        bar = self.query_one("#bench-progress", ProgressBar)
        total = self.effective.num_prompts or None
        if cur is not None and cur.progress is not None:
            p = cur.progress
            if bar.total != p.total:
                bar.update(total=max(1, p.total))
            bar.update(progress=p.n)
        else:
            bar.update(total=total or 100, progress=0)
        self._set("bench-progress-text", Text(bv.progress_text(cur, now, total)))
        self._set(
            "bench-live-text",
            Text(
                bv.live_now_text(
                    cur.last_live if cur is not None else None,
                    final=cur is not None and cur.finished,
                    metrics=bv.final_metrics(cur),
                )
            ),
        )

    def _draw_log(self) -> None:
        pending = self.session.log_pending
        if not pending:
            return
        lines = list(pending)
        pending.clear()
        log = self.query_one("#bench-log", Log)
        self._log_raw.extend(lines)
        width = self._log_width()
        if width != self._log_wrapped_at:  # the pane changed size: wrap everything afresh
            self._rewrap_log()
        else:
            log.write_lines([piece for line in lines for piece in bv.wrap_log_line(line, width)])
        if log.auto_scroll:  # again once the new lines are laid out (a first batch can land early)
            self.call_after_refresh(log.scroll_end, animate=False)
        log.border_title = f"Client output · {self.session.log_lines} lines"

    def _log_width(self) -> int:
        """Columns a client line may use in the output pane (its vertical scrollbar kept clear)."""
        log = self.query_one("#bench-log", Log)
        return max(8, log.content_region.width - log.styles.scrollbar_size_vertical)

    def _rewrap_log(self) -> None:
        log = self.query_one("#bench-log", Log)
        width = self._log_width()
        self._log_wrapped_at = width
        log.clear()
        log.write_lines([piece for line in self._log_raw for piece in bv.wrap_log_line(line, width)])
        if log.auto_scroll:
            self.call_after_refresh(log.scroll_end, animate=False)

    def on_resize(self) -> None:
        if self._ready and self._log_raw:  # after the layout: the pane's new width
            self.call_after_refresh(self._rewrap_if_resized)

    def _rewrap_if_resized(self) -> None:
        if self._log_width() != self._log_wrapped_at:
            self._rewrap_log()

    def _draw_live(self, cur: bv.PointState | None) -> None:
        key = (
            id(cur),
            len(cur.live) if cur is not None else 0,
            cur.live[-1].ts if cur is not None and cur.live else None,
            id(cur.outcome) if cur is not None else None,  # vLLM's numbers replace the estimates
        )
        if self._drawn.get("live") == key:
            return
        self._drawn["live"] = key
        samples = list(cur.live) if cur is not None else []
        t0 = cur.started_at if cur is not None and cur.started_at is not None else (samples[0].ts if samples else 0.0)
        last = samples[-1] if samples else None
        spans = bv.throttle_spans(cur.throttled) if cur is not None else []
        for widget_id, title, pairs, unit, ylim in LIVE_CHARTS:
            plot = self.query_one(f"#{widget_id}", LivePlot)
            if last is None:
                plot.replot([], t0, _EMPTY_TITLES[widget_id], ylim=ylim)
                continue
            marked = spans if widget_id in THROTTLE_MARKED else ()
            text = chart_title(title, pairs, unit, last, bv.final_metrics(cur), ended=cur is not None and cur.finished)
            if marked:
                text += f" · GPU throttled {sum(e - s for s, e in marked):.0f}s (red)"
            plot.replot(bv.live_traces(samples, pairs), t0, text, ylim=ylim, spans=marked)

    def _draw_gpu(self, cur: bv.PointState | None) -> None:
        snap = self._snapshot()
        fleet = self.fleet
        gpu_key = snap.latest.ts if snap is not None and snap.latest is not None else None
        self._drawn["gpu"] = gpu_key
        closed = self._gpu_window[1] is not None  # the run ended: its window no longer moves
        key = (None if closed else gpu_key, id(cur), self._gpu_window)
        if self._drawn.get("gpu-key") == key:
            return
        self._drawn["gpu-key"] = key
        util_plot = self.query_one("#chart-gpu-util", LivePlot)
        power_plot = self.query_one("#chart-gpu-power", LivePlot)
        if snap is None or fleet is None or not self.instance.gpus:
            util_plot.replot([], 0.0, "GPU util % · no telemetry")
            power_plot.replot([], 0.0, "GPU power W · no telemetry")
            return
        start, end = self._gpu_window
        if start is None and cur is not None and cur.started_at is not None:
            start = self._agent_now()  # the fleet had no frame when the run started
            self._gpu_window = (start, end)
        since = start - bv.GPU_LEAD_S if start is not None else None
        to_console = self._to_console(snap)
        util, power = bv.gpu_traces(snap, fleet.series, self.node.name, self.instance.gpus, since, end, to_console)
        t0 = (
            cur.started_at
            if cur is not None and cur.started_at is not None
            else (to_console(start) if start is not None else (util.times[-1] if util.times else 0.0))
        )
        uv, pv = bv.num_text(bv.last_value(util), "{:.0f}"), bv.num_text(bv.last_value(power), "{:.0f}")
        util_plot.replot([util], t0, f"GPU util {uv}% · {util.label}")
        power_plot.replot([power], t0, f"GPU power {pv} W · {power.label}")

    def _draw_result(self, cur: bv.PointState | None) -> None:
        if self.session.sweep:
            return
        if cur is None or not cur.finished:
            self._set("bench-result", Text("the result table appears when the run ends", style="dim"))
            return
        key = ("result", cur.index, cur.stored_id, cur.store_error, cur.phase, id(cur.outcome), cur.error)
        if self._drawn.get("bench-result") == key:
            return
        self._drawn["bench-result"] = key
        self.query_one("#bench-result", Static).update(bv.result_table(cur, self.session.cancel_requested))

    def _draw_sweep(self) -> None:
        rows = tuple(self.session.rows)
        if self._drawn.get("sweep") == rows:
            return
        self._drawn["sweep"] = rows
        table = self.query_one("#bench-sweep", DataTable)
        table.clear()
        for row in rows:
            table.add_row(*bv.sweep_cells(row))
        table.border_title = f"Sweep · {len(rows)}/{len(self.session.points)} points · medians, ms"
        note = bv.pareto_note(rows)  # a point with no successful request is no data point
        self.query_one("#pareto-ttft", ParetoPlot).replot(bv.pareto_points(rows, "median_ttft_ms"), note)
        self.query_one("#pareto-itl", ParetoPlot).replot(bv.pareto_points(rows, "median_itl_ms"), note)

    # ------------------------------------------------------------ keys

    def action_leave(self) -> None:
        s = self.session
        cur = s.current
        if s.running and self.runner is not None:
            if cur is not None and cur.run and not cur.finished:
                rest = len(s.points) - cur.index - 1
                more = f" The sweep's other {rest} point{'s' if rest != 1 else ''} will not start." if rest else ""
                self.app.notify(
                    f"{cur.run} goes on on {self.node.name}; the console stops following it.{more} "
                    f"`rocm-console bench runs --node {self.node.name}` lists it; its result JSON stays in "
                    "the run's folder on the node.",
                    title="benchmark left running",
                    timeout=12,
                    markup=False,
                )
            else:
                self.app.notify("the benchmark was not started", markup=False)
        self.app.pop_screen()

    def action_cancel_run(self) -> None:
        from console.ui.screens.confirm import ConfirmScreen

        s = self.session
        if not s.running or s.current is None and self.runner is None:
            self.app.notify("no benchmark is running", markup=False)
            return
        if s.cancel_requested:
            self.app.notify("already cancelling", markup=False)
            return
        cur = s.current
        run = cur.run if cur is not None and cur.run else "the benchmark"
        rest = len(s.points) - (cur.index + 1 if cur is not None else 0)
        question = (
            f"Cancel {run} on {self.node.name}?\nThe client gets SIGINT (then SIGTERM): requests in "
            "flight are dropped and no result is written."
        )
        if s.sweep and rest:
            question += f"\nThe sweep's other {rest} point{'s' if rest != 1 else ''} will not run."

        def answered(yes: bool | None) -> None:
            if yes:
                self.cancel_run()

        self.app.push_screen(ConfirmScreen("Cancel benchmark", question, "Cancel run"), answered)

    def cancel_run(self) -> None:
        """Stop the client on the node (no confirmation: the key asks first)."""
        self.session.cancel_requested = True
        self._dirty = True
        self.refresh_bindings()
        self._send_cancel()

    def _send_cancel(self) -> None:
        cur = self.session.current
        if self.runner is None or cur is None or not cur.run or cur.finished or self._cancel_sent == cur.run:
            return  # no name yet: feed(BenchStarted) sends it
        self._cancel_sent = cur.run
        run_named(self, self._run_cancel(self.runner, cur.run), f"bench-cancel:{cur.run}", group="bench-cancel")

    async def _run_cancel(self, runner: BenchRunner, run: str) -> None:
        try:
            await runner.cancel(self.node, run)
        except (BenchRunError, InstanceError, TransportError) as exc:
            self.app.notify(one_line(exc), title=f"cancel {run}: failed", severity="error", markup=False)
