"""`rocm-console models list [--node N] [--json]`: the models on each node (read-only).

Per node: each model in its Hugging Face cache (read by huggingface_hub's scanner on the
node), its size, revision, complete or not, the instances that use it, and the free space of
the cache's filesystem. Pulls and removal are issue Q section 2 (not here yet).
"""

from __future__ import annotations

import argparse
import asyncio
import json

from console.cli.common import EXIT_FAILED, EXIT_OK, add_actions, add_command_options, run_command, say_error
from console.cli.selection import Selection
from console.core.model import NodeSpec, Profile
from console.core.text import printable


def add_parser(sub) -> list[argparse.ArgumentParser]:
    models_sub = add_actions(sub, "models", help="the models on the nodes: size, revision, complete, used by")
    lst = models_sub.add_parser("list", help="the models in each node's Hugging Face cache")
    lst.add_argument("--node", action="append", metavar="NAME", help="only this node (repeatable)")
    parsers = [lst]
    add_command_options(parsers)
    return parsers


def _size(n: int) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


async def _list(args: argparse.Namespace, profile: Profile) -> int:
    from console.services.models import NodeModels, node_models

    async with Selection(profile) as sel:
        nodes = sel.nodes(args.node)

        async def one(node: NodeSpec) -> NodeModels:
            try:
                views = await sel.instances.list(node)
            except Exception:  # the models are still worth showing without their users
                views = []
            return await node_models(sel.pool, node, views)

        results = await asyncio.gather(*(one(n) for n in nodes), return_exceptions=True)
    failed = False
    found: list[NodeModels] = []
    for node, res in zip(nodes, results):
        if isinstance(res, BaseException):
            failed = True
            say_error(res if str(res).startswith(node.name) else f"{node.name}: {res}")
        else:
            found.append(res)
    if args.json:
        print(json.dumps({"nodes": [n.as_dict() for n in found]}, indent=2))
        return EXIT_FAILED if failed else EXIT_OK
    for nm in found:
        space = ", ".join(f"{_size(s.free_bytes)} free of {_size(s.total_bytes)} at {s.place}" for s in nm.spaces)
        print(printable(f"{nm.node}: {len(nm.models)} model(s); {space or 'free space unknown'}"))
        for w in nm.warnings:
            print(printable(f"  warning: {w}"))
        for m in nm.models:
            state = "complete" if m.complete else f"incomplete ({m.incomplete_reason})"
            rev = (m.revision or "-")[:12]
            used = ", ".join(m.used_by) or "-"
            print(printable(f"  {m.name:<40} {_size(m.size_bytes):>9}  rev {rev:<12}  {state:<10}  used by {used}"))
    return EXIT_FAILED if failed else EXIT_OK


def run(args: argparse.Namespace) -> int:
    from console.services.models import ModelsError
    from console.transport.base import TransportError

    handler = {"list": _list}[args.models_command]
    return run_command(args, handler, failures=(ModelsError, TransportError))
