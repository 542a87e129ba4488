"""Baseline suites: what `baseline save` runs and `baseline check` runs again.

A suite is a TOML file under profiles/suites/:

    [suite]
    description = "the tiny model on one GPU"
    repeats = 5                 # per point (3..20); each point runs this many times
    min_effect = 10             # percent: a smaller change never counts
    confidence = 0.99           # of the verdict rule (console/core/baseline/stats.py)

    [serve]
    preset = "tiny"             # a [serve.NAME] of the profile
    set = { max_num_seqs = 8 }  # like `serve start --set`

    [[point]]                   # serving: `vllm bench serve` against the instance
    preset = "tiny"             # a [bench.NAME]; or give the lengths yourself
    concurrency = 4
    num_prompts = 20

    [[point]]                   # offline: `vllm bench throughput` (GPUs free)
    kind = "throughput"         # or "latency"
    input_len = 32
    output_len = 16
    num_prompts = 20

    [accuracy]                  # optional: lm_eval against the instance
    task = "gsm8k"
    limit = 20

Every problem is a SuiteError whose one line names the file, the line, the table
and the key. `check_suite` then holds the names against a profile's presets.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from console.core.baseline._toml import KeyPath, TomlFile, parse_toml, read_toml
from console.core.errors import ProfileError
from console.core.profiles import PROFILES_DIR
from console.core.results.display import STAT_KEY_RE, better
from console.core.serve.argv import apply_overrides

__all__ = [
    "DEFAULT_METRICS",
    "KINDS",
    "SUITES_DIR",
    "AccuracySpec",
    "Suite",
    "SuiteError",
    "SuitePoint",
    "check_suite",
    "load_suite",
    "metric_direction",
    "parse_suite",
    "suite_paths",
]

SUITES_DIR = PROFILES_DIR / "suites"
SERVING, LATENCY, THROUGHPUT = "serving", "latency", "throughput"
KINDS = (SERVING, LATENCY, THROUGHPUT)
DEFAULT_REPEATS = 5
MIN_REPEATS, MAX_REPEATS = 3, 20
DEFAULT_MIN_EFFECT_PCT = 10.0
DEFAULT_ACCURACY_MIN_EFFECT = 0.02
DEFAULT_CONFIDENCE = 0.99

# What a check compares when a point names no metrics: throughput both ways, and
# the latencies a user feels (first token, then the pace of the rest).
DEFAULT_METRICS: Mapping[str, tuple[str, ...]] = {
    SERVING: (
        "output_throughput",
        "request_throughput",
        "median_ttft_ms",
        "p99_ttft_ms",
        "median_itl_ms",
        "median_tpot_ms",
    ),
    LATENCY: ("latency_s", "latency_p99_s"),
    THROUGHPUT: ("throughput_tok_s", "request_throughput"),
}

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+\Z")
_SERVING_SUMMARY = (
    "request_throughput",
    "request_goodput",
    "input_throughput",
    "output_throughput",
    "total_token_throughput",
    "duration",
    "failed",
    "completed",
)
_LATENCY_RE = re.compile(r"^latency(?:_p(?:10|25|50|75|90|99))?_s$")
_THROUGHPUT_METRICS = ("throughput_tok_s", "request_throughput", "duration")

# Point keys by kind (besides name, kind, repeats, metrics); what each becomes in
# the bench preset (`--set` of `bench run`) or the offline preset.
_POINT_KEYS: Mapping[str, tuple[str, ...]] = {
    SERVING: ("preset", "input_len", "output_len", "num_prompts", "concurrency", "rate"),
    LATENCY: ("preset", "input_len", "output_len", "batch_size", "num_iters", "num_iters_warmup"),
    THROUGHPUT: ("preset", "input_len", "output_len", "num_prompts"),
}
_COMMON_POINT_KEYS = ("name", "kind", "repeats", "metrics")
_SERVING_OVERRIDE = {"concurrency": "max_concurrency", "rate": "request_rate"}


class SuiteError(ProfileError):
    """A suite file that cannot be used: ``file:line: [table] key 'k': message``."""


@dataclass(frozen=True, slots=True)
class SuitePoint:
    """One benchmark point, run `repeats` times."""

    name: str
    kind: str  # serving | latency | throughput
    preset: str | None  # [bench.NAME] (serving) or [latency|throughput.NAME] (offline)
    settings: tuple[tuple[str, int | float | None], ...]  # explicit keys, as written (rate None = inf)
    repeats: int
    metrics: tuple[str, ...]
    line: int | None = field(default=None, compare=False)  # of its [[point]] header
    preset_line: int | None = field(default=None, compare=False)

    def setting(self, key: str) -> int | float | None:
        return dict(self.settings).get(key)

    def overrides(self) -> dict[str, str]:
        """The point's keys as `--set` pairs: for `apply_bench_overrides` (serving,
        `concurrency` -> `max_concurrency`, `rate` -> `request_rate`) or
        `apply_offline_overrides` (latency, throughput)."""
        out = {}
        for key, value in self.settings:
            name = _SERVING_OVERRIDE.get(key, key) if self.kind == SERVING else key
            out[name] = "inf" if value is None else _num(value)
        return out


@dataclass(frozen=True, slots=True)
class AccuracySpec:
    """lm_eval against the suite's instance, run `repeats` times."""

    task: str
    repeats: int
    limit: int | None = None
    num_fewshot: int | None = None
    dataset: str | None = None  # a local copy (see `bench accuracy --dataset`)
    metrics: tuple[str, ...] = ()  # () = every score the task reports
    min_effect: float = DEFAULT_ACCURACY_MIN_EFFECT  # absolute, in score units (0..1)


