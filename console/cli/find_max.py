"""`rocm-console bench find-max`: the highest load an instance (or a replica group) takes
within a latency budget, found by an adaptive search whose every point is a stored run
(console/services/runs/find_max.py runs it; console/core/bench/find_max.py decides)."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from typing import Callable

from console.cli import common
from console.cli.history_arg import run_store
from console.cli.inputs import bench_inputs
from console.cli.selection import Selection
from console.core.bench.argv import apply_bench_overrides
from console.core.bench.find_max import DIMENSIONS, SearchError, SearchSpec, parse_budget
from console.core.experiment.spec import Budget, ExperimentError, load_experiment
from console.core.model import Profile
from console.core.profiles import PROFILES_DIR
from console.core.status_view import fmt_num
from console.services.instances import InstanceError, InstanceState
from console.services.runs import serving
from console.services.runs.find_max import (
    FindMaxAnswer,
    FindMaxError,
    FindMaxPointMeasured,
    FindMaxPointStarted,
    FindMaxRunEvent,
    FindMaxService,
    FindMaxStarted,
    FindMaxStopped,
    stopped_line,
)
from console.transport.base import TransportError

COMMAND = "find-max"
EXIT_STOPPED = 130  # the user stopped it (Ctrl-C, `bench cancel`), as the shell reports SIGINT
EXPERIMENTS_DIR = PROFILES_DIR / "experiments"


def add_parsers(ops) -> list[argparse.ArgumentParser]:
    p = ops.add_parser(
        COMMAND,
        help="the highest load within a latency budget: an adaptive search, every point a stored run",
    )
    p.add_argument("--node", metavar="NAME", help="node (needed when the profile has several)")
    p.add_argument("--instance", metavar="NAME", help="a ready instance on the node")
    p.add_argument("--group", metavar="NAME", help="a replica group (each point's load split over its replicas)")
    p.add_argument("--preset", required=True, metavar="NAME", help="benchmark preset each point runs")
    p.add_argument(
        "--budget",
        required=True,
        metavar="NAME|KEY=MS,...",
        help="a named budget ([[budget]] of --budgets FILE or of profiles/experiments/*.toml), "
        "or limits like p99_ttft_ms=2000,p99_itl_ms=50",
    )
    p.add_argument("--budgets", metavar="FILE", help="an experiment TOML whose [[budget]] tables name budgets")
    p.add_argument("--by", choices=DIMENSIONS, default="concurrency", help="the load to search (default concurrency)")
    p.add_argument("--start", type=_positive_float, metavar="LOAD", help="first load (default 1, or the preset's rate)")
    p.add_argument("--max", type=_positive_float, metavar="LOAD", help="highest load tried (default 1024; rate 512)")
    p.add_argument(
        "--tolerance", type=_fraction, default=0.10, metavar="F", help="stop bisecting within F (default 0.1)"
    )
    p.add_argument("--growth", type=_growth, default=2.0, metavar="X", help="factor per growing step (default 2)")
    p.add_argument("--prompts", type=common.positive_int, metavar="N", help="prompts per point (default the preset's)")
    p.add_argument("--max-runs", type=common.positive_int, default=30, metavar="N", help="runs at most (default 30)")
    p.add_argument(
        "--repeats",
        type=common.positive_int,
        default=3,
        metavar="N",
        help="runs of a point within 10%% of a limit, judged by their median (default 3)",
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a preset key (repeatable)")
    p.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="environment for the client (repeatable)"
    )
    p.add_argument("--label", help="label stored with every point and the answer")
    common.add_command_options([p])
    p.set_defaults(no_store=False)  # bench_inputs reads it: a search always stores its points
    return [p]


def _number_type(expected: str, ok: Callable[[float], bool], *, percent: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number `ok` accepts (with `percent`, "10%" is 0.1), else
    an error saying what was expected."""

    def parse(text: str) -> float:
        try:
            value = float(text.rstrip("%")) / (100.0 if percent and text.endswith("%") else 1.0)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not ok(value):
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
        return value

    return parse


_positive_float = _number_type("a load > 0", lambda v: v > 0)
_fraction = _number_type("a fraction between 0 and 1, like 0.1", lambda v: 0 < v < 1, percent=True)
_growth = _number_type("a factor > 1, like 2", lambda v: v > 1)


# ---------------------------------------------------------------- inputs


