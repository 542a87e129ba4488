"""Every `rocm-console` command, fed bad input, says so without a traceback and never exits 0.

The commands come from the real argparse tree (console/cli/entry.py's build_parser), so a new
subcommand or option is swept as soon as it exists. For each command: no arguments; a profile
that is missing, a folder, not TOML, not UTF-8; an unknown node; the demo with names that do not
exist; bad KEY=VALUE pairs for --set/--env and an empty --arg; garbage for every typed option
and for the options known to take lists, choices or paths; a data dir that is a file. Each
line runs as its own process (as a user runs it), several at once, each with a deadline.

Files that are not files (issue W2): a character device (/dev/zero), a FIFO, a /proc file and a
300 MB sparse file for every option and positional that names a file to read; an events log with
a line nested 100000 deep; imported runs with impossible times and a label that is an object.
Every process runs under an address-space limit (MEMORY_LIMIT), so a reader without bound fails
the test (a MemoryError's traceback) instead of taking the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.cli.entry import COMMAND_GROUPS, build_parser

ROOT = Path(__file__).resolve().parents[2]
# The lines are CPU-bound (a process's start: no waits), so one per core, and one more to fill
# the gaps of fork and exec; at least 3 (CI's core count varies, its integration half runs beside).
WORKERS = max(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2) + 1
DEADLINE = 90  # seconds for one command; every line here fails fast
MEMORY_LIMIT = 2 << 30  # address space of each command: the console starts well within it
# Options naming a file the console reads, and the inputs that are not files to read (W2).
FILE_OPTIONS = ("--profile", "--suite", "--token-file", "--state", "--budgets")
NOT_FILES = ("zero", "fifo", "proc", "sparse")


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]
    must_fail: bool = True  # exit 0 is a bug (else: only "no traceback")
    env: tuple[tuple[str, str], ...] = ()


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command words, parser) of every leaf of the argparse tree."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _commands(sub, (*path, name))


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {opt: a for a in parser._actions for opt in a.option_strings if opt.startswith("--")}


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not a.option_strings]


# What a required option gets when the case is about something else (names that exist nowhere,
# so a command that got past the bad input still stops at them: nothing starts).
FILL = {"--preset": "tiny", "--instance": "no-such-instance", "--format": "json", "--node": "sim"}
# Garbage for options whose value is a list, a choice, a path or a name.
GARBAGE = {
    "--gpus": "a,b",
    "--concurrency": "x,1",
    "--since": "someday",
    "--replicas": "many",
    "--compute": "XPX",
    "--memory": "NPS9",
    "--source": "nowhere",
    "--client": "nope",
    "--format": "doc",
    "--output": "/nonexistent-dir/out.json",
    "--state": "/nonexistent-dir/state.json",
    "--out": "{file}/sub",
    "--dataset": "/nonexistent-dir/data.jsonl",
    "--lm-eval": "/nonexistent-dir/lm_eval",
    "--url": "not a url",
    "--scripts-dir": "",
    "--nodes": "a,,b",
    "--group": "../x",
    "--name": "../x",
    "--attach": "../no-such-run",
    "--task": "",
    "--model": "",
}
BAD_SET = (
    ("novalue",),
    ("=1",),
    ("bad key=1",),
    ("a=1", "a=2"),
    ("tp=abc",),
    ("tp=-1",),
    ("port=1",),
    ("tp=99999999999999",),  # past the documented bounds (core/bounds.py)
)
BAD_BENCH_SET = (("num_prompts=99999999999999999999999",), ("max_concurrency=99999999999",))
BAD_ENV = (("1BAD=x",), ("novalue",), ("A=1", "A=2"))
TYPED_GARBAGE = ("abc", "-5", "nan")


def _fill(
    parser: argparse.ArgumentParser, skip: set[str] = frozenset(), positional: str = "no-such-thing"
) -> list[str]:
    out: list[str] = [positional for _ in _positionals(parser)]
    for opt, action in _options(parser).items():
        if action.required and opt not in skip and opt == action.option_strings[-1]:
            out += [opt, FILL.get(opt, "no-such-thing")]
    return out


def _cases(files: dict[str, Path]) -> list[Case]:
    cases: list[Case] = []
    sim = ("--profile", str(files["sim"]))
    # the TUI's own line: only inputs that fail before anything starts
    for bad in (("--profile", str(files["missing"])), ("--profile", str(files["dir"])), ("--interval", "0")):
        cases.append(Case(bad))
    cases.append(Case(("--interval", "abc")))
    cases.append(Case(("--interval", "2", "status", *sim)))  # the TUI's option on a command that ignores it
    seen_groups: set[str] = set()
    for words, parser in _commands(build_parser()):
        opts = _options(parser)
        first_of_group = words[0] not in seen_groups  # every loader path once per command group
        seen_groups.add(words[0])
        has_required = bool(_positionals(parser)) or any(a.required for a in opts.values())
        cases.append(Case(words, must_fail=has_required))
        fill = _fill(parser)
        if "--profile" in opts:
            for bad in ("missing", "dir", "latin1", *(("garbage", "bom16") if first_of_group else ())):
                cases.append(Case((*words, "--profile", str(files[bad]), *fill)))
        if "--node" in opts and "--profile" in opts:
            # results' --node filters stored runs by the name they carry (imports may name any node)
            is_filter = words[0] == "results" and words[-1] != "fetch"
            cases.append(
                Case((*words, *sim, *_fill(parser, {"--node"}), "--node", "no-such-node"), must_fail=not is_filter)
            )
        if "--demo" in opts and _positionals(parser) and words != ("store", "dump"):  # its DIR: a folder to make
            node = ("--node", "mi300x-spx") if "--node" in opts else ()
            cases.append(Case((*words, "--demo", *node, *_fill(parser, {"--node"}))))
        if _positionals(parser) and words[0] in ("experiment", "results"):  # files: unreadable ones
            for bad in ("dir", "garbage", "latin1", "bom16"):
                cases.append(Case((*words, *_fill(parser, positional=str(files[bad])), "--demo")))
        if "--set" in opts:
            # a serve preset's --set names vLLM's own flags (passed on): a benchmark's bounds are the bench's
            for bad in BAD_SET + (BAD_BENCH_SET if words[0] != "serve" else ()):
                pairs = [x for item in bad for x in ("--set", item)]
                cases.append(Case((*words, *sim, *fill, *pairs)))
        if "--env" in opts:
            for bad in BAD_ENV:
                pairs = [x for item in bad for x in ("--env", item)]
                cases.append(Case((*words, *sim, *fill, *pairs)))
        if "--arg" in opts:
            cases.append(Case((*words, *sim, *fill, "--arg=")))
        for opt, action in opts.items():
            if opt != action.option_strings[-1] and not opt.startswith("--"):
                continue
            if action.type is not None and action.nargs is None and opt not in GARBAGE:
                for value in TYPED_GARBAGE:
                    cases.append(Case((*words, *sim, *_fill(parser, {opt}), f"{opt}={value}")))
            if opt in GARBAGE:
                value = GARBAGE[opt].format(file=files["garbage"])
                cases.append(Case((*words, *sim, *_fill(parser, {opt}), f"{opt}={value}")))
        if words[0] == "results" and words[-1] != "fetch":
            broken = (("ROCM_CONSOLE_DATA_DIR", str(files["garbage"])),)
            cases.append(Case((*words, *fill), must_fail=has_required or words[-1] in ("list",), env=broken))
        cases += _not_files(words, parser, opts, files, first_of_group)
    return cases + _hostile_data(files)


def _not_files(words, parser, opts, files, first_of_group: bool) -> list[Case]:
    """A device, a FIFO, /proc and a huge sparse file wherever a file is read (W2)."""
    out: list[Case] = []
    for opt in FILE_OPTIONS:
        if opt not in opts or (opt == "--profile" and not first_of_group):
            continue
        demo = ("--demo",) if "--demo" in opts and opt != "--profile" else ()
        for bad in NOT_FILES:
            if opt == "--profile" or bad != "proc":  # /proc/self/status is a regular file, read within bound
                out.append(Case((*words, *demo, *_fill(parser, {opt}), opt, str(files[bad]))))
    if words in (("results", "import"), ("experiment", "check")):
        for bad in NOT_FILES:
            out.append(Case((*words, *_fill(parser, positional=str(files[bad])), "--demo")))
    return out


def _hostile_data(files: dict[str, Path]) -> list[Case]:
    """The new command lines over hostile data: events of a hand-edited log, imports of runs
    with impossible numbers and wrong types, a store holding such a run (W2)."""
    out = []
    hostile_store = (("ROCM_CONSOLE_DATA_DIR", str(files["hostile_data"])),)
    for mode in ((), ("--json",), ("--follow", "--timeout", "0.3"), ("--kind", "node"), ("--node", "a")):
        out.append(Case(("events", *mode), must_fail=False, env=hostile_store))
    # alerts test with a malformed webhook URL from the environment: a FAIL line naming the rule
    for url in ("http://u:p@127.0.0.1:99999/", "http://[::1", "file:///etc/passwd"):
        hook = (("W2_HOOK", url),)
        out.append(Case(("alerts", "test", "--profile", str(files["alerts"])), must_fail=True, env=hook))
    huge = "99999999999999999999999"
    sim = ("--profile", str(files["sim"]))
    out.append(Case(("bench", "run", *sim, "--preset", "tiny", "--instance", "x", "--concurrency", huge)))
    for run_file in files["bad_runs"].iterdir():
        out.append(Case(("results", "import", str(run_file)), must_fail=True))
    for action in (("list",), ("list", "--json"), ("show", "2026"), ("export", "--all", "--format", "csv")):
        out.append(Case(("results", *action), must_fail=False, env=hostile_store))
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sweep")
    sim = root / "lab.toml"
    sim.write_text(f"""
