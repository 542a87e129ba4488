"""What the benchmark screen shows, kept apart from Textual: the state of a run or
sweep fed by the bench service's events, and the texts, tables and chart data
drawn from it.

Everything is bounded: live samples per point (MAX_LIVE_POINTS), client output
lines waiting to be drawn (MAX_PENDING_LOG), sweep points (MAX_SWEEP_POINTS).
Only the running point keeps its live series; a finished point keeps its
summary row.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping, Sequence

from rich.table import Table
from rich.text import Text

from console.core.bench.output import BenchProgress, SetupLine, parse_progress
from console.core.bench.run_telemetry import summarize
from console.core.gpus import gpu_span
from console.core.model import BenchPreset, NodeSnapshot
from console.core.text import printable
from console.services.instances import InstanceView
from console.services.live_metrics import LiveSample
from console.services.runs.serving import (
    BenchFinished,
    BenchLogLine,
    BenchProgressed,
    BenchSetupSeen,
    BenchStarted,
    LiveMetricsSampled,
    RunOutcome,
    workload_lines,
)
from console.ui.model.charts import Trace
from console.ui.model.format import estimate
from console.ui.model.protocols import Samples

MAX_LIVE_POINTS = 3600  # an hour at the poller's 1 Hz
MAX_PENDING_LOG = 2000  # client lines waiting for the next redraw
MAX_SWEEP_POINTS = 64
MAX_LOG_LINE = 400  # characters of one client line (a Namespace(...) line runs to thousands)
GPU_LEAD_S = 10.0  # GPU charts start this long before the run: idle -> load is visible


# ---------------------------------------------------------------- the screen's own events
# The worker reports these next to the service's events, through the same door
# (BenchScreen.feed), so tests can replay a whole session without a runner.


@dataclass(frozen=True, slots=True)
class PointBegan:
    index: int
    point: int | None  # max concurrency of this run (None: no limit)


@dataclass(frozen=True, slots=True)
class PointFailed:
    """The point could not start or could not be followed (BenchRunError, a transport error)."""

    index: int
    reason: str


@dataclass(frozen=True, slots=True)
class RunStored:
    index: int
    run_id: str


@dataclass(frozen=True, slots=True)
class StoreFailed:
    index: int
    reason: str


@dataclass(frozen=True, slots=True)
class SweepEnded:
    """The worker ran every point (or stopped early: cancelled, a point failed to start)."""


# ---------------------------------------------------------------- state


_PHASES = {
    "ready_check_wait": "waiting for the endpoint",
    "initial_test_start": "initial test request",
    "initial_test_done": "initial test done",
    "warmup_start": "warming up",
    "warmup_done": "warm-up done",
    "main_start": "running",
}


@dataclass
class PointState:
    """One run (one point of a sweep)."""

    index: int
    point: int | None
    run: str | None = None
    argv: tuple[str, ...] = ()
    started_at: float | None = None  # console clock at BenchStarted
    finished_at: float | None = None
    phase: str = "starting the client"
    progress: BenchProgress | None = None
    setup: dict[str, SetupLine] = field(default_factory=dict)
    live: deque = field(default_factory=lambda: deque(maxlen=MAX_LIVE_POINTS))
    # (sample time, any of the run's GPUs throttled) per live sample, for the charts' marks
    throttled: deque = field(default_factory=lambda: deque(maxlen=MAX_LIVE_POINTS))
    outcome: RunOutcome | None = None
    error: str | None = None  # could not start / lost the output
    stored_id: str | None = None
    store_error: str | None = None

    @property
    def finished(self) -> bool:
        return self.outcome is not None or self.error is not None

    @property
    def last_live(self) -> LiveSample | None:
        return self.live[-1] if self.live else None


@dataclass(frozen=True, slots=True)
class SweepRow:
    """One finished point, as the sweep table and the Pareto charts show it."""

    index: int
    point: int | None
    run: str | None
    ok: bool
    reason: str | None
    completed: int | None = None
    failed: int | None = None
    output_tok_s: float | None = None
    median_ttft_ms: float | None = None
    median_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    stored_id: str | None = None


def row_from(state: PointState, cancelled: bool = False) -> SweepRow:
    o = state.outcome
    if o is None:
        return SweepRow(
            state.index, state.point, state.run, False, state.error or "no result", stored_id=state.stored_id
        )
    r = o.result
    m = r.metrics if r is not None else {}
    reason = "cancelled" if cancelled and not o.ok else o.reason
    return SweepRow(
        index=state.index,
        point=state.point,
        run=o.run,
        ok=o.ok,
        reason=reason,
        completed=None if r is None or r.completed is None else int(r.completed),
        failed=None if r is None or r.failed is None else int(r.failed),
        output_tok_s=m.get("output_throughput"),
        median_ttft_ms=m.get("median_ttft_ms"),
        median_itl_ms=m.get("median_itl_ms"),
        p99_itl_ms=m.get("p99_itl_ms"),
        stored_id=state.stored_id,
    )


class BenchSession:
    """A run or a sweep, as far as the events have told. apply() returns True when something changed."""

    def __init__(self, points: Sequence[int | None], clock: Callable[[], float]) -> None:
        self.points: list[int | None] = list(points)[:MAX_SWEEP_POINTS] or [None]
        self.clock = clock
        self.current: PointState | None = None
        self.rows: list[SweepRow] = []
        self.log_pending: deque[str] = deque(maxlen=MAX_PENDING_LOG)
        self.log_lines = 0  # client lines received (all points)
        self.cancel_requested = False
        self.ended = False

    @property
    def sweep(self) -> bool:
        return len(self.points) > 1

    @property
    def running(self) -> bool:
        return not self.ended

    def _for(self, run: str) -> PointState | None:
        cur = self.current
        if cur is None or cur.finished:
            return None
        if cur.run is None or cur.run == run:
            return cur
        return None  # a stray event of another run

    def apply(self, event: object) -> bool:
        cur = self.current
        if isinstance(event, PointBegan):
            self.current = PointState(event.index, event.point)
            return True
        if isinstance(event, PointFailed):
            if cur is None or cur.index != event.index:
                cur = self.current = PointState(
                    event.index, self.points[event.index] if 0 <= event.index < len(self.points) else None
                )
            cur.error = event.reason
            cur.phase = "failed"
            cur.finished_at = self.clock()
            self._add_row(cur)
            return True
        if isinstance(event, (RunStored, StoreFailed)):
            return self._stored(event)
        if isinstance(event, SweepEnded):
            self.ended = True
            return True
        if isinstance(event, BenchStarted):
            if cur is None or cur.finished:
                return False
            cur.run = event.run
            cur.argv = event.argv
            cur.started_at = self.clock()
            cur.phase = "client started"
            return True
        run = getattr(event, "run", None)
        if run is None:
            return False
        state = self._for(run)
        if state is None:
            return False
        if isinstance(event, BenchProgressed):
            state.progress = event.progress
            if event.progress.phase == "main" and state.phase not in ("running",):
                state.phase = "running"
            return True
        if isinstance(event, LiveMetricsSampled):
            state.live.append(event.sample)
            state.throttled.append((event.sample.ts, event.throttled))
            return True
        if isinstance(event, BenchSetupSeen):
            if len(state.setup) < 64 or event.line.kind in state.setup:
                state.setup[event.line.kind] = event.line
            phase = _PHASES.get(event.line.kind)
            if phase:
                state.phase = phase
            return True
        if isinstance(event, BenchLogLine):
            if parse_progress(event.text) is not None:
                return False  # tqdm redraws: the progress bar shows them
            text = printable(event.text.rstrip())  # the client's output: no control may reach the screen
            self.log_pending.append(clip_line(text, MAX_LOG_LINE))
            self.log_lines += 1
            return True
        if isinstance(event, BenchFinished):
            state.outcome = event.outcome
            state.finished_at = self.clock()
            state.phase = (
                "finished"
                if event.outcome.ok
                else ("cancelled" if (self.cancel_requested or event.outcome.cancelled) else "failed")
            )
            self._add_row(state)
            return True
        return False

    def _add_row(self, state: PointState) -> None:
        row = row_from(state, cancelled=self.cancel_requested)
        self.rows = [r for r in self.rows if r.index != state.index] + [row]
        self.rows.sort(key=lambda r: r.index)

    def _stored(self, event: RunStored | StoreFailed) -> bool:
        cur = self.current
        if cur is not None and cur.index == event.index:
            if isinstance(event, RunStored):
                cur.stored_id = event.run_id
            else:
                cur.store_error = event.reason
        self.rows = [
            replace(r, stored_id=event.run_id) if isinstance(event, RunStored) and r.index == event.index else r
            for r in self.rows
        ]
        return True


# ---------------------------------------------------------------- texts


def num_text(value: float | None, fmt: str = "{:.1f}", na: str = "–") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return na
    return fmt.format(value)


def duration(seconds: float | None) -> str:
    """0:07, 12:03, 1:02:03."""
    if seconds is None or seconds < 0 or math.isinf(seconds):
        return "–"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def point_text(point: int | None) -> str:
    return f"concurrency {point}" if point else "no concurrency limit"


def rate_text(preset: BenchPreset) -> str:
    return "rate inf" if preset.request_rate is None else f"rate {preset.request_rate:g}/s"


def dataset_text(preset: BenchPreset) -> str:
    if preset.input_len is not None or preset.output_len is not None:
        return f"{preset.dataset} {preset.input_len or '?'}/{preset.output_len or '?'}"
    return preset.dataset


def instance_text(view: InstanceView) -> str:
    """'amd/Llama-3.1-70B-Instruct-FP8-KV on GPUs 0-3, port 8000'."""
    model = view.served_models[0] if view.served_models else view.model
    where = f"GPU{'s' if len(view.gpus) > 1 else ''} {gpu_span(view.gpus, '?')}"
    if view.port:
        where += f", port {view.port}"
    return f"{model or '?'} on {where}"


def setup_text(preset: BenchPreset, points: Sequence[int | None], view: InstanceView) -> str:
    """'random 64/64 · 40 prompts · concurrency 4 · rate inf · vllm bench serve · tiny-llama on GPU 1, port 8000'."""
    conc = (
        f"concurrency {','.join(str(p) if p else '∞' for p in points)}"
        if len(points) > 1
        else point_text(points[0] if points else None)
    )
    client = "benchmark_serving.py" if preset.client == "benchmark_serving" else "vllm bench serve"
    each = " each" if len(points) > 1 else ""
    return (
        f"{dataset_text(preset)} · {preset.num_prompts} prompts{each} · {conc} · "
        f"{rate_text(preset)} · {client} · {instance_text(view)}"
    )


def compact(value: float | None, na: str = "–") -> str:
    """A number in few characters: 0.42, 24.6, 2480, 27.8k."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return na
    v = abs(value)
    if v == 0:
        return "0"
    if v >= 100_000:
        return f"{value / 1000:.0f}k"
    if v >= 10_000:
        return f"{value / 1000:.1f}k"
    if v >= 100:
        return f"{value:.0f}"
    if v >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def progress_text(state: PointState | None, now: float, total_hint: int | None = None) -> str:
    """'23/40 requests · 57% · 7.9 req/s · elapsed 0:03 · ETA 0:02'."""
    if state is None:
        return f"0/{total_hint or '?'} requests · waiting to start"
    p = state.progress
    parts = []
    if p is None:
        parts.append(f"0/{total_hint or '?'} requests")
    else:
        what = "warm-up" if p.phase == "warmup" else "requests"
        parts.append(f"{p.n}/{p.total} {what}")
        parts.append(f"{p.fraction * 100:.0f}%")
        if p.rate is not None:
            parts.append(f"{p.rate:.1f} req/s")
    if state.started_at is not None:
        end = state.finished_at if state.finished_at is not None else now
        parts.append(f"elapsed {duration(end - state.started_at)}")
    if not state.finished and p is not None and p.remaining_s is not None:
        parts.append(f"ETA {duration(p.remaining_s)}")
    if state.finished:
        parts.append(state.phase)
    elif p is None or p.phase != "main":
        parts.append(state.phase)
    return " · ".join(parts)


