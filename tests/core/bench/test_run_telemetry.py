"""A run's GPU telemetry record and its energy (console/core/bench/run_telemetry.py).

The real H100 capture (tests/fixtures/hardware/h100-nvml-health-2026-11-26.json,
INDEX.toml) is replayed through the record: 1 Hz NVML run samples over 15 s idle,
an 80 s bf16 matmul loop at the 700 W cap and 10 s after. Expected figures are
computed from the capture's raw values (first and last counter readings, the
samples' own flags) or, where a figure is the thing under test, stated with the
arithmetic beside it. The CPX cases are simulated: no partitioned GPU has been
captured yet.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from console.core import energy as en
from console.core.bench.run_telemetry import (
    MAX_EPISODES,
    MAX_POINTS,
    SHARE_ACTIVITY,
    SHARE_COUNT,
    SHARE_WHOLE,
    GpuSetup,
    RunTelemetry,
    TelemetryBuilder,
    TelemetryError,
    Tick,
    build,
    partition_share,
    summarize,
    tick_from_record,
)

ROOT = Path(__file__).resolve().parents[3]
CAPTURE = json.loads((ROOT / "tests/fixtures/hardware/h100-nvml-health-2026-11-26.json").read_text())
SAMPLES = [s for s in CAPTURE["samples"] if s["type"] == "run_sample"]
LOAD = CAPTURE["load_done"]
IN_LOAD = [s for s in SAMPLES if LOAD["t_start"] <= s["t"] <= LOAD["t_end"]]


def record_of(samples, **kw) -> RunTelemetry:
    return build({0: [tick_from_record(s) for s in samples]}, **kw)


def roundtrip(rec: RunTelemetry) -> RunTelemetry:
    return RunTelemetry.from_json(json.loads(json.dumps(rec.to_json())))


# ---------------------------------------------------------------- the real H100 capture


def test_h100_load_window_energy_comes_from_the_counter():
    rec = record_of(IN_LOAD)
    s = summarize(rec, output_tokens=LOAD["matmuls"])
    counter_j = (IN_LOAD[-1]["energy_mj"] - IN_LOAD[0]["energy_mj"]) / 1000.0
    assert s.source == en.SOURCE_COUNTER and s.integrated_s == 0 and s.counter_resets == 0
    assert s.energy_j == pytest.approx(counter_j, abs=0.005 * len(rec.gpus[0]))
    assert s.energy_j == pytest.approx(55_131.9, abs=0.5)  # docs/nvidia.md, "Measured on a real H100"
    # the trapezoid of the same 1 Hz power samples agrees within 5 % (the bar)
    integrated = en.integrate_power_j(en.samples_from_records(IN_LOAD))
    assert abs(integrated - s.energy_j) / s.energy_j < 0.05
    assert s.duration_s == pytest.approx(IN_LOAD[-1]["t"] - IN_LOAD[0]["t"], abs=0.01)
    assert s.avg_power_w == pytest.approx(counter_j / s.duration_s, rel=1e-4)
    assert 690 < s.avg_power_w < 710  # at the 700 W cap
    assert s.peak_gpu_power_w == pytest.approx(max(x["power_w"] for x in IN_LOAD), abs=0.05)
    # work per joule: 49 460 matmuls over the window's energy
    assert s.tokens_per_joule == pytest.approx(LOAD["matmuls"] / counter_j, rel=1e-5)
    assert s.tokens_per_joule == pytest.approx(0.897, abs=0.001)


def test_h100_tokens_per_joule_with_a_stated_token_count():
    """Say the 80 s loop had been a serving run that generated 2 000 000 output tokens:
    2e6 / 55 131.9 J = 36.28 tokens per joule."""
    s = summarize(record_of(IN_LOAD), output_tokens=2_000_000)
    assert s.tokens_per_joule == pytest.approx(2_000_000 / 55_131.9, rel=1e-5)
    assert s.as_fields()["tokens_per_joule"] == pytest.approx(36.28, abs=0.01)
    assert summarize(record_of(IN_LOAD)).tokens_per_joule is None  # no token count, no figure


def test_h100_whole_capture_throttled_share_and_residency():
    rec = record_of(SAMPLES)
    s = summarize(rec)
    expected = en.throttled_share(en.samples_from_records(SAMPLES))
    assert s.throttled_pct == pytest.approx(100 * expected, abs=1e-6)
    assert s.throttled_pct == pytest.approx(73.4, abs=0.1)  # docs/nvidia.md: 73.4 % of the capture
    # the loop: all of it but its first second (docs/nvidia.md), 78 of 79 s
    in_load = summarize(record_of(IN_LOAD)).throttled_pct
    assert in_load == pytest.approx(100 * en.throttled_share(en.samples_from_records(IN_LOAD)), abs=1e-6)
    assert in_load == pytest.approx(100 * 78 / 79)
    # the power residency counter grew 80.34 s over the 109 s capture
    span = SAMPLES[-1]["t"] - SAMPLES[0]["t"]
    grown = (SAMPLES[-1]["residency_ns"]["power"] - SAMPLES[0]["residency_ns"]["power"]) / 1e9
    assert s.residency_pct == pytest.approx(100 * grown / span, abs=0.01)
    # each point's joules are kept to 0.01 J
    counter_j = (SAMPLES[-1]["energy_mj"] - SAMPLES[0]["energy_mj"]) / 1000
    assert s.energy_j == pytest.approx(counter_j, abs=0.005 * len(rec.gpus[0]))


def test_h100_throttle_episode_is_the_load():
    rec = record_of(SAMPLES)
    (episode,) = rec.gpus[0].episodes
    assert rec.episodes() == (episode,)
    # the power cap held the clocks from the loop's first second to its end (1 Hz: within 2 s)
    assert episode.start == pytest.approx(LOAD["t_start"] - rec.start, abs=2.0)
    assert episode.end == pytest.approx(LOAD["t_end"] - rec.start, abs=2.0)


def test_h100_columns_follow_the_samples():
    rec = record_of(SAMPLES)
    g = rec.gpus[0]
    assert len(g) == len(SAMPLES) - 1 and g.width == 1  # 111 intervals: far below the bound
    c = g.columns
    i = next(k for k, s in enumerate(SAMPLES) if s["phase"] == "load" and s["throttled"])
    assert c["power_w"][i] == pytest.approx(SAMPLES[i]["power_w"], abs=0.05)
    assert c["gfx_clock_mhz"][i] == SAMPLES[i]["sm_clock_mhz"]
    assert c["temp_c"][i] == max(SAMPLES[i]["temp_gpu_c"], SAMPLES[i + 1]["temp_gpu_c"])
    assert c["util_pct"][0] == SAMPLES[0]["util_pct"]
    assert all(v is None for v in c["vram_used_mib"])  # NVML's run sample has no VRAM: null, never 0


def test_h100_downsampled_keeps_the_figures():
    full = summarize(record_of(SAMPLES))
    rec = record_of(SAMPLES, max_points=8)
    g = rec.gpus[0]
    assert len(g) <= 8 and g.width == 16
    small = summarize(rec)
    assert small.energy_j == pytest.approx(full.energy_j, abs=0.1)
    assert small.throttled_pct == pytest.approx(full.throttled_pct, abs=0.01)
    assert small.peak_gpu_power_w == full.peak_gpu_power_w
    assert small.residency_pct == pytest.approx(full.residency_pct, abs=0.01)
    assert g.episodes == record_of(SAMPLES).gpus[0].episodes  # episodes stay at 1 Hz


def test_json_round_trip():
    for rec in (record_of(SAMPLES), record_of(SAMPLES, max_points=8)):
        back = roundtrip(rec)
        assert back == rec
        assert summarize(back, 1000) == summarize(rec, 1000)


# ---------------------------------------------------------------- bounded


def long_run(seconds: int, seed: int = 7, gpu_watts: float = 650.0):
    """A synthetic 1 Hz run: noisy power, the counter growing by it, throttling in stretches."""
    rng = random.Random(seed)
    ticks, counter, throttled = [], 5_000_000.0, False
    for i in range(seconds + 1):
        watts = gpu_watts + rng.uniform(-40, 40)
        if rng.random() < 0.01:
            throttled = not throttled
        ticks.append(
            Tick(
                t=1.8e9 + i,
                power_w=watts,
                energy_mj=counter,
                util_pct=rng.uniform(80, 100),
                gfx_clock_mhz=rng.choice((1700.0, 1900.0, 2100.0)),
                mem_clock_mhz=2600.0,
                temp_c=rng.uniform(65, 85),
                temp_mem_c=rng.uniform(55, 75),
                vram_used_mib=150_000.0 + rng.uniform(0, 100),
                throttled=throttled,
            )
        )
        counter += watts * 1000.0  # mJ over the next second
    return ticks


def test_a_two_hour_run_stays_small():
    ticks = long_run(7200)
    rec = build({0: ticks})
    g = rec.gpus[0]
    assert len(g) <= MAX_POINTS
    assert g.width == 32 and len(g) == 225  # 7200 s in 32 s points
    size = len(json.dumps(rec.to_json()))
    assert size < 16_000, size  # bytes of JSON for one GPU over two hours (15.7 KB measured)
    eight = build([(GpuSetup(i), long_run(7200, seed=i)) for i in range(8)])
    assert len(json.dumps(eight.to_json())) < 8 * 16_000
    # the figures are those of the full 1 Hz samples
    raw = [en.PowerSample(k.t, k.power_w, k.energy_mj, k.throttled) for k in ticks]
    s = summarize(rec, output_tokens=1_000_000)
    assert s.energy_j == pytest.approx(en.run_energy(raw).joules, abs=0.01 * len(g))
    assert s.throttled_pct == pytest.approx(100 * en.throttled_share(raw), abs=1e-6)
    assert s.peak_gpu_power_w == pytest.approx(max(k.power_w for k in ticks), abs=0.05)
    assert s.duration_s == 7200


def test_the_builder_never_holds_more_than_the_bound():
    builder = TelemetryBuilder([GpuSetup(0)], max_points=16)
    for i, tick in enumerate(long_run(3000)):
        builder.add(0, tick)
        if i % 97 == 0:
            assert len(builder.record().gpus[0]) <= 16
    rec = builder.record()
    assert 8 <= len(rec.gpus[0]) <= 16 and rec.gpus[0].width == 256


def test_throttle_episodes_are_bounded_and_keep_their_span():
    ticks = [Tick(t=float(i), power_w=500.0, energy_mj=i * 500_000.0, throttled=(i // 3) % 2 == 0) for i in range(900)]
    g = build({0: ticks}).gpus[0]
    assert len(g.episodes) == MAX_EPISODES
    assert g.episodes[0].start == 0.0 and g.episodes[-1].end == max(k.t for k in ticks if k.throttled) + 1
    assert all(a.end < b.start for a, b in zip(g.episodes, g.episodes[1:]))


# ---------------------------------------------------------------- counter problems


def test_a_counter_reset_mid_run_is_filled_from_power_and_marked_even_downsampled():
    ticks = long_run(600)
    reset_at = 300
    ticks = ticks[:reset_at] + [
        Tick(k.t, k.power_w, k.energy_mj - ticks[reset_at].energy_mj + 1000.0, throttled=k.throttled)
        for k in ticks[reset_at:]
    ]
    raw = [en.PowerSample(k.t, k.power_w, k.energy_mj) for k in ticks]
    expected = en.run_energy(raw)
    assert expected.counter_resets == 1
    for max_points in (MAX_POINTS, 8):
        s = summarize(build({0: ticks}, max_points=max_points))
        assert s.source == en.SOURCE_MIXED and s.counter_resets == 1
        assert s.integrated_s == pytest.approx(1.0)
        assert s.energy_j == pytest.approx(expected.joules, abs=0.01 * 600)


def test_no_counter_means_integrated_power_marked_so():
    ticks = [Tick(t=float(i), power_w=300.0 + i) for i in range(11)]
    s = summarize(build({0: ticks}))
    assert s.source == en.SOURCE_INTEGRATED and s.integrated_s == 10
    assert s.energy_j == pytest.approx(en.integrate_power_j([en.PowerSample(k.t, k.power_w) for k in ticks]))
    assert s.as_fields()["energy_source"] == "integrated_power"


def test_nothing_read_gives_no_energy_not_zero():
    s = summarize(build({0: [Tick(t=float(i)) for i in range(5)]}), output_tokens=100)
    assert s.energy_j is None and s.source == en.SOURCE_NONE and s.gap_s == 4
    assert s.avg_power_w is None and s.tokens_per_joule is None and s.throttled_pct is None
    empty = summarize(build({0: []}))
    assert empty.energy_j is None and empty.duration_s == 0


def test_repeated_or_older_ticks_are_dropped():
    builder = TelemetryBuilder([GpuSetup(0)])
    for t, mj in ((0, 0), (1, 100_000), (1, 100_000), (0.5, 50_000), (2, 200_000)):
        builder.add(0, Tick(t=float(t), power_w=100.0, energy_mj=float(mj)))
    assert builder.dropped == 2
    assert summarize(builder.record()).energy_j == pytest.approx(200.0)


# ---------------------------------------------------------------- several GPUs


def test_two_gpus_add_up_and_episodes_merge():
    a = [Tick(t=float(i), power_w=600.0, energy_mj=i * 600_000.0, throttled=3 <= i < 6) for i in range(11)]
    b = [Tick(t=float(i), power_w=400.0, energy_mj=i * 400_000.0, throttled=5 <= i < 8) for i in range(11)]
    rec = build([(GpuSetup(0), a), (GpuSetup(1), b)])
    s = summarize(rec, output_tokens=20_000)
    assert s.energy_j == pytest.approx(10_000.0)
    assert s.avg_power_w == pytest.approx(1000.0)  # the run's draw: both GPUs
    assert s.peak_gpu_power_w == 600.0
    assert s.tokens_per_joule == pytest.approx(2.0)
    assert s.throttled_pct == pytest.approx(100 * 6 / 20)  # of the GPU-seconds
    assert [(e.start, e.end) for e in rec.episodes()] == [(3.0, 8.0)]
    assert [g.measured_j for g in s.gpus] == [pytest.approx(6000.0), pytest.approx(4000.0)]


def test_bad_setups_and_gpus_are_one_line_errors():
    with pytest.raises(TelemetryError, match=r"gpu 3: partition 8 out of range for 8 partitions"):
        GpuSetup(3, partitions=(8,), partition_count=8)
    with pytest.raises(TelemetryError, match="gpu n1:0 given twice"):
        TelemetryBuilder([GpuSetup(0, node="n1"), GpuSetup(0, node="n1")])
    builder = TelemetryBuilder([GpuSetup(0)])
    with pytest.raises(TelemetryError, match="gpu 5 is not one of the run's GPUs"):
        builder.add(5, Tick(t=0.0))
    with pytest.raises(TelemetryError, match="max_points"):
        TelemetryBuilder([GpuSetup(0)], max_points=7)


def test_broken_json_names_the_gpu_and_key():
    good = record_of(SAMPLES[:10]).to_json()
    cases = []
    bad = json.loads(json.dumps(good))
    bad["gpus"][0]["columns"]["power_w"].pop()
    cases.append((bad, r"gpus\[0\]: column 'power_w' has 8 values, expected 9"))
    bad = json.loads(json.dumps(good))
    del bad["gpus"][0]["columns"]["energy_j"]
    cases.append((bad, r"gpus\[0\]: column 'energy_j' missing"))
    bad = json.loads(json.dumps(good))
    bad["gpus"][0]["columns"]["temp_c"][2] = "hot"
    cases.append((bad, r"column 'temp_c': 'hot' is not a number"))
    bad = dict(good, schema=99)
    cases.append((bad, "key 'schema'"))
    bad = json.loads(json.dumps(good))
    bad["gpus"][0]["episodes"] = [[1.0]]
    cases.append((bad, "key 'episodes'"))
    for data, message in cases:
        with pytest.raises(TelemetryError, match=message) as err:
            RunTelemetry.from_json(data)
        assert "\n" not in str(err.value)
    with pytest.raises(TelemetryError, match="expected a JSON object"):
        RunTelemetry.from_json([1, 2])


# ---------------------------------------------------------------- CPX partitions (simulated)

BOARD_W = 750.0
CPX = 8


def cpx_ticks(busy_of, seconds=60, watts_of=None):
    """One MI300X in CPX: the board's power and counter, each partition's busy % per second."""
    ticks, counter = [], 1e9
    for i in range(seconds + 1):
        busy = tuple(busy_of(i))
        watts = watts_of(i) if watts_of else BOARD_W
        ticks.append(Tick(t=1000.0 + i, power_w=watts, energy_mj=counter, partition_util=busy))
        counter += watts * 1000.0
    return ticks


def test_partition_share_rule():
    idle_others = [90.0] + [0.0] * 7
    assert partition_share([0], idle_others, CPX) == (1.0, SHARE_ACTIVITY)
    assert partition_share([3], [50.0] * 8, CPX) == (pytest.approx(1 / 8), SHARE_ACTIVITY)
    assert partition_share([0, 1], [60.0, 20.0, 20.0, 0, 0, 0, 0, 0], CPX) == (pytest.approx(0.8), SHARE_ACTIVITY)
    # busy % unknown (gpu_metrics before 1.6 has no xcp_stats): the partitions in use
    assert partition_share([3], [None] * 8, CPX, in_use=[0, 3]) == (0.5, SHARE_COUNT)
    assert partition_share([3], [], CPX) == (1 / 8, SHARE_COUNT)
    # an idle GPU has no activity to split
    assert partition_share([3], [0.0] * 8, CPX, in_use=[3, 4, 5, 6]) == (0.25, SHARE_COUNT)
    # all of the GPU's partitions, or none named: the whole GPU
    assert partition_share(range(8), [10.0] * 8, CPX) == (1.0, SHARE_WHOLE)
    assert partition_share([], [10.0] * 8, CPX) == (1.0, SHARE_WHOLE)


def test_cpx_one_busy_partition_is_charged_the_board():
    """One instance benchmarked, the seven others idle: its run is charged what the board used."""
    ticks = cpx_ticks(lambda i: [95.0] + [0.0] * 7)
    rec = build([(GpuSetup(0, partitions=(0,), partition_count=CPX), ticks)])
    s = summarize(rec, output_tokens=90_000)
    (g,) = s.gpus
    assert g.measured_j == pytest.approx(BOARD_W * 60)
    assert g.share_method == SHARE_ACTIVITY and g.share == pytest.approx(1.0)
    assert s.energy_j == pytest.approx(BOARD_W * 60) and s.avg_power_w == pytest.approx(BOARD_W)
    assert s.tokens_per_joule == pytest.approx(90_000 / (BOARD_W * 60))


def test_cpx_shares_add_up_to_the_board_and_follow_activity():
    """Eight runs, one per partition, over the same minute: every joule is charged once,
    by each partition's activity second by second."""
    rng = random.Random(3)
    busy = [[rng.uniform(0, 100) for _ in range(CPX)] for _ in range(61)]
    watts = [rng.uniform(200, 750) for _ in range(61)]
    ticks = cpx_ticks(lambda i: busy[i], watts_of=lambda i: watts[i])
    runs = [summarize(build([(GpuSetup(0, partitions=(p,), partition_count=CPX), ticks)])) for p in range(CPX)]
    board = runs[0].gpus[0].measured_j
    assert board == pytest.approx(sum(watts[:60]))
    assert sum(r.energy_j for r in runs) == pytest.approx(board, rel=1e-6)
    for p, r in enumerate(runs):
        expected = sum(watts[i] * busy[i][p] / sum(busy[i]) for i in range(60))
        assert r.energy_j == pytest.approx(expected, abs=0.01 * 60)
        assert r.gpus[0].share_method == SHARE_ACTIVITY
    # the same at a coarse resolution: shares are summed per second before points merge
    coarse = summarize(build([(GpuSetup(0, partitions=(2,), partition_count=CPX), ticks)], max_points=4))
    assert coarse.energy_j == pytest.approx(runs[2].energy_j, abs=0.05)


