"""`rocm-console bench run|sweep|runs|attach|cancel`: benchmark presets against an instance
(`bench latency|throughput|accuracy` live in bench_offline.py)."""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from console.cli import bench_offline, common
from console.cli import find_max as find_max_cli
from console.cli.history_arg import run_store
from console.cli.inputs import bench_inputs, concurrency_points
from console.cli.selection import Selection
from console.core.bench.argv import apply_bench_overrides
from console.core.model import NodeSpec, Profile
from console.core.results.record import StoredRun, jsonable, run_to_dict
from console.core.status_view import fmt_num
from console.services.instances import InstanceError, InstanceState, InstanceView
from console.services.live_metrics import LiveSample
from console.services.runs import serving
from console.services.runs.outcome import RunRecorder, headline_record, sweep_id_for
from console.services.runs.run import NodeRuns
from console.transport.base import TransportError


def add_parser(sub) -> list[argparse.ArgumentParser]:
    ops = common.add_actions(sub, "bench", help="run benchmark presets against an instance; sweeps")
    run = ops.add_parser("run", help="one run of a preset (its first concurrency, or --concurrency)")
    sweep = ops.add_parser("sweep", help="a preset over several concurrencies, one run after another")
    for p in (run, sweep):
        p.add_argument("--node", metavar="NAME", help="node (needed when the profile has several)")
        p.add_argument("--instance", metavar="NAME", help="a ready instance on the node")
        p.add_argument("--preset", required=True, metavar="NAME", help="benchmark preset")
        p.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a preset key, e.g. num_prompts=50 (repeatable)",
        )
        p.add_argument(
            "--env",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="environment for the client on the node (repeatable)",
        )
        p.add_argument("--label", help="label stored with the result")
        p.add_argument("--no-store", action="store_true", help="do not store the result")
    run.add_argument("--concurrency", type=common.positive_int, metavar="N", help="max concurrency for this run")
    run.add_argument(
        "--group", metavar="NAME", help="a replica group: one client per replica, load split, one merged result"
    )
    run.add_argument("--url", metavar="URL", help="with --group: one client against your load balancer at URL")
    sweep.add_argument(
        "--concurrency",
        required=False,
        metavar="LIST",
        help="comma list, e.g. 1,4,16,64 (default: the preset's max_concurrency list)",
    )
    runs = ops.add_parser("runs", help="benchmark runs on a node (running and finished)")
    runs.add_argument("--node", metavar="NAME")
    cancel = ops.add_parser("cancel", help="stop a running benchmark cleanly")
    cancel.add_argument("run")
    cancel.add_argument("--node", metavar="NAME")
    parsers = [run, sweep, runs, cancel]
    common.add_command_options(parsers)
    parsers += find_max_cli.add_parsers(ops)  # find-max (cli/find_max.py)
    return parsers + bench_offline.add_parsers(ops)  # latency, throughput, accuracy


