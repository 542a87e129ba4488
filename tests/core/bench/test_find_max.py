"""The find-max search (console/core/bench/find_max.py) on synthetic latency curves.

A curve gives a run's p99 TTFT (ms) at a load; noisy curves multiply it by a
log-normal factor drawn from a seeded RNG, so every case is reproducible. The
search only ever sees what a run would report.
"""

from __future__ import annotations

import math
import random

import pytest

from console.core.bench.find_max import (
    MAX_RUNS,
    REPEAT_BAND,
    REPEATS,
    FindMax,
    Run,
    SearchError,
    SearchSpec,
    parse_budget,
)
from console.core.experiment.spec import Budget

BUDGET = parse_budget("p99_ttft_ms=2000")


def linear(load: float) -> float:
    """p99 TTFT grows 20 ms per unit of load from 100 ms: the budget breaks above 95."""
    return 100.0 + 20.0 * load


def knee(load: float) -> float:
    """Flat, then a steep wall near 300 (queueing): 2000 ms at load 300."""
    return 150.0 + 1850.0 * (load / 300.0) ** 4


def search(curve, spec: SearchSpec, *, noise: float = 0.0, seed: int = 0, extra=None):
    """Run the machine to the end against a curve; returns (outcome, the loads run in order)."""
    rng = random.Random(seed)
    machine = FindMax(spec)
    loads = []
    for _ in range(1000):  # bounded: the machine must stop long before
        load = machine.next_load()
        if load is None:
            break
        loads.append(load)
        value = curve(load) * (math.exp(rng.gauss(0.0, noise)) if noise else 1.0)
        values = {"p99_ttft_ms": value, "output_throughput": 10.0 * load}
        if extra:
            values.update(extra(load))
        machine.feed(load, Run(values, run_id=f"run-{len(loads)}"))
    assert machine.done
    return machine.outcome(), loads


def boundary(curve, limit: float, hi: float = 1e6) -> float:
    """The load where a monotone curve reaches limit (bisection, for the tests' expectations)."""
    lo = 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if curve(mid) <= limit else (lo, mid)
    return lo


# ---------------------------------------------------------------- monotone


def test_grows_then_bisects_to_the_tolerance():
    out, loads = search(linear, SearchSpec(BUDGET))
    assert out.status == "found"
    # 1, 2, 4, ..., 64 meet; 128 breaks; then bisection between 64 and 128
    assert loads[:8] == [1, 2, 4, 8, 16, 32, 64, 128]
    true = boundary(linear, 2000.0)  # 95
    assert out.load <= true and (true - out.load) <= 0.10 * out.load
    assert out.broke_at > true and out.broke_at - out.load <= 0.10 * out.load
    assert out.figures["p99_ttft_ms"] == linear(out.load) and out.figures["output_throughput"] == 10 * out.load
    assert out.point.run_ids and out.message.startswith(f"highest concurrency within the budget: {int(out.load)}")
    assert "p99_ttft_ms" in out.message  # why the next one up broke


@pytest.mark.parametrize("tolerance", [0.2, 0.1, 0.05, 0.02])
def test_converges_within_any_tolerance(tolerance):
    spec = SearchSpec(BUDGET, start=4, tolerance=tolerance)
    out, _ = search(knee, spec)
    true = boundary(knee, 2000.0)
    assert out.status == "found"
    assert out.load <= true < out.broke_at
    assert out.broke_at - out.load <= max(1.0, tolerance * out.load)


def test_the_rate_dimension_uses_readable_rates():
    spec = SearchSpec(BUDGET, dimension="rate", start=0.5, growth=2.0, tolerance=0.05)
    out, loads = search(lambda r: 100.0 + 40.0 * r, spec)
    true = boundary(lambda r: 100.0 + 40.0 * r, 2000.0)  # 47.5 req/s
    assert out.status == "found" and out.load <= true and true - out.load <= 0.05 * out.load
    assert all(x == float(f"{x:.3g}") for x in loads)  # three significant digits
    assert out.message.startswith("highest rate within the budget: ") and "req/s" in out.message


def test_every_limit_must_hold_and_failures_break_a_point():
    budget = parse_budget("p99_ttft_ms=2000,p99_itl_ms=50")
    out, _ = search(linear, SearchSpec(budget), extra=lambda c: {"p99_itl_ms": 10.0 + c})
    assert out.load <= 40 and out.broke_at > 40  # ITL breaks first, at 41
    assert "p99_itl_ms" in out.message

    machine = FindMax(SearchSpec(BUDGET, start=8))
    point = machine.feed(8, Run({"p99_ttft_ms": 100.0}, failed=3))
    assert point.meets is False and "3 requests failed" in point.reason
    machine = FindMax(SearchSpec(budget, start=8))
    point = machine.feed(8, Run({"p99_ttft_ms": 100.0}))  # no ITL figure: not met
    assert point.meets is False and "p99_itl_ms not measured" in point.reason


