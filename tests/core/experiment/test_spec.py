"""Experiment files: loading, refusal of layouts that cannot fit, the plan, resumable state, the report."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from console.core.experiment.report import build_report
from console.core.experiment.spec import (
    ExperimentError,
    ExperimentState,
    load_experiment,
    load_state,
    plan_points,
    save_state,
    split_evenly,
    validate,
)
from console.core.profiles import load_profile

ROOT = Path(__file__).resolve().parents[3]
SEED_FILE = ROOT / "profiles" / "experiments" / "llama-3.1-8b-layouts.toml"
PRESETS = load_profile([ROOT / "profiles" / "presets.toml"])


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(body)
    return path


def test_the_seed_experiment_loads_validates_and_plans():
    exp = load_experiment(SEED_FILE)
    assert [layout.label for layout in exp.layouts] == ["SPX tp8 ×1", "SPX tp1 ×8", "CPX-NPS1 tp1 ×64"]
    assert exp.layouts[2].serve == "llama-3.1-8b-fp8-cpx" and exp.layouts[0].serve == "llama-3.1-8b-fp8"
    assert validate(exp, PRESETS, physical_gpus=8, current_memory="NPS1") == []
    points = plan_points(exp)
    assert [p.id for p in points[:3]] == ["spx-tp8-x1@c64", "spx-tp8-x1@c256", "spx-tp8-x1@c1024"]
    assert len(points) == 9 and [b.name for b in exp.budgets] == ["interactive", "batch"]


def test_layouts_that_cannot_fit_are_refused_one_line_each(tmp_path):
    path = write(
        tmp_path,
        """
[experiment]
serve = "llama-3.1-8b-fp8"
bench = "tiny"
concurrency = [64]
layouts = ["SPX tp16 x1", "CPX tp2 x32", "SPX tp1 x9", "CPX-NPS2 tp1 x8", "CPX tp1 x128", {layout = "SPX tp1 x1", serve = "nope"}]
""",
    )
    exp = load_experiment(path)
    problems = validate(exp, PRESETS, physical_gpus=8, current_memory="NPS1", node="n1")
    assert problems == [
        f"{path}: layout \"SPX tp16 x1\" key 'layout': TP 16 > 8 GPUs in SPX on n1 (8 physical × 1)",
        f"{path}: layout \"CPX tp2 x32\" key 'layout': TP 2 in CPX: a CPX partition runs TP 1 only",
        f"{path}: layout \"SPX tp1 x9\" key 'layout': 9 replicas of TP 1 need 9 GPUs, SPX on n1 has 8",
        f"{path}: layout \"CPX-NPS2 tp1 x8\" key 'layout': CPX needs NPS1/NPS4, the memory mode would be NPS2",
        f"{path}: layout \"CPX tp1 x128\" key 'layout': 128 replicas of TP 1 need 128 partitions, CPX on n1 has 64",
        f"{path}: layout \"CPX tp1 x128\" key 'concurrency': 64 is fewer than its 128 replicas "
        "(each replica's client needs at least 1)",
        f"{path}: layout \"SPX tp1 x1\" key 'layout.serve': unknown serve preset 'nope' (known: "
        + ", ".join(sorted(p.name for p in PRESETS.serve_presets))
        + ")",
    ]


def test_bad_file_lines_name_file_and_key(tmp_path):
    path = write(
        tmp_path,
        """
[experiment]
serve = "tiny"
concurrency = [0]
layouts = ["SPX tp one x8"]
colour = "red"
[[budget]]
p99_ttf_ms = 3
""",
    )
    with pytest.raises(ExperimentError) as err:
        load_experiment(path)
    lines = err.value.problems
    assert f"{path}: [experiment] key 'colour': unknown key" in lines[0]
    assert any(line.startswith(f"{path}: [experiment] key 'bench'") for line in lines)
    assert f"{path}: [experiment] key 'concurrency': expected a list of positive integers" in lines
    assert any(line.startswith(f"{path}: layout 1 key 'layout': expected COMPUTE[-NPS] tpN xR") for line in lines)
    assert any("[[budget]] budget 1 key 'p99_ttf_ms': unknown limit" in line for line in lines)
    assert all("\n" not in line for line in lines)


@pytest.mark.parametrize(
    ("load", "key"),
    [
        ("concurrency = [8, 99999999999]", "concurrency"),
        ("concurrency = [8]\nnum_prompts = 99999999999999999999", "num_prompts"),
        ("rate = [1e300]", "rate"),
        ('find_max = true\nfind_max_max = 1e12\nfind_max_budget = "b"', "find_max_max"),
    ],
)
def test_loads_past_the_documented_bounds_are_one_line_naming_the_key(tmp_path, load, key):
    """W2: an experiment's integer and rate settings have the bounds of --set (core/bounds.py)."""
    path = write(
        tmp_path,
        f"""
[experiment]
serve = "tiny"
bench = "tiny"
{load}
layouts = ["SPX tp1 x1"]
[[budget]]
name = "b"
p99_ttft_ms = 2000
""",
    )
    with pytest.raises(ExperimentError) as err:
        load_experiment(path)
    [line] = [line for line in err.value.problems if f"'{key}'" in line]
    assert line.startswith(f"{path}: ") and ("past" in line or "at most" in line or "from 1 to" in line), line


def test_split_evenly():
    assert split_evenly(10, 4) == [3, 3, 2, 2] and sum(split_evenly(1024, 64)) == 1024


