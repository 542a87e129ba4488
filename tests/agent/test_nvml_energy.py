"""The NVIDIA sampler's costly counters at a slower cadence (U2), and its energy still the counter's.

On a real H200 one energy counter read costs about 3 ms of CPU and the throttle
residency fields 0.6 ms each, against microseconds for the rest of a tick
(tests/fixtures/hardware/h200-nvml-call-cost-2026-11-29.json).  The sampler reads
the counter at start, every ``ENERGY_EVERY_S`` and at a power step, integrates the
power between; residency comes with the health readings only.  Checked here with
every NVML call counted on the simulated node under a clock the test drives, and
against the real H200's ticks (power and counter each second).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from console.core import energy as en
from tests.agent.test_nvml_agent import inproc  # noqa: F401, F811 - the fixture: a sampler over the counting sim

ROOT = Path(__file__).resolve().parents[2]
HARDWARE = ROOT / "tests" / "fixtures" / "hardware"
sys.path.insert(0, str(ROOT / "console" / "agent"))
import nvml_energy  # noqa: E402

RESIDENCY_IDS = {74, 75, 76, 77, 78, 79, 269, 270, 271}


class Clock:
    """The sampler's clock, moved by the test (from now: the counters' first reads were at start)."""

    def __init__(self):
        self.t = time.monotonic()

    def __call__(self):
        return self.t


def drive(sampler, counting, monkeypatch, ticks, step=1.0, reference=None):
    """``ticks`` ticks ``step`` s apart on the sampler's clock and the simulator's: the calls and
    rows of each, and with ``reference`` (the simulator) GPU 0's counter read beside each tick."""
    clock, sim_t = Clock(), time.time()
    sampler.clock = clock
    per_tick, counters = [], []
    for n in range(ticks):
        clock.t += step
        monkeypatch.setenv("ROCM_CONSOLE_SIM_TIME", repr(sim_t + (n + 1) * step))
        counting.calls.clear()
        sampler.refresh(n)
        rows = sampler.sample()
        per_tick.append((list(counting.calls), rows))
        if reference is not None:
            counters.append(reference.nvmlDeviceGetTotalEnergyConsumption(reference.nvmlDeviceGetHandleByIndex(0)))
    return per_tick, counters


def test_the_energy_counter_is_read_every_30_s_per_gpu_not_every_tick(inproc, monkeypatch):  # noqa: F811
    _, _, sampler, counting, _ = inproc(busy=[])  # steady idle draw: no power step
    ticks, _ = drive(sampler, counting, monkeypatch, 120)
    reads = [calls.count("nvmlDeviceGetTotalEnergyConsumption") for calls, _ in ticks]
    # 8 GPUs, 120 s: one read each per 30 s after the one at start (the GPUs' reads offset by 30/8 s)
    assert 3 * 8 <= sum(reads) <= 4 * 8
    assert max(reads) == 1  # staggered: never the whole node in one tick
    for calls, rows in ticks:
        assert calls.count("nvmlDeviceGetPowerUsage") == 8
        assert all(r["energy_j"] is not None for r in rows if r["power_w"] is not None)
    # the residency counters are not in the tick's field-values call any more
    fields = [c for calls, _ in ticks for c in calls if c == "nvmlDeviceGetFieldValues"]
    assert len(fields) == 8 * 120


def test_the_tick_asks_no_residency_field(inproc, monkeypatch):  # noqa: F811
    _, _, sampler, counting, sim = inproc()
    asked = []
    real = sim.nvmlDeviceGetFieldValues

    def spy(handle, ids):
        asked.extend(ids)
        return real(handle, ids)

    monkeypatch.setattr(sim, "nvmlDeviceGetFieldValues", spy)
    for n in range(5):
        sampler.refresh(n)
        sampler.sample()
    assert asked and not RESIDENCY_IDS & set(asked) and 191 not in asked


def test_residency_is_read_at_the_health_cadence_and_energy_not_twice(inproc, monkeypatch):  # noqa: F811
    agent, _, sampler, counting, _ = inproc(count=2, mig=[])
    spread = agent.HealthSpread(1.0, 10.0)
    residency, energy = 0, 0
    for n in range(40):
        counting.calls.clear()
        sampler.refresh(n)
        sampler.sample()
        entries = agent.health_entries(sampler, spread)
        residency += counting.calls.count("nvmlDeviceGetFieldValues") - 2  # the tick's own: one per GPU
        energy += counting.calls.count("nvmlDeviceGetTotalEnergyConsumption")
        for e in entries or ():
            assert e["nvml"]["residency_ns"] is not None and e["nvml"]["energy_mj"] is not None
    assert residency == 2 * 4  # each GPU's residency once per 10 s health reading
    assert energy == 0  # the health record carries the sampler's figure: the counter is not read again


