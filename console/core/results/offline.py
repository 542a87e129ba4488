"""Stored runs of the offline benchmarks (latency, throughput) and of accuracy
checks (lm_eval), kept like serving runs: same record, context, store and export.

context["run_kind"] says which ("latency" | "throughput" | "accuracy"; serving
runs have None). `result` keeps the tool's own JSON (the source of truth);
`metrics` are its numbers under the names the seeds' tables use.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence

from console.core.bench.offline import OfflinePreset, offline_metrics, offline_setup
from console.core.bench.run_telemetry import RunTelemetry
from console.core.results.build import (
    context_block,
    extras_block,
    finish_run,
    full_setup,
    jsonable_setup,
    with_title,
)
from console.core.results.record import StoredRun, as_number, jsonable, new_run_id

OFFLINE_KINDS = ("latency", "throughput")
ACCURACY = "accuracy"


def run_kind(run: StoredRun) -> str:
    return str(run.context.get("run_kind") or "serving")


def run_from_offline(
    context: Mapping | None,
    kind: str,
    result: Mapping,
    preset: OfflinePreset,
    *,
    client: str = "subcommand",
    label: str | None = None,
    created: float | None = None,
    telemetry: RunTelemetry | None = None,
) -> StoredRun:
    """An offline run for ResultStore.save; raises OfflineError when the JSON lacks its number.
    telemetry: the run's GPUs over the run (issue P): its energy is stored, and for a throughput
    run tokens per joule (output tokens: requests x the preset's output length)."""
    metrics = offline_metrics(kind, result)
    setup = offline_setup(preset, client)
    model = result.get("model_id")
    if isinstance(model, str) and model:
        setup["model"] = model
    ctx = dict(context or {})
    ctx.update(run_kind=kind, bench_preset=ctx.get("bench_preset") or preset.name, tp=preset.tp)
    with_title(ctx, None)  # a caller's `bench_overrides` named in the title
    run = _console_run(created, label, ctx, setup, metrics, dict(result))
    if telemetry is not None:
        extras = extras_block(telemetry, None, (), offline_output_tokens(kind, result, preset))
        run = finish_run(dataclasses.replace(run, **extras))
    name = ctx.get("offline_run")
    if name:  # two runs (one per CPX partition) may write equal JSON: each is its own run
        run = _salted(run, name)
    return run


def offline_output_tokens(kind: str, result: Mapping, preset: OfflinePreset) -> float | None:
    """Output tokens an offline run generated, where its JSON and preset say (throughput runs)."""
    requests = as_number(result.get("num_requests"))
    if kind == "throughput" and requests is not None and preset.output_len:
        return requests * preset.output_len
    return None


def _console_run(
    created: float | None, label: str | None, ctx: Mapping, setup: Mapping, metrics: dict, result: Mapping
) -> StoredRun:
    """A run the console measured, finished (fingerprint and id from its content)."""
    run = StoredRun(
        id="",
        created=time.time() if created is None else float(created),
        origin="console",
        label=label,
        context=context_block(ctx),
        setup=jsonable_setup(full_setup(setup)),
        metrics=metrics,
        result=jsonable(result),
    )
    return finish_run(run)


def _salted(run: StoredRun, salt: object) -> StoredRun:
    """The run with its fingerprint (and id) mixed with `salt`, so that equal content
    measured twice stays two runs in the store (which folds equal fingerprints)."""
    fingerprint = hashlib.sha256(f"{run.fingerprint}:{salt}".encode()).hexdigest()
    return dataclasses.replace(run, fingerprint=fingerprint, id=new_run_id(run.created, run.node, fingerprint))


# ---------------------------------------------------------------- accuracy (lm_eval)


def accuracy_metrics(results: Mapping, task: str) -> dict[str, float]:
    """lm_eval's `results[task]` -> metrics: `exact_match,strict-match` ->
    `<task>_exact_match_strict_match` (and its `_stderr`). Raises ValueError."""
    per_task = results.get("results") if isinstance(results, Mapping) else None
    if not isinstance(per_task, Mapping) or not isinstance(per_task.get(task), Mapping):
        raise ValueError(f"lm_eval wrote no results for task {task!r}")
    out: dict[str, float] = {}
    for key, value in per_task[task].items():
        number = as_number(value) if not isinstance(value, str) else None
        if number is None or "," not in str(key):  # scores are "metric,filter"; alias, sample_len are not
            continue
        metric, _, filt = str(key).partition(",")
        stderr = metric.endswith("_stderr")
        base = metric[: -len("_stderr")] if stderr else metric
        name = "_".join(p for p in (task, base, filt.replace("-", "_")) if p and p != "none")
        out[name + ("_stderr" if stderr else "")] = number
    if not any(not k.endswith("_stderr") for k in out):
        raise ValueError(f"lm_eval's results for {task!r} hold no score")
    return out


def headline_accuracy(run: StoredRun) -> tuple[str, float] | None:
    """The score to show: flexible-extract first (seed 002 quotes it first), else the first one."""
    scores = [(k, v) for k, v in run.metrics.items() if not k.endswith("_stderr")]
    if not scores:
        return None
    for key, value in scores:
        if key.endswith("flexible_extract"):
            return key, value
    return scores[0]


def run_from_accuracy(
    context: Mapping | None,
    results: Mapping,
    *,
    task: str,
    limit: int | None,
    model: str | None,
    dataset: str | None = None,
    label: str | None = None,
    created: float | None = None,
) -> StoredRun:
    """An lm_eval run for ResultStore.save (results: lm_eval's results JSON)."""
    metrics = accuracy_metrics(results, task)
    ctx = dict(context or {})
    ctx["run_kind"] = ACCURACY
    setup = {
        "model": model,
        "dataset": dataset or task,
        "task": task,
        "limit": limit,
        "num_fewshot": (results.get("n-shot") or {}).get(task) if isinstance(results.get("n-shot"), Mapping) else None,
    }
    kept = {k: results[k] for k in ("results", "n-shot", "configs", "versions", "n-samples") if k in results}
    run = _console_run(created, label, ctx, setup, metrics, kept)
    # lm_eval's JSON has no date: two evaluations with equal scores are still two runs
    return _salted(run, repr(run.created))


def _instance_key(run: StoredRun) -> tuple | None:
    node, instance = run.context.get("node"), run.context.get("instance")
    if not node or not instance:
        return None
    return (node, instance, run.setup.get("model"))


def accuracy_for(runs: Sequence[StoredRun], pool: Iterable[StoredRun]) -> list[StoredRun | None]:
    """For each run, the newest accuracy run of the same node, instance and model
    (not newer than a day after it), so a speed result shows the score beside it."""
    latest: dict[tuple, list[StoredRun]] = {}
    for other in pool:
        if run_kind(other) == ACCURACY:
            key = _instance_key(other)
            if key is not None:
                latest.setdefault(key, []).append(other)
    out: list[StoredRun | None] = []
    for run in runs:
        key = _instance_key(run)
        if run_kind(run) == ACCURACY or key is None or key not in latest:
            out.append(None)
            continue
        candidates = sorted(latest[key], key=lambda r: r.created)
        out.append(candidates[-1])
    return out


def accuracy_text(acc: StoredRun | None) -> str | None:
    """`gsm8k 0.91 (exact_match flexible)` for a cell; None without a score."""
    if acc is None:
        return None
    head = headline_accuracy(acc)
    if head is None:
        return None
    key, value = head
    task = str(acc.setup.get("task") or "")
    metric = key[len(task) + 1 :] if task and key.startswith(task + "_") else key
    limit = acc.setup.get("limit")
    return f"{task} {value:.4g} ({metric}" + (f", n={limit})" if limit else ")")


def with_accuracy(run: StoredRun, acc: StoredRun | None) -> StoredRun:
    """The run with the instance's accuracy in its context (for compare/export columns)."""
    text = accuracy_text(acc)
    if text is None:
        return run
    return dataclasses.replace(run, context={**run.context, "accuracy": text, "accuracy_run": acc.id if acc else None})