def named_budgets(file: str | None) -> dict[str, Budget]:
    """Budgets by name: the [[budget]] tables of `file`, else of the shipped experiment files."""
    if file:
        try:
            exp = load_experiment(file)
        except ExperimentError as exc:
            raise common.UsageError(f"--budgets: {exc.problems[0]}") from None
        if not exp.budgets:
            raise common.UsageError(f"--budgets {file}: no [[budget]] table")
        return {b.name: b for b in exp.budgets}
    found: dict[str, Budget] = {}
    for path in sorted(EXPERIMENTS_DIR.glob("*.toml")) if EXPERIMENTS_DIR.is_dir() else ():
        try:
            exp = load_experiment(path)
        except ExperimentError:
            continue  # a broken example file must not hide the others' budgets
        for b in exp.budgets:
            found.setdefault(b.name, b)
    return found


def search_spec(args: argparse.Namespace, profile: Profile) -> SearchSpec:
    """The search's settings from the line, checked before any node is asked (UsageError)."""
    named = named_budgets(args.budgets) if "=" not in args.budget else {}
    try:
        budget = parse_budget(args.budget, named)
    except SearchError as exc:
        raise common.UsageError(f"--budget: {exc}") from None
    preset, overrides, _ = bench_inputs(args, profile)
    applied = apply_bench_overrides(preset, overrides)
    start = args.start
    if start is None:
        rate = applied.request_rate
        start = rate if args.by == "rate" and rate is not None and math.isfinite(rate) else 1.0
    try:
        return SearchSpec(
            budget=budget,
            dimension=args.by,
            start=start,
            growth=args.growth,
            tolerance=args.tolerance,
            max_load=args.max,
            max_runs=args.max_runs,
            repeats=args.repeats,
        )
    except SearchError as exc:
        raise common.UsageError(
            str(exc).replace("find-max start", "--start").replace("find-max max", "--max")
        ) from None


# ---------------------------------------------------------------- output


def load_text(load: float | None, dimension: str) -> str:
    if load is None:
        return "none"
    return f"concurrency {int(load)}" if dimension == "concurrency" else f"rate {load:g} req/s"


def _figures_line(figures) -> str:
    def ms(key: str) -> str:
        return fmt_num(figures.get(key), "{:.1f}")

    return (
        f"{fmt_num(figures.get('output_throughput'), '{:.1f}')} tok/s  "
        f"TTFT p99 {ms('p99_ttft_ms')} ms  ITL p99 {ms('p99_itl_ms')} ms  E2E p99 {ms('p99_e2el_ms')} ms"
        + _workload_text(figures)
    )


def _workload_text(figures) -> str:
    """Goodput against the preset's SLO and the prefix cache's share, when the runs have them (B2)."""
    out = ""
    if figures.get("goodput_pct") is not None:
        out += f"  goodput {fmt_num(figures.get('goodput_pct'), '{:.1f}')} %"
    if figures.get("prefix_cache_hit_pct") is not None:
        out += f"  cached {fmt_num(figures.get('prefix_cache_hit_pct'), '{:.1f}')} %"
    return out


