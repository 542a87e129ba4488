"""Layout experiments: which partition × TP × replicas layout serves a model best.

An experiment file (TOML, under profiles/experiments/) names a serve preset, a
benchmark preset, the load points and the layouts:

    [experiment]
    name = "llama-3.1-8b-layouts"
    serve = "llama-3.1-8b-fp8"
    bench = "random-4096-512-rate1"
    concurrency = [64, 256]            # the group's total, split over the replicas
    layouts = [
      "SPX tp8 x1",
      "SPX tp1 x8",
      { layout = "CPX-NPS1 tp1 x64", serve = "llama-3.1-8b-fp8-cpx" },
    ]

    [[budget]]
    name = "interactive"
    p99_ttft_ms = 2000
    p99_itl_ms = 50

With ``find_max = true`` instead of concurrency/rate, each layout gets no fixed load
points: the highest load within a budget is searched per layout (`bench find-max`,
console/core/bench/find_max.py), the budget named by ``find_max_budget`` (or the
file's only [[budget]]); ``find_max_by`` (concurrency | rate), ``find_max_start``,
``find_max_max`` and ``find_max_tolerance`` set the search.

Everything is checked before anything starts (`validate`): one line per problem,
naming the file, the layout and the key. `plan_points` gives the runs in order;
`ExperimentState` records what finished so a run can resume after a crash.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

from console.core import bounds, node_json
from console.core.bounded_file import EXPERIMENT_STATE_LIMIT, read_bounded
from console.core.errors import ProfileError
from console.core.model import Profile
from console.core.partition_rules import LOGICAL_PER_PHYSICAL, VALID_NPS, compatibility_refusal
from console.core.toml_source import read_text

__all__ = [
    "Budget",
    "Experiment",
    "ExperimentError",
    "ExperimentState",
    "FindMaxSettings",
    "Layout",
    "Point",
    "load_experiment",
    "parse_layout",
    "plan_points",
    "split_evenly",
    "validate",
]

_LAYOUT_RE = re.compile(
    r"^\s*(?P<compute>[A-Za-z]+)(?:[-/ ](?P<memory>NPS\d))?\s+tp\s*(?P<tp>\d+)\s+[x×*]\s*(?P<replicas>\d+)\s*$",
    re.IGNORECASE,
)
BUDGET_KEYS = {
    f"{stat}_{metric}_ms": (metric, stat)
    for metric in ("ttft", "tpot", "itl", "e2el")
    for stat in ("mean", "median", "p90", "p99")
}
_FIND_MAX_KEYS = {"find_max", "find_max_budget", "find_max_by", "find_max_start", "find_max_max", "find_max_tolerance"}
_EXPERIMENT_KEYS = {
    "name",
    "serve",
    "bench",
    "concurrency",
    "rate",
    "num_prompts",
    "layouts",
    "ready_timeout",
    "restore_partition",
    *_FIND_MAX_KEYS,
}
STATE_VERSION = 1


class ExperimentError(Exception):
    """An experiment that must not start; `problems` holds one line each."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True, slots=True)
class Layout:
    compute: str  # SPX / DPX / QPX / CPX
    memory: str | None  # NPS1 / NPS2 / NPS4; None = leave the node's as it is
    tp: int
    replicas: int
    serve: str  # the serve preset for this layout
    text: str  # as written, for messages

    @property
    def key(self) -> str:
        """A stable id for files and state: spx-tp8-x1, cpx-nps1-tp1-x64."""
        mem = f"-{self.memory.lower()}" if self.memory else ""
        return f"{self.compute.lower()}{mem}-tp{self.tp}-x{self.replicas}"

    @property
    def label(self) -> str:
        mem = f"-{self.memory}" if self.memory else ""
        return f"{self.compute}{mem} tp{self.tp} ×{self.replicas}"


