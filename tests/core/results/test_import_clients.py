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


def test_an_imported_guidellm_report_that_left_requests_out_says_so_in_its_detail(tmp_path):
    """An imported report has no client check to carry the pitfall: the detail shows the line."""
    import json

    from console.core.results.display import energy_text
    from tests.core.bench.test_guidellm_window import window_ends_early

    doc, counted, _ = window_ends_early(json.loads((FIX / "guidellm-0.8.1" / "random-c4" / "result.json").read_text()))
    (tmp_path / "short.json").write_text(json.dumps(doc))
    (run,) = imported(tmp_path / "short.json")
    assert run.metrics["completed"] == counted and run.result["requests_made"] == 20
    line = f"Client  GuideLLM counted {counted} of the 20 requests it made in its figures"
    assert [s for s in energy_text(run) if s.startswith(line)], energy_text(run)
    (whole,) = imported(FIX / "guidellm-0.8.1" / "random-c4" / "result.json")
    assert not [s for s in energy_text(whole) if "GuideLLM counted" in s]


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


AIPERF = FIX / "aiperf-0.13.0" / "random-c4"
ABSENT = "per-request figures, and so goodput against an SLO, are absent"


def test_an_aiperf_summary_takes_its_per_request_records_from_beside_it(tmp_path):
    """AIPerf writes its summary and a per-request JSONL side by side: the import reads both,
    so the run has vLLM's per-request arrays and goodput can be counted from them."""
    from console.core.bench.goodput import Slo, goodput_of
    from console.core.bench.result import normalize_result

    (run,) = imported(AIPERF / "profile_export_aiperf.json")
    assert len(run.result["ttfts"]) == 20 and len(run.result["itls"]) == 20
    good = goodput_of(normalize_result(run.result), Slo(e2e_ms=60_000))
    assert good is not None and good.source == "per-request" and good.goodput_pct == 100.0
    # the JSONL on its own (a folder import meets it too): one line, not one per request
    alone = runs_from_file((AIPERF / "profile_export.jsonl").read_bytes(), source=str(AIPERF / "profile_export.jsonl"))
    assert alone.runs == [] and len(alone.skipped) == 1
    assert alone.skipped[0][1].startswith("AIPerf's per-request records (20 requests)")


def test_an_aiperf_summary_alone_imports_its_figures_and_says_per_request_data_is_absent(tmp_path):
    summary = tmp_path / "profile_export_aiperf.json"
    summary.write_bytes((AIPERF / "profile_export_aiperf.json").read_bytes())
    parse = runs_from_file(summary.read_bytes(), source=str(summary))
    (run,) = parse.runs
    assert run.client == "aiperf" and run.metrics["completed"] == 20 and run.metrics["p99_e2el_ms"] > 0
    assert "ttfts" not in run.result
    [(part, reason)] = parse.skipped
    assert part == "per-request data" and reason == (
        f"no AIPerf per-request export beside it (profile_export.jsonl): the summary's figures are imported; {ABSENT}"
    )
    # a records file there without a record in it: said the same way
    (tmp_path / "profile_export.jsonl").write_text("\n")
    [(_, reason)] = runs_from_file(summary.read_bytes(), source=str(summary)).skipped
    assert reason.startswith("profile_export.jsonl beside it holds no AIPerf request record") and ABSENT in reason
    # a FIFO in its place is not read (it would block): one line saying why
    (tmp_path / "profile_export.jsonl").unlink()
    import os

    os.mkfifo(tmp_path / "profile_export.jsonl")
    [(_, reason)] = runs_from_file(summary.read_bytes(), source=str(summary)).skipped
    assert reason.startswith("profile_export.jsonl beside it cannot be read (") and ABSENT in reason


def test_a_folder_import_stores_the_aiperf_run_with_its_records(tmp_path):
    """`results import FOLDER` (the services' import): one run, with its per-request arrays; the
    JSONL is one skipped line; the exit code is success."""
    import shutil

    from console.services.results import ResultStore

    folder = tmp_path / "art"
    shutil.copytree(AIPERF, folder)
    report = ResultStore(tmp_path / "store").import_paths([folder])
    assert len(report.imported) == 1 and report.exit_code == 0
    assert len(report.imported[0].result["ttfts"]) == 20
    jsonl = [s for s in report.skipped if s.path.endswith("profile_export.jsonl")]
    assert [s.reason.split(":")[0] for s in jsonl] == ["AIPerf's per-request records (20 requests)"]