[nodes.sim]
transport = "local"
state_dir = "{root / "state"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 11 }}
""")
    alerts = root / "alerts.toml"  # a rule whose webhook URL comes from the environment (W2_HOOK)
    alerts.write_text(
        sim.read_text() + '\n[[alert]]\nname = "hook"\nwhen = "health == fail"\nwebhook_env = "W2_HOOK"\n'
    )
    (root / "garbage.toml").write_text("[[[ this is = not toml\n")
    (root / "latin1.toml").write_bytes(b'[nodes.a]\nhost = "caf\xe9"\n')
    (root / "bom16.toml").write_bytes('[nodes.a]\nhost = "h"\n'.encode("utf-16"))
    (root / "adir.toml").mkdir()
    (root / "home").mkdir()
    (root / "empty").mkdir()
    os.mkfifo(root / "fifo.toml")
    with open(root / "sparse.toml", "wb") as fh:
        fh.truncate(300 << 20)
    hostile = root / "hostile-data"  # a data dir: events nested deep, stored runs of the wrong types
    (hostile / "results").mkdir(parents=True)
    deep = "[" * 100_000 + "]" * 100_000
    event = {"time": 1.7e9, "kind": "node.down", "node": "a", "message": "down\x1b]0;title\x07"}
    (hostile / "events.jsonl").write_text("\n".join([deep, json.dumps(event), '{"time": 1e300, "kind": "x"}']) + "\n")
    run = {"format": "rocm-console-result/1", "id": "20260101-000000-import-abcdef", "origin": "import"}
    (hostile / "results" / "20260101-000000-import-abcdef.json").write_text(
        json.dumps({**run, "created": 1.7e9, "label": {"a": 1}})
    )
    bad_runs = root / "bad-runs"
    bad_runs.mkdir()
    for i, (key, value) in enumerate(
        [("created", "1e300"), ("created", "NaN"), ("created", "-1e18"), ("created", "Infinity"), ("label", "{}")]
    ):
        doc = json.dumps({**run, "created": 1.7e9, "label": None}).replace(f'"{key}": ', f'"{key}": {value}, "x": ', 1)
        (bad_runs / f"run{i}.json").write_text(doc)
    return {
        "sim": sim,
        "alerts": alerts,
        "missing": root / "missing.toml",
        "dir": root / "adir.toml",
        "garbage": root / "garbage.toml",
        "latin1": root / "latin1.toml",
        "bom16": root / "bom16.toml",
        "home": root / "home",
        "cwd": root / "empty",
        "root": root,
        "zero": Path("/dev/zero"),
        "fifo": root / "fifo.toml",
        "proc": Path("/proc/self/status"),
        "sparse": root / "sparse.toml",
        "hostile_data": hostile,
        "bad_runs": bad_runs,
    }


def _bounded_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _env(files: dict[str, Path]) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "HOME": str(files["home"]),
        "XDG_CONFIG_HOME": str(files["root"] / "config"),
        "XDG_DATA_HOME": str(files["root"] / "data-home"),
        "ROCM_CONSOLE_DATA_DIR": str(files["root"] / "data"),
        "ROCM_CONSOLE_SIM_VLLM_SPEEDUP": "20",
        "MALLOC_ARENA_MAX": "2",  # address space reserved per thread stays small under MEMORY_LIMIT
    }


# The compiled dataclass code a user's earlier commands left in ~/.cache (console/ui/start_up.py):
# a refused line writes none, so without it each of the sweep's processes compiles every
# dataclass method of its modules again (a third of its CPU). One process imports the console's
# modules (the TUI's apart: its lines keep the cold start) under the product's own hold and
# keeps what it compiled; each command group's cache starts as that.
WARM_CACHE = """
import importlib, pkgutil, shutil, sys
import console
from console.ui import start_up
start_up.hold("cli")
for mod in pkgutil.walk_packages(console.__path__, "console."):
    if not mod.name.startswith("console.ui.") and not mod.name.endswith("__main__"):
        try:
            importlib.import_module(mod.name)
        except ImportError:
            pass  # the agent's and the simulator's own modules, imported on the node from their folder
