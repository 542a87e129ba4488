"""`rocm-console baseline save|check|list|ack`: per-node baselines and drift checks.

baseline save NAME --node N --suite FILE    run the suite (its own instance), store it
baseline check NAME --node N [--json|--md]  run it again: per metric a verdict; exit 1 on a regression
baseline check --all                        every node's baselines, one node at a time
baseline list [--node N]                    the stored baselines
baseline rm NAME --node N                   remove a stored baseline
baseline ack --node N                       clear the node's change mark (versions changed)

Baselines live in the store (docs/store.md: the profile's `[store] url`, else the data
folder's store.sqlite3): one saved from one machine is checked from another sharing it.
A store that cannot be opened is one line naming it and the reason, exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from console.cli import common
from console.core.baseline.report import EXIT_REGRESSED, BaselineInputError, render_markdown, report_to_dict
from console.core.baseline.suite import SuiteError, load_suite
from console.core.bounded_file import TOML_FILE_LIMIT, read_bounded_text
from console.core.model import NodeSpec, Profile
from console.transport.base import TransportError

if TYPE_CHECKING:
    from console.services.history import History

COMMANDS = ("save", "check", "list", "rm", "ack")


def add_parser(sub) -> list[argparse.ArgumentParser]:
    ops = common.add_actions(sub, "baseline", help="per-node baselines: save a suite's numbers, check for drift")
    save = ops.add_parser("save", help="run a suite on a node (its own instance) and store it as a baseline")
    save.add_argument("name", help="the baseline's name (letters, digits, _ . -)")
    save.add_argument("--suite", required=True, metavar="FILE", help="suite TOML (profiles/suites/*.toml)")
    check = ops.add_parser("check", help="run a baseline's suite again; per metric regressed / improved / same")
    check.add_argument("name", nargs="?", help="the baseline's name (not with --all)")
    check.add_argument("--all", action="store_true", help="every stored baseline of every node, one node at a time")
    check.add_argument("--md", action="store_true", help="print the report as Markdown (the default output)")
    for p in (save, check):
        p.add_argument("--node", metavar="NAME", help="node (needed when the profile has several)")
        p.add_argument("--gpus", metavar="LIST", help="GPUs of the suite's instance (default: the first idle ones)")
        p.add_argument(
            "--env",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="environment for the instance and its clients on the node (repeatable)",
        )
        p.add_argument("--lm-eval", metavar="PATH", help="lm_eval for the suite's accuracy runs")
        p.add_argument(
            "--instance",
            metavar="NAME",
            help="run against this ready instance instead of starting one (no offline points)",
        )
        p.add_argument("--port", type=common.port_arg, help="port of the suite's instance (default: a free one)")
        p.add_argument("--timeout", type=common.positive_seconds, default=900.0, help="seconds to wait for ready")
    listing = ops.add_parser("list", help="the stored baselines")
    listing.add_argument("--node", metavar="NAME", help="only this node's")
    rm = ops.add_parser("rm", help="remove a stored baseline")
    rm.add_argument("name", help="the baseline's name")
    rm.add_argument("--node", metavar="NAME", help="node (needed when the profile has several)")
    ack = ops.add_parser("ack", help="acknowledge a node's changed versions (clears its change mark)")
    ack.add_argument("--node", metavar="NAME", required=True)
    parsers = [save, check, listing, rm, ack]
    common.add_command_options(parsers)
    return parsers


def _gpus(text: str | None) -> tuple[int, ...]:
    if text is None:
        return ()
    try:
        gpus = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise common.UsageError(f"--gpus {text!r}: expected GPU indices like 0 or 0,1") from None
    if not gpus or any(g < 0 for g in gpus):
        raise common.UsageError(f"--gpus {text!r}: expected GPU indices like 0 or 0,1")
    return gpus


def _use_demo_data(args: argparse.Namespace) -> None:
    """--demo: the demo's own data folder, with its seeded baseline."""
    if getattr(args, "demo", False):
        from console.services import demo

        demo.use_demo_data_dir()


def _say(quiet: bool):
    """Progress lines on stdout, none with --json (its stdout is the document)."""

    def say(line: str) -> None:
        if not quiet:
            print(line, flush=True)

    return say


