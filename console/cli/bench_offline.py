"""`rocm-console bench latency|throughput|accuracy`: the seeds' offline
benchmarks on a node's free GPUs, and lm_eval accuracy against an instance.

Wired into `bench` by console/cli/bench.py (add_parsers / COMMANDS / run).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import time

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_command_options,
    guarded,
    non_negative_int,
    parse_pairs,
    positive_int,
    positive_seconds,
    run_command,
    say_error,
)
from console.cli.history_arg import run_store
from console.cli.inputs import parse_gpus
from console.cli.selection import Selection
from console.core.bench.offline import (
    CLIENTS,
    PRESETS_PATH,
    OfflineError,
    OfflinePreset,
    apply_offline_overrides,
    check_extra_args,
    load_offline_presets,
)
from console.core.bench.run_telemetry import RunTelemetry, summarize
from console.core.errors import ProfileError
from console.core.model import NodeSnapshot, NodeSpec, Profile
from console.core.profiles import PROFILES_DIR
from console.core.results.record import StoredRun, run_to_dict
from console.core.results.reference import load_reference_numbers, reference_matches
from console.core.serve.argv import redact
from console.core.status_view import fmt_num
from console.services.instances import InstanceError
from console.services.node_results import keep_locally
from console.services.results import StoreError
from console.services.runs.accuracy import AccuracyError, AccuracyRunner
from console.services.runs.offline import (
    OfflineClient,
    OfflineOutcome,
    OfflineProgressed,
    OfflineRunError,
    OfflineRunner,
    OfflineStarted,
    preset_from_spec,
)
from console.services.runs.outcome import RunRecorder
from console.transport.base import TransportError

COMMANDS = ("latency", "throughput", "accuracy")
REFERENCE_PATH = PROFILES_DIR / "reference_numbers.toml"


def add_parsers(ops) -> list[argparse.ArgumentParser]:
    parsers = []
    for kind, text in (
        ("latency", "offline latency of one batch on free GPUs (`vllm bench latency`), no instance needed"),
        ("throughput", "offline throughput on free GPUs (`vllm bench throughput`), no instance needed"),
    ):
        p = ops.add_parser(kind, help=text)
        p.add_argument("--node", metavar="NAME", help="node (needed when the profile has several)")
        p.add_argument("--gpus", metavar="LIST", help="GPU indices, e.g. 0,1,2,3 (TP = their number)")
        p.add_argument("--per-gpu", action="store_true", help="one TP 1 run per listed GPU at once (seed CPX example)")
        p.add_argument("--preset", metavar="NAME", help=f"an offline preset (profiles/{PRESETS_PATH.name})")
        p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. model=/m input_len=128")
        p.add_argument("--arg", action="append", default=[], metavar="ARG", help="an extra engine flag (repeatable)")
        p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="environment on the node")
        p.add_argument("--client", choices=CLIENTS, default="auto", help="subcommand (0.10+) or script (older)")
        p.add_argument("--scripts-dir", metavar="DIR", help="where benchmark_*.py live (default /app/vllm/benchmarks)")
        p.add_argument("--detach", action="store_true", help="start and return; --attach RUN follows it later")
        p.add_argument("--attach", metavar="RUN", help="follow a detached run and store its result")
        p.add_argument("--label", help="label stored with the result")
        p.add_argument("--no-store", action="store_true", help="do not store the result")
        p.add_argument("--list-presets", action="store_true", help="list the offline presets and exit")
        parsers.append(p)
    acc = ops.add_parser("accuracy", help="lm_eval (local-completions) against an instance; the score is stored")
    acc.add_argument("--node", metavar="NAME")
    acc.add_argument("--instance", required=True, metavar="NAME", help="a ready instance on the node")
    acc.add_argument("--task", default="gsm8k", help="lm_eval task (default gsm8k, as seed 002)")
    acc.add_argument("--limit", type=positive_int, metavar="N", help="samples to evaluate (all when left out)")
    acc.add_argument(
        "--dataset", metavar="PATH", help="a local copy: folder with test.jsonl [train.jsonl], or a .jsonl"
    )
    acc.add_argument(
        "--num-fewshot", type=non_negative_int, metavar="K", help="few-shot examples (the task's default otherwise)"
    )
    acc.add_argument("--chat", action="store_true", help="local-chat-completions instead of local-completions")
    acc.add_argument("--lm-eval", metavar="PATH", help="the lm_eval program (default: scripts/setup-lm-eval's)")
    acc.add_argument("--timeout", type=positive_seconds, default=3600, metavar="S", help="give up after S seconds")
    acc.add_argument("--label", help="label stored with the result")
    acc.add_argument("--no-store", action="store_true")
    parsers.append(acc)
    add_command_options(parsers)
    return parsers


# ---------------------------------------------------------------- latency / throughput


def _presets(kind: str) -> dict[str, OfflinePreset]:
    try:
        return {p.name: p for p in load_offline_presets(PRESETS_PATH) if p.kind == kind}
    except ProfileError as exc:
        raise UsageError(str(exc)) from None


def _preset(args) -> OfflinePreset:
    overrides = parse_pairs(args.set, "--set")
    if args.preset:
        presets = _presets(args.bench_command)
        if args.preset not in presets:
            raise UsageError(
                f"unknown {args.bench_command} preset {args.preset!r} (known: {', '.join(presets) or 'none'})"
            )
        preset = presets[args.preset]
    else:
        if "model" not in overrides:
            raise UsageError(f"bench {args.bench_command}: give --preset NAME or --set model=MODEL")
        preset = OfflinePreset(name="custom", kind=args.bench_command, model=overrides["model"])
    try:
        preset = apply_offline_overrides(preset, overrides)
        check_extra_args(args.arg)
    except OfflineError as exc:
        raise UsageError(str(exc)) from None
    if preset.kind == "throughput" and (preset.input_len is None or preset.output_len is None):
        raise UsageError("bench throughput: --set input_len=N --set output_len=N (or a preset) are needed")
    return preset


def _check_offline_options(args) -> None:
    """Options this line cannot honour are refused, never dropped without a word."""
    if args.attach:
        given = [
            flag
            for flag, value in (
                ("--preset", args.preset),
                ("--set", args.set),
                ("--arg", args.arg),
                ("--env", args.env),
                ("--gpus", args.gpus),
                ("--per-gpu", args.per_gpu),
                ("--detach", args.detach),
                ("--scripts-dir", args.scripts_dir),
                ("--client", args.client != "auto"),
            )
            if value
        ]
        if given:
            raise UsageError(f"--attach follows a run that is already started: {given[0]} does not apply")
    if args.scripts_dir is not None and args.client == "subcommand":
        raise UsageError("--scripts-dir is where the benchmark_*.py scripts are: it needs --client script (or auto)")
    if args.label is not None and args.no_store:
        raise UsageError("--label is stored with the result, and --no-store stores nothing: drop one")
    if args.detach and (args.no_store or args.label is not None):
        flag = "--no-store" if args.no_store else "--label"
        raise UsageError(f"{flag} is for the run's result: --detach returns at the start (give it to --attach RUN)")


def _tp_for(args, preset: OfflinePreset, gpus: list[int]) -> OfflinePreset:
    """TP is the number of GPUs (one GPU each with --per-gpu); a --set tp that says otherwise is refused."""
    overrides = parse_pairs(args.set, "--set")
    asked = next((k for k in overrides if k.lstrip("-").replace("-", "_") == "tp"), None)
    want = 1 if args.per_gpu else len(gpus)
    if asked is not None and preset.tp != want:
        where = "--per-gpu runs TP 1 on each GPU" if args.per_gpu else f"--gpus {args.gpus} gives {len(gpus)}"
        raise UsageError(f"--set {asked}={overrides[asked]}: {where} (TP is the number of GPUs)")
    return dataclasses.replace(preset, tp=want)


class _Printer:
    def __init__(self, quiet: bool, many: bool) -> None:
        self.quiet = quiet
        self.many = many
        self.last: dict[tuple[str, str], float] = {}

    def __call__(self, event) -> None:
        if self.quiet:
            return
        if isinstance(event, OfflineStarted):
            gpus = ",".join(map(str, event.gpus)) or "-"
            print(f"started {event.run} on {event.node} gpus {gpus}", flush=True)
            for note in event.notes:
                print(f"  note: {note}", flush=True)
        elif isinstance(event, OfflineProgressed):
            p = event.progress.progress
            key = (event.run, event.progress.phase)
            now = time.monotonic()
            if p.n == p.total or now - self.last.get(key, 0.0) >= 2.0:
                self.last[key] = now
                who = f"{event.run}: " if self.many else ""
                eta = f" ETA {p.remaining_s:.0f}s" if p.remaining_s is not None else ""
                print(f"  {who}{event.progress.phase} {p.n}/{p.total}{eta}", flush=True)


def format_offline(outcome: OfflineOutcome) -> str:
    if not outcome.ok:
        return f"{outcome.run}: FAILED — {outcome.reason}"
    energy = energy_lines(outcome.telemetry, None, outcome.telemetry_note)
    return "\n".join([_format_offline(outcome), *energy])


def _format_offline(outcome: OfflineOutcome) -> str:
    r = outcome.result_json or {}
    if outcome.kind == "latency":
        pct = r.get("percentiles") or {}
        return (
            f"{outcome.run}: ok\n  avg latency {r.get('avg_latency', float('nan')):.4f} s  p50 {pct.get('50', float('nan')):.4f} s"
            f"  p99 {pct.get('99', float('nan')):.4f} s  ({len(r.get('latencies') or [])} iterations)"
        )
    return (
        f"{outcome.run}: ok\n  {r.get('tokens_per_second', float('nan')):.1f} tokens/s  "
        f"{r.get('requests_per_second', float('nan')):.2f} requests/s  {r.get('num_requests')} requests in "
        f"{r.get('elapsed_time', float('nan')):.2f} s"
    )


def energy_lines(telemetry: RunTelemetry | None, output_tokens: float | None, note: str | None) -> list[str]:
    """The run's energy, power, tokens per joule and throttled share (issue P), for the text output."""
    if telemetry is None:
        return [f"  energy: not recorded ({note})"] if note else []
    e = summarize(telemetry, None if output_tokens is None else float(output_tokens))
    source = "" if e.source == "counter" else f" ({e.source})"
    line = (
        f"  energy {fmt_num(e.energy_j, '{:.1f}')} J{source}  avg {fmt_num(e.avg_power_w, '{:.0f}')} W"
        f"  peak {fmt_num(e.peak_gpu_power_w, '{:.0f}')} W  {fmt_num(e.tokens_per_joule, '{:.3g}')} tokens/J"
        f"  throttled {fmt_num(e.throttled_pct, '{:.1f}%')}"
    )
    return [line] + ([f"  telemetry: {note}"] if note else [])