class _Progress:
    """Progress lines while the search runs: a line per point started and measured, and the
    benchmark's own progress at most every few seconds."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.last = 0.0
        self.dimension = "concurrency"
        self.point_ids: list[str] = []  # what a stop says is stored

    def __call__(self, event) -> None:
        if isinstance(event, FindMaxPointMeasured):
            self.point_ids.append(event.run_id)
        if self.quiet:
            return
        if isinstance(event, FindMaxStarted):
            self.dimension = event.spec.dimension
            s = event.spec
            print(
                f"find-max {event.search} on {event.target}: {s.dimension} from {s.start:g} (×{s.growth:g}, "
                f"up to {s.top:g}, within {100 * s.tolerance:g} %) under {s.budget.describe()}, preset {event.preset}",
                flush=True,
            )
        elif isinstance(event, FindMaxPointStarted):
            again = f" (run {event.attempt}: near a limit)" if event.attempt > 1 else ""
            print(f"point {event.runs_used + 1}: {load_text(event.load, self.dimension)}{again}", flush=True)
        elif isinstance(event, FindMaxRunEvent) and isinstance(event.event, serving.BenchProgressed):
            p = event.event.progress
            now = time.monotonic()
            if now - self.last >= 5.0 and p.n != p.total:
                self.last = now
                print(f"  {p.n}/{p.total} requests", flush=True)
        elif isinstance(event, FindMaxPointMeasured):
            pt = event.point
            verdict = {True: "meets", False: "breaks", None: "undecided"}[pt.meets]
            print(
                f"  {load_text(event.load, self.dimension)}: {verdict} ({pt.reason})  {_figures_line(event.point.medians)}"
                f"  [{event.run_id}]",
                flush=True,
            )
            print(
                f"  bracket: meets {load_text(event.lo, self.dimension)}, breaks {load_text(event.hi, self.dimension)}",
                flush=True,
            )


def format_answer(answer: FindMaxAnswer) -> str:
    o = answer.outcome
    f = o.figures
    tpj = answer.tokens_per_joule
    lines = [
        f"answer ({o.status}): {o.message}",
        f"  load        {load_text(o.load, o.dimension)}" + (f"  (breaks at {o.broke_at:g})" if o.broke_at else ""),
    ]
    if o.load is not None:
        lines += [
            f"  throughput  output {fmt_num(f.get('output_throughput'), '{:.1f}')} tok/s  "
            f"total {fmt_num(f.get('total_token_throughput'), '{:.1f}')} tok/s  "
            f"requests {fmt_num(f.get('request_throughput'), '{:.2f}')}/s",
            f"  TTFT        median {fmt_num(f.get('median_ttft_ms'), '{:.1f}')}  p99 {fmt_num(f.get('p99_ttft_ms'), '{:.1f}')} ms",
            f"  ITL         median {fmt_num(f.get('median_itl_ms'), '{:.1f}')}  p99 {fmt_num(f.get('p99_itl_ms'), '{:.1f}')} ms",
            f"  E2E         median {fmt_num(f.get('median_e2el_ms'), '{:.1f}')}  p99 {fmt_num(f.get('p99_e2el_ms'), '{:.1f}')} ms",
            f"  tokens/J    {fmt_num(tpj, '{:.3g}', na='unknown')}",
        ]
        workload = _workload_text(f)
        if workload:
            lines.append(f"  workload  {workload}")  # its text starts with two spaces
    lines.append(f"  runs        {o.runs} at {len(o.points)} loads in {answer.seconds:.0f} s")
    for p in o.points:
        verdict = {True: "meets", False: "breaks", None: "undecided"}[p.meets]
        lines.append(f"    {load_text(p.load, o.dimension):<22} {verdict:<7} {' '.join(p.run_ids)}")
    lines.append(f"  stored as   {answer.answer_id}  (every point is in `rocm-console results list`)")
    return "\n".join(lines)


# ---------------------------------------------------------------- the command


async def _find_max(args: argparse.Namespace, profile: Profile) -> int:
    if bool(args.instance) == bool(args.group):
        raise common.UsageError("bench find-max needs --instance NAME or --group NAME (one of them)")
    spec = search_spec(args, profile)
    preset, overrides, env = bench_inputs(args, profile)
    progress = _Progress(quiet=args.json)
    try:
        answer = await _search(args, profile, spec, preset, overrides, env, progress)
    except asyncio.CancelledError:  # Ctrl-C: the point's client is cancelled on the node (the service)
        print(f"find-max {stopped_line(progress.point_ids, ids=True)}", file=sys.stderr, flush=True)
        raise
    except FindMaxStopped as exc:  # `bench cancel` on its point: a stop, not a failure
        print(exc, file=sys.stderr, flush=True)
        return EXIT_STOPPED
    if args.json:
        print(json.dumps(answer.to_json(), indent=2))
    else:
        print(format_answer(answer), flush=True)
    return common.EXIT_OK


async def _search(args, profile, spec, preset, overrides, env, progress) -> FindMaxAnswer:
    async with Selection(profile) as sel:
        # every point and the answer into the command's History; its switches on the timeline
        service = FindMaxService(sel.pool, run_store(sel.history), timeline=sel.history.events.append)
        if args.instance:
            node = sel.node(args.node)
            view = await sel.instance(node, args.instance, checked=True, missing=common.UsageError)
            if view.state != InstanceState.READY:
                raise FindMaxError(f"{node.name}: instance {view.name} is {view.state.value}, not ready")
            answer = await service.search_instance(
                node,
                view,
                preset,
                spec,
                overrides=overrides,
                extra_env=env,
                num_prompts=args.prompts,
                label=args.label,
                on_event=progress,
            )
        else:
            nodes = sel.nodes(args.node)
            group = await sel.group(nodes, args.group)
            answer = await service.search_group(
                nodes,
                group,
                preset,
                spec,
                overrides=overrides,
                extra_env=env,
                num_prompts=args.prompts,
                label=args.label,
                on_event=progress,
            )
    return answer


def run(args: argparse.Namespace) -> int:
    """Every point and the answer go into the command's History (its Selection's)."""
    return common.run_command(
        args,
        _find_max,
        failures=(FindMaxError, serving.BenchRunError, InstanceError, TransportError),
    )
