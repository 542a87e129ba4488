"""Energy, tokens per joule and throttled share from 1 Hz GPU samples (console/core/energy.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from console.core.energy import (
    SOURCE_COUNTER,
    SOURCE_INTEGRATED,
    SOURCE_MIXED,
    SOURCE_NONE,
    THROTTLE_REASONS,
    PowerSample,
    integrate_power_j,
    per_joule,
    residency_share,
    run_energy,
    samples_from_records,
    throttled_from_names,
    throttled_share,
    window,
)

ROOT = Path(__file__).resolve().parents[2]


def steady(n, watts=500.0, start_mj=1_000_000, t0=100.0):
    """n samples 1 s apart at a constant power, the counter growing by watts joules each second."""
    return [PowerSample(t0 + i, watts, start_mj + i * watts * 1000) for i in range(n)]


def test_counter_energy_of_a_steady_load():
    e = run_energy(steady(11, 500.0))
    assert e.source == SOURCE_COUNTER
    assert e.joules == pytest.approx(5000.0)
    assert e.duration_s == 10 and e.avg_power_w == pytest.approx(500.0) and e.peak_power_w == 500.0
    assert (e.counter_resets, e.integrated_s, e.gap_s) == (0, 0, 0)


def test_the_counter_wins_over_the_power_samples():
    """Power samples that lag or miss a burst do not change counter energy."""
    samples = [PowerSample(0, 100.0, 0), PowerSample(1, 100.0, 400_000), PowerSample(2, 100.0, 500_000)]
    assert run_energy(samples).joules == pytest.approx(500.0)
    assert integrate_power_j(samples) == pytest.approx(200.0)


def test_a_reset_counter_is_filled_from_power_and_marked():
    samples = steady(6, 300.0)
    # the driver reloads between t=102 and t=103: the counter restarts near 0
    samples = samples[:3] + [PowerSample(s.t, s.power_w, s.energy_mj - 50_000_000) for s in samples[3:]]
    samples[3] = PowerSample(samples[3].t, 300.0, 1_200)
    samples[4] = PowerSample(samples[4].t, 300.0, 301_200)
    samples[5] = PowerSample(samples[5].t, 300.0, 601_200)
    e = run_energy(samples)
    assert e.counter_resets == 1
    assert e.source == SOURCE_MIXED and e.integrated_s == 1
    assert e.joules == pytest.approx(1500.0)  # 4 s from the counter + 1 s of integrated power


def test_a_wrapped_counter_is_not_a_reset():
    wrap = 2**32
    samples = [PowerSample(0, 200.0, wrap - 100_000), PowerSample(1, 200.0, 100_000)]
    e = run_energy(samples, wrap_mj=wrap)
    assert e.joules == pytest.approx(200.0) and e.counter_resets == 0 and e.source == SOURCE_COUNTER
    # without wrap_mj the same drop is a reset, filled from power
    e = run_energy(samples)
    assert e.counter_resets == 1 and e.source == SOURCE_INTEGRATED and e.joules == pytest.approx(200.0)


def test_no_counter_means_integrated_power_marked_so():
    samples = [PowerSample(0, 100.0), PowerSample(1, 300.0), PowerSample(3, 300.0)]
    e = run_energy(samples)
    assert e.source == SOURCE_INTEGRATED
    assert e.joules == pytest.approx(200.0 + 600.0) and e.duration_s == 3
    assert e.avg_power_w == pytest.approx(800.0 / 3)


def test_missing_readings_leave_a_gap_not_a_zero():
    samples = [PowerSample(0, None, None), PowerSample(1, None, None), PowerSample(2, 400.0, 5_000)]
    e = run_energy(samples)
    assert e.joules is None and e.source == SOURCE_NONE and e.gap_s == 2
    assert e.avg_power_w is None and e.peak_power_w == 400.0
    assert run_energy([]).joules is None and integrate_power_j([PowerSample(0, 100.0)]) is None


def test_one_missing_counter_reading_is_bridged_by_power():
    samples = steady(5, 250.0)
    samples[2] = PowerSample(samples[2].t, 250.0, None)
    e = run_energy(samples)
    assert e.source == SOURCE_MIXED and e.integrated_s == 2 and e.joules == pytest.approx(1000.0)


def test_samples_out_of_order_or_repeated_do_not_count_twice():
    samples = samples_from_records(
        [
            {"t": 2.0, "power_w": 100.0, "energy_mj": 200_000},
            {"t": 0.0, "power_w": 100.0, "energy_mj": 0},
            {"t": 1.0, "power_w": 100.0, "energy_mj": 100_000},
            {"t": 1.0, "power_w": 100.0, "energy_mj": 100_000},
        ]
    )
    assert [s.t for s in samples] == [0.0, 1.0, 1.0, 2.0]
    assert run_energy(samples).joules == pytest.approx(200.0)


def test_per_joule():
    assert per_joule(1000, 500.0) == 2.0
    assert per_joule(None, 500.0) is None and per_joule(10, None) is None and per_joule(10, 0.0) is None


def test_throttled_share_is_time_weighted():
    samples = [
        PowerSample(0, 700.0, throttled=True),
        PowerSample(3, 700.0, throttled=False),  # throttled for 3 s
        PowerSample(4, 100.0, throttled=None),  # unknown from 4 to 6: not counted
        PowerSample(6, 100.0, throttled=False),
        PowerSample(7, 100.0, throttled=False),
    ]
    assert throttled_share(samples) == pytest.approx(3 / 5)
    assert throttled_share([PowerSample(0, 1.0), PowerSample(1, 1.0)]) is None


def test_throttled_from_decoded_names():
    assert throttled_from_names(["sw_power_cap"]) is True
    assert throttled_from_names(["idle"]) is False and throttled_from_names([]) is False
    assert throttled_from_names(["sync_boost", "app_clocks", "display_clocks"]) is False
    assert throttled_from_names(None) is None
    rec = samples_from_records([{"t": 0, "power_w": 1.0, "clock_event_names": ["hw_thermal"]}])
    assert rec[0].throttled is True


def test_core_and_agent_agree_on_what_throttling_is():
    spec = importlib.util.spec_from_file_location("nvidia_health", ROOT / "console" / "agent" / "nvidia_health.py")
    agent = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(agent)
    assert set(agent.THROTTLING) == THROTTLE_REASONS


def test_residency_share():
    assert residency_share(0, 30e9, 60.0) == pytest.approx(0.5)
    assert residency_share(0, 90e9, 60.0) == 1.0  # capped
    assert residency_share(None, 1, 1.0) is None and residency_share(5, 1, 1.0) is None
    assert residency_share(0, 1, 0) is None


def test_window():
    samples = steady(10)
    assert [s.t for s in window(samples, 102.0, 104.0)] == [102.0, 103.0, 104.0]