@dataclass(frozen=True, slots=True)
class Budget:
    name: str
    limits: tuple[tuple[str, str, float], ...]  # (metric, stat, max ms)

    def describe(self) -> str:
        return ", ".join(f"{stat} {metric.upper()} ≤ {_ms(v)}" for metric, stat, v in self.limits)


@dataclass(frozen=True, slots=True)
class Experiment:
    name: str
    file: str
    serve: str
    bench: str
    layouts: tuple[Layout, ...]
    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    num_prompts: int | None = None  # per point for the whole group; None = the bench preset's
    budgets: tuple[Budget, ...] = ()
    ready_timeout: float = 1800.0
    find_max: FindMaxSettings | None = None  # set: a search per layout replaces the load points
    restore_partition: bool = True  # at the end, the partition modes the node had before are put back


@dataclass(frozen=True, slots=True)
class FindMaxSettings:
    """`find_max = true`: per layout, the highest load within `budget` (the search's knobs)."""

    budget: Budget
    by: str = "concurrency"  # concurrency | rate
    start: float | None = None  # None: the search's default (1)
    max_load: float | None = None  # None: the search's default
    tolerance: float = 0.10


@dataclass(frozen=True, slots=True)
class Point:
    layout: Layout
    concurrency: int | None  # the group's total
    rate: float | None  # the group's total (req/s)
    find_max: bool = False  # the layout's find-max search, not a fixed load

    @property
    def id(self) -> str:
        if self.find_max:
            return f"{self.layout.key}@find-max"
        load = f"c{self.concurrency}" if self.concurrency is not None else f"r{_num(self.rate or 0)}"
        return f"{self.layout.key}@{load}"

    @property
    def load(self) -> float:
        return float(self.concurrency if self.concurrency is not None else self.rate or 0)


