"""`rocm-console` command line: the TUI by default, headless subcommands for scripts.

entry.py builds the root parser and dispatches; one module per command group (status, serve,
partition, bench, results, doctor, web, events, alerts), each with `add_parser(sub)` and `run(args) -> exit code`;
common.py holds what they share (profile and node selection, KEY=VALUE pairs, exit codes:
0 ok, 1 failed, 2 bad input, each error one line on stderr). tui.py is the TUI's short way in:
a line with TUI options only never imports the command groups; a line that names a command
never imports the TUI's check (a fresh `results list` is budgeted: tests/perf/store_scale.py).
"""

from __future__ import annotations

import sys
from typing import Sequence

__all__ = ["build_parser", "main"]


# The root options the TUI takes, spelled out in full (tui.add_tui_options): a word after them
# that is not an option names a command, which the TUI's check would refuse anyway.
_TUI_FLAGS = frozenset({"--demo"})
_TUI_OPTIONS_WITH_VALUE = frozenset({"--profile", "--interval"})


def is_command_line(argv: Sequence[str]) -> bool:
    """True when `argv` is surely not the TUI's: a command word after whole TUI options, or
    --help/--version; the TUI's own option check (tui.py, the profile and model code it loads)
    is then left out of a command's start (a fresh `results list` is budgeted:
    tests/perf/store_scale.py). False leaves the question to that check."""
    words = iter(argv)
    for word in words:
        if word in ("-h", "--help", "--version") or not word.startswith("-"):
            return True
        if word in _TUI_OPTIONS_WITH_VALUE:
            next(words, None)
        elif word not in _TUI_FLAGS and word.split("=", 1)[0] not in _TUI_OPTIONS_WITH_VALUE:
            return False  # an abbreviation, a typo, `--`: argparse's rules decide
    return False


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if is_command_line(args):
        return _command(args, held=argv is None)
    from console.ui.start_up import hold, release

    hold()  # the TUI's start, until its first frame (ui/start_up.py); a command ends it below
    from console.cli.tui import main_tui, tui_args

    tui = tui_args(args)
    if tui is not None:
        return main_tui(tui)
    release()
    return _command(args, held=argv is None)


# entry.COMMAND_GROUPS (a test keeps them equal): each group's compiled dataclass code is kept
# in a cache of its own (ui/start_up.py); any other word is the parser's to refuse.
GROUP_NAMES = frozenset(
    {"status", "serve", "partition", "bench", "results", "doctor", "experiment", "web", "events", "alerts", "models"}
    | {"baseline", "watch", "store"}
)


def command_word(argv: Sequence[str]) -> str | None:
    """The command group a line names (its first word that is not an option or the value of
    --profile/--interval), if it is one."""
    words = iter(argv)
    for word in words:
        if word in _TUI_OPTIONS_WITH_VALUE:
            next(words, None)
        elif not word.startswith("-"):
            return word if word in GROUP_NAMES else None
    return None


def _command(args: list[str], *, held: bool) -> int:
    """A command; `held` (the process's own start, `rocm-console ...`: not a call from a test or
    a script) as the TUI's start is (ui/start_up.py): the collector off until its modules are in
    (entry.py resumes it), its group's dataclass code from the cache."""
    if not held:
        from console.cli.entry import main as entry_main

        return entry_main(args)
    from console.ui.start_up import hold, release

    group = command_word(args)
    hold(f"cli-{group}" if group else "cli")
    code = None
    try:
        from console.cli.entry import main as entry_main

        code = entry_main(args)
        return code
    finally:
        release(keep=code in (0, 1))  # ran (ok, or failed: a node down); a refused line keeps none


def __getattr__(name: str):
    if name == "build_parser":  # imported on use: it loads every command group
        from console.cli.entry import build_parser

        return build_parser
    raise AttributeError(f"module 'console.cli' has no attribute {name!r}")
