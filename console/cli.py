"""`rocm-console` entry point: the TUI by default, headless subcommands for scripts."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Sequence

from console import __version__
from console.core.errors import ProfileError
from console.core.model import NodeHealth, NodeSnapshot, Profile
from console.core.profiles import demo_profile_path, discover_profile_paths, load_profile
from console.core.status_view import fmt_num, merged_gpu_rows, node_dict

EXIT_OK, EXIT_PARTIAL, EXIT_BAD_INPUT = 0, 1, 2
# Serve presets taken from AMD's guides, always available.
PRESETS_PATH = Path(__file__).resolve().parents[1] / "profiles" / "presets.toml"


class UsageError(Exception):
    """Bad input from the user: one line on stderr, exit 2."""


def _common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--profile", action="append", metavar="FILE", default=default,
        help="profile TOML file (repeatable); default: ./profiles/*.toml, then the user config dir",
    )
    parser.add_argument(
        "--demo", action="store_true", default=argparse.SUPPRESS if suppress else False,
        help="use the simulated demo nodes (no GPU, no SSH)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rocm-console",
        description="Terminal control console for vLLM on AMD Instinct GPU nodes.",
    )
    parser.add_argument("--version", action="version", version=f"rocm-console {__version__}")
    _common(parser, suppress=False)
    parser.add_argument("--interval", type=float, default=1.0, help="sampling interval in seconds (0.1-10)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    status = sub.add_parser("status", help="one fresh sample of every GPU of every node")
    _common(status, suppress=True)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.add_argument("--node", action="append", metavar="NAME", help="only this node (repeatable)")
    status.add_argument("--timeout", type=float, default=20.0, help="seconds to wait for each node")
    status.add_argument("--no-probe", action="store_true", help="skip the version probe (faster)")

    serve = sub.add_parser("serve", help="start, list, stop and read vLLM instances on the nodes")
    serve_sub = serve.add_subparsers(dest="serve_command", metavar="ACTION")
    serve_sub.required = True
    start = serve_sub.add_parser("start", help="start a serve preset on chosen GPUs")
    start.add_argument("--node", metavar="NAME", help="node (needed when the profile has several)")
    start.add_argument("--preset", required=True, metavar="NAME", help="serve preset name")
    start.add_argument("--gpus", metavar="LIST", help="logical GPU indices, e.g. 0,1 (default: the first free ones)")
    start.add_argument("--port", type=int, help="port on the node (default: the preset's, or the first free from 8000)")
    start.add_argument("--name", help="instance name (default: preset-gGPUS)")
    start.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a serve flag, e.g. max_model_len=4096 (repeatable)")
    start.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra environment (repeatable)")
    start.add_argument("--arg", action="append", default=[], metavar="ARG", help="extra argument for vllm serve (repeatable)")
    start.add_argument("--wait", action="store_true", help="wait until ready (exit 0) or failed (exit 1)")
    start.add_argument("--timeout", type=float, default=900.0, help="seconds --wait waits (default 900)")
    lst = serve_sub.add_parser("list", help="every instance on the nodes, with its state")
    lst.add_argument("--node", action="append", metavar="NAME")
    stop = serve_sub.add_parser("stop", help="stop an instance (SIGINT, then SIGTERM, then SIGKILL)")
    stop.add_argument("name")
    stop.add_argument("--node", metavar="NAME")
    logs = serve_sub.add_parser("logs", help="an instance's log")
    logs.add_argument("name")
    logs.add_argument("--node", metavar="NAME")
    logs.add_argument("--follow", "-f", action="store_true")
    logs.add_argument("--lines", "-n", type=int, default=None, metavar="N", help="only the last N lines")
    for p in (start, lst, stop, logs):
        _common(p, suppress=True)
        p.add_argument("--json", action="store_true", help="print JSON")

    from console import cli_bench, cli_doctor, cli_partition, cli_results

    for module in (cli_partition, cli_bench, cli_results, cli_doctor):
        for p in module.add_parser(sub):
            _common(p, suppress=True)
    return parser


def user_config_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_path("rocm-console"))


def load_selected_profile(args: argparse.Namespace) -> Profile:
    builtin = [PRESETS_PATH] if PRESETS_PATH.exists() else []
    if args.demo:
        return load_profile([*builtin, demo_profile_path()])
    paths = discover_profile_paths(args.profile or [], Path.cwd(), user_config_dir())
    profile = load_profile([*builtin, *paths])
    if not profile.nodes:
        searched = ", ".join(str(p) for p in paths) or "./profiles/*.toml, " + str(user_config_dir())
        raise UsageError(f"no nodes defined (searched {searched}); pass --profile FILE or try --demo")
    return profile


def select_nodes(profile: Profile, names: Sequence[str] | None):
    if not names:
        return list(profile.nodes)
    known = {n.name: n for n in profile.nodes}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown node {unknown[0]!r} (known: {', '.join(known) or 'none'})")
    return [known[n] for n in dict.fromkeys(names)]


# ---------------------------------------------------------------- status


def format_status_table(snapshots: Sequence[NodeSnapshot]) -> str:
    lines: list[str] = []
    header = f"{'GPU':>4} {'PHY':>3} {'PART':<9} {'MODEL':<20} {'UTIL':>5} {'VRAM (GiB)':>13} {'POWER (W)':>11} {'TJ':>4} {'TMEM':>4} {'PROCS':>5}"
    for snap in snapshots:
        state = snap.health.value.upper()
        detail = snap.error if snap.error else (snap.source or "")
        lines.append(f"{snap.name}  {state}  {detail}".rstrip())
        rows = merged_gpu_rows(snap)
        if not rows:
            continue
        lines.append(header)
        for static, m in rows:
            part = f"{static.compute_partition or '?'}/{static.memory_partition or '?'}" if static else "?"
            model = (static.model or "?").replace("AMD Instinct ", "") if static else "?"
            vram = "N/A"
            if m and m.vram_used_mib is not None and m.vram_total_mib is not None:
                vram = f"{m.vram_used_mib / 1024:.0f}/{m.vram_total_mib / 1024:.0f}"
            power = "N/A"
            if m and m.power_w is not None:
                power = f"{m.power_w:.0f}/{fmt_num(m.power_cap_w)}"
            lines.append(
                f"{static.index if static else m.index:>4} {static.physical if static else '?':>3} {part:<9} {model:<20} "
                f"{fmt_num(m.util_pct if m else None, '{:.0f}%'):>5} {vram:>13} {power:>11} "
                f"{fmt_num(m.temp_junction_c if m else None):>4} {fmt_num(m.temp_mem_c if m else None):>4} "
                f"{len(m.processes) if m else 0:>5}"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def cmd_status(args: argparse.Namespace) -> int:
    from console.services.status import collect_status

    profile = load_selected_profile(args)
    nodes = select_nodes(profile, args.node)
    snapshots = asyncio.run(collect_status(nodes, timeout=args.timeout, probe=not args.no_probe))
    if args.json:
        print(json.dumps({"nodes": [node_dict(s) for s in snapshots]}, indent=2))
    else:
        sys.stdout.write(format_status_table(snapshots))
    return EXIT_OK if all(s.health == NodeHealth.LIVE for s in snapshots) else EXIT_PARTIAL


# ---------------------------------------------------------------- TUI


def cmd_tui(args: argparse.Namespace) -> int:
    if not 0.1 <= args.interval <= 10:
        raise UsageError(f"--interval {args.interval:g}: must be between 0.1 and 10 seconds")
    profile = load_selected_profile(args)
    from console.ui.app import run_app

    return run_app(profile, interval=args.interval)


def cmd_serve_entry(args: argparse.Namespace) -> int:
    from console.cli_serve import cmd_serve

    return cmd_serve(args, load_selected_profile(args))


def cmd_partition_entry(args: argparse.Namespace) -> int:
    from console.cli_partition import cmd_partition

    return cmd_partition(args, load_selected_profile(args))


def cmd_bench_entry(args: argparse.Namespace) -> int:
    from console.cli_bench import cmd_bench

    return cmd_bench(args, load_selected_profile(args))


def cmd_results_entry(args: argparse.Namespace) -> int:
    from console.cli_results import cmd_results

    return cmd_results(args, None)  # results are local: no profile or node needed


def cmd_doctor_entry(args: argparse.Namespace) -> int:
    from console.cli_doctor import cmd_doctor

    return cmd_doctor(args, load_selected_profile(args))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {None: cmd_tui, "status": cmd_status, "serve": cmd_serve_entry, "partition": cmd_partition_entry,
                "bench": cmd_bench_entry, "results": cmd_results_entry, "doctor": cmd_doctor_entry}
    try:
        return handlers[args.command](args)
    except (ProfileError, UsageError) as exc:
        print(f"rocm-console: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `rocm-console status | head`: the reader left, nothing to report
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
