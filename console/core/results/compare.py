"""Runs side by side: context, setup and metrics rows with deltas against the first run."""

from __future__ import annotations

import math
from collections.abc import Sequence

from console.core.bench.result import result_metric_keys
from console.core.results.display import (
    ENERGY_BETTER,
    ENERGY_LABELS,
    WORKLOAD_BETTER,
    WORKLOAD_LABELS,
    better,
    metric_label,
    run_date,
)
from console.core.results.record import StoredRun

_COMPARE_CONTEXT = (
    ("label", "Label"),
    ("run_kind", "Kind"),
    ("origin", "Origin"),
    ("node", "Node"),
    ("gpu_model", "GPU"),
    ("partition", "Partition"),
    ("serve_preset", "Serve preset"),
    ("vllm_version", "vLLM"),
    ("bench_preset", "Benchmark preset"),
    ("client", "Client"),
    ("accuracy", "Accuracy (same instance)"),
)
_COMPARE_SETUP = (
    ("model", "Model"),
    ("backend", "Backend"),
    ("dataset", "Dataset"),
    ("input_len", "Input len"),
    ("output_len", "Output len"),
    ("num_prompts", "Prompts"),
    ("request_rate", "Request rate"),
    ("max_concurrency", "Max concurrency"),
    ("burstiness", "Burstiness"),
    ("batch_size", "Batch size"),
    ("task", "Accuracy task"),
    ("limit", "Samples"),
)


def _context_value(run: StoredRun, key: str) -> object:
    if key == "label":
        return run.label
    if key == "origin":
        return run.origin
    if key == "run_kind":
        return run.context.get("run_kind")
    if key == "client":  # issue B2: which client measured it
        return f"{run.client} {run.client_version}" if run.client_version else run.client
    if key == "partition":
        ctx = run.context
        if ctx.get("compute_partition") or ctx.get("memory_partition"):
            return f"{ctx.get('compute_partition') or '?'}/{ctx.get('memory_partition') or '?'}"
        return None
    return run.context.get(key)


def compare_table(runs: Sequence[StoredRun]) -> list[dict]:
    """Runs side by side, deltas against the first run.

    Rows, in order: {"section": "run", "key": "id", ...} (the column heads), the
    context and setup rows any run knows ("context" / "setup"), then every metric
    any run has ("metric", in the result block's order). Each row: key, label,
    values (one per run, None = missing), delta (value - first run's) and
    delta_pct (delta / first * 100; None when either is missing or the first is 0)
    for numeric metric rows (None elsewhere and in the first column), and
    better ("higher" | "lower" | None).
    """
    if not runs:
        return []
    n = len(runs)
    rows: list[dict] = [
        {
            "section": "run",
            "key": "id",
            "label": "Run",
            "values": [r.id for r in runs],
            "delta": [None] * n,
            "delta_pct": [None] * n,
            "better": None,
        }
    ]
    rows.append(
        {
            "section": "run",
            "key": "date",
            "label": "Date",
            "values": [run_date(r) for r in runs],
            "delta": [None] * n,
            "delta_pct": [None] * n,
            "better": None,
        }
    )
    for section, keys, get in (
        ("context", _COMPARE_CONTEXT, _context_value),
        ("setup", _COMPARE_SETUP, lambda r, k: r.setup.get(k)),
    ):
        for key, label in keys:
            values = [get(r, key) for r in runs]
            if all(v is None for v in values):
                continue
            if key == "client" and all(v == "vllm" for v in values):
                continue  # vLLM's own client on every side: nothing to tell apart
            if key == "run_kind":  # shown only beside an offline or accuracy run
                values = [v or "serving" for v in values]
            rows.append(
                {
                    "section": section,
                    "key": key,
                    "label": label,
                    "values": values,
                    "delta": [None] * n,
                    "delta_pct": [None] * n,
                    "better": None,
                }
            )
    union: dict[str, float] = {}
    for run in runs:
        for key in run.metrics:
            union.setdefault(key, 1.0)
    for key in result_metric_keys(union):
        numbers: list[float | None] = [r.metrics.get(key) for r in runs]
        rows.append(_number_row("metric", key, metric_label(key), numbers, better(key), finite=True))
    rows.extend(energy_rows(runs))
    rows.extend(workload_rows(runs))
    return rows


