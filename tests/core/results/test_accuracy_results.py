"""Accuracy runs (lm_eval) stored like speed runs and shown beside those of the
same instance; read from a real lm_eval 0.4.13 results file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.core.results.compare import compare_table
from console.core.results.display import run_summary
from console.core.results.offline import accuracy_for, accuracy_text, run_from_accuracy, with_accuracy
from console.core.results.record import StoredRun, run_from_dict, run_to_dict

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lm-eval-0.4.13"


def _results(task: str = "gsm8k") -> dict:
    data = json.loads((FIXTURES / "results_gsm8k_local.json").read_text())
    # the console renames its local-copy task back to the task asked for
    return {k: ({task: v["gsm8k_local"]} if isinstance(v, dict) and "gsm8k_local" in v else v) for k, v in data.items()}


def _acc(created: float = 2000.0, instance: str = "real") -> StoredRun:
    ctx = {"node": "n1", "instance": instance, "serve_preset": "tiny"}
    return run_from_accuracy(ctx, _results(), task="gsm8k", limit=3, model="/m/tiny", dataset="/d", created=created)


def _speed(instance: str = "real") -> StoredRun:
    return StoredRun(
        id=f"speed-{instance}",
        created=1000.0,
        origin="console",
        context={"node": "n1", "instance": instance},
        setup={"model": "/m/tiny", "max_concurrency": 4},
        metrics={"output_throughput": 900.0},
    )


def test_lm_eval_scores_become_metrics_and_round_trip():
    run = _acc()
    assert run.context["run_kind"] == "accuracy"
    assert run.metrics == {
        "gsm8k_exact_match_strict_match": 0.0,
        "gsm8k_exact_match_strict_match_stderr": 0.0,
        "gsm8k_exact_match_flexible_extract": 0.0,
        "gsm8k_exact_match_flexible_extract_stderr": 0.0,
    }
    assert run.setup["num_fewshot"] == 2 and run.setup["limit"] == 3
    assert run_from_dict(json.loads(json.dumps(run_to_dict(run)))) == run
    assert run_summary(run)["setup"] == "accuracy gsm8k n3 = 0 exact_match_flexible_extract"


def test_accuracy_shows_beside_speed_runs_of_the_same_instance():
    speed, other = _speed(), _speed("other")
    acc_old, acc = _acc(1500.0), _acc(2000.0)
    found = accuracy_for([speed, other, acc], [acc_old, acc, speed, other])
    assert found == [acc, None, None]  # the newest; none for another instance or for the accuracy run itself
    assert accuracy_text(acc) == "gsm8k 0 (exact_match_flexible_extract, n=3)"
    rows = {r["key"]: r for r in compare_table([with_accuracy(speed, acc), with_accuracy(other, None)])}
    assert rows["accuracy"]["values"] == ["gsm8k 0 (exact_match_flexible_extract, n=3)", None]


def test_a_results_file_without_the_task_is_refused():
    with pytest.raises(ValueError, match="no results for task 'mmlu'"):
        run_from_accuracy({}, _results(), task="mmlu", limit=None, model="m")
