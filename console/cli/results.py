"""`rocm-console results list|show|compare|export|import|fetch|delete`: the stored runs from scripts.

Runs live in the store (docs/store.md): the profile's `[store] url` (a team's PostgreSQL) when
a profile names one, else `store.sqlite3` in the data folder (`$ROCM_CONSOLE_DATA_DIR` when
set); no node is needed. `list` shows the newest page (50, `--limit N`), newest first, its
filters answered by the store's indexes; `--all` streams every match a page at a time. Bad
input (an unknown or ambiguous id, a missing path) is one line on stderr and exit 2; a store
that cannot be opened one line naming it and the reason, exit 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import sys
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    add_actions,
    add_command_options,
    add_profile_options,
    guarded,
    load_selected_profile,
    positive_int,
    say_error,
)
from console.cli.history_arg import command_history, require, run_store
from console.core.errors import ProfileError
from console.core.events import parse_since
from console.core.results.display import (
    NO_VALUE,
    client_mark,
    delta_suffix,
    energy_text,
    failed_note,
    find_max_mark,
    fold_find_max_answers,
    format_value,
    is_reference,
    metric_label,
    run_date,
    run_summary,
    sig3,
    split_failed,
)
from console.core.results.record import StoredRun, run_to_dict
from console.core.text import printable

# compare, export, the reference numbers and the accuracy lookup are imported where used:
# `results list` in a fresh process is budgeted (tests/perf/store_scale.py)
if TYPE_CHECKING:
    from console.core.results.reference import ReferenceMatch
    from console.services.history import History
    from console.services.results import ImportReport

REFERENCE_FILE = "reference_numbers.toml"  # in the shipped profiles folder
PAGE = 50  # `results list` without --limit: the newest fifty (the history screen's page)
STREAM_PAGE = 500  # `--all`: rows read, folded and printed a page at a time
ACCURACY_WINDOW_S = 30 * 86400.0  # an instance's accuracy score is looked for this far back


def _add_list(ops) -> argparse.ArgumentParser:
    lst = ops.add_parser("list", help=f"stored runs, newest first (the newest {PAGE}; --all for every one)")
    lst.add_argument("--node", metavar="NAME", help="only runs on this node")
    lst.add_argument("--label", metavar="TEXT", help="only runs with this label")
    lst.add_argument("--model", metavar="TEXT", help="only runs whose model contains TEXT")
    lst.add_argument("--preset", metavar="NAME", help="only runs of this bench or serve preset")
    lst.add_argument(
        "--since", metavar="WHEN", help="only runs stored since a date (2026-11-21) or for a time (7d, 12h)"
    )
    lst.add_argument("--limit", type=positive_int, metavar="N", help=f"the newest N runs (default {PAGE})")
    lst.add_argument("--all", action="store_true", help="every matching run (read a page at a time)")
    return lst


def _add_show(ops) -> argparse.ArgumentParser:
    show = ops.add_parser("show", help="one run: context, setup, metrics, live summary")
    show.add_argument("id", help="run id or a unique prefix")
    return show


def _add_compare(ops) -> argparse.ArgumentParser:
    compare = ops.add_parser("compare", help="runs side by side with deltas against the first")
    compare.add_argument("ids", nargs="+", metavar="ID")
    compare.add_argument(
        "--reference", action="store_true", help="add the seeds' published numbers for the same configuration"
    )
    compare.add_argument(
        "--include-failed",
        action="store_true",
        help="keep failed runs (no request succeeded, an error, cancelled): left out by default",
    )
    return compare


def _add_export(ops) -> argparse.ArgumentParser:
    export = ops.add_parser("export", help="runs as JSON, CSV or Markdown")
    export.add_argument("ids", nargs="*", metavar="ID")
    export.add_argument("--all", action="store_true", help="every stored run")
    export.add_argument("--format", required=True, choices=("json", "csv", "md"))
    export.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    return export


def _add_import(ops) -> argparse.ArgumentParser:
    imp = ops.add_parser(
        "import", help="vLLM result JSON, captured client output or the console's own result files (files or folders)"
    )
    imp.add_argument("paths", nargs="+", metavar="PATH")
    imp.add_argument("--label", metavar="TEXT", help="label for every imported run")
    imp.add_argument("--node", metavar="NAME", help="node the runs ran on (else unknown)")
    return imp


def _add_fetch(ops) -> argparse.ArgumentParser:
    fetch = ops.add_parser(
        "fetch",
        help="store finished benchmark runs from their node (a result the store could not take, or another console's)",
    )
    fetch.add_argument("runs", nargs="+", metavar="RUN", help="run name on the node (bench runs lists them)")
    fetch.add_argument("--node", metavar="NAME", help="node the run ran on (needed when the profile has several)")
    fetch.add_argument("--label", metavar="TEXT", help="label stored with the run")
    return fetch


def _add_delete(ops) -> argparse.ArgumentParser:
    delete = ops.add_parser("delete", help="remove stored runs")
    delete.add_argument("ids", nargs="+", metavar="ID", help="run id or a unique prefix")
    return delete


# In the order `results --help` lists them.
_ACTION_PARSERS = {
    "list": _add_list,
    "show": _add_show,
    "compare": _add_compare,
    "export": _add_export,
    "import": _add_import,
    "fetch": _add_fetch,
    "delete": _add_delete,
}
ACTIONS = tuple(_ACTION_PARSERS)


def add_parser(sub, only: str | None = None) -> list[argparse.ArgumentParser]:
    """The group's parser with every action, or with the action `only` (a line that names it
    needs no other: entry.py; a fresh `results list` is budgeted)."""
    ops = add_actions(
        sub, "results", help="stored benchmark results: list, show, compare, export, import, fetch, delete"
    )
    made = []
    for name, add in _ACTION_PARSERS.items():
        if only is None or name == only:
            action = add(ops)
            if name == "export":
                add_profile_options(action)  # export writes its own --format: no --json
            else:  # profile options are accepted like everywhere, though results need no profile
                add_command_options([action])
            made.append(action)
    return made


# ---------------------------------------------------------------- helpers


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: Container[int] = frozenset()) -> str:
    return _table_text(head, rows, right)[0]


def _table_text(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Container[int] = frozenset(),
    widths: Sequence[int] | None = None,
) -> tuple[str, list[int]]:
    """The head and rows aligned, and the column widths (at least `widths`: a streamed table's
    earlier chunks)."""
    rows = [[printable(c) for c in row] for row in rows]  # text from stored or imported files
    width = [max(len(h), w) for h, w in zip(head, widths or [0] * len(head))]
    for row in rows:
        width = [max(w, len(c)) for w, c in zip(width, row)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, width))
        ).rstrip()

    return "\n".join([line(head), *(line(r) for r in rows)]) + "\n", width


def _short_model(model: object) -> str:
    if not isinstance(model, str) or not model:
        return "-"
    return model.rstrip("/").rsplit("/", 1)[-1] or model


def _since(text: str | None) -> float | None:
    if text is None:
        return None
    # the events' parser, less its seconds and "min" units: results have only ever taken d/h/m
    if not re.fullmatch(r"\s*\d+(?:\.\d+)?\s*(s|min)\s*", text):
        with contextlib.suppress(ValueError):
            return parse_since(text)
    raise UsageError(f"--since {text!r}: expected a date (2026-11-21), a time (2026-11-21T08:00) or 7d/12h/30m")


def _get_runs(history: History, refs: Sequence[str]) -> list[StoredRun]:
    runs = []
    for ref in refs:
        try:
            runs.append(history.runs.get(ref))
        except KeyError as exc:
            raise UsageError(exc.args[0]) from None
    return runs


def _accuracy_pool(history: History, runs: Sequence[StoredRun]) -> list[StoredRun]:
    """The accuracy runs that may score `runs` (accuracy_for: same node, instance and model):
    those of their nodes since a window before the oldest of them, read by the node index
    (never every stored run, as the file store's list did)."""
    from console.core.results.offline import ACCURACY, run_kind
    from console.core.store.rows import run_from_doc

    nodes = sorted(
        {
            str(r.context["node"])
            for r in runs
            if r.context.get("node") and r.context.get("instance") and run_kind(r) != ACCURACY
        }
    )
    if not nodes:
        return []
    since = min(r.created for r in runs) - ACCURACY_WINDOW_S
    marks = ", ".join("?" for _ in nodes)
    rows = history.open().db.rows(
        f"SELECT doc FROM runs WHERE node IN ({marks}) AND created >= ? AND run_kind = ?", [*nodes, since, ACCURACY]
    )
    pool = []
    for (doc,) in rows:
        with contextlib.suppress(ValueError):  # an unreadable row is named where it is listed
            pool.append(run_from_doc(doc))
    return pool


# ---------------------------------------------------------------- list / show

HEAD = ["ID", "DATE", "NODE", "MODEL", "PARTITION", "SETUP", "OK/FAIL", "OUT TOK/S", "TTFT P50", "ITL P50"]
HEAD += [
    "GOOD %",
    "CACHED %",
    "TOK/J",
    "AVG W",
    "THR %",
    "CB",
]  # goodput against the SLO; prompt tokens from the prefix cache
RIGHT = frozenset({6, 7, 8, 9, 10, 11, 12, 13, 14})


def _list_filters(args) -> dict:
    for flag, value in (
        ("--node", args.node),
        ("--label", args.label),
        ("--model", args.model),
        ("--preset", args.preset),
    ):
        if value is not None and not value.strip():
            raise UsageError(f"{flag} '': give the text to match")
    if args.all and args.limit is not None:
        raise UsageError("give --limit N or --all, not both")
    return {
        "node": args.node,
        "label": args.label,
        "model": args.model,
        "preset": args.preset,
        "since": _since(args.since),
    }


def _list(args, history: History) -> int:
    """The newest runs first, a page read from the store (--all: every page, streamed)."""
    filters = _list_filters(args)
    table = history.runs
    more = False
    if args.all:
        found: Iterable[StoredRun] = table.iter_runs(**filters, page=STREAM_PAGE)
    else:
        limit = args.limit or PAGE
        page = table.list_runs(**filters, limit=limit + 1)  # one more: says whether there are more
        more = len(page) > limit
        found = page[:limit]
    chunks = _chunks(found)
    shown = _print_json(chunks) if args.json else _print_table(chunks, history)
    for problem in table.errors:
        say_error(problem)
    if not shown and not args.json:
        matched = " match" if any(v is not None for v in filters.values()) else ""
        print(f"no stored results{matched} ({history.where})")
    if more:
        print(
            f"rocm-console: the newest {shown} run{'s'[: shown != 1]} shown; --limit N shows more, --all every one",
            file=sys.stderr,
        )
    return EXIT_OK


def _chunks(runs: Iterable[StoredRun]) -> Iterator[list[StoredRun]]:
    """The runs a page at a time; the seeds' published rows held back to the end, so that they
    never read as today's (they are few)."""
    it = iter(runs)
    references: list[StoredRun] = []
    while chunk := list(islice(it, STREAM_PAGE)):
        references += [r for r in chunk if is_reference(r)]
        mine = [r for r in chunk if not is_reference(r)]
        if mine:
            yield mine
    if references:
        yield references


def _print_json(chunks: Iterable[list[StoredRun]]) -> int:
    """`{"runs": [...]}` as json.dumps(indent=2) writes it, one run at a time."""
    count = 0
    for chunk in chunks:
        for run in chunk:
            text = json.dumps(_list_dict(run), indent=2, default=str, allow_nan=False)
            sys.stdout.write(('{\n  "runs": [\n' if count == 0 else ",\n") + _indent(text, "    "))
            count += 1
    sys.stdout.write('{\n  "runs": []\n}\n' if count == 0 else "\n  ]\n}\n")
    return count


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + line for line in text.split("\n"))