def _ms(v: float) -> str:
    return f"{v / 1000:g} s" if v >= 1000 else f"{v:g} ms"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def split_evenly(total: int, parts: int) -> list[int]:
    """total over parts, the remainder to the first ones: 10 over 4 -> [3, 3, 2, 2]."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def parse_layout(text: str, serve: str) -> Layout:
    """'SPX tp8 x1', 'CPX-NPS1 tp1 ×64' -> Layout; ValueError with what is expected."""
    m = _LAYOUT_RE.match(text)
    if not m:
        raise ValueError(f"expected COMPUTE[-NPS] tpN xR, like 'SPX tp1 x8', got {text!r}")
    memory = m.group("memory")
    return Layout(
        compute=m.group("compute").upper(),
        memory=memory.upper() if memory else None,
        tp=int(m.group("tp")),
        replicas=int(m.group("replicas")),
        serve=serve,
        text=text.strip(),
    )


def load_experiment(path: str | Path) -> Experiment:
    """Read an experiment file. ExperimentError (one line per problem) on what cannot be read."""
    file = str(path)
    try:  # read as profiles are: a UTF-8 BOM dropped, not UTF-8 is file:line
        data = tomllib.loads(read_text(Path(path), file))
    except ProfileError as exc:
        raise ExperimentError([str(exc)]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError([f"{file}: not valid TOML: {exc}"]) from None
    problems: list[str] = []
    for key in data:
        if key not in ("experiment", "budget"):
            problems.append(f"{file}: [{key}]: unknown table (expected [experiment] and [[budget]])")
    exp = data.get("experiment")
    if not isinstance(exp, dict):
        raise ExperimentError([*problems, f"{file}: [experiment]: missing"])
    for key in exp:
        if key not in _EXPERIMENT_KEYS:
            problems.append(f"{file}: [experiment] key '{key}': unknown key ({', '.join(sorted(_EXPERIMENT_KEYS))})")

    def text(key: str, required: bool = True) -> str:
        value = exp.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{file}: [experiment] key '{key}': expected a name, got {value!r}")
            return ""
        return value.strip()

    name = text("name", required=False) or Path(file).stem
    serve = text("serve")
    bench = text("bench")
    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    if "concurrency" in exp:
        values = exp["concurrency"]
        if not isinstance(values, list) or not values or any(type(v) is not int or v < 1 for v in values):
            problems.append(f"{file}: [experiment] key 'concurrency': expected a list of positive integers")
        elif max(values) > bounds.CONCURRENCY:
            problems.append(f"{file}: [experiment] key 'concurrency': {max(values)} is past {bounds.CONCURRENCY}")
        else:
            concurrency = tuple(values)
    if "rate" in exp:
        values = exp["rate"]
        if (
            not isinstance(values, list)
            or not values
            or any(
                isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= bounds.REQUEST_RATE
                for v in values
            )
        ):
            problems.append(
                f"{file}: [experiment] key 'rate': expected a list of request rates (req/s) above 0, at most {bounds.REQUEST_RATE:g}"
            )
        else:
            rates = tuple(float(v) for v in values)
    find_max_on = exp.get("find_max", False)
    if not isinstance(find_max_on, bool):
        problems.append(f"{file}: [experiment] key 'find_max': expected true or false, got {find_max_on!r}")
        find_max_on = False
    if not find_max_on:
        for key in sorted(k for k in _FIND_MAX_KEYS if k != "find_max" and k in exp):
            problems.append(f"{file}: [experiment] key '{key}': only with find_max = true")
    if find_max_on and ("concurrency" in exp or "rate" in exp):
        problems.append(
            f"{file}: [experiment] key 'find_max': a search replaces the load points: drop concurrency/rate"
        )
    elif "concurrency" in exp and "rate" in exp:
        problems.append(f"{file}: [experiment]: give concurrency or rate, not both")
    elif "concurrency" not in exp and "rate" not in exp and not find_max_on:
        problems.append(
            f"{file}: [experiment]: no load points: give concurrency = [...] or rate = [...] (or find_max = true)"
        )
    num_prompts = exp.get("num_prompts")
    if num_prompts is not None and (type(num_prompts) is not int or not 1 <= num_prompts <= bounds.NUM_PROMPTS):
        problems.append(f"{file}: [experiment] key 'num_prompts': expected an integer from 1 to {bounds.NUM_PROMPTS}")
        num_prompts = None
    ready_timeout = exp.get("ready_timeout", 1800.0)
    if isinstance(ready_timeout, bool) or not isinstance(ready_timeout, (int, float)) or ready_timeout <= 0:
        problems.append(f"{file}: [experiment] key 'ready_timeout': expected seconds > 0")
        ready_timeout = 1800.0
    restore_partition = exp.get("restore_partition", True)
    if not isinstance(restore_partition, bool):
        problems.append(f"{file}: [experiment] key 'restore_partition': expected true or false")
        restore_partition = True
    layouts: list[Layout] = []
    raw_layouts = exp.get("layouts")
    if not isinstance(raw_layouts, list) or not raw_layouts:
        problems.append(f'{file}: [experiment] key \'layouts\': expected a list like ["SPX tp8 x1", "SPX tp1 x8"]')
        raw_layouts = []
    for i, item in enumerate(raw_layouts):
        where = f"{file}: layout {i + 1}"
        layout_serve = serve
        if isinstance(item, dict):
            unknown = [k for k in item if k not in ("layout", "serve")]
            if unknown:
                problems.append(f"{where} key '{unknown[0]}': unknown key (layout, serve)")
            if "serve" in item:
                if not isinstance(item["serve"], str) or not item["serve"].strip():
                    problems.append(f"{where} key 'serve': expected a serve preset name")
                else:
                    layout_serve = item["serve"].strip()
            item = item.get("layout")
        if not isinstance(item, str):
            problems.append(f"{where} key 'layout': expected a text like 'SPX tp1 x8', got {item!r}")
            continue
        try:
            layouts.append(parse_layout(item, layout_serve))
        except ValueError as exc:
            problems.append(f"{where} key 'layout': {exc}")
    seen: dict[str, str] = {}
    for layout in layouts:
        if layout.key in seen:
            problems.append(f'{file}: layout "{layout.text}" key \'layout\': the same layout as "{seen[layout.key]}"')
        seen.setdefault(layout.key, layout.text)
    budgets: list[Budget] = []
    raw_budgets = data.get("budget", [])
    if not isinstance(raw_budgets, list):
        problems.append(f"{file}: [budget]: write [[budget]] tables")
        raw_budgets = []
    for i, b in enumerate(raw_budgets):
        bname = str(b.get("name") or f"budget {i + 1}")
        limits = []
        for key, value in b.items():
            if key == "name":
                continue
            if key not in BUDGET_KEYS:
                problems.append(
                    f"{file}: [[budget]] {bname} key '{key}': unknown limit (like p99_ttft_ms, median_itl_ms)"
                )
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                problems.append(f"{file}: [[budget]] {bname} key '{key}': expected milliseconds > 0")
            else:
                metric, stat = BUDGET_KEYS[key]
                limits.append((metric, stat, float(value)))
        if not limits and not any(p.startswith(f"{file}: [[budget]] {bname}") for p in problems):
            problems.append(f"{file}: [[budget]] {bname}: no limit (e.g. p99_ttft_ms = 2000)")
        budgets.append(Budget(bname, tuple(limits)))
    find_max = _find_max_settings(file, exp, budgets, problems) if find_max_on else None
    if problems:
        raise ExperimentError(problems)
    return Experiment(
        name=name,
        file=file,
        serve=serve,
        bench=bench,
        layouts=tuple(layouts),
        concurrency=concurrency,
        rates=rates,
        num_prompts=num_prompts,
        budgets=tuple(budgets),
        ready_timeout=float(ready_timeout),
        find_max=find_max,
        restore_partition=restore_partition,
    )


def _find_max_settings(
    file: str, exp: Mapping[str, object], budgets: Sequence[Budget], problems: list[str]
) -> FindMaxSettings | None:
    """The search's settings of `find_max = true`; a problem line per bad key."""
    where = f"{file}: [experiment] key"
    name = exp.get("find_max_budget")
    budget: Budget | None = None
    known = ", ".join(b.name for b in budgets) or "none"
    if name is not None:
        budget = next((b for b in budgets if b.name == name), None)
        if budget is None:
            problems.append(f"{where} 'find_max_budget': no [[budget]] named {name!r} (known: {known})")
    elif len(budgets) == 1:
        budget = budgets[0]
    elif not budgets:
        problems.append(f"{where} 'find_max': a search needs a latency budget: add a [[budget]] table")
    else:
        problems.append(f"{where} 'find_max_budget': {len(budgets)} budgets ({known}): name the one to search under")
    by = exp.get("find_max_by", "concurrency")
    if by not in ("concurrency", "rate"):
        problems.append(f'{where} \'find_max_by\': expected "concurrency" or "rate", got {by!r}')
        by = "concurrency"

    def load(key: str) -> float | None:
        value = exp.get(key)
        if value is None:
            return None
        limit = bounds.CONCURRENCY if by == "concurrency" else bounds.REQUEST_RATE
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= limit:
            problems.append(f"{where} '{key}': expected a load above 0, at most {limit:g}")
            return None
        if by == "concurrency" and float(value) != int(value):
            problems.append(f"{where} '{key}': a concurrency is a whole number, got {value!r}")
            return None
        return float(value)

    start, top = load("find_max_start"), load("find_max_max")
    if start is not None and top is not None and top < start:
        problems.append(f"{where} 'find_max_max': {top:g} is below find_max_start {start:g}")
    tolerance = exp.get("find_max_tolerance", 0.10)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1:
        problems.append(f"{where} 'find_max_tolerance': expected a fraction between 0 and 1, like 0.1")
        tolerance = 0.10
    if budget is None:
        return None
    return FindMaxSettings(budget, str(by), start, top, float(tolerance))


