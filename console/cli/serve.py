"""`rocm-console serve start|list|stop|logs`: vLLM instances from scripts."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from dataclasses import replace
from typing import Sequence

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_actions,
    add_command_options,
    port_arg,
    positive_int,
    positive_seconds,
    run_command,
    say_error,
)
from console.cli.inputs import WAIT_TIMEOUT, parse_gpus, serve_inputs, wait_timeout
from console.cli.selection import Selection
from console.core.model import NodeSpec, Profile
from console.core.multinode import is_multinode
from console.core.serve.argv import api_key_from, redact
from console.core.status_view import health_refusal
from console.core.text import printable
from console.services.instances import (
    ENDED,
    InstanceError,
    InstanceState,
    InstanceView,
    place_unmanaged,
    since,
)
from console.services.multinode import STAGE_RAY_UP, MultiNodeService
from console.services.status import sample_node
from console.transport.base import TransportError


def add_parser(sub) -> list[argparse.ArgumentParser]:
    serve_sub = add_actions(sub, "serve", help="start, list, stop and read vLLM instances on the nodes")
    start = serve_sub.add_parser("start", help="start a serve preset on chosen GPUs")
    start.add_argument("--node", metavar="NAME", help="node (needed when the profile has several)")
    start.add_argument(
        "--nodes",
        metavar="LIST",
        help="several nodes, e.g. a,b: a multi-node instance on Ray (head first), or with --replicas the group's nodes",
    )
    start.add_argument("--preset", required=True, metavar="NAME", help="serve preset name")
    start.add_argument("--gpus", metavar="LIST", help="logical GPU indices, e.g. 0,1 (default: the first free ones)")
    start.add_argument(
        "--port", type=port_arg, help="port on the node (default: the preset's, or the first free from 8000)"
    )
    start.add_argument("--name", help="instance name (default: preset-gGPUS)")
    start.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a serve flag, e.g. max_model_len=4096 (repeatable)",
    )
    start.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra environment (repeatable)")
    start.add_argument(
        "--arg", action="append", default=[], metavar="ARG", help="extra argument for vllm serve (repeatable)"
    )
    start.add_argument("--wait", action="store_true", help="wait until ready (exit 0) or failed (exit 1)")
    start.add_argument("--timeout", type=positive_seconds, help=f"seconds --wait waits (default {WAIT_TIMEOUT:g})")
    start.add_argument(
        "--replicas",
        metavar="N|per-gpu",
        help="a replica group: N copies of the preset (or one per free GPU / TP group), named GROUP-r0, GROUP-r1, ...",
    )
    start.add_argument("--group", metavar="NAME", help="the group's name with --replicas (default: PRESET-xN)")
    start.add_argument(
        "--per-gpu", type=positive_int, metavar="K", help="with --replicas: K replicas share each GPU (packing)"
    )
    start.add_argument(
        "--force",
        action="store_true",
        help="start even on a GPU in fail health (uncorrectable ECC, pending bad pages: see `rocm-console doctor`)",
    )
    lst = serve_sub.add_parser("list", help="every instance on the nodes, with its state")
    lst.add_argument("--node", action="append", metavar="NAME")
    stop = serve_sub.add_parser("stop", help="stop an instance (SIGINT, then SIGTERM, then SIGKILL)")
    stop.add_argument("name", nargs="?")
    stop.add_argument("--group", metavar="NAME", help="stop every replica of a group instead")
    stop.add_argument("--node", metavar="NAME")
    logs = serve_sub.add_parser("logs", help="an instance's log")
    logs.add_argument("name")
    logs.add_argument("--node", metavar="NAME")
    logs.add_argument("--follow", "-f", action="store_true")
    logs.add_argument("--lines", "-n", type=positive_int, default=None, metavar="N", help="only the last N lines")
    from console.cli.plan import add_plan_parser  # `serve plan` (issue Q)

    parsers = [start, lst, stop, logs, add_plan_parser(serve_sub)]
    add_command_options(parsers)
    return parsers


def view_line(v: InstanceView) -> str:
    gpus = ",".join(map(str, v.gpus)) or "-"
    detail = v.reason or v.stage_detail or v.stage or ""
    return (
        f"{v.node:<14} {v.name:<28} {v.state.value:<9} gpus {gpus:<8} port {v.port or '-':<6} "
        f"pid {v.pid or '-':<8} {since(v.started):>7}  {v.model or ''}  {detail}"
    ).rstrip()


def _print_views(views: Sequence[InstanceView], as_json: bool, fits: dict | None = None) -> None:
    if as_json:
        fits = fits or {}
        rows = [_redacted(v.as_dict()) | {"fit": fits.get((v.node, v.name, v.started))} for v in views]
        print(json.dumps({"instances": rows}, indent=2))
    elif not views:
        print("no instances")
    else:
        for v in views:
            print(printable(view_line(v)))  # model names, stages and errors come from the node


def _redacted(d: dict) -> dict:
    d["argv"] = list(redact(d.get("argv") or []))
    return d


async def _start(args: argparse.Namespace, profile: Profile) -> int:
    preset = next((p for p in profile.serve_presets if p.name == args.preset), None)
    if preset is None:
        names = ", ".join(p.name for p in profile.serve_presets) or "none"
        raise UsageError(f"unknown serve preset {args.preset!r} (known: {names})")
    tp, overrides, env = serve_inputs(args)
    if preset.api_key_env:  # before any node is asked: the instance would start without its key
        try:
            api_key_from(preset.api_key_env, os.environ, f"preset {preset.name}")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.replicas is not None:  # a replica group: console/cli/groups.py
        from console.cli.groups import serve_group_start

        return await serve_group_start(args, profile, preset)
    if args.group:
        raise UsageError("--group names a group of --replicas")
    if args.per_gpu:
        raise UsageError("--per-gpu packs the replicas of --replicas: add --replicas N")
    if tp is not None:
        preset = replace(preset, tp=tp)
    if args.nodes or preset.nodes:
        return await _start_multinode(args, profile, preset)
    if is_multinode(preset):  # pp/dp would be dropped by a one-node start
        raise UsageError(
            f"preset {preset.name} spans several nodes (TP {preset.tp} × PP {preset.pp} × DP {preset.dp}): "
            "name them with --nodes a,b (head first)"
        )
    async with Selection(profile) as sel:
        return await _start_one(args, sel, preset, overrides, env)


async def _start_one(args: argparse.Namespace, sel: Selection, preset, overrides, env) -> int:
    node = sel.node(args.node)
    gpus = parse_gpus(args.gpus)
    service = sel.instances
    # the probe gives the vLLM version; the health read lets the start refuse a GPU in fail health
    snapshot = await sample_node(sel.pool, node, probe=True, health=_health_rules(sel.profile))
    if gpus is None:
        gpus = _free_gpus(snapshot, await service.list(node), preset.tp, force=args.force)
    from console.services.models import serve_preflight, settings_for  # issue Q: the weights must be there

    models = settings_for(node, sel.profile.models)
    if preset.runtime == "host" and not args.force:  # --force: let vLLM fetch it itself
        refusal = await serve_preflight(sel.pool, node, preset.model, models)
        if refusal:
            raise UsageError(refusal)
    view = await service.start(
        node,
        preset,
        gpus=gpus,
        snapshot=snapshot,
        port=args.port,
        name=args.name,
        overrides=overrides,
        extra_env=env,
        extra_args=args.arg,
        force=args.force,
        max_packing_sum=models.max_packing_sum,
    )
    for warning in view.warnings:
        say_error(f"warning: {warning}")
    from console.services.models import record_start  # the fit's prediction, kept beside vLLM's figures

    await record_start(sel.pool, node, view, snapshot, {**dict(preset.env), **env})
    if not args.json:
        print(
            f"started {view.name} on {node.name} gpus {','.join(map(str, view.gpus))} port {view.port} (pid {view.pid})",
            flush=True,
        )
    if args.wait:
        shown: set[tuple] = set()

        def progress(v: InstanceView) -> None:
            key = (v.stage, v.stage_detail)
            if not args.json and v.stage and key not in shown:
                shown.add(key)
                print(f"  {v.stage}: {v.stage_detail or ''}".rstrip(), flush=True)

        view = await service.wait_ready(node, view.name, timeout=wait_timeout(args), on_update=progress)
    return _started(args, view)


def _health_rules(profile: Profile):
    """The profile's [health] rules (docs/health.md): what fail means at the preflight."""
    from console.core.health_profile import health_settings

    return health_settings(profile).rules


