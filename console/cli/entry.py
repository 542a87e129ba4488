"""The root parser and the dispatch: the TUI by default, else one command group's `run`.

A command line that names its group imports that group's module only (`results list` does
not load serve, bench and the TUI: a fresh process answers it in a fraction of a second);
`--help` and a line without a group build the whole tree."""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType
from typing import Sequence

from console import __version__
from console.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    OneLineParser,
    UsageError,
    add_profile_options,
    load_selected_profile,
)
from console.cli.examples import add_examples
from console.core.errors import ConsoleError
from console.ui.start_up import resume_collector

# In the order `rocm-console --help` lists them: each group's module under console/cli/.
COMMAND_GROUPS = (
    "status",
    "serve",
    "partition",
    "bench",
    "results",
    "doctor",
    "experiment",
    "web",
    "events",
    "alerts",
    "models",
    "baseline",
    "watch",
    "store",
)
_ROOT_OPTIONS_WITH_VALUE = ("--profile", "--interval")


def group_module(name: str) -> ModuleType:
    return importlib.import_module(f"console.cli.{name}")


def named_group(argv: Sequence[str]) -> str | None:
    """The group a command line names (its first word after the root options), else None."""
    return named_command(argv)[0]


def named_command(argv: Sequence[str]) -> tuple[str | None, str | None]:
    """The group a command line names and the word right after it: its action, if it is one
    (`results list`), else None."""
    skip = False
    for i, word in enumerate(argv):
        if skip:
            skip = False
        elif word in _ROOT_OPTIONS_WITH_VALUE:
            skip = True
        elif not word.startswith("-"):
            if word not in COMMAND_GROUPS:
                return None, None
            after = argv[i + 1] if i + 1 < len(argv) else None
            return word, after
        elif word in ("-h", "--help"):
            return None, None
    return None, None


def build_parser(only: str | None = None, action: str | None = None) -> argparse.ArgumentParser:
    """The whole tree, or the root with the one group `only` (what that group's line needs);
    of a group whose module lists its ACTIONS, with the one `action` a line names (any other
    word: every action, for argparse's message naming them)."""
    parser = OneLineParser(
        prog="rocm-console",
        description="Terminal control console for vLLM on AMD Instinct GPU nodes.",
    )
    parser.add_argument("--version", action="version", version=f"rocm-console {__version__}")
    add_profile_options(parser, suppress=False)
    parser.add_argument("--interval", type=float, default=1.0, help="sampling interval in seconds (0.1-10)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_GROUPS if only is None else (only,):
        module = group_module(name)
        if action is not None and action in getattr(module, "ACTIONS", ()):
            module.add_parser(sub, only=action)
        else:
            module.add_parser(sub)
    add_examples(parser, dict(sub.choices))
    return parser


def run_tui(args: argparse.Namespace) -> int:
    if not 0.1 <= args.interval <= 10:
        raise UsageError(f"--interval {args.interval:g}: must be between 0.1 and 10 seconds")
    from console.cli.tui import check_loop_pace

    check_loop_pace()
    profile = load_selected_profile(args)
    from console.ui.launch import run_app

    return run_app(profile, interval=args.interval, demo=bool(args.demo))


def _check_interval(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """--interval is the TUI's (and web's, which runs it): refused where nothing would read it."""
    given = any(a == "--interval" or a.startswith("--interval=") for a in argv)
    if given and args.command not in (None, "web"):
        raise UsageError(f"--interval is the sampling interval of the TUI (and web): {args.command} does not use it")
    if not 0.1 <= args.interval <= 10:
        raise UsageError(f"--interval {args.interval:g}: must be between 0.1 and 10 seconds")


def main(argv: Sequence[str] | None = None) -> int:
    line = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(*named_command(line))
    args = parser.parse_args(line)
    try:
        _check_interval(args, line)
        if args.command is None:
            return run_tui(args)
        if getattr(args, "demo", False) and args.command != "web":  # web's TUI chooses its own
            from console.services.demo import use_demo_data_dir

            use_demo_data_dir()  # what the demo stores (runs, events) stays apart from the user's
        resume_collector()  # its modules are in: the command's own work may be long (ui/start_up.py)
        return group_module(args.command).run(args)
    except (ConsoleError, UsageError) as exc:  # ConsoleError: ProfileError, FileLimitError, ...
        print(f"rocm-console: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `rocm-console status | head`: the reader left, nothing to report
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
