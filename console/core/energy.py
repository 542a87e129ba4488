"""Energy and throttling of a run from its 1 Hz GPU samples.

A benchmark keeps, per physical GPU, samples of power (W), the GPU's energy
counter (mJ, where the GPU has one) and whether a throttling reason was set.
From them:

- ``run_energy``: joules from the energy counter's deltas.  A counter that goes
  backwards was reset (driver reload, GPU reset) unless ``wrap_mj`` says it
  wrapped; such an interval, and one where a counter reading is missing, is
  filled from the trapezoid of the power samples and the result says so
  (``source``, ``integrated_s``).  With no counter at all the energy is the
  integrated power, marked ``integrated_power``.
- ``per_joule``: output tokens (or any work count) per joule.
- ``throttled_share``: the share of the sampled time spent throttled (each
  sample's state held until the next sample), and ``residency_share`` from an
  accumulated residency counter (ns) where the GPU keeps one.

Measured on a real H100 (tests/fixtures/hardware/h100-nvml-health-2026-11-26.json):
over 79 s at the 700 W cap the counter gave 55132 J and the trapezoid of the
1 Hz power readings 54880 J (-0.46 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

# Clock event reasons (docs/nvidia.md) that mean a busy GPU was held back;
# idle, application/display clock settings and sync boost are not throttling.
THROTTLE_REASONS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake", "board_limit", "reliability"}
)

SOURCE_COUNTER = "counter"
SOURCE_INTEGRATED = "integrated_power"
SOURCE_MIXED = "counter+integrated_power"
SOURCE_NONE = "none"


@dataclass(frozen=True)
class PowerSample:
    """One GPU at one instant: ``t`` in seconds, power in W, the energy counter in mJ."""

    t: float
    power_w: float | None
    energy_mj: float | None = None
    throttled: bool | None = None


@dataclass(frozen=True)
class RunEnergy:
    joules: float | None
    source: str  # SOURCE_*: where the joules came from
    duration_s: float  # seconds the joules cover
    avg_power_w: float | None  # joules / duration_s
    peak_power_w: float | None  # highest power sample
    counter_resets: int  # times the counter went backwards (not a wrap)
    integrated_s: float  # seconds whose energy is integrated power
    gap_s: float  # seconds with neither a counter delta nor two power samples


def throttled_from_names(names: Iterable[str] | None) -> bool | None:
    """True when a throttling reason is among the decoded names; None when unknown."""
    if names is None:
        return None
    return any(name in THROTTLE_REASONS for name in names)


def samples_from_records(records: Iterable[Mapping[str, Any]]) -> list[PowerSample]:
    """PowerSamples from the agent's run-sample records (``t``, ``power_w``, ``energy_mj``, ``throttled``)."""
    out = []
    for r in records:
        throttled = r.get("throttled")
        if throttled is None and r.get("clock_event_names") is not None:
            throttled = throttled_from_names(r["clock_event_names"])
        out.append(PowerSample(float(r["t"]), r.get("power_w"), r.get("energy_mj"), throttled))
    return sorted(out, key=lambda s: s.t)


def window(samples: Sequence[PowerSample], start: float, end: float) -> list[PowerSample]:
    """The samples taken from ``start`` to ``end`` (inclusive)."""
    return [s for s in samples if start <= s.t <= end]


def _trapezoid(a: PowerSample, b: PowerSample) -> float | None:
    if a.power_w is None or b.power_w is None:
        return None
    return (b.t - a.t) * (a.power_w + b.power_w) / 2.0


def integrate_power_j(samples: Sequence[PowerSample]) -> float | None:
    """Trapezoid of the power samples (J); None with fewer than two intervals' worth of power."""
    total, covered = 0.0, False
    for a, b in zip(samples, samples[1:]):
        if b.t <= a.t:
            continue
        part = _trapezoid(a, b)
        if part is not None:
            total += part
            covered = True
    return total if covered else None


def run_energy(samples: Sequence[PowerSample], wrap_mj: float | None = None) -> RunEnergy:
    """Energy over the samples (sorted by time), from the counter first and power where it must."""
    counter_j = integrated_j = 0.0
    counter_s = integrated_s = gap_s = 0.0
    resets = 0
    for a, b in zip(samples, samples[1:]):
        dt = b.t - a.t
        if dt <= 0:
            continue
        if a.energy_mj is not None and b.energy_mj is not None:
            delta = b.energy_mj - a.energy_mj
            if delta < 0 and wrap_mj and a.energy_mj - b.energy_mj > wrap_mj / 2:
                delta += wrap_mj  # a counter of wrap_mj values rolled over
            if delta >= 0:
                counter_j += delta / 1000.0
                counter_s += dt
                continue
            resets += 1  # went backwards: reset, the interval's energy is unknown to the counter
        part = _trapezoid(a, b)
        if part is None:
            gap_s += dt
        else:
            integrated_j += part
            integrated_s += dt
    covered = counter_s + integrated_s
    if counter_s and integrated_s:
        source = SOURCE_MIXED
    elif counter_s:
        source = SOURCE_COUNTER
    elif integrated_s:
        source = SOURCE_INTEGRATED
    else:
        source = SOURCE_NONE
    joules = counter_j + integrated_j if covered else None
    powers = [s.power_w for s in samples if s.power_w is not None]
    return RunEnergy(
        joules=joules,
        source=source,
        duration_s=covered,
        avg_power_w=joules / covered if joules is not None and covered else None,
        peak_power_w=max(powers) if powers else None,
        counter_resets=resets,
        integrated_s=integrated_s,
        gap_s=gap_s,
    )


def per_joule(count: float | None, joules: float | None) -> float | None:
    """Tokens (or any work count) per joule; None when either is unknown or no energy was used."""
    if count is None or joules is None or joules <= 0:
        return None
    return count / joules


def throttled_share(samples: Sequence[PowerSample]) -> float | None:
    """Share (0..1) of the sampled time spent throttled; each sample's state holds until the next."""
    known = throttled = 0.0
    for a, b in zip(samples, samples[1:]):
        dt = b.t - a.t
        if dt <= 0 or a.throttled is None:
            continue
        known += dt
        if a.throttled:
            throttled += dt
    return throttled / known if known else None


def residency_share(start_ns: float | None, end_ns: float | None, duration_s: float) -> float | None:
    """Share of ``duration_s`` an accumulated residency counter (ns) grew by, capped at 1."""
    if start_ns is None or end_ns is None or duration_s <= 0 or end_ns < start_ns:
        return None
    return min(1.0, (end_ns - start_ns) / 1e9 / duration_s)
