"""U: the --help of every command group ends with two or three examples, and every example is
a command line the real parser accepts (an example that drifts from the options fails here)."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

import pytest

from console.cli.entry import build_parser
from console.cli.examples import EXAMPLES


def groups() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_group_has_two_or_three_examples():
    assert set(groups()) <= set(EXAMPLES)
    for name in ("", *groups()):
        assert 2 <= len(EXAMPLES[name]) <= 3, name


@pytest.mark.parametrize("line", [line for lines in EXAMPLES.values() for line in lines])
def test_each_example_parses(line):
    argv = shlex.split(line, comments=True)
    assert argv[0] == "rocm-console"
    build_parser().parse_args(argv[1:])  # SystemExit (exit 2) on anything the parser refuses


@pytest.mark.parametrize("group", ["serve", "bench", "results", "status"])
def test_help_ends_with_the_examples(group, tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "COLUMNS": "200"}
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from console.cli import main; sys.exit(main())", group, "--help"],
        capture_output=True, text=True, timeout=60, env=env, check=True,
    ).stdout  # fmt: skip
    tail = out.rstrip().splitlines()[-len(EXAMPLES[group]) - 1 :]
    assert tail[0] == "examples:"
    assert [line.strip() for line in tail[1:]] == list(EXAMPLES[group])