def _print_table(chunks: Iterable[list[StoredRun]], history: History) -> int:
    """The table, a chunk at a time; the columns as wide as the widest cell seen so far."""
    count = 0
    widths: list[int] | None = None
    for chunk in chunks:
        rows = _rows(chunk, history)
        count += len(chunk)
        if not rows:
            continue
        head_written = widths is not None  # by an earlier chunk
        text, widths = _table_text(HEAD, rows, RIGHT, widths)
        sys.stdout.write(text.split("\n", 1)[1] if head_written else text)  # the head once
        sys.stdout.flush()
    return count


def _accuracies(runs: list[StoredRun], history: History) -> list[StoredRun | None]:
    """Each run's instance's accuracy run, if any (only a run on an instance can have one)."""
    if not any(r.context.get("instance") for r in runs):
        return [None] * len(runs)
    from console.core.results.offline import accuracy_for

    return accuracy_for(runs, [*runs, *_accuracy_pool(history, runs)])


def _rows(runs: list[StoredRun], history: History) -> list[list[str]]:
    runs, answers = fold_find_max_answers(runs)  # a find-max answer: a mark on its point's row
    rows = []
    for run, acc in zip(runs, _accuracies(runs, history)):
        s = run_summary(run)
        if acc is not None:
            from console.core.results.offline import accuracy_text

            s["setup"] += f" [{accuracy_text(acc)}]" if accuracy_text(acc) else ""
        if run.id in answers:
            s["setup"] = f"{find_max_mark(answers[run.id])} · {s['setup']}"
        done = format_value("completed", s["completed"])
        failed = format_value("failed", s["failed"]) if s["failed"] is not None else "?"
        where = [
            run.id,
            s["date"][:16],
            s["node"] or "-",
            _short_model(s["model"]),
            s["partition"] or "-",
            s["setup"],
        ]
        if s["status"] == "failed":  # marked; its zeros are no measurement
            state = f"FAILED {done}/{failed}" if s["completed"] is not None else f"FAILED {s['failure']}"
            rows.append([*where, state, *([NO_VALUE] * 8), ""])
            continue
        rows.append(
            [
                *where,
                f"{done}/{failed}",
                format_value("output_throughput", s["output_throughput"]),
                format_value("median_ttft_ms", s["median_ttft_ms"]),
                format_value("median_itl_ms", s["median_itl_ms"]),
                _pct(s["goodput_pct"]),
                _pct(s["prefix_cache_hit_pct"]) + ("!" if s["prefix_cache_warning"] else ""),  # ! not a cold figure
                sig3(s["tokens_per_joule"]),
                "-" if s["avg_power_w"] is None else f"{s['avg_power_w']:.0f}",
                "-" if s["throttled_pct"] is None else f"{s['throttled_pct']:.1f}",
                client_mark(s["client_bound"]),
            ]
        )
    return rows


