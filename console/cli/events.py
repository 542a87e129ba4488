"""`rocm-console events`: the fleet's timeline from the store, newest first.

    rocm-console events [--node N] [--since 1h] [--kind K] [--limit N] [--json]
    rocm-console events --follow [--timeout S] ...

The events live in the store (docs/store.md: the profile's `[store] url`, a team's
PostgreSQL with every console's and watcher's events, else the data folder's
store.sqlite3); the filters are answered by its indexes. No node is needed; a store
that cannot be opened is one line naming it and the reason, exit 1.  `--kind` takes a kind (`gpu.throttle_start`) or
its group (`gpu`, `node`, `instance`, `alert`).  `--follow` prints the latest events
oldest first, as `tail -f` does, then each new one as it is written, until Ctrl-C or
`--timeout` seconds; with `--json` those are JSON lines.  Bad input is one line on
stderr and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from console.cli.common import EXIT_FAILED, EXIT_OK, UsageError, add_profile_options

if TYPE_CHECKING:
    from console.core.events import Event
    from console.services.history import History, HistoryEvents

FOLLOW_POLL_S = 0.5
FOLLOW_BACKLOG = 20  # events shown before following
SHOWN = 1000  # without --limit: the newest thousand (a team's store holds millions)


def add_parser(sub) -> list[argparse.ArgumentParser]:
    events = sub.add_parser("events", help="the fleet's timeline: node, instance, GPU health and alert events")
    add_profile_options(events)  # accepted like everywhere, though events need no profile
    events.add_argument("--node", metavar="NAME", help="only events of this node")
    events.add_argument("--gpu", type=int, metavar="N", help="only events of this GPU")
    events.add_argument(
        "--since", metavar="WHEN", help="only events since a time ago (30s, 15m, 1h, 7d) or a date (2026-11-21)"
    )
    events.add_argument("--kind", metavar="KIND", help="only this kind or group (gpu, node, instance, alert, ...)")
    events.add_argument("--limit", type=int, metavar="N", help=f"at most N events, the newest (default {SHOWN})")
    events.add_argument("--json", action="store_true", help="print JSON (JSON lines with --follow)")
    events.add_argument("--follow", "-f", action="store_true", help="keep printing new events (Ctrl-C ends)")
    events.add_argument("--timeout", type=float, metavar="S", help="with --follow: stop after S seconds")
    return [events]


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _row(event: Event, origin: bool = False) -> list[str]:
    from console.core.text import printable

    cells = [
        _when(event.time),
        event.severity,
        event.kind,
        event.node or "-",
        "-" if event.gpu is None else str(event.gpu),
        event.instance or "-",
        event.message,
    ]
    if origin:
        cells.insert(-1, event.origin or "-")
    return [printable(c) for c in cells]  # the log can be edited by hand: no escape reaches the terminal


def render_table(events: Sequence[Event]) -> str:
    # FROM: which console or watcher wrote it (a team's store holds every one's timeline);
    # shown when any event says so (events moved in from an old log say nothing).
    origin = any(e.origin for e in events)
    head = ["TIME", "SEVERITY", "KIND", "NODE", "GPU", "INSTANCE", *(["FROM"] if origin else []), "MESSAGE"]
    rows = [_row(e, origin) for e in events]
    widths = [len(h) for h in head]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    widths[-1] = 0  # the message is last and not padded

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([line(head), *(line(r) for r in rows)]) + "\n"


def _check(args: argparse.Namespace) -> float | None:
    from console.core.events import KINDS, known_kind, parse_since

    if args.kind is not None and not known_kind(args.kind):
        groups = sorted({k.split(".")[0] for k in KINDS})
        raise UsageError(
            f"--kind {args.kind!r}: unknown kind (a group: {', '.join(groups)}; or one of: {', '.join(KINDS)})"
        )
    if args.gpu is not None and args.gpu < 0:
        raise UsageError(f"--gpu {args.gpu}: a GPU index is 0 or more")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: must be at least 1")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: must be more than 0 seconds")
    if args.timeout is not None and not args.follow:
        raise UsageError("--timeout only applies with --follow")
    if args.since is None:
        return None
    try:
        return parse_since(args.since)
    except ValueError as exc:
        raise UsageError(f"--since {exc}") from None


def run(args: argparse.Namespace) -> int:
    from console.cli.common import say_error
    from console.cli.history_arg import command_history, found_profile, require
    from console.services.results import StoreError

    since = _check(args)
    # --node is checked against the profile's nodes: only then is the whole profile read (a
    # broken one is exit 2 like everywhere); else its `[store] url` alone
    profile = found_profile(args) if args.node is not None else None
    history = command_history(args, profile)  # no profile read: the store of the files found
    try:
        require(history)
        _check_node(args, history.events, {n.name for n in profile.nodes} if profile is not None else set())
        if args.follow:
            return _follow(args, history, since)
        return _show(args, history, since)
    except StoreError as exc:  # cannot be opened, or went away (a server)
        say_error(exc)
        return EXIT_FAILED
    finally:
        history.close()


def _show(args: argparse.Namespace, history: History, since: float | None) -> int:
    from console.core.events import event_to_dict

    log = history.events
    limit = args.limit or SHOWN
    events = log.read(since=since, node=args.node, kind=args.kind, gpu=args.gpu, limit=limit + 1)
    more = len(events) > limit  # one more read than shown: says whether there are more
    events = events[:limit]
    _say_skipped(log)
    if args.json:
        print(json.dumps([event_to_dict(e) for e in events], indent=2))
    elif events:
        sys.stdout.write(render_table(events))
    else:
        print(f"no events{' matching the filters' if _filtered(args) else ''} in {history.where}")
    if more:
        print(
            f"rocm-console: the newest {limit} event{'s'[: limit != 1]} shown; --limit N or --since narrow or widen it",
            file=sys.stderr,
        )
    return EXIT_OK


def _check_node(args: argparse.Namespace, log: HistoryEvents, known: set[str]) -> None:
    """`--node` must name a node of the profile or one the timeline has seen (a node since
    removed keeps its history)."""
    if args.node is None or args.node in known:
        return
    if log.read(node=args.node, limit=1):
        return
    listed = ", ".join(sorted(known)) or "none in a profile"
    raise UsageError(f"--node {args.node!r}: no such node in the profile or the event log (known: {listed})")


def _say_skipped(log) -> None:
    """Bad lines (cut, hand-edited, nested too deep, too long, a time no clock shows) are
    skipped; how many is said once on stderr, so what is shown is known to be incomplete."""
    if log.bad_lines:
        from console.core.text import printable

        lines = "line" if log.bad_lines == 1 else "lines"
        print(
            f"rocm-console: events: {log.bad_lines} unreadable {lines} skipped in {printable(log.where)}",
            file=sys.stderr,
        )


def _filtered(args: argparse.Namespace) -> bool:
    return any(v is not None for v in (args.since, args.node, args.kind, args.gpu))


def _key(event: Event) -> str:
    from console.core.events import event_to_dict

    return json.dumps(event_to_dict(event), sort_keys=True, default=str)


def _follow(args: argparse.Namespace, history: History, since: float | None) -> int:
    """The newest matching events, oldest first, then each new one any process stores."""
    from console.core.events import event_to_dict, matches

    def keep(e: Event) -> bool:
        return matches(e, since=since, node=args.node, kind=args.kind, gpu=args.gpu)

    def show(batch: Sequence[Event], header: bool) -> None:
        if not batch:
            return
        if args.json:
            for e in batch:
                print(json.dumps(event_to_dict(e)))
        else:
            text = render_table(batch)
            sys.stdout.write(text if header else text.split("\n", 1)[1])
        sys.stdout.flush()

    log = history.events
    try:  # Ctrl-C is how a follow ends, wherever it lands
        follower = log.follow()  # from now: none is missed between the backlog and the first poll
        backlog = log.read(
            since=since, node=args.node, kind=args.kind, gpu=args.gpu, limit=args.limit or FOLLOW_BACKLOG
        )
        _say_skipped(log)
        backlog.reverse()  # oldest first, as tail -f
        show(backlog, header=True)
        header = not backlog
        shown = {_key(e) for e in backlog}  # one stored meanwhile is in both: shown once
        deadline = None if args.timeout is None else time.monotonic() + args.timeout
        while deadline is None or time.monotonic() < deadline:
            fresh = [e for e in follower.poll() if keep(e)]
            if shown:
                fresh = [e for e in fresh if _key(e) not in shown]
                shown.clear()
            show(fresh, header=header)
            header = header and not fresh
            pause = FOLLOW_POLL_S if deadline is None else min(FOLLOW_POLL_S, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)
    except KeyboardInterrupt:
        pass
    return EXIT_OK