def _started(args: argparse.Namespace, view: InstanceView) -> int:
    """The end of a start: its state after --wait, or the instance as JSON; exit 1 when it failed."""
    if args.wait and not args.json:
        print(f"{view.name}: {view.state.value}" + (f" — {view.reason}" if view.reason else ""))
    if args.json:
        print(json.dumps(_redacted(view.as_dict()), indent=2))
    return EXIT_FAILED if view.state == InstanceState.FAILED else EXIT_OK


# ---------------------------------------------------------------- multi-node (services/multinode.py)


def _multinode_nodes(sel: Selection, names: Sequence[str]) -> list[NodeSpec]:
    nodes = sel.nodes(list(names))
    if len(nodes) < 2:
        raise UsageError(f"--nodes {','.join(names)}: a multi-node instance needs 2 nodes or more")
    return nodes


async def _start_multinode(args: argparse.Namespace, profile: Profile, preset) -> int:
    names = [n.strip() for n in (args.nodes or "").split(",") if n.strip()] or list(preset.nodes)
    if args.gpus is not None:
        raise UsageError("--gpus is for one node; a multi-node instance takes the GPUs of each node")
    async with Selection(profile) as sel:
        nodes = _multinode_nodes(sel, names)
        service = MultiNodeService(sel.instances)

        def stage(name: str, detail: str) -> None:
            if not args.json:
                print(f"  {detail if name == STAGE_RAY_UP else name + ': ' + detail}", flush=True)

        _, overrides, env = serve_inputs(args)
        snaps = await asyncio.gather(*(sample_node(sel.pool, n, probe=True) for n in nodes))
        view = await service.start(
            nodes,
            preset,
            snapshots={n.name: s for n, s in zip(nodes, snaps)},
            port=args.port,
            name=args.name,
            overrides=overrides,
            extra_env=env,
            extra_args=args.arg,
            on_stage=stage,
        )
        if not args.json:
            print(f"started {view.name} on {','.join(view.nodes)} (head {nodes[0].name}, port {view.port})", flush=True)
        if args.wait:
            view = await service.instances.wait_ready(nodes[0], view.name, timeout=wait_timeout(args))
            if view.state != InstanceState.READY:  # a lost Ray node says more than vLLM's exit
                view = await service.status(nodes, view.name) or view
    return _started(args, view)