def result(tok_s: float, p99_ttft: float, p99_itl: float, failed: int = 0) -> dict:
    return {
        "completed": 100,
        "failed": failed,
        "output_throughput": tok_s,
        "total_token_throughput": tok_s * 2,
        "request_throughput": tok_s / 100,
        "p99_ttft_ms": p99_ttft,
        "median_ttft_ms": p99_ttft / 2,
        "p99_itl_ms": p99_itl,
        "nodes": 1,
    }


def test_state_resumes_and_report_picks_front_and_budget_winners(tmp_path):
    exp = load_experiment(SEED_FILE)
    points = plan_points(exp)
    state = ExperimentState(experiment=exp.name, node="n1")
    # tp8 x1: low latency, low throughput; tp1 x8: more of both; CPX failed to start
    measured = {
        "spx-tp8-x1@c64": result(3000, 500, 20),
        "spx-tp8-x1@c256": result(5000, 1500, 40),
        "spx-tp1-x8@c64": result(6000, 400, 30),  # beats tp8 at c64 on both axes
        "spx-tp1-x8@c256": result(12000, 1900, 45),
        "spx-tp1-x8@c1024": result(20000, 9000, 120),
    }
    by_id = {p.id: p for p in points}
    for pid, summary in measured.items():
        state = state.with_done(by_id[pid], summary)
    state = state.with_layout_failed(exp.layouts[2], "cpx-nps1-tp1-x64-r3: out of memory")
    path = tmp_path / "state.json"
    save_state(path, state)
    again = load_state(path, exp, "n1")
    assert again == state
    # only the tp8 c1024 point is left: done points and the failed layout are not rerun
    assert [p.id for p in again.remaining(points)] == ["spx-tp8-x1@c1024"]
    with pytest.raises(ValueError, match="not llama-3.1-8b-layouts on other"):
        load_state(path, exp, "other")

    report = build_report(exp, again)
    assert [r.point for r in report.pareto] == ["spx-tp1-x8@c64", "spx-tp1-x8@c256", "spx-tp1-x8@c1024"]
    [interactive, batch] = report.winners
    assert interactive.row is not None and interactive.row.point == "spx-tp1-x8@c256"
    assert batch.row is None  # no point recorded E2EL: an unmeasured latency never passes a budget
    md = report.to_markdown(chart="chart here")
    assert "| interactive (p99 TTFT ≤ 2 s, p99 ITL ≤ 50 ms) | SPX tp1 ×8 | concurrency 256 | 12000.0 |" in md
    assert "| batch (p99 E2EL ≤ 60 s) | none meets it | | |" in md
    assert "Failed: cpx-nps1-tp1-x64-r3: out of memory" in md and "chart here" in md
    rows = list(csv.DictReader(io.StringIO(report.to_csv())))
    assert len(rows) == 5 and rows[2]["layout"] == "SPX tp1 ×8" and rows[2]["pareto"] == "yes"
    assert json.loads(path.read_text())["failed_layouts"] == {"cpx-nps1-tp1-x64": "cpx-nps1-tp1-x64-r3: out of memory"}


def test_report_gains_energy_front_and_the_most_efficient_layout_per_budget():
    exp = load_experiment(SEED_FILE)
    by_id = {p.id: p for p in plan_points(exp)}
    state = ExperimentState(experiment=exp.name, node="n1")
    # tp8 at c256 meets the interactive budget more cheaply per token than the faster tp1 x8
    measured = {
        "spx-tp8-x1@c64": {**result(3000, 500, 20), "tokens_per_joule": 0.8, "avg_power_w": 3750.0},
        "spx-tp8-x1@c256": {**result(5000, 1500, 40), "tokens_per_joule": 1.4, "throttled_pct": 12.5},
        "spx-tp1-x8@c64": {**result(6000, 400, 30), "tokens_per_joule": 1.1},
        "spx-tp1-x8@c256": {**result(12000, 1900, 45), "tokens_per_joule": 1.2, "client_bound": True},
        "spx-tp1-x8@c1024": result(20000, 9000, 120),  # no energy recorded
    }
    for pid, summary in measured.items():
        state = state.with_done(by_id[pid], summary)
    report = build_report(exp, state)
    interactive = report.winners[0]
    assert interactive.row.point == "spx-tp1-x8@c256"  # the fastest within the budget
    assert interactive.efficient.point == "spx-tp8-x1@c256"  # the most tokens per joule within it
    # the energy front: nothing beats these on both tok/s per node and tokens/J; no-energy rows left out
    assert [r.point for r in report.energy_pareto] == ["spx-tp8-x1@c256", "spx-tp1-x8@c256"]
    md = report.to_markdown()
    assert "| SPX tp1 ×8 | concurrency 256 | 12000.0 | 1.2 | SPX tp8 ×1 | concurrency 256 | 5000.0 | 1.4 |" in md
    assert "## Energy front (tok/s per node vs output tokens per joule)" in md
    assert "| 0 | 1.2 |  | client-bound |" in md and "| 0 | 1.4 | 12.5 |  |" in md  # per layout
    rows = {r["load"] + r["layout"]: r for r in csv.DictReader(io.StringIO(report.to_csv()))}
    row = rows["256SPX tp1 ×8"]
    assert row["tokens_per_joule"] == "1.2" and row["client_bound"] == "true" and row["energy_pareto"] == "yes"
    assert rows["1024SPX tp1 ×8"]["tokens_per_joule"] == "" and rows["1024SPX tp1 ×8"]["energy_pareto"] == ""
