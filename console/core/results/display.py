"""How runs read to a person: metric labels, formatted values, dates, one-line summaries.

A stored or imported run holds text from elsewhere (model names, labels, node and GPU names,
keys of a result file): everything here that returns text returns it printable
(console/core/text.py), so a table or a screen never passes an escape sequence on.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import time
from collections.abc import Mapping, Sequence

from console.core.results.record import StoredRun, as_number, jsonable
from console.core.text import printable

_INT_METRICS = frozenset(
    {
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "num_prompts",
        "max_concurrency",
        "iterations",
        "total_tokens",
        "probe_completed",
        "probe_failed",
        "spec_decode_num_drafts",
        "spec_decode_draft_tokens",
        "spec_decode_accepted_tokens",
    }
)


SUMMARY_LABELS = {
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
    # `vllm bench latency|throughput --output-json` beyond the seeds' columns
    "iterations": "Latency iterations",
    "total_tokens": "Total tokens",
}
_OFFLINE_PCT_RE = re.compile(r"^latency_p(\d+(?:\.\d+)?)_s$")
_ACCURACY_RE = re.compile(r"_(?:exact_match|acc|acc_norm|f1|em)(?:_[a-z_]+)?$")
STAT_KEY_RE = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_(.+)_ms$")
_STAT_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}
_HIGHER_BETTER = frozenset(
    {
        "completed",
        "request_throughput",
        "request_goodput",
        "input_throughput",
        "output_throughput",
        "total_token_throughput",
        "max_output_tokens_per_s",
        "spec_decode_acceptance_rate",
        "spec_decode_acceptance_length",
        "throughput_tok_s",
    }
)
_LOWER_BETTER = frozenset({"failed", "duration", "latency_s"})


# What the hardware did and whether the client kept up (issue P): stored beside the metrics
# (StoredRun.energy / client_check), shown as columns of their own.
ENERGY_LABELS = {
    "tokens_per_joule": "Output tokens per joule",
    "energy_j": "Energy (J)",
    "avg_power_w": "Average power (W)",
    "peak_power_w": "Peak GPU power (W)",
    "throttled_pct": "Time throttled (%)",
}
ENERGY_BETTER = {"tokens_per_joule": "higher", "energy_j": "lower", "throttled_pct": "lower"}


def client_mark(bound: bool | None) -> str:
    """The history's mark: "CB" for a client-bound run, "" otherwise (not judged included)."""
    return "CB" if bound else ""


# Issue B2: what a run measured beside its throughput (StoredRun.goodput / prefix_cache).
WORKLOAD_LABELS = {
    "goodput_pct": "Goodput (% of requests in SLO)",
    "good_rps": "Good requests/s",
    "prefix_cache_hit_pct": "Prefix-cache hits (% of prompt)",
}
WORKLOAD_BETTER = {"goodput_pct": "higher", "good_rps": "higher"}


def goodput_cell(run: StoredRun) -> str:
    """'93 %' for a run with an SLO, '' without (the history's and find-max's column)."""
    pct = run.goodput_pct
    return "" if pct is None else f"{pct:.0f} %"


def _limit(value: object) -> str:
    number = as_number(value)
    return f"{number:g}" if number is not None else format_value("limit", value)


def workload_text(run: StoredRun) -> list[str]:
    """The result detail's lines for the goodput against the SLO and the prefix-cache share,
    with the warning of a cold run that was not (none when not recorded)."""
    out: list[str] = []
    g = run.goodput
    if g:
        raw = g.get("slo")
        slo: Mapping = raw if isinstance(raw, Mapping) else {}
        limits = ", ".join(
            f"{str(k).removesuffix('_ms').upper().replace('E2EL', 'E2E')} ≤ {_limit(v)} ms" for k, v in slo.items()
        )
        good = (
            f" ({format_value('n', g.get('good'))} of {format_value('n', g.get('total'))} requests)"
            if g.get("good") is not None
            else ""
        )
        out.append(
            printable(
                f"Goodput  {format_value('goodput_pct', run.goodput_pct)} %{good} · {format_value('good_rps', run.good_rps)} good req/s"
                f" · SLO {limits or '-'}"
            )
        )
    p = run.prefix_cache
    if p:
        pct = run.prefix_cache_hit_pct
        cold = "meant cold" if p.get("cold") is True else "not meant cold"
        line = f"Prefix cache  {format_value('prefix_cache_hit_pct', pct)} % of prompt tokens from the cache ({cold})"
        if pct is None:
            line = f"Prefix cache  not counted (the server has no prefix-cache counters, or no scrape bracketed the run) ({cold})"
        if p.get("cold_start"):
            line += f" · cold start {p.get('cold_start')}: {p.get('cold_start_done') or 'not done'}"
        out.append(printable(line))
        if p.get("cold_start_note"):
            out.append(printable(f"  {p.get('cold_start_note')}"))
        warning = run.prefix_cache_warning
        if warning:
            out.append(f"WARNING: {warning}")
    return out