# Live latencies come from /metrics histograms (bucket estimates, format.estimate); once the
# client's result arrives, vLLM's own figure for the same percentile replaces each.
ESTIMATED = frozenset({"ttft_p50", "ttft_p90", "ttft_p99", "itl_p50", "itl_p90", "itl_p99", "e2e_p50", "e2e_p99"})
FINAL_OF = {
    "ttft_p50": "median_ttft_ms",
    "ttft_p99": "p99_ttft_ms",
    "itl_p50": "median_itl_ms",
    "itl_p99": "p99_itl_ms",
    "e2e_p50": "median_e2el_ms",
    "e2e_p99": "p99_e2el_ms",
}


def final_metrics(state: PointState | None) -> dict | None:
    """vLLM's own numbers of a finished point (None while it runs or when it wrote none)."""
    if state is None or not state.finished or state.outcome is None or state.outcome.result is None:
        return None
    return dict(state.outcome.result.metrics) or None


def latency_text(attr: str, sample: LiveSample | None, final: Mapping | None = None) -> str:
    """A live latency as shown: vLLM's final figure (2 decimals) once known, else the bucket
    estimate (≈, two significant digits: format.estimate)."""
    key = FINAL_OF.get(attr)
    if final is not None and key is not None and final.get(key) is not None:
        return num_text(final[key], "{:.2f}")
    value = getattr(sample, attr) if sample is not None else None
    return estimate(value) if attr in ESTIMATED else compact(value)


