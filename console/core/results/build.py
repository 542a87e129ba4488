"""StoredRuns built from a console run, a result JSON object or a printed result block."""

from __future__ import annotations

import dataclasses
import math
import shlex
import time
from collections.abc import Mapping, Sequence

from console.core.bench.client_check import ClientCheck, Pitfall
from console.core.bench.output_events import BenchResultBlock
from console.core.bench.result import BenchResult, normalize_result, result_metric_keys
from console.core.bench.run_telemetry import RunTelemetry, summarize, summary_to_json
from console.core.model import BenchPreset
from console.core.results.display import run_title
from console.core.results.record import (
    CONTEXT_KEYS,
    SETUP_KEYS,
    SETUP_NUMERIC_KEYS,
    StoredRun,
    as_number,
    fingerprint_of,
    jsonable,
    new_run_id,
)
from console.core.serve.argv import MASK, looks_secret, redact

# Keys a result block prints that describe the setup, not a measurement.
_BLOCK_SETUP_KEYS = ("max_concurrency", "request_rate")


def _redacted_args(args: Mapping[str, object]) -> dict:
    """Client arguments (a Namespace) with secret-looking values masked."""
    out: dict[str, object] = {}
    for key, value in args.items():
        key = str(key)
        if value is not None and (looks_secret(key) or key in ("header", "headers")):
            out[key] = MASK
        elif isinstance(value, str):
            out[key] = redact(value)
        else:
            out[key] = value
    return jsonable(out)


def context_block(context: Mapping | None, **extra: object) -> dict:
    """Every CONTEXT_KEYS key (None when unknown), plus any other given keys; secrets masked."""
    given = dict(context or {})
    given.update({k: v for k, v in extra.items() if v is not None})
    out: dict = dict.fromkeys(CONTEXT_KEYS)
    for key, value in given.items():
        out[str(key)] = value
    for key in ("serve_args", "client_argv"):
        value = out.get(key)
        if isinstance(value, str):
            try:
                value = shlex.split(value)
            except ValueError:
                value = value.split()
        if value is not None:
            out[key] = list(redact([str(v) for v in value]))
    env = out.get("env")
    if env is not None:
        pairs = env.items() if isinstance(env, Mapping) else env
        out["env"] = {str(k): (MASK if looks_secret(str(k)) else v) for k, v in pairs}
    if isinstance(out.get("client_args"), Mapping):
        out["client_args"] = _redacted_args(out["client_args"])
    return jsonable(out)


def full_setup(values: Mapping[str, object]) -> dict:
    out: dict = dict.fromkeys(SETUP_KEYS)
    out.update(values)
    for key in SETUP_NUMERIC_KEYS:
        if isinstance(out.get(key), str):
            number = as_number(out[key])
            if number is not None:
                out[key] = number
    return out


def setup_from_result(result: BenchResult) -> dict:
    """What a result JSON records about the run's setup."""
    values: dict = {
        "model": result.model_id,
        "backend": result.backend,
        "num_prompts": result.num_prompts,
        "request_rate": result.request_rate,
        "max_concurrency": result.max_concurrency,
        "burstiness": result.burstiness,
    }
    if result.endpoint_type is not None and result.endpoint_type != result.backend:
        values["endpoint_type"] = result.endpoint_type
    if result.tokenizer_id is not None and result.tokenizer_id != result.model_id:
        values["tokenizer"] = result.tokenizer_id
    if result.date is not None:
        values["date"] = result.date
    for key in ("ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps"):
        if result.raw.get(key) is not None:
            values[key] = result.raw[key]
    return full_setup(values)


def setup_from_block(block: BenchResultBlock) -> dict:
    """A printed block's setup: its Namespace / command line and pre-run lines,
    with `Maximum request concurrency` / `Request rate configured` of the block itself."""
    values: dict = {}
    for key, value in block.setup.items():
        if key == "label":  # vLLM's --label names the backend in 0.9.1-0.10.2
            if block.setup.get("backend") is None:
                values["backend"] = value
            continue
        values["dataset" if key == "dataset_name" else key] = value
    for key in _BLOCK_SETUP_KEYS:
        if key in block.metrics:
            value = block.metrics[key]
            values[key] = int(value) if key == "max_concurrency" and float(value).is_integer() else value
    return full_setup(values)


def metrics_from_block(block: BenchResultBlock) -> dict:
    metrics = {k: float(v) for k, v in block.metrics.items() if k not in _BLOCK_SETUP_KEYS}
    return {k: metrics[k] for k in result_metric_keys(metrics) if k in metrics}