def _pct(value: object) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def _list_dict(run: StoredRun) -> dict:
    data = run_summary(run)
    data["created"] = run.created
    data["source"] = run.source
    return _plain(data)


def _show(args, history: History) -> int:
    (run,) = _get_runs(history, [args.id])
    if args.json:
        print(json.dumps(run_to_dict(run), indent=2, ensure_ascii=False, allow_nan=False))
        return EXIT_OK
    out = [f"Run     {run.id}"]
    label = f", label {run.label}" if run.label else ""  # formatted, whatever a file made it
    out.append(f"Date    {run_date(run)}  ({run.origin}{label})")
    out.append(f"Client  {run.client}" + (f" {run.client_version}" if run.client_version else ""))  # issue B2
    if run.source:
        part = run.context.get("source_part")
        out.append(f"Source  {run.source}" + (f" ({part})" if part else ""))
    context = {k: v for k, v in run.context.items() if v is not None and k not in ("source_part", "client_args")}
    if context:
        out.append("Context")
        width = max(len(k) for k in context)
        out += [f"  {k:<{width}}  {format_value(k, v)}" for k, v in context.items()]
    setup = {k: v for k, v in run.setup.items() if v is not None}
    if setup:
        out.append("Setup")
        width = max(len(k) for k in setup)
        out += [f"  {k:<{width}}  {format_value(k, v)}" for k, v in setup.items()]
    if run.metrics:
        out.append("Metrics")
        labels = {k: metric_label(k) + ":" for k in run.metrics}
        width = max(40, *(len(v) for v in labels.values()))
        out += [f"  {labels[k]:<{width}} {format_value(k, v)}" for k, v in run.metrics.items()]
    out += energy_text(run)
    if run.live:
        out.append("Live (from /metrics during the run)")
        width = max(len(k) for k in run.live)
        out += [f"  {k:<{width}}  {format_value(k, v)}" for k, v in run.live.items()]
    if run.result is not None:
        arrays = [k for k, v in run.result.items() if isinstance(v, list)]
        if arrays:
            out.append(f"Per-request arrays kept: {', '.join(arrays)} (show --json)")
    print(printable("\n".join(out), keep_newlines=True))  # keys and values come from the file
    return EXIT_OK


