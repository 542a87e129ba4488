"""`rocm-console` command line: the TUI by default, headless subcommands for scripts.

entry.py builds the root parser and dispatches; one module per command group (status, serve,
partition, bench, results, doctor, web, events, alerts), each with `add_parser(sub)` and `run(args) -> exit code`;
common.py holds what they share (profile and node selection, KEY=VALUE pairs, exit codes:
0 ok, 1 failed, 2 bad input, each error one line on stderr). tui.py is the TUI's short way in:
a line with TUI options only never imports the command groups.
"""

from __future__ import annotations

import sys
from typing import Sequence

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    from console.ui.start_up import hold, release

    hold()  # the TUI's start, until its first frame (ui/start_up.py); a command ends it below
    from console.cli.tui import main_tui, tui_args

    tui = tui_args(args)
    if tui is not None:
        return main_tui(tui)
    release()
    from console.cli.entry import main as entry_main

    return entry_main(args)


def __getattr__(name: str):
    if name == "build_parser":  # imported on use: it loads every command group
        from console.cli.entry import build_parser

        return build_parser
    raise AttributeError(f"module 'console.cli' has no attribute {name!r}")
