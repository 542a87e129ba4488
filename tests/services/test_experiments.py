"""A whole three-layout experiment on a simulated MI300X node: partition switches, groups,
group benchmarks, the report; killed mid-way and resumed without rerunning finished points."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from console.core.experiment.report import build_report
from console.core.experiment.spec import ExperimentError, load_experiment, load_state, plan_points
from console.core.model import BenchPreset, Profile, ServePreset
from console.services.events import EventLog
from console.services.experiments import ExperimentRunner, group_name_for
from console.services.groups import GroupService
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.transport.base import TransportError
from console.transport.local import LocalTransport
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
            request_rate=1.0,  # concurrency points run without it
        ),
    ),
)
EXPERIMENT = """
[experiment]
name = "sim-layouts"
serve = "tiny"
bench = "tiny"
concurrency = [4, 8]
num_prompts = 8
layouts = ["SPX tp2 x1", "SPX tp1 x4", "CPX tp1 x4"]

[[budget]]
name = "loose"
p99_ttft_ms = 60000
"""


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


def set_sim_state(tmp_path, name, **changes):
    path = tmp_path / "state" / "sim" / name / "state.json"
    state = json.loads(path.read_text())
    state.update(changes)
    path.write_text(json.dumps(state))


@pytest.mark.timeout(300)
async def test_three_layouts_killed_and_resumed(sim_node, tmp_path):
    node = sim_node("exp")
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    exp = load_experiment(tmp_path / "exp.toml")
    state_path = tmp_path / "exp-state.json"
    pool = TransportPool()
    try:
        await sample_node(pool, node, probe=False)  # creates the simulated node's state
        set_sim_state(tmp_path, "exp", switch_seconds=0.05)
        lines: list[str] = []
        runner = ExperimentRunner(pool, poll_every=0.3, stop_timeout=5, base_port=free_port())

        def seen(event):
            lines.append(event.line)

        # first run: killed (task cancelled) right after the first point finished
        task = asyncio.create_task(runner.run(exp, node, PROFILE, state_path, on_event=seen))
        for _ in range(600):
            await asyncio.sleep(0.1)
            if any(line.startswith("spx-tp2-x1@c4: done") for line in lines):
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        first = load_state(state_path, exp, "exp")
        assert list(first.done) == ["spx-tp2-x1@c4"] and not first.finished
        first_runs = [r["run"] for r in first.done["spx-tp2-x1@c4"]["per_replica"]]
        # the cancelled run stopped its group: nothing left running on the node
        assert all(g.ready == 0 for g in await GroupService(pool).groups([node]))

        # resumed: the finished point is not run again, the rest are, with the switch to CPX
        lines.clear()
        log = EventLog(tmp_path / "events.jsonl")
        state = await ExperimentRunner(
            pool, poll_every=0.3, stop_timeout=5, base_port=free_port(), timeline=log.append
        ).run(exp, node, PROFILE, state_path, on_event=seen)
        assert lines[0] == "resuming: 1 of 6 points done, 5 left"
        assert not any(line.startswith("spx-tp2-x1@c4:") for line in lines)
        assert state.finished and set(state.done) == {p.id for p in plan_points(exp)}, state.failed_layouts
        assert [r["run"] for r in state.done["spx-tp2-x1@c4"]["per_replica"]] == first_runs
        assert any("partition SPX → CPX" in line for line in lines)
        assert any(line.startswith("layout CPX tp1 ×4: partition verified") for line in lines)
        snap = await sample_node(pool, node, probe=False)
        # put back as it was before the run (restore_partition defaults to true), and said so
        assert len(snap.static) == 8 and {g.compute_partition for g in snap.static} == {"SPX"}
        restored = "partition restored to SPX/NPS1 on GPU 0-7 (verified) as before the experiment"
        assert restored in lines
        switched = [e.message for e in reversed(log.read(kind="partition"))]
        assert switched == [
            "partition switched to CPX on GPUs 0,1,2,3,4,5,6,7",
            "partition restored to SPX on GPUs 0,1,2,3,4,5,6,7 (experiment sim-layouts)",
        ]
        cpx = state.done["cpx-tp1-x4@c8"]
        assert cpx["completed"] == 8 and len(cpx["per_replica"]) == 4
        assert cpx["request_rate"] == "inf" and cpx["max_concurrency"] == 8
        assert [r["max_concurrency"] for r in cpx["per_replica"]] == [2, 2, 2, 2]
        assert cpx["output_throughput"] == pytest.approx(sum(r["output_throughput"] for r in cpx["per_replica"]))

        report = build_report(exp, state)
        assert len(report.rows) == 6 and report.pareto and report.winners[0].row is not None
        md = report.to_markdown()
        assert "### CPX tp1 ×4 (preset `tiny`)" in md and "| concurrency 8 |" in md
        assert f"After the run: {restored}." in md

        # a third run has nothing left to do
        lines.clear()
        again = await ExperimentRunner(pool, poll_every=0.3, base_port=free_port()).run(
            exp, node, PROFILE, state_path, on_event=seen
        )
        assert again.done == state.done and not any(": benchmark" in line for line in lines)
    finally:
        for layout in exp.layouts:
            try:
                await GroupService(pool).stop([node], group_name_for(exp, layout), int_timeout=5)
            except Exception:
                pass
        await pool.close()


@pytest.mark.timeout(120)
async def test_a_layout_that_fails_is_recorded_and_the_rest_go_on(sim_node, tmp_path):
    base = sim_node("expfail")
    # foreign work on GPUs 2-7: two TP-1 replicas fit on 0 and 1, two TP-2 replicas do not
    node = dataclasses.replace(base, simulate=dataclasses.replace(base.simulate, busy=(2, 3, 4, 5, 6, 7)))
    (tmp_path / "exp.toml").write_text(
        EXPERIMENT.replace('["SPX tp2 x1", "SPX tp1 x4", "CPX tp1 x4"]', '["SPX tp1 x2", "SPX tp2 x2"]').replace(
            "[4, 8]", "[4]"
        )
    )
    exp = load_experiment(tmp_path / "exp.toml")
    pool = TransportPool()
    try:
        state = await ExperimentRunner(pool, poll_every=0.3, stop_timeout=5, base_port=free_port()).run(
            exp, node, PROFILE, tmp_path / "s.json"
        )
        assert list(state.done) == ["spx-tp1-x2@c4"]
        assert state.failed_layouts["spx-tp2-x2"].startswith("2 replicas of TP 2 need 4 free GPUs")
        md = build_report(exp, state).to_markdown()
        assert "Failed: 2 replicas of TP 2 need 4 free GPUs" in md
    finally:
        await pool.close()


async def test_busy_gpus_are_named_and_a_run_none_fits_is_refused(sim_node, tmp_path):
    """U2: the check said "3 layouts fit" on a node whose GPUs were busy, then every layout
    failed within 2 s. Now it says which fit and what holds the GPUs; a run where none fits is
    refused with that list before anything starts."""
    base = sim_node("expbusy")
    node = dataclasses.replace(base, simulate=dataclasses.replace(base.simulate, busy=tuple(range(8))))
    (tmp_path / "exp.toml").write_text(
        EXPERIMENT.replace('["SPX tp2 x1", "SPX tp1 x4", "CPX tp1 x4"]', '["SPX tp1 x4", "CPX tp1 x4"]')
    )
    exp = load_experiment(tmp_path / "exp.toml")
    pool = TransportPool()
    try:
        runner = ExperimentRunner(pool)
        snapshot = await runner.check(exp, node, PROFILE)
        busy = await runner.occupancy(exp, node, snapshot)
        fit, lines = busy.fit_lines(exp, snapshot)
        assert fit == 0
        assert lines[:3] == [
            "0 of 2 layouts fit expbusy now:",
            "  SPX tp1 ×4: needs 4 free GPUs, 0 are free",
            "  CPX tp1 ×4: its partition switch needs every GPU free (GPU 0-7 busy)",
        ]
        assert lines[3] == "expbusy: GPU 0-7 busy: 8 processes would have to stop first"
        assert lines[4].startswith("  GPU 0: process ")
        with pytest.raises(ExperimentError) as refused:
            await runner.run(exp, node, PROFILE, tmp_path / "s.json")
        assert refused.value.problems == lines
        assert not (tmp_path / "s.json").exists()  # nothing started, nothing to resume
    finally:
        await pool.close()


async def test_refused_before_anything_starts(sim_node, tmp_path):
    node = sim_node("exprefuse")
    path = tmp_path / "bad.toml"
    path.write_text(EXPERIMENT.replace('"CPX tp1 x4"', '"CPX tp2 x4"'))
    exp = load_experiment(path)
    pool = TransportPool()
    try:
        with pytest.raises(ExperimentError) as err:
            await ExperimentRunner(pool).run(exp, node, PROFILE, tmp_path / "s.json")
        assert err.value.problems == [
            f"{path}: layout \"CPX tp2 x4\" key 'layout': TP 2 in CPX: a CPX partition runs TP 1 only"
        ]
        assert not (tmp_path / "s.json").exists()
        assert await GroupService(pool).groups([node]) == []
    finally:
        await pool.close()


class LinkDropsOnce(LocalTransport):
    """The link to the node fails once, on the telemetry sample taken after the first layout."""

    def __init__(self, name):
        super().__init__(name)
        self.samples = 0
        self.dropped = False

    async def run(self, argv, **kw):
        if "telemetry" in argv:
            self.samples += 1
            if self.samples == 3 and not self.dropped:  # check, first layout's end, ...
                self.dropped = True
                raise TransportError(f"{self.node_name}: connection lost", "closed")
        return await super().run(argv, **kw)


@pytest.mark.timeout(180)
async def test_a_dropped_link_is_survived_by_resuming(sim_node, tmp_path):
    node = sim_node("explink")
    (tmp_path / "exp.toml").write_text(
        EXPERIMENT.replace('["SPX tp2 x1", "SPX tp1 x4", "CPX tp1 x4"]', '["SPX tp1 x1", "SPX tp1 x2"]').replace(
            "[4, 8]", "[2]"
        )
    )
    exp = load_experiment(tmp_path / "exp.toml")
    transport = LinkDropsOnce("explink")
    pool = TransportPool(lambda n: transport)
    lines: list[str] = []
    try:
        state = await ExperimentRunner(pool, poll_every=0.3, stop_timeout=5, base_port=free_port()).run(
            exp,
            node,
            PROFILE,
            tmp_path / "s.json",
            on_event=lambda e: lines.append(e.line),
            link_retries=10,
            backoff=0.1,
        )
    finally:
        await pool.close()
    assert transport.dropped
    assert any(line.startswith("link to explink lost (explink: connection lost): resuming") for line in lines)
    assert state.finished and set(state.done) == {"spx-tp1-x1@c2", "spx-tp1-x2@c2"}
    assert [line for line in lines if line.endswith(": benchmark")] == [
        "spx-tp1-x1@c2: benchmark",
        "spx-tp1-x2@c2: benchmark",
    ]
