"""What the results history shows: a stored run as the list's cells (fitted to the
terminal), the filter, the import prompt's paths and its report, the export."""

from __future__ import annotations

import glob
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from console.core.bench.run_telemetry import RunTelemetry, TelemetryError
from console.core.results.display import NO_VALUE, client_mark, format_value, load_parts, run_summary, sig3
from console.core.results.export import export_csv, export_json, export_markdown
from console.core.results.new_file import numbered, write_new
from console.core.results.record import StoredRun
from console.services.results import ImportReport
from console.ui.model.charts import Trace
from console.ui.model.compare_view import short_model

EXPORTERS = {"json": export_json, "csv": export_csv, "md": export_markdown}
FILTER_HINT = "filter: node, model, partition, dataset, c64, label… (every word must match; Enter keeps, Esc clears)"
COLUMNS = (
    ("mark", ""),
    ("date", "Date"),
    ("node", "Node"),
    ("model", "Model"),
    ("partition", "Partition"),
    ("setup", "Setup"),
    ("done", "OK/Fail"),
    ("tput", "Out tok/s"),
    ("ttft", "TTFT p50"),
    ("itl", "ITL p50"),
    ("good", "Good %"),  # issue B2: requests within the preset's SLO
    ("cached", "Cached %"),  # issue B2: prompt tokens vLLM's prefix cache served ("!": not cold)
    ("tpj", "tok/J"),
    ("watts", "Avg W"),
    ("thr", "Thr %"),
    ("cb", "CB"),  # client-bound: the benchmark client, not the server, set the numbers
)
RIGHT = {"done", "tput", "ttft", "itl", "good", "cached", "tpj", "watts", "thr"}
# Issue P's columns: shown when any run in the list recorded energy or a client check.
TRUTH_COLUMNS = frozenset({"tpj", "watts", "thr", "cb"})


def columns_for(runs: Sequence[StoredRun]) -> tuple[tuple[str, str], ...]:
    """The list's columns: without energy and client columns when no run has them (imports)."""
    hidden = set() if any(r.goodput is not None for r in runs) else {"good"}
    if not any(r.prefix_cache_hit_pct is not None for r in runs):
        hidden.add("cached")
    if not any(r.energy is not None or r.client_check is not None for r in runs):
        hidden |= TRUTH_COLUMNS
    return tuple(c for c in COLUMNS if c[0] not in hidden)


MARK_WIDTH = 3
_SHRINK = (("model", 14), ("setup", 14))  # what gives way first in a narrow terminal, down to these widths
# Then, in order, until the list fits: a column dropped (None), the date without its year
# ("date", 0), the labels of the metric columns shortened ("labels", 0), a column cut to a width.
# The key metrics (OK/Fail, tok/s, TTFT, ITL), the model and the setup always stay.
_GIVE_WAY: tuple[tuple[str, int | None], ...] = (
    ("partition", None),
    ("good", None),
    ("cached", None),
    ("thr", None),
    ("watts", None),
    ("cb", None),
    ("date", 0),
    ("node", None),
    ("tpj", None),
    ("labels", 0),
    ("model", 10),
    ("model", 8),
    ("setup", 10),  # the setup (dataset, lengths, concurrency) before the model's name
)
SHORT_LABELS = {"done": "OK/F", "tput": "tok/s", "ttft": "TTFT", "itl": "ITL"}


def run_cells(run: StoredRun) -> dict[str, str]:
    """The list's columns of one run, as text."""
    s = run_summary(run)
    done = format_value("completed", s["completed"])
    failed = format_value("failed", s["failed"]) if s["failed"] is not None else "?"
    where = {
        "date": s["date"][:16],
        "node": s["node"] or "-",
        "model": short_model(s["model"]),
        "partition": s["partition"] or "-",
        "setup": setup_cell(run, s["setup"]),
    }
    if s["status"] == "failed":  # marked, and its zeros are no measurement
        state = s["failure"] if s["completed"] is None else f"{done}/{failed}"
        return {
            **where,
            "done": f"✗ {state}",
            **dict.fromkeys(("tput", "ttft", "itl", "good", "cached", "tpj", "watts", "thr"), NO_VALUE),
            "cb": "",
        }
    return {
        **where,
        "done": f"{done}/{failed}",
        "tput": format_value("output_throughput", s["output_throughput"]),
        "ttft": format_value("median_ttft_ms", s["median_ttft_ms"]),
        "itl": format_value("median_itl_ms", s["median_itl_ms"]),
        "good": "-" if s["goodput_pct"] is None else f"{s['goodput_pct']:.0f}",
        "cached": "-"
        if s["prefix_cache_hit_pct"] is None
        else f"{s['prefix_cache_hit_pct']:.0f}" + ("!" if s["prefix_cache_warning"] else ""),
        "tpj": sig3(s["tokens_per_joule"]),
        "watts": "-" if s["avg_power_w"] is None else f"{s['avg_power_w']:.0f}",
        "thr": "-" if s["throttled_pct"] is None else f"{s['throttled_pct']:.1f}",
        "cb": client_mark(s["client_bound"]),
    }


