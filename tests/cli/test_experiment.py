"""`serve start --replicas`, `bench run --group`, `serve stop --group` and `experiment run|check|report`
as a user runs them (subprocesses) on a simulated node; the experiment killed with SIGKILL and resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from console.core.results.record import run_to_dict
from tests.cli.cli_helpers import ROOT, one_line_error, run, stored_runs

EXPERIMENT = """
[experiment]
name = "cli-layouts"
serve = "tiny"
bench = "tiny"
concurrency = [2, 4]
num_prompts = 8
layouts = ["SPX tp1 x2", "SPX tp2 x1"]

[[budget]]
name = "loose"
p99_ttft_ms = 60000
"""


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    """Results and experiment state of these tests stay in the test's folder."""
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.mark.timeout(240)
def test_replica_group_from_the_cli(profile, data_dir):
    p = ["--profile", str(profile)]
    start = run("serve", "start", "--preset", "tiny", "--replicas", "2", "--wait", "--timeout", "60", *p)
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        assert "group tiny-x2: 2 replicas of tiny (TP 1)" in start.stdout
        assert start.stdout.strip().splitlines()[-1] == "group tiny-x2: 2/2 ready"
        bench = run(
            "bench", "run", "--group", "tiny-x2", "--preset", "tiny", "--set", "num_prompts=8", "--concurrency", "4", *p
        )
        assert bench.returncode == 0, bench.stdout + bench.stderr
        assert "completed 8  failed 0" in bench.stdout and "(sum of 2 clients)" in bench.stdout
        assert "tiny-x2-r0" in bench.stdout and "tiny-x2-r1" in bench.stdout
        # stored: each client's result and the group's, which names them
        assert "  stored as " in bench.stdout
        docs = [run_to_dict(r) for r in stored_runs(data_dir)]
        assert len(docs) == 3, bench.stdout
        [grp] = [d for d in docs if d["context"].get("replica_runs")]
        assert len(grp["context"]["replica_runs"]) == 2 and grp["context"]["instance"] == "tiny-x2"
        # bad input: one line, exit 2
        too_many = run("serve", "start", "--preset", "tiny", "--replicas", "7", *p)
        assert too_many.returncode == 2
        assert one_line_error(too_many) == (
            "rocm-console: 7 replicas of TP 1 need 7 free GPUs, sim offers 6 free sets of 1 (2 GPUs busy)"
        )
        both = run("bench", "run", "--group", "tiny-x2", "--instance", "x", "--preset", "tiny", *p)
        assert both.returncode == 2 and one_line_error(both) == "rocm-console: give --instance or --group, not both"
    finally:
        stop = run("serve", "stop", "--group", "tiny-x2", *p)
    assert stop.returncode == 0, stop.stderr
    assert "group tiny-x2: stopped 2 of 2" in stop.stdout
    gone = run("serve", "stop", "--group", "tiny-x2-nope", *p)
    assert gone.returncode == 2 and one_line_error(gone) == "rocm-console: no group named tiny-x2-nope on sim"


def test_experiment_that_cannot_fit_is_refused_line_by_line(profile, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(EXPERIMENT.replace('"SPX tp2 x1"', '"SPX tp16 x1", "CPX tp2 x8"'))
    proc = run("experiment", "check", str(path), "--profile", str(profile))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"rocm-console: {path}: layout \"SPX tp16 x1\" key 'layout': TP 16 > 8 GPUs in SPX on sim (8 physical × 1)",
        f"rocm-console: {path}: layout \"CPX tp2 x8\" key 'layout': TP 2 in CPX: a CPX partition runs TP 1 only",
        f"rocm-console: {path}: layout \"CPX tp2 x8\" key 'concurrency': 2 is fewer than its 8 replicas "
        "(each replica's client needs at least 1)",
    ]
    ok = tmp_path / "ok.toml"
    ok.write_text(EXPERIMENT)
    assert run("experiment", "check", str(ok), "--profile", str(profile)).stdout.splitlines() == [
        f"{ok}: 2 layouts fit sim: its GPUs are free"
    ]
    # the demo's mi300x-spx carries load on GPUs 0-3: which layouts fit and what holds them, not refused
    demo = run("experiment", "check", str(ok), "--demo", "--node", "mi300x-spx", env={"HOME": str(tmp_path)})
    out = demo.stdout.splitlines()
    assert demo.returncode == 0 and out[0].startswith(f"{ok}: ") and "layouts fit mi300x-spx now" in out[0], out
    assert "mi300x-spx: GPU 0-3 busy: 4 processes would have to stop first" in out, out
    assert any(line.startswith("  GPU 0: process ") for line in out), out


