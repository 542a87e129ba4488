"""`rocm-console models list|pull|pulls|rm`: the models on each node, pulled and removed there.

Per node: each model in its Hugging Face cache (read by huggingface_hub's scanner on the
node) and the profile's model_dirs, its size, revision, complete or not, the instances that
use it, and the free space. `pull` starts huggingface_hub's downloader detached under the
node's supervisor and follows its progress (Ctrl-C leaves it running; `pull` again or `pulls`
re-attaches); `rm` deletes a model from the cache with huggingface_hub's delete strategy.

Every pull is kept in the history (the store, docs/store.md): `pull` writes its row when it
starts and when it ends; `pulls` asks the nodes for theirs (a detached pull that ended
meanwhile is updated), then lists the stored pulls, newest first, one line each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_actions,
    add_command_options,
    positive_int,
    run_command,
    say_error,
)
from console.cli.selection import Selection
from console.core.model import NodeSpec, Profile
from console.core.text import printable

if TYPE_CHECKING:
    from console.core.store.pulls import PullRecord
    from console.services.models import PullStatus

PULLS_PAGE = 50  # `models pulls` without --limit: the newest fifty


def add_parser(sub) -> list[argparse.ArgumentParser]:
    models_sub = add_actions(sub, "models", help="the models on the nodes: size, revision, complete, used by")
    lst = models_sub.add_parser("list", help="the models in each node's Hugging Face cache")
    lst.add_argument("--node", action="append", metavar="NAME", help="only this node (repeatable)")
    pull = models_sub.add_parser("pull", help="pull a model onto a node (detached; resumable)")
    pull.add_argument("model", help="a hub repo id, e.g. amd/Llama-3.1-8B-Instruct-FP8-KV")
    pull.add_argument("--node", required=True, metavar="NAME")
    pull.add_argument("--revision", default=None, help="a branch, tag or commit (default: main)")
    pull.add_argument("--exclude", action="append", default=[], metavar="GLOB", help='e.g. "original/*" (repeatable)')
    pull.add_argument("--to", default=None, metavar="DIR", help="a plain folder on the node instead of the cache")
    pull.add_argument("--detach", action="store_true", help="start it and return; `models pulls` shows it")
    pull.add_argument("--cancel", action="store_true", help="stop the running pull (pull again to resume)")
    pulls = models_sub.add_parser("pulls", help="the pulls of models onto the nodes, newest first (from the history)")
    pulls.add_argument("--node", action="append", metavar="NAME", help="only this node (repeatable)")
    pulls.add_argument(
        "--since", metavar="WHEN", help="only pulls started since a date (2026-11-21) or for a time (7d)"
    )
    pulls.add_argument("--limit", type=positive_int, metavar="N", help=f"the newest N pulls (default {PULLS_PAGE})")
    rm = models_sub.add_parser("rm", help="delete a model from a node's Hugging Face cache")
    rm.add_argument("model")
    rm.add_argument("--node", required=True, metavar="NAME")
    rm.add_argument("--revision", default=None, help="only this revision")
    rm.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parsers = [lst, pull, pulls, rm]
    add_command_options(parsers)
    return parsers


def _size(n: int) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


async def _list(args: argparse.Namespace, profile: Profile) -> int:
    from console.services.models import NodeModels, node_models, settings_for

    async with Selection(profile) as sel:
        nodes = sel.nodes(args.node)

        async def one(node: NodeSpec) -> NodeModels:
            try:
                views = await sel.instances.list(node)
            except Exception:  # the models are still worth showing without their users
                views = []
            return await node_models(sel.pool, node, views, settings_for(node, profile.models))

        results = await asyncio.gather(*(one(n) for n in nodes), return_exceptions=True)
    answers, failed = _answers(nodes, results)
    found: list[NodeModels] = answers
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


async def _pull(args: argparse.Namespace, profile: Profile) -> int:
    import sys

    from console.services.models import ModelsError, follow_pull, settings_for, start_pull

    async with Selection(profile) as sel:
        node = sel.node(args.node)
        settings = settings_for(node, profile.models)
        try:
            status = await start_pull(
                sel.pool,
                node,
                args.model,
                revision=args.revision,
                exclude=args.exclude,
                to=args.to,
                settings=settings,
                cancel=args.cancel,
                history=sel.history,  # the pull's row: written when it starts and when it ends
            )
        except ModelsError as exc:
            if args.cancel:  # W2: no pull of it on the node: nothing was cancelled
                say_error(str(exc))
                return EXIT_FAILED
            raise UsageError(str(exc)) from None  # missing, gated, a wrong token, no space: bad input
        if args.cancel:
            if args.json:
                print(json.dumps(status.as_dict()))
            elif status.cancelled:
                print(printable(f"{node.name}: {args.model}: pull cancelled at {status.progress_text()}"))
            else:  # W2: a pull that had already failed, finished or stopped is not "cancelled"
                say_error(status.not_cancelled())
            return EXIT_OK if status.cancelled else EXIT_FAILED
        if not args.json:
            how = "already running, following it" if status.attached else "started"
            print(
                printable(f"{node.name}: pull of {args.model} {how} (revision {(status.revision or '-')[:12]})"),
                flush=True,
            )
        shown: list[str] = []
        if args.detach or status.state != "running":
            final = status
        else:
            tty = sys.stdout.isatty()

            def show(s: PullStatus) -> None:
                if args.json:
                    return
                text = printable(s.line())
                shown.append(text)
                print(f"\r{text}\033[K" if tty else text, end="" if tty else "\n", flush=True)

            try:
                final = await follow_pull(sel.pool, node, args.model, show, settings=settings, history=sel.history)
            except (KeyboardInterrupt, asyncio.CancelledError):
                print(f"\n{node.name}: the pull goes on; `rocm-console models pulls --node {node.name}` shows it")
                return EXIT_OK
            if tty and not args.json:
                print()
    if args.json:
        print(json.dumps(final.as_dict()))
    elif final is status or (shown and shown[-1] != printable(final.line())):
        print(printable(final.line()))
    return EXIT_OK if final.state in ("done", "running") else EXIT_FAILED


def _since(text: str | None) -> float | None:
    from console.core.events import parse_since

    if text is None:
        return None
    try:
        return parse_since(text)
    except ValueError as exc:
        raise UsageError(f"--since {exc}") from None


async def _pulls(args: argparse.Namespace, profile: Profile) -> int:
    """The nodes' pulls recorded in the history (a pull that ended since it was last seen is
    updated), then the history's, newest first; the running ones with the nodes' progress."""
    import sys

    from console.services.models import node_pulls, settings_for
    from console.services.results import StoreError

    since = _since(args.since)
    limit = args.limit or PULLS_PAGE
    async with Selection(profile) as sel:
        nodes = sel.nodes(args.node)
        history = sel.history
        results = await asyncio.gather(
            *(node_pulls(sel.pool, n, settings_for(n, profile.models), history=history) for n in nodes),
            return_exceptions=True,
        )
        answers, failed = _answers(nodes, results)
        live = [p for pulls in answers for p in pulls]
        try:
            stored = await asyncio.to_thread(
                lambda: history.pulls.list(
                    node=[n.name for n in nodes] if args.node else None, since=since, limit=limit + 1
                )
            )
        except StoreError as exc:  # the history is unavailable: what the nodes say now, and why
            return _live_only(args, live, failed, str(exc))
    more, stored = len(stored) > limit, stored[:limit]
    running = {_live_id(p): p for p in live if p.state == "running"}
    if args.json:
        print(json.dumps({"pulls": [_pull_dict(r, running.get(r.id)) for r in stored]}, indent=2))
    else:
        if stored:
            print(f"{'STARTED':<16}  {'NODE':<14}  {'MODEL':<40}  {'STATE':<9}  {'BYTES':<24}  {'TOOK':<12}  FROM")
        for r in stored:
            print(printable(_pull_line(r, running.get(r.id))))
        if not stored:
            print(f"no pulls{' match' if args.since or args.node else ''} ({history.where})")
    if more:
        print(f"rocm-console: the newest {limit} pulls shown; --limit N shows more", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _live_id(p: PullStatus) -> str | None:
    from console.core.store.pulls import pull_id

    return pull_id(p.node, p.model, p.started) if p.started is not None else None


def _live_only(args: argparse.Namespace, live: list[PullStatus], failed: bool, problem: str) -> int:
    if args.json:
        print(json.dumps({"pulls": [p.as_dict() for p in live], "history": problem}, indent=2))
    else:
        for p in live:
            print(printable(p.line()))
    say_error(f"{problem} (the nodes' pulls now shown, not the history)")
    return EXIT_FAILED


def _took(r: PullRecord) -> str:
    from console.services.models import duration_text

    return duration_text(r.ended - r.started) if r.ended is not None and r.ended >= r.started else "-"


def _pull_bytes(r: PullRecord, now: PullStatus | None) -> str:
    from console.services.models import size_text

    if now is not None:  # running: the node's progress now
        return now.progress_text()
    if r.state == "ok":
        return size_text(r.total_bytes or r.bytes)
    return f"{size_text(r.bytes)} of {size_text(r.total_bytes)}"


def _pull_line(r: PullRecord, now: PullStatus | None) -> str:
    import time

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started))
    line = (
        f"{when:<16}  {r.node:<14}  {r.model:<40}  {r.state:<9}  {_pull_bytes(r, now):<24}  {_took(r):<12}  "
        f"{r.origin or '-'}"
    )
    return f"{line}  {r.message}" if r.message else line


def _pull_dict(r: PullRecord, now: PullStatus | None) -> dict[str, Any]:
    doc = r.to_dict()
    if now is not None:
        doc.update(bytes=now.bytes, rate=now.rate, eta=now.eta, pid=now.pid)
    return doc


async def _rm(args: argparse.Namespace, profile: Profile) -> int:
    import sys

    from console.services.models import remove_model, settings_for, size_text

    async with Selection(profile) as sel:
        node = sel.node(args.node)
        views = await sel.instances.list(node)
        if not args.yes:
            if not sys.stdin.isatty():
                raise UsageError("confirmation needed: run in a terminal or pass --yes")
            answer = input(f"Delete {args.model} from {node.name}'s Hugging Face cache? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("cancelled")
                return EXIT_OK
        revisions, freed = await remove_model(
            sel.pool, node, args.model, views, revision=args.revision, settings=settings_for(node, profile.models)
        )
    if args.json:
        print(json.dumps({"node": node.name, "model": args.model, "revisions": revisions, "freed_bytes": freed}))
    else:
        print(printable(f"{node.name}: removed {args.model} ({len(revisions)} revision(s), {size_text(freed)} freed)"))
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from console.services.models import ModelsError
    from console.services.results import StoreError
    from console.transport.base import TransportError

    handler = {"list": _list, "pull": _pull, "pulls": _pulls, "rm": _rm}[args.models_command]
    return run_command(args, handler, failures=(ModelsError, TransportError, StoreError))


def _answers(nodes: Sequence[NodeSpec], results: Sequence[Any]) -> tuple[list[Any], bool]:
    """Each node's answer of a gather(return_exceptions=True); a node that failed is said in
    one line naming it, and reported as `failed`."""
    answers, failed = [], False
    for node, res in zip(nodes, results):
        if isinstance(res, BaseException):
            failed = True
            say_error(res if str(res).startswith(node.name) else f"{node.name}: {res}")
        else:
            answers.append(res)
    return answers, failed