def workload_rows(runs: Sequence[StoredRun]) -> list[dict]:
    """Goodput, good requests/s and the prefix-cache share as "metric" rows (deltas like the
    others), and a "Prefix cache" row saying which runs are not the cold figures they were
    meant to be (issue B2); only for what any run recorded."""
    n = len(runs)
    rows: list[dict] = []
    for key, label in WORKLOAD_LABELS.items():
        numbers: list[float | None] = [getattr(r, key) for r in runs]
        if all(v is None for v in numbers):
            continue
        rows.append(_number_row("metric", key, label, numbers, WORKLOAD_BETTER.get(key)))
    if any(r.prefix_cache is not None for r in runs):
        rows.append(
            {
                "section": "warning",
                "key": "prefix_cache_warning",
                "label": "Prefix cache",
                "values": [_cold_word(r) for r in runs],
                "delta": [None] * n,
                "delta_pct": [None] * n,
                "better": None,
            }
        )
    return rows


def delta_from(base: float | None, value: float | None, *, finite: bool = False) -> tuple[float | None, float | None]:
    """A value's difference from the first run's, and in percent: None where either is missing
    (``finite``: or not a finite number, the metrics), the percentage also where the first is 0."""
    if value is None or base is None or (finite and not (math.isfinite(value) and math.isfinite(base))):
        return None, None
    diff = value - base
    return diff, (diff / base * 100.0 if base else None)


def _number_row(
    section: str, key: str, label: str, numbers: list[float | None], better: str | None, *, finite: bool = False
) -> dict:
    """A row of numbers with each run's delta from the first (delta_from): the metric, workload
    and energy rows."""
    base = numbers[0]
    delta: list[float | None] = [None]
    pct: list[float | None] = [None]
    for value in numbers[1:]:
        d, p = delta_from(base, value, finite=finite)
        delta.append(d)
        pct.append(p)
    return {
        "section": section,
        "key": key,
        "label": label,
        "values": numbers,
        "delta": delta,
        "delta_pct": pct,
        "better": better,
    }


def _cold_word(run: StoredRun) -> str | None:
    if run.prefix_cache is None:
        return None
    if run.prefix_cache_warning:
        return f"NOT COLD ({run.prefix_cache_hit_pct:.0f} % cached)"
    return "cold" if run.prefix_cache.get("cold") is True else "warm by design"


def prefix_cache_warnings(runs: Sequence[StoredRun]) -> list[str]:
    """'<id>: X % of prompt tokens came from the prefix cache: ...' for each run it concerns."""
    return [f"{r.id}: {r.prefix_cache_warning}" for r in runs if r.prefix_cache_warning]


def energy_rows(runs: Sequence[StoredRun]) -> list[dict]:
    """Section "energy": tokens/J, energy, power, throttled % (deltas like metrics) and
    client-bound, for the runs any of which recorded them (issue P)."""
    n = len(runs)
    rows: list[dict] = []
    for key, label in ENERGY_LABELS.items():
        numbers = [r.energy_value(key) for r in runs]
        if all(v is None for v in numbers):
            continue
        rows.append(_number_row("energy", key, label, numbers, ENERGY_BETTER.get(key)))
    bound = [r.client_bound for r in runs]
    if any(r.client_check is not None for r in runs):
        rows.append(
            {
                "section": "energy",
                "key": "client_bound",
                "label": "Client-bound",
                "values": bound,
                "delta": [None] * n,
                "delta_pct": [None] * n,
                "better": None,
            }
        )
    return rows


# What makes two serving runs' numbers comparable: the same load (issue U).
WORKLOAD_FIELDS = (
    ("dataset", "dataset"),
    ("input_len", "input len"),
    ("output_len", "output len"),
    ("max_concurrency", "concurrency"),
    ("request_rate", "rate"),
    ("num_prompts", "prompts"),
)


def _workload_value(run: StoredRun, key: str) -> object:
    value = run.setup.get(key)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def workload_differences(runs: Sequence[StoredRun]) -> list[tuple[str, list[object]]]:
    """The workload fields (dataset, lengths, concurrency, rate, prompts) on which the runs
    differ, each with the runs' values; a field a run does not record is not judged for it."""
    out = []
    for key, label in WORKLOAD_FIELDS:
        values = [_workload_value(r, key) for r in runs]
        known = {repr(v) for v in values if v is not None}
        if len(known) > 1:
            out.append((label, values))
    return out


def workload_warning(runs: Sequence[StoredRun]) -> str | None:
    """One line naming the fields on which the runs' workloads differ, None when they agree:
    `workloads differ: input len 512 vs 1024, concurrency 16 vs 64`."""
    diffs = workload_differences(runs)
    if not diffs:
        return None

    def shown(v: object) -> str:
        if v is None:
            return "?"
        if isinstance(v, float):
            return "inf" if math.isinf(v) else f"{v:g}"
        return str(v)

    parts = [f"{label} {' vs '.join(shown(v) for v in values)}" for label, values in diffs]
    return "workloads differ: " + ", ".join(parts)
