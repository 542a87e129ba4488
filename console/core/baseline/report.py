"""The check report: per point and metric the baseline, now, the change, the noise
band and the verdict; the diff of versions and settings; Markdown and JSON; and
the exit code (1 on any regression, 0 otherwise, 2 for bad input).

Inputs are the stored repeats of each point (one metrics mapping per repeat, None
for a repeat that failed) for the baseline and for the check; the services run
the suite and store them, this module only judges and renders.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from console.core.baseline.diff import Change, NodeVersions, diff_versions
from console.core.baseline.stats import (
    ABSOLUTE,
    IMPROVED,
    REGRESSED,
    RELATIVE,
    SAME,
    UNKNOWN,
    Comparison,
    Rule,
    compare,
)
from console.core.baseline.suite import Suite, metric_direction
from console.core.errors import ConsoleError
from console.core.results.display import metric_label

__all__ = [
    "ACCURACY",
    "EXIT_BAD_INPUT",
    "EXIT_OK",
    "EXIT_REGRESSED",
    "BaselineInputError",
    "CheckReport",
    "MetricResult",
    "PointRuns",
    "build_report",
    "render_markdown",
    "report_to_dict",
    "report_to_json",
    "rule_for",
]

EXIT_OK, EXIT_REGRESSED, EXIT_BAD_INPUT = 0, 1, 2
ACCURACY = "accuracy"  # the kind (and point name) of the suite's lm_eval runs
FORMAT = "rocm-console-baseline-check/1"


class BaselineInputError(ConsoleError):
    """Runs that do not fit the suite (one line); the CLI exits 2."""


@dataclass(frozen=True, slots=True)
class PointRuns:
    """The repeats of one point as stored: each repeat's metrics, or None if it failed."""

    point: str  # the suite point's name; "accuracy" for the lm_eval runs
    kind: str  # serving | latency | throughput | accuracy
    repeats: tuple[Mapping[str, float] | None, ...]

    def values(self, metric: str) -> list[float | None]:
        return [None if r is None else r.get(metric) for r in self.repeats]

    @property
    def failed(self) -> int:
        return sum(1 for r in self.repeats if r is None)


@dataclass(frozen=True, slots=True)
class MetricResult:
    point: str
    kind: str
    comparison: Comparison

    @property
    def verdict(self) -> str:
        return self.comparison.verdict


@dataclass(frozen=True, slots=True)
class CheckReport:
    baseline: str  # the baseline's name
    node: str
    suite: str
    rule: Rule
    results: tuple[MetricResult, ...]
    changes: tuple[Change, ...] = ()
    problems: tuple[str, ...] = ()  # one line each: failed repeats, points missing a side
    saved_at: float | None = None  # when the baseline was saved
    checked_at: float | None = None
    versions_known: bool = True  # False when a side had no versions record

    @property
    def verdict(self) -> str:
        """regressed if any metric is, else improved if any is, else same; unknown
        when no metric could be judged."""
        verdicts = {r.verdict for r in self.results}
        for v in (REGRESSED, IMPROVED):
            if v in verdicts:
                return v
        return SAME if SAME in verdicts else UNKNOWN

    @property
    def exit_code(self) -> int:
        return EXIT_REGRESSED if any(r.verdict == REGRESSED for r in self.results) else EXIT_OK

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.results if r.verdict == verdict)


def rule_for(suite: Suite) -> Rule:
    """The verdict rule with the suite's confidence and minimum effects."""
    return Rule(
        confidence=suite.confidence,
        min_effect=suite.min_effect_pct / 100,
        min_effect_abs=suite.accuracy.min_effect if suite.accuracy else Rule().min_effect_abs,
    )


def _index(runs: Sequence[PointRuns], side: str) -> dict[str, PointRuns]:
    out: dict[str, PointRuns] = {}
    for r in runs:
        if r.point in out:
            raise BaselineInputError(f"the {side} holds point {r.point!r} twice")
        out[r.point] = r
    return out


