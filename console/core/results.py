"""Stored benchmark runs: the record, building it, comparing and exporting runs.

A StoredRun is vLLM's own result (the `--save-result` JSON object as written, or
the values of a printed result block for text imports) plus the console's
context: node, GPU model, partition modes, serve preset and flags, environment
(secrets masked), vLLM version, benchmark preset and argv, sweep position, and the
live series summary. Context the console cannot know (e.g. for an imported file)
is None, never guessed.

Pure: the store (files, ids on disk, imports of paths) is
console/services/results.py. This module builds runs from console results
(`run_from_console`) and from file contents (`runs_from_file`), turns them into
JSON and back, compares them (`compare_table`), exports them (JSON, CSV,
Markdown) and matches them with the seeds' published numbers
(`load_reference_numbers`, `reference_matches`).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import re
import shlex
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from console.core.bench_output import BenchError, BenchResultBlock, BenchStreamParser
from console.core.bench_result import BenchResult, normalize_result, result_metric_keys
from console.core.errors import ProfileError
from console.core.model import BenchPreset
from console.core.serve_argv import MASK, looks_secret, redact

__all__ = [
    "CONTEXT_KEYS",
    "FORMAT",
    "SETUP_KEYS",
    "FileParse",
    "ReferenceMatch",
    "ReferenceRow",
    "StoredRun",
    "compare_table",
    "export_csv",
    "export_json",
    "export_markdown",
    "fingerprint_of",
    "format_value",
    "load_reference_numbers",
    "metric_label",
    "new_run_id",
    "reference_as_run",
    "reference_matches",
    "run_date",
    "run_from_block",
    "run_from_console",
    "run_from_dict",
    "run_from_result",
    "run_summary",
    "run_to_dict",
    "runs_from_file",
    "setup_from_preset",
    "setup_summary",
]

FORMAT = "rocm-console-result/1"

# Context of a run, in display order. Every key is present in a StoredRun (None = unknown).
CONTEXT_KEYS: tuple[str, ...] = (
    "node",
    "gpu_model",
    "compute_partition",
    "memory_partition",
    "instance",
    "serve_preset",
    "serve_args",  # list of str, secrets masked
    "env",  # dict, secrets masked
    "vllm_version",
    "bench_preset",
    "client_argv",  # list of str, secrets masked
    "sweep_id",
    "sweep_point",
)
# Setup keys always present (None = unknown), in display order; others follow when known.
SETUP_KEYS: tuple[str, ...] = (
    "model",
    "backend",
    "dataset",
    "input_len",
    "output_len",
    "num_prompts",
    "request_rate",
    "max_concurrency",
    "burstiness",
    "seed",
)
_SETUP_NUMERIC = ("request_rate", "burstiness", "range_ratio")
# Keys a result block prints that describe the setup, not a measurement.
_BLOCK_SETUP_KEYS = ("max_concurrency", "request_rate")
_INT_METRICS = frozenset({
    "completed", "failed", "total_input_tokens", "total_output_tokens", "num_prompts",
    "max_concurrency", "probe_completed", "probe_failed", "spec_decode_num_drafts",
    "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
})
_ID_PART_RE = re.compile(r"[^A-Za-z0-9.]+")
_MAX_REASON = 300


# ---------------------------------------------------------------- the record


@dataclass(frozen=True)
class StoredRun:
    """One benchmark run as stored. Treat the dicts as read-only.

    origin: "console" (run by the console) or "import" (read from a file);
    source: the imported file's path, else None; created: epoch seconds of the run
    (console) or of the import; metrics: result-JSON metric key -> float; result:
    vLLM's JSON object as written (per-request arrays kept), None for text
    imports; live: the live series summary, None when there was none;
    fingerprint: sha256 of the canonical content (dedupe).
    """

    id: str
    created: float
    origin: str
    source: str | None = None
    label: str | None = None
    context: dict = field(default_factory=dict, hash=False)
    setup: dict = field(default_factory=dict, hash=False)
    metrics: dict = field(default_factory=dict, hash=False)
    result: dict | None = field(default=None, hash=False, repr=False)
    live: dict | None = field(default=None, hash=False, repr=False)
    fingerprint: str = ""

    @property
    def node(self) -> str | None:
        return self.context.get("node")

    @property
    def model(self) -> str | None:
        return self.setup.get("model")


# ---------------------------------------------------------------- JSON helpers


def _jsonable(value: object) -> object:
    """Plain strict-JSON data: non-finite floats -> "inf"/"-inf"/"nan", tuples ->
    lists, mapping keys -> str, anything else unknown -> its str()."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, BenchResult):
        return _jsonable(dict(value.raw))
    if isinstance(value, Mapping):
        return {(k if isinstance(k, str) else str(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_jsonable(v) for v in items]
    return str(value)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _canonical(value: object) -> str:
    return json.dumps(_jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def fingerprint_of(result: Mapping | None, metrics: Mapping, setup: Mapping) -> str:
    """sha256 of what identifies a run's content (not its label, node or import time).

    With vLLM's JSON object: the object (the legacy `request_goodput:` key read as
    `request_goodput`), so the same result saved by the console and imported from
    its file is one run. Without one (a text block): the metrics and the setup.
    """
    if result is not None:
        data = {("request_goodput" if k == "request_goodput:" else k): v for k, v in result.items()}
        if "request_goodput:" in result and "request_goodput" in result:
            data["request_goodput"] = result["request_goodput"]
        content = {"result": data}
    else:
        content = {"metrics": dict(metrics), "setup": {k: v for k, v in setup.items() if v is not None}}
    return hashlib.sha256(_canonical(content).encode("utf-8")).hexdigest()


def new_run_id(created: float, node: str | None, fingerprint: str) -> str:
    """`20261121-083012-<node or import>-<6 hex>` (local time of `created`)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(created))
    part = _ID_PART_RE.sub("-", node or "import").strip("-.") or "import"
    hex6 = (fingerprint or hashlib.sha256(repr(created).encode()).hexdigest())[:6]
    return f"{stamp}-{part[:40]}-{hex6}"


# ---------------------------------------------------------------- context and setup


def _redacted_args(args: Mapping[str, object]) -> dict:
    """Client arguments (a Namespace) with secret-looking values masked."""
    out = {}
    for key, value in args.items():
        key = str(key)
        if value is not None and (looks_secret(key) or key in ("header", "headers")):
            out[key] = MASK
        elif isinstance(value, str):
            out[key] = redact(value)
        else:
            out[key] = value
    return _jsonable(out)


def _context(context: Mapping | None, **extra: object) -> dict:
    """Every CONTEXT_KEYS key (None when unknown), plus any other given keys; secrets masked."""
    given = dict(context or {})
    given.update({k: v for k, v in extra.items() if v is not None})
    out: dict = {key: None for key in CONTEXT_KEYS}
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
    return _jsonable(out)


def _setup(values: Mapping[str, object]) -> dict:
    out: dict = {key: None for key in SETUP_KEYS}
    out.update(values)
    for key in _SETUP_NUMERIC:
        if isinstance(out.get(key), str):
            number = _number(out[key])
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
    return _setup(values)


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
    return _setup(values)


def metrics_from_block(block: BenchResultBlock) -> dict:
    metrics = {k: float(v) for k, v in block.metrics.items() if k not in _BLOCK_SETUP_KEYS}
    return {k: metrics[k] for k in result_metric_keys(metrics) if k in metrics}


def _metrics_from_result(result: BenchResult) -> dict:
    metrics = dict(result.metrics)
    return {k: metrics[k] for k in result_metric_keys(metrics) if k in metrics}


# ---------------------------------------------------------------- building runs


def _finish(run: StoredRun) -> StoredRun:
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
    win where it records them.
    """
    context = dict(context or {})
    if isinstance(setup, BenchPreset):
        context.setdefault("bench_preset", setup.name)
        setup = setup_from_preset(setup)
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
        context=_context(context),
        setup=_jsonable_setup(_setup(values)),
        metrics=metrics,
        result=_jsonable(raw) if raw is not None else None,
        live=_jsonable(dict(live)) if live is not None else None,
    )
    return _finish(run)


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


def _jsonable_setup(setup: dict) -> dict:
    """Setup as stored in memory: JSON-safe, but numeric rates stay floats (inf)."""
    out = {}
    for key, value in setup.items():
        if key in _SETUP_NUMERIC and isinstance(value, float):
            out[key] = value
        else:
            out[key] = _jsonable(value)
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
        context=_context(None, node=node, source_part=part),
        setup=_jsonable_setup(setup_from_result(normalized)),
        metrics=_metrics_from_result(normalized),
        result=_jsonable(dict(obj)),
        live=None,
    )
    return _finish(run)


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
        context=_context(None, node=node, source_part=part, client_args=dict(block.args) or None),
        setup=_jsonable_setup(setup_from_block(block)),
        metrics=metrics_from_block(block),
        result=None,
        live=None,
    )
    return _finish(run)