def energy_text(run: StoredRun) -> list[str]:
    """The result detail's lines for goodput and the prefix cache (issue B2), energy, throttling
    and the client check (none when not recorded)."""
    out: list[str] = workload_text(run)
    e = run.energy
    if e:
        source = e.get("energy_source")
        how = "" if source == "counter" else f" (from {str(source).replace('_', ' ')})"
        out.append(
            f"Energy  {format_value('energy_j', e.get('energy_j'))} J{how} · avg "
            f"{format_value('avg_power_w', e.get('avg_power_w'))} W · peak {format_value('peak_power_w', e.get('peak_power_w'))} W"
            f" · {sig3(e.get('tokens_per_joule'))} tokens/J · throttled {format_value('throttled_pct', e.get('throttled_pct'))} %"
        )
        for g in e.get("gpus") or []:
            if not isinstance(g, Mapping):
                continue
            where = f"{g.get('node')}:{g.get('gpu')}" if g.get("node") else str(g.get("gpu"))
            line = f"  GPU {where}: measured {format_value('j', g.get('measured_j'))} J"
            if g.get("share_method") != "whole":
                parts = ",".join(str(p) for p in g.get("partitions") or [])
                line += (
                    f", partitions {parts} of {g.get('partition_count')} charged "
                    f"{format_value('j', g.get('run_j'))} J (share {format_value('s', g.get('share'))} by {g.get('share_method')})"
                )
            line += f", throttled {format_value('p', g.get('throttled_pct'))} %"
            out.append(printable(line))
    c = run.client_check
    if c:
        bound = c.get("client_bound")
        word = "CLIENT-BOUND" if bound else ("ok (client and server agree)" if bound is False else "not judged")
        out.append(f"Client  {word}")
        for metric, f in (c.get("latency_ms") or {}).items():
            if not isinstance(f, Mapping):
                continue
            cl, sv = f.get("client") or {}, f.get("server") or {}
            out.append(
                printable(
                    f"  {_STAT_NAMES.get(metric, metric)} mean client {format_value('m', cl.get('mean'))} / server "
                    f"{format_value('m', sv.get('mean'))} ms, p99 {format_value('m', cl.get('p99'))} / "
                    f"{format_value('m', sv.get('p99'))} ms"
                )
            )
        req = c.get("requests") or {}
        out.append(
            f"  requests client {format_value('completed', req.get('client'))} / server {format_value('completed', req.get('server'))}"
        )
        if bound is not False:
            out.extend(printable(f"  {r}") for r in c.get("reasons") or [])
        for p in c.get("pitfalls") or []:
            if isinstance(p, Mapping):
                out.append(printable(f"  pitfall: {p.get('line')} [{p.get('evidence')}]"))
    # the client's own shortfall (GuideLLM's window): a run the console ran has it as a pitfall
    # above; an imported report has no client check, and the line is shown on its own
    warning = (run.result or {}).get("client_warning")
    pitfalls = (c or {}).get("pitfalls") or []
    if (
        isinstance(warning, str)
        and warning
        and not any(isinstance(p, Mapping) and p.get("line") == warning for p in pitfalls)
    ):
        out.append(printable(f"Client  {warning}"))
    return out