async def _save(args: argparse.Namespace, profile: Profile, history: History) -> int:
    from console.services.baseline import (
        BaselineError,
        BaselineRunner,
        BaselineStore,
        baseline_of,
        check_against_profile,
    )

    store = history.baselines  # before the suite runs: a store that cannot be opened is said now
    path = Path(args.suite)
    try:
        BaselineStore.check_name(args.name)
        suite = load_suite(path)
        text = read_bounded_text(path, TOML_FILE_LIMIT, "suite file")  # W2: never an unbounded read
        check_against_profile(suite, profile)
    except (SuiteError, BaselineError) as exc:
        raise common.UsageError(str(exc)) from None
    except OSError as exc:
        raise common.UsageError(f"{path}: {exc.strerror or exc}") from None
    node = common.pick_node(profile, args.node)
    env = common.parse_pairs(args.env, "--env")
    gpus = _gpus(args.gpus)
    runner = BaselineRunner(lm_eval=args.lm_eval, ready_timeout=args.timeout)
    try:
        run = await runner.run(
            node,
            suite,
            profile,
            suite_text=text,
            gpus=gpus,
            extra_env=env,
            say=_say(args.json),
            instance=args.instance,
            port=args.port,
        )
    finally:
        await runner.pool.close()
    baseline = baseline_of(args.name, run)
    short = [r.point for r in run.runs if sum(1 for x in r.repeats if x is not None) < 2]
    if short:  # a point without 2 good repeats has no noise to judge a check by: not saved
        for note in run.notes:
            print(f"  problem: {note}", file=sys.stderr)
        common.say_error(
            f"baseline {args.name} not saved: {', '.join(short)} had fewer than 2 repeats that worked (problems above)"
        )
        return common.EXIT_FAILED
    where = store.save(baseline)
    if args.json:
        print(json.dumps({"saved": str(where), **baseline.to_dict(), "problems": list(run.notes)}, indent=2))
    else:
        for note in run.notes:
            print(f"  problem: {note}")
        print(f"baseline {args.name} of {node.name} saved to {where} ({baseline.seconds:.0f} s)")
    return common.EXIT_OK


async def _check_one(args, profile: Profile, history: History, node: NodeSpec, name: str, quiet: bool):
    from console.services.baseline import (
        BaselineError,
        BaselineRunner,
        check_against_profile,
        check_report,
    )

    try:
        baseline = history.baselines.get(node.name, name)
        suite = baseline.suite()
        check_against_profile(suite, profile)
    except (BaselineError, SuiteError) as exc:  # a name that is not there, a file that is not a baseline
        raise common.UsageError(str(exc)) from None
    env = common.parse_pairs(args.env, "--env")
    runner = BaselineRunner(lm_eval=args.lm_eval, ready_timeout=args.timeout)
    try:
        run = await runner.run(
            node,
            suite,
            profile,
            suite_text=baseline.suite_text,
            gpus=_gpus(args.gpus),
            extra_env=env,
            say=_say(quiet),
            instance=args.instance,
            port=args.port,
        )
    finally:
        await runner.pool.close()
    try:
        return check_report(baseline, run)
    except BaselineInputError as exc:
        raise common.UsageError(str(exc)) from None


async def _check(args: argparse.Namespace, profile: Profile, history: History) -> int:
    if args.all:
        if args.name:
            raise common.UsageError("give a baseline NAME or --all, not both")
        return await _check_all(args, profile, history)
    if not args.name:
        raise common.UsageError("baseline check needs a NAME (or --all)")
    node = common.pick_node(profile, args.node)
    report = await _check_one(args, profile, history, node, args.name, quiet=args.json)
    if args.json:
        print(json.dumps(report_to_dict(report), indent=2, allow_nan=False))
    else:
        print(render_markdown(report), end="")
    return report.exit_code