# ---------------------------------------------------------------- file contents -> runs


@dataclass
class FileParse:
    """What one file holds: kind ("json" | "text" | None), runs found (not yet
    deduplicated) and parts skipped with their reason (part, reason); part is
    None for the whole file."""

    kind: str | None = None
    runs: list[StoredRun] = field(default_factory=list)
    skipped: list[tuple[str | None, str]] = field(default_factory=list)


def _one_line(text: str, limit: int = _MAX_REASON) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_objects(text: str) -> list[object]:
    """One object, a JSON array, or newline-separated objects (`--append-result`)."""
    decoder = json.JSONDecoder()
    out: list[object] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos >= len(text):
            return out
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise ValueError(f"invalid JSON at line {exc.lineno}: {exc.msg}") from None
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None
        out += value if isinstance(value, list) else [value]


def _is_result_object(obj: object) -> bool:
    return isinstance(obj, Mapping) and ("completed" in obj or "duration" in obj)


def _first_error_text(errors: object) -> str | None:
    if not isinstance(errors, list):
        return None
    for item in errors:
        if isinstance(item, str) and item.strip():
            lines = [ln.strip() for ln in item.strip().splitlines() if ln.strip()]
            return lines[-1] if lines else None
    return None


def _decode(data: bytes | str) -> str:
    text = data.decode("utf-8", errors="replace") if isinstance(data, (bytes, bytearray)) else str(data)
    return text.lstrip("\ufeff")


