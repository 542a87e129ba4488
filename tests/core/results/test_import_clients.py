"""Issue B2: `results import` reads GuideLLM's and AIPerf's own result files into the same
records as vLLM's, each saying which client made it; compare and `results show` say it too."""

from __future__ import annotations

from pathlib import Path

from console.core.results.compare import compare_table
from console.core.results.file_import import runs_from_file
from console.core.results.record import run_from_dict, run_to_dict

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "clients"
VLLM = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-0.32-cpu"


def imported(path: Path):
    parse = runs_from_file(path.read_bytes(), source=str(path))
    assert parse.kind == "json" and not parse.skipped, parse.skipped
    return parse.runs


def test_guidellm_and_aiperf_files_import_as_runs_of_their_client():
    (g,) = imported(FIX / "guidellm-0.8.1" / "random-c4" / "result.json")
    (a,) = imported(FIX / "aiperf-0.13.0" / "random-c4" / "profile_export_aiperf.json")
    assert (g.client, g.client_version) == ("guidellm", "0.8.1")
    assert (a.client, a.client_version) == ("aiperf", "0.13.0")
    assert g.metrics["completed"] == 20 and a.metrics["completed"] == 20
    assert g.metrics["mean_ttft_ms"] > 0 and a.metrics["p99_e2el_ms"] > 0
    assert g.setup.get("max_concurrency") == 4
    # kept through the store's JSON form, and in its --json
    back = run_from_dict(run_to_dict(g))
    assert back.client == "guidellm" and run_to_dict(g)["client"] == "guidellm"


def test_old_records_read_as_vllm():
    doc = {"format": "rocm-console-result/1", "id": "x", "created": 1.0, "origin": "import", "metrics": {}}
    assert run_from_dict(doc).client == "vllm" and run_from_dict(doc).client_version is None


def test_compare_across_clients_has_a_client_row():
    (g,) = imported(FIX / "guidellm-0.8.1" / "random-c4" / "result.json")
    (a,) = imported(FIX / "aiperf-0.13.0" / "random-c4" / "profile_export_aiperf.json")
    rows = {r["key"]: r for r in compare_table([g, a])}
    assert rows["client"]["values"] == ["guidellm 0.8.1", "aiperf 0.13.0"]
    assert rows["mean_ttft_ms"]["values"][0] is not None and rows["mean_ttft_ms"]["values"][1] is not None
    # vLLM's own runs only: no client row (nothing to tell apart)
    vllm_runs = [run_from_dict(run_to_dict(g)) for _ in range(2)]
    vllm_runs = [run_from_dict({**run_to_dict(r), "result": None, "context": {}}) for r in vllm_runs]
    assert "client" not in {r["key"] for r in compare_table(vllm_runs)}


def test_a_guidellm_sweep_imports_one_run_per_benchmark():
    import json

    obj = json.loads((FIX / "guidellm-0.8.1" / "random-c4" / "result.json").read_text())
    obj["benchmarks"] = obj["benchmarks"] * 2
    parse = runs_from_file(json.dumps(obj), source="sweep.json")
    assert len(parse.runs) == 2 and all(r.client == "guidellm" for r in parse.runs)