LOG_INDENT = "  "  # a wrapped client line's continuation


def clip_line(text: str, limit: int) -> str:
    """A client line cut to `limit` characters at a space (never inside a number or a word),
    with `…` saying it was cut."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 1)  # room for " …"
    if cut <= limit // 2:  # one long word: cut it, better than dropping most of the line
        cut = limit - 2
    return text[:cut].rstrip() + " …"


_LOG_TOKEN = re.compile(r" +|[^ ]+")
_NUMBER = re.compile(r"\d+(?:[.:]\d+)*")  # 3.1, 127.0.0.1, 07:42:47: one value each


def _break_at(word: str, room: int) -> int:
    """Where a word wider than the line may break: the last place within `room` that is not
    inside a number (`70B` and `3.1` stay whole); `room` itself only when nothing else fits."""
    inside = {i for m in _NUMBER.finditer(word) for i in range(m.start() + 1, m.end())}
    return next((i for i in range(min(room, len(word) - 1), 0, -1) if i not in inside), room)


def wrap_log_line(text: str, width: int) -> list[str]:
    """A client line as the output pane shows it at `width` columns: wrapped at spaces,
    continuation lines indented; a word wider than the pane breaks outside its numbers, so no
    number is cut mid-value at any width (only one longer than the pane itself could be)."""
    width = max(8, width)
    if len(text) <= width:
        return [text]
    lines: list[str] = []
    cur = ""
    for tok in _LOG_TOKEN.findall(text):
        if len(cur) + len(tok) <= width:
            cur += tok
            continue
        if tok.startswith(" "):  # a break at the spaces: they go
            lines.append(cur.rstrip())
            cur = LOG_INDENT
            continue
        if cur.strip():
            lines.append(cur.rstrip())
            cur = LOG_INDENT
        while len(cur) + len(tok) > width:
            take = _break_at(tok, width - len(cur))
            lines.append(cur + tok[:take])
            cur, tok = LOG_INDENT, tok[take:]
        cur += tok
    if cur.strip():
        lines.append(cur.rstrip())
    return lines or [text[:width]]


# Figures that only exist while the run goes on: once it ended, their last value is no result.
LIVE_ONLY = frozenset({"running", "waiting"})
FINAL_RATE = {"output_tok_s": "output_throughput"}  # vLLM's figure that replaces the live rate


def _final_value(attr: str, final: Mapping | None) -> float | None:
    key = FINAL_OF.get(attr) or FINAL_RATE.get(attr)
    return final.get(key) if final is not None and key is not None else None


def live_chart_title(
    title: str,
    pairs: Sequence[tuple[str, str]],
    unit: str,
    sample: LiveSample,
    final: Mapping | None = None,
    ended: bool = False,
) -> str:
    """'TTFT p50 ≈2500 · p99 ≈5200 ms · /metrics buckets', then 'TTFT p50 2480.12 · p99 5210.40 ms · vLLM'
    once the run's result arrived; 'Output 2167 tok/s · live', then 'Output 2259.86 tok/s · vLLM'.
    Once the run `ended`, vLLM's figure where it has one (its table's 2 decimals), the last live
    value marked as such where it has none, and no running/waiting count at all."""
    counts = bool(pairs) and all(attr in LIVE_ONLY for attr, _ in pairs)
    if ended and counts:
        return f"{title or 'Requests'} · live, run ended".strip()

    def value(attr: str) -> str:
        v = getattr(sample, attr)
        if attr in ("running", "waiting"):
            return num_text(v, "{:.0f}")
        exact = _final_value(attr, final)
        if exact is not None:
            return num_text(exact, "{:.2f}")
        return latency_text(attr, sample, final)

    values = " · ".join(f"{label} {value(attr)}".strip() for attr, label in pairs if not (ended and attr in LIVE_ONLY))
    text = f"{title} {values}{unit}".strip()
    latencies = [attr for attr, _ in pairs if attr in ESTIMATED]
    finals = [attr for attr, _ in pairs if attr in FINAL_OF or attr in FINAL_RATE]
    if finals and all(_final_value(a, final) is not None for a in finals):
        return text + (" · vLLM's result" if latencies else " · vLLM")  # a rate chart's title is short
    if latencies:  # the estimate's mark says where it is from: live /metrics
        return text + " · ≈ /metrics bucket estimate" + (" · last sample" if ended else "")
    if counts:  # 'live running 64 · waiting 0': the label first, the chart's title is short
        return f"live {text}"
    return text + (" · last sample" if ended else " · live")


def live_now_text(sample: LiveSample | None, final: bool = False, metrics: Mapping | None = None) -> str:
    """The server's last /metrics sample in one line, labelled live (windowed percentiles, bucket
    estimates marked ≈); once the run ended (`final`), vLLM's own figures from its result
    (`metrics`, the numbers of its table and of the stored result) and no live counts."""
    if final and metrics is not None and metrics.get("output_throughput") is not None:
        return (
            f"vLLM's result: TTFT p50 {num_text(metrics.get('median_ttft_ms'), '{:.2f}')} ms · "
            f"ITL p50 {num_text(metrics.get('median_itl_ms'), '{:.2f}')} ms · "
            f"output {num_text(metrics.get('output_throughput'), '{:.2f}')} tok/s · "
            f"{num_text(metrics.get('request_throughput'), '{:.2f}')} req/s"
        )
    if sample is None:
        if final:
            return "server /metrics: no sample of the run · vLLM wrote no result"
        return "server /metrics: no sample yet · charts: x = seconds since the run started"
    ttft = latency_text("ttft_p50", sample)
    itl = latency_text("itl_p50", sample)
    if final:  # no result of vLLM's: the last live sample, and nothing that reads as still running
        return (
            f"last live sample (run ended, no result): TTFT p50 {ttft} ms · ITL p50 {itl} ms (≈ bucket estimates) · "
            f"{num_text(sample.output_tok_s, '{:.0f}')} tok/s · KV {num_text(sample.kv_cache_pct, '{:.1f}')}%"
        )
    cache = "" if sample.prefix_hit_pct is None else f" · prefix cache {sample.prefix_hit_pct:.0f}%"  # issue B2
    return (
        f"live: TTFT p50 {ttft} ms · ITL p50 {itl} ms (≈ bucket estimates) · "
        f"{num_text(sample.output_tok_s, '{:.0f}')} tok/s · running {num_text(sample.running, '{:.0f}')} · "
        f"waiting {num_text(sample.waiting, '{:.0f}')} · KV {num_text(sample.kv_cache_pct, '{:.1f}')}%{cache}"
    )


def failure_text(state: PointState, cancelled: bool = False) -> str | None:
    """Why the run did not succeed, one line (None when it did)."""
    if state.error:
        return state.error
    o = state.outcome
    if o is None or o.ok:
        return None
    if cancelled and o.reason != "cancelled":
        return "cancelled"
    reason = o.reason or "failed"
    r = o.result
    if r is not None and reason != "cancelled" and not (r.failed and "failed" in reason):
        reason += f" ({int(r.completed or 0)} completed, {int(r.failed or 0)} failed)"
    return reason


def first_errors(outcome: RunOutcome | None, limit: int = 3) -> list[str]:
    """The first distinct error messages of a run, for the failure panel."""
    if outcome is None:
        return []
    seen: list[str] = []
    for e in outcome.errors:
        msg = " ".join(e.message.split())[:200]
        if msg and msg not in seen:
            seen.append(msg)
        if len(seen) >= limit:
            break
    return seen


_LATENCY_ROWS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL"))


def result_table(state: PointState, cancelled: bool = False) -> Table:
    """vLLM's own numbers (the result JSON), or why there are none."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column()
    o = state.outcome
    r = o.result if o is not None else None
    failure = failure_text(state, cancelled)
    if failure:
        grid.add_row(Text(f"✖ {failure}", style="bold red"))
        for msg in first_errors(o):
            if msg != failure and msg not in failure:
                grid.add_row(Text(f"  {msg}", style="red"))
    if r is None:
        if not failure:
            grid.add_row(Text("waiting for the result…", style="dim"))
        return grid
    m = r.metrics
    head = Text()
    if not failure:
        head.append("✔ ", style="bold green")
    head.append(f"{int(r.completed or 0)} completed", style="bold")
    head.append(" · ")
    head.append(f"{int(r.failed or 0)} failed", style="bold red" if r.failed else "")
    head.append(f" · {num_text(r.duration, '{:.2f}')} s")
    if r.max_concurrency:
        head.append(f" · concurrency {r.max_concurrency}")
    grid.add_row(head)
    grid.add_row(
        Text(
            f"{num_text(m.get('request_throughput'), '{:.2f}')} req/s · output "
            f"{num_text(m.get('output_throughput'), '{:.2f}')} tok/s · "
            f"total {num_text(m.get('total_token_throughput'), '{:.2f}')} tok/s"
            + (
                f" · peak {num_text(m.get('max_output_tokens_per_s'), '{:.2f}')} tok/s"
                if m.get("max_output_tokens_per_s")
                else ""
            )
        )
    )
    lat = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
    lat.add_column("ms")
    for head_text in ("mean", "median", "p99"):
        lat.add_column(head_text, justify="right")
    for key, label in _LATENCY_ROWS:
        if f"mean_{key}_ms" in m or f"median_{key}_ms" in m:
            lat.add_row(label, *(num_text(m.get(f"{stat}_{key}_ms"), "{:.2f}") for stat in ("mean", "median", "p99")))
    if lat.row_count:
        grid.add_row(lat)
    for line in truth_lines(state.outcome):
        grid.add_row(line)
    if state.stored_id:
        grid.add_row(Text.assemble(("stored as ", "dim"), (state.stored_id, "bold")))
    elif state.store_error:
        grid.add_row(Text(f"not stored: {state.store_error}", style="yellow"))
    return grid


