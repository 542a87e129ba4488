"""A GPU said unchanged (the agent's ``same``) takes the detector's fast path
(EventDetector.carry, HealthTracker.carry): it must judge exactly as a carried reading
through the general path does, and never swallow an event."""

from __future__ import annotations

import random

from console.core.events import EventDetector
from console.core.health import FAIL, OK, WARN, GpuFault, HealthReading, HealthRules, carried

RES = ("power", "socket_thermal")


def reading(t: float, *, throttled_s: float = 0.0, ecc: int = 0, narrow: bool = False, faults=()) -> HealthReading:
    return HealthReading(
        t,
        0,
        "amd",
        ecc_correctable=0,
        ecc_uncorrectable=ecc,
        ecc_deferred=0,
        throttle_reasons=("power",) if throttled_s else (),
        idle=False,
        residency=(("power", throttled_s), ("socket_thermal", 0.0)),
        residency_clock=t,
        pcie_gen=5,
        pcie_gen_max=5,
        pcie_width=8 if narrow else 16,
        pcie_width_max=16,
        faults=faults,
    )


def test_carry_judges_as_the_general_path_over_random_histories():
    rules = HealthRules()
    for seed in range(40):
        pick = random.Random(seed)
        fast, general = EventDetector(rules), EventDetector(rules)
        t, throttled_s, ecc = 1000.0, 0.0, 0
        for step in range(120):
            t += pick.choice((0.0, 5.0, 10.0, 10.0, 10.0))
            if step == 0 or pick.random() < 0.25:
                if pick.random() < 0.3:
                    throttled_s += pick.choice((0.0, 5.0, 10.0))
                if pick.random() < 0.05:
                    ecc += 1
                faults = (GpuFault("reset", t),) if pick.random() < 0.05 else ()
                new = reading(t, throttled_s=throttled_s, ecc=ecc, narrow=pick.random() < 0.1, faults=faults)
                got, want = fast.health("n", new), general.health("n", new)
            else:
                last = general.tracker("n", 0).last
                (got, _), want = fast.carry("n", 0, t), general.health("n", carried(last, t))
            assert got == want, (seed, step)
            a, b = fast.tracker("n", 0), general.tracker("n", 0)
            assert a.verdict == b.verdict and a.readings == b.readings, (seed, step)


def test_a_gpu_said_unchanged_keeps_its_warning_and_clears_and_counts_at_full_readings():
    d = EventDetector()
    assert d.carry("n", 0, 90.0) is None  # nothing read yet: nothing to carry
    d.health("n", reading(100.0))
    [warned] = d.health("n", reading(110.0, narrow=True))
    assert warned.kind == "gpu.health" and d.verdict("n", 0).state == WARN
    assert [d.carry("n", 0, t)[0] for t in (120.0, 130.0, 140.0)] == [[], [], []]
    assert d.verdict("n", 0).state == WARN and d.tracker("n", 0).last.t == 140.0
    [cleared] = d.health("n", reading(150.0))
    assert cleared.message.startswith("health warn -> ok") and d.verdict("n", 0).state == OK
    assert [d.carry("n", 0, t)[0] for t in (160.0, 170.0)] == [[], []]
    events = d.health("n", reading(180.0, ecc=1))
    assert [e.kind for e in events] == ["gpu.ecc", "gpu.health"] and d.verdict("n", 0).state == FAIL
    assert d.carry("n", 0, 190.0)[0] == [] and d.verdict("n", 0).state == FAIL  # no second ECC event


def test_a_throttle_episode_ends_while_the_gpu_is_said_unchanged():
    d = EventDetector()
    d.health("n", reading(100.0))
    starts = d.health("n", reading(110.0, throttled_s=10.0)) + d.health("n", reading(120.0, throttled_s=20.0))
    assert "gpu.throttle_start" in [e.kind for e in starts]
    # the counters stop: the agent says the GPU unchanged, the episode ends after two such readings
    ends = [e for t in (130.0, 140.0, 150.0) for e in d.carry("n", 0, t)[0]]
    assert [e.kind for e in ends if e.kind.startswith("gpu.throttle")] == ["gpu.throttle_end"]
    assert "ended after 20 s" in ends[0].message
