"""A command's start (console/cli/__init__.py): a line that names a command skips the TUI's
option check, and its fresh process reuses its group's compiled dataclass code from the cache
(ui/start_up.py); what it prints and its exit code are the same either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import GROUP_NAMES, command_word, is_command_line
from console.cli.entry import COMMAND_GROUPS
from console.cli.tui import tui_args

ROOT = Path(__file__).resolve().parents[2]
CPU = ROOT / "tests" / "fixtures" / "vllm-0.32-cpu"

LINES = [
    [],
    ["--demo"],
    ["--demo", "--interval", "0.5"],
    ["--profile", "status"],  # a file named like a command: the TUI's
    ["--profile=lab.toml", "--demo"],
    ["--prof", "results"],  # an abbreviation: argparse takes it for --profile
    ["--inter", "2", "status"],
    ["--", "status"],
    ["-"],
    [""],
    ["status"],
    ["results", "list", "--node", "n1", "--since", "7d"],
    ["--demo", "results", "list"],
    ["--profile", "lab.toml", "events", "--since", "1h"],
    ["--profile", "-x", "status"],
    ["--interval", "-1", "web"],
    ["--interval"],
    ["--help"],
    ["-h"],
    ["--version"],
    ["--demo", "-h"],
    ["resluts", "list"],
]


def test_the_group_names_are_the_parsers():
    assert set(COMMAND_GROUPS) == GROUP_NAMES


@pytest.mark.parametrize("line", LINES, ids=" ".join)
def test_a_line_skips_the_tui_check_only_where_the_check_would_refuse_it(line):
    if is_command_line(line):
        assert tui_args(line) is None
    if tui_args(line) is None and line and not line[0].startswith("-"):
        assert is_command_line(line)  # the common case is the short one


def test_the_command_word_names_the_group_or_nothing():
    assert command_word(["results", "list"]) == "results"
    assert command_word(["--profile", "events", "results", "list"]) == "results"
    assert command_word(["--demo", "--interval", "2", "status"]) == "status"
    assert command_word(["resluts"]) is None
    assert command_word(["--help"]) is None


def _rocm_console(
    tmp_path: Path, *argv: str, code: str | None = None, cache: str = "cache"
) -> subprocess.CompletedProcess:
    env = dict(os.environ, ROCM_CONSOLE_DATA_DIR=str(tmp_path / "data"), XDG_CACHE_HOME=str(tmp_path / cache))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))  # this checkout's console
    command = [sys.executable, "-m", "console", *argv] if code is None else [sys.executable, "-c", code, *argv]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


# the real entry (main() reads sys.argv), then what the start did: the modules it loaded, and
# whether it compiled any dataclass method its cache lacked
PROBE = (
    "import sys, json\n"
    "from console.cli import main\n"
    "from console.ui import start_up\n"
    "code = main()\n"
    "mods = sorted(m for m in sys.modules if m.startswith(('console.cli.', 'textual')))\n"
    "print(json.dumps({'code': code, 'missed': start_up._state['missed'], 'modules': mods}), file=sys.stderr)\n"
)


def _probe(tmp_path: Path, *argv: str, cache: str = "cache") -> tuple[subprocess.CompletedProcess, dict]:
    proc = _rocm_console(tmp_path, *argv, code=PROBE, cache=cache)
    return proc, json.loads(proc.stderr.strip().splitlines()[-1])


def test_results_list_reuses_its_groups_cache_and_prints_the_same(tmp_path):
    _, did = _probe(tmp_path, "results", "import", str(CPU / "bench_result.json"))
    assert did["code"] == 0 and did["missed"]  # a first start compiles, and keeps what it made
    assert (tmp_path / "cache" / "rocm-console").is_dir()
    first, did = _probe(tmp_path, "results", "list")
    assert did["code"] == 0 and not did["missed"]  # every method from the group's cache
    assert did["modules"] == [
        "console.cli.common",
        "console.cli.entry",
        "console.cli.examples",
        "console.cli.history_arg",
        "console.cli.results",
    ]  # no TUI check, no other group, no textual
    again, did = _probe(tmp_path, "results", "show", first.stdout.splitlines()[1].split()[0])
    assert did["code"] == 0 and not did["missed"] and "Metrics" in again.stdout
    plain = _rocm_console(tmp_path, "results", "list", cache="no-cache-yet")
    assert plain.returncode == 0 and plain.stdout == first.stdout
    assert len(first.stdout.splitlines()) == 2  # the head and the one run


def test_a_refused_line_keeps_no_cache_and_says_one_line(tmp_path):
    proc = _rocm_console(tmp_path, "results", "list", "--since", "soon")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "rocm-console: --since 'soon': expected a date (2026-11-21), a time (2026-11-21T08:00) or 7d/12h/30m"
    ]
    bad = _rocm_console(tmp_path, "resluts", "list")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "cache").exists()


def test_the_collector_is_on_while_a_command_runs(tmp_path):
    """A watcher or `results list --all` may run long: the collector is off only while the
    command's modules load."""
    code = (
        "import gc, sys\n"
        "import console.cli.results as r\n"
        "r.run = lambda args: print('collector on' if gc.isenabled() else 'collector off') or 0\n"
        "from console.cli import main\n"
        "code = main()\n"
        "print('after', gc.isenabled())\n"
        "sys.exit(code)\n"
    )
    proc = _rocm_console(tmp_path, "results", "list", code=code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["collector on", "after True"]


RESULTS_LINES = [
    ["results", "list", "--node", "n1", "--since", "7d"],
    ["results", "list", "--json", "--all", "--limit", "5"],
    ["results", "list", "--limit", "0"],
    ["results", "list", "--node"],
    ["results", "list", "extra"],
    ["results", "list", "--help"],
    ["results", "list", "--bogus"],
    ["--demo", "results", "list"],
    ["--interval", "2", "results", "list"],
    ["results", "show"],
    ["results", "show", "abc", "--json", "--help"],
    ["results", "compare", "a", "b", "--reference", "--include-failed"],
    ["results", "export", "--format", "xml"],
    ["results", "export", "--help"],
    ["results", "import", "x.json", "--label", "l", "--node", "n"],
    ["results", "fetch", "r1", "--node", "n", "--label", "l", "--json"],
    ["results", "delete", "--help"],
    ["results", "delete", "a", "--profile", "p.toml", "--demo"],
]


def _parsed(build, line: list[str]) -> tuple:
    """What the parser made of the line: its namespace, or its exit code and what it printed."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            return ("parsed", vars(build().parse_args(line)))
        except SystemExit as exc:
            return ("exit", exc.code, out.getvalue(), err.getvalue())


@pytest.mark.parametrize("line", RESULTS_LINES, ids=" ".join)
def test_a_results_line_parses_the_same_with_its_action_alone(line):
    """`results list` builds the list action's parser only: the namespace, the help and every
    message are those of the whole group."""
    from console.cli.entry import build_parser, named_command

    group, action = named_command(line)
    assert group == "results"
    whole = _parsed(lambda: build_parser("results"), line)
    alone = _parsed(lambda: build_parser(group, action), line)
    assert alone == whole
    if line[-1] == "--help":
        assert whole[0] == "exit" and whole[1] == 0 and "usage: rocm-console results" in whole[2]


def test_an_unknown_action_is_named_against_every_action():
    from console.cli.entry import build_parser, named_command

    line = ["results", "lst"]
    assert named_command(line) == ("results", "lst")
    code, _, err = _parsed(lambda: build_parser(*named_command(line)), line)[1:]
    assert code == 2 and "invalid choice: 'lst' (choose from 'list', 'show', 'compare', 'export'" in err


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    from console.ui import start_up

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    yield tmp_path
    start_up.release()  # a failed test must not leave the collector off for the next ones


def _record(field_name: str):
    """A dataclass whose methods' text names `field_name` (a different text per name)."""
    import dataclasses

    return dataclasses.make_dataclass("Record", [(field_name, int)], frozen=True)


def _start(name: str, *fields: str) -> bool:
    """One command's start: its group's cache held, records made; whether it compiled any."""
    from console.ui import start_up

    start_up.hold(name)
    for f in fields:
        _record(f)
    missed = start_up._state["missed"]
    start_up.release(keep=True)
    return missed


def test_a_groups_cache_keeps_what_its_other_actions_compiled(cache_home):
    from console.ui import start_up

    assert _start("cli-results", "listed")  # `results list`: compiled, kept
    assert _start("cli-results", "shown")  # `results show`: its own record compiled, added
    assert not _start("cli-results", "listed", "shown")  # each found now
    assert _start("cli-events", "listed")  # another group's cache is its own
    assert os.path.exists(start_up.cache_path("cli-results"))
    assert not os.path.exists(start_up.cache_path())  # the TUI's is left as it was


def test_past_the_cap_a_groups_cache_holds_what_the_last_command_used(cache_home, monkeypatch):
    from console.ui import start_up

    monkeypatch.setattr(start_up, "CACHE_CAP", 6)  # a frozen record's methods: a few texts each
    assert _start("cli-results", "a")
    assert _start("cli-results", "b")  # a and b together pass the cap: b's alone are written
    assert not _start("cli-results", "b")
    assert _start("cli-results", "a")  # a's texts went


def test_a_failed_command_writes_no_cache(cache_home):
    from console.ui import start_up

    start_up.hold("cli-results")
    _record("refused")
    start_up.release(keep=False)
    assert not os.path.exists(start_up.cache_path("cli-results"))
