"""Issue U: which stored runs count as failed, and what a comparison says about them."""

from __future__ import annotations

from console.core.results.build import run_from_console
from console.core.results.compare import workload_warning
from console.core.results.display import failed_note, failure_of, run_status, split_failed

OK = {"completed": 10, "failed": 0, "output_throughput": 100.0, "max_concurrency": 4, "num_prompts": 10}


def test_failed_means_no_success_an_error_or_cancelled():
    ok = run_from_console({"node": "n"}, OK)
    none = run_from_console({"node": "n"}, {**OK, "completed": 0, "failed": 10, "output_throughput": 0.0})
    cancelled = run_from_console({"node": "n", "status": "cancelled"}, {**OK, "date": "x"})
    offline = run_from_console({"node": "n", "run_kind": "latency"}, None, setup={"model": "m"})
    assert failure_of(ok) is None and run_status(ok) == "ok"
    assert failure_of(none) == "0 of 10 requests succeeded" and run_status(none) == "failed"
    assert failure_of(cancelled) == "cancelled"
    assert failure_of(offline) is None  # no request counts: not judged
    good, failed = split_failed([ok, none, cancelled])
    assert good == [ok] and failed == [none, cancelled]
    assert failed_note(failed).startswith(f"left out 2 failed runs ({none.id}, {cancelled.id})")


def test_workload_warning_names_every_differing_field_and_skips_unknowns():
    a = run_from_console({"node": "n"}, OK, setup={"dataset": "random", "input_len": 512, "output_len": 128})
    b = run_from_console(
        {"node": "n"}, {**OK, "max_concurrency": 16}, setup={"dataset": "random", "input_len": 1024, "output_len": 128}
    )
    c = run_from_console({"node": "n"}, {**OK, "date": "y"}, setup={"dataset": "random"})  # lengths not recorded
    assert workload_warning([a, b]) == "workloads differ: input len 512 vs 1024, concurrency 4 vs 16"
    assert workload_warning([a, c]) is None