def sig3(value: object) -> str:
    """Three significant digits (tokens per joule spans 0.01 on a big GPU at low load to 100s)."""
    number = as_number(value)
    return "-" if number is None else f"{number:.3g}"


def metric_label(key: str) -> str:
    """`median_ttft_ms` -> `Median TTFT (ms)`, `output_throughput` -> `Output token throughput (tok/s)`."""
    if key in SUMMARY_LABELS:
        return SUMMARY_LABELS[key]
    offline = _OFFLINE_PCT_RE.match(key)
    if offline:
        return f"P{offline.group(1)} offline latency (s)"
    found = STAT_KEY_RE.match(key)
    if found:
        stat = found.group(1)
        stat = stat.upper() if stat.startswith("p") else stat.capitalize()
        name = _STAT_NAMES.get(found.group(3), found.group(3).replace("_", " "))
        return printable(f"{stat} {name} (ms)")
    return printable(key)


def better(key: str) -> str | None:
    """ "higher" or "lower" when a direction is better for this metric, else None."""
    if key in _HIGHER_BETTER:
        return "higher"
    if key in _LOWER_BETTER or STAT_KEY_RE.match(key) or _OFFLINE_PCT_RE.match(key):
        return "lower"
    if not key.endswith("_stderr") and _ACCURACY_RE.search(key):
        return "higher"
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
        return printable(shlex.join(str(v) for v in value))
    if isinstance(value, Mapping):
        return printable(json.dumps(jsonable(value), sort_keys=True))
    return printable(str(value))


def delta_suffix(row: Mapping, i: int) -> str | None:
    """'+12.3 +4.5%' for column i of a compared metric row (`compare_table`), None for
    the first column (the base) or a missing delta: the CLI and the UI show the same text."""
    delta = row["delta"][i]
    if i == 0 or delta is None:
        return None
    sign = "+" if delta >= 0 else "-"
    pct = row["delta_pct"][i]
    return f"{sign}{format_value(row['key'], abs(delta))}" + (f" {pct:+.1f}%" if pct is not None else "")


def run_date(run: StoredRun) -> str:
    """When the benchmark ran: vLLM's `date` when recorded, else when the run was stored; for a
    reference row its source and publication date (`ref seed 004`), never when it was imported."""
    if is_reference(run):
        return reference_date(run)
    date = run.setup.get("date")
    if isinstance(date, str):
        try:
            parsed = time.strptime(date, "%Y%m%d-%H%M%S")
            return time.strftime("%Y-%m-%d %H:%M:%S", parsed)
        except ValueError:
            pass
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.created))


def model_name(model: object) -> str | None:
    if not isinstance(model, str) or not model.strip():
        return None
    return printable(model.rstrip("/").rsplit("/", 1)[-1] or model)


def load_parts(run: StoredRun) -> list[str]:
    """The load a run put on the server as setup_summary spells it: `c64`, `rate 2`, `n500`
    (what tells runs of one preset apart in the history)."""
    setup = run.setup
    out = []
    if setup.get("max_concurrency") is not None:
        out.append(f"c{setup['max_concurrency']}")
    rate = as_number(setup.get("request_rate"))
    if rate is not None and not math.isinf(rate):
        out.append(f"rate {rate:g}")
    if setup.get("num_prompts") is not None:
        out.append(f"n{setup['num_prompts']}")
    return out


def setup_summary(run: StoredRun) -> str:
    """`random 8192/1024 c64 n128` / `sharegpt rate 1 n500`."""
    setup = run.setup
    parts = []
    kind = run.context.get("run_kind")
    if kind:
        parts.append(str(kind))
    if kind == "accuracy":
        return _accuracy_summary(run, parts)
    if setup.get("batch_size") is not None:
        parts.append(f"bs{setup['batch_size']}")
    if setup.get("dataset") and kind != "throughput":
        parts.append(str(setup["dataset"]))
    if setup.get("input_len") is not None or setup.get("output_len") is not None:
        parts.append(
            f"{setup.get('input_len') if setup.get('input_len') is not None else '?'}/"
            f"{setup.get('output_len') if setup.get('output_len') is not None else '?'}"
        )
    parts.extend(load_parts(run))
    if kind == "latency" and run.metrics.get("latency_s") is not None:
        parts.append(f"= {run.metrics['latency_s']:.4g} s")
    elif kind == "throughput" and run.metrics.get("throughput_tok_s") is not None:
        parts.append(f"= {run.metrics['throughput_tok_s']:.1f} tok/s")
    return printable(" ".join(parts)) or "-"


