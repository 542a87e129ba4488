"""The watcher's /metrics (console/services/metrics_export.py): what a scrape shows of the
watcher's state, the newest benchmark per (preset, instance) and the instances' last events;
the results folder is read at most every 30 s and then only its changed files; a watcher run
with a metrics port answers over HTTP and frees the port when it ends."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from console.core.events import Event
from console.core.health import HealthRules
from console.core.health_profile import HealthSettings
from console.core.model import NodeHealth, Profile
from console.services.events import EventLog
from console.services.metrics_export import (
    METRIC_NAMES,
    FleetCollector,
    InstanceStates,
    LatestRuns,
)
from console.services.watcher import Watcher, WatcherState
from console.services.watcher_presence import AlertState
from tests.helpers import free_port, wait_for


def _state(**kw) -> WatcherState:
    base = dict(
        started=1000.0,
        heartbeat=1005.0,
        nodes={"n1": "live", "n2": "down"},
        alerts=(AlertState("sick", "n1", 2, None, 1001.0, 1002.0, "fail", "FIRED sick"),),
        events_written=7,
        gpus=(("n1", 0, "ok", 0), ("n1", 2, "fail", 2), ("n2", 0, "unknown", 0)),
        loop_lag=0.004,
    )
    base.update(kw)
    return WatcherState(**base)


def _run_file(folder, name, *, preset, instance, created, tps, ttft_p99=120.0, tpj=None):
    doc = {
        "id": name,
        "created": created,
        "context": {"node": "n1", "instance": instance, "bench_preset": preset},
        "metrics": {
            "output_throughput": tps,
            "median_ttft_ms": 40.0,
            "p99_ttft_ms": ttft_p99,
            "median_itl_ms": 2.0,
            "p99_itl_ms": 12.0,
        },
        "energy": {"tokens_per_joule": tpj} if tpj is not None else None,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(doc))


def _scrape(collector) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_a_scrape_shows_gpu_health_nodes_alerts_and_the_loop(tmp_path):
    got = _scrape(FleetCollector(_state))
    assert got[("rocm_console_gpu_health_state", (("gpu", "2"), ("node", "n1")))] == 2
    assert got[("rocm_console_gpu_health_reasons", (("gpu", "2"), ("node", "n1")))] == 2
    assert got[("rocm_console_gpu_health_state", (("gpu", "0"), ("node", "n2")))] == -1
    assert got[("rocm_console_node_state", (("node", "n2"), ("state", "down")))] == 1
    assert got[("rocm_console_node_state", (("node", "n2"), ("state", "live")))] == 0
    assert got[("rocm_console_watcher_nodes", (("state", "live"),))] == 1
    assert got[("rocm_console_watcher_nodes", (("state", "stale"),))] == 0
    assert got[("rocm_console_alerts_firing", (("alertname", "sick"), ("severity", "fail")))] == 1
    one = (("alertname", "sick"), ("gpu", "2"), ("node", "n1"), ("severity", "fail"), ("vllm_instance", ""))
    assert got[("rocm_console_alert_firing", one)] == 1
    assert got[("rocm_console_watcher_loop_lag_seconds", ())] == 0.004
    assert got[("rocm_console_watcher_events_written_total", ())] == 7
    assert got[("rocm_console_watcher_heartbeat_timestamp_seconds", ())] == 1005.0
    assert {name for name, _ in got} <= set(METRIC_NAMES)


def test_the_newest_run_per_preset_and_instance_in_seconds(tmp_path):
    results = tmp_path / "results"
    _run_file(results, "a-old", preset="chat", instance="llama", created=100, tps=500.0)
    _run_file(results, "a-new", preset="chat", instance="llama", created=200, tps=800.0, ttft_p99=90.0, tpj=1.5)
    _run_file(results, "b", preset="long", instance="llama", created=150, tps=300.0)
    (results / "broken.json").write_text("{not json")
    got = _scrape(FleetCollector(_state, LatestRuns(results)))
    chat = (("node", "n1"), ("preset", "chat"), ("vllm_instance", "llama"))
    assert got[("rocm_console_bench_output_tokens_per_second", chat)] == 800.0
    assert got[("rocm_console_bench_ttft_seconds", tuple(sorted((*chat, ("quantile", "0.99")))))] == 0.09
    assert got[("rocm_console_bench_ttft_seconds", tuple(sorted((*chat, ("quantile", "0.5")))))] == 0.04
    assert got[("rocm_console_bench_itl_seconds", tuple(sorted((*chat, ("quantile", "0.99")))))] == 0.012
    assert got[("rocm_console_bench_tokens_per_joule", chat)] == 1.5
    assert got[("rocm_console_bench_run_timestamp_seconds", chat)] == 200
    long = (("node", "n1"), ("preset", "long"), ("vllm_instance", "llama"))
    assert got[("rocm_console_bench_output_tokens_per_second", long)] == 300.0
    assert ("rocm_console_bench_tokens_per_joule", long) not in got  # not measured: no sample, not 0


def test_the_results_are_read_at_most_every_30s_and_only_what_changed(tmp_path):
    results = tmp_path / "results"
    for i in range(5):
        _run_file(results, f"r{i}", preset="chat", instance="llama", created=100 + i, tps=100.0 + i)
    now = [0.0]
    runs = LatestRuns(results, clock=lambda: now[0])
    assert runs.rows()[0].output_tokens_per_second == 104.0
    assert runs.reads == 5
    _run_file(results, "r9", preset="chat", instance="llama", created=999, tps=999.0)
    now[0] = 29.0
    assert runs.rows()[0].output_tokens_per_second == 104.0  # within 30 s: the cached answer
    assert runs.reads == 5
    now[0] = 30.0
    assert runs.rows()[0].output_tokens_per_second == 999.0
    assert runs.reads == 6  # the new file only
    os.unlink(results / "r9.json")
    now[0] = 61.0
    assert runs.rows()[0].output_tokens_per_second == 104.0  # a deleted run is gone


def test_instances_come_from_the_events_instance_lines(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    log.append(
        [Event(1.0, "instance.started", "n1", instance="llama"), Event(2.0, "instance.ready", "n1", instance="llama")]
    )
    now = [0.0]
    states = InstanceStates(log, clock=lambda: now[0])
    got = _scrape(FleetCollector(_state, instances=states))
    assert got[("rocm_console_instance_ready", (("node", "n1"), ("vllm_instance", "llama")))] == 1
    log.append(Event(3.0, "instance.failed", "n1", instance="llama"))
    now[0] = 31.0
    got = _scrape(FleetCollector(_state, instances=states))
    assert got[("rocm_console_instance_ready", (("node", "n1"), ("vllm_instance", "llama")))] == 0
    key = (("node", "n1"), ("state", "failed"), ("vllm_instance", "llama"))
    assert got[("rocm_console_instance_state", key)] == 1


async def test_a_watcher_serves_metrics_while_it_runs_and_frees_the_port(sim_node, tmp_path):
    node = sim_node("n1", seed=5, state_dir=str(tmp_path / "n1"))
    settings = HealthSettings(HealthRules(interval=0.5), ())
    watcher = Watcher(Profile(nodes=(node,)), settings, events=EventLog(tmp_path / "data" / "events.jsonl"))
    port = free_port()
    watcher.serve_metrics(port)
    task = asyncio.create_task(watcher.run())
    url = f"http://127.0.0.1:{port}/metrics"

    def text() -> str:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.read().decode()

    try:
        assert await wait_for(lambda: watcher.fleet.snapshot("n1").health == NodeHealth.LIVE, timeout=30)
        assert await wait_for(lambda: watcher.fleet.snapshot("n1").gpu_health, timeout=30)
        body = await asyncio.to_thread(text)
        assert 'rocm_console_node_state{node="n1",state="live"} 1.0' in body
        assert 'rocm_console_gpu_health_state{gpu="0",node="n1"}' in body
        assert await wait_for(lambda: watcher.loop_lag is not None, timeout=5)
        assert "rocm_console_watcher_loop_lag_seconds " in await asyncio.to_thread(text)
    finally:
        watcher.stop()
        await asyncio.wait_for(task, 20)
    try:
        await asyncio.to_thread(text)
        raise AssertionError("the port still answers after the watcher ended")
    except OSError:
        pass


def _stored(name, *, preset, instance, created, tps):
    from console.core.results.record import run_from_dict

    context = {"node": "n1", "instance": instance, "bench_preset": preset}
    doc = {"id": name, "created": created, "origin": "console", "context": context}
    return run_from_dict({**doc, "metrics": {"output_throughput": tps}, "fingerprint": f"fp-{name}"})


def test_with_a_history_the_newest_runs_come_from_the_store_and_only_new_ones_are_read(tmp_path):
    from console.services.history import History
    from console.services.metrics_export import StoreLatestRuns

    history = History(None, tmp_path / "data")
    for i in range(5):
        history.runs.save(_stored(f"r{i}", preset="chat", instance="llama", created=100 + i, tps=100.0 + i))
    history.runs.save(_stored("long", preset="long", instance="llama", created=50, tps=7.0))
    (tmp_path / "data" / "results").mkdir()  # a results folder there is not read: the store is
    now = [0.0]
    runs = StoreLatestRuns(history, clock=lambda: now[0])
    assert [(r.preset, r.output_tokens_per_second) for r in runs.rows()] == [("chat", 104.0), ("long", 7.0)]
    assert runs.reads == 6
    history.runs.save(_stored("r9", preset="chat", instance="llama", created=999, tps=999.0))
    now[0] = 29.0
    assert runs.rows()[0].output_tokens_per_second == 104.0  # within 30 s: the cached answer
    now[0] = 30.0
    assert runs.rows()[0].output_tokens_per_second == 999.0
    assert runs.reads == 7  # the new run only
    now[0] = 60.0
    runs.rows()
    assert runs.reads == 7  # nothing stored since: nothing read
    history.delete_run("r9")
    now[0] = 90.0
    assert runs.rows()[0].output_tokens_per_second == 104.0  # a deleted run is gone
    history.close()


def test_instances_of_the_history_are_read_from_its_newest_instance_events(tmp_path):
    from console.services.history import History

    history = History(None, tmp_path / "data")
    history.events.append([Event(float(t), "node.up", "n1") for t in range(1, 50)])
    history.events.append(
        [Event(60.0, "instance.started", "n1", instance="llama"), Event(60.0, "instance.ready", "n1", instance="llama")]
    )
    now = [0.0]
    states = InstanceStates(history.events, clock=lambda: now[0])
    assert states.current() == {("n1", "llama"): "ready"}  # two of one time: the later stored wins
    history.events.append(Event(61.0, "instance.stopped", "n1", instance="llama"))
    now[0] = 30.0
    assert states.current() == {("n1", "llama"): "stopped"}
    history.close()