def _reference_line(run: StoredRun) -> str | None:
    try:
        matches = reference_matches(run, load_reference_numbers(REFERENCE_PATH))
    except ProfileError:
        return None
    if not matches:
        return None
    row = matches[0].row
    key = "latency_s" if run.context.get("run_kind") == "latency" else "throughput_tok_s"
    unverified = f" (not checked: {', '.join(matches[0].unverified)})" if matches[0].unverified else ""
    return f"  seed {row.seed} reference ({row.gpu} TP{row.tp}): {row.metrics.get(key)} {key}{unverified}"


async def _offline(args, profile: Profile, keep: bool) -> int:
    _check_offline_options(args)
    if not args.attach:
        _preset(args)  # bad --set / --arg: one line before any node is asked
        parse_pairs(args.env, "--env")
        if args.gpus:
            parse_gpus(args.gpus)
    async with Selection(profile) as sel:
        node = sel.node(args.node)
        runner = OfflineRunner(sel.pool)
        recorder = RunRecorder(sel.pool, run_store(sel.history) if keep else None)
        if args.attach:
            return await _attach(args, node, runner, recorder)
        preset = _preset(args)
        gpus = parse_gpus(args.gpus) if args.gpus else []
        if not gpus:
            raise UsageError(f"bench {preset.kind}: --gpus LIST is needed (the GPUs must be free)")
        env = parse_pairs(args.env, "--env")
        groups = [[g] for g in gpus] if args.per_gpu else [gpus]
        preset = _tp_for(args, preset, gpus)
        check = await runner.preflight(node, gpus, preset.tp, per_gpu=args.per_gpu)
        printer = _Printer(quiet=args.json, many=len(groups) > 1)
        how = OfflineClient(args.client, args.scripts_dir, args.arg, env)
        if args.detach:
            names = []
            for group in groups:
                name, command = await runner.start(node, preset, group, version=check.version, how=how)
                names.append(name)
                if not args.json:
                    print(f"started {name} on {node.name} (follow: bench {preset.kind} --attach {name})")
                    for note in command.notes:
                        print(f"  note: {note}")
            if args.json:
                print(json.dumps({"node": node.name, "runs": names}, indent=2))
            return EXIT_OK
        outcomes = await asyncio.gather(
            *(runner.run(node, preset, group, version=check.version, how=how, on_event=printer) for group in groups)
        )
        return await _finish(args, node, check.snapshot, preset, list(zip(groups, outcomes)), recorder)