def test_cpx_without_activity_uses_the_partitions_in_use():
    ticks = cpx_ticks(lambda i: [None] * CPX)
    setup = GpuSetup(0, partitions=(5,), partition_count=CPX, in_use=(0, 1, 5, 7))
    s = summarize(build([(setup, ticks)]))
    assert s.gpus[0].share_method == SHARE_COUNT and s.gpus[0].share == pytest.approx(0.25)
    assert s.energy_j == pytest.approx(BOARD_W * 60 / 4)
    assert s.gpus[0].measured_j == pytest.approx(BOARD_W * 60)  # what the board measured stays visible


def test_a_group_run_over_every_partition_is_charged_the_whole_gpu():
    ticks = cpx_ticks(lambda i: [30.0] * CPX)
    s = summarize(build([(GpuSetup(0, partitions=tuple(range(CPX)), partition_count=CPX), ticks)]))
    assert s.gpus[0].share_method == SHARE_WHOLE and s.energy_j == pytest.approx(BOARD_W * 60)


def test_partitioned_record_round_trips():
    rng = random.Random(5)
    ticks = cpx_ticks(lambda i: [rng.uniform(0, 100) for _ in range(CPX)])
    rec = build([(GpuSetup(1, node="n2", partitions=(3, 4), partition_count=CPX), ticks)], max_points=16)
    back = roundtrip(rec)
    assert back == rec and back.gpus[0].partitions == (3, 4) and back.gpus[0].node == "n2"


def test_tick_from_an_amd_style_record_uses_the_runs_partitions():
    rec = {
        "t": 5.0,
        "power_w": 700,
        "energy_mj": 12.5,
        "gfx_clock_mhz": 2100,
        "temp_junction_c": 80,
        "partition_util": [10, 20, 30, None, 0, 0, 0, 0],
        "partition_vram_mib": [1000, 2000, 3000, 4000, 0, 0, 0, 0],
        "clock_event_names": ["hw_thermal"],
    }
    tick = tick_from_record(rec, partitions=(1, 2))
    assert tick.util_pct == 25.0 and tick.vram_used_mib == 5000.0
    assert tick.gfx_clock_mhz == 2100 and tick.temp_c == 80 and tick.throttled is True
    assert tick_from_record(rec, partitions=(2, 3)).util_pct is None  # one unknown: unknown, not a guess