# ---------------------------------------------------------------- the edges


def test_even_the_first_point_breaks_then_it_searches_down():
    out, loads = search(linear, SearchSpec(BUDGET, start=256))
    assert loads[:3] == [256, 128, 64]  # down by the growth factor until one meets
    assert out.status == "found" and out.load <= 95 < out.broke_at


def test_nothing_meets_the_budget():
    out, loads = search(lambda c: 5000.0 + c, SearchSpec(BUDGET, start=16))
    assert out.status == "none_meets" and out.load is None and out.broke_at == 1
    assert loads == [16, 8, 4, 2, 1]
    assert out.message == "even concurrency 1 breaks the budget (p99_ttft_ms 5001 > 2000): no load meets it"
    assert out.figures == {}


def test_never_breaks_up_to_the_maximum():
    out, loads = search(lambda c: 50.0, SearchSpec(BUDGET, start=1, max_load=100))
    assert out.status == "never_broke" and out.load == 100 and out.broke_at is None
    assert loads == [1, 2, 4, 8, 16, 32, 64, 100]
    assert "held up to the maximum concurrency 100" in out.message
    rate, _ = search(lambda r: 50.0, SearchSpec(BUDGET, dimension="rate", start=1))
    assert rate.status == "never_broke" and rate.load == 512  # the default maximum rate


def test_concurrency_neighbours_end_the_bisection():
    out, _ = search(lambda c: 1000.0 if c <= 3 else 3000.0, SearchSpec(BUDGET, tolerance=0.01))
    assert (out.load, out.broke_at, out.status) == (3, 4, "found")


# ---------------------------------------------------------------- noise


def test_a_point_near_a_limit_is_repeated_and_judged_by_the_median():
    assert (REPEAT_BAND, REPEATS) == (0.10, 3)
    machine = FindMax(SearchSpec(BUDGET, start=10))
    first = machine.feed(10, Run({"p99_ttft_ms": 2100.0}))  # 5 % over: could be noise
    assert first.meets is None and first.near and machine.next_load() == 10
    second = machine.feed(10, Run({"p99_ttft_ms": 1900.0}))  # median 2000: still within 10 %
    assert second.meets is None and machine.next_load() == 10
    third = machine.feed(10, Run({"p99_ttft_ms": 1950.0}))  # median of 3: 1950 meets
    assert third.meets is True and third.medians["p99_ttft_ms"] == 1950.0 and len(third.runs) == 3
    assert machine.next_load() == 20
    # one outlier run cannot move a median of three
    machine = FindMax(SearchSpec(BUDGET, start=10))
    for v in (1850.0, 9000.0, 1900.0):
        point = machine.feed(10, Run({"p99_ttft_ms": v}))
    assert point.meets is True


def test_a_far_point_is_decided_by_one_run_and_a_near_one_gets_all_its_runs():
    machine = FindMax(SearchSpec(BUDGET, start=10))
    assert machine.feed(10, Run({"p99_ttft_ms": 1500.0})).meets is True  # 25 % under: one run
    assert machine.feed(20, Run({"p99_ttft_ms": 2500.0})).meets is False  # 25 % over: one run
    machine = FindMax(SearchSpec(BUDGET, start=10))
    machine.feed(10, Run({"p99_ttft_ms": 2150.0}))
    point = machine.feed(10, Run({"p99_ttft_ms": 2650.0}))  # the mean of two left the band: not enough
    assert point.meets is None
    point = machine.feed(10, Run({"p99_ttft_ms": 1990.0}))
    assert point.meets is False and point.medians["p99_ttft_ms"] == 2150.0 and len(point.runs) == 3


@pytest.mark.parametrize("seed", range(12))
def test_noisy_curves_converge_near_the_boundary(seed):
    """5 % run-to-run noise on p99: the answer lies where the true p99 is within
    two standard deviations of the limit, or below it by at most the tolerance."""
    sigma, limit, tol = 0.05, 2000.0, 0.10
    out, loads = search(knee, SearchSpec(BUDGET, start=4, tolerance=tol), noise=sigma, seed=seed)
    assert out.status == "found"
    low = boundary(knee, limit * math.exp(-2 * sigma))
    high = boundary(knee, limit * math.exp(2 * sigma))
    assert low * (1 - tol) <= out.load <= high
    assert len(loads) <= MAX_RUNS


