"""Issue B2: the shipped `trace-replay` preset runs on the demo's simulated node: the console
converts the kept trace, uploads it beside the node's state and `vllm bench serve` replays it
(timed_trace); a trace file that cannot be read stops the run with one line, nothing started."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from console.core.profiles import load_profile
from console.services.instances import InstanceView
from console.services.runs.serving import BenchRunError, BenchRunner
from console.services.transports import TransportPool
from tests.helpers import free_port
from tests.services.test_bench import start_instance

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"trace_max_input": "128", "trace_speedup": "20", "num_prompts": "20"}


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


@pytest.fixture(scope="module")
def preset():
    return {p.name: p for p in load_profile([ROOT / "profiles" / "presets.toml"]).bench_presets}["trace-replay"]


async def test_trace_replay_runs_on_the_demo(sim_node, preset):
    node = sim_node("t1")
    pool = TransportPool()
    svc, view = await start_instance(pool, node, free_port(), "t1")
    try:
        outcome = await BenchRunner(pool, metrics_interval=0.2, record_telemetry=False).run(
            node, view, preset, overrides=SMALL
        )
    finally:
        await svc.stop(node, "t1", int_timeout=5)
        await pool.close()
    assert outcome.ok, outcome.failure
    argv = list(outcome.argv)
    assert argv[argv.index("--dataset-name") + 1] == "timed_trace"
    path = Path(argv[argv.index("--dataset-path") + 1])
    assert path.parent.name == "datasets" and path.name.startswith("trace-")
    sent = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(sent) == 20 and max(s["input_length"] for s in sent) <= 128
    result = outcome.result_json
    assert result["completed"] == 20
    # the trace's first 20 arrivals (8.0 s as recorded) at 20x: the run lasts at least 0.4 s
    assert result["duration"] >= sent[-1]["timestamp"] >= 0.39


async def test_an_unreadable_trace_is_one_line_before_anything_starts(sim_node, preset, tmp_path):
    node = sim_node("t2")
    pool = TransportPool()
    try:
        runner = BenchRunner(pool, record_telemetry=False)
        view = InstanceView(node="t2", name="x", state="running", port=free_port(), model="/srv/models/tiny-llama")
        with pytest.raises(BenchRunError) as info:
            await runner.start(node, view, dataclasses.replace(preset, trace=str(tmp_path / "gone.csv")))
        assert str(info.value) == (
            f"bench preset trace-replay: trace file {tmp_path / 'gone.csv'}: cannot read (No such file or directory)"
        )
        assert await runner.records(node) == []
    finally:
        await pool.close()