def runs_from_file(
    data: bytes | str,
    *,
    source: str | None,
    label: str | None = None,
    node: str | None = None,
    created: float | None = None,
) -> FileParse:
    """Every run in a file's content: a result JSON (one object, an array, or
    `--append-result` lines) or a captured text output with result blocks
    (stdout, stdout+stderr, a terminal capture with CRLF, `\\r` progress and ANSI).

    A failed run is skipped with the reason it shows: `Initial test run failed - …`,
    `All requests failed …` (a block or object with nothing completed), or
    `no result block`.
    """
    created = time.time() if created is None else created
    text = _decode(data)
    out = FileParse()
    head = text.lstrip()[:1]
    json_error: str | None = None
    if head in ("{", "["):
        try:
            objects = _json_objects(text)
        except ValueError as exc:
            json_error = str(exc)
        else:
            out.kind = "json"
            many = len(objects) > 1
            for i, obj in enumerate(objects, 1):
                part = f"object {i}" if many else None
                if not _is_result_object(obj):
                    what = "a JSON object" if isinstance(obj, Mapping) else f"JSON {type(obj).__name__}"
                    out.skipped.append((part, f"not a vLLM benchmark result ({what} without 'completed'/'duration')"))
                    continue
                completed = _number(obj.get("completed"))
                if completed == 0:
                    first = _first_error_text(obj.get("errors"))
                    reason = "All requests failed (completed = 0)" + (f": {first}" if first else "")
                    out.skipped.append((part, _one_line(reason)))
                    continue
                out.runs.append(run_from_result(obj, source=source, label=label, node=node,
                                                created=created, part=part))
            if not objects:
                out.skipped.append((None, "empty JSON file"))
            return out
    parser = BenchStreamParser()
    parser.feed(text)
    parser.close()
    blocks = parser.blocks
    errors = parser.errors
    if blocks:
        out.kind = "text"
    for i, block in enumerate(blocks, 1):
        part = f"block {i} (lines {block.start_line}-{block.end_line})"
        if not block.complete:
            out.skipped.append((part, "result block cut short (the output ends inside it)"))
            continue
        if block.metrics.get("completed") == 0:
            out.skipped.append((part, _failed_reason(errors, block.start_line)))
            continue
        if not block.metrics:
            out.skipped.append((part, "result block without values"))
            continue
        out.runs.append(run_from_block(block, source=source, label=label, node=node, created=created))
    if not blocks:
        out.skipped.append((None, _no_block_reason(errors, json_error)))
    return out


def _failed_reason(errors: Sequence[BenchError], before_line: int) -> str:
    found = [e for e in errors if e.line <= before_line]
    all_failed = next((e for e in reversed(found) if e.kind == "all_failed"), None)
    reason = all_failed.message if all_failed else "All requests failed (0 successful requests)"
    first = next((e for e in found if e.kind == "request_error"), None)
    if first is not None:
        reason += f"; first error: {first.message}"
    return _one_line(reason)


def _no_block_reason(errors: Sequence[BenchError], json_error: str | None) -> str:
    initial = next((e for e in errors if e.kind == "initial_test_failed"), None)
    if initial is not None:
        message = initial.message
        at = message.find("Initial test run failed")
        return _one_line(message[at:] if at >= 0 else message)
    all_failed = next((e for e in errors if e.kind == "all_failed"), None)
    if all_failed is not None:
        return _one_line(_failed_reason(errors, math.inf))
    if json_error is not None:
        return _one_line(f"no result block ({json_error})")
    exceptions = [e for e in errors if e.kind in ("exception", "request_error")]
    if exceptions:
        return _one_line(f"no result block ({exceptions[-1].message})")
    return "no result block"


