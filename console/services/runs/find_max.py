"""`bench find-max`: the search for the highest load within a latency budget, run for real.

The search itself is core's (console/core/bench/find_max.py: a pure state machine
that says which load to run next and judges what it is fed). This service runs each
load it asks for as an ordinary serving benchmark through the run API: one client
next to an instance (runs/serving.py), or one client per replica of a group
(runs/group.py); each point is stored in the results store like any `bench run`
(so `results list` and the history screen show every one of them), and the
stored run's figures are what the search is fed (a single instance's points carry
their GPUs' energy, as `bench run` does). At the end the answer is stored as one
more result (context ``run_kind = "find_max"``) whose context lists the ids of
every point it measured (``find_max_points``) and names the point's run it
reports (``find_max_run``, whose model and figures it carries), and whose
``result`` is the search's whole record (every point: load, verdict, medians,
run ids). Each point measured and the answer go on the events timeline
(``findmax.point``, ``findmax.answer``) when a timeline is given.

A point whose client wrote no result stops the search (FindMaxError: the one line
says which load and why, and which points were stored); a point whose requests
failed is a point that broke the budget. A lost link to the node is left a
TransportError, so that an experiment resumes the layout as it resumes any other.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.core.bench.argv import apply_bench_overrides
from console.core.bench.find_max import FindMax, Outcome, PointResult, Run, SearchError, SearchSpec
from console.core.events import INFO, WARN, Event
from console.core.experiment.spec import Budget
from console.core.model import BenchPreset, NodeSpec
from console.core.results.build import context_block, finish_run, full_setup, jsonable_setup
from console.core.results.record import StoredRun, as_number, jsonable
from console.services.groups import GroupView
from console.services.instances import InstanceState, InstanceView
from console.services.results import ResultStore, StoreError
from console.services.runs.group import GroupBenchRunner
from console.services.runs.outcome import RunRecorder, new_sweep_id
from console.services.runs.serving import (
    BenchEvent,
    BenchRunError,
    BenchRunner,
    BenchStarted,
)
from console.services.transports import TransportPool
from console.transport.base import TransportError

RUN_KIND = "find_max"
# Figures of a point's stored run that the answer reports beside the budget's keys.
REPORTED = (
    "output_throughput",
    "total_token_throughput",
    "request_throughput",
    "completed",
    "failed",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
    "tokens_per_joule",
)


class FindMaxError(Exception):
    """The search could not run (a point wrote no result, the store refused): one line."""


class FindMaxStopped(FindMaxError):
    """The user stopped the search (`bench cancel` on its point's run): no failure, one line."""


def stopped_line(point_ids: Sequence[str], *, ids: bool = False) -> str:
    """What a search the user stopped says, in the TUI and the CLI alike: stopped, not failed,
    and how many of its points are stored (ids: their run ids too, for the CLI)."""
    n = len(point_ids)
    if n == 0:
        return "stopped by you: no point was measured"
    stored = "the 1 point measured so far is stored" if n == 1 else f"the {n} points measured so far are stored"
    return f"stopped by you: {stored}" + (f" ({', '.join(point_ids)})" if ids else "")


# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class FindMaxStarted:
    search: str  # the search's id (every point's context carries it as find_max)
    target: str  # "instance NAME on NODE" / "group NAME"
    spec: SearchSpec
    preset: str


@dataclass(frozen=True, slots=True)
class FindMaxPointStarted:
    load: float
    attempt: int  # 1 for a load's first run, 2 and 3 for its repeats
    runs_used: int  # runs finished before this one


@dataclass(frozen=True, slots=True)
class FindMaxPointMeasured:
    """A run at `load` was stored and judged: `point` is the load's verdict so far
    (meets None while a repeat is due), `lo`/`hi` the bracket after it."""

    load: float
    run_id: str
    point: PointResult
    lo: float | None  # the highest load that met the budget so far
    hi: float | None  # the lowest load that broke it so far
    runs_used: int


@dataclass(frozen=True, slots=True)
class FindMaxRunEvent:
    """An event of the point's benchmark run (progress, live metrics), for progress lines."""

    event: BenchEvent


@dataclass(frozen=True, slots=True)
class FindMaxFinished:
    answer: FindMaxAnswer


FindMaxEvent = FindMaxStarted | FindMaxPointStarted | FindMaxPointMeasured | FindMaxRunEvent | FindMaxFinished


# ---------------------------------------------------------------- the answer


@dataclass(frozen=True)
class FindMaxAnswer:
    search: str
    target: str
    budget: Budget
    preset: str
    outcome: Outcome
    answer_id: str | None  # the stored answer (None when not stored)
    point_ids: tuple[str, ...] = ()  # every stored point, in the order measured
    started: float = 0.0
    seconds: float = 0.0

    @property
    def figures(self) -> Mapping[str, float | None]:
        return self.outcome.figures

    @property
    def tokens_per_joule(self) -> float | None:
        value = self.outcome.figures.get("tokens_per_joule")
        return value if isinstance(value, (int, float)) else None

    def to_json(self) -> dict[str, Any]:
        out = self.outcome.to_json()
        return jsonable(
            {
                "id": self.answer_id,
                "search": self.search,
                "target": self.target,
                "preset": self.preset,
                "budget": {"name": self.budget.name, "limits": _limits(self.budget)},
                **out,
                "tokens_per_joule": self.tokens_per_joule,
                "point_ids": list(self.point_ids),
                "seconds": round(self.seconds, 1),
            }
        )


def _limits(budget: Budget) -> dict[str, float]:
    return {f"{stat}_{metric}_ms": ms for metric, stat, ms in budget.limits}


def tokens_per_joule_of(run: StoredRun) -> float | None:
    """A stored run's output tokens per joule: a serving run's energy record, or an answer's
    metrics (answer_record copies the figures there); None when the run has none (unknown)."""
    for value in (run.tokens_per_joule, as_number(run.metrics.get("tokens_per_joule"))):
        if value is not None and math.isfinite(value) and value > 0:
            return value
    return None


def run_values(run: StoredRun) -> Run:
    """What the search is fed for a stored point: every number of its metrics, tokens/J, failed."""
    values: dict[str, float | None] = {k: float(v) for k, v in run.metrics.items() if isinstance(v, (int, float))}
    values["tokens_per_joule"] = tokens_per_joule_of(run)
    values["goodput_pct"] = run.goodput_pct  # issue B2: shown beside the point's throughput
    values["prefix_cache_hit_pct"] = run.prefix_cache_hit_pct  # and what of it the cache served
    failed = as_number(run.metrics.get("failed")) or 0.0
    return Run(values=values, failed=int(failed), run_id=run.id)


def point_preset(preset: BenchPreset, dimension: str, load: float, num_prompts: int | None) -> BenchPreset:
    """The preset as one point runs it: at a concurrency without a rate limit (the preset's rate
    would cap every point at the same load), or at a request rate without a concurrency limit."""
    if dimension == "concurrency":
        out = dataclasses.replace(preset, max_concurrency=(int(load),), request_rate=None)
    else:
        out = dataclasses.replace(preset, max_concurrency=(), request_rate=float(load))
    if num_prompts is not None:
        out = dataclasses.replace(out, num_prompts=num_prompts)
    return out


def answer_record(
    answer: FindMaxAnswer,
    *,
    context: Mapping[str, object],
    preset: BenchPreset,
    label: str | None = None,
    created: float | None = None,
    point_run: StoredRun | None = None,
) -> StoredRun:
    """The answer as one stored result: the figures at the answer's load as its metrics, the
    points' ids in its context (find_max_points), the whole search as its result. point_run:
    the stored run at the answer's load, which the answer refers to (find_max_run) and whose
    model it names, so that the history lists it as that model's answer, not a model '-'."""
    outcome = answer.outcome
    metrics = {k: float(v) for k, v in outcome.figures.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    if outcome.load is not None:
        metrics["find_max_load"] = float(outcome.load)
    setup_values: dict[str, object] = {
        "backend": preset.backend,
        "dataset": preset.dataset,
        "input_len": preset.input_len,
        "output_len": preset.output_len,
        "num_prompts": preset.num_prompts,
        "seed": preset.seed,
    }
    if outcome.load is not None:
        if outcome.dimension == "concurrency":
            setup_values["max_concurrency"] = int(outcome.load)
        else:
            setup_values["request_rate"] = float(outcome.load)
    if point_run is not None:
        for key in ("model", "tokenizer"):
            if point_run.setup.get(key) is not None:
                setup_values[key] = point_run.setup[key]
    ctx = dict(context)
    if point_run is not None:
        ctx["find_max_run"] = point_run.id
    ctx.update(
        run_kind=RUN_KIND,
        bench_preset=preset.name,
        find_max=answer.search,
        find_max_status=outcome.status,
        find_max_dimension=outcome.dimension,
        find_max_load=outcome.load,
        find_max_broke_at=outcome.broke_at,
        find_max_budget=answer.budget.name,
        find_max_limits=_limits(answer.budget),
        find_max_points=list(answer.point_ids),
    )
    run = StoredRun(
        id="",
        created=time.time() if created is None else float(created),
        origin="console",
        label=label,
        context=context_block(ctx),
        setup=jsonable_setup(full_setup({k: v for k, v in setup_values.items() if v is not None})),
        metrics=metrics,
        result=answer.to_json(),
    )
    return finish_run(run)


def is_answer(run: StoredRun) -> bool:
    return run.context.get("run_kind") == RUN_KIND


# ---------------------------------------------------------------- the service


@dataclass
class _Search:
    """One search's running state shared by its measuring function."""

    id: str
    spec: SearchSpec
    preset: BenchPreset
    num_prompts: int | None
    label: str | None
    emit: Callable[[FindMaxEvent], None]
    point_ids: list[str] = field(default_factory=list)
    node: str | None = None  # where the events timeline puts the search
    instance: str | None = None


class FindMaxService:
    """Runs find-max searches against an instance or a replica group; every point is stored."""

    def __init__(
        self,
        pool: TransportPool | None = None,
        store: ResultStore | None = None,
        *,
        runner: BenchRunner | None = None,
        group_runner: GroupBenchRunner | None = None,
        timeline: Callable[[Event], object] | None = None,
    ) -> None:
        self.pool = pool or TransportPool()
        self.store = store or ResultStore()
        self.recorder = RunRecorder(self.pool, self.store)  # every instance point's record
        self.runner = runner or BenchRunner(self.pool)
        self.group_runner = group_runner or GroupBenchRunner(self.pool)
        # the events timeline (EventLog.append, HealthWatch.record): each point and the answer
        self.timeline = timeline

    # -- targets

    async def search_instance(
        self,
        node: NodeSpec,
        view: InstanceView,
        preset: BenchPreset,
        spec: SearchSpec,
        *,
        overrides: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        num_prompts: int | None = None,
        label: str | None = None,
        on_event: Callable[[FindMaxEvent], None] | None = None,
    ) -> FindMaxAnswer:
        """The search against one instance: one serving run per point, next to it on its node."""
        preset = _applied(preset, overrides)
        base = await self.recorder.instance_base(node, view)  # the points' context: runs/outcome.py
        target = f"instance {view.name} on {node.name}"

        async def measure(s: _Search, load: float) -> StoredRun:
            at = point_preset(s.preset, s.spec.dimension, load, s.num_prompts)
            started: list[str] = []

            def relay(event: BenchEvent) -> None:
                if isinstance(event, BenchStarted):
                    started.append(event.run)
                s.emit(FindMaxRunEvent(event))

            try:
                outcome = await self.runner.run(
                    node,
                    view,
                    at,
                    max_concurrency=int(load) if s.spec.dimension == "concurrency" else None,
                    extra_env=dict(extra_env or {}),
                    on_event=relay,
                )
            except asyncio.CancelledError:
                if started:  # never leave the point's client running on the node
                    await asyncio.shield(self._cancel(node, started[-1]))
                raise
            except BenchRunError as exc:  # a lost link stays a TransportError: a caller may resume
                raise FindMaxError(_at(s, load, str(exc))) from None
            if outcome.cancelled:  # `bench cancel` on the point's run: the user stopped the search
                raise FindMaxStopped(f"find-max {stopped_line(s.point_ids, ids=True)}")
            if outcome.result_json is None:
                raise FindMaxError(_at(s, load, f"{outcome.run}: {outcome.reason}"))
            point = int(load) if s.spec.dimension == "concurrency" else load
            recorded = await self.recorder.serving(
                node, view, outcome, at, label=s.label, sweep_id=s.id, point=point, base=base, extra={"find_max": s.id}
            )
            if recorded.stored is None:  # kept on the node: the line says where, and how to fetch it
                raise FindMaxError(_at(s, load, f"not stored ({recorded.reason})"))
            s.point_ids.append(recorded.stored.id)
            return recorded.stored

        return await self._search(
            target,
            base,
            preset,
            spec,
            measure,
            num_prompts=num_prompts,
            label=label,
            on_event=on_event,
            where=(node.name, view.name),
        )

    async def search_group(
        self,
        nodes: Sequence[NodeSpec],
        group: GroupView,
        preset: BenchPreset,
        spec: SearchSpec,
        *,
        overrides: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        num_prompts: int | None = None,
        label: str | None = None,
        on_event: Callable[[FindMaxEvent], None] | None = None,
        extra_context: Mapping[str, object] | None = None,
    ) -> FindMaxAnswer:
        """The search against a replica group: each point is a group benchmark (load split over
        the ready replicas, one merged result), stored as `bench run --group` stores it."""
        preset = _applied(preset, overrides)
        base = {
            "node": ",".join(group.nodes),
            "instance": group.name,
            "group": group.name,
            "serve_preset": group.preset,
            **(extra_context or {}),
        }
        target = f"group {group.name}"

        async def measure(s: _Search, load: float) -> StoredRun:
            at = point_preset(s.preset, s.spec.dimension, load, s.num_prompts)
            conc = int(load) if s.spec.dimension == "concurrency" else None
            rate = float(load) if s.spec.dimension == "rate" else None
            try:
                outcome = await self.group_runner.run(
                    nodes,
                    group,
                    at,
                    concurrency=conc,
                    rate=rate,
                    num_prompts=at.num_prompts,
                    extra_env=extra_env,
                    on_event=lambda _replica, event: s.emit(FindMaxRunEvent(event)),
                )
            except BenchRunError as exc:
                raise FindMaxError(_at(s, load, str(exc))) from None
            if outcome.result is None:
                raise FindMaxError(_at(s, load, outcome.reason or "no result"))
            extra = {
                **(extra_context or {}),
                "sweep_id": s.id,
                "sweep_point": conc if conc is not None else rate,
                "find_max": s.id,
            }
            recorded = await self.recorder.group(outcome, group, at, label=s.label, extra=extra)
            if recorded.reason is not None:  # each replica's result stays on its node: the line says so
                raise FindMaxError(_at(s, load, f"not stored ({recorded.reason})"))
            if recorded.stored is None:
                raise FindMaxError(_at(s, load, "the group's result was not stored"))
            s.point_ids.append(recorded.stored.id)
            return recorded.stored

        # a group's concurrency is split over its replicas: each needs at least 1
        replicas = max(1, sum(1 for v in group.replicas if v.state == InstanceState.READY))
        if spec.dimension == "concurrency" and replicas > 1:
            try:
                spec = dataclasses.replace(
                    spec,
                    start=max(spec.start, float(replicas)),
                    min_load=max(spec.min_load or 1.0, float(replicas)),
                    max_load=None if spec.max_load is None else max(spec.max_load, float(replicas)),
                )
            except SearchError as exc:
                raise FindMaxError(str(exc)) from None
        return await self._search(
            target,
            base,
            preset,
            spec,
            measure,
            num_prompts=num_prompts,
            label=label,
            on_event=on_event,
            where=(group.nodes[0] if group.nodes else None, group.name),
        )

    # -- the loop

    async def _search(
        self,
        target: str,
        base: Mapping[str, object],
        preset: BenchPreset,
        spec: SearchSpec,
        measure: Callable[[_Search, float], Any],
        *,
        num_prompts: int | None,
        label: str | None,
        on_event: Callable[[FindMaxEvent], None] | None,
        where: tuple[str | None, str | None] = (None, None),
    ) -> FindMaxAnswer:
        emit = on_event or (lambda e: None)
        s = _Search(new_sweep_id(), spec, preset, num_prompts, label, emit, node=where[0], instance=where[1])
        t0, wall = time.monotonic(), time.time()
        emit(FindMaxStarted(s.id, target, spec, preset.name))
        search = FindMax(spec)
        while True:
            load = search.next_load()
            if load is None:
                break
            attempt = 1 + sum(len(p.runs) for p in search.points() if p.load == load)
            emit(FindMaxPointStarted(load, attempt, search.runs_used))
            stored: StoredRun = await measure(s, load)
            point = search.feed(load, run_values(stored))
            lo, hi = _bracket(search)
            emit(FindMaxPointMeasured(load, stored.id, point, lo, hi, search.runs_used))
            self._note(point_event(s, load, stored, point))
        outcome = search.outcome()
        answer = FindMaxAnswer(
            search=s.id,
            target=target,
            budget=spec.budget,
            preset=preset.name,
            outcome=outcome,
            answer_id=None,
            point_ids=tuple(s.point_ids),
            started=wall,
            seconds=time.monotonic() - t0,
        )
        shown = num_prompts if num_prompts is not None else preset.num_prompts
        # stored when it ends: listed after its points; it names the point's run it reports
        point_run = self._point_run(outcome)
        record = answer_record(
            answer,
            context=base,
            preset=dataclasses.replace(preset, num_prompts=shown),
            label=label,
            point_run=point_run,
        )
        try:
            answer_id = self.store.save(record)
        except StoreError as exc:
            raise FindMaxError(
                f"find-max answer not stored ({exc}); its points are stored: {', '.join(s.point_ids)}"
            ) from None
        answer = dataclasses.replace(answer, answer_id=answer_id)
        self._note(answer_event(s, answer))
        emit(FindMaxFinished(answer))
        return answer

    def _point_run(self, outcome: Outcome) -> StoredRun | None:
        """The stored run at the answer's load (its last run there), None when no load met."""
        point = outcome.point
        if point is None or not point.run_ids:
            return None
        try:
            return self.store.get(point.run_ids[-1])
        except (StoreError, KeyError, ValueError, OSError):  # then the answer names no model
            return None

    def _note(self, event: Event) -> None:
        """On the timeline; a log that cannot be written never stops the search."""
        if self.timeline is None:
            return
        try:
            self.timeline(event)
        except OSError:
            pass

    async def _cancel(self, node: NodeSpec, run: str) -> None:
        try:
            await self.runner.cancel(node, run)
        except (TransportError, BenchRunError):
            pass


def point_event(s: _Search, load: float, run: StoredRun, point: PointResult) -> Event:
    """`findmax.point`: a run at a load stored and judged (its verdict so far, its figures)."""
    verdict = {True: "meets", False: "breaks", None: "near a limit, run again"}[point.meets]
    out = run.metrics.get("output_throughput")
    tpj = tokens_per_joule_of(run)
    figures = (f" · {out:.1f} tok/s" if isinstance(out, (int, float)) else "") + (
        f" · {tpj:.3g} tok/J" if tpj is not None else ""
    )
    why = f" ({point.reason})" if point.meets is False and point.reason else ""
    return Event(
        time.time(),
        "findmax.point",
        s.node,
        instance=s.instance,
        severity=INFO,
        message=f"find-max {s.preset.name} {_where(s, load)}: {verdict}{why}{figures} · run {run.id}",
        details={"search": s.id, "load": load, "dimension": s.spec.dimension, "run_id": run.id, "meets": point.meets},
    )


def answer_event(s: _Search, answer: FindMaxAnswer) -> Event:
    """`findmax.answer`: the search's answer and where it is stored (a warning when no load met)."""
    o = answer.outcome
    return Event(
        time.time(),
        "findmax.answer",
        s.node,
        instance=s.instance,
        severity=WARN if o.load is None else INFO,
        message=f"find-max {s.preset.name} ({answer.budget.describe()}): {o.message} · stored as {answer.answer_id}",
        details={
            "search": s.id,
            "status": o.status,
            "dimension": o.dimension,
            "load": o.load,
            "answer_id": answer.answer_id,
            "point_ids": list(answer.point_ids)[:50],
        },
    )


def _applied(preset: BenchPreset, overrides: Mapping[str, str] | None) -> BenchPreset:
    try:
        return apply_bench_overrides(preset, dict(overrides or {}))
    except ValueError as exc:
        raise FindMaxError(f"bench preset {preset.name}: {exc}") from None


def _bracket(search: FindMax) -> tuple[float | None, float | None]:
    met = [p.load for p in search.points() if p.meets is True]
    broke = [p.load for p in search.points() if p.meets is False]
    return (max(met) if met else None, min(broke) if broke else None)


def _where(s: _Search, load: float) -> str:
    return f"{s.spec.dimension} {int(load)}" if s.spec.dimension == "concurrency" else f"rate {load:g} req/s"


def _at(s: _Search, load: float, why: str) -> str:
    where = f"{int(load)}" if s.spec.dimension == "concurrency" else f"{load:g} req/s"
    stored = f" (points stored so far: {', '.join(s.point_ids)})" if s.point_ids else ""
    return f"find-max at {s.spec.dimension} {where}: {why}{stored}"