def truth_lines(outcome: RunOutcome | None) -> list[Text]:
    """Energy, throttling and the client check of a finished run (issue P), one line each."""
    if outcome is None:
        return []
    out: list[Text] = []
    r = outcome.result
    if outcome.telemetry is not None:
        e = summarize(
            outcome.telemetry, None if r is None or r.total_output_tokens is None else float(r.total_output_tokens)
        )
        source = "" if e.source == "counter" else f" ({e.source.replace('_', ' ')})"
        line = Text(
            f"energy {num_text(e.energy_j, '{:.0f}')} J{source} · avg {num_text(e.avg_power_w, '{:.0f}')} W · "
            f"{num_text(e.tokens_per_joule, '{:.3g}')} tokens/J · "
        )
        throttled = e.throttled_pct
        line.append(f"throttled {num_text(throttled, '{:.1f}')}%", style="bold yellow" if throttled else "")
        out.append(line)
    elif outcome.telemetry_note:
        out.append(Text(f"energy not recorded: {outcome.telemetry_note}", style="dim"))
    check = outcome.client_check
    if check is not None:
        if check.client_bound:
            out.append(Text("CLIENT-BOUND: " + "; ".join(check.reasons), style="bold red"))
        elif check.client_bound is None:
            out.append(Text("client check: not judged: " + "; ".join(check.reasons), style="dim"))
        else:
            out.append(Text("client check: ok, client and server agree", style="green"))
    for pitfall in outcome.pitfalls:
        out.append(Text(f"client pitfall: {pitfall.line}", style="yellow"))
    out.extend(Text(line, style="bold red" if line.startswith("WARNING") else "") for line in workload_lines(outcome))
    return out