# ---------------------------------------------------------------- compare


def _pick_references(runs: Sequence[StoredRun]) -> list[ReferenceMatch]:
    from console.core.results.reference import load_reference_numbers, pick_references

    try:
        from console.core.profiles import PROFILES_DIR

        rows = load_reference_numbers(PROFILES_DIR / REFERENCE_FILE)
    except ProfileError as exc:
        raise UsageError(str(exc)) from None
    return pick_references(runs, rows)


def _cell(row: dict, i: int) -> str:
    key = row["key"]
    value = row["values"][i]
    if row["section"] not in ("metric", "energy") or key == "client_bound":
        if key == "model":
            return _short_model(value)
        return format_value(key, value)
    text = format_value(key, value)
    extra = delta_suffix(row, i)
    return text if extra is None else f"{text} ({extra})"


def _compare(args, history: History) -> int:
    from console.core.results.compare import compare_table, prefix_cache_warnings, workload_warning
    from console.core.results.offline import with_accuracy
    from console.core.results.reference import reference_as_run

    runs = _get_runs(history, args.ids)
    left_out: list[StoredRun] = []
    if not args.include_failed:  # a failed run's zeros would read as the best latency
        runs, left_out = split_failed(runs)
        if left_out:
            print(failed_note(left_out) + " (--include-failed keeps them)", file=sys.stderr)
    if len(runs) < 2 and not args.reference:
        raise UsageError("compare needs two or more runs (or one run and --reference)")
    warning = workload_warning(runs)
    matches = _pick_references(runs) if args.reference else []
    # the instance's accuracy score (bench accuracy) beside its speed results
    runs = [with_accuracy(r, acc) for r, acc in zip(runs, _accuracies(runs, history))]
    columns = runs + [reference_as_run(m.row) for m in matches]
    rows = compare_table(columns)
    if args.json:
        doc = {
            "runs": [r.id for r in runs],
            "left_out_failed": [r.id for r in left_out],
            "workload_warning": warning,
            "prefix_cache_warnings": prefix_cache_warnings(runs),
            "references": [
                {"id": m.row.id, "seed": m.row.seed, "section": m.row.section, "unverified": list(m.unverified)}
                for m in matches
            ],
            "rows": rows,
        }
        print(json.dumps(_plain(doc), indent=2, default=str, allow_nan=False))
        return EXIT_OK
    head = [""] + [r.id for r in columns]
    body = [[row["label"]] + [_cell(row, i) for i in range(len(columns))] for row in rows if row["key"] != "id"]
    if warning:
        print(f"warning: {warning}")
    for line in prefix_cache_warnings(runs):  # issue B2: cold figures that came from the cache
        print(f"warning: {line}")
    sys.stdout.write(_table(head, body))
    if args.reference:
        if not matches:
            print("no reference numbers for this configuration in " + REFERENCE_FILE)
        for m in matches:
            note = f" (not verified: {', '.join(m.unverified)})" if m.unverified else ""
            print(f"ref:{m.row.id} = seed {m.row.seed}, {m.row.section}{note}")
    return EXIT_OK


