"""`rocm-console partition show|set`: compute and memory partition modes from scripts."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any, Callable

from console.cli import common
from console.cli.selection import Selection
from console.core.model import NodeHealth, NodeSpec, Profile
from console.core.partition_rules import parse_physical, physical_gpus
from console.core.telemetry import amd_only_reason
from console.services.partitions import PartitionFailed, PartitionRefused, PartitionService, SwitchResult
from console.services.status import collect_status, sample_node
from console.transport.base import TransportError

if TYPE_CHECKING:
    from console.services.history import History


def add_parser(sub) -> list[argparse.ArgumentParser]:
    ops = common.add_actions(
        sub, "partition", help="show or switch compute (SPX/DPX/QPX/CPX) and memory (NPS1/NPS4) modes"
    )
    show = ops.add_parser("show", help="modes of every physical GPU")
    show.add_argument("--node", action="append", metavar="NAME")
    setp = ops.add_parser("set", help="switch modes (root on the node: sudo = true or a root login)")
    setp.add_argument("--node", required=True, metavar="NAME")
    setp.add_argument("--gpus", default="all", metavar="all|0,1", help="physical GPUs (default all)")
    setp.add_argument("--compute", type=str.upper, choices=("SPX", "DPX", "QPX", "CPX"))
    setp.add_argument("--memory", type=str.upper, choices=("NPS1", "NPS2", "NPS4"))
    setp.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    setp.add_argument(
        "--reload-driver",
        action="store_true",
        help="second confirmation a memory switch needs (the amdgpu driver is reloaded)",
    )
    common.add_command_options([show, setp])
    return [show, setp]


def _rows(snapshot) -> list[dict]:
    return [
        {
            "physical": p.physical,
            "model": p.model,
            "compute_partition": p.compute,
            "memory_partition": p.memory,
            "memory_caps": list(p.memory_caps),
            "logical_gpus": len(p.logical),
        }
        for p in physical_gpus(snapshot)
    ]


async def _show(args, profile: Profile) -> int:
    nodes = Selection(profile).nodes(args.node)
    snaps = await collect_status(nodes, probe=False)
    doc: list[dict[str, Any]] = [
        {"name": s.name, "state": s.health.value, "error": s.error, "gpus": _rows(s)} for s in snaps
    ]
    for node, snap in zip(doc, snaps):
        if amd_only_reason(snap.source):  # NVIDIA: its GPUs (MIG instances included) but no modes to switch
            node["note"] = amd_only_reason(snap.source)
    if args.json:
        print(json.dumps({"nodes": doc}, indent=2))
    else:
        for node in doc:
            print(f"{node['name']}  {node['state'].upper()}  {node['error'] or ''}".rstrip())
            if node.get("note"):
                print(f"  {node['note']}")
            for g in node["gpus"]:
                caps = "/".join(g["memory_caps"]) or "?"
                print(
                    f"  GPU {g['physical']}  {g['compute_partition'] or '?'}/{g['memory_partition'] or '?'}"
                    f"  {g['logical_gpus']} logical  (memory modes {caps})  {g['model'] or ''}"
                )
    return common.EXIT_OK if all(s.health == NodeHealth.LIVE for s in snaps) else common.EXIT_FAILED


def _confirm(question: str, ask: Callable[[str], str]) -> bool:
    return ask(f"{question} [y/N] ").strip().lower() in ("y", "yes")


async def _set(args, profile: Profile, ask: Callable[[str], str] | None) -> int:
    from console.cli.history_arg import command_history

    history = command_history(profile=profile)  # only events: written even when the store is down
    try:
        return await _set_on(args, profile, ask, history)
    finally:
        history.close()


async def _set_on(args, profile: Profile, ask: Callable[[str], str] | None, history: History) -> int:
    async with Selection(profile, history) as sel:
        node = sel.node(args.node)  # --node is required
        if not args.compute and not args.memory:
            raise common.UsageError("nothing to set: give --compute and/or --memory")
        try:
            switched = await _switch(args, sel, node, ask)
        except PartitionRefused as exc:
            for reason in exc.reasons:
                common.say_error(f"{node.name}: refused: {reason}")
            return common.EXIT_FAILED
    if switched is None:
        return common.EXIT_FAILED
    result, chosen = switched
    _record_switch(history, node.name, chosen, args.compute, args.memory)
    if args.json:
        print(
            json.dumps(
                {
                    "node": node.name,
                    "summary": result.summary,
                    "seconds": result.seconds,
                    "logical_gpus": result.logical_gpus,
                    "gpus": list(result.gpus),
                    "unverified": list(result.unverified),
                },
                indent=2,
            )
        )
    else:
        modes = sorted(
            {f"{g['compute_partition']}/{g['memory_partition']}" for g in result.gpus if g["physical"] in chosen}
        )
        print(
            f"{node.name}: now {', '.join(modes)}, {result.logical_gpus} logical GPUs ({result.verification()}, {result.seconds:.1f} s)"
        )
    return common.EXIT_OK


def _record_switch(history: History, node: str, physical: list[int], compute: str | None, memory: str | None) -> None:
    """The switch on the fleet's timeline, as the TUI records it: in the store, or in the data
    folder's events.jsonl while the store cannot be opened (moved in when it can); a timeline
    that cannot be written is said once and the switch stands."""
    from console.core.events import partition_event
    from console.services.results import StoreError

    try:
        history.events.append(partition_event(time.time(), node, physical, compute, memory))
    except (OSError, StoreError) as exc:
        common.say_error(f"warning: the switch was not written to the event log: {exc}")


async def _switch(
    args, sel: Selection, node: NodeSpec, ask: Callable[[str], str] | None
) -> tuple[SwitchResult, list[int]] | None:
    """Check, confirm and switch: the result and the physical GPUs switched, or None when the user said no."""
    service = PartitionService(sel.pool)
    snapshot = await sample_node(sel.pool, node, probe=True)
    chosen = parse_physical(args.gpus, [p.physical for p in physical_gpus(snapshot)])
    if isinstance(chosen, str):
        raise common.UsageError(chosen)
    reasons, summary = await service.check(node, snapshot, chosen, compute=args.compute, memory=args.memory)
    say = (lambda *_: None) if args.json else print
    say(f"{node.name}: {summary}")
    if reasons:
        raise PartitionRefused(reasons)
    if not args.yes:
        if ask is None:
            raise common.UsageError("confirmation needed: run in a terminal or pass --yes")
        if not _confirm("Switch now?", ask):
            say("cancelled")
            return None
    reload_ok = args.reload_driver
    if args.memory and not reload_ok:
        if ask is None or args.yes:
            raise common.UsageError("a memory partition change reloads the amdgpu driver: add --reload-driver")
        reload_ok = _confirm("This reloads the amdgpu driver and stops all GPU work on the node. Go on?", ask)
        if not reload_ok:
            say("cancelled")
            return None
    say("switching… (the GPUs are re-enumerated afterwards)")
    result = await service.switch(
        node, snapshot, chosen, compute=args.compute, memory=args.memory, reload_confirmed=reload_ok
    )
    return result, chosen


def run(args: argparse.Namespace) -> int:
    ask = input if sys.stdin.isatty() else None

    async def action(args: argparse.Namespace, profile: Profile) -> int:
        return await (_show(args, profile) if args.partition_command == "show" else _set(args, profile, ask))

    return common.run_command(args, action, failures=(PartitionFailed, TransportError))
