"""The check report: a verdict per metric, the versions diff, Markdown and JSON, and
the exit code cron and CI rely on (1 on any regression, 0 otherwise, 2 for bad input)."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from console.core.baseline.diff import NodeVersions
from console.core.baseline.report import (
    EXIT_BAD_INPUT,
    BaselineInputError,
    PointRuns,
    build_report,
    render_markdown,
    report_to_dict,
    report_to_json,
    rule_for,
)
from console.core.baseline.suite import parse_suite

SUITE = parse_suite(
    """
[suite]
repeats = 5

[serve]
preset = "tiny"

[[point]]
name = "c4"
preset = "tiny"
concurrency = 4
metrics = ["output_throughput", "median_ttft_ms"]

[[point]]
name = "offline"
kind = "throughput"
input_len = 32
output_len = 16

[accuracy]
task = "gsm8k"
limit = 20
""",
    "profiles/suites/lab.toml",
)


def serving(rng: random.Random, throughput: float, ttft: float, n: int = 5, cv: float = 0.05) -> PointRuns:
    reps = tuple(
        {"output_throughput": rng.gauss(throughput, throughput * cv), "median_ttft_ms": rng.gauss(ttft, ttft * cv)}
        for _ in range(n)
    )
    return PointRuns("c4", "serving", reps)


def offline(rng: random.Random, tps: float, n: int = 5) -> PointRuns:
    reps = tuple(
        {"throughput_tok_s": rng.gauss(tps, tps * 0.04), "request_throughput": rng.gauss(tps / 48, tps / 48 * 0.04)}
        for _ in range(n)
    )
    return PointRuns("offline", "throughput", reps)


def accuracy(score: float, n: int = 3) -> PointRuns:
    reps = tuple(
        {"gsm8k_exact_match_flexible_extract": score, "gsm8k_exact_match_flexible_extract_stderr": 0.1}
        for _ in range(n)
    )
    return PointRuns("accuracy", "accuracy", reps)


def runs(seed: int, *, throughput: float = 800.0, ttft: float = 40.0, score: float = 0.5) -> list[PointRuns]:
    rng = random.Random(seed)
    return [serving(rng, throughput, ttft), offline(rng, 2400.0), accuracy(score)]


V1 = NodeVersions("lab-1", rocm="6.4.1", vllm="0.11.0", flags=(("--max-num-seqs", "256"),))


def test_an_unchanged_node_is_same_everywhere_and_exits_0():
    report = build_report(SUITE, runs(1), runs(2), name="nightly", node="lab-1", before=V1, after=V1)
    assert report.verdict == "same" and report.exit_code == 0
    assert [(r.point, r.comparison.metric, r.verdict) for r in report.results] == [
        ("c4", "output_throughput", "same"),
        ("c4", "median_ttft_ms", "same"),
        ("offline", "throughput_tok_s", "same"),
        ("offline", "request_throughput", "same"),
        ("accuracy", "gsm8k_exact_match_flexible_extract", "same"),  # found in the runs, _stderr left out
    ]
    text = render_markdown(report)
    assert text.startswith("# Baseline check: nightly on lab-1: same\n")
    assert "Nothing: the same versions and settings as when the baseline was saved." in text


def test_a_slower_node_is_regressed_with_what_changed_and_exits_1():
    after = NodeVersions("lab-1", rocm="7.0.2", vllm="0.11.0", flags=(("--max-num-seqs", "1"),))
    report = build_report(
        SUITE, runs(1), runs(2, throughput=300.0, ttft=95.0), name="nightly", node="lab-1", before=V1, after=after
    )
    assert report.verdict == "regressed" and report.exit_code == 1
    by_metric = {r.comparison.metric: r.comparison for r in report.results}
    assert by_metric["output_throughput"].verdict == "regressed"  # higher is better: it fell
    assert by_metric["median_ttft_ms"].verdict == "regressed"  # lower is better: it rose
    assert by_metric["throughput_tok_s"].verdict == "same"
    data = json.loads(report_to_json(report))
    assert data["verdict"] == "regressed" and data["exit_code"] == 1
    assert data["counts"] == {"regressed": 2, "improved": 0, "same": 3, "unknown": 0}
    assert all("verdict" in m for m in data["metrics"])
    tput = data["metrics"][0]
    assert tput["metric"] == "output_throughput" and tput["label"] == "Output token throughput (tok/s)"
    assert tput["change_pct"] < -50 and tput["noise_band_pct"] > 0 and tput["better"] == "higher"
    assert [c["line"] for c in data["changes"]] == ["ROCm: 6.4.1 -> 7.0.2", "serve flag --max-num-seqs: 256 -> 1"]
    text = render_markdown(report)
    assert "| c4 | Output token throughput (tok/s) | " in text and "| **regressed** |" in text
    assert "- ROCm: 6.4.1 -> 7.0.2" in text and "- serve flag --max-num-seqs: 256 -> 1" in text
    assert "## Why" in text and "- c4 output_throughput: regressed: " in text


def test_a_faster_node_is_improved_and_exits_0():
    report = build_report(SUITE, runs(1), runs(2, throughput=1600.0, ttft=20.0), name="n", node="lab-1")
    assert report.verdict == "improved" and report.exit_code == 0
    assert not report.versions_known
    assert "Unknown: the versions and settings of one side were not recorded." in render_markdown(report)


def test_accuracy_is_judged_in_points():
    report = build_report(SUITE, runs(1, score=0.6), runs(2, score=0.3), name="n", node="lab-1")
    acc = next(r for r in report.results if r.point == "accuracy")
    assert acc.verdict == "regressed" and acc.comparison.scale == "absolute"
    entry = next(m for m in report_to_dict(report)["metrics"] if m["point"] == "accuracy")
    assert entry["change"] == pytest.approx(-0.3) and "change_pct" not in entry


def test_failed_repeats_and_missing_points_are_listed_not_hidden():
    now = runs(2)
    now[0] = PointRuns("c4", "serving", (None, None, None, None, {"output_throughput": 800.0, "median_ttft_ms": 40.0}))
    del now[1]
    report = build_report(SUITE, runs(1), now, name="n", node="lab-1")
    assert report.problems == (
        "c4: 4 of 5 repeats failed in the check",
        "offline: the check has no runs of this point",
    )
    verdicts = {(r.point, r.comparison.metric): r.comparison for r in report.results}
    assert verdicts[("c4", "output_throughput")].verdict == "unknown"
    assert verdicts[("c4", "output_throughput")].reason == "the check has 1 usable repeat: at least 2 a side are needed"
    assert verdicts[("offline", "throughput_tok_s")].reason == "the check has no runs of this point"
    assert report.verdict == "same" and report.exit_code == 0
    data = json.loads(report_to_json(report))  # strict JSON: no NaN anywhere
    assert data["problems"] == list(report.problems)


@pytest.mark.parametrize(
    ("baseline", "now", "message"),
    [
        ([], [PointRuns("c4", "serving", ())], "baseline 'n' holds no runs"),
        ([PointRuns("c4", "serving", ())], [], "the check holds no runs"),
        (
            [PointRuns("c4", "latency", ())],
            [PointRuns("c4", "serving", ())],
            "the baseline's point 'c4' is a latency run, the suite's is serving",
        ),
        (
            [PointRuns("c4", "serving", ()), PointRuns("c4", "serving", ())],
            [PointRuns("c4", "serving", ())],
            "the baseline holds point 'c4' twice",
        ),
        (
            [PointRuns("other", "serving", ())],
            [PointRuns("c4", "serving", ())],
            "baseline 'n' holds none of suite 'lab''s points (it has: other)",
        ),
    ],
)
def test_runs_that_do_not_fit_the_suite_are_bad_input(baseline, now, message):
    with pytest.raises(BaselineInputError) as info:
        build_report(SUITE, baseline, now, name="n", node="lab-1")
    assert str(info.value) == message
    assert EXIT_BAD_INPUT == 2


def test_the_suite_sets_the_rule():
    suite = parse_suite(
        '[suite]\nmin_effect = 3\nconfidence = 0.95\n[serve]\npreset = "t"\n[accuracy]\ntask = "gsm8k"\nmin_effect = 0.05\n',
        "s.toml",
    )
    rule = rule_for(suite)
    assert (rule.confidence, rule.min_effect, rule.min_effect_abs) == (0.95, 0.03, 0.05)
    report = build_report(suite, [accuracy(0.5)], [accuracy(0.5)], name="n", node="x")
    assert report_to_dict(report)["rule"] == {
        "confidence": 0.95,
        "resamples": 2000,
        "seed": 20261127,
        "min_effect_pct": 3.0,
        "accuracy_min_effect": 0.05,
    }
    assert "the 95 % bootstrap interval" in render_markdown(report)


def _tail_runs(p99: float, completed: int, seed: int) -> list[PointRuns]:
    rng = random.Random(seed)
    reps = tuple({"p99_ttft_ms": rng.gauss(p99, p99 * 0.03), "completed": float(completed)} for _ in range(5))
    return [PointRuns("c4", "serving", reps)]


@pytest.mark.parametrize(("completed", "hinted"), [(48, True), (500, False)])
def test_a_tail_percentile_from_short_repeats_says_why_it_may_not_repeat(completed, hinted):
    c4 = dataclasses.replace(SUITE.points[0], metrics=("p99_ttft_ms",))
    suite = dataclasses.replace(SUITE, points=(c4,), accuracy=None)
    report = build_report(
        suite, _tail_runs(90.0, completed, 1), _tail_runs(700.0, completed, 2), name="n", node="lab-1"
    )
    (result,) = report.results
    assert result.verdict == "regressed"  # the rule's verdict stands either way
    hint = f"a p99 of {completed} requests is their worst one or two: serve 100+ a repeat"
    assert (hint in result.comparison.reason) is hinted
    assert (hint in render_markdown(report)) is hinted
    assert ("worst one or two" in result.comparison.reason) is hinted
