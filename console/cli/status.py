"""`rocm-console status`: one fresh sample of every GPU of every node, as a table or JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Sequence

from console.cli.common import EXIT_OK, EXIT_PARTIAL, add_profile_options, load_selected_profile, select_nodes
from console.core.model import NodeHealth, NodeSnapshot
from console.core.status_view import fmt_num, merged_gpu_rows, node_dict


def add_parser(sub) -> list[argparse.ArgumentParser]:
    status = sub.add_parser("status", help="one fresh sample of every GPU of every node")
    add_profile_options(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.add_argument("--node", action="append", metavar="NAME", help="only this node (repeatable)")
    status.add_argument("--timeout", type=float, default=20.0, help="seconds to wait for each node")
    status.add_argument("--no-probe", action="store_true", help="skip the version probe (faster)")
    return [status]


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
                f"{static.index if static else (m.index if m else '?'):>4} {static.physical if static else '?':>3} {part:<9} {model:<20} "
                f"{fmt_num(m.util_pct if m else None, '{:.0f}%'):>5} {vram:>13} {power:>11} "
                f"{fmt_num(m.temp_junction_c if m else None):>4} {fmt_num(m.temp_mem_c if m else None):>4} "
                f"{len(m.processes) if m else 0:>5}"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def run(args: argparse.Namespace) -> int:
    from console.services.status import collect_status

    profile = load_selected_profile(args)
    nodes = select_nodes(profile, args.node)
    snapshots = asyncio.run(collect_status(nodes, timeout=args.timeout, probe=not args.no_probe))
    if args.json:
        print(json.dumps({"nodes": [node_dict(s) for s in snapshots]}, indent=2))
    else:
        sys.stdout.write(format_status_table(snapshots))
    return EXIT_OK if all(s.health == NodeHealth.LIVE for s in snapshots) else EXIT_PARTIAL
