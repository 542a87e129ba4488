"""`rocm-console baseline`: bad input is one line naming the thing at fault (exit 2); the demo
lists its seeded baseline; a check on the demo node whose simulated ROCm was upgraded since
runs the suite again (its own instance, stopped after), judges every metric and names the
upgrade in its diff."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .cli_helpers import ROOT, one_line_error, run


@pytest.fixture
def env(tmp_path) -> dict:
    return {"HOME": str(tmp_path / "home"), "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}


def test_bad_input_is_one_line_exit_2(env, profile, tmp_path):
    missing = run("baseline", "save", "x", "--suite", str(tmp_path / "nope.toml"), "--profile", str(profile), env=env)
    assert missing.returncode == 2 and "nope.toml" in one_line_error(missing)

    bad = tmp_path / "bad.toml"
    bad.write_text('[serve]\npreset = "lama"\n\n[[point]]\npreset = "tiny"\nconcurrency = 4\n')
    wrong = run("baseline", "save", "x", "--suite", str(bad), "--profile", str(profile), env=env)
    line = one_line_error(wrong)
    assert wrong.returncode == 2 and "bad.toml:2: [serve] key 'preset': no [serve.lama] preset" in line, line

    name = run("baseline", "save", "no/slash", "--suite", str(bad), "--profile", str(profile), env=env)
    assert name.returncode == 2 and "baseline name 'no/slash'" in one_line_error(name)
    # W2: names that break a path (or hide a file, or read as an option) are refused, saved or checked
    for bad_name in ("..", ".", ".hidden", "-x", "", "a/../b", "x" * 65):
        for line in (("save", "--suite", str(bad)), ("check", "--node", "sim")):
            proc = run("baseline", line[0], "--profile", str(profile), *line[1:], "--", bad_name, env=env)
            msg = one_line_error(proc)
            assert proc.returncode == 2, (bad_name, line, msg)
            assert f"baseline name {bad_name!r}" in msg or (bad_name == "" and "needs a NAME" in msg), msg
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").rglob("*.json"))

    absent = run("baseline", "check", "nosuch", "--node", "sim", "--profile", str(profile), env=env)
    assert absent.returncode == 2
    assert one_line_error(absent) == "rocm-console: no baseline 'nosuch' for node sim (save one with `baseline save`)"

    both = run("baseline", "check", "x", "--all", "--profile", str(profile), env=env)
    assert both.returncode == 2 and "NAME or --all" in one_line_error(both)


@pytest.mark.timeout(300)
def test_demo_check_all_against_the_seeded_baseline_names_the_rocm_upgrade(env):
    listing = run("baseline", "list", "--demo", "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    [seeded] = json.loads(listing.stdout)["baselines"]
    assert (seeded["name"], seeded["node"]) == ("demo", "mi300x-spx")

    # --all: every node's baselines, one node at a time (the demo has the one)
    check = run("baseline", "check", "--all", "--demo", "--json", env=env, timeout=280)
    assert check.returncode in (0, 1), check.stderr
    [summary] = json.loads(check.stdout)["checks"]
    assert (summary["node"], summary["baseline"]) == ("mi300x-spx", "demo")
    assert summary["changes"] == ["ROCm: 7.0.2-56 -> 7.1.0-21"]
    report = summary["report"]
    assert [c["line"] for c in report["changes"]] == ["ROCm: 7.0.2-56 -> 7.1.0-21"]
    points = {m["point"] for m in report["metrics"]}
    assert points == {"tiny-c4", "tiny-c16", "offline-throughput"}
    unjudged = [m for m in report["metrics"] if m["verdict"] not in ("same", "improved", "regressed")]
    assert not unjudged, unjudged
    short = [m for m in report["metrics"] if m["n_now"] != 3 or m["noise_band_pct"] is None]
    assert not short, short
    assert report["exit_code"] == check.returncode
    # the suite's instance is gone
    served = json.loads(run("serve", "list", "--demo", "--node", "mi300x-spx", "--json", env=env).stdout)
    assert not [i for i in served["instances"] if i["name"].startswith("baseline-")]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.timeout(240)
def test_a_check_killed_with_sigkill_leaves_no_instance_behind(env, tmp_path):
    """W2: the suite's instance is bound to the check's process: SIGKILL the check once the
    instance runs, and the instance (found by its pid in the node's supervisor folder) ends
    by itself within seconds; nothing is killed by name."""
    full_env = dict(os.environ, ROCM_CONSOLE_SIM_VLLM_SPEEDUP="20", **env)
    check = subprocess.Popen(
        [sys.executable, "-m", "console", "baseline", "check", "demo", "--demo", "--node", "mi300x-spx"],
        cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    pid = None
    try:
        deadline = time.monotonic() + 180
        while pid is None and time.monotonic() < deadline and check.poll() is None:
            for found in tmp_path.rglob("instances/baseline-*/pid"):
                text = found.read_text().strip()
                if text.isdigit() and _alive(int(text)):
                    pid = int(text)
            time.sleep(0.2)
        assert pid is not None, "the check's instance never started: " + (check.stdout.read() if check.poll() else "")
        check.send_signal(signal.SIGKILL)
        check.wait(10)
        deadline = time.monotonic() + 20
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pid), f"the instance {pid} outlived its killed check"
    finally:
        if check.poll() is None:
            check.kill()
        check.wait(10)
        if pid is not None and _alive(pid):  # leave nothing behind even when the test fails: by pid
            os.kill(pid, signal.SIGKILL)
