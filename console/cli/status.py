"""`rocm-console status`: one fresh sample of every GPU of every node, as a table or JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Sequence

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_PARTIAL,
    UsageError,
    add_profile_options,
    load_selected_profile,
    positive_seconds,
    say_error,
)
from console.cli.selection import Selection
from console.core.model import NodeHealth, NodeSnapshot, NodeSpec, Profile
from console.core.status_view import align_row, fmt_num, merged_gpu_rows, node_dict
from console.core.telemetry import is_nvidia_source
from console.core.text import printable


def add_parser(sub) -> list[argparse.ArgumentParser]:
    status = sub.add_parser("status", help="one fresh sample of every GPU of every node")
    add_profile_options(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.add_argument("--node", action="append", metavar="NAME", help="only this node (repeatable)")
    status.add_argument("--timeout", type=positive_seconds, default=20.0, help="seconds to wait for each node")
    status.add_argument("--no-probe", action="store_true", help="skip the version probe (faster)")
    # Prometheus-fed telemetry (docs/prometheus.md)
    status.add_argument(
        "--source",
        choices=("profile", "ssh", "prometheus"),
        default="profile",
        help="where the numbers come from: each node's telemetry setting (default), the agent over SSH, "
        "or the profile's [prometheus]",
    )
    status.add_argument(
        "--discover",
        action="store_true",
        help="list host names that have DME series in Prometheus but no node in the profile",
    )
    return [status]


# (title, right-aligned) of the table's columns; widths follow the widest cell of the whole output,
# so a MIG profile ("MIG/1g.10gb+me") or a long model name never shifts the columns after it.
STATUS_COLUMNS = (
    ("GPU", True),
    ("PHY", True),
    ("PART", False),
    ("MODEL", False),
    ("UTIL", True),
    ("VRAM (GiB)", True),
    ("POWER (W)", True),
    ("TJ", True),
    ("TMEM", True),
    ("PROCS", True),
    ("HEALTH", False),
)
_MIN_WIDTHS = {"PART": 9, "MODEL": 20, "VRAM (GiB)": 13, "POWER (W)": 11, "TJ": 4, "TMEM": 4}


def format_status_table(snapshots: Sequence[NodeSnapshot]) -> str:
    tables = [(snap, [_gpu_cells(snap, static, m) for static, m in merged_gpu_rows(snap)]) for snap in snapshots]
    titles = [title for title, _ in STATUS_COLUMNS]
    rights = [right for _, right in STATUS_COLUMNS]
    all_rows = [titles] + [row for _, rows in tables for row in rows]
    widths = [max(_MIN_WIDTHS.get(t, 0), *(len(row[i]) for row in all_rows)) for i, t in enumerate(titles)]
    lines: list[str] = []
    for snap, rows in tables:
        state = snap.health.value.upper()
        detail = snap.error if snap.error else (snap.source or "")
        lines.append(printable(f"{snap.name}  {state}  {detail}".rstrip()))
        if not rows:
            continue
        lines.append(align_row(titles, widths, rights))
        lines.extend(align_row(row, widths, rights) for row in rows)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _gpu_cells(snap: NodeSnapshot, static, m) -> list[str]:
    part = f"{static.compute_partition or '?'}/{static.memory_partition or '?'}" if static else "?"
    if static and static.compute_partition is None and is_nvidia_source(snap.source):
        part = "-"  # a whole NVIDIA GPU (MIG off): no partition mode at all
    model = printable((static.model or "?").replace("AMD Instinct ", "")) if static else "?"
    vram = "N/A"
    if m and m.vram_used_mib is not None and m.vram_total_mib is not None:
        vram = f"{m.vram_used_mib / 1024:.0f}/{m.vram_total_mib / 1024:.0f}"
    power = "N/A"
    if m and m.power_w is not None:
        power = f"{m.power_w:.0f}/{fmt_num(m.power_cap_w)}"
    return [
        str(static.index if static else (m.index if m else "?")),
        str(static.physical if static else "?"),
        printable(part),
        model,
        fmt_num(m.util_pct if m else None, "{:.0f}%"),
        vram,
        power,
        fmt_num(m.temp_junction_c if m else None),
        fmt_num(m.temp_mem_c if m else None),
        str(len(m.processes) if m else 0),
        _health_cell(snap, static.physical if static else None),
    ]


def _health_cell(snap: NodeSnapshot, physical: int | None) -> str:
    """The physical GPU's health: ok, or its state and reasons ('' when not read)."""
    health = snap.health_of(physical) if physical is not None else None
    if health is None:
        return ""
    return printable(health.verdict.line())


