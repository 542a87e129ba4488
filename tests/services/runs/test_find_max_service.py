"""FindMaxService against the simulated node (fake `vllm serve` and `vllm bench serve` over
LocalTransport): every point a stored serving run, the answer one stored result linking
them; a point that writes no result stops the search with one line naming the load."""

from __future__ import annotations

import dataclasses

import pytest

from console.core.bench.find_max import SearchSpec, parse_budget
from console.core.model import BenchPreset, ServePreset
from console.services.events import EventLog
from console.services.instances import InstanceService
from console.services.results import ResultStore
from console.services.runs.find_max import (
    FindMaxError,
    FindMaxFinished,
    FindMaxPointMeasured,
    FindMaxService,
    FindMaxStarted,
    is_answer,
)
from console.services.status import sample_node
from console.services.transports import TransportPool
from tests.helpers import free_port

TINY_SERVE = ServePreset(name="tiny", model="tiny-llama")
TINY_BENCH = BenchPreset(
    name="tiny",
    dataset="random",
    input_len=32,
    output_len=16,
    num_prompts=40,
    max_concurrency=(4,),
    request_rate=2.0,  # a concurrency point runs without it
    ignore_eos=True,
    percentile_metrics="ttft,tpot,itl,e2el",
)


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


async def start_instance(pool, node, name):
    svc = InstanceService(pool)
    snap = await sample_node(pool, node, probe=False)
    await svc.start(node, TINY_SERVE, gpus=[1], snapshot=snap, port=free_port(), name=name)
    return svc, await svc.wait_ready(node, name, timeout=60)


@pytest.mark.timeout(120)
async def test_every_point_is_stored_and_the_answer_links_them(sim_node, tmp_path):
    node = sim_node("fm1")
    pool = TransportPool()
    store = ResultStore(tmp_path / "data" / "results")
    svc, view = await start_instance(pool, node, "fm1")
    events = []
    log = EventLog(tmp_path / "events.jsonl")
    try:
        spec = SearchSpec(parse_budget("p99_e2el_ms=60000"), start=1, max_load=4)
        answer = await FindMaxService(pool, store, timeline=log.append).search_instance(
            # 60 prompts: each point lasts several of the agent's 1 s samples, so its energy is
            # measured even on a loaded machine (30 left a point within one sample once)
            node,
            view,
            TINY_BENCH,
            spec,
            num_prompts=60,
            label="fm",
            on_event=events.append,
        )
    finally:
        await svc.stop(node, "fm1", int_timeout=5)
        await pool.close()
    o = answer.outcome
    assert o.status == "never_broke" and o.load == 4 and [p.load for p in o.points] == [1, 2, 4]
    # progress: started, then each point announced before it is measured, then the answer
    kinds = [type(e).__name__ for e in events if not type(e).__name__.endswith("RunEvent")]
    assert kinds == ["FindMaxStarted"] + ["FindMaxPointStarted", "FindMaxPointMeasured"] * 3 + ["FindMaxFinished"]
    assert isinstance(events[0], FindMaxStarted) and events[0].target == "instance fm1 on fm1"
    measured = [e for e in events if isinstance(e, FindMaxPointMeasured)]
    assert [e.lo for e in measured] == [1, 2, 4] and all(e.hi is None for e in measured)
    assert isinstance(events[-1], FindMaxFinished) and events[-1].answer == answer

    # every point is a stored serving run at its load, tagged with the search
    assert len(answer.point_ids) == 3 and len(set(answer.point_ids)) == 3
    for load, rid in zip((1, 2, 4), answer.point_ids):
        run = store.get(rid)
        assert run.context["find_max"] == answer.search and run.context["instance"] == "fm1"
        assert run.setup["max_concurrency"] == load and run.setup["request_rate"] == float("inf")
        assert run.metrics["completed"] == 60 and run.label == "fm"
        assert not is_answer(run)
        # issue U2: each point's GPU energy is recorded, as for a single `bench run`
        assert run.energy_j and run.energy_j > 0, (run.energy, run.telemetry, run.context.get("telemetry_note"))
        assert run.tokens_per_joule and run.tokens_per_joule > 0
    # the answer: one more stored result, linking the points, with the answer's figures
    stored = store.get(answer.answer_id)
    assert is_answer(stored) and stored.context["find_max_points"] == list(answer.point_ids)
    assert stored.context["find_max_status"] == "never_broke" and stored.context["find_max_load"] == 4
    assert stored.context["find_max_limits"] == {"p99_e2el_ms": 60000.0}
    last = store.get(answer.point_ids[-1])
    assert stored.metrics["output_throughput"] == last.metrics["output_throughput"]
    assert stored.metrics["find_max_load"] == 4 and stored.setup["max_concurrency"] == 4
    assert stored.result["points"][2]["run_ids"] == [answer.point_ids[2]]
    # tokens/J at the answer's load: the median of its point's runs, known
    assert answer.tokens_per_joule == last.tokens_per_joule and answer.to_json()["tokens_per_joule"] > 0
    # the answer names the point's run it reports, and that run's model (no model '-' in the history)
    assert stored.context["find_max_run"] == answer.point_ids[-1]
    assert stored.setup["model"] == last.setup["model"] == "tiny-llama"
    assert len(store.ids()) == 4
    # the timeline: one event per point, then the answer
    timeline = [(e.kind, e.node, e.instance, e.message) for e in reversed(log.read())]
    assert [t[0] for t in timeline] == ["findmax.point"] * 3 + ["findmax.answer"]
    assert all(t[1:3] == ("fm1", "fm1") for t in timeline)
    for (_, _, _, text), load, rid in zip(timeline, (1, 2, 4), answer.point_ids):
        assert text.startswith(f"find-max tiny concurrency {load}: meets · ") and text.endswith(f"tok/J · run {rid}")
    assert timeline[-1][3].endswith(f"stored as {answer.answer_id}") and "maximum concurrency 4" in timeline[-1][3]