def _accuracy_summary(run: StoredRun, parts: list[str]) -> str:
    """`accuracy gsm8k n10 = 0.05 exact_match flexible_extract`."""
    task = run.setup.get("task") or run.setup.get("dataset")
    if task:
        parts.append(str(task))
    if run.setup.get("limit") is not None:
        parts.append(f"n{run.setup['limit']}")
    scores = [(k, v) for k, v in run.metrics.items() if not k.endswith("_stderr")]
    best = next(((k, v) for k, v in scores if k.endswith("flexible_extract")), scores[0] if scores else None)
    if best is not None:
        key, value = best
        name = key[len(str(task)) + 1 :] if task and key.startswith(f"{task}_") else key
        parts.append(f"= {value:.4g} {name}")
    return printable(" ".join(parts))


# How a run's title names an overridden preset field (others: `key value`).
_TITLE_NAMES = {
    "max_concurrency": "conc",
    "input_len": "in",
    "output_len": "out",
    "num_prompts": "n",
    "request_rate": "rate",
    "batch_size": "bs",
    "dataset": "dataset",
}


def run_title(preset: str, overrides: Mapping) -> str:
    """`chat-short · conc 16 · in 512`: the preset's name, then every field an override changed."""
    parts = [preset]
    for key, value in overrides.items():
        if isinstance(value, (list, tuple)):
            text = ",".join(str(v) for v in value) or "none"
        elif value is None:
            text = "unset"
        elif isinstance(value, float):
            text = f"{value:g}"
        else:
            text = str(value)
        parts.append(f"{_TITLE_NAMES.get(str(key), str(key))} {text}")
    return printable(" · ".join(parts))


def title_of(run: StoredRun) -> str | None:
    """The run's title: the stored one, else its preset's name (runs stored before titles)."""
    title = run.context.get("title")
    if isinstance(title, str) and title:
        return printable(title)
    preset = run.context.get("bench_preset")
    return printable(str(preset)) if preset else None


FAILED_STATES = frozenset({"error", "failed", "cancelled"})
NO_VALUE = "—"  # a failed run's metrics: not a measurement, never a zero


def failure_of(run: StoredRun) -> str | None:
    """Why a run failed, in a few words; None when it did not (or cannot be judged: offline and
    accuracy runs, which store no request counts). Failed: no request succeeded (a result JSON of
    0 successful requests), or the run ended in an error or was cancelled."""
    state = run.context.get("status")
    if isinstance(state, str) and state in FAILED_STATES:
        return state
    completed = as_number(run.metrics.get("completed"))
    if completed is not None and completed <= 0:
        failed = as_number(run.metrics.get("failed"))
        total = (failed or 0) + completed
        return f"0 of {total:.0f} requests succeeded" if total else "no request succeeded"
    return None


def run_status(run: StoredRun) -> str:
    """ "failed" or "ok" (what `results list --json` says as `status`)."""
    return "failed" if failure_of(run) is not None else "ok"


def split_failed(runs: Sequence[StoredRun]) -> tuple[list[StoredRun], list[StoredRun]]:
    """(runs that can be compared, failed runs): a failed run's zeros are no data point."""
    good = [r for r in runs if failure_of(r) is None]
    return good, [r for r in runs if failure_of(r) is not None]


def failed_note(failed: Sequence[StoredRun]) -> str:
    """One line saying which failed runs were left out of a comparison."""
    if not failed:
        return ""
    ids = ", ".join(r.id for r in failed[:3]) + (", …" if len(failed) > 3 else "")
    return f"left out {len(failed)} failed run{'s' if len(failed) != 1 else ''} ({ids}): no request succeeded or it ended in an error"