def _metrics_from_result(result: BenchResult) -> dict:
    metrics = dict(result.metrics)
    return {k: metrics[k] for k in result_metric_keys(metrics) if k in metrics}


# ---------------------------------------------------------------- building runs


# Preset fields that are bookkeeping, not what the benchmark asked for.
_NOT_SETUP_FIELDS = frozenset({"name", "source"})


def preset_changes(base: object, effective: object) -> dict:
    """The fields an override changed between a preset and the one that ran, in field order,
    as JSON-safe values (a tuple as a list, None = unset); {} when they are the same."""
    if base is effective or not dataclasses.is_dataclass(base) or not dataclasses.is_dataclass(effective):
        return {}
    out: dict = {}
    for f in dataclasses.fields(base):
        if f.name in _NOT_SETUP_FIELDS or not hasattr(effective, f.name):
            continue
        before, after = getattr(base, f.name), getattr(effective, f.name)
        if before != after:
            out[f.name] = list(after) if isinstance(after, tuple) else after
    return out


def finish_run(run: StoredRun) -> StoredRun:
    fingerprint = fingerprint_of(run.result, run.metrics, run.setup)
    run_id = run.id or new_run_id(run.created, run.context.get("node"), fingerprint)
    return dataclasses.replace(run, id=run_id, fingerprint=fingerprint)


def run_from_console(
    context: Mapping | None,
    result: Mapping | BenchResult | None,
    live: Mapping | None = None,
    *,
    setup: Mapping | BenchPreset | None = None,
    block: BenchResultBlock | None = None,
    label: str | None = None,
    created: float | None = None,
    telemetry: RunTelemetry | None = None,
    client_check: ClientCheck | None = None,
    pitfalls: Sequence[Pitfall] = (),
    overrides: Mapping | None = None,
    prefix_cache: Mapping | None = None,
    goodput: Mapping | None = None,
) -> StoredRun:
    """A run the console made, ready for ResultStore.save.

    context: any of CONTEXT_KEYS (node, gpu_model, compute_partition,
    memory_partition, instance, serve_preset, serve_args, env, vllm_version,
    bench_preset, client_argv, sweep_id, sweep_point; extra keys are kept);
    secrets in serve_args/env/client_argv are masked here. result: the
    `--save-result` object (best the dict as read, e.g. RunOutcome.result_json,
    so it is stored as written; a BenchResult works too); when it could not
    be read, pass the printed `block` instead. live: the live series summary.
    setup: what the preset asked for (a BenchPreset, or a mapping of dataset,
    input_len, output_len, seed, max_concurrency, ...); the result's own values
    win where it records them. telemetry: the run's GPUs over the run (its energy, power,
    tokens per joule and throttled share are computed from it, output tokens from the
    result); client_check / pitfalls: the serving client's self-check (issue P).
    overrides: the preset fields an override changed (preset_changes), stored as the
    context's `bench_overrides` and named in its `title` ("chat-short · conc 16 · in 512").
    """
    context = dict(context or {})
    if isinstance(setup, BenchPreset):
        context.setdefault("bench_preset", setup.name)
        setup = setup_from_preset(setup)
    with_title(context, overrides)
    if isinstance(result, BenchResult):
        raw: dict | None = dict(result.raw)
        normalized = result
    elif result is not None:
        raw = dict(result)
        normalized = normalize_result(raw)
    else:
        raw, normalized = None, None
    values: dict = dict(setup or {})
    if "dataset_name" in values and "dataset" not in values:
        values["dataset"] = values.pop("dataset_name")
    if normalized is not None:
        metrics = _metrics_from_result(normalized)
        recorded = {k: v for k, v in setup_from_result(normalized).items() if v is not None}
        if "max_concurrency" in normalized.raw:  # recorded as null = no limit
            recorded["max_concurrency"] = normalized.max_concurrency
        values.update(recorded)
    elif block is not None:
        metrics = metrics_from_block(block)
        values.update({k: v for k, v in setup_from_block(block).items() if v is not None})
    else:
        metrics = {}
    run = StoredRun(
        id="",
        created=time.time() if created is None else float(created),
        origin="console",
        source=None,
        label=label,
        context=context_block(context),
        setup=jsonable_setup(full_setup(values)),
        metrics=metrics,
        result=jsonable(raw) if raw is not None else None,
        live=jsonable(dict(live)) if live is not None else None,
        **extras_block(telemetry, client_check, pitfalls, output_tokens_of(normalized, metrics)),
        prefix_cache=jsonable(dict(prefix_cache)) if prefix_cache is not None else None,  # issue B2
        goodput=jsonable(dict(goodput)) if goodput is not None else None,
    )
    return finish_run(run)


