"""Runs as JSON, CSV or Markdown.

Each format has a streamed form (`json_chunks`, `csv_chunks`, `markdown_chunks`: the text a
piece at a time, the runs read once as they come) and the whole-text form built from it
(`export_json`, ...), so a row is formatted one way. CSV and Markdown choose their columns from
every run: `csv_columns` / `markdown_plan` read the runs once for that (keeping only the
keys), and the chunks read them a second time (`results export --all`: 100,000 stored runs
are never all in memory)."""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import json
import math
import shlex
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from console.core.bench.result import result_metric_keys
from console.core.results.compare import delta_from
from console.core.results.display import (
    ENERGY_LABELS,
    WORKLOAD_LABELS,
    format_value,
    metric_label,
    run_date,
    run_summary,
)
from console.core.results.record import (
    CONTEXT_KEYS,
    FORMAT,
    SETUP_KEYS,
    StoredRun,
    jsonable,
    run_to_dict,
)
from console.core.text import json_safe


def export_json(runs: Iterable[StoredRun]) -> str:
    """{"format": ..., "runs": [run_to_dict(run), ...]} as indented strict JSON."""
    return "".join(json_chunks(runs))


def json_chunks(runs: Iterable[StoredRun]) -> Iterator[str]:
    """export_json's text a run at a time: what json.dumps(doc, indent=2) writes for the whole
    document, each run dumped on its own and indented to its place in the list."""
    count = 0
    for run in runs:
        text = json.dumps(run_to_dict(run), indent=2, ensure_ascii=False, allow_nan=False)
        head = '{\n  "format": ' + json.dumps(FORMAT, ensure_ascii=False) + ',\n  "runs": [\n' if not count else ",\n"
        # json_safe: the C1 controls and bidi marks json.dumps leaves raw are escaped (same data)
        yield json_safe(head + "\n".join("    " + line for line in text.split("\n")))
        count += 1
    if count:
        yield "\n  ]\n}\n"
    else:
        yield json_safe(json.dumps({"format": FORMAT, "runs": []}, indent=2, ensure_ascii=False)) + "\n"


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


@dataclass(frozen=True)
class CsvColumns:
    """The columns a CSV export has beyond its fixed ones: (key, column name) of the setup
    keys and of the metric keys."""

    setup: tuple[tuple[str, str], ...]
    metric: tuple[tuple[str, str], ...]


def csv_columns(runs: Iterable[StoredRun]) -> CsvColumns:
    """The setup keys (SETUP_KEYS, then others as first met; `setup_` prefix where a name is
    taken) and every metric key any run has (in the result block's order, `metric_` prefix
    where taken). Reads `runs` once and keeps only the keys."""
    setup_keys: dict[str, None] = dict.fromkeys(SETUP_KEYS)
    union: dict[str, float] = {}
    for run in runs:
        for key in run.setup:
            setup_keys.setdefault(key)
        for key in run.metrics:
            union.setdefault(key, 1.0)
    metric_keys = result_metric_keys(union)
    taken = set(_CSV_HEAD) | set(_CSV_CONTEXT)
    setup_cols = tuple((k, f"setup_{k}" if k in taken else k) for k in setup_keys)
    taken |= {c for _, c in setup_cols}
    metric_cols = tuple((k, f"metric_{k}" if k in taken else k) for k in metric_keys)
    return CsvColumns(setup_cols, metric_cols)


def csv_chunks(runs: Iterable[StoredRun], columns: CsvColumns) -> Iterator[str]:
    """export_csv's text: the head line, then one line per run (each chunk ends a row)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")

    def line(cells: Sequence[object]) -> str:
        buf.seek(0)
        buf.truncate()
        writer.writerow(cells)
        return buf.getvalue()

    yield line(
        [*_CSV_HEAD, *_CSV_CONTEXT, *(c for _, c in columns.setup), *(c for _, c in columns.metric), *_CSV_TRUTH]
    )
    for run in runs:
        yield line(csv_row(run, columns))


def csv_row(run: StoredRun, columns: CsvColumns) -> list[str]:
    """One run's cells under `columns`: missing values empty, argv lists shell-joined, dicts JSON."""
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
    row += [_csv_cell(run.setup.get(k)) for k, _ in columns.setup]
    row += [_csv_cell(run.metrics.get(k)) for k, _ in columns.metric]
    row += [_csv_cell(v) for v in truth_cells(run)]
    return row


def export_csv(runs: Sequence[StoredRun]) -> str:
    """One row per run: id, date, created (ISO), origin, label, source, source_part, the context
    keys, the setup keys (`setup_` prefix where a name is taken), then every metric
    key any run has, in the result block's order. Missing values are empty cells;
    argv lists are shell-joined, dicts JSON."""
    return "".join(csv_chunks(runs, csv_columns(runs)))


def _md_cell(value: object) -> str:
    text = value if isinstance(value, str) else str(value)
    text = " ".join(text.split())
    return text.replace("\\", "\\\\").replace("|", "\\|") or " "


def _md_line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_md_cell(c) for c in cells) + " |\n"


def _md_table(head: Sequence[str], rows: Iterable[Sequence[str]], align_right_from: int = 1) -> Iterator[str]:
    """A GitHub table's lines, each with its newline."""
    yield _md_line(head)
    yield "|" + "|".join("---:" if i >= align_right_from else "---" for i in range(len(head))) + "|\n"
    for row in rows:
        yield _md_line(row)