start_up.release(keep=True)
for group in sys.argv[1:]:
    shutil.copyfile(start_up.cache_path("cli"), start_up.cache_path("cli-" + group))
"""


def _warm_cache(files: dict[str, Path]) -> None:
    subprocess.run(
        [sys.executable, "-c", WARM_CACHE, *COMMAND_GROUPS],
        cwd=files["cwd"],
        env=_env(files),
        stdin=subprocess.DEVNULL,
        check=True,
        timeout=DEADLINE,
    )


def _run(case: Case, files: dict[str, Path]) -> tuple[Case, int, str, str]:
    env = {**_env(files), **dict(case.env)}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "console", *case.argv],
            cwd=files["cwd"],  # no ./profiles here: nothing is found that was not given
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            preexec_fn=_bounded_memory,
        )
    except subprocess.TimeoutExpired:
        return case, -1, "", f"no answer within {DEADLINE} s"
    return case, proc.returncode, proc.stdout, proc.stderr


@pytest.mark.timeout(900)
def test_no_command_answers_bad_input_with_a_traceback_or_exit_0(files):
    cases = _cases(files)
    commands = {c.argv[0] for c in cases if c.argv and not c.argv[0].startswith("-")}
    assert {"status", "serve", "partition", "bench", "results", "doctor", "experiment", "web"} <= commands
    _warm_cache(files)
    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(lambda c: _run(c, files), cases))
    problems = []
    for case, code, out, err in results:
        line = "rocm-console " + " ".join(case.argv) + "".join(f" [{k}={v}]" for k, v in case.env)
        if "Traceback" in err or "Traceback" in out:
            problems.append(f"{line}: traceback: {err.strip().splitlines()[-1] if err.strip() else out[-200:]}")
        elif code == -1:
            problems.append(f"{line}: {err}")
        elif case.must_fail and code == 0:
            problems.append(f"{line}: exit 0 for bad input")
        elif code != 0 and not err.strip():
            problems.append(f"{line}: exit {code} without a word on stderr")
    assert not problems, f"{len(problems)} of {len(results)} lines:\n" + "\n".join(problems)
