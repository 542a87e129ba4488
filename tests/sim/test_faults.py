"""console/sim/faults.py: the faults file the simulators read, and its command."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from console.agent.sampling import HealthSpread
from console.sim import faults

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console.sim.faults", *args], cwd=ROOT, capture_output=True, text=True, timeout=30
    )


def test_add_list_clear_through_the_command(tmp_path):
    folder = str(tmp_path / "sim")
    assert cli(folder, "add", "3", "ecc_uncorrectable", "2").returncode == 0
    assert cli(folder, "add", "1", "pcie_degraded").returncode == 0
    listed = [json.loads(line) for line in cli(folder, "list").stdout.splitlines()]
    assert [(f["gpu"], f["kind"], f["count"]) for f in listed] == [(3, "ecc_uncorrectable", 2), (1, "pcie_degraded", 1)]
    assert json.loads(cli(folder, "clear", "3").stdout) == {"cleared": 1}
    assert [f["gpu"] for f in faults.read_faults(folder)] == [1]
    assert json.loads(cli(folder, "clear").stdout) == {"cleared": 1}
    assert faults.read_faults(folder) == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("add", "0", "meltdown"), "unknown fault kind 'meltdown'"),
        (("add", "x", "reset"), "GPU must be an integer"),
        (("add", "0", "reset", "0"), "count must be a positive integer"),
        (("frobnicate",), "usage:"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, says):
    proc = cli(str(tmp_path), *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and says in proc.stderr
    assert faults.read_faults(str(tmp_path)) == []


def test_the_view_rereads_only_a_changed_file_and_survives_a_broken_one(tmp_path):
    view = faults.FaultView(str(tmp_path))
    view.RECHECK_S = 0.0  # stat at every call here (the simulators stat at most every 50 ms)
    assert view.current() == []
    faults.add_fault(str(tmp_path), 2, "xgmi_down", 3)
    assert view.count(2, "xgmi_down") == 3 and view.count(1, "xgmi_down") == 0
    (tmp_path / faults.FAULTS_FILE).write_text("{not json")
    assert view.count(2, "xgmi_down") == 3  # a half-written file by hand: the last good list
    (tmp_path / faults.FAULTS_FILE).write_text(
        json.dumps({"faults": [{"gpu": 0, "kind": "nonsense"}, {"gpu": 0, "kind": "reset"}]})
    )
    assert [f["kind"] for f in view.current()] == ["reset"]  # unknown kinds are ignored


@pytest.mark.parametrize(
    ("n", "tick", "interval"),
    [(8, 1.0, 10.0), (8, 0.1, 0.5), (1, 1.0, 10.0), (64, 1.0, 10.0), (3, 1.0, 2.0), (2, 1.0, 0.5)],
)
def test_the_spread_reads_every_gpu_once_per_interval_never_in_a_burst(n, tick, interval):
    spread = HealthSpread(tick, interval)
    ticks = max(1, round(interval / tick))
    picks = [spread.picks(n) for _ in range(ticks * 4)]
    most = min(n, math.ceil(n * tick / interval))
    assert max(len(p) for p in picks) <= most
    assert picks[0], "the first tick reads at once"
    for start in range(0, len(picks) - ticks + 1, ticks):  # every window of one interval
        window = [p for tick_picks in picks[start : start + ticks] for p in tick_picks]
        assert sorted(window) == sorted(range(n)) * (len(window) // n) and len(window) >= n