# ---------------------------------------------------------------- to and from JSON


def run_to_dict(run: StoredRun) -> dict:
    """Strict JSON data (non-finite numbers as "inf"/"nan" strings)."""
    return {
        "format": FORMAT,
        "id": run.id,
        "created": run.created,
        "created_iso": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(run.created)),
        "origin": run.origin,
        "source": run.source,
        "label": run.label,
        "context": _jsonable(run.context),
        "setup": _jsonable(run.setup),
        "metrics": _jsonable(run.metrics),
        "result": _jsonable(run.result) if run.result is not None else None,
        "live": _jsonable(run.live) if run.live is not None else None,
        "fingerprint": run.fingerprint,
    }


def run_from_dict(data: Mapping) -> StoredRun:
    """The inverse of run_to_dict. Raises ValueError naming what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a stored run is a JSON object, not {type(data).__name__}")  # noqa: TRY004
    fmt = data.get("format", FORMAT)
    if not isinstance(fmt, str) or not fmt.startswith("rocm-console-result/"):
        raise ValueError(f"not a rocm-console result (format {fmt!r})")
    for key in ("id", "created", "origin"):
        if key not in data:
            raise ValueError(f"stored run without '{key}'")
    if not isinstance(data["id"], str) or not data["id"]:
        raise ValueError("stored run 'id' is not a string")
    created = _number(data["created"])
    if created is None:
        raise ValueError("stored run 'created' is not a number")
    for key in ("context", "setup", "metrics"):
        if data.get(key) is not None and not isinstance(data[key], Mapping):
            raise ValueError(f"stored run '{key}' is not an object")
    metrics = {}
    for key, value in (data.get("metrics") or {}).items():
        number = _number(value)
        if number is not None:
            metrics[str(key)] = number
    setup = dict(data.get("setup") or {})
    for key in _SETUP_NUMERIC:
        if isinstance(setup.get(key), str):
            number = _number(setup[key])
            if number is not None:
                setup[key] = number
    context = {key: None for key in CONTEXT_KEYS}
    context.update(data.get("context") or {})
    result = data.get("result")
    live = data.get("live")
    return StoredRun(
        id=data["id"],
        created=created,
        origin=str(data["origin"]),
        source=data.get("source"),
        label=data.get("label"),
        context=context,
        setup=setup,
        metrics=metrics,
        result=dict(result) if isinstance(result, Mapping) else None,
        live=dict(live) if isinstance(live, Mapping) else None,
        fingerprint=str(data.get("fingerprint") or ""),
    )


# ---------------------------------------------------------------- display helpers

_SUMMARY_LABELS = {
    "completed": "Successful requests",
    "failed": "Failed requests",
    "max_concurrency": "Maximum request concurrency",
    "request_rate": "Request rate configured (RPS)",
    "duration": "Benchmark duration (s)",
    "total_input_tokens": "Total input tokens",
    "total_output_tokens": "Total generated tokens",
    "request_throughput": "Request throughput (req/s)",
    "request_goodput": "Request goodput (req/s)",
    "input_throughput": "Input token throughput (tok/s)",
    "output_throughput": "Output token throughput (tok/s)",
    "max_output_tokens_per_s": "Peak output token throughput (tok/s)",
    "max_concurrent_requests": "Peak concurrent requests",
    "total_token_throughput": "Total token throughput (tok/s)",
    "rtfx": "RTFx (inverse real-time factor)",
    # seed 000's offline tables (benchmark_throughput.py / benchmark_latency.py)
    "throughput_tok_s": "Offline throughput (tok/s)",
    "latency_s": "Offline latency (s)",
}
_STAT_KEY_RE = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_(.+)_ms$")
_STAT_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}
_HIGHER_BETTER = frozenset({
    "completed", "request_throughput", "request_goodput", "input_throughput", "output_throughput",
    "total_token_throughput", "max_output_tokens_per_s", "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length", "throughput_tok_s",
})
_LOWER_BETTER = frozenset({"failed", "duration", "latency_s"})


def metric_label(key: str) -> str:
    """`median_ttft_ms` -> `Median TTFT (ms)`, `output_throughput` -> `Output token throughput (tok/s)`."""
    if key in _SUMMARY_LABELS:
        return _SUMMARY_LABELS[key]
    found = _STAT_KEY_RE.match(key)
    if found:
        stat = found.group(1)
        stat = stat.upper() if stat.startswith("p") else stat.capitalize()
        name = _STAT_NAMES.get(found.group(3), found.group(3).replace("_", " "))
        return f"{stat} {name} (ms)"
    return key


def better(key: str) -> str | None:
    """"higher" or "lower" when a direction is better for this metric, else None."""
    if key in _HIGHER_BETTER:
        return "higher"
    if key in _LOWER_BETTER or _STAT_KEY_RE.match(key):
        return "lower"
    return None


def format_value(key: str, value: object) -> str:
    """A value as a table shows it: counts as integers, other numbers with 2 decimals."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        number = float(value)
        if math.isinf(number):
            return "inf" if number > 0 else "-inf"
        if math.isnan(number):
            return "nan"
        if key in _INT_METRICS or (isinstance(value, int) and not isinstance(value, bool)):
            return str(int(number)) if number.is_integer() else f"{number:.2f}"
        return f"{number:.2f}"
    if isinstance(value, (list, tuple)):
        return shlex.join(str(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps(_jsonable(value), sort_keys=True)
    return str(value)


def run_date(run: StoredRun) -> str:
    """When the benchmark ran: vLLM's `date` when recorded, else when the run was stored."""
    if run.created <= 0 and run.origin == "reference":
        return "-"
    date = run.setup.get("date")
    if isinstance(date, str):
        try:
            parsed = time.strptime(date, "%Y%m%d-%H%M%S")
            return time.strftime("%Y-%m-%d %H:%M:%S", parsed)
        except ValueError:
            pass
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.created))


