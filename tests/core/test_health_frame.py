"""The agent's `health` line (contract section 1) -> HealthFrame, and what the console makes of
the readings: status --json health, the serve preflight's refusal, doctor's lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.core.doctor import FAIL, OK, WARN, health_checks
from console.core.events import Event, failure_note, gpu_events_near
from console.core.health import HealthRules, HealthTracker
from console.core.model import GpuHealth, GpuStatic, HealthFrame, NodeHealth, NodeSnapshot
from console.core.status_view import health_refusal, health_warnings, node_dict
from console.core.telemetry import AgentProtocolError, parse_agent_line

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "hardware" / "h100-nvml-health-2026-11-26.json"


def amd_entry(physical: int, *, uncorrectable: int = 0, pending: int = 0, fw: bool = False, events=()) -> dict:
    """One AMD GPU entry as the agent writes it: results keyed by the real amdsmi function names."""
    results: dict = {
        "amdsmi_get_gpu_total_ecc_count": {
            "correctable_count": 0,
            "uncorrectable_count": uncorrectable,
            "deferred_count": 0,
        },
        "amdsmi_get_gpu_bad_page_info": [{"page_address": 4096 * i, "status": 1} for i in range(pending)],
        "amdsmi_get_pcie_info": {
            "pcie_static": {"max_pcie_width": 16, "max_pcie_speed": 32000},
            "pcie_metric": {"pcie_width": 16, "pcie_speed": 32000, "pcie_replay_count": 0},
        },
        "amdsmi_get_gpu_xgmi_link_status": {"status": ["U"] * 7 + ["X"]},
    }
    if fw:
        results["amdsmi_get_fw_info"] = {
            "fw_list": [
                {"fw_name": "FW_ID_SMU", "fw_version": "85.118.0"},
                {"fw_name": "FW_ID_PSP_SOSDRV", "fw_version": "0x0036"},
            ]
        }
    return {"physical": physical, "vendor": "amd", "source": "amdsmi", "results": results, "events": list(events)}


def health_line(ts: float, *entries: object, interval: float = 10.0) -> str:
    return json.dumps({"kind": "health", "ts": ts, "interval": interval, "gpus": list(entries)})


def test_amd_entries_parse_into_readings_with_firmware_and_reset():
    frame = parse_agent_line(
        health_line(
            100.0,
            amd_entry(0, fw=True),
            amd_entry(3, uncorrectable=2, events=[{"event": "GPU_PRE_RESET", "message": "reset \x1b[2Jby driver"}]),
        )
    )
    assert isinstance(frame, HealthFrame) and frame.interval == 10.0 and frame.notes == ()
    first, second = frame.readings
    assert (first.gpu, first.vendor, first.ecc_uncorrectable, first.pcie_gen, first.pcie_width) == (0, "amd", 0, 5, 16)
    assert first.firmware == (("SMU", "85.118.0"), ("PSP_SOSDRV", "0x0036"))
    assert second.gpu == 3 and second.ecc_uncorrectable == 2 and second.firmware is None
    [fault] = second.faults
    assert fault.kind == "reset" and "\x1b" not in fault.message  # text from the node made printable


def test_h100_capture_parses_as_an_nvidia_entry():
    record = json.loads(FIXTURE.read_text())["health_after"][0]
    frame = parse_agent_line(health_line(5.0, {"physical": 0, "vendor": "nvidia", "source": "nvml", "nvml": record}))
    [reading] = frame.readings
    assert reading.vendor == "nvidia" and reading.gpu == 0
    assert reading.t == record["t"]  # the record's own time, not the line's
    assert (reading.pcie_gen, reading.pcie_width, reading.ecc_uncorrectable) == (5, 16, 0)
    assert reading.energy_j == pytest.approx(record["energy_mj"] / 1000)


def test_a_bad_gpu_entry_is_skipped_with_a_note_naming_it():
    frame = parse_agent_line(
        health_line(1.0, amd_entry(0), {"physical": 5, "vendor": "amd", "results": "garbage"}, {"physical": "x"}, 7)
    )
    assert [r.gpu for r in frame.readings] == [0]
    assert len(frame.notes) == 3
    assert frame.notes[0].startswith("health of GPU 5 skipped:") and "results" in frame.notes[0]
    assert "entry 2" in frame.notes[1] and "entry 3" in frame.notes[2]


@pytest.mark.parametrize(
    "line, words",
    [
        ('{"kind": "health", "ts": 1, "gpus": {}}', "gpus is not a list"),
        ('{"kind": "health", "gpus": []}', "ts"),
        ('{"kind": "health", "ts": 1, "gpus": [], "interval": "x"}', "number"),
    ],
)
def test_a_bad_health_line_is_a_protocol_error(line, words):
    with pytest.raises(AgentProtocolError, match="bad health line") as exc:
        parse_agent_line(line)
    assert words in str(exc.value)


def test_tracker_keeps_the_firmware_sent_on_the_first_reading_only():
    tracker = HealthTracker(HealthRules())
    first, later = (parse_agent_line(health_line(t, amd_entry(0, fw=t == 1.0))).readings[0] for t in (1.0, 11.0))
    tracker.add(first)
    tracker.add(later)
    assert later.firmware is None and tracker.last is not None
    assert tracker.last.firmware == (("SMU", "85.118.0"), ("PSP_SOSDRV", "0x0036"))


def snapshot_with(states: dict[int, int], *, cpx: bool = False) -> NodeSnapshot:
    """A node of 2 physical GPUs (4 partitions each with cpx), the given uncorrectable counts."""
    static = tuple(
        GpuStatic(index=p * (4 if cpx else 1) + k, physical=p, partition_id=k)
        for p in (0, 1)
        for k in range(4 if cpx else 1)
    )
    health = []
    for physical, uncorrectable in states.items():
        tracker = HealthTracker()
        reading = parse_agent_line(health_line(50.0, amd_entry(physical, uncorrectable=uncorrectable))).readings[0]
        verdict = tracker.add(reading)
        health.append(GpuHealth(physical, verdict, reading, 50.0))
    return NodeSnapshot("n1", NodeHealth.LIVE, static=static, gpu_health=tuple(health))


def test_preflight_refuses_a_gpu_in_fail_health_naming_gpu_and_reason():
    snap = snapshot_with({0: 0, 1: 3})
    assert health_refusal(snap, [0]) is None
    refusal = health_refusal(snap, [0, 1])
    assert refusal == "GPU 1 is in fail health: 3 uncorrectable ECC errors (--force to start anyway)"
    # a partition of a sick physical GPU is refused too, naming both indices
    cpx = snapshot_with({1: 1}, cpx=True)
    assert health_refusal(cpx, [5]) == (
        "GPU 5 (physical GPU 1) is in fail health: 1 uncorrectable ECC error (--force to start anyway)"
    )
    assert health_refusal(snapshot_with({}), [0, 1]) is None  # no health read: nothing to refuse on


def test_warn_health_is_a_warning_not_a_refusal():
    snap = snapshot_with({0: 0})
    tracker = HealthTracker()
    entry = amd_entry(0)
    entry["results"]["amdsmi_get_pcie_info"]["pcie_metric"]["pcie_width"] = 8
    reading = parse_agent_line(health_line(9.0, entry)).readings[0]
    snap = NodeSnapshot(
        snap.name, snap.health, static=snap.static, gpu_health=(GpuHealth(0, tracker.add(reading), reading, 9.0),)
    )
    assert health_refusal(snap, [0]) is None
    assert health_warnings(snap, [0]) == ["GPU 0 health warn: PCIe gen 5 x8 (max gen 5 x16)"]


def test_status_json_carries_health_per_gpu():
    doc = node_dict(snapshot_with({0: 0, 1: 2}, cpx=True))
    by_index = {g["index"]: g for g in doc["gpus"]}
    assert by_index[0]["health"]["state"] == "ok" and by_index[0]["health"]["reasons"] == []
    sick = by_index[6]["health"]  # a partition of physical GPU 1
    assert sick["state"] == "fail" and sick["reasons"] == ["2 uncorrectable ECC errors"]
    assert sick["since"] == 50.0 and sick["rules"] == ["ecc_uncorrectable"]
    assert node_dict(snapshot_with({}))["gpus"][0]["health"] is None


def test_doctor_lines_name_the_next_step_per_finding():
    snap = snapshot_with({0: 0, 1: 1})
    entry = amd_entry(2, pending=1)
    reading = parse_agent_line(health_line(9.0, entry)).readings[0]
    pending = GpuHealth(2, HealthTracker().add(reading), reading, 9.0)
    checks = health_checks((*snap.gpu_health, pending), "n1")
    assert [(c.id, c.level) for c in checks] == [("health.gpu0", OK), ("health.gpu1", FAIL), ("health.gpu2", FAIL)]
    assert checks[1].detail == "1 uncorrectable ECC error" and "RMA" in checks[1].fix and "drain" in checks[1].fix
    assert "reboot" in checks[2].fix and "retire" in checks[2].fix
    assert all("\n" not in c.fix for c in checks)
    assert WARN != checks[0].level


def test_failure_note_names_the_gpu_events_around_a_failure():
    events = [
        Event(1000.0, "gpu.ecc", "n1", 1, severity="fail", message="uncorrectable ECC +1 (now 1)"),
        Event(1001.0, "gpu.health", "n1", 1, severity="fail", message="health ok -> fail: 1 uncorrectable ECC error"),
        Event(1002.0, "gpu.ecc", "n1", 2, severity="fail", message="another GPU"),
        Event(1003.0, "gpu.ecc", "n2", 1, severity="fail", message="another node"),
        Event(100.0, "gpu.reset", "n1", 1, severity="warn", message="long before"),
        Event(1004.0, "gpu.health", "n1", 1, severity="info", message="health fail -> ok"),
    ]
    near = gpu_events_near(events, "n1", {1}, when=1010.0)
    assert [e.time for e in near] == [1000.0, 1001.0]
    note = failure_note(near)
    assert note is not None and note.startswith("GPU events: GPU 1 ")
    assert "uncorrectable ECC +1" in note and "ok -> fail" in note
    assert failure_note([]) is None
