"""The seeds' published numbers (reference_numbers.toml) and which of them match a run."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from console.core.errors import ProfileError
from console.core.results.build import full_setup
from console.core.results.display import STAT_KEY_RE, SUMMARY_LABELS, model_name
from console.core.results.record import CONTEXT_KEYS, StoredRun, as_number


@dataclass(frozen=True)
class ReferenceRow:
    """Published numbers from the seeds for one configuration.

    kind: "serving" (a result block of benchmark_serving.py / vllm bench serve),
    "offline_throughput" (benchmark_throughput.py) or "offline_latency"
    (benchmark_latency.py); serving rows are compared with serving runs, the
    offline ones with `bench latency|throughput` runs.
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
    published: str | None = None  # when the seed published the numbers (YYYY-MM-DD), when known
    metrics: dict = field(default_factory=dict, hash=False)
    source: str = ""


_REF_KINDS = ("serving", "offline_throughput", "offline_latency")
_REF_FIELDS: dict[str, str] = {
    "seed": "str",
    "section": "str",
    "kind": "kind",
    "gpu": "str",
    "model": "str",
    "tp": "int",
    "client": "str",
    "precision": "str",
    "quantization": "str",
    "dataset": "str",
    "input_len": "int",
    "output_len": "int",
    "num_prompts": "int",
    "max_concurrency": "int",
    "request_rate": "rate",
    "batch_size": "int",
    "max_num_seqs": "int",
    "serve_args": "strlist",
    "note": "str",
    "published": "str",
    "metrics": "metrics",
}
_REF_REQUIRED = ("seed", "section", "kind", "gpu", "model", "tp", "metrics")
_REF_METRIC_KEYS = frozenset(set(SUMMARY_LABELS) | {"input_sequence_throughput"}) - {"max_concurrency", "request_rate"}


def _valid_metric_key(key: str) -> bool:
    return key in _REF_METRIC_KEYS or bool(STAT_KEY_RE.match(key))


def load_reference_numbers(path: str | Path) -> tuple[ReferenceRow, ...]:
    """Read profiles/reference_numbers.toml: `[reference.<id>]` tables with a
    `metrics` sub-table. Strict: an unknown key, a wrong type or a missing key is
    a ProfileError naming the file, the table and the key."""
    from console.core.toml_source import TomlContext, parse_toml, read_text  # shared TOML errors

    path = Path(path)
    file = str(path)
    ctx = TomlContext(file, read_text(path, file))
    data = parse_toml(ctx)
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
                raise ctx.error(
                    table + ("metrics",),
                    (metric,),
                    "unknown metric (use the result JSON's keys, e.g. output_throughput, median_ttft_ms)",
                )
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


def _gpu_tp_unverified(run: StoredRun, row: ReferenceRow) -> list[str] | None:
    """The GPU and TP checks every reference kind shares: None when the run records a
    GPU or TP that disagrees with the row, else the keys the run does not record."""
    unverified: list[str] = []
    gpu = run.context.get("gpu_model")
    if gpu:
        if row.gpu.casefold() not in str(gpu).casefold():
            return None
    else:
        unverified.append("gpu")
    tp = _run_tp(run)
    if tp is None:
        unverified.append("tp")
    elif tp != row.tp:
        return None
    return unverified


def reference_matches(run: StoredRun, reference_rows: Iterable[ReferenceRow]) -> list[ReferenceMatch]:
    """The serving reference rows for the same configuration as the run, best first.

    Required: the same model (by its last path part, case-insensitive: a local
    path matches the hub id) and the same max concurrency or request rate. Then
    every other field the row names must equal the run's where the run records
    it (GPU model, TP from the serve flags, --quantization, dataset, lengths);
    fields the run does not record are listed in `unverified`.
    """
    model = model_name(run.setup.get("model"))
    if model is None:
        return []
    if run.context.get("run_kind") in ("latency", "throughput"):
        return _offline_matches(run, model, reference_rows)
    out: list[ReferenceMatch] = []
    for row in reference_rows:
        if row.kind != "serving" or (model_name(row.model) or "").casefold() != model.casefold():
            continue
        if row.max_concurrency is not None and run.setup.get("max_concurrency") != row.max_concurrency:
            continue
        if row.request_rate is not None and as_number(run.setup.get("request_rate")) != row.request_rate:
            continue
        if row.max_concurrency is None and row.request_rate is None:
            continue
        unverified = _gpu_tp_unverified(run, row)
        if unverified is None:
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


def _offline_matches(run: StoredRun, model: str, rows: Iterable[ReferenceRow]) -> list[ReferenceMatch]:
    """Offline rows of the run's kind for the same model, TP, lengths and (latency)
    batch size; the GPU must agree where the run records it."""
    kind = "offline_" + str(run.context.get("run_kind"))
    out: list[ReferenceMatch] = []
    for row in rows:
        if row.kind != kind or (model_name(row.model) or "").casefold() != model.casefold():
            continue
        unverified = _gpu_tp_unverified(run, row)
        if unverified is None:
            continue
        keys = ("input_len", "output_len", "batch_size") if kind == "offline_latency" else ("input_len", "output_len")
        if any(getattr(row, k) is not None and run.setup.get(k) != getattr(row, k) for k in keys):
            continue
        out.append(ReferenceMatch(row, tuple(unverified)))
    out.sort(key=lambda m: len(m.unverified))
    return out


def reference_as_run(row: ReferenceRow) -> StoredRun:
    """A reference row as a (never stored) run, to sit in a comparison as a column."""
    context = dict.fromkeys(CONTEXT_KEYS)
    context.update(
        {
            "gpu_model": row.gpu,
            "serve_args": list(row.serve_args) or None,
            "tp": row.tp,
            "reference": f"seed {row.seed}: {row.section}",
            "published": row.published,
            "run_kind": row.kind.removeprefix("offline_") if row.kind != "serving" else None,
        }
    )
    setup = full_setup(
        {
            "model": row.model,
            "dataset": row.dataset,
            "input_len": row.input_len,
            "output_len": row.output_len,
            "num_prompts": row.num_prompts,
            "request_rate": row.request_rate,
            "max_concurrency": row.max_concurrency,
            **({"batch_size": row.batch_size} if row.batch_size is not None else {}),
        }
    )
    return StoredRun(
        id=f"ref:{row.id}",
        created=0.0,
        origin="reference",
        source=row.source or None,
        label=f"seed {row.seed}" + (f" {row.precision}" if row.precision else "") + f" TP{row.tp}",
        context=context,
        setup=setup,
        metrics=dict(row.metrics),
        result=None,
        live=None,
        fingerprint="",
    )


def pick_references(runs: Iterable[StoredRun], reference_rows: Sequence[ReferenceRow]) -> list[ReferenceMatch]:
    """The reference rows for the runs' configurations: every exact match, else the best three,
    each row once (what `results compare --reference` and the TUI's comparison show)."""
    picked: dict[str, ReferenceMatch] = {}
    for run in runs:
        matches = reference_matches(run, reference_rows)
        exact = [m for m in matches if m.exact]
        for match in exact or matches[:3]:
            picked.setdefault(match.row.id, match)
    return list(picked.values())