SWEEP_COLUMNS = ("conc", "tok/s", "TTFT", "ITL", "ITL p99", "failed", "stored as")  # latencies: ms, median


def sweep_cells(row: SweepRow) -> tuple[Text, ...]:
    conc = str(row.point) if row.point else "∞"
    if row.run is None and not row.ok and row.completed is None:
        return (
            Text(conc),
            Text("–", justify="right"),
            Text("–", justify="right"),
            Text("–", justify="right"),
            Text("–", justify="right"),
            Text("–", justify="right"),
            Text(row.reason or "failed", style="red"),
        )
    failed = Text(
        str(row.failed) if row.failed is not None else "–", justify="right", style="bold red" if row.failed else ""
    )
    stored = Text(
        row.stored_id or ("" if row.ok else (row.reason or "failed")),
        style="" if row.stored_id else ("red" if not row.ok else "dim"),
    )
    return (
        Text(conc),
        Text(num_text(row.output_tok_s, "{:.0f}"), justify="right"),
        Text(compact(row.median_ttft_ms), justify="right"),
        Text(compact(row.median_itl_ms), justify="right"),
        Text(compact(row.p99_itl_ms), justify="right"),
        failed,
        stored,
    )


# ---------------------------------------------------------------- chart data


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    x: float
    y: float
    label: str