def validate(
    exp: Experiment,
    profile: Profile | None = None,
    *,
    physical_gpus: int = 8,
    memory_caps: Sequence[str] = (),
    current_memory: str | None = None,
    node: str | None = None,
) -> list[str]:
    """Every reason a layout cannot run on the node: one line each (empty = go).

    physical_gpus/memory_caps/current_memory describe the node (from its snapshot).
    """
    problems: list[str] = []
    presets = {p.name: p for p in profile.serve_presets} if profile is not None else None
    on = f" on {node}" if node else ""
    if profile is not None and not any(b.name == exp.bench for b in profile.bench_presets):
        known = ", ".join(b.name for b in profile.bench_presets) or "none"
        problems.append(f"{exp.file}: [experiment] key 'bench': unknown bench preset {exp.bench!r} (known: {known})")
    for layout in exp.layouts:
        where = f'{exp.file}: layout "{layout.text}"'
        if layout.compute not in VALID_NPS:
            problems.append(
                f"{where} key 'layout': unknown compute partition {layout.compute} ({', '.join(VALID_NPS)})"
            )
            continue
        logical = physical_gpus * LOGICAL_PER_PHYSICAL[layout.compute]
        memory = layout.memory or current_memory
        if memory:
            why = compatibility_refusal(layout.compute, memory, memory_caps)
            if why:
                problems.append(f"{where} key 'layout': {why}")
        if layout.tp < 1 or layout.replicas < 1:
            problems.append(f"{where} key 'layout': tp and replicas must be at least 1")
            continue
        if layout.compute == "CPX" and layout.tp > 1:
            problems.append(f"{where} key 'layout': TP {layout.tp} in CPX: a CPX partition runs TP 1 only")
        elif layout.tp > logical:
            problems.append(
                f"{where} key 'layout': TP {layout.tp} > {logical} GPUs in {layout.compute}{on} "
                f"({physical_gpus} physical × {LOGICAL_PER_PHYSICAL[layout.compute]})"
            )
        elif layout.tp * layout.replicas > logical:
            kind = "partitions" if layout.compute != "SPX" else "GPUs"
            problems.append(
                f"{where} key 'layout': {layout.replicas} replicas of TP {layout.tp} need "
                f"{layout.tp * layout.replicas} {kind}, {layout.compute}{on} has {logical}"
            )
        for load in exp.concurrency:
            if load < layout.replicas:
                problems.append(
                    f"{where} key 'concurrency': {load} is fewer than its {layout.replicas} replicas "
                    "(each replica's client needs at least 1)"
                )
                break
        if presets is not None:
            preset = presets.get(layout.serve)
            key = "serve" if layout.serve == exp.serve else "layout.serve"
            if preset is None:
                known = ", ".join(sorted(presets)) or "none"
                problems.append(f"{where} key '{key}': unknown serve preset {layout.serve!r} (known: {known})")
            elif preset.tp != layout.tp and preset.tp != 1:
                # the layout's tp wins; a preset written for another TP is probably a mistake
                problems.append(
                    f"{where} key '{key}': preset {preset.name} is written for TP {preset.tp}, the layout asks tp{layout.tp}"
                )
    if exp.num_prompts is not None:
        most = max((layout.replicas for layout in exp.layouts), default=1)
        if exp.num_prompts < most:
            problems.append(
                f"{exp.file}: [experiment] key 'num_prompts': {exp.num_prompts} is fewer than the {most} replicas"
            )
    return problems


