"""`results list` shows goodput against the SLO and the prefix-cache share beside throughput
(issue B2), and marks a run meant to be cold whose prompts came from the cache with '!'."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from console.core.results.build import run_from_console
from console.services.history import History
from tests.cli.cli_helpers import run

ROOT = Path(__file__).resolve().parents[2]


def test_goodput_and_cached_share_are_columns_and_a_warm_cold_run_is_marked(tmp_path):
    data = tmp_path / "data"
    result = json.loads((ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "bench_result.json").read_text())
    history = History(None, data)
    base = run_from_console({"node": "mi300x-07"}, result, created=time.time() - 60)
    warm = dataclasses.replace(base, goodput={"goodput_pct": 87.5}, prefix_cache={"hit_pct": 64.2, "cold": True})
    history.runs.save(warm)
    other = {**result, "output_throughput": result["output_throughput"] / 2}  # another result, not a duplicate
    history.runs.save(run_from_console({"node": "mi300x-08"}, other, created=time.time() - 30))
    history.close()
    env = {"HOME": str(tmp_path), "ROCM_CONSOLE_DATA_DIR": str(data), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    proc = run("results", "list", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    head, *rows = proc.stdout.splitlines()
    cols = head.split()
    assert cols[cols.index("ITL") + 2 : cols.index("ITL") + 5] == ["GOOD", "%", "CACHED"]
    by_node = {r.split()[3]: r for r in rows}  # ID, DATE (day and time), NODE
    assert " 87.5 " in by_node["mi300x-07"] and " 64.2! " in by_node["mi300x-07"]
    assert " 87.5 " not in by_node["mi300x-08"] and "64.2" not in by_node["mi300x-08"]