def _merge_multinode(views: Sequence[InstanceView]) -> list[InstanceView]:
    """One line per multi-node instance: the head's row, naming every node."""
    out: list[InstanceView] = []
    seen: set[tuple] = set()
    for v in views:
        if v.nodes:
            key = (v.name, v.nodes)
            if key in seen:
                continue
            seen.add(key)
            rows = [h for h in views if h.nodes == v.nodes and h.name == v.name]
            head = next((h for h in rows if h.node == v.nodes[0]), v)
            lost = next((w for w in rows if w is not head and w.state == InstanceState.FAILED), None)
            if lost is not None and head.state not in (InstanceState.FAILED, InstanceState.EXITED):
                head = replace(head, state=InstanceState.FAILED, reason=lost.reason or f"node {lost.node}: Ray exited")
            v = replace(head, node="+".join(v.nodes))
        out.append(v)
    return out


def _free_gpus(snapshot, views, tp: int, *, force: bool = False) -> list[int]:
    busy = {g for v in views if v.state not in ENDED for g in v.gpus}
    free = [g.index for g in snapshot.static if g.index not in busy]
    # GPUs in fail health are not chosen for the user (named with --gpus they are refused, or --force)
    well = free if force else [g for g in free if not health_refusal(snapshot, [g])]
    if len(well) < tp:
        sick = len(free) - len(well)
        why = f" ({sick} more in fail health: `rocm-console doctor`; --force to use them)" if sick else ""
        raise InstanceError(f"{snapshot.name}: TP {tp} needs {tp} free GPUs, {len(well)} free{why}")
    return well[:tp]


