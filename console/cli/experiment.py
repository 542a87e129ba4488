"""`rocm-console experiment run|check|report`: layout experiments (the runner starts each
layout's group the way `serve start --replicas` does: GroupService.launch)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Sequence

from console.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_actions,
    add_profile_options,
    parse_pairs,
    run_command,
)
from console.cli.history_arg import run_store
from console.cli.selection import Selection
from console.core.experiment.report import ExperimentReport, build_report
from console.core.experiment.spec import ExperimentError, load_experiment, load_state
from console.core.model import NodeSpec, Profile, SimulateSpec
from console.services.experiments import ExperimentProgressed, ExperimentRunner, default_state_path
from console.services.groups import GroupError
from console.services.instances import InstanceError
from console.services.partitions import PartitionFailed
from console.services.results import StoreError
from console.services.runs.serving import BenchRunError
from console.transport.base import TransportError

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_MARKERS = ("o", "x", "+", "*", "#", "@")
FAILURES = (ExperimentError, GroupError, BenchRunError, InstanceError, TransportError, PartitionFailed, StoreError)
DEMO_LAB = "mi300x-lab"
LINK_RESUMES = 10  # `experiment run` starts again from its state file this many times when the link drops


def add_parser(sub) -> list[argparse.ArgumentParser]:
    ops = add_actions(sub, "experiment", help="layout experiments: which partition x TP x replicas serves best")
    run = ops.add_parser("run", help="run an experiment file unattended (resumes where a previous run stopped)")
    check = ops.add_parser("check", help="validate an experiment file against a node; start nothing")
    report = ops.add_parser("report", help="the report of an experiment: Markdown, CSV and a chart")
    for p in (run, check, report):
        p.add_argument(
            "file", metavar="FILE", help="experiment TOML, e.g. profiles/experiments/llama-3.1-8b-layouts.toml"
        )
        p.add_argument(
            "--node",
            metavar="NAME",
            help=f"node (needed when the profile has several; with --demo: default {DEMO_LAB}, an idle simulated MI300X)",
        )
        p.add_argument("--state", metavar="FILE", help="the state file (default: in the user data dir)")
        add_profile_options(p)
    run.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="environment for servers and clients"
    )
    run.add_argument("--json", action="store_true", help="print the final state as JSON")
    run.add_argument("--no-store", action="store_true", help="do not store the points in the results store")
    report.add_argument("--out", metavar="DIR", help="write report.md, points.csv (and chart.png) into DIR")
    report.add_argument("--json", action="store_true", help="print the rows as JSON")
    return [run, check, report]


# ---------------------------------------------------------------- node selection


def _node(sel: Selection, args: argparse.Namespace) -> NodeSpec:
    if getattr(args, "demo", False) and (args.node in (None, DEMO_LAB)):
        return demo_lab_node()
    return sel.node(args.node)


def demo_lab_node() -> NodeSpec:
    """An idle simulated MI300X node for demo experiments (the demo profile's nodes carry load)."""
    import platformdirs

    state = Path(platformdirs.user_data_path("rocm-console")) / "demo-lab"
    return NodeSpec(
        name=DEMO_LAB,
        host="localhost",
        transport="local",
        state_dir=str(state),
        simulate=SimulateSpec(gpu="MI300X", count=8, compute_partition="SPX", memory_partition="NPS1", seed=7),
    )


def _load(args: argparse.Namespace):
    try:
        return load_experiment(args.file)
    except ExperimentError as exc:
        raise _BadInput(exc.problems) from None


class _BadInput(Exception):
    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


# ---------------------------------------------------------------- experiment run / check / report


async def _run(args: argparse.Namespace, profile: Profile) -> int:
    exp = _load(args)
    sel = Selection(profile)
    node = _node(sel, args)
    state_path = Path(args.state) if args.state else default_state_path(exp, node.name)
    env = parse_pairs(getattr(args, "env", []), "--env")
    async with sel:
        store = None if getattr(args, "no_store", True) else run_store(sel.history)
        # its points into the command's History, its partition switches and restores as events
        runner = ExperimentRunner(sel.pool, store=store, timeline=sel.history.events.append)
        if args.experiment_command == "check":
            try:
                snapshot = await runner.check(exp, node, profile)
            except ExperimentError as exc:
                raise _BadInput(exc.problems) from None
            # what holds the GPUs: which layouts fit now and what would have to stop (not a
            # refusal: it may be gone by then; a run where no layout fits is refused)
            _, lines = (await runner.occupancy(exp, node, snapshot)).fit_lines(exp, snapshot)
            print(f"{args.file}: {lines[0]}")
            for line in lines[1:]:
                print(line)
            return EXIT_OK

        def progress(event: ExperimentProgressed) -> None:
            if not args.json:
                print(f"[{event.done}/{event.planned}] {event.line}", flush=True)

        if not args.json:
            print(f"state: {state_path}", flush=True)
        try:
            state = await runner.run(
                exp, node, profile, state_path, on_event=progress, extra_env=env, link_retries=LINK_RESUMES
            )
        except ExperimentError as exc:
            raise _BadInput(exc.problems) from None
    if args.json:
        print(json.dumps(state.to_dict(), indent=1))
    else:
        how = " --demo" if getattr(args, "demo", False) else f" --node {node.name}"
        print(
            f"report: rocm-console experiment report {args.file}{how}"
            + (f" --state {args.state}" if args.state else "")
        )
    return EXIT_FAILED if state.failed_layouts else EXIT_OK


def render_chart(report: ExperimentReport, width: int = 78, height: int = 20) -> str | None:
    """Throughput per node vs p99 TTFT, one line per layout, as text (plotext)."""
    series = report.chart_series()
    if not series:
        return None
    import importlib

    plt = importlib.import_module("plotext")  # untyped: looked up at run time

    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    for i, (label, xs, ys) in enumerate(series):
        # one character per layout: the colours are gone once the chart is plain text
        plt.plot(xs, ys, label=label, marker=_MARKERS[i % len(_MARKERS)])
    plt.xlabel("p99 TTFT (ms)")
    plt.ylabel("output tok/s per node")
    plt.title(f"{report.experiment.name}: throughput vs latency")
    text = plt.build()
    plt.clear_figure()
    return _ANSI.sub("", str(text))  # plotext colours even the "clear" theme; Markdown wants plain text


def write_png(report: ExperimentReport, path: Path) -> bool:
    """The same chart as a PNG when matplotlib is installed (it is not a dependency)."""
    import importlib

    try:  # optional, so looked up at run time (no stubs needed either)
        importlib.import_module("matplotlib").use("Agg")
        mpl = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        return False
    fig, ax = mpl.subplots(figsize=(8, 5))
    for label, xs, ys in report.chart_series():
        ax.plot(xs, ys, marker="o", label=label)
    ax.set_xlabel("p99 TTFT (ms)")
    ax.set_ylabel("output tok/s per node")
    ax.set_title(f"{report.experiment.name}: throughput vs latency")
    ax.legend()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    mpl.close(fig)
    return True


def _report(args: argparse.Namespace, profile: Profile) -> int:
    exp = _load(args)
    node = _node(Selection(profile), args)
    state_path = Path(args.state) if args.state else default_state_path(exp, node.name)
    if not state_path.exists():
        raise UsageError(f"{state_path}: no state: run `rocm-console experiment run {args.file}` first")
    try:
        state = load_state(state_path, exp, node.name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    report = build_report(exp, state)
    chart = render_chart(report)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "layout": r.layout,
                        "point": r.point,
                        r.load_kind: r.load,
                        "replicas": r.replicas,
                        "completed": r.completed,
                        "failed": r.failed,
                        "output_tok_s": r.output_tok_s,
                        "output_tok_s_per_node": r.tok_s_per_node,
                        "total_tok_s": r.total_tok_s,
                        "pareto": r in report.pareto,
                        **r.latency,
                    }
                    for r in report.rows
                ],
                indent=1,
            )
        )
        return EXIT_OK
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        png = write_png(report, out / "chart.png")
        (out / "report.md").write_text(report.to_markdown(chart=chart, chart_image="chart.png" if png else None))
        (out / "points.csv").write_text(report.to_csv())
        print(f"wrote {out / 'report.md'}, {out / 'points.csv'}" + (f", {out / 'chart.png'}" if png else ""))
    else:
        print(report.to_markdown(chart=chart))
    return EXIT_OK


# ---------------------------------------------------------------- dispatch


def run(args: argparse.Namespace) -> int:
    async def action(args: argparse.Namespace, profile: Profile) -> int:
        try:
            if args.experiment_command == "report":
                return _report(args, profile)
            return await _run(args, profile)
        except _BadInput as exc:
            for line in exc.lines:
                print(f"rocm-console: {line}", file=sys.stderr)
            return EXIT_BAD_INPUT

    return run_command(args, action, failures=FAILURES)