@pytest.mark.timeout(120)
async def test_a_budget_no_load_meets_is_an_answer_too(sim_node, tmp_path):
    node = sim_node("fm2")
    pool = TransportPool()
    store = ResultStore(tmp_path / "data" / "results")
    svc, view = await start_instance(pool, node, "fm2")
    try:
        spec = SearchSpec(parse_budget("median_ttft_ms=0.001"), dimension="rate", start=2, max_load=8)
        answer = await FindMaxService(pool, store).search_instance(node, view, TINY_BENCH, spec, num_prompts=4)
    finally:
        await svc.stop(node, "fm2", int_timeout=5)
        await pool.close()
    o = answer.outcome
    # rate 2 breaks, then it shrinks by the growth factor down to start / 2**3
    assert o.status == "none_meets" and o.load is None and [p.load for p in o.points] == [2, 1, 0.5, 0.25]
    assert all(p.meets is False and "median_ttft_ms" in p.reason for p in o.points)
    for rate, rid in zip((2, 1, 0.5, 0.25), answer.point_ids):
        run = store.get(rid)
        assert run.setup["request_rate"] == rate and run.setup["max_concurrency"] is None
    stored = store.get(answer.answer_id)
    assert stored.context["find_max_status"] == "none_meets" and stored.context["find_max_load"] is None
    assert "find_max_load" not in stored.metrics and stored.context["find_max_points"] == list(answer.point_ids)


@pytest.mark.timeout(120)
async def test_a_point_without_a_result_stops_the_search_naming_it(sim_node, tmp_path):
    node = sim_node("fm3")
    pool = TransportPool()
    store = ResultStore(tmp_path / "data" / "results")
    svc, view = await start_instance(pool, node, "fm3")
    try:
        spec = SearchSpec(parse_budget("p99_e2el_ms=60000"), start=1, max_load=8)
        service = FindMaxService(pool, store)
        service.runner.start = _broken_from(2, service.runner.start)  # type: ignore[method-assign]
        with pytest.raises(FindMaxError) as info:
            await service.search_instance(node, view, TINY_BENCH, spec, num_prompts=4)
    finally:
        await svc.stop(node, "fm3", int_timeout=5)
        await pool.close()
    message = str(info.value)
    [first] = store.ids()  # the first point stays stored; no answer was stored
    assert "\n" not in message and message.startswith("find-max at concurrency 2: ")
    assert "nope.json" in message  # the client's own complaint
    assert f"points stored so far: {first}" in message
    assert store.get(first).context["find_max"]


def _broken_from(load, start):
    """runner.start, the client given a dataset file that is not there from `load` on: the
    real client then writes no result, as a crashed one does."""

    async def wrapped(node, view, preset, **kwargs):
        if (kwargs.get("max_concurrency") or 0) >= load:
            preset = dataclasses.replace(
                preset, dataset="sharegpt", dataset_path="/nowhere/nope.json", input_len=None, output_len=None
            )
        return await start(node, view, preset, **kwargs)

    return wrapped