def _delta_text(key: str, delta: float | None, pct: float | None) -> str:
    if delta is None:
        return ""
    sign = "+" if delta >= 0 else "-"
    text = f"{sign}{format_value(key, abs(delta))}"
    if pct is not None:
        text += f" ({pct:+.1f}%)"
    return text


def export_markdown(runs: Iterable[StoredRun], *, title: str | None = "Benchmark results") -> str:
    """Two GitHub tables: the runs (context and setup), then the metrics side by
    side with deltas against the first run."""
    runs = list(runs)
    return "".join(markdown_chunks(runs, markdown_plan(runs), title=title))


@dataclass(frozen=True)
class MarkdownPlan:
    """The metrics table's rows, in compare_table's order (its "metric" and "energy" sections):
    (kind, key, label), kind "metric" (run.metrics), "energy" (run.energy_value), "bound"
    (run.client_bound, no delta) or "workload" (a StoredRun attribute)."""

    rows: tuple[tuple[str, str, str], ...]


def markdown_plan(runs: Iterable[StoredRun]) -> MarkdownPlan:
    """The rows compare_table would give `runs` in the metrics table: every metric any run has,
    then the energy and workload figures any run recorded. Reads `runs` once, keeping only
    which rows there are (compare_table holds every value of every run)."""
    union: dict[str, float] = {}
    energy: set[str] = set()
    workload: set[str] = set()
    bound = False
    for run in runs:
        for key in run.metrics:
            union.setdefault(key, 1.0)
        energy.update(k for k in ENERGY_LABELS if k not in energy and run.energy_value(k) is not None)
        workload.update(k for k in WORKLOAD_LABELS if k not in workload and getattr(run, k) is not None)
        bound = bound or run.client_check is not None
    rows = [("metric", k, metric_label(k)) for k in result_metric_keys(union)]
    rows += [("energy", k, label) for k, label in ENERGY_LABELS.items() if k in energy]
    rows += [("bound", "client_bound", "Client-bound")] if bound else []
    rows += [("workload", k, label) for k, label in WORKLOAD_LABELS.items() if k in workload]
    return MarkdownPlan(tuple(rows))


def _plan_value(run: StoredRun, kind: str, key: str) -> object:
    if kind == "metric":
        return run.metrics.get(key)
    if kind == "energy":
        return run.energy_value(key)
    if kind == "bound":
        return run.client_bound
    return getattr(run, key)


def _plan_delta(kind: str, value: object, base: object) -> tuple[float | None, float | None]:
    """compare_table's delta and percentage against the first run's value (compare.py)."""
    if kind == "bound" or not isinstance(value, (int, float)) or not isinstance(base, (int, float)):
        return None, None
    return delta_from(base, value, finite=kind == "metric")


_SPOOL_READ = 1 << 16  # characters read back from a metrics row's spool at a time


def markdown_chunks(
    runs: Iterable[StoredRun], plan: MarkdownPlan, *, title: str | None = "Benchmark results"
) -> Iterator[str]:
    """export_markdown's text, the runs read once. The metrics table has a column per run, so
    each of its rows is spooled to a temporary file while the runs go by and copied out after
    the runs table. Every chunk ends with a newline or a "|": a filter applied chunk by chunk
    (printable()) sees every escape sequence whole."""
    if title:
        yield f"# {title}\n\n"
    it = iter(runs)
    first = next(it, None)
    if first is None:
        yield "No runs.\n"
        return
    head = ["Run", "Date", "Node", "GPU", "Partition", "Model", "Setup", "Label", "Source"]
    yield from _md_table(head, [], align_right_from=len(head))
    bases = [_plan_value(first, kind, key) for kind, key, _ in plan.rows]
    with contextlib.ExitStack() as stack:
        spools = [
            stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8", errors="surrogatepass", newline=""))
            for _ in range(len(plan.rows) + 1)
        ]
        spools[0].write("| " + _md_cell("Metric") + " | " + _md_cell(first.id))
        for spool, (_, key, label), base in zip(spools[1:], plan.rows, bases):
            spool.write("| " + _md_cell(label) + " | " + _md_cell(format_value(key, base)))
        columns = 2
        for run in itertools.chain([first], it):
            yield _md_line(_md_run_cells(run))
            if run is first:
                continue
            columns += 2
            spools[0].write(" | " + _md_cell(run.id) + " | " + _md_cell("Δ vs first"))
            for spool, (kind, key, _), base in zip(spools[1:], plan.rows, bases):
                value = _plan_value(run, kind, key)
                delta, pct = _plan_delta(kind, value, base)
                spool.write(" | " + _md_cell(format_value(key, value)))
                spool.write(" | " + _md_cell(_delta_text(key, delta, pct) or "-"))
        yield "\n"
        yield from _spooled_line(spools[0])
        yield "|---|"
        for start in range(1, columns, _SPOOL_READ // 5):
            yield "---:|" * min(_SPOOL_READ // 5, columns - start)
        yield "\n"
        for spool in spools[1:]:
            yield from _spooled_line(spool)


def _md_run_cells(run: StoredRun) -> list[str]:
    """A run's row in the runs table."""
    summary = run_summary(run)
    return [
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


def _spooled_line(spool: IO[str]) -> Iterator[str]:
    """A spooled row and its end (" |" and a newline), cut after a "|" (markdown_chunks)."""
    spool.seek(0)
    rest = ""
    while block := spool.read(_SPOOL_READ):
        text = rest + block
        cut = text.rfind("|") + 1
        if cut:
            yield text[:cut]
        rest = text[cut:]
    yield rest + " |\n"