def build_report(
    suite: Suite,
    baseline: Sequence[PointRuns],
    now: Sequence[PointRuns],
    *,
    name: str,
    node: str,
    before: NodeVersions | None = None,
    after: NodeVersions | None = None,
    saved_at: float | None = None,
    checked_at: float | None = None,
    rule: Rule | None = None,
) -> CheckReport:
    """Judge every metric of every suite point. Raises BaselineInputError when the
    runs do not fit the suite (a point of another kind, a point twice, nothing at all)."""
    rule = rule or rule_for(suite)
    base, cur = _index(baseline, "baseline"), _index(now, "check")
    if not base:
        raise BaselineInputError(f"baseline {name!r} holds no runs")
    if not cur:
        raise BaselineInputError("the check holds no runs")
    expected = {p.name: p.kind for p in suite.points}
    if suite.accuracy is not None:
        expected[ACCURACY] = ACCURACY
    for side, indexed in (("baseline", base), ("check", cur)):
        for point, r in indexed.items():
            if point in expected and r.kind != expected[point]:
                raise BaselineInputError(
                    f"the {side}'s point {point!r} is a {r.kind} run, the suite's is {expected[point]}"
                )
    if not set(base) & set(expected):
        raise BaselineInputError(
            f"baseline {name!r} holds none of suite {suite.name!r}'s points (it has: {', '.join(sorted(base))})"
        )

    results: list[MetricResult] = []
    problems: list[str] = []
    order = [(p.name, p.kind, p.metrics) for p in suite.points]
    if suite.accuracy is not None:
        order.append((ACCURACY, ACCURACY, suite.accuracy.metrics or _scores(suite.accuracy.task, base, cur)))
    for point, kind, metrics in order:
        b, c = base.get(point), cur.get(point)
        for side, found in (("baseline", b), ("check", c)):
            if found is None:
                problems.append(f"{point}: the {side} has no runs of this point")
            elif found.failed:
                problems.append(f"{point}: {found.failed} of {len(found.repeats)} repeats failed in the {side}")
        scale = ABSOLUTE if kind == ACCURACY else RELATIVE
        for metric in metrics:
            direction = metric_direction(metric) or "higher"
            comparison = compare(
                b.values(metric) if b else [],
                c.values(metric) if c else [],
                better=direction,
                metric=metric,
                scale=scale,
                rule=rule,
            )
            if b is None or c is None:
                missing = "baseline" if b is None else "check"
                comparison = _with_reason(comparison, f"the {missing} has no runs of this point")
            elif comparison.verdict in (REGRESSED, IMPROVED):
                comparison = _few_for_tail(comparison, b, c)
            results.append(MetricResult(point, kind, comparison))
    extra = sorted(set(cur) - set(expected))
    if extra:
        problems.append(f"not in the suite, left out: {', '.join(extra)}")
    changes = diff_versions(before, after) if before is not None and after is not None else ()
    return CheckReport(
        baseline=name,
        node=node,
        suite=suite.name,
        rule=rule,
        results=tuple(results),
        changes=changes,
        problems=tuple(problems),
        saved_at=saved_at,
        checked_at=checked_at,
        versions_known=before is not None and after is not None,
    )


def _scores(task: str, *sides: Mapping[str, PointRuns]) -> tuple[str, ...]:
    """Every score of the task either side reports (not the _stderr companions)."""
    names: list[str] = []
    for side in sides:
        runs = side.get(ACCURACY)
        for repeat in runs.repeats if runs else ():
            for key in repeat or {}:
                if key.startswith(f"{task}_") and not key.endswith("_stderr") and key not in names:
                    names.append(key)
    return tuple(names)


def _with_reason(c: Comparison, reason: str) -> Comparison:
    return replace(c, reason=reason)


# A p99 of fewer requests than this is the worst one or two of them: one stall decides it
# (CI, 2026-11-29: p99 TTFT of 48 requests read 92 -> 710 ms on an unchanged node).
TAIL_MIN_REQUESTS = 100
_TAIL_RE = re.compile(r"(?:^|_)p(9\d(?:\.\d+)?)(?:_|$)")


def _few_for_tail(c: Comparison, *sides: PointRuns) -> Comparison:
    """A tail percentile judged from short repeats says so in its reason: the verdict
    stands (the rule saw it), but the user learns why it may not repeat."""
    tail = _TAIL_RE.search(c.metric)
    counts = [r.get("completed") for side in sides for r in side.repeats if r is not None]
    served = [int(n) for n in counts if isinstance(n, (int, float)) and n > 0]
    if tail is None or not served or min(served) >= TAIL_MIN_REQUESTS:
        return c
    return _with_reason(
        c,
        f"{c.reason}; a p{tail.group(1)} of {min(served)} requests is their worst one or two: "
        f"serve {TAIL_MIN_REQUESTS}+ a repeat, or leave it out of the point's metrics",
    )


# ---------------------------------------------------------------- JSON


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _pct(value: float | None, scale: str) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value * 100, 3) if scale == RELATIVE else value


def _metric_dict(r: MetricResult) -> dict[str, Any]:
    c = r.comparison
    relative = c.scale == RELATIVE
    out: dict[str, Any] = {
        "point": r.point,
        "kind": r.kind,
        "metric": c.metric,
        "label": metric_label(c.metric),
        "better": c.better,
        "scale": c.scale,
        "baseline": _finite(c.baseline),
        "now": _finite(c.now),
        "verdict": c.verdict,
        "reason": c.reason,
        "n_baseline": c.n_baseline,
        "n_now": c.n_now,
    }
    if relative:
        out["change_pct"] = _pct(c.change, c.scale)
        out["noise_band_pct"] = _pct(c.noise_band, c.scale)
        out["threshold_pct"] = _pct(c.threshold, c.scale)
        out["interval_pct"] = [_pct(v, c.scale) for v in c.interval] if c.interval else None
    else:
        out["change"] = _finite(c.change)
        out["noise_band"] = _finite(c.noise_band)
        out["threshold"] = _finite(c.threshold)
        out["interval"] = list(c.interval) if c.interval else None
    return out


