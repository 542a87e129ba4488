"""The replica-group halves of `serve start --replicas`, `serve stop --group` and `bench run
--group` (serve.py and bench.py hand those over here). A group starts the one way every group
does (GroupService.launch: the experiment runner's layouts too)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from console.cli.common import EXIT_FAILED, EXIT_OK, UsageError, say_error
from console.cli.history_arg import run_store
from console.cli.inputs import bench_inputs, concurrency_points, parse_gpus, serve_inputs, wait_timeout
from console.cli.selection import Selection
from console.core.model import NodeSpec, Profile
from console.core.replicas import DEFAULT_BASE_PORT, GroupPlan, ReplicaPlanError, parse_replicas
from console.services.groups import GroupError, GroupPlanError, GroupView
from console.services.instances import InstanceState, InstanceView
from console.services.runs.group import GroupBenchRunner, format_group_outcome
from console.services.runs.outcome import RunRecorder
from console.services.runs.serving import BenchProgressed


def _group_line(g: GroupView) -> str:
    return f"group {g.summary()}"


def _replica_line(v: InstanceView) -> str:
    gpus = ",".join(map(str, v.gpus)) or "-"
    detail = v.reason or v.stage or ""
    return f"  {v.name:<30} {v.node:<14} {v.state.value:<9} gpus {gpus:<8} port {v.port or '-':<6} {detail}".rstrip()


def _group_dict(group: GroupView, **more: object) -> str:
    return json.dumps({"group": group.name, **more, "replicas": [v.as_dict() for v in group.replicas]}, indent=1)


def _nodes(sel: Selection, args: argparse.Namespace) -> list[NodeSpec]:
    """A group's nodes: --nodes a,b, else --node (or the profile's only node)."""
    return sel.node_list(args.nodes) if getattr(args, "nodes", None) else [sel.node(args.node)]


async def serve_group_start(args: argparse.Namespace, profile: Profile, preset) -> int:
    """`serve start --replicas N|per-gpu`: plan, start every replica, and with --wait wait for all."""
    async with Selection(profile) as sel:
        nodes = _nodes(sel, args)
        try:
            replicas = parse_replicas(args.replicas)
        except ReplicaPlanError as exc:
            raise UsageError(str(exc)) from None
        gpus = parse_gpus(args.gpus)
        tp, overrides, env = serve_inputs(args)
        shown = [""]

        def planned(plan: GroupPlan) -> None:
            if not args.json:
                print(f"group {plan.group}: {len(plan.replicas)} replicas of {preset.name} (TP {plan.tp})", flush=True)

        def started(v: InstanceView) -> None:
            if not args.json:
                print(_replica_line(v), flush=True)

        def update(g: GroupView) -> None:
            line = _group_line(g)
            if not args.json and line != shown[0]:
                shown[0] = line
                print(f"  {line}", flush=True)

        try:
            group = await sel.groups.launch(
                nodes,
                preset,
                replicas,
                tp=tp,
                gpus=gpus,
                group=args.group or args.name,
                # --port with --replicas: the first port tried (each replica takes the next free one)
                base_port=args.port or preset.port or DEFAULT_BASE_PORT,
                overrides=overrides,
                extra_env=env,
                extra_args=args.arg,
                per_gpu=args.per_gpu or 1,
                on_planned=planned,
                on_started=started,
                ready_timeout=wait_timeout(args) if args.wait else None,
                on_update=update,
            )
        except GroupPlanError as exc:
            raise UsageError(str(exc)) from None
    if args.wait and not args.json:
        for v in group.failed:
            print(f"  {v.name}: failed — {v.reason}", flush=True)
    if args.json:
        print(_group_dict(group, ready=group.ready, total=group.total))
    else:
        print(_group_line(group))
    return EXIT_FAILED if group.failed else EXIT_OK


async def serve_group_stop(args: argparse.Namespace, profile: Profile) -> int:
    async with Selection(profile) as sel:
        nodes = sel.nodes(args.node)
        try:
            group = await sel.groups.stop(nodes, args.group)
        except GroupError as exc:
            raise UsageError(str(exc)) from None
    if args.json:
        print(_group_dict(group))
    else:
        for v in group.replicas:
            print(_replica_line(v))
        stopped = sum(1 for v in group.replicas if v.state == InstanceState.STOPPED)
        print(f"group {group.name}: stopped {stopped} of {group.total}")
    return EXIT_OK


async def bench_group_run(args: argparse.Namespace, profile: Profile, keep: bool) -> int:
    """`bench run --group`: one client per replica; the group's and each replica's results stored
    through the Selection's History (the command's one: its events and its runs, one opening)."""
    async with Selection(profile) as sel:
        store = run_store(sel.history) if keep else None  # opened when the first result is stored
        nodes = sel.nodes(args.node)
        preset, overrides, env = bench_inputs(args, profile)
        (concurrency,) = concurrency_points(args, profile)  # --concurrency, else the (overridden) preset's first
        group = await sel.group(nodes, args.group)
        # a busy server can miss one /health call (3 s): ask again before calling a running replica not ready
        for _ in range(5):
            if all(v.state != InstanceState.STARTING and v.state != InstanceState.LOADING for v in group.replicas):
                break
            await asyncio.sleep(2.0)
            group = await sel.groups.get(nodes, args.group, checked=True) or group
        if not args.json:
            print(
                f"group {group.summary()}: one client per ready replica"
                if not args.url
                else f"group {group.name}: one client against {args.url}",
                flush=True,
            )
        progress: dict[str, tuple[int, int]] = {}
        last = [0.0]

        def on_event(replica: str, event) -> None:
            # the followed clients' tqdm counts, summed: one line every few seconds
            if args.json or not isinstance(event, BenchProgressed) or event.progress.phase != "main":
                return
            progress[replica] = (event.progress.n, event.progress.total)
            now = time.monotonic()
            if now - last[0] >= 2.0:
                last[0] = now
                parts = "  ".join(f"{r.rsplit('-', 1)[-1]} {n}/{t}" for r, (n, t) in sorted(progress.items()))
                done = sum(n for n, _ in progress.values())
                total = sum(t for _, t in progress.values())
                print(f"  {done}/{total} requests  ({parts})", flush=True)

        outcome = await GroupBenchRunner(sel.pool).run(
            nodes,
            group,
            preset,
            overrides=overrides,
            concurrency=concurrency,
            url=args.url,
            extra_env=env,
            on_event=on_event,
        )
        # runs/outcome.py stores it, as the TUI's group screen does; inside the Selection, whose
        # History and links are still open (after it, the store would be opened a second time)
        recorded = await RunRecorder(sel.pool, store).group(outcome, group, preset, label=args.label)
    stored, unstored = list(recorded.ids), recorded.line
    if args.json:
        print(
            json.dumps(
                {
                    "group": outcome.group,
                    "stored": stored,
                    "ok": outcome.ok,
                    "reason": outcome.reason,
                    "result": outcome.result.as_result_json() if outcome.result else None,
                    "replicas": [o.result_json for o in outcome.outcomes],
                },
                indent=1,
            )
        )
    else:
        print(format_group_outcome(outcome))
        if stored:
            print(f"  stored as {stored[-1]} (the group), with {len(stored) - 1} replica results")
    if unstored:
        say_error(unstored)
    return EXIT_OK if outcome.ok and not unstored else EXIT_FAILED
