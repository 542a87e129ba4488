"""The event record and the pure event detector (console/core/events.py), with the real H100 capture."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from console.core.events import (
    Event,
    EventDetector,
    event_from_dict,
    event_to_dict,
    events_of,
    known_kind,
    matches,
    parse_since,
)
from console.core.health import GpuFault, HealthReading, LinkHealth
from console.core.health_readings import from_nvml

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "hardware" / "h100-nvml-health-2026-11-26.json"


@pytest.fixture(scope="module")
def capture() -> dict:
    return json.loads(CAPTURE.read_text())


# ---------------------------------------------------------------- the real capture


def test_h100_capture_records_one_throttle_episode_around_the_load(capture):
    samples = capture["samples"]
    events = events_of(EventDetector(), "h100", [from_nvml(s) for s in samples])
    starts = [e for e in events if e.kind == "gpu.throttle_start"]
    ends = [e for e in events if e.kind == "gpu.throttle_end"]
    assert len(starts) == 1 and len(ends) == 1
    start, end = starts[0], ends[0]
    capped = [s["t"] for s in samples if s["clock_event_names"] == ["sw_power_cap"]]
    # The episode begins within a second before the first sample at the cap and ends within
    # a second after the last one (the counters place it, not the moment of detection).
    assert capped[0] - 1.0 <= start.time <= capped[0]
    assert capped[-1] <= end.time <= capped[-1] + 1.0
    assert start.message == "throttle episode started (power cap)" and start.severity == "warn"
    assert end.details["reason"] == "power"
    # 80 s loop: the episode lasts about that, and the power residency counter agrees.
    residency_s = (samples[-1]["residency_ns"]["power"] - samples[0]["residency_ns"]["power"]) / 1e9
    assert end.details["duration_s"] == pytest.approx(residency_s, abs=1.0)
    assert end.message == f"throttle episode ended after {round(end.details['duration_s'])} s (power cap)"
    assert start.node == "h100" and start.gpu == 0
    # One health change in the capture: ok -> warn once the cap held a quarter of a minute.
    changes = [e for e in events if e.kind == "gpu.health"]
    assert [(c.details["from"], c.details["to"]) for c in changes] == [("ok", "warn")]
    assert changes[0].message.startswith("health ok -> warn: throttled (power cap) ")
    assert start.time < changes[0].time < end.time
    assert not [e for e in events if e.kind in ("gpu.ecc", "gpu.xid", "gpu.reset")]


def test_short_blips_do_not_make_an_episode(capture):
    idle = from_nvml(capture["samples"][0])

    def at(t, reasons):
        return replace(idle, t=t, residency=None, throttle_reasons=reasons, idle=not reasons)

    readings = [at(0, ()), at(1, ("power",)), at(2, ()), at(3, ("power",)), at(4, ()), at(5, ())]
    assert events_of(EventDetector(), "n", readings) == []


# ---------------------------------------------------------------- counters, faults, health


def reading(t: float, **kw) -> HealthReading:
    fields = dict(ecc_correctable=0, ecc_uncorrectable=0, pages_pending=0, throttle_reasons=())
    fields.update(kw)
    return HealthReading(t=t, gpu=1, **fields)


def test_ecc_increments_and_health_changes():
    det = EventDetector()
    assert det.health("a", reading(0)) == []  # first sight of a well GPU: nothing to say
    events = det.health("a", reading(10, ecc_correctable=2))
    assert [(e.kind, e.severity, e.message) for e in events] == [
        ("gpu.ecc", "warn", "correctable ECC +2 (now 2)"),
        ("gpu.health", "warn", "health ok -> warn: correctable ECC +2 in last 1 h"),
    ]
    events = det.health("a", reading(20, ecc_correctable=2, ecc_uncorrectable=1))
    assert [(e.kind, e.severity) for e in events] == [("gpu.ecc", "fail"), ("gpu.health", "fail")]
    assert events[1].details == {
        "from": "warn",
        "to": "fail",
        "reasons": ["1 uncorrectable ECC error", "correctable ECC +2 in last 1 h"],
    }
    assert det.verdict("a", 1).state == "fail"
    assert det.health("a", reading(30, ecc_correctable=2, ecc_uncorrectable=1)) == []  # no change, no event
    assert det.health("a", reading(5)) == []  # older than the last: ignored


def test_faults_become_events():
    fault = GpuFault("xid", 9.5, 79, "XID 79")
    reset = GpuFault("reset", 9.7, None, "GPU reset requested")
    events = EventDetector().health("b", reading(10, faults=(fault, reset)))
    assert [(e.kind, e.time, e.message) for e in events[:2]] == [
        ("gpu.xid", 9.5, "XID 79"),
        ("gpu.reset", 9.7, "GPU reset: GPU reset requested"),
    ]
    assert events[0].details == {"fault": "xid", "code": 79}
    assert events[2].kind == "gpu.health" and events[2].details["to"] == "warn"


def test_first_sick_reading_is_a_health_change():
    links = (LinkHealth(0, True), LinkHealth(1, False))
    events = EventDetector().health("c", reading(0, link_kind="xgmi", links=links))
    assert [(e.kind, e.message) for e in events] == [("gpu.health", "health unknown -> warn: XGMI link 1 down")]


def test_node_states():
    det = EventDetector()
    assert det.node_state("n", "connecting", 0) == []
    assert [e.kind for e in det.node_state("n", "live", 1)] == ["node.up"]
    assert det.node_state("n", "live", 2) == []
    stale = det.node_state("n", "stale", 3)
    assert [(e.kind, e.severity, e.message) for e in stale] == [("node.stale", "warn", "node stale (was live)")]
    down = det.node_state("n", "down", 4, reason="ssh: connection refused")
    assert down[0].message == "node down (was stale): ssh: connection refused" and down[0].severity == "fail"


# ---------------------------------------------------------------- record, filters, since


def test_event_round_trip_and_validation():
    event = Event(5.0, "instance.failed", "n1", 2, "llama", "fail", "exit 1:\nCUDA out of memory", {"code": 1})
    assert event.message == "exit 1: CUDA out of memory"  # one line
    data = event_to_dict(event)
    assert json.loads(json.dumps(data)) == data
    assert event_from_dict(data) == event
    with pytest.raises(ValueError, match="unknown event kind"):
        Event(1.0, "gpu.melted")
    with pytest.raises(ValueError, match="unknown severity"):
        Event(1.0, "gpu.ecc", severity="panic")
    for bad in ([1], {"kind": "gpu.ecc"}, {"time": 1, "kind": "gpu.ecc", "gpu": "0"}):
        with pytest.raises(ValueError):
            event_from_dict(bad)
    assert len(Event(1.0, "gpu.ecc", message="x" * 2000).message) == 500


def test_filters():
    event = Event(100.0, "gpu.throttle_start", "n1", 3)
    assert matches(event, kind="gpu") and matches(event, kind="gpu.throttle_start")
    assert not matches(event, kind="gpu.throttle_end") and not matches(event, kind="node")
    assert matches(event, node="n1", gpu=3, since=100.0)
    assert not matches(event, node="n2") and not matches(event, gpu=0) and not matches(event, since=100.5)
    assert known_kind("gpu") and known_kind("alert.fired") and not known_kind("gpux") and not known_kind("gp")


def test_parse_since():
    now = 1_000_000.0
    assert parse_since("30s", now) == now - 30
    assert parse_since("15m", now) == now - 900
    assert parse_since("1h", now) == now - 3600
    assert parse_since("1.5d", now) == now - 1.5 * 86400
    assert parse_since("2026-11-21", now) > 0
    for bad in ("5x", "h1", "yesterday", ""):
        with pytest.raises(ValueError, match="expected a duration"):
            parse_since(bad, now)