def _plain(value):
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# ---------------------------------------------------------------- export / import


def _export(args, history: History) -> int:
    """The runs written as they are read: with --all a page at a time from the store, oldest
    first (a big history never whole in memory); to stdout or to a new file (never replaced)."""
    if args.all:
        if args.ids:
            raise UsageError("give run ids or --all, not both")
        table = history.runs
        total = table.count_runs()  # the pages of both passes end here: runs stored meanwhile are left out

        def source() -> Iterable[StoredRun]:
            return _oldest_first(table, total)

    elif args.ids:
        runs = _get_runs(history, args.ids)

        def source() -> Iterable[StoredRun]:
            return runs

    else:
        raise UsageError("export needs run ids (or --all)")
    counted = _Counted()
    chunks = _export_chunks(args.format, source, counted)
    if args.output:  # a file gets the data as it is (JSON is escaped by json_chunks either way)
        asked = Path(args.output).expanduser()
        written = _write_new_file(asked, chunks, args.output)
        kept = f" ({args.output} exists: kept)" if written != asked else ""
        print(f"{counted.n} run(s) written to {written}{kept}", file=sys.stderr)
    else:
        # To stdout (a terminal, or a pipe that ends in one): CSV and Markdown are text, filtered
        # like everything else shown (each chunk ends a line or a cell: escapes are never cut);
        # JSON is already plain ASCII-safe (json_chunks).
        for chunk in chunks:
            sys.stdout.write(chunk if args.format == "json" else printable(chunk, keep_newlines=True))
    return EXIT_OK