def pareto_points(rows: Iterable[SweepRow], x_attr: str) -> list[ParetoPoint]:
    """One point per finished point with numbers: x = latency (ms), y = output tok/s. A point
    where no request succeeded is left out (its zero latency would read as the best)."""
    out = []
    for r in rows:
        if r.completed == 0:
            continue
        x, y = getattr(r, x_attr), r.output_tok_s
        if x is None or y is None:
            continue
        out.append(ParetoPoint(float(x), float(y), f"c{r.point}" if r.point else "c∞"))
    return out


def pareto_note(rows: Iterable[SweepRow]) -> str:
    """' · 1 failed point left out' when a point had no successful request, else ''."""
    n = sum(1 for r in rows if r.completed == 0)
    return f" · {n} failed point{'s' if n != 1 else ''} left out" if n else ""


def pareto_front(points: Sequence[ParetoPoint]) -> list[ParetoPoint]:
    """The points no other beats on both (lower latency and higher throughput), by latency."""
    front: list[ParetoPoint] = []
    for p in sorted(points, key=lambda p: (p.x, -p.y)):
        if not front or p.y > front[-1].y:
            front.append(p)
    return front


def throttle_spans(marks: Iterable[tuple[float, bool | None]]) -> list[tuple[float, float]]:
    """Throttle episodes from per-sample marks: a sample's state holds until the next sample."""
    spans: list[tuple[float, float]] = []
    start: float | None = None
    last_t: float | None = None
    for t, throttled in marks:
        if throttled and start is None:
            start = t
        elif not throttled and start is not None:
            spans.append((start, t))
            start = None
        last_t = t
    if start is not None and last_t is not None:
        spans.append((start, last_t))
    return spans


