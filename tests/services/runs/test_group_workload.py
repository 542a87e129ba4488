"""Issue B2 for replica groups: a group benchmark stores its goodput against the preset's SLO
and its prefix-cache share (every replica's counters added up) in the group's record and in each
client's, shows them in its printed outcome and in an experiment point's summary, and does the
preset's cold start on every replica (simulated node: real agent, fake vllm, LocalTransport)."""

from __future__ import annotations

import dataclasses

import pytest

from console.core.model import ServePreset
from console.services.groups import GroupService
from console.services.results import ResultStore
from console.services.runs.group import GroupBenchRunner, format_group_outcome, store_group, summary_of
from console.services.transports import TransportPool
from tests.helpers import free_port
from tests.services.test_bench_workload import PREFIX as SINGLE_PREFIX
from tests.services.test_bench_workload import fast  # noqa: F401 (the fixture: a fast simulator, no reset)

TINY = ServePreset(name="tiny", model="tiny-llama", args=("--enforce-eager",))
# the single-instance test's prefix-heavy preset (warm by design, marked cold to draw the
# warning), one concurrency level less: a group spreads its prompts over the replicas
PREFIX = dataclasses.replace(SINGLE_PREFIX, num_prompts=16, max_concurrency=())


@pytest.mark.timeout(180)
async def test_a_group_run_stores_goodput_and_the_prefix_share(sim_node, tmp_path):
    node = sim_node("gw")
    pool = TransportPool()
    groups = GroupService(pool)
    plan = await groups.plan([node], TINY, 2, base_port=free_port())
    try:
        group = await groups.wait_ready([node], await groups.start(plan, [node], TINY), timeout=60, poll_every=0.3)
        assert group.ready == 2
        outcome = await GroupBenchRunner(pool, poll_every=0.2).run([node], group, PREFIX, concurrency=2)
    finally:
        await groups.stop([node], plan.group, int_timeout=5)
        await pool.close()
    assert outcome.ok, outcome.reason
    # the group's goodput counts all 16 requests of both clients against the SLO
    assert outcome.goodput is not None and outcome.goodput["total"] == 16
    assert outcome.goodput["goodput_pct"] == 100.0 and outcome.goodput["source"] == "per-request"
    # each replica's requests repeat 2 shared prefixes: most prompt tokens come from the cache
    pc = outcome.prefix_cache
    assert pc is not None and pc["hit_pct"] >= 50 and pc["warning"].endswith("not cold figures")
    # no reset on the simulated servers (no dev mode): every client salted its requests instead
    assert pc["cold_start_done"] == "salt" and all(any("cache_salt" in a for a in o.argv) for o in outcome.outcomes)
    assert all(o.prefix_cache and o.prefix_cache["hit_pct"] >= 50 for o in outcome.outcomes)
    assert all(o.goodput and o.goodput["total"] == 8 for o in outcome.outcomes)
    # the printed outcome (`groups bench`, the TUI) and an experiment point's summary say it
    text = format_group_outcome(outcome)
    assert "goodput 100.0% of requests" in text and "WARNING: " in text
    doc = summary_of(outcome)
    assert doc["goodput_pct"] == 100.0 and doc["prefix_cache_hit_pct"] == pc["hit_pct"]
    # stored: each client's record and the group's merged one carry them
    store = ResultStore(tmp_path / "results")
    ids = store_group(store, outcome, group, PREFIX)
    runs = [store.get(i) for i in ids]
    assert len(runs) == 3 and all(r.goodput_pct == 100.0 for r in runs)
    assert runs[-1].prefix_cache_hit_pct == pytest.approx(pc["hit_pct"]) and runs[-1].prefix_cache_warning