def setup_cell(run: StoredRun, summary: str) -> str:
    """The Setup column: the parts that differ between runs of one preset first (concurrency,
    rate, prompts), then the preset and its dataset: `c64 n500 random-4096-512: random 4096/512`,
    so that a cut end loses what the runs share, not what tells them apart."""
    lead = load_parts(run)
    rest = summary
    for word in lead:
        rest = re.sub(rf"(?<!\S){re.escape(word)}(?!\S)", "", rest, count=1)
    rest = " ".join(rest.split())
    return " ".join([*lead, rest]) if rest and rest != "-" else (" ".join(lead) or summary)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def short_setup(text: str, width: int) -> str:
    """A Setup cell (setup_cell: what differs first) in `width` cells: the dataset's bare name
    goes first (`random`), then the end is cut (`c128 n1024 sharegpt 1024/128` ->
    `c128 n1024 1024/128` -> `c128 n1024 10…`)."""
    words = text.split(" ")
    if len(text) > width:
        words = [w for w in words if not w.isalpha() or w == "rate"] or words  # `rate 2` stays whole
    return _cut(" ".join(words), width)


def fit_table(
    rows: list[dict[str, str]], width: int, columns: Sequence[tuple[str, str]] = COLUMNS
) -> tuple[tuple[tuple[str, str], ...], list[dict[str, str]]]:
    """The columns that fit `width` cells (with the table's cell padding and a scrollbar) and the
    rows' cells for them: the model and the setup shortened first, then the least important
    columns dropped (_GIVE_WAY); the numbers are never cut."""
    cols: list[tuple[str, str]] = [(k, label) for k, label in columns]
    rows = [dict(r) for r in rows]

    def widths() -> dict[str, int]:
        return {k: max([len(label)] + [len(r[k]) for r in rows]) for k, label in cols[1:]}

    def over(w: dict[str, int]) -> int:
        return MARK_WIDTH + 2 + sum(w[k] + 2 for k, _ in cols[1:]) + 2 - width

    originals = [dict(r) for r in rows]  # each cut starts from the whole text

    def shrink(key: str, least: int) -> None:
        w = widths()
        if key in w:
            target = max(least, w[key] - over(w))
            if target < w[key]:
                for r, whole in zip(rows, originals):
                    r[key] = short_setup(whole[key], target) if key == "setup" else _cut(whole[key], target)

    for key, width_at_least in _SHRINK:
        if over(widths()) > 0:
            shrink(key, width_at_least)
    for key, least in _GIVE_WAY:
        if over(widths()) <= 0:
            break
        if key == "date":
            for r in rows:  # 2026-11-21 07:42 -> 11-21 07:42
                r["date"] = r["date"][5:] if r["date"][:4].isdigit() and r["date"][4:5] == "-" else r["date"]
        elif key == "labels":
            cols = [(k, SHORT_LABELS.get(k, label)) for k, label in cols]
        elif least is None:
            cols = [c for c in cols if c[0] != key]
        else:
            shrink(key, least)
    return tuple(cols), rows


def run_haystack(run: StoredRun) -> str:
    """Everything the filter looks at, case-folded."""
    cells = run_cells(run)
    extra = [
        run.id,
        run.label or "",
        run.origin,
        str(run.setup.get("model") or ""),
        str(run.context.get("gpu_model") or ""),
        str(run.context.get("serve_preset") or ""),
        os.path.basename(run.source or ""),
    ]
    return " ".join([*cells.values(), *extra]).casefold()


def matches_filter(run: StoredRun, text: str) -> bool:
    hay = run_haystack(run)
    return all(word in hay for word in text.casefold().split())