def _model_name(model: object) -> str | None:
    if not isinstance(model, str) or not model.strip():
        return None
    return model.rstrip("/").rsplit("/", 1)[-1] or model


def setup_summary(run: StoredRun) -> str:
    """`random 8192/1024 c64 n128` / `sharegpt rate 1 n500`."""
    setup = run.setup
    parts = []
    if setup.get("dataset"):
        parts.append(str(setup["dataset"]))
    if setup.get("input_len") is not None or setup.get("output_len") is not None:
        parts.append(f"{setup.get('input_len') if setup.get('input_len') is not None else '?'}/"
                     f"{setup.get('output_len') if setup.get('output_len') is not None else '?'}")
    if setup.get("max_concurrency") is not None:
        parts.append(f"c{setup['max_concurrency']}")
    rate = _number(setup.get("request_rate"))
    if rate is not None and not math.isinf(rate):
        parts.append(f"rate {rate:g}")
    if setup.get("num_prompts") is not None:
        parts.append(f"n{setup['num_prompts']}")
    return " ".join(parts) or "-"


def run_summary(run: StoredRun) -> dict:
    """The columns of `results list` for one run."""
    ctx = run.context
    partition = None
    if ctx.get("compute_partition") or ctx.get("memory_partition"):
        partition = f"{ctx.get('compute_partition') or '?'}/{ctx.get('memory_partition') or '?'}"
    preset = ctx.get("bench_preset")
    summary = setup_summary(run)
    return {
        "id": run.id,
        "date": run_date(run),
        "origin": run.origin,
        "label": run.label,
        "node": ctx.get("node"),
        "gpu_model": ctx.get("gpu_model"),
        "model": run.setup.get("model"),
        "partition": partition,
        "setup": f"{preset}: {summary}" if preset else summary,
        "completed": run.metrics.get("completed"),
        "failed": run.metrics.get("failed"),
        "output_throughput": run.metrics.get("output_throughput"),
        "median_ttft_ms": run.metrics.get("median_ttft_ms"),
        "median_itl_ms": run.metrics.get("median_itl_ms"),
    }


# ---------------------------------------------------------------- compare


_COMPARE_CONTEXT = (
    ("label", "Label"),
    ("origin", "Origin"),
    ("node", "Node"),
    ("gpu_model", "GPU"),
    ("partition", "Partition"),
    ("serve_preset", "Serve preset"),
    ("vllm_version", "vLLM"),
    ("bench_preset", "Benchmark preset"),
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
)


def _context_value(run: StoredRun, key: str) -> object:
    if key == "label":
        return run.label
    if key == "origin":
        return run.origin
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
    rows: list[dict] = [{
        "section": "run", "key": "id", "label": "Run", "values": [r.id for r in runs],
        "delta": [None] * n, "delta_pct": [None] * n, "better": None,
    }]
    rows.append({
        "section": "run", "key": "date", "label": "Date", "values": [run_date(r) for r in runs],
        "delta": [None] * n, "delta_pct": [None] * n, "better": None,
    })
    for section, keys, get in (
        ("context", _COMPARE_CONTEXT, _context_value),
        ("setup", _COMPARE_SETUP, lambda r, k: r.setup.get(k)),
    ):
        for key, label in keys:
            values = [get(r, key) for r in runs]
            if all(v is None for v in values):
                continue
            rows.append({"section": section, "key": key, "label": label, "values": values,
                         "delta": [None] * n, "delta_pct": [None] * n, "better": None})
    union: dict[str, float] = {}
    for run in runs:
        for key in run.metrics:
            union.setdefault(key, 1.0)
    for key in result_metric_keys(union):
        values = [r.metrics.get(key) for r in runs]
        base = values[0]
        delta: list[float | None] = [None]
        pct: list[float | None] = [None]
        for value in values[1:]:
            if value is None or base is None or not (math.isfinite(value) and math.isfinite(base)):
                delta.append(None)
                pct.append(None)
                continue
            diff = value - base
            delta.append(diff)
            pct.append(diff / base * 100.0 if base != 0 else None)
        rows.append({"section": "metric", "key": key, "label": metric_label(key), "values": values,
                     "delta": delta, "delta_pct": pct, "better": better(key)})
    return rows


