"""Replay the NVIDIA health and energy capture taken on a real H100.

tests/fixtures/hardware/h100-nvml-health-2026-11-26.json is what
scripts/capture-nvml-health.py wrote on the device (INDEX.toml says how): the
health reading of console/agent/nvidia_health.py at idle and after, 1 Hz run
samples through 15 s idle, an 80 s torch bf16 matmul loop at the 700 W cap and
10 s after, with the load's own start and end time and matmul count.

The agent's decoding is run again on the raw values the capture holds (the
bitmask, the field values) and the console's energy code (console/core/energy.py)
computes the run's energy, throttled share and work per joule from the samples.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import tomllib

from console.core.energy import (
    SOURCE_COUNTER,
    SOURCE_INTEGRATED,
    PowerSample,
    integrate_power_j,
    per_joule,
    residency_share,
    run_energy,
    samples_from_records,
    throttled_share,
    window,
)

ROOT = Path(__file__).resolve().parents[2]
HARDWARE = ROOT / "tests" / "fixtures" / "hardware"
INDEX = {c["id"]: c for c in tomllib.loads((HARDWARE / "INDEX.toml").read_text())["capture"]}
CAPTURE_ID = "h100-nvml-health-2026-11-26"
MATMUL_FLOP = 2 * 8192**3


@pytest.fixture(scope="module")
def cap():
    return json.loads((HARDWARE / INDEX[CAPTURE_ID]["file"]).read_text())


@pytest.fixture(scope="module")
def health():
    spec = importlib.util.spec_from_file_location("nvidia_health", ROOT / "console" / "agent" / "nvidia_health.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def phase(cap, name):
    return [s for s in cap["samples"] if s["phase"] == name]


def steady_load(cap):
    """Samples while the matmul loop ran, from its first timed product to its end (the load's own clock)."""
    done = cap["load_done"]
    return [s for s in cap["samples"] if done["t_start"] <= s["t"] <= done["t_end"]]


def test_the_capture_is_the_one_indexed(cap):
    entry = INDEX[CAPTURE_ID]
    prov = cap["provenance"]
    assert entry["run"] == "health" and entry["date"] == prov["date_utc"][:10]
    assert prov["gpu_name"] == "NVIDIA H100 80GB HBM3" and prov["uuid"].startswith("GPU-")
    assert prov["driver"] == "580.159.04" and prov["nvidia-ml-py"] == "13.615.71"
    assert prov["power_limit_mw"] == 700_000 and "capture-nvml-health.py" in prov["command"]
    assert cap["load_rc"] == 0 and cap["load_done"]["matmuls"] > 0
    assert len(phase(cap, "idle")) == 15 and len(phase(cap, "load")) >= 80 and len(phase(cap, "after")) == 10


# -- (a) the power-cap throttle reason


def test_power_cap_reason_is_decoded_under_load_and_absent_at_idle(cap, health):
    for s in cap["samples"]:  # the agent's decoding of the raw bitmask gives what was recorded
        assert health.decode_reasons(s["clock_event_reasons"]) == s["clock_event_names"]
        assert health.is_throttled(s["clock_event_names"]) == s["throttled"]
    idle = phase(cap, "idle")
    assert all(s["clock_event_names"] == ["idle"] and s["throttled"] is False for s in idle)
    loaded = steady_load(cap)
    assert len(loaded) >= 75
    # NVML set SW power cap (bit 0x4) on every sample after the first second of the loop
    assert all(s["clock_event_names"] == ["sw_power_cap"] and s["throttled"] for s in loaded[1:])
    assert all(s["power_w"] >= 0.99 * s["power_cap_w"] for s in loaded[1:])
    # once the loop ended the reason went away, and the GPU went back to idle
    assert phase(cap, "after")[-1]["clock_event_names"] == ["idle"]
    for reading in (cap["health_idle"], cap["health_after"]):
        assert reading[0]["throttled"] is False and reading[0]["clock_event_names"] == ["idle"]


def test_power_residency_counter_is_in_ns_and_matches_the_load(cap):
    """The field-values residency (id 74) and NVML's violation call count the same ns, about the load's length."""
    before = cap["health_idle"][0]["residency_ns"]["power"]
    after = cap["health_after"][0]["residency_ns"]["power"]
    done = cap["load_done"]
    seconds = done["t_end"] - done["t_start"]
    assert before == 0 and abs((after - before) / 1e9 - seconds) < 2.0
    last = cap["samples"][-1]
    assert last["residency_ns"]["power"] == last["violation_power"]["violationTime"] == after
    for name in ("thermal", "sw_thermal", "hw_thermal", "hw_power_brake"):
        assert cap["health_after"][0]["residency_ns"][name] == 0  # no thermal or brake throttling on this run


# -- (b) ECC, PCIe link, energy and the rest of the health record


def test_health_record_reads_what_the_h100_supports(cap):
    for reading in (cap["health_idle"], cap["health_after"]):
        (r,) = reading
        assert r["uuid"] == cap["provenance"]["uuid"]
        assert r["ecc_mode"] == "on"
        for key in ("ecc_volatile_corrected", "ecc_volatile_uncorrected", "ecc_aggregate_corrected"):
            assert r[key] == 0
        assert r["ecc_aggregate_uncorrected"] == 0
        assert r["ecc_aggregate_by_location"] == {
            "dram": {"corrected": 0, "uncorrected": 0},
            "sram": {"corrected": 0, "uncorrected": 0},
        }
        assert (r["remapped_correctable"], r["remapped_uncorrectable"]) == (0, 0)
        assert (r["remapped_pending"], r["remapped_failure"]) == (False, False)
        assert (r["pcie_gen"], r["pcie_width"], r["pcie_gen_max"], r["pcie_width_max"]) == (5, 16, 5, 16)
        assert r["pcie_replay"] == 0
        assert isinstance(r["energy_mj"], int) and r["energy_mj"] > 0
        assert r["xid_watch"] is True and r["xid_events"] == []
        # H100 remaps rows instead of retiring pages, and this one has no NVLink: null, never 0
        assert (r["retired_sbe"], r["retired_dbe"], r["retired_pending"]) == (None, None, None)
        assert r["nvlink"] is None
    errors = cap["reader_errors"]
    assert errors["gpu 0: nvmlDeviceGetRetiredPagesPendingStatus"].endswith("(NVMLError_NotSupported)")
    assert errors["gpu 0: nvmlDeviceGetNvLinkState[0]"].endswith("(NVMLError_NotSupported)")
    # the energy counter advanced by what the load used
    assert cap["health_after"][0]["energy_mj"] - cap["health_idle"][0]["energy_mj"] > 50_000_000


def test_reader_values_agree_with_nvml_field_values(cap):
    """The direct calls and NVML's field values (read raw beside them) say the same."""
    raw = cap["raw_fields_idle"]
    (r,) = cap["health_idle"]
    assert raw["ecc_sbe_vol_total"]["value"] == r["ecc_volatile_corrected"]
    assert raw["ecc_dbe_agg_total"]["value"] == r["ecc_aggregate_uncorrected"]
    assert raw["remapped_cor"]["value"] == r["remapped_correctable"]
    assert raw["pcie_replay_counter"]["value"] == r["pcie_replay"]
    assert raw["retired_sbe"]["nvmlReturn"] == 3  # NVML_ERROR_NOT_SUPPORTED, as the direct call said
    assert abs(raw["energy_mj"]["value"] - r["energy_mj"]) < 1_000_000  # read a moment apart, at ~71 W


def test_a_health_reading_is_bounded(cap):
    (first,) = cap["health_idle"]
    cost = cap["health_cost"]
    # the first reading asks everything once; what answered NotSupported is not asked again
    assert first["calls"] == 31 and set(cost["calls"]) == {15}
    assert all(s["calls"] == 9 for s in cap["samples"])
    assert max(cost["cpu_ms"]) < 50  # per GPU and reading, every 10 s by default


# -- (c) energy: the counter against the integral of the 1 Hz power


def test_counter_energy_and_integrated_power_agree_within_5_percent(cap):
    samples = window(samples_from_records(cap["samples"]), cap["load_done"]["t_start"], cap["load_done"]["t_end"])
    counter = run_energy(samples)
    integral = integrate_power_j(samples)
    assert counter.source == SOURCE_COUNTER and counter.counter_resets == 0
    assert counter.duration_s == pytest.approx(79.0, abs=0.1)
    assert counter.joules == pytest.approx(55131.909)  # 59440962 - 4309053 mJ, as the counter said
    assert integral == pytest.approx(54880.25, abs=0.01)
    diff = (integral - counter.joules) / counter.joules
    assert abs(diff) < 0.05
    assert abs(diff) < 0.01  # what the H100 gave: -0.46 %
    assert 690 < counter.avg_power_w <= 700.5 and counter.peak_power_w > 700
    # without the counter the same samples give integrated power, marked so
    blind = run_energy([PowerSample(s.t, s.power_w) for s in samples])
    assert blind.source == SOURCE_INTEGRATED and blind.joules == pytest.approx(integral)


def test_whole_capture_energy_and_work_per_joule(cap):
    samples = samples_from_records(cap["samples"])
    whole = run_energy(samples)
    first, last = cap["samples"][0], cap["samples"][-1]
    assert whole.joules == pytest.approx((last["energy_mj"] - first["energy_mj"]) / 1000)
    assert abs(integrate_power_j(samples) - whole.joules) / whole.joules < 0.05
    loaded = run_energy(window(samples, cap["load_done"]["t_start"], cap["load_done"]["t_end"]))
    matmuls = cap["load_done"]["matmuls"]
    per_j = per_joule(matmuls, loaded.joules)
    assert per_j == pytest.approx(matmuls / 55131.909)
    assert 0.8 < per_j * MATMUL_FLOP / 1e12 < 1.2  # about 1 TFLOP per joule of bf16 at the 700 W cap


def test_throttled_share_of_the_run(cap):
    samples = samples_from_records(cap["samples"])
    loaded = window(samples, cap["load_done"]["t_start"], cap["load_done"]["t_end"])
    assert throttled_share(loaded) == pytest.approx(1.0, abs=0.02)
    share = throttled_share(samples)
    assert 0.70 < share < 0.76  # ~80 s of ~109 s
    assert throttled_share(window(samples, samples[0].t, cap["load_warm"]["t"] - 1)) == 0.0
    # the residency counter says the same over the whole capture
    t0, t1 = cap["samples"][0], cap["samples"][-1]
    by_counter = residency_share(t0["residency_ns"]["power"], t1["residency_ns"]["power"], t1["t"] - t0["t"])
    assert by_counter == pytest.approx(share, abs=0.02)