def expand_paths(text: str) -> list[str]:
    """Paths typed in the import prompt: shell quoting, ~, and globs (`seeds/004_*.txt`)."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    out: list[str] = []
    for word in words:
        word = os.path.expanduser(word)
        found = sorted(glob.glob(word)) if any(c in word for c in "*?[") else []
        out.extend(found or [word])
    return out


def import_summary(report: ImportReport) -> str:
    """'9 imported, 0 duplicates, 1 skipped (x.txt: no result block)'."""
    text = (
        f"{len(report.imported)} imported, {len(report.duplicates)} duplicate"
        f"{'s' if len(report.duplicates) != 1 else ''}, {len(report.skipped)} skipped"
    )
    reasons = [f"{os.path.basename(s.path)}{' ' + s.part if s.part else ''}: {s.reason}" for s in report.skipped]
    if reasons:
        text += " (" + "; ".join(reasons[:3]) + ("; …" if len(reasons) > 3 else "") + ")"
    if report.unreadable:
        text += (
            f", {len(report.unreadable)} unreadable ("
            + "; ".join(f"{u.path}: {u.reason}" for u in report.unreadable[:3])
            + ")"
        )
    return text


EXPORT_FOLDER = "exports"  # under the store's folder; the store reads only <root>/*.json as runs


def export_folder(store_root: Path) -> Path:
    """Where exports go by default: the results folder of the data dir (its `exports/`, so an
    exported JSON is never read back as a stored run), not the folder the console started in."""
    return Path(store_root) / EXPORT_FOLDER


def export_target(text: str, fmt: str, folder: Path) -> Path:
    """The absolute file an export writes: `~` expanded, a relative name inside `folder`, and
    the extension the chosen format's (a name without one, or with another format's, follows it)."""
    target = Path(text.strip()).expanduser()
    if not target.is_absolute():
        target = Path(folder) / target
    ext = target.suffix.lstrip(".").lower()
    if ext != fmt and (not ext or ext in EXPORTERS or ext == "markdown"):
        target = target.with_name(f"{target.stem if ext else target.name}.{fmt}")
    return target


def write_export(runs: Sequence[StoredRun], fmt: str, path: str | Path, folder: Path | None = None) -> Path:
    """Write runs as json / csv / md; returns the absolute path written. OSError if it cannot.
    A relative path is taken inside `folder` (made when missing), else the current folder.
    An existing file is never replaced: the export goes to the first free `name-N.ext` beside
    it (export_note says so)."""
    target = export_target(str(path), fmt, folder if folder is not None else Path.cwd())
    if folder is not None and target.parent == Path(folder):
        target.parent.mkdir(parents=True, exist_ok=True)
    text = EXPORTERS[fmt](list(runs))
    return write_new(target, text)


def free_target(target: Path) -> Path:
    """The file an export to `target` would write now: `target`, or `name-N.ext` when taken."""
    n = 0
    while numbered(target, n).exists() and n < 1000:
        n += 1
    return numbered(target, n)


def target_note(target: Path) -> str:
    """What the export prompt says it will write: the file, or the new name when it exists."""
    free = free_target(target)
    if free == target:
        return f"writes {target}"
    return f"{target.name} exists (kept): writes {free}"


def export_note(count: int, asked: Path, written: Path) -> str:
    """'3 runs written to /x/runs-1.csv (runs.csv exists: kept)'."""
    text = f"{count} run{'s' if count != 1 else ''} written to {written}"
    if written != asked:
        text += f" ({asked.name} exists: kept)"
    return text


def default_export_name(fmt: str) -> str:
    return f"rocm-console-results.{fmt}"


def stored_power_chart(run: StoredRun) -> tuple[list[Trace], list[tuple[float, float]], str]:
    """A stored run's GPU power over the run (one trace per physical GPU, seconds from its start)
    and its throttle episodes, marked on the chart; the title says what a broken record lacks."""
    try:
        record = RunTelemetry.from_json(run.telemetry)
    except TelemetryError as exc:
        return [], [], f"GPU power W · telemetry unreadable: {exc}"
    traces = []
    for g in record.gpus:
        times = [float(t) for t in g.column("t") if t is not None]
        traces.append(Trace(f"GPU {g.label}", times, list(g.column("power_w"))[: len(times)]))
    spans = [(e.start, e.end) for e in record.episodes()]
    title = "GPU power W over the run"
    if spans:
        title += f" · throttled {sum(e - s for s, e in spans):.0f}s (red)"
    return traces, spans, title