# ---------------------------------------------------------------- exports


def export_json(runs: Sequence[StoredRun]) -> str:
    """{"format": ..., "runs": [run_to_dict(run), ...]} as indented strict JSON."""
    doc = {"format": FORMAT, "runs": [run_to_dict(r) for r in runs]}
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


_CSV_HEAD = ("id", "date", "created", "origin", "label", "source", "source_part")
_CSV_CONTEXT = tuple(k for k in CONTEXT_KEYS)


def _csv_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if math.isnan(value):
            return "nan"
        return repr(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, (list, tuple)):
        return shlex.join(str(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps(_jsonable(value), sort_keys=True, ensure_ascii=False)
    return str(value)


def export_csv(runs: Sequence[StoredRun]) -> str:
    """One row per run: id, date, created (ISO), origin, label, source, source_part, the context
    keys, the setup keys (`setup_` prefix where a name is taken), then every metric
    key any run has, in the result block's order. Missing values are empty cells;
    argv lists are shell-joined, dicts JSON."""
    setup_keys: list[str] = list(SETUP_KEYS)
    for run in runs:
        for key in run.setup:
            if key not in setup_keys:
                setup_keys.append(key)
    union: dict[str, float] = {}
    for run in runs:
        for key in run.metrics:
            union.setdefault(key, 1.0)
    metric_keys = result_metric_keys(union)
    taken = set(_CSV_HEAD) | set(_CSV_CONTEXT)
    setup_cols = [(k, f"setup_{k}" if k in taken else k) for k in setup_keys]
    taken |= {c for _, c in setup_cols}
    metric_cols = [(k, f"metric_{k}" if k in taken else k) for k in metric_keys]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*_CSV_HEAD, *_CSV_CONTEXT, *(c for _, c in setup_cols), *(c for _, c in metric_cols)])
    for run in runs:
        head = [run.id, run_date(run), time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(run.created)),
                run.origin, run.label, run.source, run.context.get("source_part")]
        row = [_csv_cell(v) for v in head]
        row += [_csv_cell(run.context.get(k)) for k in _CSV_CONTEXT]
        row += [_csv_cell(run.setup.get(k)) for k, _ in setup_cols]
        row += [_csv_cell(run.metrics.get(k)) for k, _ in metric_cols]
        writer.writerow(row)
    return buf.getvalue()


def _md_cell(value: object) -> str:
    text = value if isinstance(value, str) else str(value)
    text = " ".join(text.split())
    return text.replace("\\", "\\\\").replace("|", "\\|") or " "


def _md_table(head: Sequence[str], rows: Iterable[Sequence[str]], align_right_from: int = 1) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |"]
    lines.append("|" + "|".join("---:" if i >= align_right_from else "---" for i in range(len(head))) + "|")
    for row in rows:
        lines.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
    return lines


def _delta_text(key: str, delta: float | None, pct: float | None) -> str:
    if delta is None:
        return ""
    sign = "+" if delta >= 0 else "-"
    text = f"{sign}{format_value(key, abs(delta))}"
    if pct is not None:
        text += f" ({pct:+.1f}%)"
    return text


def export_markdown(runs: Sequence[StoredRun], *, title: str | None = "Benchmark results") -> str:
    """Two GitHub tables: the runs (context and setup), then the metrics side by
    side with deltas against the first run."""
    lines: list[str] = []
    if title:
        lines += [f"# {title}", ""]
    if not runs:
        return "\n".join(lines + ["No runs."]) + "\n"
    head = ["Run", "Date", "Node", "GPU", "Partition", "Model", "Setup", "Label", "Source"]
    body = []
    for run in runs:
        summary = run_summary(run)
        body.append([run.id, summary["date"], summary["node"] or "-", run.context.get("gpu_model") or "-",
                     summary["partition"] or "-", run.setup.get("model") or "-", summary["setup"],
                     run.label or "-", run.source or "-"])
    lines += _md_table(head, body, align_right_from=len(head))
    lines.append("")
    rows = [r for r in compare_table(runs) if r["section"] == "metric"]
    head = ["Metric", runs[0].id]
    for run in runs[1:]:
        head += [run.id, "Δ vs first"]
    body = []
    for row in rows:
        cells = [row["label"], format_value(row["key"], row["values"][0])]
        for i in range(1, len(runs)):
            cells += [format_value(row["key"], row["values"][i]),
                      _delta_text(row["key"], row["delta"][i], row["delta_pct"][i]) or "-"]
        body.append(cells)
    lines += _md_table(head, body)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- reference numbers


