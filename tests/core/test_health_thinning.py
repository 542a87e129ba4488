"""A GPU that throttles differs at every reading (its residency counters), so its history would
keep an hour of readings (the ECC window): 360 at 10 s, for each such GPU of a fleet. The
tracker drops the middle of a throttling stretch once it left the throttle window
(HealthTracker._thin); it must judge exactly as the whole history does."""

from __future__ import annotations

import random
from dataclasses import replace

from console.core.health import GpuFault, HealthReading, HealthRules, HealthTracker, evaluate
from tests.core.test_events_carried import reading as carried_reading

RULES = HealthRules(ecc_window=3600.0, throttle_window=60.0, fault_window=86400.0)


def reading(t: float, throttled_s: float, *, ecc: int = 0, narrow: bool = False, faults=()) -> HealthReading:
    """A GPU at its power cap (the reasons say so at every reading) whose energy counter moves."""
    base = carried_reading(t, throttled_s=throttled_s, narrow=narrow, faults=faults)
    return replace(base, ecc_correctable=ecc, throttle_reasons=("power",), energy_j=t * 700.0)


def test_a_gpu_throttling_for_two_hours_keeps_a_window_of_readings_and_judges_as_all_of_them():
    for seed in range(12):
        pick = random.Random(seed)
        tracker = HealthTracker(RULES)
        every: list[HealthReading] = []
        t, throttled_s, ecc, narrow = 1000.0, 0.0, 0, False
        for step in range(720):  # two hours at 10 s
            t += 10.0
            throttled_s += pick.choice((2.0, 5.0, 10.0))  # at its power cap part of every interval
            if pick.random() < 0.01:
                ecc += 1  # a correctable ECC error now and then: the rule counts an hour of them
            if pick.random() < 0.01:
                narrow = not narrow
            faults = (GpuFault("reset", t),) if pick.random() < 0.005 else ()
            new = reading(t, throttled_s, ecc=ecc, narrow=narrow, faults=faults)
            every.append(new)
            horizon = [r for r in every if r.t > t - RULES.history_s - 10.0]
            got = tracker.add(new)
            want = evaluate(horizon, RULES, [f for r in every for f in r.faults])
            assert got == want, (seed, step)
        # what is kept: the last minute, the readings where ECC or the link moved, the news
        kept = tracker.readings
        assert len(kept) < 100, (seed, len(kept))
        assert [r.t for r in kept if r.faults] == [r.t for r in every[-360:] if r.faults]
        assert kept[-7:] == tuple(every[-7:])  # the throttle window and its base, untouched


def test_the_reading_where_the_counters_stopped_is_kept():
    tracker = HealthTracker(RULES)
    t = 1000.0
    for throttled_s in (10.0, 20.0, 30.0, 40.0, 50.0, 60.0):
        t += 10.0
        tracker.add(reading(t, throttled_s))
    stopped = t
    for _ in range(30):  # the counters stop moving (the energy counter still moves: NVIDIA)
        t += 10.0
        tracker.add(reading(t, 60.0))
    times = [r.t for r in tracker.readings]
    assert stopped in times and times[-1] == t  # the detail's "since" still finds the stop
    assert len(times) <= 12, times