class _Counted:
    """How many runs the writing pass went through (the "N run(s) written" line)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, runs: Iterable[StoredRun]) -> Iterator[StoredRun]:
        self.n = 0
        for run in runs:
            self.n += 1
            yield run


def _export_chunks(fmt: str, source: Callable[[], Iterable[StoredRun]], counted: _Counted) -> Iterator[str]:
    """The export's text a piece at a time. CSV's columns and Markdown's metric rows depend on
    every run: a first pass over the runs keeps only those keys, the second writes the rows."""
    from console.core.results.export import csv_chunks, csv_columns, json_chunks, markdown_chunks, markdown_plan

    if fmt == "json":
        return json_chunks(counted(source()))
    if fmt == "csv":
        return csv_chunks(counted(source()), csv_columns(source()))
    return markdown_chunks(counted(source()), markdown_plan(source()))


def _oldest_first(table, total: int) -> Iterator[StoredRun]:
    """The first `total` stored runs, oldest first, STREAM_PAGE at a time. The store pages by
    (created, seq); the export's order has always been run_order (runs of one time by source
    and part), so each group of one time is held and sorted (a group is one import's runs)."""
    from console.core.results.ids import run_order

    group: list[StoredRun] = []
    for offset in range(0, total, STREAM_PAGE):
        for run in table.list_runs(limit=STREAM_PAGE, offset=offset, oldest_first=True):
            if group and run.created != group[0].created:
                yield from sorted(group, key=run_order)
                group = []
            group.append(run)
    yield from sorted(group, key=run_order)


def _write_new_file(path: Path, chunks: Iterable[str], shown: str) -> Path:
    """The chunks written to `path`, or to the first free numbered name beside it (write_new:
    an existing file is never replaced, a failed export leaves no part-written file)."""
    from console.core.results.new_file import write_new

    try:
        return write_new(path, chunks)
    except OSError as exc:
        raise UsageError(f"--output {shown}: {exc.strerror or exc}") from None


def _print_report(report: ImportReport) -> None:
    # Paths, parts, reasons, models: all from the files read; each line goes through printable().
    def say(line: str) -> None:
        print(printable(line))

    for run in report.imported:
        part = run.context.get("source_part")
        where = (run.source or "") + (f" {part}" if part else "")
        conc = run.setup.get("max_concurrency")
        what = _short_model(run.setup.get("model")) + (f" c{conc}" if conc is not None else "")
        tput = run.metrics.get("output_throughput")
        tput_text = f"  {format_value('output_throughput', tput)} tok/s" if tput is not None else ""
        say(f"imported        {run.id}  {where}  {what}{tput_text}")
    for dup in report.duplicates:
        say(f"already stored  {dup.id}  {dup.path}" + (f" {dup.part}" if dup.part else ""))
    for item in report.skipped:
        say(f"skipped         {item.path}" + (f" {item.part}" if item.part else "") + f": {item.reason}")
    for item in report.unreadable:
        say_error(f"{item.path}: {item.reason}")
    print(
        f"{len(report.imported)} imported, {len(report.duplicates)} already stored, "
        f"{len(report.skipped)} skipped, {len(report.unreadable)} unreadable ({report.files} files read)"
    )


def _import(args, history: History) -> int:
    report = history.runs.import_paths(args.paths, label=args.label, node=args.node)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, default=str))
        for item in report.unreadable:
            say_error(f"{item.path}: {item.reason}")
    else:
        _print_report(report)
    if report.exit_code == EXIT_FAILED:  # the reasons are above, one per file
        say_error(f"no benchmark result found in {', '.join(args.paths)}")
    return report.exit_code


