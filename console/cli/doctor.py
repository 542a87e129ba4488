"""`rocm-console doctor`: per node, what a person debugging a real node needs.

Which telemetry source loads and why the others do not, ROCm / driver / amd-smi /
vLLM versions, GPU models and partition modes, the host settings AMD's guides
recommend, and each GPU's health, each line ok / warn / fail with its fix. Exit 0 when nothing fails,
1 when a line fails, 2 for bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from console.cli.common import add_profile_options, load_selected_profile, positive_seconds
from console.cli.selection import Selection
from console.core.doctor import exit_code, render_text, to_json


def add_parser(sub) -> list[argparse.ArgumentParser]:
    doctor = sub.add_parser(
        "doctor", help="check each node: telemetry source, versions, GPUs, host settings (ok/warn/fail + fix)"
    )
    add_profile_options(doctor)
    doctor.add_argument("--node", action="append", metavar="NAME", help="only this node (repeatable)")
    doctor.add_argument("--json", action="store_true", help="print JSON instead of a table")
    doctor.add_argument(
        "--timeout", type=positive_seconds, default=90.0, help="seconds to wait for each node (default 90)"
    )
    return [doctor]


def run(args: argparse.Namespace) -> int:
    from console.core.health_profile import health_settings
    from console.services.doctor import collect_doctor

    profile = load_selected_profile(args)
    nodes = Selection(profile).nodes(args.node)
    rules = health_settings(profile).rules  # each GPU's health, judged by the profile's [health]
    reports = asyncio.run(collect_doctor(nodes, timeout=args.timeout, health=rules))
    if args.json:
        print(json.dumps(to_json(reports), indent=2))
    else:
        sys.stdout.write(render_text(reports))
    return exit_code(reports)
