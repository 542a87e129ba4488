"""What the find-max screen shows, from the search's events (no Textual): the points as they
are measured (met / broke / undecided, their figures and run ids), the bracket that the
search has narrowed to, the running point's progress, and the answer.

Also the find-max form's checks (`read_search`): the budget as `bench find-max --budget`
takes it, and the search's knobs, each bad value one line naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from console.core.bench.find_max import DIMENSIONS, PointResult, SearchError, SearchSpec, parse_budget
from console.core.experiment.spec import Budget
from console.services.runs.find_max import (
    FindMaxAnswer,
    FindMaxFinished,
    FindMaxPointMeasured,
    FindMaxPointStarted,
    FindMaxRunEvent,
    FindMaxStarted,
    stopped_line,
)
from console.services.runs.serving import BenchProgressed
from console.ui.model.bench_form import FormError

POINT_COLUMNS = (
    "load",
    "runs",
    "verdict",
    "out tok/s",
    "good %",
    "p99 TTFT ms",
    "p99 ITL ms",
    "p99 E2E ms",
    "tok/J",
    "run",
)
VERDICT = {True: "meets", False: "breaks", None: "again"}
MARK = {True: "●", False: "✕", None: "◐"}


@dataclass(frozen=True, slots=True)
class SearchFailed:
    """The search stopped without an answer (the service's one line)."""

    message: str


@dataclass(frozen=True, slots=True)
class SearchStopped:
    """The user stopped the search (x): a stop, not a failure; its points stay stored."""


def read_search(
    budget: str,
    *,
    by: str = "concurrency",
    start: str = "",
    top: str = "",
    prompts: str = "",
    named: Mapping[str, Budget] | None = None,
) -> tuple[SearchSpec, int | None]:
    """The form's fields as (search spec, prompts per point or None); FormError naming the field."""
    try:
        parsed = parse_budget(budget, named)
    except SearchError as exc:
        said = str(exc)  # core's lines already name the budget: never "budget: budget: empty"
        raise FormError(said if said.startswith("budget") else f"budget: {said}") from None
    if by not in DIMENSIONS:
        raise FormError(f"by: '{by}' is not one of {', '.join(DIMENSIONS)}")

    def number(text: str, what: str) -> float | None:
        text = text.strip()
        if not text:
            return None
        try:
            value = float(text)
        except ValueError:
            raise FormError(f"{what}: expected a load > 0, got '{text}'") from None
        if not math.isfinite(value) or value <= 0:
            raise FormError(f"{what}: expected a load > 0, got '{text}'")
        return value

    first = number(start, "start")
    highest = number(top, "max")
    count = None
    if prompts.strip():
        try:
            count = int(prompts.strip())
        except ValueError:
            raise FormError(f"prompts: expected a whole number >= 1, got '{prompts.strip()}'") from None
        if count < 1:
            raise FormError(f"prompts: expected a whole number >= 1, got '{prompts.strip()}'")
    try:
        spec = SearchSpec(budget=parsed, dimension=by, start=first or 1.0, max_load=highest)
    except SearchError as exc:
        raise FormError(str(exc).replace("find-max ", "")) from None
    return spec, count


def load_text(load: float | None, dimension: str) -> str:
    if load is None:
        return "-"
    return f"{int(load)}" if dimension == "concurrency" else f"{load:g}/s"


def _num(value: object, fmt: str = "{:.1f}", na: str = "-") -> str:
    return fmt.format(value) if isinstance(value, (int, float)) and math.isfinite(value) else na


@dataclass
class FindMaxView:
    """The search as the screen draws it; apply(event) says whether anything changed."""

    dimension: str = "concurrency"
    target: str = ""
    budget: str = ""
    search: str = ""
    top: float | None = None
    points: dict[float, PointResult] = field(default_factory=dict)  # by load, in the order first measured
    run_ids: dict[float, list[str]] = field(default_factory=dict)
    current: float | None = None  # the load being run now
    attempt: int = 0
    progress: tuple[int, int] | None = None
    lo: float | None = None
    hi: float | None = None
    runs: int = 0
    answer: FindMaxAnswer | None = None
    failed: str | None = None
    stopped: bool = False  # by the user: what the service says after it is no failure

    @property
    def running(self) -> bool:
        return self.answer is None and self.failed is None and not self.stopped

    def apply(self, event: object) -> bool:
        if isinstance(event, FindMaxStarted):
            self.dimension = event.spec.dimension
            self.target = event.target
            self.budget = event.spec.budget.describe()
            self.search = event.search
            self.top = event.spec.top
        elif isinstance(event, FindMaxPointStarted):
            self.current, self.attempt, self.progress = event.load, event.attempt, None
        elif isinstance(event, FindMaxRunEvent):
            inner = event.event
            if not isinstance(inner, BenchProgressed) or inner.progress.phase != "main":
                return False
            self.progress = (inner.progress.n, inner.progress.total)
        elif isinstance(event, FindMaxPointMeasured):
            self.points[event.load] = event.point
            self.run_ids.setdefault(event.load, []).append(event.run_id)
            self.lo, self.hi, self.runs = event.lo, event.hi, event.runs_used
            self.current, self.progress = None, None
        elif isinstance(event, FindMaxFinished):
            self.answer = event.answer
            self.current = None
        elif isinstance(event, SearchStopped):
            self.stopped = True
            self.current = None
        elif isinstance(event, SearchFailed):
            if self.stopped:  # the cancelled point's own error, after the user's stop
                return False
            self.failed = event.message
            self.current = None
        else:
            return False
        return True

    # -- what is drawn

    def state_line(self) -> str:
        if self.stopped:
            return stopped_line([rid for ids in self.run_ids.values() for rid in ids])
        if self.failed is not None:
            return f"failed: {self.failed}"
        if self.answer is not None:
            return f"done: {self.answer.outcome.message}"
        if self.current is None:
            return "starting"
        again = f" (run {self.attempt}: near a limit)" if self.attempt > 1 else ""
        prog = f" · {self.progress[0]}/{self.progress[1]} requests" if self.progress else ""
        return f"running {self.dimension} {load_text(self.current, self.dimension)}{again}{prog}"

    def bracket_line(self) -> str:
        dim = self.dimension
        meets = load_text(self.lo, dim) if self.lo is not None else "none yet"
        breaks = load_text(self.hi, dim) if self.hi is not None else "none yet"
        return f"meets up to {meets} · breaks from {breaks} · {self.runs} runs"

    def ladder(self, width: int = 60) -> str:
        """The loads measured on one line, log-spaced from the lowest to the highest (or the
        search's maximum): ● met, ✕ broke, ◐ being repeated, ▲ running now; the bracket in [ ]."""
        loads = sorted(self.points)
        shown = loads + ([self.current] if self.current is not None and self.current not in self.points else [])
        if not shown:
            return ""
        low = min(shown)
        high = max(max(shown), self.top or max(shown))
        cells = [" "] * width
        span = math.log(high / low) if high > low else 1.0

        def col(load: float) -> int:
            return 0 if high <= low else min(width - 1, round((width - 1) * math.log(load / low) / span))

        for c in range(width):
            cells[c] = "·"
        if self.lo is not None and self.hi is not None:
            cells[col(self.lo)] = "["
            cells[col(self.hi)] = "]"
        for load in loads:
            cells[col(load)] = MARK[self.points[load].meets]
        if self.current is not None:
            cells[col(self.current)] = "▲"
        return "".join(cells) + f"  {load_text(low, self.dimension)} … {load_text(high, self.dimension)}"

    def rows(self) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = []
        for load, p in sorted(self.points.items()):
            m = p.medians
            out.append(
                (
                    load_text(load, self.dimension),
                    str(len(p.runs)),
                    VERDICT[p.meets],
                    _num(m.get("output_throughput")),
                    _num(m.get("goodput_pct"), "{:.0f}"),  # under "good %", as POINT_COLUMNS says
                    _num(m.get("p99_ttft_ms")),
                    _num(m.get("p99_itl_ms")),
                    _num(m.get("p99_e2el_ms")),
                    _num(m.get("tokens_per_joule"), "{:.3g}", na="unknown"),
                    " ".join(self.run_ids.get(load, [])),
                )
            )
        return out

    def answer_lines(self) -> list[str]:
        a = self.answer
        if a is None:
            return []
        o = a.outcome
        f = o.figures
        lines = [f"{o.status}: {o.message}"]
        if o.load is not None:
            lines += [
                f"load {load_text(o.load, o.dimension)} ({o.dimension})",
                f"output {_num(f.get('output_throughput'))} tok/s · {_num(f.get('request_throughput'), '{:.2f}')} req/s"
                + (f" · goodput {_num(f.get('goodput_pct'), '{:.0f}')} %" if f.get("goodput_pct") is not None else "")
                + (  # issue B2: how much of the answer's prompts the prefix cache served
                    f" · cached {_num(f.get('prefix_cache_hit_pct'), '{:.0f}')} %"
                    if f.get("prefix_cache_hit_pct") is not None
                    else ""
                ),
                f"TTFT p99 {_num(f.get('p99_ttft_ms'))} ms · ITL p99 {_num(f.get('p99_itl_ms'))} ms"
                f" · E2E p99 {_num(f.get('p99_e2el_ms'))} ms",
                f"tokens/J {_num(a.tokens_per_joule, '{:.3g}', na='unknown')}",
            ]
        lines.append(f"stored as {a.answer_id} · {len(a.point_ids)} points in history")
        return lines