def is_reference(run: StoredRun) -> bool:
    """A row of the seeds' published numbers (reference_numbers.toml), not a run made here."""
    if run.origin == "reference" or run.context.get("reference"):
        return True
    return bool(run.source and "reference_numbers.toml#" in run.source)


def reference_date(run: StoredRun) -> str:
    """What a reference row shows where a run shows its date: its source and, when the file
    records it, its publication date (never when it was imported)."""
    published = run.context.get("published")
    seed = run.context.get("reference") or ""
    where = str(seed).split(":", 1)[0] if seed else "reference"
    return printable(f"ref {where}" + (f" {published}" if published else ""))


def reference_source(run: StoredRun) -> str:
    """A reference row's provenance, one line: the seed and its section, the file, the publication date."""
    what = run.context.get("reference") or "published numbers"
    published = run.context.get("published")
    file = (run.source or "").split("#", 1)[0] or "reference_numbers.toml"
    return printable(
        f"published numbers, {what} ({file}); "
        + (f"published {published}" if published else "publication date not recorded")
        + "; not run here"
    )


def run_summary(run: StoredRun) -> dict:
    """The columns of `results list` for one run."""
    ctx = run.context
    partition = None
    if ctx.get("compute_partition") or ctx.get("memory_partition"):
        partition = f"{ctx.get('compute_partition') or '?'}/{ctx.get('memory_partition') or '?'}"
    preset = ctx.get("bench_preset")
    summary = setup_summary(run)
    failure = failure_of(run)
    return {
        "id": run.id,
        "date": run_date(run),
        "origin": run.origin,
        "label": _text(run.label),
        "node": _text(ctx.get("node")),
        "gpu_model": _text(ctx.get("gpu_model")),
        "model": _text(run.setup.get("model")),
        "partition": _text(partition),
        "title": title_of(run),
        "status": "failed" if failure is not None else "ok",
        "failure": failure,
        # a `*` on the preset: an override changed it (the title names what)
        "setup": printable(f"{preset}{'*' if ctx.get('bench_overrides') else ''}: {summary}") if preset else summary,
        "completed": run.metrics.get("completed"),
        "failed": run.metrics.get("failed"),
        "output_throughput": run.metrics.get("output_throughput"),
        "median_ttft_ms": run.metrics.get("median_ttft_ms"),
        "median_itl_ms": run.metrics.get("median_itl_ms"),
        "tokens_per_joule": run.tokens_per_joule,
        "avg_power_w": run.avg_power_w,
        "throttled_pct": run.throttled_pct,
        "client_bound": run.client_bound,
        "goodput_pct": run.goodput_pct,
        "prefix_cache_hit_pct": run.prefix_cache_hit_pct,
        "prefix_cache_warning": run.prefix_cache_warning,
    }


def _text(value: object) -> object:
    """A text field of a run as it may be shown (other values as they are)."""
    return printable(value) if isinstance(value, str) else value


FIND_MAX_KIND = "find_max"  # the context's run_kind of a find-max answer (services/runs/find_max.py)


def fold_find_max_answers(runs: Sequence[StoredRun]) -> tuple[list[StoredRun], dict[str, StoredRun]]:
    """A list without the find-max answers whose point's run (context find_max_run) is in it,
    and those answers by that run's id: the answer is the same measurement as its point, so a
    list shows it as a mark on the point's row, never as a second identical row (issue U2)."""
    ids = {r.id for r in runs}
    answers: dict[str, StoredRun] = {}
    for run in runs:
        point = run.context.get("find_max_run")
        if run.context.get("run_kind") == FIND_MAX_KIND and isinstance(point, str) and point in ids:
            answers.setdefault(point, run)
    folded = {a.id for a in answers.values()}
    return [r for r in runs if r.id not in folded], answers


def find_max_mark(answer: StoredRun) -> str:
    """`★ find-max max c8` (or `rate 4`): what the point's row says of the answer it is."""
    load = as_number(answer.context.get("find_max_load"))
    if load is None:
        return "★ find-max max"
    where = f"c{int(load)}" if answer.context.get("find_max_dimension") == "concurrency" else f"rate {load:g}"
    return f"★ find-max max {where}"
