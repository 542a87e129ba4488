"""Health rules (console/core/health.py), with the real H100 capture replayed.

tests/fixtures/hardware/h100-nvml-health-2026-11-26.json: one H100 SXM, 15 s idle,
an 80 s bf16 matmul loop held at the 700 W power cap (clock event reason
sw_power_cap), 10 s after; 1 Hz run samples plus a full health record before and
after (docs/nvidia.md, "Measured on a real H100").
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from console.core.health import (
    FAIL,
    OK,
    UNKNOWN,
    WARN,
    EccBlock,
    GpuFault,
    HealthReading,
    HealthRules,
    HealthTracker,
    LinkHealth,
    evaluate,
    throttle_share,
)
from console.core.health_readings import from_amdsmi, from_nvml

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "hardware" / "h100-nvml-health-2026-11-26.json"
THROTTLED = re.compile(r"^throttled \(power cap\) (\d+)% of last 60 s$")


@pytest.fixture(scope="module")
def capture() -> dict:
    return json.loads(CAPTURE.read_text())


def replay(records, rules: HealthRules | None = None):
    tracker = HealthTracker(rules or HealthRules())
    return [(r, tracker.add(from_nvml(r))) for r in records]


# ---------------------------------------------------------------- the real capture


def test_idle_h100_is_ok(capture):
    idle = [r for r in capture["samples"] if r["phase"] == "idle"]
    assert len(idle) >= 10
    verdicts = [v for _, v in replay(idle)]
    assert {v.state for v in verdicts} == {OK}
    assert all(v.reasons == "" for v in verdicts)
    assert verdicts[-1].throttle_share == 0.0


def test_power_capped_h100_warns_with_the_power_cap_reason(capture):
    steps = replay(capture["samples"])
    loaded = [(r, v) for r, v in steps if r["phase"] == "load" and r["clock_event_names"] == ["sw_power_cap"]]
    first_cap = loaded[0][0]["t"]
    # After a full minute at the cap the GPU has been throttled about all of it.
    late = [(r, v) for r, v in loaded if r["t"] - first_cap >= 60]
    assert late, "the capture holds more than a minute at the cap"
    for _record, verdict in late:
        assert verdict.state == WARN
        found = THROTTLED.match(verdict.reasons)
        assert found, verdict.reasons
        assert int(found.group(1)) >= 95
        assert verdict.throttle_reason == "power"
    # Just after the cap began, the share of the last minute is still below 25 %: not yet warn.
    early = [v for r, v in loaded if r["t"] - first_cap < 10]
    assert early and all(v.state == OK for v in early)
    # The reason's figure follows the residency counter: 80.34 s of power capping in the loop.
    assert capture["health_after"][0]["residency_ns"]["power"] == 80336755296


def test_capture_at_the_agents_10_s_cadence_warns_too(capture):
    every_10s = capture["samples"][::10]
    steps = replay(every_10s)
    loaded = [v for r, v in steps if r["phase"] == "load"]
    assert loaded[-1].state == WARN
    share = int(THROTTLED.match(loaded[-1].reasons).group(1))
    assert share >= 95


def test_sampled_reasons_give_the_share_when_there_is_no_residency_counter(capture):
    # The same load without residency_ns: the reasons of each sample hold until the next.
    stripped = [{k: v for k, v in r.items() if k != "residency_ns"} for r in capture["samples"]]
    steps = replay(stripped)
    loaded = [v for r, v in steps if r["phase"] == "load"]
    assert loaded[-1].state == WARN and int(THROTTLED.match(loaded[-1].reasons).group(1)) >= 95


def test_full_health_records_of_the_capture(capture):
    for record in (capture["health_idle"][0], capture["health_after"][0]):
        reading = from_nvml(record)
        assert reading.vendor == "nvidia"
        assert (reading.ecc_correctable, reading.ecc_uncorrectable) == (0, 0)
        assert reading.ecc_blocks == (EccBlock("dram", 0, 0), EccBlock("sram", 0, 0))  # H100: DRAM and SRAM
        assert (reading.pages_retired, reading.pages_pending, reading.pages_unreservable) == (0, 0, 0)
        assert (reading.pcie_gen, reading.pcie_gen_max, reading.pcie_width, reading.pcie_width_max) == (5, 5, 16, 16)
        assert reading.links is None  # NVLink NotSupported on the one-GPU VM
        assert reading.idle is True and reading.throttle_reasons == ()
        assert evaluate([reading]).state == OK
    before, after = (from_nvml(capture[k][0]) for k in ("health_idle", "health_after"))
    assert after.energy_j - before.energy_j == pytest.approx(58157.357)
    # Two readings 109 s apart around the 80 s power-capped loop: the counter says 80.3 s at
    # the cap, spread over the span that is 73.5 % of the last minute.
    share, reason = throttle_share([before, after], 60)
    assert reason == "power" and share == pytest.approx(80.336755296 / (after.t - before.t))
    assert evaluate([before, after]).reasons == "throttled (power cap) 74% of last 60 s"


# ---------------------------------------------------------------- the rules


def base(**changes) -> HealthReading:
    reading = HealthReading(
        t=1000.0,
        gpu=3,
        ecc_correctable=0,
        ecc_uncorrectable=0,
        pages_retired=0,
        pages_pending=0,
        pages_unreservable=0,
        throttle_reasons=(),
        pcie_gen=5,
        pcie_gen_max=5,
        pcie_width=16,
        pcie_width_max=16,
    )
    return replace(reading, **changes)


def test_nothing_known_is_unknown_and_a_clean_reading_ok():
    assert evaluate([]).state == UNKNOWN
    assert evaluate([base()]).line() == "ok"


def test_uncorrectable_error_fails():
    verdict = evaluate([base(ecc_uncorrectable=2)])
    assert verdict.state == FAIL and verdict.reasons == "2 uncorrectable ECC errors"


def test_pending_bad_page_fails_and_is_said_before_warnings():
    verdict = evaluate([base(pages_pending=1, pcie_width=8)])
    assert verdict.state == FAIL
    assert verdict.reasons == "1 bad page pending retirement; PCIe gen 5 x8 (max gen 5 x16)"


def test_growing_correctable_count_warns_within_the_window_only():
    rules = HealthRules(ecc_window=3600)
    history = [base(t=0, ecc_correctable=5), base(t=1800, ecc_correctable=5), base(t=3000, ecc_correctable=9)]
    verdict = evaluate(history, rules)
    assert verdict.state == WARN and verdict.reasons == "correctable ECC +4 in last 1 h"
    # The same growth two hours ago is history now.
    later = [*history, base(t=3000 + 7200, ecc_correctable=9)]
    assert evaluate(later, rules).state == OK
    # A steady count never warns, however high.
    assert evaluate([base(t=0, ecc_correctable=40), base(t=10, ecc_correctable=40)]).state == OK


def test_correctable_growth_survives_a_counter_reset():
    history = [base(t=0, ecc_correctable=7), base(t=10, ecc_correctable=0), base(t=20, ecc_correctable=3)]
    assert evaluate(history).reasons == "correctable ECC +3 in last 1 h"


def test_threshold_of_correctable_growth():
    history = [base(t=0, ecc_correctable=0), base(t=10, ecc_correctable=2)]
    assert evaluate(history, HealthRules(ecc_correctable=3)).state == OK
    assert evaluate(history, HealthRules(ecc_correctable=2)).state == WARN


def test_pcie_link_below_its_maximum_warns():
    assert evaluate([base(pcie_width=8)]).reasons == "PCIe gen 5 x8 (max gen 5 x16)"
    assert evaluate([base(pcie_gen=4)]).reasons == "PCIe gen 4 x16 (max gen 5 x16)"
    # A link that slows down at idle is not a fault; its width still counts.
    assert evaluate([base(pcie_gen=1, idle=True)]).state == OK
    assert evaluate([base(pcie_gen=1, idle=True, pcie_width=8)]).reasons == "PCIe gen 1 x8 (max gen 5 x16)"
    assert evaluate([base(pcie_gen=4)], HealthRules(pcie_gen=False)).state == OK


def test_link_down_warns():
    links = (LinkHealth(0, True), LinkHealth(1, False), LinkHealth(2, None), LinkHealth(3, False))
    verdict = evaluate([base(link_kind="xgmi", links=links)])
    assert verdict.state == WARN and verdict.reasons == "XGMI links 1, 3 down"
    assert evaluate([base(link_kind="nvlink", links=links[:2])]).reasons == "NVLink link 1 down"


def test_reset_or_xid_warns_for_the_fault_window():
    fault = GpuFault("xid", 1000.0, 79, "XID 79")
    tracker = HealthTracker(HealthRules(fault_window=3600))
    verdict = tracker.add(base(t=1000.0, faults=(fault,)))
    assert verdict.state == WARN and verdict.reasons.startswith("XID 79 at ")
    assert tracker.add(base(t=1000.0 + 1800)).state == WARN  # still within the window
    assert tracker.add(base(t=1000.0 + 3700)).state == OK


def test_severity_overrides_and_off():
    rules = HealthRules(severity=(("pcie_degraded", "fail"), ("ecc_uncorrectable", "off")))
    verdict = evaluate([base(pcie_width=8, ecc_uncorrectable=1)], rules)
    assert verdict.state == FAIL and verdict.reasons == "PCIe gen 5 x8 (max gen 5 x16)"


def test_throttle_share_counts_unwatched_time_as_not_throttled():
    # Throttled for the 20 s the GPU has been watched: a third of the last minute.
    history = [
        base(t=0, throttle_reasons=("power",), residency=(("power", 0.0),)),
        base(t=20, throttle_reasons=("power",), residency=(("power", 20.0),)),
    ]
    share, reason = throttle_share(history, 60)
    assert share == pytest.approx(1 / 3) and reason == "power"
    assert evaluate(history).reasons == "throttled (power cap) 33% of last 60 s"
    assert evaluate(history, HealthRules(throttle_share=0.5)).state == OK


def test_residency_counter_reset_falls_back_to_the_reasons():
    history = [
        base(t=0, residency=(("power", 500.0),), throttle_reasons=("power",)),
        base(t=60, residency=(("power", 3.0),), throttle_reasons=("power",)),
    ]
    assert throttle_share(history, 60) == (1.0, "power")


# ---------------------------------------------------------------- NVML and amdsmi mappings


def test_nvml_record_with_faults_links_and_pages():
    record = {
        "type": "health",
        "gpu": 2,
        "t": 50.0,
        "ecc_volatile_corrected": 3,
        "ecc_volatile_uncorrected": 1,
        "remapped_correctable": 2,
        "remapped_uncorrectable": 1,
        "remapped_pending": True,
        "remapped_failure": False,
        "clock_event_names": ["sw_power_cap", "hw_thermal"],
        "residency_ns": {"power": 2_000_000_000, "low_utilization": 9, "sync_boost": 5, "hw_thermal": None},
        "nvlink": [
            {"link": 0, "active": True, "replay": 1, "recovery": 0, "crc_flit": None, "crc_data": 2, "ecc_data": 0},
            {"link": 1, "active": False},
        ],
        "xid_events": [{"xid": 79, "at": 49.5}],
        "energy_mj": 1500,
    }
    reading = from_nvml(record)
    assert (reading.gpu, reading.ecc_correctable, reading.ecc_uncorrectable) == (2, 3, 1)
    assert (reading.pages_retired, reading.pages_pending, reading.pages_unreservable) == (3, 1, 0)
    assert reading.throttle_reasons == ("power", "hw_thermal") and reading.idle is False
    assert reading.residency == (("power", 2.0),)  # low utilization and sync boost are not throttling
    assert reading.links == (LinkHealth(0, True, 3), LinkHealth(1, False, None))
    assert reading.faults == (GpuFault("xid", 49.5, 79, "XID 79"),)
    assert reading.energy_j == 1.5
    verdict = evaluate([reading])
    assert verdict.state == FAIL
    assert verdict.reasons.split("; ")[:2] == ["1 uncorrectable ECC error", "1 bad page pending retirement"]
    assert "NVLink link 1 down" in verdict.reasons and "XID 79 at " in verdict.reasons


def amd_results(**over) -> dict:
    """Results shaped as the real amdsmi 7.0.2 functions build them (keys checked in test_health_amdsmi.py)."""
    results = {
        "amdsmi_get_gpu_total_ecc_count": {"correctable_count": 4, "uncorrectable_count": 0, "deferred_count": 0},
        "amdsmi_get_gpu_ecc_count": {
            "UMC": {"correctable_count": 4, "uncorrectable_count": 0, "deferred_count": 0},
            "GFX": {"correctable_count": "N/A", "uncorrectable_count": 0, "deferred_count": 0},
        },
        "amdsmi_get_gpu_bad_page_info": [
            {"value": 0, "page_address": 0x1000, "page_size": 4096, "status": 0},
            {"value": 1, "page_address": 0x2000, "page_size": 4096, "status": 0},
        ],
        "amdsmi_get_pcie_info": {
            "pcie_static": {"max_pcie_width": 16, "max_pcie_speed": 32000, "pcie_interface_version": 5},
            "pcie_metric": {
                "pcie_width": 16,
                "pcie_speed": 32000,
                "pcie_bandwidth": 0,
                "pcie_replay_count": 0,
                "pcie_l0_to_recovery_count": 0,
            },
        },
        "amdsmi_get_violation_status": {
            "acc_counter": 1000,
            "acc_ppt_pwr": 0,
            "acc_socket_thrm": 0,
            "acc_vr_thrm": 0,
            "acc_hbm_thrm": 0,
            "acc_prochot_thrm": 0,
            "active_ppt_pwr": False,
            "active_socket_thrm": False,
            "active_vr_thrm": False,
            "active_hbm_thrm": "N/A",
            "active_prochot_thrm": False,
        },
        "amdsmi_get_gpu_xgmi_link_status": {"status": ["U"] * 7 + ["X"], "total_links": 8},
        "amdsmi_get_energy_count": {"energy_accumulator": 1_000_000, "counter_resolution": 15.259, "timestamp": 1},
    }
    results.update(over)
    return results


def test_amdsmi_results_of_a_well_mi300x():
    reading = from_amdsmi(0, 100.0, amd_results())
    assert reading.vendor == "amd"
    assert (reading.ecc_correctable, reading.ecc_uncorrectable, reading.ecc_deferred) == (4, 0, 0)
    assert reading.ecc_blocks == (EccBlock("UMC", 4, 0, 0), EccBlock("GFX", None, 0, 0))
    assert (reading.pages_retired, reading.pages_pending, reading.pages_unreservable) == (2, 0, 0)
    assert (reading.pcie_gen, reading.pcie_width, reading.pcie_gen_max, reading.pcie_width_max) == (5, 16, 5, 16)
    assert reading.throttle_reasons == ()
    assert reading.link_kind == "xgmi" and len(reading.links) == 7  # the disabled link is not wired
    assert reading.energy_j == pytest.approx(15.259)
    assert evaluate([reading]).state == OK


def test_amdsmi_sick_mi300x():
    pages = [{"status": 0}, {"status": 1}, {"status": 2}]
    pcie = amd_results()["amdsmi_get_pcie_info"]
    pcie = {
        "pcie_static": pcie["pcie_static"],
        "pcie_metric": {**pcie["pcie_metric"], "pcie_speed": 16000, "pcie_width": 8},
    }
    reading = from_amdsmi(
        5,
        100.0,
        amd_results(
            amdsmi_get_gpu_bad_page_info=pages,
            amdsmi_get_pcie_info=pcie,
            amdsmi_get_gpu_xgmi_link_status={"status": ["U", "D", "U", "N/A"], "total_links": 4},
        ),
        events=[
            {"event": "GPU_PRE_RESET", "message": "reset begins"},
            {"event": "GPU_POST_RESET", "message": "reset done"},
            {"event": "THERMAL_THROTTLE", "message": "hot"},
        ],
    )
    assert (reading.pages_retired, reading.pages_pending, reading.pages_unreservable) == (1, 1, 1)
    assert reading.links == (LinkHealth(0, True), LinkHealth(1, False), LinkHealth(2, True), LinkHealth(3, None))
    assert [f.kind for f in reading.faults] == ["reset"]  # pre and post reset are one reset
    verdict = evaluate([reading])
    assert verdict.state == FAIL
    assert verdict.reasons.startswith("1 bad page pending retirement; 1 bad page unreservable; ")
    assert "PCIe gen 4 x8 (max gen 5 x16)" in verdict.reasons
    assert "XGMI link 1 down" in verdict.reasons and "GPU reset at " in verdict.reasons


def test_amdsmi_residency_counters_give_the_throttled_share():
    def at(t, counter, ppt, active):
        status = dict(amd_results()["amdsmi_get_violation_status"], acc_counter=counter, acc_ppt_pwr=ppt)
        status["active_ppt_pwr"] = active
        return from_amdsmi(0, t, amd_results(amdsmi_get_violation_status=status))

    # 60 s in which the accumulation counter ran 6000 ticks, 4500 of them at the power limit.
    history = [at(0, 1000, 0, False), at(30, 4000, 1500, True), at(60, 7000, 4500, True)]
    assert history[-1].throttle_reasons == ("power",)
    verdict = evaluate(history)
    assert verdict.state == WARN and verdict.reasons == "throttled (power cap) 75% of last 60 s"


def test_amdsmi_not_available_is_none_never_zero():
    na = {"correctable_count": "N/A", "uncorrectable_count": "N/A", "deferred_count": "N/A"}
    reading = from_amdsmi(1, 5.0, {"amdsmi_get_gpu_total_ecc_count": na, "amdsmi_get_pcie_info": None})
    assert reading.ecc_correctable is None and reading.ecc_uncorrectable is None
    assert reading.pcie_gen is None and reading.pages_pending is None and reading.throttle_reasons is None
    assert evaluate([reading]).state == OK