async def _attach(args, node: NodeSpec, runner: OfflineRunner, recorder: RunRecorder) -> int:
    kind = args.bench_command
    rec = await runner.node_runs.record(node, args.attach)
    if rec is None:
        raise UsageError(f"{node.name}: no benchmark run named {args.attach}")
    spec = rec.spec
    if spec.get("kind") != kind:
        raise UsageError(f"{node.name}: {args.attach} is not a {kind} run")
    gpus = [int(g) for g in spec.get("gpus") or ()]
    preset = preset_from_spec(spec) or OfflinePreset(name=str(spec.get("preset") or "custom"), kind=kind, model="?")
    if not args.json:
        print(f"attached to {args.attach} ({rec.state})", flush=True)
    outcome = await runner.follow(node, args.attach, kind, on_event=_Printer(args.json, False), gpus=gpus)
    return await _finish(args, node, None, preset, [(gpus, outcome)], recorder)


async def _finish(
    args, node: NodeSpec, snap: NodeSnapshot | None, preset: OfflinePreset, results, recorder: RunRecorder
) -> int:
    docs = []
    ok = True
    overrides = parse_pairs(getattr(args, "set", None) or [], "--set")
    for gpus, outcome in results:
        ok = ok and outcome.ok
        if not args.json:
            print(format_offline(outcome), flush=True)
        recorded = await recorder.offline(
            node, outcome, preset, gpus, snapshot=snap, overrides=overrides, label=args.label
        )
        if recorded.line is not None:
            say_error(recorded.line)
            ok = False
        stored = recorded.stored
        if not args.json and recorded.record is not None:
            if stored is not None:
                print(f"  stored as {stored.id}", flush=True)
            line = _reference_line(recorded.record)
            if line:
                print(line, flush=True)
        docs.append(
            run_to_dict(stored)
            if stored is not None
            else {
                "run": outcome.run,
                "ok": outcome.ok,
                "reason": outcome.reason,
                "result": outcome.result_json,
                "argv": list(redact(list(outcome.argv))),
            }
        )
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2, default=str))
    return EXIT_OK if ok else EXIT_FAILED


