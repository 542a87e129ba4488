"""The verdict rule: did a metric get worse, better, or stay the same?

Each side (the baseline, the check) is a few repeats of the same run: n = 3..10
numbers on a machine whose results wobble. The rule, per metric:

1. change: the difference of the two medians, in percent of the baseline's median
   (accuracy scores: in points, as an absolute difference);
2. interval: a 99 % percentile bootstrap interval of that change (each side
   resampled with replacement ``resamples`` times from a seeded generator, so the
   same numbers always give the same verdict);
3. noise band: how far apart two medians land by chance alone, from the scatter
   of the repeats: ``t(99 %, n1+n2-2) x 1.2 x s x sqrt(1/n1 + 1/n2)``, with s the
   pooled standard deviation of the repeats and 1.2 the standard error of a median
   of 3 to 10 normal values over that of their mean (1.09 at 4 to
   1.22 at 7; 1.2 keeps the band on the wide side for most counts). Relative
   metrics (speeds, latencies: all positive) take it on the logarithms of the
   repeats, because their noise is a factor (a busy neighbour makes a run 1.5x
   slower), and give it back in percent on the side the change points to;
4. verdict: "regressed" when the whole interval lies on the worse side of zero AND
   the change is larger than both the noise band and the minimum effect
   (10 %; 0.02 for an accuracy score), "improved" the same way on the better side,
   otherwise "same". Fewer than 2 usable repeats on a side: "unknown".

Why both 2 and 3: a bootstrap from 3 to 5 values cannot see how wide the tails
are (at n = 3 it flags every complete separation, 1 time in 10 by chance); the
t-based band is what keeps small samples honest. The minimum effect keeps a
quiet node from reporting a 2 % drift between runs hours apart, which repeats
within one run cannot see. Measured on seeded synthetic data (tests in
tests/core/baseline/test_stats.py, table in docs/baselines.md): identical runs
with CV 10-15 % and 3 to 10 repeats are "same" in about 99.5 % of trials; with 5
repeats a 2x slowdown is "regressed" in every trial at CV 10 % and 97 % at CV 15 %,
a 30 % drop at CV 10 % in 84 % (97 % with 7 repeats). From 5 repeats no rule does
much better at under 1 % false alarms: the optimal t-test at exactly 1 % catches
that 30 % drop 95 % of the time.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

__all__ = [
    "ABSOLUTE",
    "HIGHER",
    "IMPROVED",
    "LOWER",
    "REGRESSED",
    "RELATIVE",
    "SAME",
    "UNKNOWN",
    "VERDICTS",
    "Comparison",
    "Rule",
    "bootstrap_interval",
    "compare",
    "noise_band",
    "t_quantile",
]

HIGHER, LOWER = "higher", "lower"  # which direction is better
RELATIVE, ABSOLUTE = "relative", "absolute"  # change in % of the baseline, or in the metric's units
REGRESSED, IMPROVED, SAME, UNKNOWN = "regressed", "improved", "same", "unknown"
VERDICTS = (REGRESSED, IMPROVED, SAME, UNKNOWN)

# Standard error of the median of 3..10 normal values over that of the mean:
# 1.16 at n=3, 1.09 at 4, 1.20 at 5, 1.13 at 6, 1.22 at 7, 1.17 at 10 (simulated);
# sqrt(pi/2) = 1.25 in the limit.
MEDIAN_SE_FACTOR = 1.2


@dataclass(frozen=True, slots=True)
class Rule:
    """The rule's settings; the defaults are what `baseline check` uses."""

    confidence: float = 0.99  # of the bootstrap interval and of the noise band
    resamples: int = 2000  # bootstrap resamples per side
    seed: int = 20261127  # the bootstrap's generator: same data, same verdict
    min_effect: float = 0.10  # relative metrics: a change below 10 % never counts
    min_effect_abs: float = 0.02  # absolute metrics (accuracy scores in 0..1): 2 points

    def __post_init__(self) -> None:
        if not 0.5 < self.confidence < 1:
            raise ValueError(f"confidence {self.confidence} is not between 0.5 and 1")
        if self.resamples < 100:
            raise ValueError(f"resamples {self.resamples} is below 100")
        if not (self.min_effect >= 0 and self.min_effect_abs >= 0):
            raise ValueError("a minimum effect is negative")

    def floor(self, scale: str) -> float:
        return self.min_effect if scale == RELATIVE else self.min_effect_abs