def test_the_same_inputs_give_the_same_search():
    spec = SearchSpec(BUDGET, start=4)
    a = search(knee, spec, noise=0.08, seed=42)
    b = search(knee, spec, noise=0.08, seed=42)
    assert a[1] == b[1] and a[0] == b[0]
    assert a[0].to_json() == b[0].to_json()


def test_replay_resumes_where_it_stopped():
    spec = SearchSpec(BUDGET, start=4)
    out, loads = search(knee, spec, noise=0.08, seed=7)
    rng = random.Random(7)
    history = [(load, Run({"p99_ttft_ms": knee(load) * math.exp(rng.gauss(0.0, 0.08))})) for load in loads[:5]]
    resumed = FindMax.replay(spec, history)
    assert resumed.runs_used == 5 and resumed.next_load() == loads[5]


def test_the_number_of_runs_is_bounded_whatever_the_curve():
    # a curve that hugs the limit: every point lands in the repeat band
    spec = SearchSpec(BUDGET, start=1, tolerance=0.01, max_runs=12)
    out, loads = search(lambda c: 1900.0 + c, spec)
    assert loads == [1, 1, 1, 2, 2, 2, 4, 4, 4, 8, 8, 8]
    assert out.runs == 12 and out.status == "out_of_runs" and out.load == 8 and out.broke_at is None
    assert out.message.startswith("stopped after 12 runs (the most allowed)")
    for seed in range(20):
        out, loads = search(knee, SearchSpec(BUDGET, start=1, tolerance=0.02), noise=0.3, seed=seed)
        assert len(loads) <= MAX_RUNS and out.status in ("found", "out_of_runs", "none_meets", "never_broke")


def test_a_run_at_another_load_or_after_the_end_is_refused():
    machine = FindMax(SearchSpec(BUDGET, start=8))
    with pytest.raises(SearchError, match="expected a run at 8, got 16"):
        machine.feed(16, Run({"p99_ttft_ms": 1.0}))
    machine = FindMax(SearchSpec(BUDGET, start=8, max_load=8))
    machine.feed(8, Run({"p99_ttft_ms": 1.0}))
    with pytest.raises(SearchError, match="the search is over"):
        machine.feed(8, Run({"p99_ttft_ms": 1.0}))


# ---------------------------------------------------------------- budgets and settings


def test_parse_budget():
    b = parse_budget("p99_ttft_ms=2000, p99_itl_ms=50")
    assert b.limits == (("ttft", "p99", 2000.0), ("itl", "p99", 50.0))
    named = {"interactive": Budget("interactive", (("ttft", "p99", 2000.0),))}
    assert parse_budget("interactive", named) is named["interactive"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "budget: empty"),
        ("batch", "budget 'batch': no budget of that name (known: interactive)"),
        ("p99_ttft=2000", "budget key 'p99_ttft': unknown limit"),
        ("p99_ttft_ms=fast", "budget key 'p99_ttft_ms': expected milliseconds > 0, got 'fast'"),
        ("p99_ttft_ms=-5", "budget key 'p99_ttft_ms': expected milliseconds > 0, got '-5'"),
        ("p99_ttft_ms=1,p99_ttft_ms=2", "budget key 'p99_ttft_ms': given twice"),
        ("p99_ttft_ms=2000,=5", "budget '=5': expected KEY=MS"),
    ],
)
def test_bad_budgets_are_one_line_naming_the_key(text, message):
    named = {"interactive": Budget("interactive", (("ttft", "p99", 2000.0),))}
    with pytest.raises(SearchError) as err:
        parse_budget(text, named)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"dimension": "users"}, "find-max --by: 'users' is not one of concurrency, rate"),
        ({"start": 0}, "find-max start: expected a load > 0"),
        ({"start": 2.5}, "find-max start: a concurrency is a whole number"),
        ({"growth": 1.0}, "find-max growth: expected a factor > 1"),
        ({"tolerance": 0}, "find-max tolerance"),
        ({"max_load": 0.5}, "find-max max: expected a load >= start"),
        ({"max_runs": 0}, "find-max max-runs"),
    ],
)
def test_bad_settings_are_one_line_naming_the_setting(kw, message):
    with pytest.raises(SearchError, match=message.replace("(", r"\(")):
        SearchSpec(BUDGET, **kw)