@dataclass(frozen=True)
class ReferenceRow:
    """Published numbers from the seeds for one configuration.

    kind: "serving" (a result block of benchmark_serving.py / vllm bench serve),
    "offline_throughput" (benchmark_throughput.py) or "offline_latency"
    (benchmark_latency.py); only serving rows are compared with runs.
    """

    id: str
    seed: str
    section: str
    kind: str
    gpu: str
    model: str
    tp: int
    client: str | None = None
    precision: str | None = None
    quantization: str | None = None  # the serve flag --quantization, when the seed used it
    dataset: str | None = None
    input_len: int | None = None
    output_len: int | None = None
    num_prompts: int | None = None
    max_concurrency: int | None = None
    request_rate: float | None = None
    batch_size: int | None = None
    max_num_seqs: int | None = None
    serve_args: tuple[str, ...] = ()
    note: str | None = None
    metrics: dict = field(default_factory=dict, hash=False)
    source: str = ""


_REF_KINDS = ("serving", "offline_throughput", "offline_latency")
_REF_FIELDS: dict[str, str] = {
    "seed": "str", "section": "str", "kind": "kind", "gpu": "str", "model": "str", "tp": "int",
    "client": "str", "precision": "str", "quantization": "str", "dataset": "str",
    "input_len": "int", "output_len": "int", "num_prompts": "int", "max_concurrency": "int",
    "request_rate": "rate", "batch_size": "int", "max_num_seqs": "int", "serve_args": "strlist",
    "note": "str", "metrics": "metrics",
}
_REF_REQUIRED = ("seed", "section", "kind", "gpu", "model", "tp", "metrics")
_REF_METRIC_KEYS = frozenset(
    set(_SUMMARY_LABELS) | {"input_sequence_throughput"}
) - {"max_concurrency", "request_rate"}


def _valid_metric_key(key: str) -> bool:
    return key in _REF_METRIC_KEYS or bool(_STAT_KEY_RE.match(key))


def load_reference_numbers(path: str | Path) -> tuple[ReferenceRow, ...]:
    """Read profiles/reference_numbers.toml: `[reference.<id>]` tables with a
    `metrics` sub-table. Strict: an unknown key, a wrong type or a missing key is
    a ProfileError naming the file, the table and the key."""
    from console.core.profiles import (  # shared TOML error reporting
        _Context,
        _parse_toml,
        _read_text,
    )

    path = Path(path)
    file = str(path)
    ctx = _Context(file, _read_text(path, file))
    data = _parse_toml(ctx)
    for key in data:
        if key != "reference":
            raise ctx.error(None, (key,), "unknown key (expected [reference.<id>] tables)")
    tables = data.get("reference", {})
    if not isinstance(tables, Mapping):
        raise ctx.error(None, ("reference",), "expected tables [reference.<id>]")
    rows = []
    for name, body in tables.items():
        table = ("reference", name)
        if not isinstance(body, Mapping):
            raise ctx.error(table, (), "expected a table")
        values: dict = {}
        for key, value in body.items():
            kind = _REF_FIELDS.get(key)
            if kind is None:
                raise ctx.error(table, (key,), f"unknown key (known: {', '.join(_REF_FIELDS)})")
            values[key] = _ref_value(ctx, table, key, kind, value)
        for key in _REF_REQUIRED:
            if key not in values:
                raise ctx.error(table, (key,), "missing")
        values["serve_args"] = tuple(values.get("serve_args", ()))
        rows.append(ReferenceRow(id=name, source=file, **values))
    return tuple(rows)