class _Printer:
    """Plain progress lines: at most one every few seconds, readable in a log file."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.last = 0.0
        self.live: LiveSample | None = None

    def __call__(self, event) -> None:
        if self.quiet:
            return
        if isinstance(event, serving.BenchStarted):
            print(
                f"started {event.run} on {event.node}"
                + (f" (concurrency {event.max_concurrency})" if event.max_concurrency else ""),
                flush=True,
            )
        elif isinstance(event, serving.LiveMetricsSampled):
            self.live = event.sample
        elif isinstance(event, serving.BenchProgressed):
            now = time.monotonic()
            p = event.progress
            if now - self.last >= 2.0 or p.n == p.total:
                self.last = now
                live = self.live
                extra = ""
                if live is not None:
                    extra = (
                        f"  TTFT p50 {fmt_num(live.ttft_p50, '{:.1f}')} ms  ITL p50 {fmt_num(live.itl_p50, '{:.1f}')} ms"
                        f"  {fmt_num(live.output_tok_s)} tok/s  running {fmt_num(live.running)}"
                        f"  KV {fmt_num(live.kv_cache_pct, '{:.0f}%')}"
                    )
                eta = f" ETA {p.remaining_s:.0f}s" if p.remaining_s is not None else ""
                print(f"  {p.n}/{p.total} ({p.fraction * 100:.0f}%){eta}{extra}", flush=True)


def format_outcome(outcome: serving.RunOutcome) -> str:
    r = outcome.result
    if r is None:
        return f"{outcome.run}: no result ({outcome.reason})"
    m = r.metrics
    lines = [
        f"{outcome.run}: {'ok' if outcome.ok else 'FAILED — ' + (outcome.reason or '')}",
        f"  completed {int(r.completed or 0)}  failed {int(r.failed or 0)}  duration {fmt_num(r.duration, '{:.2f}')} s",
        f"  output {fmt_num(m.get('output_throughput'), '{:.1f}')} tok/s  total {fmt_num(m.get('total_token_throughput'), '{:.1f}')} tok/s"
        f"  requests {fmt_num(m.get('request_throughput'), '{:.2f}')}/s",
    ]
    for metric in ("ttft", "tpot", "itl", "e2el"):
        if f"mean_{metric}_ms" in m:
            lines.append(
                f"  {metric.upper():<5} mean {fmt_num(m.get(f'mean_{metric}_ms'), '{:.2f}')}  median "
                f"{fmt_num(m.get(f'median_{metric}_ms'), '{:.2f}')}  p99 {fmt_num(m.get(f'p99_{metric}_ms'), '{:.2f}')} ms"
            )
    lines.extend(bench_offline.energy_lines(outcome.telemetry, r.total_output_tokens, outcome.telemetry_note))
    lines.extend("  " + line for line in serving.check_lines(outcome))
    return "\n".join(lines)


async def _ready_instance(sel: Selection, node: NodeSpec, name: str) -> InstanceView:
    view = await sel.instance(node, name, checked=True, missing=common.UsageError)
    if view.state != InstanceState.READY:
        raise serving.BenchRunError(f"{node.name}: instance {name} is {view.state.value}, not ready")
    return view


async def _run_points(args, profile: Profile, points: Sequence[int | None], keep: bool) -> int:
    async with Selection(profile) as sel:
        store = run_store(sel.history) if keep else None  # opened when the first result is stored
        node = sel.node(args.node)
        preset, overrides, env = bench_inputs(args, profile)
        runner = serving.BenchRunner(sel.pool)
        recorder = RunRecorder(sel.pool, store)
        stored: list[StoredRun] = []
        unstored: list[str] = []  # one line per result the store could not take (kept on the node)
        outcomes: list[serving.RunOutcome] = []
        sweep_id = sweep_id_for(points)
        view = await _ready_instance(sel, node, args.instance)
        setup = apply_bench_overrides(preset, overrides)
        base: dict | None = None  # where the runs ran (runs/outcome.py builds it)
        printer = _Printer(quiet=args.json)
        for point in points:
            outcome = await runner.run(
                node, view, preset, overrides=overrides, max_concurrency=point, on_event=printer, extra_env=env
            )
            outcomes.append(outcome)
            if not args.json:
                print(format_outcome(outcome), flush=True)
            if store is None:
                continue
            base = base or await recorder.instance_base(node, view)  # sampled once per sweep
            recorded = await recorder.serving(
                node, view, outcome, setup, label=args.label, sweep_id=sweep_id, point=point, base=base
            )
            if recorded.line is not None:
                unstored.append(recorded.line)
                common.say_error(recorded.line)
            elif recorded.stored is not None:
                stored.append(recorded.stored)
                if not args.json:
                    print(f"  stored as {recorded.stored.id}", flush=True)
    if len(points) > 1 and not args.json:
        print("\nconcurrency  output tok/s  median TTFT ms  median ITL ms  failed")
        for point, o in zip(points, outcomes):
            m = o.result.metrics if o.result else {}
            print(
                f"{point or '-':>11}  {fmt_num(m.get('output_throughput'), '{:.1f}'):>12}  "
                f"{fmt_num(m.get('median_ttft_ms'), '{:.2f}'):>14}  {fmt_num(m.get('median_itl_ms'), '{:.2f}'):>13}  "
                f"{int(o.result.failed or 0) if o.result else '-':>6}"
            )
    if args.json:
        doc = (
            [run_to_dict(r) for r in stored]
            if stored
            else [
                {
                    "run": o.run,
                    "ok": o.ok,
                    "reason": o.reason,
                    "result": o.result_json,
                    **_unstored_headline(o),
                }
                for o in outcomes
            ]
        )
        print(json.dumps(doc[0] if len(points) == 1 and doc else doc, indent=2))
    return common.EXIT_OK if all(o.ok for o in outcomes) and not unstored else common.EXIT_FAILED


def _unstored_headline(outcome: serving.RunOutcome) -> dict:
    """--json of a run not stored (--no-store): the same energy and client-check keys a stored one has."""
    run = headline_record(outcome)
    return {
        **jsonable(run.headline()),
        "energy": run.energy,
        "client_check": run.client_check,
    }


async def _runs(args, profile: Profile) -> int:
    async with Selection(profile) as sel:
        node = sel.node(args.node)
        recs = await NodeRuns(sel.pool, error=serving.BenchRunError).records(node)
    if args.json:
        print(json.dumps({"runs": [r.as_dict() for r in recs]}, indent=2))
    else:
        for r in recs:
            spec = r.spec
            on = (  # offline runs (bench latency|throughput) hold GPUs, not an instance
                f"instance {spec.get('instance')}"
                if spec.get("instance")
                else f"{spec.get('kind')} gpus {','.join(map(str, spec.get('gpus') or []))}"
            )
            print(f"{r.name:<48} {r.state:<8} exit {r.exit_code}  {on}")
        if not recs:
            print("no runs")
    return common.EXIT_OK


async def _cancel(args, profile: Profile) -> int:
    async with Selection(profile) as sel:
        node = sel.node(args.node)
        runs = NodeRuns(sel.pool, error=serving.BenchRunError)
        rec = await runs.record(node, args.run)
        if rec is None:
            raise serving.BenchRunError(f"{node.name}: no benchmark run named {args.run} (bench runs lists them)")
        if rec.running:
            await runs.cancel(node, args.run)
            after = await runs.record(node, args.run)
            if after is None or after.running:  # the node did not end it
                raise serving.BenchRunError(f"{node.name}: {args.run} is still running: the node did not stop it")
            rec, done = after, "cancelled"
        else:
            done = f"already {rec.state} (exit {rec.exit_code})"
    if args.json:
        print(json.dumps({"run": args.run, "node": node.name, "state": rec.state, "exit_code": rec.exit_code}))
    else:
        print(f"{args.run}: {done}")
    return common.EXIT_OK


async def _run_or_sweep(args, profile: Profile, keep: bool) -> int:
    if getattr(args, "group", None):  # replica groups: console/cli/groups.py
        if args.instance:
            raise common.UsageError("give --instance or --group, not both")
        from console.cli.groups import bench_group_run

        return await bench_group_run(args, profile, keep)  # its Selection's History: the one store opening
    if getattr(args, "url", None):
        raise common.UsageError("--url goes with --group")
    if not args.instance:
        raise common.UsageError(f"bench {args.bench_command} needs --instance NAME (or --group NAME)")
    points = concurrency_points(args, profile)
    return await _run_points(args, profile, points, keep)


def run(args: argparse.Namespace) -> int:
    # The command's one History (its Selection's): its runs passed down to whatever records a
    # run (runs/outcome.py's RunRecorder), its events as the timeline.
    keep = not getattr(args, "no_store", False)
    if args.bench_command in bench_offline.COMMANDS:
        return bench_offline.run(args, keep)
    if args.bench_command == find_max_cli.COMMAND:
        return find_max_cli.run(args)
    action: Callable[[argparse.Namespace, Profile], Coroutine[Any, Any, int]]
    if args.bench_command in ("run", "sweep"):
        action = functools.partial(_run_or_sweep, keep=keep)
    else:
        action = {"runs": _runs, "cancel": _cancel}[args.bench_command]
    return common.run_command(args, action, failures=(serving.BenchRunError, InstanceError, TransportError))