def test_a_power_step_reads_the_counter_at_once():
    meter = nvml_energy.EnergyMeter(every_s=30.0)
    meter.counter(1_000_000, 0.0, 80.0)
    for t in range(1, 10):
        assert not meter.due(float(t), 80.0)
        meter.power(80.0, float(t))
    assert meter.due(10.0, 690.0)  # idle -> busy: a run starting
    meter.counter(1_720_000, 10.0, 690.0)
    assert not meter.due(11.0, 300.0)  # within STEP_MIN_GAP_S of the last read
    meter.power(300.0, 11.0)
    assert meter.due(13.0, 80.0)  # busy -> idle: the run ended
    meter.counter(2_000_000, 13.0, 80.0)
    # a draw swinging every few seconds reads at most what the credit allows
    reads = 0
    for t in range(14, 134):
        w = 80.0 if t % 4 < 2 else 690.0
        if meter.due(float(t), w):
            meter.counter(2_000_000 + t * 1000, float(t), w)
            reads += 1
        else:
            meter.power(w, float(t))
    assert reads <= 120 // 30 * 2 + 2


def test_the_figure_never_goes_backwards_when_the_counter_lags_the_integral():
    meter = nvml_energy.EnergyMeter(every_s=2.0)
    meter.counter(1_000_000, 0.0, 100.0)
    meter.power(100.0, 1.0)
    assert meter.joules() == pytest.approx(1100.0)
    meter.counter(1_090_000, 2.0, 100.0)  # the counter says 10 J less than the integral
    assert meter.joules() == pytest.approx(1100.0)  # held, not a reset the console would count
    meter.power(100.0, 3.0)
    assert meter.joules() == pytest.approx(1190.0)


def test_run_energy_within_half_a_percent_of_the_counter_on_the_simulator(inproc, monkeypatch):  # noqa: F811
    """A run on a busy simulated GPU, its energy from the samples as the console computes it."""
    _, _, sampler, counting, sim = inproc(busy=[0, 1], mig=[])
    ticks, counters = drive(sampler, counting, monkeypatch, 95, reference=sim)
    samples = [en.PowerSample(float(n), r[0]["power_w"], r[0]["energy_j"] * 1000.0) for n, (_, r) in enumerate(ticks)]
    assert sum(c.count("nvmlDeviceGetTotalEnergyConsumption") for c, _ in ticks) <= 8 * 4
    for start, end in ((3, 63), (10, 90), (0, 94), (40, 60)):
        run = en.run_energy(samples[start : end + 1])
        assert run.source == en.SOURCE_COUNTER and run.counter_resets == 0
        assert run.joules == pytest.approx((counters[end] - counters[start]) / 1000.0, rel=0.005)


def test_run_energy_within_half_a_percent_on_the_real_h200_ticks():
    """The real H200's 1 Hz ticks (power, counter), replayed through the meter: a 30 s matmul run."""
    doc = json.loads((HARDWARE / "h200-nvml-energy-ticks-2026-11-29.json").read_text())
    rows = doc["gpu0"]
    meter = nvml_energy.EnergyMeter()
    t0, _, c0, p0 = rows[0]
    meter.counter(c0, t0, p0)
    figures = [meter.joules()]
    for t, _, counter, power in rows[1:]:
        if meter.due(t, power):
            meter.counter(counter, t, power)
        else:
            meter.power(power, t)
        figures.append(meter.joules())
    assert meter.reads <= 5  # 60 s: start, two steps, the 30 s reads
    busy = [k for k, r in enumerate(rows) if r[3] > 200]
    i0, i1 = busy[0] - 1, busy[-1] + 1
    counter_j = (rows[i1][2] - rows[i0][2]) / 1000.0
    assert counter_j > 20000  # the run: 30 s near the 700 W cap
    assert figures[i1] - figures[i0] == pytest.approx(counter_j, rel=0.005)
    # and what the agent itself reported on the device agrees too
    assert rows[i1][1] - rows[i0][1] == pytest.approx(counter_j, rel=0.005)