def live_traces(samples: Iterable[LiveSample], pairs: Sequence[tuple[str, str]]) -> list[Trace]:
    """Traces of LiveSample attributes: pairs of (attribute, label)."""
    samples = list(samples)
    times = [s.ts for s in samples]
    return [Trace(label, times, [getattr(s, attr) for s in samples]) for attr, label in pairs]


def _combine(
    traces: Sequence[tuple[list[float], list[float | None]]], how: Callable[[list[float]], float]
) -> tuple[list[float], list[float | None]]:
    if len(traces) == 1:
        return traces[0]
    buckets: dict[float, list[float]] = {}
    for times, values in traces:
        for t, v in zip(times, values):
            bucket = buckets.setdefault(t, [])
            if v is not None:
                bucket.append(v)
    order = sorted(buckets)
    return order, [how(buckets[t]) if buckets[t] else None for t in order]


def gpu_traces(
    snapshot: NodeSnapshot | None,
    series: Callable[[str, int, str], Samples | None],
    node: str,
    gpus: Sequence[int],
    since_agent: float | None,
    until_agent: float | None,
    to_console: Callable[[float], float],
) -> tuple[Trace, Trace]:
    """Utilization (mean of the instance's GPUs) and power (sum over their physical GPUs)
    from the fleet's ring buffers, between two agent-clock times, on the console's clock.

    Secondary partitions report no power: their physical GPU's primary partition is
    counted once instead.
    """
    statics = {g.index: g for g in snapshot.static} if snapshot is not None else {}

    def read(gpu: int, metric: str) -> tuple[list[float], list[float | None]]:
        s = series(node, gpu, metric)
        times: list[float] = []
        values: list[float | None] = []
        if s is None:
            return times, values
        for t, v in s:
            if since_agent is not None and t < since_agent:
                continue
            if until_agent is not None and t > until_agent:
                break
            times.append(to_console(t))
            values.append(v)
        return times, values

    util = [read(g, "util_pct") for g in gpus]
    power_sources: list[int] = []
    seen_physical: set[int] = set()
    for g in gpus:
        st = statics.get(g)
        if st is None:
            power_sources.append(g)
            continue
        if st.physical in seen_physical:
            continue
        seen_physical.add(st.physical)
        primary = next((p for p in statics.values() if p.physical == st.physical and p.partition_id == 0), st)
        power_sources.append(primary.index)
    power = [read(g, "power_w") for g in power_sources]
    ut, uv = _combine(util, lambda xs: sum(xs) / len(xs)) if util else ([], [])
    pt, pv = _combine(power, sum) if power else ([], [])
    ulabel = f"GPU {gpus[0]}" if len(gpus) == 1 else f"{len(gpus)} GPUs"  # their mean
    plabel = f"GPU {gpus[0]}" if len(gpus) == 1 else f"{len(power_sources)} GPUs"  # their sum
    return Trace(ulabel, ut, uv), Trace(plabel, pt, pv)


def last_value(trace: Trace) -> float | None:
    return next((v for v in reversed(trace.values) if v is not None), None)