async def _list(args: argparse.Namespace, profile: Profile) -> int:
    views: list[InstanceView] = []
    failed = False
    async with Selection(profile) as sel:
        nodes = sel.nodes(args.node)

        async def one(node: NodeSpec) -> list[InstanceView]:
            views = await sel.instances.list_checked(node)
            if any(v.state == InstanceState.UNMANAGED for v in views):
                views = place_unmanaged(views, await sample_node(sel.pool, node, probe=False))
            return views

        results = await asyncio.gather(*(one(n) for n in nodes), return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                failed = True
                say_error(res)
            else:
                views.extend(res)
        fits = await _fits(sel, nodes, views) if args.json else None
    _print_views(_merge_multinode(views), args.json, fits)
    return EXIT_FAILED if failed else EXIT_OK


async def _fits(sel: Selection, nodes: Sequence[NodeSpec], views: Sequence[InstanceView]) -> dict:
    """(node, name, started) -> the fit's prediction beside vLLM's logged figures (issue Q)."""
    from console.services.models import FitPairs, fit_entry, refresh_logged

    store = FitPairs()
    for node in nodes:
        await refresh_logged(sel.instances, node, [v for v in views if v.node == node.name], store)
    return {key: fit_entry(pair) for key, pair in store.pairs().items()}


async def _stop(args: argparse.Namespace, profile: Profile) -> int:
    if args.group:
        if args.name:
            raise UsageError("give an instance name or --group, not both")
        from console.cli.groups import serve_group_stop

        return await serve_group_stop(args, profile)
    if not args.name:
        raise UsageError("serve stop needs an instance name (or --group NAME)")
    async with Selection(profile) as sel:
        node = sel.node(args.node)
        # the node's supervisor would answer with an empty record: say it plainly
        found = await sel.instance(node, args.name)
        if found.state == InstanceState.UNMANAGED:
            raise InstanceError(f"{node.name}: {args.name} was not started by the console; end it on the node")
        if found.state in ENDED:
            view = found
        elif found.nodes:  # a multi-node instance: vLLM, then Ray on every node
            view = await MultiNodeService(sel.instances).stop(_multinode_nodes(sel, found.nodes), args.name)
        else:
            view = await sel.instances.stop(node, args.name)
    still = view.state not in ENDED
    if args.json:
        print(json.dumps(_redacted(view.as_dict()), indent=2))
    elif found.state in ENDED:
        print(f"{view.name}: already {view.state.value}" + (f", {view.reason}" if view.reason else ""))
    elif not still:
        print(f"{view.name}: {view.state.value}" + (f", {view.reason}" if view.reason else ""))
    if still:  # the node could not end it
        say_error(f"{node.name}: {view.name} is still {view.state.value} after SIGINT, SIGTERM and SIGKILL")
        return EXIT_FAILED
    return EXIT_OK


async def _logs(args: argparse.Namespace, profile: Profile) -> int:
    async with Selection(profile) as sel:
        node = sel.node(args.node)
        found = await sel.instance(node, args.name)
        if found.nodes and found.nodes[0] != node.name:  # a multi-node instance's log is the head's
            node = sel.node(found.nodes[0])
        collected = []
        async for line in sel.instances.log_lines(node, args.name, follow=args.follow, lines=args.lines):
            if args.json:
                collected.append(line)
            else:
                print(printable(line), flush=True)
        if args.json:
            print(json.dumps({"name": args.name, "node": node.name, "lines": collected}))
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from console.cli.plan import run_plan

    handler = {"start": _start, "list": _list, "stop": _stop, "logs": _logs, "plan": run_plan}[args.serve_command]
    return run_command(args, handler, failures=(InstanceError, TransportError))
