"""The TUI's way in: `rocm-console [--demo | --profile FILE ...] [--interval S]`.

The console's most common start names no command group, so it needs none of their modules
(benchmarks, results, partitions, doctor, web): they are imported only when a command or
--help/--version is on the line (console.cli.main sends those to entry.py). Start-up time is
budgeted (tests/perf/startup.py).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Sequence

from console.cli.common import EXIT_BAD_INPUT, UsageError, add_profile_options, load_selected_profile
from console.core.model import Profile
from console.ui.start_up import release

if TYPE_CHECKING:
    from console.core.health_profile import HealthSettings


class _NotTui(Exception):
    """The line is more than TUI options: the full parser handles it (and its errors)."""


class _QuietParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise _NotTui(message)


def add_tui_options(parser: argparse.ArgumentParser) -> None:
    """The root options of entry.build_parser that the TUI reads (a test keeps them equal)."""
    add_profile_options(parser, suppress=False)
    parser.add_argument("--interval", type=float, default=1.0, help="sampling interval in seconds (0.1-10)")


def tui_args(argv: Sequence[str]) -> argparse.Namespace | None:
    """The parsed options when `argv` holds TUI options only, else None."""
    parser = _QuietParser(prog="rocm-console", add_help=False)
    add_tui_options(parser)
    try:
        args, rest = parser.parse_known_args(list(argv))
    except _NotTui:
        return None
    return None if rest else args


def check_loop_pace() -> None:
    """A bad ROCM_CONSOLE_LOOP_PACE_MS is refused before anything starts (one line, exit 2)."""
    from console.ui.paced_loop import pace_from_env

    try:
        pace_from_env()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def alert_rule_warnings(profile: Profile, health: HealthSettings) -> list[str]:
    """[[alert]] rules naming a node the profile lacks: said at start, as `alerts list` says them
    (a typo in `nodes` would otherwise leave the rule silent for that node, without a word)."""
    from console.core.alerts import unknown_nodes

    return unknown_nodes(health.alerts, [n.name for n in profile.nodes])


def run_tui(args: argparse.Namespace) -> int:
    if not 0.1 <= args.interval <= 10:
        raise UsageError(f"--interval {args.interval:g}: must be between 0.1 and 10 seconds")
    check_loop_pace()
    notes: list[str] = []  # what --profile could not apply to the demo: shown in the console
    profile = load_selected_profile(args, notes)
    from console.core.health_profile import health_settings

    health = health_settings(profile)  # read once: the warnings here, the app's rules below
    notes += alert_rule_warnings(profile, health)
    for note in notes:  # and on the terminal, where it stays after the console quits
        print(f"rocm-console: {note}", file=sys.stderr)
    if args.demo:  # before anything starts: every local child inherits the demo's lifeline
        from console.services.demo import claim_lifeline, use_private_state

        claim_lifeline()
        use_private_state()  # and the demo's nodes keep their state in its own folder
    from console.services.early_agents import discard_early, start_local_agents

    # The local nodes' agents come up while the UI loads (services/early_agents.py).
    start_local_agents(profile, args.interval, health)
    try:
        from console.ui.launch import run_app

        return run_app(profile, interval=args.interval, demo=bool(args.demo), notes=notes, health=health)
    finally:
        discard_early()  # any the fleet did not adopt (it failed before, or never started)


def main_tui(args: argparse.Namespace) -> int:
    from console.core.errors import ProfileError

    try:
        return run_tui(args)
    except (ProfileError, UsageError) as exc:
        print(f"rocm-console: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    finally:
        release()  # the start-up hold (ui/start_up.py), where no first frame ended it