@dataclass(frozen=True, slots=True)
class Comparison:
    """One metric, baseline against now. Relative metrics give change, interval,
    noise band and threshold as fractions of the baseline median (0.05 = 5 %);
    absolute ones in the metric's units."""

    metric: str
    better: str  # higher | lower
    scale: str  # relative | absolute
    verdict: str  # regressed | improved | same | unknown
    reason: str  # one line: why this verdict
    baseline: float | None = None  # median of the baseline's repeats
    now: float | None = None  # median of the check's repeats
    change: float | None = None
    interval: tuple[float, float] | None = None
    noise_band: float | None = None
    threshold: float | None = None  # max(minimum effect, noise band)
    n_baseline: int = 0
    n_now: int = 0


# ---------------------------------------------------------------- Student's t


def _t_central(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with df degrees of freedom (df a positive
    integer): the closed form in cos/sin of atan(t/sqrt(df)) (Abramowitz & Stegun 26.7)."""
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2:  # odd
        if df == 1:
            return 2 * theta / math.pi
        term = total = c
        for k in range(3, df - 1, 2):
            term *= (k - 1) / k * c * c
            total += term
        return 2 / math.pi * (theta + s * total)
    term = total = 1.0
    for k in range(2, df - 1, 2):
        term *= (k - 1) / k * c * c
        total += term
    return s * total


@functools.lru_cache(maxsize=256)
def t_quantile(confidence: float, df: int) -> float:
    """The t with P(|T| <= t) = confidence (two-sided), by bisection; df >= 1."""
    if df < 1:
        raise ValueError(f"degrees of freedom {df} < 1")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} not in (0, 1)")
    lo, hi = 0.0, 1.0
    while _t_central(hi, df) < confidence:
        hi *= 2
    for _ in range(100):  # 2^-100 of the bracket: far below float precision
        mid = (lo + hi) / 2
        if _t_central(mid, df) < confidence:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# ---------------------------------------------------------------- pieces


def _squares(values: Sequence[float]) -> float:
    if min(values) == max(values):
        return 0.0  # exactly: fmean of equal floats can be off by an ulp
    mean = statistics.fmean(values)
    return math.fsum((v - mean) ** 2 for v in values)


def _pooled_sd(x: Sequence[float], y: Sequence[float]) -> float:
    return math.sqrt((_squares(x) + _squares(y)) / (len(x) + len(y) - 2))


def noise_band(baseline: Sequence[float], now: Sequence[float], confidence: float = 0.99) -> float:
    """How far apart the two medians can land by chance alone, in the metric's
    units (divide by the baseline median for a relative band). Needs >= 2 a side."""
    nx, ny = len(baseline), len(now)
    if nx < 2 or ny < 2:
        raise ValueError("the noise band needs at least 2 repeats on each side")
    t = t_quantile(confidence, nx + ny - 2)
    return t * MEDIAN_SE_FACTOR * _pooled_sd(baseline, now) * math.sqrt(1 / nx + 1 / ny)


@functools.lru_cache(maxsize=64)
def _resampling_plan(nx: int, ny: int, resamples: int, seed: int) -> tuple[tuple[int, int, int, int], ...]:
    """For each resample, where its median sits among the sorted values: (two
    positions in now, two in baseline; equal for an odd count). A resample's
    median is fixed by the positions it draws, so the plan depends only on the
    sizes and the seed, and is drawn once for every metric of that shape."""
    rnd = random.Random(seed).random

    def middle(n: int) -> tuple[int, int]:
        picks = sorted([int(rnd() * n) for _ in range(n)])
        return picks[(n - 1) // 2], picks[n // 2]

    plan = []
    for _ in range(resamples):
        a, b = middle(ny)
        c, d = middle(nx)
        plan.append((a, b, c, d))
    return tuple(plan)


def bootstrap_interval(
    baseline: Sequence[float],
    now: Sequence[float],
    *,
    scale_by: float = 1.0,
    confidence: float = 0.99,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of (median(now) - median(baseline)) / scale_by."""
    x, y = sorted(baseline), sorted(now)
    plan = _resampling_plan(len(x), len(y), resamples, seed)
    diffs = sorted(((y[a] + y[b]) - (x[c] + x[d])) / 2 / scale_by for a, b, c, d in plan)
    tail = (1 - confidence) / 2
    low = diffs[min(resamples - 1, int(math.floor(tail * resamples)))]
    high = diffs[max(0, int(math.ceil((1 - tail) * resamples)) - 1)]
    return low, high


# ---------------------------------------------------------------- the verdict


def _usable(values: Sequence[float | None]) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if math.isfinite(v):
            out.append(float(v))
    return out


def _fmt(value: float, scale: str) -> str:
    if scale == RELATIVE:
        return f"{value * 100:+.1f} %"
    return f"{value:+.4g}"


def _band(value: float, scale: str) -> str:
    return f"±{value * 100:.1f} %" if scale == RELATIVE else f"±{value:.4g}"


def compare(
    baseline: Sequence[float | None],
    now: Sequence[float | None],
    *,
    better: str,
    metric: str = "",
    scale: str = RELATIVE,
    rule: Rule | None = None,
) -> Comparison:
    """The verdict for one metric from the baseline's repeats and the check's.

    Values that are not finite numbers (a failed repeat) are left out; with fewer
    than 2 left on a side the verdict is "unknown" and reason says why.
    """
    if better not in (HIGHER, LOWER):
        raise ValueError(f"better must be {HIGHER!r} or {LOWER!r}, not {better!r}")
    if scale not in (RELATIVE, ABSOLUTE):
        raise ValueError(f"scale must be {RELATIVE!r} or {ABSOLUTE!r}, not {scale!r}")
    rule = rule or Rule()
    x, y = _usable(baseline), _usable(now)
    base = Comparison(metric, better, scale, UNKNOWN, "", n_baseline=len(x), n_now=len(y))
    med_x = statistics.median(x) if x else None
    med_y = statistics.median(y) if y else None
    base = replace(base, baseline=med_x, now=med_y)
    short = [
        f"the {side} has {n} usable repeat{'s' if n != 1 else ''}"
        for side, n in (("baseline", len(x)), ("check", len(y)))
        if n < 2
    ]
    if short:
        return replace(base, reason=" and ".join(short) + ": at least 2 a side are needed")
    assert med_x is not None and med_y is not None
    if scale == RELATIVE:
        if med_x == 0:
            if all(v == 0 for v in x + y):
                return replace(base, verdict=SAME, change=0.0, reason="every repeat is 0 on both sides")
            return replace(base, reason="the baseline's median is 0: no change in percent")
        unit = abs(med_x)
    else:
        unit = 1.0
    change = (med_y - med_x) / unit
    interval = bootstrap_interval(
        x, y, scale_by=unit, confidence=rule.confidence, resamples=rule.resamples, seed=rule.seed
    )
    if scale == RELATIVE and min(x + y) > 0:
        # Speeds and latencies wobble by a factor, not by an amount: a busy neighbour makes a
        # run 1.5x slower, never 200 tok/s slower. The band is taken on their logarithms and
        # given back in percent on the side the change points to.
        log_band = noise_band([math.log(v) for v in x], [math.log(v) for v in y], rule.confidence)
        band = math.expm1(log_band) if change >= 0 else -math.expm1(-log_band)
    else:
        band = noise_band(x, y, rule.confidence) / unit
    floor = rule.floor(scale)
    threshold = max(floor, band)
    out = replace(base, change=change, interval=interval, noise_band=band, threshold=threshold)
    pct = f"{rule.confidence * 100:g} %"
    shown = _fmt(change, scale)
    # The interval must lie wholly on the side the change points to.
    if not (interval[0] > 0 if change > 0 else interval[1] < 0):
        return replace(
            out,
            verdict=SAME,
            reason=f"{shown}: the {pct} interval [{_fmt(interval[0], scale)}, {_fmt(interval[1], scale)}] includes 0",
        )
    if abs(change) <= band:
        return replace(out, verdict=SAME, reason=f"{shown} is within the noise band {_band(band, scale)}")
    if abs(change) <= floor:
        minimum = f"{floor * 100:g} %" if scale == RELATIVE else f"{floor:g}"
        return replace(out, verdict=SAME, reason=f"{shown} is below the minimum effect {minimum}")
    worse = change < 0 if better == HIGHER else change > 0
    verdict = REGRESSED if worse else IMPROVED
    return replace(
        out,
        verdict=verdict,
        reason=(
            f"{shown} is beyond the noise band {_band(band, scale)} and the minimum effect, "
            f"and the {pct} interval [{_fmt(interval[0], scale)}, {_fmt(interval[1], scale)}] excludes 0"
        ),
    )
