"""An experiment with `find_max = true` on a simulated MI300X node: each layout's fixed load
points are replaced by a find-max search of its replica group under the experiment's
budget; every point and each layout's answer are stored, the state keeps the answer, a
resumed run does not search a finished layout again, and the report has a row per layout."""

from __future__ import annotations

import pytest

from console.core.experiment.report import build_report
from console.core.experiment.spec import load_experiment, plan_points
from console.core.model import BenchPreset, Profile, ServePreset
from console.services.experiments import ExperimentRunner, group_name_for
from console.services.groups import GroupService
from console.services.results import ResultStore
from console.services.transports import TransportPool
from tests.helpers import free_port

PROFILE = Profile(
    serve_presets=(ServePreset(name="tiny", model="tiny-llama", args=("--enforce-eager",)),),
    bench_presets=(
        BenchPreset(
            name="tiny",
            input_len=32,
            output_len=16,
            num_prompts=8,
            ignore_eos=True,
            percentile_metrics="ttft,tpot,itl,e2el",
            request_rate=1.0,  # a concurrency search runs without it
        ),
    ),
)
EXPERIMENT = """
[experiment]
name = "sim-find-max"
serve = "tiny"
bench = "tiny"
num_prompts = 6
layouts = ["SPX tp1 x1", "SPX tp1 x2"]
find_max = true
find_max_budget = "loose"
find_max_max = 4

[[budget]]
name = "strict"
p99_ttft_ms = 0.001

[[budget]]
name = "loose"
p99_ttft_ms = 60000
"""


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


@pytest.mark.timeout(240)
async def test_find_max_replaces_the_load_points_per_layout(sim_node, tmp_path):
    node = sim_node("expfm")
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    exp = load_experiment(tmp_path / "exp.toml")
    assert [p.id for p in plan_points(exp)] == ["spx-tp1-x1@find-max", "spx-tp1-x2@find-max"]
    store = ResultStore(tmp_path / "data" / "results")
    pool = TransportPool()
    lines: list[str] = []
    try:
        runner = ExperimentRunner(pool, poll_every=0.3, stop_timeout=5, base_port=free_port(), store=store)
        state = await runner.run(exp, node, PROFILE, tmp_path / "s.json", on_event=lambda e: lines.append(e.line))
        assert state.finished and not state.failed_layouts, state.failed_layouts
        one, two = state.done["spx-tp1-x1@find-max"], state.done["spx-tp1-x2@find-max"]
        # x1 grows 1, 2, 4; x2 starts at its 2 replicas (each client needs one): 2, 4
        assert one["find_max_status"] == "never_broke" and one["find_max_load"] == 4 and one["find_max_runs"] == 3
        assert two["find_max_status"] == "never_broke" and two["find_max_load"] == 4 and two["find_max_runs"] == 2
        assert one["find_max_budget"] == "loose" and one["max_concurrency"] == 4
        assert "spx-tp1-x1@find-max: done  never_broke at concurrency 4.0" in "\n".join(lines)
        for summary, layout in ((one, "SPX tp1 ×1"), (two, "SPX tp1 ×2")):
            answer = store.get(summary["stored"])
            assert answer.context["run_kind"] == "find_max" and answer.context["layout"] == layout
            assert answer.context["find_max_points"] == summary["find_max_points"]
            assert answer.context["experiment"] == "sim-find-max"
            for rid in summary["find_max_points"]:  # each point: the group's merged result, stored
                point = store.get(rid)
                assert point.context["group"] == group_name_for(exp, exp.layouts[0 if layout.endswith("1") else 1])
                assert point.context["find_max"] == answer.context["find_max"]
            assert (
                summary["output_throughput"] == store.get(summary["find_max_points"][-1]).metrics["output_throughput"]
            )
        # a replica's own result is stored beside the merged one: 3 + 2 merged, 3 + 4 per replica, 2 answers
        assert len(store.ids()) == 3 + 2 + 3 + 4 + 2
        report = build_report(exp, state)
        assert len(report.rows) == 2 and report.winners[1].row is not None
        # the row names the load the search found (not the planned 0)
        assert {(r.load_kind, r.load) for r in report.rows} == {("concurrency", 4.0)}

        # resumed: both layouts are done, nothing is searched again
        lines.clear()
        again = await ExperimentRunner(pool, poll_every=0.3, base_port=free_port(), store=store).run(
            exp, node, PROFILE, tmp_path / "s.json", on_event=lambda e: lines.append(e.line)
        )
        assert again.done == state.done and not any(": benchmark" in line for line in lines)
    finally:
        for layout in exp.layouts:
            try:
                await GroupService(pool).stop([node], group_name_for(exp, layout), int_timeout=5)
            except Exception:
                pass
        await pool.close()
