"""GuideLLM counts in its figures only the requests whose times overlap its measurement window,
which ends at the completion its scheduler counted last; on a loaded machine that can be one
finished a wave early (CI: 12 of 16 counted). The console keeps GuideLLM's figures, what its
scheduler made, and one line naming the shortfall (console/core/bench/clients/guidellm.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from console.core.bench.clients import guidellm
from console.core.bench.result import normalize_result

RESULT = Path(__file__).resolve().parents[2] / "fixtures" / "clients" / "guidellm-0.8.1" / "random-c4" / "result.json"


def real() -> dict:
    return json.loads(RESULT.read_text())


def window_ends_early(doc: dict) -> tuple[dict, int, float]:
    """The real 20-request run (random-c4) as GuideLLM writes it when the completion its
    scheduler counted last is the 12th request's (it finished at +0.83 s of 1.28 s): the window
    ends there, and request_totals counts, by GuideLLM's own rule (accumulator.get_within_range),
    only the requests that started before it ended. The per-request records and
    scheduler_metrics.requests_made (20) stay as they were. (copy, counted, window seconds)"""
    doc = copy.deepcopy(doc)
    bench = doc["benchmarks"][0]
    sm = bench["scheduler_metrics"]
    records = bench["requests"]["successful"]
    start = sm["measure_start_time"]
    end = sorted(r["request_end_time"] for r in records)[11]
    counted = sum(1 for r in records if r["request_end_time"] >= start and r["request_start_time"] <= end)
    sm["measure_end_time"] = bench["end_time"] = end
    bench["duration"] = end - start
    bench["metrics"]["request_totals"] = {"successful": counted, "errored": 0, "incomplete": 0, "total": counted}
    return doc, counted, end - start


def test_a_run_whose_figures_count_every_request_made_carries_no_warning():
    for name in ("random-c4", "multi-turn"):
        (obj,) = guidellm.results(json.loads((RESULT.parents[1] / name / "result.json").read_text()))
        assert obj["requests_made"] == obj["completed"] > 0
        assert "client_warning" not in obj


def test_requests_left_out_of_the_window_are_named_in_one_line():
    doc, counted, window = window_ends_early(real())
    assert 12 <= counted < 20  # the edit left some requests out, as in CI
    (obj,) = guidellm.results(doc)
    assert (obj["completed"], obj["requests_made"]) == (counted, 20)  # GuideLLM's figures, and what it made
    assert obj["client_warning"] == (
        f"GuideLLM counted {counted} of the 20 requests it made in its figures: {20 - counted} fell outside its "
        f"measurement window ({window:.3f} s), so its counts, rates and latencies cover {counted}"
    )
    r = normalize_result(obj)
    assert r.completed == counted and r.metrics["requests_made"] == 20
    assert len(r.arrays["latencies"]) == 20  # its per-request records keep every request
    assert "\n" not in obj["client_warning"]


def test_fewer_requests_made_than_asked_are_named():
    doc = real()
    doc["benchmarks"][0]["config"]["constraints"]["max_requests"]["args"]["count"] = 24
    (obj,) = guidellm.results(doc)
    assert obj["client_warning"] == "GuideLLM made 20 of the 24 requests asked"


def test_without_the_schedulers_count_nothing_is_claimed():
    doc = real()
    del doc["benchmarks"][0]["scheduler_metrics"]
    (obj,) = guidellm.results(doc)
    assert "requests_made" not in obj and "client_warning" not in obj
    assert guidellm.shortfall(12, None, 16, 1.0) is None
    assert guidellm.shortfall(16, 16, 16, 2.0) is None
