"""`bench run --group` uses the command's one History (its Selection's) for the group's runs
and its events: one History made, the store opened once, every result stored."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.cli.cli_helpers import ROOT, run, stored_runs

# The command as `python -m console` runs it, with History and open_store counted on the way.
COUNTED = """
import sys
import console.services.history as h
import console.services.store.store as s
made, opened = [], []
real_init, real_open = h.History.__init__, s.open_store
def init(self, *a, **k):
    made.append(1)
    real_init(self, *a, **k)
def open_store(*a, **k):
    opened.append(1)
    return real_open(*a, **k)
h.History.__init__, s.open_store = init, open_store
from console.cli import main
try:
    code = main(sys.argv[1:])
finally:
    print(f"histories made: {len(made)}, store openings: {len(opened)}", file=sys.stderr)
raise SystemExit(code)
"""


@pytest.mark.timeout(240)
def test_bench_run_group_makes_one_history_and_opens_the_store_once(profile, tmp_path):
    data = tmp_path / "data"
    env = {"ROCM_CONSOLE_DATA_DIR": str(data)}
    p = ["--profile", str(profile)]
    start = run("serve", "start", "--preset", "tiny", "--replicas", "2", "--wait", "--timeout", "60", *p, env=env)
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        argv = [
            "bench",
            "run",
            "--group",
            "tiny-x2",
            "--preset",
            "tiny",
            "--set",
            "num_prompts=4",
            "--concurrency",
            "2",
        ]
        bench = subprocess.run(
            [sys.executable, "-c", COUNTED, *argv, *p],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
            env=dict(os.environ, ROCM_CONSOLE_SIM_VLLM_SPEEDUP="20", **env),
        )
        assert bench.returncode == 0, bench.stdout + bench.stderr
        assert "  stored as " in bench.stdout
        assert bench.stderr.strip().splitlines()[-1] == "histories made: 1, store openings: 1"
        assert len(stored_runs(data)) == 3  # the group's result and each replica's
    finally:
        run("serve", "stop", "--group", "tiny-x2", *p, env=env)