def run(args: argparse.Namespace) -> int:
    profile = load_selected_profile(args)
    if getattr(args, "discover", False):
        return _discover(args, profile)
    nodes = Selection(profile).nodes(args.node)
    snapshots = asyncio.run(_collect(args, profile, nodes))
    watched = _watched(profile)
    if args.json:
        out: dict = {"nodes": [node_dict(s) for s in snapshots]}
        if watched is not None:
            out["watcher"] = watched
        print(json.dumps(out, indent=2))
    else:
        sys.stdout.write(format_status_table(snapshots))
        if watched is not None:
            print(printable(watched["line"]))
            for alert in watched["alerts"]:
                print(printable(f"  alert {alert['rule']}: {alert['text'] or alert['rule']}"))
    return EXIT_OK if all(s.health == NodeHealth.LIVE for s in snapshots) else EXIT_PARTIAL


def _watched(profile: Profile) -> dict | None:
    """The fleet's watcher (`rocm-console watch`) and its open alerts, when one runs."""
    from console.cli.history_arg import command_history
    from console.services.watcher_presence import WatcherPresence

    history = command_history(profile=profile)  # a watcher on another machine sharing the store is in its table
    history.try_open()  # a store that cannot be opened: this machine's watcher files still tell
    presence = WatcherPresence(history.data_dir, profile.nodes, history=history)
    watcher = presence.check()
    if watcher is None:
        return None
    return {**watcher.to_dict(), "line": presence.header(), "alerts": [a.to_dict() for a in presence.alerts]}


def _from_prometheus(args: argparse.Namespace, node: NodeSpec) -> bool:
    source = getattr(args, "source", "profile")
    return source == "prometheus" or (source == "profile" and node.telemetry == "prometheus")


async def _collect(args: argparse.Namespace, profile: Profile, nodes: list[NodeSpec]) -> list[NodeSnapshot]:
    from console.services.status import collect_status

    by_prometheus = [n for n in nodes if _from_prometheus(args, n)]
    by_ssh = [n for n in nodes if not _from_prometheus(args, n)]
    jobs = []
    if by_ssh:
        from console.core.health_profile import health_settings

        rules = health_settings(profile).rules  # each GPU's health, judged by the profile's [health]
        jobs.append(collect_status(by_ssh, timeout=args.timeout, probe=not args.no_probe, health=rules))
    if by_prometheus:
        if profile.prometheus is None:
            raise UsageError("--source prometheus: the profile has no [prometheus] table (see docs/prometheus.md)")
        from console.services.prometheus import collect_prometheus_status, warn_plaintext_token

        warn_plaintext_token(profile.prometheus, say_error)
        from console.core.health_profile import health_settings

        rules = health_settings(profile).rules  # DME's health families, judged by the same rules
        jobs.append(collect_prometheus_status(profile.prometheus, by_prometheus, timeout=args.timeout, health=rules))
    found = {s.name: s for batch in await asyncio.gather(*jobs) for s in batch}
    return [found[n.name] for n in nodes]


def _discover(args: argparse.Namespace, profile: Profile) -> int:
    if profile.prometheus is None:
        raise UsageError("--discover: the profile has no [prometheus] table (see docs/prometheus.md)")
    from console.services.prometheus import PrometheusError, discover_hosts, warn_plaintext_token

    warn_plaintext_token(profile.prometheus, say_error)
    try:
        hosts = asyncio.run(discover_hosts(profile.prometheus, profile.nodes, timeout=args.timeout))
    except PrometheusError as exc:
        say_error(exc.reason)
        return EXIT_FAILED
    if args.json:
        print(json.dumps({"prometheus": profile.prometheus.url, "hosts_not_in_profile": hosts}, indent=2))
    elif hosts:
        print(f"{len(hosts)} host(s) with DME series in {profile.prometheus.url} but no node in the profile:")
        for host in hosts:
            print(f"  {host}")
    else:
        print(f"every host with DME series in {profile.prometheus.url} is in the profile")
    return EXIT_OK
