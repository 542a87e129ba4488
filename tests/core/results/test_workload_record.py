"""Issue B2: a stored run's prefix-cache share and goodput, in its record, `results show`'s
lines, compare and the history list; records written before them load unchanged."""

from __future__ import annotations

import json

from console.core.bench.goodput import Slo, goodput_json, goodput_of
from console.core.bench.prefix_cache import PrefixCacheWindow, prefix_cache_json
from console.core.bench.result import normalize_result
from console.core.results.build import run_from_console
from console.core.results.compare import compare_table, prefix_cache_warnings
from console.core.results.display import energy_text, run_summary
from console.core.results.record import run_from_dict, run_to_dict
from console.ui.model.compare_view import compare_cell
from console.ui.model.history_view import columns_for, run_cells
from tests.core.results.results_helpers import CPU, NOW, make_run

WARNING = "62 % of prompt tokens came from the prefix cache: TTFT and throughput are not cold figures"


def stored(hit_pct: float, cold: bool, slo: Slo | None = None):
    result = json.loads((CPU / "bench_result.json").read_text())
    window = PrefixCacheWindow(queries=1000.0, hits=hit_pct * 10, metric="vllm:prefix_cache_queries")
    good = goodput_json(slo, goodput_of(normalize_result(result), slo)) if slo else None
    return run_from_console(
        {"node": "n1"},
        result,
        created=NOW,
        prefix_cache=prefix_cache_json(
            window,
            cold=cold,
            cold_start="reset",
            cold_start_done="fresh-seed",
            cold_start_note="the server has no /reset_prefix_cache; ran with a fresh seed 7",
        ),
        goodput=good,
    )


def test_record_carries_the_share_warning_and_goodput_and_reads_back():
    run = stored(62.0, cold=True, slo=Slo(e2e_ms=300))
    data = json.loads(json.dumps(run_to_dict(run)))
    assert data["prefix_cache_hit_pct"] == 62.0 and data["prefix_cache_warning"] == WARNING
    # the sample's 50 latencies: those within 300 ms are good (counted, not vLLM's null goodput)
    latencies = json.loads((CPU / "bench_result.json").read_text())["latencies"]
    within = sum(1 for x in latencies if x * 1000 <= 300)
    assert 0 < within < 50
    assert data["goodput_pct"] == 100.0 * within / 50
    back = run_from_dict(data)
    assert back.prefix_cache == run.prefix_cache and back.goodput == run.goodput
    assert back.prefix_cache_warning == WARNING and back.goodput_pct == run.goodput_pct


def test_an_old_record_loads_unchanged():
    old = run_to_dict(make_run("old", {"output_throughput": 1.0}))
    for key in ("prefix_cache", "goodput", "prefix_cache_hit_pct", "prefix_cache_warning", "goodput_pct", "good_rps"):
        old.pop(key)
    back = run_from_dict(old)
    assert back.prefix_cache is None and back.goodput is None and back.prefix_cache_warning is None
    assert run_summary(back)["goodput_pct"] is None and energy_text(back) == []


def test_results_show_lines():
    lines = energy_text(stored(62.0, cold=True, slo=Slo(e2e_ms=300)))
    text = "\n".join(lines)
    assert "Goodput" in text and "SLO E2E ≤ 300" in text
    assert "62.00 % of prompt tokens from the cache (meant cold)" in text
    assert "cold start reset: fresh-seed" in text and "ran with a fresh seed 7" in text
    assert f"WARNING: {WARNING}" in lines
    warm = "\n".join(energy_text(stored(90.0, cold=False)))
    assert "not meant cold" in warm and "WARNING" not in warm


def test_compare_and_history_show_goodput_and_the_warning():
    cold, warm = stored(62.0, cold=True, slo=Slo(e2e_ms=300)), stored(2.0, cold=True, slo=Slo(e2e_ms=300))
    cold = cold.__class__(**{**cold.__dict__, "id": "a"})
    warm = warm.__class__(**{**warm.__dict__, "id": "b"})
    rows = {r["key"]: r for r in compare_table([cold, warm])}
    assert rows["goodput_pct"]["values"] == [cold.goodput_pct, warm.goodput_pct]
    assert rows["prefix_cache_hit_pct"]["values"] == [62.0, 2.0]
    assert rows["prefix_cache_warning"]["values"] == ["NOT COLD (62 % cached)", "cold"]
    assert compare_cell(rows["prefix_cache_warning"], 0, {}).style == "bold red"
    assert prefix_cache_warnings([cold, warm]) == [f"a: {WARNING}"]
    assert ("good", "Good %") in columns_for([cold])
    assert ("good", "Good %") not in columns_for([make_run("x", {})])
    assert run_cells(cold)["good"] == f"{cold.goodput_pct:.0f}"


def test_a_hostile_record_is_shown_without_a_traceback():
    doc = run_to_dict(make_run("x", {}))
    doc["goodput"] = {"slo": ["not", "a", "table"], "goodput_pct": "x", "good": {}}
    doc["prefix_cache"] = {"hit_pct": "nan", "cold": True, "cold_start": {"a": 1}, "cold_start_note": "\x1b[31mred"}
    run = run_from_dict(doc)
    lines = energy_text(run)
    assert lines[0].startswith("Goodput  - %") and "SLO -" in lines[0]
    assert not any("\x1b" in line or line.startswith("WARNING") for line in lines)
    doc["goodput"] = {"slo": {"ttft_ms": "abc"}}
    assert "TTFT ≤ abc ms" in energy_text(run_from_dict(doc))[0]
