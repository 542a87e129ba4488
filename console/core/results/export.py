"""Runs as JSON, CSV or Markdown."""

from __future__ import annotations

import csv
import io
import json
import math
import shlex
import time
from collections.abc import Iterable, Mapping, Sequence

from console.core.bench.result import result_metric_keys
from console.core.results.compare import compare_table
from console.core.results.display import format_value, run_date, run_summary
from console.core.results.record import (
    CONTEXT_KEYS,
    FORMAT,
    SETUP_KEYS,
    StoredRun,
    jsonable,
    run_to_dict,
)
from console.core.text import json_safe


def export_json(runs: Sequence[StoredRun]) -> str:
    """{"format": ..., "runs": [run_to_dict(run), ...]} as indented strict JSON."""
    doc = {"format": FORMAT, "runs": [run_to_dict(r) for r in runs]}
    # json_safe: the C1 controls and bidi marks json.dumps leaves raw are escaped (same data)
    return json_safe(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)) + "\n"


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
        return json.dumps(jsonable(value), sort_keys=True, ensure_ascii=False)
    return str(value)


# Issue P's columns, last in every CSV row (empty where a run did not record them).
_CSV_TRUTH = (
    "energy_j",
    "energy_source",
    "avg_power_w",
    "peak_power_w",
    "tokens_per_joule",
    "throttled_pct",
    "client_bound",
    "client_mean_ttft_ms",
    "server_mean_ttft_ms",
    "client_mean_e2el_ms",
    "server_mean_e2el_ms",
    "client_requests",
    "server_requests",
)


def truth_cells(run: StoredRun) -> list[object]:
    """The values of _CSV_TRUTH for one run."""
    e = run.energy or {}
    c = run.client_check or {}
    lat = c.get("latency_ms") or {}

    def side(metric: str, who: str) -> object:
        f = lat.get(metric) or {}
        return (f.get(who) or {}).get("mean") if isinstance(f, Mapping) else None

    req = c.get("requests") or {}
    return [
        run.energy_j,
        e.get("energy_source"),
        run.avg_power_w,
        run.energy_value("peak_power_w"),
        run.tokens_per_joule,
        run.throttled_pct,
        run.client_bound,
        side("ttft", "client"),
        side("ttft", "server"),
        side("e2el", "client"),
        side("e2el", "server"),
        req.get("client"),
        req.get("server"),
    ]


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
    writer.writerow([*_CSV_HEAD, *_CSV_CONTEXT, *(c for _, c in setup_cols), *(c for _, c in metric_cols), *_CSV_TRUTH])
    for run in runs:
        head = [
            run.id,
            run_date(run),
            time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(run.created)),
            run.origin,
            run.label,
            run.source,
            run.context.get("source_part"),
        ]
        row = [_csv_cell(v) for v in head]
        row += [_csv_cell(run.context.get(k)) for k in _CSV_CONTEXT]
        row += [_csv_cell(run.setup.get(k)) for k, _ in setup_cols]
        row += [_csv_cell(run.metrics.get(k)) for k, _ in metric_cols]
        row += [_csv_cell(v) for v in truth_cells(run)]
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
        body.append(
            [
                run.id,
                summary["date"],
                summary["node"] or "-",
                run.context.get("gpu_model") or "-",
                summary["partition"] or "-",
                run.setup.get("model") or "-",
                summary["setup"],
                run.label or "-",
                run.source or "-",
            ]
        )
    lines += _md_table(head, body, align_right_from=len(head))
    lines.append("")
    rows = [r for r in compare_table(runs) if r["section"] in ("metric", "energy")]
    head = ["Metric", runs[0].id]
    for run in runs[1:]:
        head += [run.id, "Δ vs first"]
    body = []
    for row in rows:
        cells = [row["label"], format_value(row["key"], row["values"][0])]
        for i in range(1, len(runs)):
            cells += [
                format_value(row["key"], row["values"][i]),
                _delta_text(row["key"], row["delta"][i], row["delta_pct"][i]) or "-",
            ]
        body.append(cells)
    lines += _md_table(head, body)
    return "\n".join(lines) + "\n"