@dataclass(frozen=True, slots=True)
class Suite:
    name: str
    file: str
    serve: str  # the serve preset
    serve_set: tuple[tuple[str, str], ...] = ()  # its overrides, as `serve start --set`
    points: tuple[SuitePoint, ...] = ()
    accuracy: AccuracySpec | None = None
    repeats: int = DEFAULT_REPEATS
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT
    confidence: float = DEFAULT_CONFIDENCE
    description: str = ""
    serve_line: int | None = field(default=None, compare=False)  # of `preset` in [serve]

    def point(self, name: str) -> SuitePoint | None:
        return next((p for p in self.points if p.name == name), None)

    def plan(self) -> tuple[tuple[SuitePoint, int], ...]:
        """(point, repeat number from 1) in run order: round-robin over the points
        of one phase (serving, then offline), so slow drift during a run spreads
        over every point's repeats and shows in their noise instead of biasing
        the last point. Offline points need the GPUs free, so they come after the
        serving ones (the instance stopped). The accuracy runs, which need the
        instance, belong at the end of the serving phase."""
        out: list[tuple[SuitePoint, int]] = []
        for phase in ((SERVING,), (LATENCY, THROUGHPUT)):
            points = [p for p in self.points if p.kind in phase]
            for r in range(1, max((p.repeats for p in points), default=0) + 1):
                out.extend((p, r) for p in points if r <= p.repeats)
        return tuple(out)


def metric_direction(metric: str) -> str | None:
    """ "higher" or "lower" is better for this metric; None when unknown."""
    return better(metric)


def suite_paths(folder: Path = SUITES_DIR) -> list[Path]:
    """The suite files in folder, by name."""
    try:
        return sorted(p for p in folder.glob("*.toml") if p.is_file())
    except OSError:
        return []


def load_suite(path: str | Path) -> Suite:
    """Read and check a suite file; raises SuiteError (one line) on any problem."""
    doc = read_toml(path, SuiteError)
    return _build(doc, Path(path).stem)


def parse_suite(text: str, file: str = "<suite>") -> Suite:
    """A suite from TOML text (file names it in errors)."""
    return _build(parse_toml(file, text, SuiteError), Path(file).stem or "suite")


# ---------------------------------------------------------------- building