def _ref_value(ctx, table: tuple[str, ...], key: str, kind: str, value: object) -> object:
    def wrong(what: str) -> ProfileError:
        return ctx.error(table, (key,), f"expected {what}, got {type(value).__name__} {value!r}")

    if kind == "str":
        if not isinstance(value, str) or not value.strip():
            raise wrong("a non-empty string")
        return value
    if kind == "kind":
        if value not in _REF_KINDS:
            raise wrong(f"one of {', '.join(_REF_KINDS)}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise wrong("a non-negative integer")
        return value
    if kind == "rate":
        if value == "inf":
            return math.inf
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise wrong('a positive number or "inf"')
        return float(value)
    if kind == "strlist":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise wrong("a list of strings")
        return value
    if kind == "metrics":
        if not isinstance(value, Mapping) or not value:
            raise wrong("a table of metric = number")
        out = {}
        for metric, number in value.items():
            if not _valid_metric_key(metric):
                raise ctx.error(table + ("metrics",), (metric,),
                                "unknown metric (use the result JSON's keys, e.g. output_throughput, median_ttft_ms)")
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise ctx.error(table + ("metrics",), (metric,), f"expected a number, got {number!r}")
            out[metric] = float(number)
        return out
    raise AssertionError(kind)


@dataclass(frozen=True)
class ReferenceMatch:
    """A reference row for a run; unverified: what the run does not record
    (gpu, tp, quantization, dataset, input_len, output_len), so the match could not check it."""

    row: ReferenceRow
    unverified: tuple[str, ...] = ()

    @property
    def exact(self) -> bool:
        return not self.unverified


def _flag_value(args: Sequence[str], *names: str) -> str | None:
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _run_tp(run: StoredRun) -> int | None:
    if isinstance(run.context.get("tp"), int):
        return run.context["tp"]
    args = run.context.get("serve_args")
    if not args:
        return None
    value = _flag_value([str(a) for a in args], "--tensor-parallel-size", "-tp")
    if value is None:
        return 1  # vLLM's default
    try:
        return int(value)
    except ValueError:
        return None


def _run_quantization(run: StoredRun) -> tuple[bool, str | None]:
    args = run.context.get("serve_args")
    if not args:
        return False, None
    value = _flag_value([str(a) for a in args], "--quantization", "-q")
    return True, value.strip("\"'").lower() if value else None


def reference_matches(run: StoredRun, reference_rows: Iterable[ReferenceRow]) -> list[ReferenceMatch]:
    """The serving reference rows for the same configuration as the run, best first.

    Required: the same model (by its last path part, case-insensitive: a local
    path matches the hub id) and the same max concurrency or request rate. Then
    every other field the row names must equal the run's where the run records
    it (GPU model, TP from the serve flags, --quantization, dataset, lengths);
    fields the run does not record are listed in `unverified`.
    """
    model = _model_name(run.setup.get("model"))
    if model is None:
        return []
    out: list[ReferenceMatch] = []
    for row in reference_rows:
        if row.kind != "serving" or (_model_name(row.model) or "").casefold() != model.casefold():
            continue
        if row.max_concurrency is not None and run.setup.get("max_concurrency") != row.max_concurrency:
            continue
        if row.request_rate is not None and _number(run.setup.get("request_rate")) != row.request_rate:
            continue
        if row.max_concurrency is None and row.request_rate is None:
            continue
        unverified: list[str] = []
        gpu = run.context.get("gpu_model")
        if gpu:
            if row.gpu.casefold() not in str(gpu).casefold():
                continue
        else:
            unverified.append("gpu")
        tp = _run_tp(run)
        if tp is None:
            unverified.append("tp")
        elif tp != row.tp:
            continue
        known, quant = _run_quantization(run)
        if not known:
            if row.quantization is not None:
                unverified.append("quantization")
        elif quant != (row.quantization.lower() if row.quantization else None):
            continue
        mismatch = False
        for key in ("dataset", "input_len", "output_len"):
            want = getattr(row, key)
            if want is None:
                continue
            have = run.setup.get(key)
            if have is None:
                unverified.append(key)
            elif str(have).casefold() != str(want).casefold():
                mismatch = True
        if mismatch:
            continue
        out.append(ReferenceMatch(row, tuple(unverified)))
    out.sort(key=lambda m: len(m.unverified))
    return out


def reference_as_run(row: ReferenceRow) -> StoredRun:
    """A reference row as a (never stored) run, to sit in a comparison as a column."""
    context = {key: None for key in CONTEXT_KEYS}
    context.update({"gpu_model": row.gpu, "serve_args": list(row.serve_args) or None,
                    "tp": row.tp, "reference": f"seed {row.seed}: {row.section}"})
    setup = _setup({
        "model": row.model, "dataset": row.dataset, "input_len": row.input_len,
        "output_len": row.output_len, "num_prompts": row.num_prompts,
        "request_rate": row.request_rate, "max_concurrency": row.max_concurrency,
    })
    return StoredRun(
        id=f"ref:{row.id}", created=0.0, origin="reference", source=row.source or None,
        label=f"seed {row.seed}" + (f" {row.precision}" if row.precision else "") + f" TP{row.tp}",
        context=context, setup=setup, metrics=dict(row.metrics), result=None, live=None,
        fingerprint="",
    )
