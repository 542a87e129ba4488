"""What the run commands take from the line, checked before any node is asked: `serve start`'s
--set/--env/--arg/--name/--timeout, `bench run|sweep`'s preset overrides and concurrency points,
--gpus lists. Shared by serve.py, bench.py, bench_offline.py and experiment.py (the replica-group
halves of serve start and bench run): bad input is a UsageError (one line, exit 2)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from console.cli.common import UsageError, parse_pairs
from console.core import bounds
from console.core.bench.argv import apply_bench_overrides, check_bench_argv
from console.core.model import BenchPreset, Profile
from console.core.serve.argv import check_serve_overrides, take_tp
from console.services.instances import NAME_RE as INSTANCE_NAME_RE

WAIT_TIMEOUT = 900.0  # serve start --wait, unless --timeout says otherwise


def parse_gpus(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        gpus = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--gpus {text!r}: expected a comma-separated list of GPU indices, e.g. 0,1") from None
    if not gpus or any(g < 0 for g in gpus) or len(set(gpus)) != len(gpus):
        raise UsageError(f"--gpus {text!r}: expected distinct non-negative GPU indices")
    return gpus


def serve_inputs(args: argparse.Namespace) -> tuple[int | None, dict[str, str], dict[str, str]]:
    """`--set`, `--env`, `--arg`, `--name`, `--timeout` of `serve start`, checked before any node is asked:
    (the TP asked for with --set tp=N, the other overrides, the environment). UsageError otherwise."""
    overrides = parse_pairs(args.set, "--set")
    env = parse_pairs(args.env, "--env")
    try:
        tp, overrides = take_tp(overrides)
        check_serve_overrides(overrides, args.arg)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.name is not None and not INSTANCE_NAME_RE.match(args.name):
        raise UsageError(
            f"--name {args.name!r}: letters, digits, '.', '_' and '-' (at most 64, a letter or digit first)"
        )
    if args.timeout is not None and not args.wait:
        raise UsageError("--timeout is how long --wait waits: add --wait")
    return tp, overrides, env


def wait_timeout(args: argparse.Namespace) -> float:
    return WAIT_TIMEOUT if args.timeout is None else args.timeout


def bench_inputs(args, profile: Profile) -> tuple[BenchPreset, dict[str, str], dict[str, str]]:
    """The preset, its `--set` overrides and `--env`, checked before any node is asked: an
    unknown key, a bad value or a combination the client cannot run is one line, exit 2."""
    preset = next((p for p in profile.bench_presets if p.name == args.preset), None)
    if preset is None:
        names = ", ".join(p.name for p in profile.bench_presets) or "none"
        raise UsageError(f"unknown bench preset {args.preset!r} (known: {names})")
    overrides = parse_pairs(args.set, "--set")
    env = parse_pairs(args.env, "--env")
    if args.label is not None and args.no_store:
        raise UsageError("--label is stored with the result, and --no-store stores nothing: drop one")
    try:
        # a dry build: what the client could not run as asked fails here, not on the node
        check_bench_argv(apply_bench_overrides(preset, overrides), None)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return preset, overrides, env


def _overridden(overrides: dict[str, str], key: str) -> bool:
    return any(k.lstrip("-").replace("-", "_") == key for k in overrides)


def concurrency_points(args, profile: Profile) -> Sequence[int | None]:
    preset, overrides, _ = bench_inputs(args, profile)
    applied = apply_bench_overrides(preset, overrides)  # checked by bench_inputs
    if args.concurrency is not None and _overridden(overrides, "max_concurrency"):
        raise UsageError("give --concurrency or --set max_concurrency, not both")
    if args.bench_command == "run":
        if args.concurrency is not None:
            if args.concurrency > bounds.CONCURRENCY:  # the preset's bound (docs/benchmarks.md)
                raise UsageError(f"--concurrency {args.concurrency}: must be at most {bounds.CONCURRENCY}")
            return [args.concurrency]
        if len(applied.max_concurrency) > 1 and _overridden(overrides, "max_concurrency"):
            raise UsageError(
                f"--set max_concurrency={','.join(map(str, applied.max_concurrency))}: bench run runs one "
                "concurrency; bench sweep runs a list"
            )
        return [applied.max_concurrency[0] if applied.max_concurrency else None]
    if args.concurrency:
        try:
            points = [int(x) for x in args.concurrency.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--concurrency {args.concurrency!r}: expected a list like 1,4,16,64") from None
        if not points or min(points) < 1:
            raise UsageError(f"--concurrency {args.concurrency!r}: expected positive numbers")
        if len(set(points)) != len(points):
            raise UsageError(f"--concurrency {args.concurrency!r}: a value is listed twice")
        if max(points) > bounds.CONCURRENCY:
            raise UsageError(f"--concurrency {args.concurrency!r}: must be at most {bounds.CONCURRENCY}")
        return points
    if len(applied.max_concurrency) < 2:
        raise UsageError(f"preset {args.preset!r} has no concurrency list: give --concurrency 1,4,16")
    return list(applied.max_concurrency)