class _Bad(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _build(doc: TomlFile, default_name: str) -> Suite:
    data = doc.data

    def fail(table: KeyPath, key: str | None, message: str) -> SuiteError:
        return doc.error(SuiteError, table, key, message)

    known = ("suite", "serve", "point", "accuracy")
    for key in data:
        if key not in known:
            raise fail((), key, _unknown(key, known, "table"))
    head = _table(data, "suite", fail, required=False)
    _only(head, ("name", "description", "repeats", "min_effect", "confidence"), ("suite",), fail)
    name = _get(head, "name", _name, ("suite",), fail) or default_name
    if not _NAME_RE.match(name):
        raise fail(("suite",), "name" if "name" in head else None, f"suite name {name!r}: use letters, digits, _ . -")
    repeats = _get(head, "repeats", _repeats, ("suite",), fail) or DEFAULT_REPEATS
    min_effect = _get(head, "min_effect", _percent, ("suite",), fail)
    confidence = _get(head, "confidence", _confidence, ("suite",), fail)
    description = _get(head, "description", _text, ("suite",), fail) or ""

    serve = _table(data, "serve", fail, required=True)
    _only(serve, ("preset", "set"), ("serve",), fail)
    preset = _get(serve, "preset", _name, ("serve",), fail)
    if preset is None:
        raise fail(("serve",), "preset", "missing: the serve preset the suite starts")
    serve_set = _serve_set(serve.get("set"), fail)

    raw_points = data.get("point", [])
    if not isinstance(raw_points, list):
        raise fail((), "point", "expected [[point]] tables")
    points: list[SuitePoint] = []
    for i, body in enumerate(raw_points):
        table: KeyPath = ("point", i)
        if not isinstance(body, Mapping):
            raise fail(table, None, "expected a table")
        point = _point(body, table, repeats, fail, doc.line)
        clash = next((p for p in points if p.name == point.name), None)
        if clash is not None:
            key = "name" if "name" in body else None
            raise fail(table, key, f"a second point named {point.name!r}: give each point its own name")
        points.append(point)

    accuracy = None
    if "accuracy" in data:
        accuracy = _accuracy(_table(data, "accuracy", fail, required=True), repeats, fail)
    if not points and accuracy is None:
        raise fail((), None, "the suite has no [[point]] and no [accuracy]: nothing to measure")
    return Suite(
        name=name,
        file=doc.file,
        serve=preset,
        serve_set=serve_set,
        points=tuple(points),
        accuracy=accuracy,
        repeats=repeats,
        min_effect_pct=DEFAULT_MIN_EFFECT_PCT if min_effect is None else min_effect,
        confidence=DEFAULT_CONFIDENCE if confidence is None else confidence,
        description=description,
        serve_line=doc.line(("serve", "preset")),
    )


_Fail = Callable[[KeyPath, str | None, str], SuiteError]


def _table(data: Mapping, key: str, fail: _Fail, *, required: bool) -> Mapping:
    if key not in data:
        if required:
            raise fail((), None, f"missing table [{key}]")
        return {}
    value = data[key]
    if not isinstance(value, Mapping):
        raise fail((), key, f"expected a table [{key}]")
    return value


def _only(body: Mapping, keys: Collection[str], table: KeyPath, fail: _Fail) -> None:
    for key in body:
        if key not in keys:
            raise fail(table, key, _unknown(key, keys))


T = TypeVar("T")


def _get(body: Mapping, key: str, check: Callable[[object], T], table: KeyPath, fail: _Fail) -> T | None:
    if key not in body:
        return None
    try:
        return check(body[key])
    except _Bad as exc:
        raise fail(table, key, exc.message) from None


def _serve_set(value: object, fail: _Fail) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise fail(("serve",), "set", "expected a table of flag = value (e.g. { max_num_seqs = 8 })")
    out: list[tuple[str, str]] = []
    for key, raw in value.items():
        if isinstance(raw, bool):
            text = "true" if raw else "false"
        elif isinstance(raw, (int, float)) and not (isinstance(raw, float) and not math.isfinite(raw)):
            text = _num(raw)
        elif isinstance(raw, str) and raw.strip():
            text = raw
        else:
            raise fail(("serve", "set"), key, f"expected a string, number or boolean, got {_describe(raw)}")
        try:  # the same checks as `serve start --set` (flag name, flags the console owns, secrets)
            apply_overrides((), {key: text})
        except ValueError as exc:
            raise fail(("serve", "set"), key, str(exc).removeprefix("--set ")) from None
        out.append((key, text))
    return tuple(out)


def _point(
    body: Mapping, table: KeyPath, default_repeats: int, fail: _Fail, line: Callable[[KeyPath], int | None]
) -> SuitePoint:
    kind = _get(body, "kind", _kind, table, fail) or SERVING
    allowed = _POINT_KEYS[kind]
    for key in body:
        if key in _COMMON_POINT_KEYS or key in allowed:
            continue
        owner = [k for k in KINDS if key in _POINT_KEYS[k]]
        if owner:
            raise fail(table, key, f"not a key of a {kind} point (it belongs to {' / '.join(owner)} points)")
        raise fail(table, key, _unknown(key, (*_COMMON_POINT_KEYS, *allowed)))
    preset = _get(body, "preset", _name, table, fail)
    settings: list[tuple[str, int | float | None]] = []
    for key in allowed:
        if key == "preset" or key not in body:
            continue
        check = _rate if key == "rate" else _int_at_least(0 if key == "num_iters_warmup" else 1)
        settings.append((key, _get(body, key, check, table, fail)))
    given = dict(settings)
    if preset is None:
        missing = [k for k in ("input_len", "output_len") if k not in given]
        if missing:
            raise fail(table, None, f"no preset and no {' / '.join(missing)}: name a preset or give the lengths")
    repeats = _get(body, "repeats", _repeats, table, fail) or default_repeats
    metrics = _get(body, "metrics", _metric_list(kind), table, fail) or DEFAULT_METRICS[kind]
    index = int(table[1])
    name = _get(body, "name", _name, table, fail) or _default_name(kind, preset, given, index)
    if not _NAME_RE.match(name):
        raise fail(table, "name", f"point name {name!r}: use letters, digits, _ . -")
    return SuitePoint(
        name,
        kind,
        preset,
        tuple(settings),
        repeats,
        tuple(metrics),
        line=line(table),
        preset_line=line((*table, "preset")) if preset is not None else None,
    )


def _default_name(kind: str, preset: str | None, given: Mapping, index: int) -> str:
    """tiny-c4, serving-c8-r2, throughput-3: the preset (or the kind) and the load."""
    load = []
    if "concurrency" in given:
        load.append(f"c{given['concurrency']}")
    if "rate" in given:
        load.append("rinf" if given["rate"] is None else f"r{_num(given['rate'])}")
    if preset:
        return "-".join([preset, *load])
    return "-".join([kind, *load]) if load else f"{kind}-{index + 1}"


def _accuracy(body: Mapping, default_repeats: int, fail: _Fail) -> AccuracySpec:
    table: KeyPath = ("accuracy",)
    _only(body, ("task", "limit", "num_fewshot", "dataset", "repeats", "metrics", "min_effect"), table, fail)
    task = _get(body, "task", _name, table, fail)
    if task is None:
        raise fail(table, "task", "missing: the lm_eval task (e.g. gsm8k)")
    metrics = _get(body, "metrics", _accuracy_metrics(task), table, fail) or ()
    min_effect = _get(body, "min_effect", _score, table, fail)
    return AccuracySpec(
        task=task,
        repeats=_get(body, "repeats", _accuracy_repeats, table, fail) or default_repeats,
        limit=_get(body, "limit", _int_at_least(1), table, fail),
        num_fewshot=_get(body, "num_fewshot", _int_at_least(0), table, fail),
        dataset=_get(body, "dataset", _text, table, fail),
        metrics=tuple(metrics),
        min_effect=DEFAULT_ACCURACY_MIN_EFFECT if min_effect is None else min_effect,
    )


# ---------------------------------------------------------------- value checks


def _describe(value: object) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, (int, float)):
        return f"number {value!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "a table"
    return type(value).__name__


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_at_least(low: int) -> Callable[[object], int]:
    def check(value: object) -> int:
        if not _is_int(value):
            raise _Bad(f"expected an integer, got {_describe(value)}")
        assert isinstance(value, int)
        if value < low:
            raise _Bad(f"must be at least {low}, got {value}")
        return value

    return check


