"""Issue B2: an experiment's report shows each point's goodput beside its throughput (per
layout, on the Pareto front, in the CSV) and its prefix-cache share, with the warning of a point
meant cold that the cache served."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from console.core.experiment.report import build_report
from console.core.experiment.spec import ExperimentState, load_experiment, plan_points

SEED_FILE = Path(__file__).resolve().parents[3] / "profiles" / "experiments" / "llama-3.1-8b-layouts.toml"
WARNING = "62 % of prompt tokens came from the prefix cache: TTFT and throughput are not cold figures"


def summary(tok_s: float, p99_ttft: float, **extra) -> dict:
    return {
        "completed": 100,
        "failed": 0,
        "output_throughput": tok_s,
        "total_token_throughput": tok_s * 2,
        "request_throughput": tok_s / 100,
        "p99_ttft_ms": p99_ttft,
        "p99_itl_ms": 20.0,
        "nodes": 1,
        **extra,
    }


def test_the_report_shows_goodput_and_the_prefix_share_of_each_point():
    exp = load_experiment(SEED_FILE)
    by_id = {p.id: p for p in plan_points(exp)}
    state = ExperimentState(experiment=exp.name, node="n1")
    measured = {
        "spx-tp8-x1@c64": summary(3000, 500, goodput_pct=97.5, prefix_cache_hit_pct=1.5),
        "spx-tp1-x8@c64": summary(
            6000, 400, goodput_pct=81.25, prefix_cache_hit_pct=62.0, prefix_cache_warning=WARNING
        ),
        "spx-tp1-x8@c256": summary(12000, 1900),  # no SLO, no counters: blank, never 0
    }
    for pid, doc in measured.items():
        state = state.with_done(by_id[pid], doc)
    report = build_report(exp, state)
    md = report.to_markdown()
    assert "| SPX tp1 ×8 | concurrency 64 | 6000.0 | 81.2 |" in md  # the Pareto front: goodput beside tok/s
    assert "| concurrency 64 | 6000.0 | 6000.0 | 60.00 | 81.2 | 62.0 |" in md  # the layout's curve
    assert f"WARNING: SPX tp1 ×8 at concurrency 64: {WARNING}" in md
    assert md.count("WARNING:") == 1
    rows = {r["load"] + r["layout"]: r for r in csv.DictReader(io.StringIO(report.to_csv()))}
    assert rows["64SPX tp8 ×1"]["goodput_pct"] == "97.5" and rows["64SPX tp8 ×1"]["prefix_cache_hit_pct"] == "1.5"
    assert rows["256SPX tp1 ×8"]["goodput_pct"] == "" and rows["256SPX tp1 ×8"]["prefix_cache_hit_pct"] == ""