def _list_presets(kind: str) -> int:
    for p in _presets(kind).values():
        lens = f"{p.input_len}/{p.output_len}"
        extra = f" bs{p.batch_size}" if p.batch_size else (f" n{p.num_prompts}" if p.num_prompts else "")
        print(f"{p.name:<32} {p.model}  TP{p.tp}  {lens}{extra}")
    return EXIT_OK


# ---------------------------------------------------------------- accuracy


async def _accuracy(args, profile: Profile, keep: bool) -> int:
    async with Selection(profile) as sel:
        store = run_store(sel.history) if keep else None  # opened when the score is stored
        node = sel.node(args.node)
        if args.label is not None and args.no_store:
            raise UsageError("--label is stored with the result, and --no-store stores nothing: drop one")
        runner = AccuracyRunner(sel.pool, lm_eval=args.lm_eval)
        outcome = await runner.run(
            node,
            args.instance,
            task=args.task,
            limit=args.limit,
            dataset=args.dataset,
            num_fewshot=args.num_fewshot,
            chat=args.chat,
            timeout=args.timeout,
            on_line=None if args.json else (lambda line: print(f"  {line}", flush=True)),
        )
        run = runner.stored_run(outcome, await runner.context(node, outcome), label=args.label)
        stored, unstored = None, None
        try:
            stored = None if store is None else store.get(store.save(run))
        except StoreError as exc:
            kept = keep_locally(run)
            unstored = f"{args.instance}: accuracy result not stored ({exc})" + (
                f"; kept in {kept}: store it later with `rocm-console results import {kept}`"
                if kept
                else "; printed below as JSON"
            )
    if unstored:
        say_error(unstored)
    if args.json or (unstored and "printed below" in unstored):
        print(json.dumps(run_to_dict(stored or run), indent=2, default=str))
        return EXIT_FAILED if unstored else EXIT_OK
    print(f"{args.instance}: {outcome.summary}")
    if stored is not None:
        print(f"  stored as {stored.id}")
    return EXIT_FAILED if unstored else EXIT_OK


def run(args: argparse.Namespace, keep: bool) -> int:
    """keep: store the result (not --no-store), in the command's History (its Selection's)."""
    if getattr(args, "list_presets", False):
        return guarded(lambda: _list_presets(args.bench_command))
    action = functools.partial(_accuracy if args.bench_command == "accuracy" else _offline, keep=keep)
    return run_command(args, action, failures=(OfflineRunError, AccuracyError, InstanceError, TransportError))