async def _check_all(args: argparse.Namespace, profile: Profile, history: History) -> int:
    from console.services.baseline import BaselineError

    nodes = common.select_nodes(profile, [args.node] if args.node else None)
    store = history.baselines
    summary: list[dict] = []
    worst = common.EXIT_OK
    for node in nodes:  # one node at a time: a suite wants its node to itself
        for baseline in store.list(node.name):
            t0 = time.monotonic()
            try:
                report = await _check_one(args, profile, history, node, baseline.name, quiet=True)
            except (BaselineError, common.UsageError, TransportError) as exc:
                summary.append({"node": node.name, "baseline": baseline.name, "verdict": "error", "error": str(exc)})
                worst = max(worst, common.EXIT_FAILED)
                continue
            doc = report_to_dict(report)
            summary.append(
                {
                    "node": node.name,
                    "baseline": baseline.name,
                    "verdict": report.verdict,
                    "counts": doc["counts"],
                    "changes": [c["line"] for c in doc["changes"]],
                    "seconds": round(time.monotonic() - t0, 1),
                    "report": doc,
                }
            )
            if report.exit_code == EXIT_REGRESSED:
                worst = max(worst, EXIT_REGRESSED)
            if not args.json:
                print(_summary_line(summary[-1]), flush=True)
    if args.json:
        print(json.dumps({"checks": summary}, indent=2, allow_nan=False))
    elif not summary:
        print("no baselines stored (save one with `rocm-console baseline save`)")
    else:
        for s in summary:
            if s["verdict"] == "error":
                print(f"{s['node']} {s['baseline']}: error: {s['error']}")
    return worst


def _summary_line(s: dict) -> str:
    counts = ", ".join(f"{n} {v}" for v, n in s["counts"].items() if n)
    changed = f"; changed: {'; '.join(s['changes'][:3])}" if s["changes"] else ""
    return f"{s['node']} {s['baseline']}: {s['verdict']} ({counts}; {s['seconds']:.0f} s){changed}"


async def _list(args: argparse.Namespace, profile: Profile, history: History) -> int:
    if args.node:
        common.pick_node(profile, args.node)
    found = history.baselines.list(args.node)
    if args.json:
        print(
            json.dumps(
                {
                    "baselines": [
                        {
                            "name": b.name,
                            "node": b.node,
                            "suite": b.suite_file,
                            "created": b.created,
                            "points": [r.point for r in b.runs],
                            "path": b.path or history.baselines.where(b.node, b.name),
                        }
                        for b in found
                    ]
                },
                indent=2,
            )
        )
        return common.EXIT_OK
    if not found:
        print("no baselines stored (save one with `rocm-console baseline save NAME --node N --suite FILE`)")
    for b in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(b.created))
        rocm = b.versions.rocm if b.versions is not None and b.versions.rocm else "?"
        print(f"{b.node:<16} {b.name:<20} {when}  {Path(b.suite_file).name:<22} ROCm {rocm}  {len(b.runs)} points")
    return common.EXIT_OK


async def _rm(args: argparse.Namespace, profile: Profile, history: History) -> int:
    from console.services.baseline import BaselineError, BaselineStore

    node = common.pick_node(profile, args.node)
    try:
        BaselineStore.check_name(args.name)
    except BaselineError as exc:
        raise common.UsageError(str(exc)) from None
    if not history.remove_baseline(node.name, args.name):
        known = ", ".join(b.name for b in history.baselines.list(node.name)) or "none"
        raise common.UsageError(f"{node.name}: no baseline named {args.name} (stored: {known})")
    if args.json:
        print(json.dumps({"node": node.name, "removed": args.name}))
    else:
        print(f"baseline {args.name} of {node.name} removed")
    return common.EXIT_OK


async def _ack(args: argparse.Namespace, profile: Profile, history: History) -> int:
    node = common.pick_node(profile, args.node)
    count = history.versions_book().acknowledge(node.name)
    if args.json:
        print(json.dumps({"node": node.name, "acknowledged": count}))
    else:
        print(f"{node.name}: {count} change{'s' if count != 1 else ''} acknowledged")
    return common.EXIT_OK


def run(args: argparse.Namespace) -> int:
    from console.cli.history_arg import command_history, require
    from console.services.baseline import BaselineError
    from console.services.results import StoreError

    _use_demo_data(args)
    action = {"save": _save, "check": _check, "list": _list, "rm": _rm, "ack": _ack}[args.baseline_command]

    async def act(args: argparse.Namespace, profile: Profile) -> int:
        history = command_history(profile=profile)
        try:
            require(history)  # the store, or one line naming it and why (exit 1)
            if getattr(args, "demo", False):
                from console.services.baseline_demo import prepare_demo

                # the seeded baseline straight into the demo's own store
                prepare_demo(profile, history.versions_book(), fresh=False, baselines=history.baselines)
            return await action(args, profile, history)
        finally:
            history.close()

    return common.run_command(args, act, failures=(BaselineError, TransportError, StoreError))
