"""The history list shows goodput and the prefix cache's share beside throughput (issue B2):
each column only when a listed run has it, a cold run served from the cache marked '!'."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from console.core.results.build import run_from_console
from console.ui.model.history_view import columns_for, run_cells

ROOT = Path(__file__).resolve().parents[2]
RESULT = json.loads((ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "bench_result.json").read_text())


def test_good_and_cached_columns_appear_with_runs_that_have_them():
    plain = run_from_console({"node": "mi300x-07"}, RESULT, created=time.time())
    assert not {"good", "cached"} & {key for key, _ in columns_for([plain])}
    warm_cold = dataclasses.replace(plain, goodput={"goodput_pct": 91.0}, prefix_cache={"hit_pct": 73.4, "cold": True})
    keys = [key for key, _ in columns_for([plain, warm_cold])]
    assert keys.index("tput") < keys.index("good") < keys.index("cached")
    assert run_cells(warm_cold)["good"] == "91" and run_cells(warm_cold)["cached"] == "73!"
    warm = dataclasses.replace(warm_cold, prefix_cache={"hit_pct": 73.4, "cold": False})  # warm by design
    assert run_cells(warm)["cached"] == "73" and run_cells(plain)["cached"] == "-"