def _delete(args, history: History) -> int:
    ids = []
    for ref in args.ids:  # every id checked first: a typo deletes nothing
        try:
            ids.append(history.runs.resolve(ref))
        except KeyError as exc:
            raise UsageError(exc.args[0]) from None
    for run_id in dict.fromkeys(ids):
        try:
            history.delete_run(run_id)
        except KeyError:  # another console deleted it meanwhile: gone either way
            pass
        if not args.json:
            print(f"deleted {run_id}")
    if args.json:
        print(json.dumps({"deleted": list(dict.fromkeys(ids))}))
    return EXIT_OK


def _fetch(args) -> int:
    """`results fetch RUN...`: a finished run from its node into the store (services/node_results.py)."""
    import asyncio

    from console.cli.selection import Selection
    from console.services.node_results import FetchError, fetch_run

    profile = load_selected_profile(args)
    history = command_history(profile=profile)
    store = run_store(history)  # a store that cannot be opened: the fetch says so, the run stays
    sel = Selection(profile, history)
    node = sel.node(args.node)
    presets = {p.name: p for p in profile.bench_presets}

    async def fetch_all() -> int:
        failed = False
        docs = []
        async with sel:
            for name in dict.fromkeys(args.runs):
                try:
                    got = await fetch_run(sel.pool, node, name, store, presets=presets, label=args.label)
                except FetchError as exc:
                    say_error(exc)
                    failed = True
                    continue
                docs.append({**run_to_dict(got.run), "new": got.new})
                if not args.json:
                    how = "stored as" if got.new else "already stored as"
                    print(f"{name}: {how} {got.run.id}")
        if args.json:
            print(json.dumps({"runs": docs}, indent=2, default=str, allow_nan=False))
        return EXIT_FAILED if failed else EXIT_OK

    try:
        return asyncio.run(fetch_all())
    finally:
        history.close()


def run(args: argparse.Namespace) -> int:
    """Run a `results` action on the command's one History. No node is needed (a profile only
    names a team's store), except to fetch from a node."""
    from console.services.results import StoreError

    if getattr(args, "demo", False):  # the demo's own history, seeded as the demo TUI seeds it
        from console.services.demo import use_demo_results

        use_demo_results()
    if args.results_command == "fetch":
        from console.transport.base import TransportError

        return guarded(lambda: _fetch(args), failures=(StoreError, TransportError))
    action = {
        "list": _list,
        "show": _show,
        "compare": _compare,
        "export": _export,
        "import": _import,
        "delete": _delete,
    }[args.results_command]
    history: History | None = None

    def checked() -> int:
        nonlocal history
        history = require(command_history(args))  # the store, or one line naming it and why
        return action(args, history)

    try:
        return guarded(checked, failures=(StoreError,))
    except ValueError as exc:  # a stored run that cannot be read
        say_error(" ".join(str(exc).split()))
        return EXIT_FAILED
    finally:
        if history is not None:
            history.close()