def _repeats(value: object) -> int:
    if not _is_int(value):
        raise _Bad(f"expected an integer, got {_describe(value)}")
    assert isinstance(value, int)
    if not MIN_REPEATS <= value <= MAX_REPEATS:
        raise _Bad(
            f"must be {MIN_REPEATS} to {MAX_REPEATS}, got {value} "
            "(the noise of a point is measured from its repeats: fewer than 3 cannot tell noise from a change)"
        )
    return value


def _accuracy_repeats(value: object) -> int:
    """Greedy decoding scores the same questions the same way every time: 2 repeats a side
    are enough to show that (and to see a server that is not deterministic)."""
    if not _is_int(value):
        raise _Bad(f"expected an integer, got {_describe(value)}")
    assert isinstance(value, int)
    if not 2 <= value <= MAX_REPEATS:
        raise _Bad(f"must be 2 to {MAX_REPEATS}, got {value} (a score needs a second repeat to show it stays put)")
    return value


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Bad(f"expected a number, got {_describe(value)}")
    return float(value)


def _percent(value: object) -> float:
    number = _number(value)
    if not 0 <= number < 100:
        raise _Bad(f"a percentage from 0 to below 100, got {_num(number)}")
    return number


def _confidence(value: object) -> float:
    number = _number(value)
    if not 0.8 <= number <= 0.999:
        raise _Bad(f"expected 0.8 to 0.999, got {_num(number)}")
    return number


def _score(value: object) -> float:
    number = _number(value)
    if not 0 <= number <= 1:
        raise _Bad(f"an accuracy difference from 0 to 1 (0.02 = 2 points), got {_num(number)}")
    return number