def report_to_dict(report: CheckReport) -> dict[str, Any]:
    """Strict JSON data: every metric with its `verdict`; the versions diff; the rule."""
    return {
        "format": FORMAT,
        "baseline": report.baseline,
        "node": report.node,
        "suite": report.suite,
        "verdict": report.verdict,
        "exit_code": report.exit_code,
        "counts": {v: report.count(v) for v in (REGRESSED, IMPROVED, SAME, UNKNOWN)},
        "saved_at": report.saved_at,
        "checked_at": report.checked_at,
        "rule": {
            "confidence": report.rule.confidence,
            "resamples": report.rule.resamples,
            "seed": report.rule.seed,
            "min_effect_pct": round(report.rule.min_effect * 100, 6),
            "accuracy_min_effect": report.rule.min_effect_abs,
        },
        "metrics": [_metric_dict(r) for r in report.results],
        "changes": [
            {"kind": c.kind, "key": c.key, "before": c.before, "after": c.after, "line": c.line()}
            for c in report.changes
        ],
        "versions_known": report.versions_known,
        "problems": list(report.problems),
    }


def report_to_json(report: CheckReport) -> str:
    return json.dumps(report_to_dict(report), indent=2, allow_nan=False)


# ---------------------------------------------------------------- Markdown


def _value(value: float | None, scale: str) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if scale == ABSOLUTE:
        return f"{value:.4g}"
    return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:.4g}"


def _change(c: Comparison) -> str:
    if c.change is None:
        return "-"
    if c.scale == RELATIVE:
        return f"{c.change * 100:+.1f} %"
    return f"{c.change:+.4g}"


def _band(c: Comparison) -> str:
    if c.noise_band is None:
        return "-"
    return f"±{c.noise_band * 100:.1f} %" if c.scale == RELATIVE else f"±{c.noise_band:.4g}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _when(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def render_markdown(report: CheckReport) -> str:
    """The report as Markdown: a heading with the verdict, the table, the notes
    behind every verdict that is not `same`, what changed on the node, the rule."""
    lines = [f"# Baseline check: {report.baseline} on {report.node}: {report.verdict}", ""]
    facts = [f"suite {report.suite}"]
    saved, checked = _when(report.saved_at), _when(report.checked_at)
    if saved:
        facts.append(f"baseline saved {saved}")
    if checked:
        facts.append(f"checked {checked}")
    counts = ", ".join(f"{report.count(v)} {v}" for v in (REGRESSED, IMPROVED, SAME, UNKNOWN) if report.count(v))
    lines += [" · ".join(facts) + f" · {counts or 'no metrics'}", ""]
    lines += [
        "| Point | Metric | Baseline | Now | Change | Noise band | Verdict |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in report.results:
        c = r.comparison
        verdict = f"**{c.verdict}**" if c.verdict in (REGRESSED, IMPROVED) else c.verdict
        lines.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in (
                    r.point,
                    metric_label(c.metric),
                    _value(c.baseline, c.scale),
                    _value(c.now, c.scale),
                    _change(c),
                    _band(c),
                    verdict,
                )
            )
            + " |"
        )
    notes = [r for r in report.results if r.verdict != SAME]
    if notes:
        lines += ["", "## Why", ""]
        lines += [f"- {r.point} {r.comparison.metric}: {r.verdict}: {r.comparison.reason}" for r in notes]
    lines += ["", "## What changed on the node", ""]
    if not report.versions_known:
        lines.append("Unknown: the versions and settings of one side were not recorded.")
    elif report.changes:
        lines += [f"- {c.line()}" for c in report.changes]
    else:
        lines.append("Nothing: the same versions and settings as when the baseline was saved.")
    if report.problems:
        lines += ["", "## Problems", ""]
        lines += [f"- {p}" for p in report.problems]
    rule = report.rule
    lines += [
        "",
        "## Rule",
        "",
        f"A metric is regressed (or improved) when the {rule.confidence * 100:g} % bootstrap interval of the "
        "change of the medians lies wholly on the worse (better) side of zero, and the change is larger than "
        f"both the noise band and the minimum effect ({rule.min_effect * 100:g} %; "
        f"{rule.min_effect_abs:g} for accuracy scores). Otherwise it is the same. See docs/baselines.md.",
    ]
    return "\n".join(lines) + "\n"
