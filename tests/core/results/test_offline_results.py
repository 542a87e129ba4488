"""Offline runs stored like serving runs: record round trip, list summary,
compare rows, CSV, and matching with the seeds' offline tables."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from console.core.bench.offline import OfflinePreset
from console.core.results.compare import compare_table
from console.core.results.display import better, metric_label, run_summary
from console.core.results.export import export_csv
from console.core.results.offline import run_from_offline, run_kind
from console.core.results.record import run_from_dict, run_to_dict
from console.core.results.reference import load_reference_numbers, reference_as_run, reference_matches

ROOT = Path(__file__).resolve().parents[3]
CAPTURES = ROOT / "tests" / "fixtures" / "vllm-0.32-cpu"
REFERENCE = ROOT / "profiles" / "reference_numbers.toml"


def _latency_run(**preset_kw):
    obj = json.loads((CAPTURES / "bench_latency.json").read_text())
    preset = OfflinePreset(
        name="p", kind="latency", model="/m/tiny", tp=1, batch_size=2, input_len=32, output_len=16, **preset_kw
    )
    ctx = {"node": "n1", "gpus": [0], "vllm_version": "0.32.0", "client_argv": ["vllm", "bench", "latency"]}
    return obj, run_from_offline(ctx, "latency", obj, preset, created=1_700_000_000)


def test_latency_run_keeps_vllms_json_and_its_numbers():
    obj, run = _latency_run()
    assert run_kind(run) == "latency"
    assert run.result == obj
    assert run.metrics["latency_s"] == obj["avg_latency"]
    assert run.metrics["latency_p99_s"] == obj["percentiles"]["99"]
    assert run.setup["model"] == obj["model_id"]  # what vLLM says it ran
    assert run.setup["batch_size"] == 2
    back = run_from_dict(json.loads(json.dumps(run_to_dict(run))))
    assert back == run and back.metrics == run.metrics and back.context["run_kind"] == "latency"
    summary = run_summary(run)["setup"]
    assert summary.startswith("p: latency bs2 32/16 = 0.08727 s")
    assert metric_label("latency_p50_s") == "P50 offline latency (s)"
    assert better("latency_p50_s") == "lower"


def test_throughput_run_summary_compare_and_csv():
    obj = json.loads((CAPTURES / "bench_throughput.json").read_text())
    preset = OfflinePreset(name="t", kind="throughput", model="/m/tiny", input_len=32, output_len=16, num_prompts=20)
    thr = run_from_offline({"node": "n1"}, "throughput", obj, preset, created=1_700_000_100)
    assert thr.metrics["throughput_tok_s"] == obj["tokens_per_second"]
    assert "throughput 32/16 n20 = 9043.3 tok/s" in run_summary(thr)["setup"]
    _, lat = _latency_run()
    rows = {r["key"]: r for r in compare_table([lat, thr])}
    assert rows["run_kind"]["values"] == ["latency", "throughput"]
    assert rows["throughput_tok_s"]["values"] == [None, obj["tokens_per_second"]]
    header, first, second = export_csv([lat, thr]).splitlines()
    col = header.split(",").index("run_kind")
    assert first.split(",")[col] == "latency" and second.split(",")[col] == "throughput"


def test_serving_compare_has_no_kind_row():
    _, lat = _latency_run()
    serving = run_from_dict({**run_to_dict(lat), "context": {"node": "n1"}, "id": "x"})
    assert "run_kind" not in {r["key"] for r in compare_table([serving, serving])}


def test_offline_run_matches_the_seed_table_by_model_tp_lengths_batch():
    rows = load_reference_numbers(REFERENCE)
    obj = {"model_id": "/data/amd/Llama-3.1-70B-Instruct-FP8-KV", "avg_latency": 17.9, "latencies": [17.9]}
    preset = OfflinePreset(
        name="x",
        kind="latency",
        model="amd/Llama-3.1-70B-Instruct-FP8-KV",
        tp=8,
        batch_size=1,
        input_len=128,
        output_len=2048,
    )
    run = run_from_offline({"gpu_model": "AMD Instinct MI300X"}, "latency", obj, preset)
    matches = reference_matches(run, rows)
    assert [m.row.id for m in matches] == ["seed000-latency-llama3.1-70b-fp8-tp8-bs1-128-2048"]
    assert matches[0].exact
    ref = reference_as_run(matches[0].row)
    table = {r["key"]: r for r in compare_table([run, ref])}
    assert table["latency_s"]["values"] == [17.9, 17.236]
    assert table["batch_size"]["values"] == [1, 1]
    other = run_from_offline({}, "latency", obj, dataclasses.replace(preset, batch_size=3))
    assert reference_matches(other, rows) == []
    # a throughput run never matches a latency row, and vice versa
    thr = run_from_offline(
        {},
        "throughput",
        {"tokens_per_second": 12000.0},
        OfflinePreset(
            name="t", kind="throughput", model=preset.model, tp=8, input_len=128, output_len=2048, num_prompts=3200
        ),
    )
    assert [m.row.id for m in reference_matches(thr, rows)] == ["seed000-throughput-llama3.1-70b-fp8-tp8-128-2048"]
