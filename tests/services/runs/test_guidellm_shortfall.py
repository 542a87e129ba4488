"""A GuideLLM run whose figures leave out requests it made (its measurement window ended early
on a loaded machine) carries the parser's one line as a client pitfall: shown after the run,
stored with the record and in its detail (console/core/bench/client_check.py recognise_pitfalls)."""

from __future__ import annotations

import json
from pathlib import Path

from console.core.bench.client_check import recognise_pitfalls
from console.core.bench.clients import guidellm
from console.core.bench.result import normalize_result
from console.core.results.build import run_from_console
from console.core.results.display import energy_text
from console.core.results.record import run_from_dict, run_to_dict
from console.services.runs.clients import with_records
from console.services.runs.serving import RunOutcome, check_lines, store_kwargs
from tests.core.bench.test_guidellm_window import window_ends_early

RESULT = Path(__file__).resolve().parents[2] / "fixtures" / "clients" / "guidellm-0.8.1" / "random-c4" / "result.json"
ARGV = ("/v/bin/guidellm", "run", "--constraint", "kind=max_requests,count=20", "--data", "x")


def outcome_of(doc: dict) -> RunOutcome:
    (obj,) = guidellm.results(doc)
    result = normalize_result(obj)
    return RunOutcome(run="r1", node="n", exit_code=0, result=result, result_json=obj, block=None,
                      errors=(), argv=ARGV, pitfalls=recognise_pitfalls("", result))  # fmt: skip


def stored(outcome: RunOutcome):
    doc = run_to_dict(run_from_console({"node": "n"}, outcome.result_json, None, **store_kwargs(outcome)))
    return run_from_dict(doc)


async def test_the_shortfall_is_shown_stored_and_in_the_runs_detail():
    doc, counted, _ = window_ends_early(json.loads(RESULT.read_text()))
    outcome = await with_records(None, None, outcome_of(doc))  # type: ignore[arg-type]  # GuideLLM reads no file
    line = f"GuideLLM counted {counted} of the 20 requests it made in its figures"
    (pitfall,) = outcome.pitfalls
    assert pitfall.key == "guidellm-measure-window" and pitfall.line.startswith(line)
    assert pitfall.evidence == f"requests_made 20, completed {counted}"
    assert any(s.startswith(f"client pitfall guidellm-measure-window: {line}") for s in check_lines(outcome))
    run = stored(outcome)
    assert run.metrics["completed"] == counted and run.result["requests_made"] == 20
    assert run.client_check["pitfalls"][0]["line"] == pitfall.line
    assert any(s.startswith(f"  pitfall: {line}") for s in energy_text(run))


async def test_a_run_that_counted_every_request_has_no_pitfall():
    outcome = outcome_of(json.loads(RESULT.read_text()))
    assert await with_records(None, None, outcome) is outcome  # type: ignore[arg-type]
    assert not any("pitfall" in s for s in energy_text(stored(outcome)))