def plan_points(exp: Experiment) -> list[Point]:
    """Every run in order: per layout (as written), each load point from low to high."""
    points = []
    for layout in exp.layouts:
        if exp.find_max is not None:
            points.append(Point(layout, None, None, find_max=True))
            continue
        for c in sorted(exp.concurrency):
            points.append(Point(layout, c, None))
        for r in sorted(exp.rates):
            points.append(Point(layout, None, r))
    return points


# ---------------------------------------------------------------- state


@dataclass(frozen=True, slots=True)
class ExperimentState:
    """What an experiment run has done so far; saved after every step, so a run resumes.

    done: point id -> the group's result summary (vLLM-style keys, plus per-replica ones);
    failed_layouts: layout key -> reason; events: a short log of what happened.
    """

    experiment: str
    node: str
    done: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    failed_layouts: Mapping[str, str] = field(default_factory=dict)
    current: str | None = None  # the point or step running now
    finished: bool = False
    events: tuple[str, ...] = ()
    file: str | None = None  # the experiment file (for a viewer that was not told)
    planned: int = 0  # points in the plan

    def remaining(self, points: Sequence[Point]) -> list[Point]:
        return [p for p in points if p.id not in self.done and p.layout.key not in self.failed_layouts]

    def with_done(self, point: Point, summary: Mapping[str, object]) -> ExperimentState:
        return replace(
            self,
            done={**self.done, point.id: dict(summary)},
            current=None,
            events=_events(self.events, f"{point.id}: done"),
        )

    def with_layout_failed(self, layout: Layout, reason: str) -> ExperimentState:
        return replace(
            self,
            failed_layouts={**self.failed_layouts, layout.key: reason},
            current=None,
            events=_events(self.events, f"{layout.key}: failed: {reason}"),
        )

    def with_current(self, what: str | None) -> ExperimentState:
        return replace(self, current=what, events=_events(self.events, what) if what else self.events)

    def to_dict(self) -> dict:
        return {
            "version": STATE_VERSION,
            "experiment": self.experiment,
            "node": self.node,
            "done": {k: dict(v) for k, v in self.done.items()},
            "failed_layouts": dict(self.failed_layouts),
            "current": self.current,
            "finished": self.finished,
            "events": list(self.events),
            "file": self.file,
            "planned": self.planned,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> ExperimentState:
        if not isinstance(d, Mapping) or d.get("version") != STATE_VERSION:
            raise ValueError("not an experiment state file of this version")
        done = d.get("done") or {}
        failed = d.get("failed_layouts") or {}
        events = d.get("events") or []
        if not isinstance(done, dict) or not isinstance(failed, dict) or not isinstance(events, list):
            raise ValueError("experiment state file: done/failed_layouts/events have the wrong type")
        return cls(
            experiment=str(d.get("experiment")),
            node=str(d.get("node")),
            done={str(k): dict(v) for k, v in done.items()},
            failed_layouts={str(k): str(v) for k, v in failed.items()},
            current=d.get("current") if isinstance(d.get("current"), str) else None,  # type: ignore[arg-type]
            finished=bool(d.get("finished")),
            events=tuple(str(e) for e in events),
            file=d.get("file") if isinstance(d.get("file"), str) else None,  # type: ignore[arg-type]
            planned=planned if isinstance(planned := d.get("planned"), int) else 0,
        )


MAX_EVENTS = 200


def _events(events: tuple[str, ...], line: str) -> tuple[str, ...]:
    stamped = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}"
    return (*events, stamped)[-MAX_EVENTS:]


def load_state(path: Path, exp: Experiment, node: str) -> ExperimentState:
    """The saved state, or a fresh one; ValueError naming the file if it is not a state file."""
    try:  # bounded: --state can name a FIFO or a device
        text = read_bounded(path, EXPERIMENT_STATE_LIMIT, "state file").decode("utf-8", "replace")
    except FileNotFoundError:
        return ExperimentState(experiment=exp.name, node=node)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    try:  # the safe decoder: a deeply nested file is one line, not a RecursionError
        state = ExperimentState.from_dict(node_json.loads(text, max_chars=EXPERIMENT_STATE_LIMIT))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if state.experiment != exp.name or state.node != node:
        raise ValueError(
            f"{path}: the state of experiment {state.experiment} on {state.node}, not {exp.name} on {node}"
        )
    return state


def save_state(path: Path, state: ExperimentState) -> None:
    """Write atomically: a crash mid-write leaves the previous state, never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state.to_dict(), indent=1), encoding="utf-8")
    tmp.replace(path)