@pytest.mark.timeout(300)
def test_experiment_killed_with_sigkill_resumes(profile, tmp_path, data_dir):
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT)
    state = tmp_path / "exp-state.json"
    args = ["experiment", "run", str(path), "--profile", str(profile), "--state", str(state)]
    env = dict(os.environ, ROCM_CONSOLE_SIM_VLLM_SPEEDUP="20")
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", *args], cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env
    )
    first_lines = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            first_lines.append(line.rstrip("\n"))
            if "spx-tp1-x2@c2: done" in line:
                break
        proc.send_signal(signal.SIGKILL)  # the console dies: no cleanup runs
    finally:
        proc.wait(30)
        proc.stdout.close()
    assert any("spx-tp1-x2@c2: done" in line for line in first_lines), first_lines
    killed = json.loads(state.read_text())
    assert list(killed["done"]) == ["spx-tp1-x2@c2"] and not killed["finished"]

    again = run(*args, timeout=240)
    assert again.returncode == 0, again.stdout + again.stderr
    lines = again.stdout.splitlines()
    assert "[1/4] resuming: 1 of 4 points done, 3 left" in lines
    assert not any("spx-tp1-x2@c2: benchmark" in line for line in lines)  # never rerun
    # the group the killed console left running was whole and ready: taken over, not restarted
    assert "[1/4] layout SPX tp1 ×2: cli-layouts-spx-tp1-x2: 2/2 ready" in lines
    done = json.loads(state.read_text())
    assert done["finished"] and set(done["done"]) == {
        "spx-tp1-x2@c2",
        "spx-tp1-x2@c4",
        "spx-tp2-x1@c2",
        "spx-tp2-x1@c4",
    }
    assert done["done"]["spx-tp1-x2@c2"] == killed["done"]["spx-tp1-x2@c2"]
    # every point is in the results store too: the group's result, named by its point
    docs = [run_to_dict(r) for r in stored_runs(data_dir)]
    groups = sorted(d["context"]["point"] for d in docs if d["context"].get("replica_runs"))
    assert groups == sorted(done["done"]), groups
    assert done["done"]["spx-tp2-x1@c4"]["stored"] in {d["id"] for d in docs}
    listing = run("serve", "list", "--json", "--profile", str(profile))
    assert [i["name"] for i in json.loads(listing.stdout)["instances"] if i["state"] != "exited"] == []

    out = tmp_path / "report"
    report = run("experiment", "report", str(path), "--profile", str(profile), "--state", str(state), "--out", str(out))
    assert report.returncode == 0, report.stderr
    md = (out / "report.md").read_text()
    assert "## Best layout per latency budget" in md and "throughput vs latency" in md
    assert "p99 TTFT (ms)" in md and "\x1b" not in md  # the plotext chart, embedded as plain text
    rows = json.loads(
        run("experiment", "report", str(path), "--profile", str(profile), "--state", str(state), "--json").stdout
    )
    assert [r["point"] for r in rows] == ["spx-tp1-x2@c2", "spx-tp1-x2@c4", "spx-tp2-x1@c2", "spx-tp2-x1@c4"]
    assert all(r["completed"] == 8 and r["output_tok_s"] > 0 and "p99_ttft_ms" in r for r in rows)
    csv_lines = (out / "points.csv").read_text().splitlines()
    assert len(csv_lines) == 5 and csv_lines[0].startswith("layout,load_kind,load,")


@pytest.mark.timeout(240)
def test_group_spread_over_two_nodes(tmp_path):
    prof = tmp_path / "two.toml"
    prof.write_text(f"""
[nodes.a]
transport = "local"
state_dir = "{tmp_path / "a"}"
simulate = {{ gpu = "MI300X", count = 8, seed = 1 }}

[nodes.b]
transport = "local"
state_dir = "{tmp_path / "b"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "CPX", seed = 2 }}
""")
    p = ["--profile", str(prof)]
    start = run("serve", "start", "--preset", "tiny", "--replicas", "3", "--nodes", "a,b", "--wait", *p)
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        # nodes start in parallel: lines in any order
        placed = sorted(line.split()[:2] for line in start.stdout.splitlines() if line.startswith("  tiny-x3-r"))
        assert placed == [["tiny-x3-r0", "a"], ["tiny-x3-r1", "b"], ["tiny-x3-r2", "a"]]  # dealt round-robin
        bench = run("bench", "run", "--group", "tiny-x3", "--preset", "tiny", "--concurrency", "3", *p)
        assert bench.returncode == 0, bench.stdout + bench.stderr
        assert "completed 20  failed 0" in bench.stdout and "(sum of 3 clients)" in bench.stdout
    finally:
        stop = run("serve", "stop", "--group", "tiny-x3", *p)
    assert "group tiny-x3: stopped 3 of 3" in stop.stdout, stop.stdout + stop.stderr