def _rate(value: object) -> float | None:
    if isinstance(value, str) and value.strip().casefold() == "inf":
        return None
    if isinstance(value, float) and math.isinf(value) and value > 0:
        return None
    if isinstance(value, str):
        raise _Bad(f'expected requests per second or "inf", got {_describe(value)}')
    number = _number(value)
    if number <= 0:
        raise _Bad(f"must be above 0, got {_num(number)}")
    return number


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise _Bad(f"expected a string, got {_describe(value)}")
    return value


def _name(value: object) -> str:
    text = _text(value).strip()
    if not text:
        raise _Bad("empty")
    return text


def _kind(value: object) -> str:
    text = _text(value)
    if text not in KINDS:
        raise _Bad(f"{text!r} is not one of {', '.join(KINDS)}")
    return text


def _strings(value: object) -> list[str]:
    if not isinstance(value, list) or not value:
        raise _Bad("expected a non-empty array of metric names")
    out: list[str] = []
    for i, item in enumerate(value, 1):
        if not isinstance(item, str) or not item:
            raise _Bad(f"item {i}: expected a metric name, got {_describe(item)}")
        if item in out:
            raise _Bad(f"item {i}: {item!r} is listed twice")
        out.append(item)
    return out


def _metric_list(kind: str) -> Callable[[object], list[str]]:
    def check(value: object) -> list[str]:
        names = _strings(value)
        for i, name in enumerate(names, 1):
            if not _metric_fits(kind, name):
                raise _Bad(f"item {i}: {name!r} is not a metric of a {kind} run ({_metric_hint(kind)})")
        return names

    return check


def _metric_fits(kind: str, name: str) -> bool:
    if better(name) is None:
        return False
    if kind == SERVING:
        return name in _SERVING_SUMMARY or bool(STAT_KEY_RE.match(name))
    if kind == LATENCY:
        return bool(_LATENCY_RE.match(name))
    return name in _THROUGHPUT_METRICS


def _metric_hint(kind: str) -> str:
    if kind == SERVING:
        return "e.g. output_throughput, request_throughput, median_ttft_ms, p99_itl_ms"
    if kind == LATENCY:
        return "latency_s or latency_p10_s ... latency_p99_s"
    return ", ".join(_THROUGHPUT_METRICS)


def _accuracy_metrics(task: str) -> Callable[[object], list[str]]:
    def check(value: object) -> list[str]:
        names = _strings(value)
        for i, name in enumerate(names, 1):
            if not name.startswith(f"{task}_") or name.endswith("_stderr") or better(name) != "higher":
                raise _Bad(f"item {i}: {name!r} is not a score of {task} (e.g. {task}_exact_match_flexible_extract)")
        return names

    return check


def _unknown(key: str, known: Collection[str], what: str = "key") -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown {what} ({hint}known: {', '.join(known)})"


def _num(value: float) -> str:
    """4.0 -> "4", 2.5 -> "2.5"."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# ---------------------------------------------------------------- against a profile


def check_suite(
    suite: Suite,
    *,
    serve_presets: Collection[str],
    bench_presets: Mapping[str, tuple[int, ...]],
    offline_presets: Collection[tuple[str, str]] = (),
) -> None:
    """Hold the suite's preset names against a profile: serve_presets the names of
    its [serve.*]; bench_presets each [bench.*] with its max_concurrency list (a
    sweep needs the point to pick one level); offline_presets (kind, name) pairs.
    Raises SuiteError naming the suite file, line and key."""
    if suite.serve not in serve_presets:
        raise SuiteError(suite.file, "serve", "preset", suite.serve_line, _missing("serve", suite.serve, serve_presets))
    for i, point in enumerate(suite.points):
        table = f"point {i + 1}"
        if point.preset is None:
            continue
        where = point.preset_line
        if point.kind == SERVING:
            if point.preset not in bench_presets:
                raise SuiteError(suite.file, table, "preset", where, _missing("bench", point.preset, bench_presets))
            sweep = bench_presets[point.preset]
            if len(sweep) > 1 and point.setting("concurrency") is None:
                levels = ", ".join(str(c) for c in sweep)
                raise SuiteError(
                    suite.file,
                    table,
                    "preset",
                    where,
                    f"bench preset {point.preset!r} sweeps max_concurrency [{levels}]: "
                    "a point is one load level, give concurrency = N (one point per level)",
                )
        else:
            names = [name for kind, name in offline_presets if kind == point.kind]
            if point.preset not in names:
                raise SuiteError(suite.file, table, "preset", where, _missing(point.kind, point.preset, names))


def _missing(section: str, name: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"no [{section}.{name}] preset in the profile{hint}"
