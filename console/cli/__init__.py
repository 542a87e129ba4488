"""`rocm-console` command line: the TUI by default, headless subcommands for scripts.

entry.py builds the root parser and dispatches; one module per command group (status, serve,
partition, bench, results, doctor), each with `add_parser(sub)` and `run(args) -> exit code`;
common.py holds what they share (profile and node selection, KEY=VALUE pairs, exit codes:
0 ok, 1 failed, 2 bad input, each error one line on stderr).
"""

from console.cli.entry import build_parser, main

__all__ = ["build_parser", "main"]