def with_title(context: dict, overrides: Mapping | None) -> dict:
    """Put a run's overrides and its title (the preset's name and what was overridden) in its context."""
    if overrides:
        context["bench_overrides"] = jsonable(dict(overrides))
    name = context.get("bench_preset")
    if name:
        context["title"] = run_title(str(name), context.get("bench_overrides") or {})
    return context


def output_tokens_of(result: BenchResult | None, metrics: Mapping[str, float]) -> float | None:
    """Output tokens a run generated: the result's total, else throughput x duration."""
    if result is not None:
        if result.total_output_tokens is not None:
            return float(result.total_output_tokens)
        rate, duration = metrics.get("output_throughput"), result.duration
        if rate is not None and duration:
            return float(rate) * float(duration)
    return None


def extras_block(
    telemetry: RunTelemetry | None,
    client_check: ClientCheck | None,
    pitfalls: Sequence[Pitfall] = (),
    output_tokens: float | None = None,
) -> dict:
    """StoredRun's energy / telemetry / client_check fields from the run's records."""
    out: dict = {"energy": None, "telemetry": None, "client_check": None}
    if telemetry is not None:
        out["telemetry"] = jsonable(telemetry.to_json())
        out["energy"] = jsonable(summary_to_json(summarize(telemetry, output_tokens)))
    if client_check is not None or pitfalls:
        check: dict = (
            client_check.to_json()
            if client_check is not None
            else {"client_bound": None, "reasons": ["no server scrape bracketed the run"]}
        )
        check["pitfalls"] = [{"key": p.key, "line": p.line, "evidence": p.evidence} for p in pitfalls]
        out["client_check"] = jsonable(check)
    return out


def setup_from_preset(preset: BenchPreset) -> dict:
    """What a benchmark preset asks for, as setup keys (a sweep's concurrency
    list is left out: pass the point's max_concurrency yourself)."""
    values: dict = {
        "backend": preset.backend,
        "dataset": preset.dataset,
        "dataset_path": preset.dataset_path,
        "input_len": preset.input_len,
        "output_len": preset.output_len,
        "range_ratio": preset.range_ratio,
        "num_prompts": preset.num_prompts,
        "request_rate": math.inf if preset.request_rate is None else preset.request_rate,
        "burstiness": preset.burstiness,
        "seed": preset.seed,
        "endpoint": preset.endpoint,
    }
    if len(preset.max_concurrency) == 1:
        values["max_concurrency"] = preset.max_concurrency[0]
    return {k: v for k, v in values.items() if v is not None}


def jsonable_setup(setup: dict) -> dict:
    """Setup as stored in memory: JSON-safe, but numeric rates stay floats (inf)."""
    out = {}
    for key, value in setup.items():
        if key in SETUP_NUMERIC_KEYS and isinstance(value, float):
            out[key] = value
        else:
            out[key] = jsonable(value)
    return out


def run_from_result(
    obj: Mapping,
    *,
    source: str | None,
    label: str | None = None,
    node: str | None = None,
    created: float | None = None,
    part: str | None = None,
) -> StoredRun:
    """An imported result JSON object (any vLLM version) -> StoredRun."""
    normalized = normalize_result(obj)
    run = StoredRun(
        id="",
        created=time.time() if created is None else float(created),
        origin="import",
        source=source,
        label=label,
        context=context_block(None, node=node, source_part=part),
        setup=jsonable_setup(setup_from_result(normalized)),
        metrics=_metrics_from_result(normalized),
        result=jsonable(dict(obj)),
        live=None,
    )
    return finish_run(run)


def run_from_block(
    block: BenchResultBlock,
    *,
    source: str | None,
    label: str | None = None,
    node: str | None = None,
    created: float | None = None,
) -> StoredRun:
    """An imported printed result block -> StoredRun (result None, values as printed)."""
    part = f"lines {block.start_line}-{block.end_line}"
    run = StoredRun(
        id="",
        created=time.time() if created is None else float(created),
        origin="import",
        source=source,
        label=label,
        context=context_block(None, node=node, source_part=part, client_args=dict(block.args) or None),
        setup=jsonable_setup(setup_from_block(block)),
        metrics=metrics_from_block(block),
        result=None,
        live=None,
    )
    return finish_run(run)
