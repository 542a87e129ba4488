"""Alert conditions (a small parser, no eval) and the pure engine (console/core/alerts.py)."""

from __future__ import annotations

import json

import pytest

from console.core.alerts import (
    CLEARED,
    FIRED,
    AlertEngine,
    AlertRule,
    ConditionError,
    gpu_values,
    notice_for_test,
    parse_condition,
)
from console.core.events import Event
from console.core.health import HealthReading, HealthVerdict
from console.core.model import GpuMetrics


def rule(when: str, **kw) -> AlertRule:
    return AlertRule(name=kw.pop("name", "r"), condition=parse_condition(when), **kw)


# ---------------------------------------------------------------- parser


@pytest.mark.parametrize(
    ("text", "subject", "name", "op", "value", "duration"),
    [
        ("temp_junction_c > 95 for 30s", "metric", "temp_junction_c", ">", 95.0, 30.0),
        ("power_w >= 690.5", "metric", "power_w", ">=", 690.5, 0.0),
        ("throttle_pct>50 for 5m", "metric", "throttle_pct", ">", 50.0, 300.0),
        ("vram_used_pct = 100 for 1h", "metric", "vram_used_pct", "==", 100.0, 3600.0),
        ("health == fail", "health", "health", "==", "fail", 0.0),
        ("health >= warn for 10m", "health", "health", ">=", "warn", 600.0),
        ("node down for 60s", "node", "node", "==", "down", 60.0),
        ("node != up for 2m", "node", "node", "!=", "live", 120.0),
        ("instance failed", "instance", "instance.failed", "==", None, 0.0),
        ("event gpu.xid", "event", "gpu.xid", "==", None, 0.0),
    ],
)
def test_conditions_that_parse(text, subject, name, op, value, duration):
    cond = parse_condition(text)
    assert (cond.subject, cond.name, cond.op, cond.value, cond.duration) == (subject, name, op, value, duration)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("temp_junc > 95", "unknown metric 'temp_junc'; did you mean 'temp_junction_c'?"),
        ("temp_junction_c > hot", "expected 'temp_junction_c OP NUMBER'"),
        ("temp_junction_c > 95 for", "'for' at column 22 needs one duration"),
        ("temp_junction_c > 95 for 30x", "'30x' is not a duration"),
        ("temp_junction_c > 95 for 0s", "must be more than 0"),
        ("health == sick", "unknown health state 'sick'"),
        ("node sleeping", "STATE one of: up, stale, down (got 'sleeping')"),
        ("node > down", "compares with == or !="),
        ("instance exploded", "unknown instance state 'exploded'"),
        ("instance failed for 5m", "takes no 'for' duration"),
        ("event gpu.xd", "did you mean 'gpu.xid'?"),
        ("__import__('os').system('x')", "unexpected '('"),
        ("temp_junction_c > 95; rm -rf /", "unexpected ';'"),
        ("   ", "empty condition"),
    ],
)
def test_conditions_that_do_not(text, message):
    with pytest.raises(ConditionError) as err:
        parse_condition(text)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- engine


def test_metric_alert_fires_after_its_duration_and_clears():
    engine = AlertEngine([rule("temp_junction_c > 95 for 30s", name="hot")])
    assert engine.observe_gpu(0, "n1", 3, {"temp_junction_c": 97.0}) == []
    assert engine.observe_gpu(20, "n1", 3, {"temp_junction_c": 98.0}) == []
    fired = engine.observe_gpu(30, "n1", 3, {"temp_junction_c": 99.0})
    assert len(fired) == 1
    notice = fired[0]
    assert (notice.state, notice.node, notice.gpu, notice.value, notice.since) == (FIRED, "n1", 3, 99.0, 0)
    assert notice.text == "[rocm-console] FIRED hot: n1 GPU 3: temp_junction_c > 95 for 30s (now 99)"
    # Still hot: the active alert does not fire again.
    assert engine.observe_gpu(40, "n1", 3, {"temp_junction_c": 99.0}) == []
    assert engine.active() == [("hot", ("n1", 3))]
    cleared = engine.observe_gpu(50, "n1", 3, {"temp_junction_c": 80.0})
    assert [(n.state, n.since) for n in cleared] == [(CLEARED, 0)]
    assert cleared[0].text == "[rocm-console] CLEARED hot: n1 GPU 3 (temp_junction_c > 95 for 30s, held 50s)"
    assert engine.active() == []


def test_a_dip_restarts_the_duration_and_na_is_no_evidence():
    engine = AlertEngine([rule("temp_junction_c > 95 for 30s")])
    engine.observe_gpu(0, "n", 0, {"temp_junction_c": 97.0})
    engine.observe_gpu(20, "n", 0, {"temp_junction_c": None})  # N/A
    assert engine.observe_gpu(35, "n", 0, {"temp_junction_c": 97.0}) == []
    assert len(engine.observe_gpu(65, "n", 0, {"temp_junction_c": 97.0})) == 1


def test_gpus_are_separate_subjects():
    engine = AlertEngine([rule("health == fail")])
    out = engine.observe_gpu(0, "n", 0, {}, "fail") + engine.observe_gpu(0, "n", 1, {}, "fail")
    assert [(n.gpu, n.state) for n in out] == [(0, FIRED), (1, FIRED)]
    assert engine.observe_gpu(1, "n", 0, {}, "warn")[0].state == CLEARED


def test_health_order():
    engine = AlertEngine([rule("health >= warn")])
    assert engine.observe_gpu(0, "n", 0, {}, "ok") == []
    assert engine.observe_gpu(1, "n", 0, {}, "fail")[0].value == "fail"


def test_node_down_for_60s_fires_from_the_clock():
    engine = AlertEngine([rule("node down for 60s", name="down")])
    assert engine.observe_node(0, "n1", "live") == []
    assert engine.observe_node(10, "n1", "down") == []
    assert engine.tick(40) == []
    fired = engine.tick(71)
    assert [(n.state, n.node, n.gpu) for n in fired] == [(FIRED, "n1", None)]
    assert engine.tick(80) == []
    assert engine.observe_node(90, "n1", "connecting") == []  # neither holds nor clears
    assert [n.state for n in engine.observe_node(95, "n1", "live")] == [CLEARED]


def test_repeats_are_rate_limited_and_counted():
    engine = AlertEngine([rule("health == fail", repeat_after=300, name="sick")])
    assert len(engine.observe_gpu(0, "n", 0, {}, "fail")) == 1
    assert len(engine.observe_gpu(10, "n", 0, {}, "ok")) == 1  # cleared
    # Flapping within repeat_after: held back, and its clear is silent too.
    assert engine.observe_gpu(20, "n", 0, {}, "fail") == []
    assert engine.observe_gpu(30, "n", 0, {}, "ok") == []
    assert engine.observe_gpu(40, "n", 0, {}, "fail") == []
    assert engine.observe_gpu(50, "n", 0, {}, "ok") == []
    again = engine.observe_gpu(400, "n", 0, {}, "fail")
    assert len(again) == 1 and again[0].suppressed == 2
    assert "2 more held back by the rate limit" in again[0].text


def test_max_per_hour_across_subjects():
    engine = AlertEngine([rule("health == fail", max_per_hour=2)])
    fired = [n for gpu in range(5) for n in engine.observe_gpu(gpu, "n", gpu, {}, "fail")]
    assert [n.gpu for n in fired] == [0, 1]
    later = engine.observe_gpu(3700, "n", 7, {}, "fail")
    assert len(later) == 1 and later[0].suppressed == 3


def test_instance_failed_and_event_rules_fire_once_per_event():
    engine = AlertEngine([rule("instance failed", name="inst"), rule("event gpu.xid", name="xid", nodes=("n2",))])
    failed = Event(100.0, "instance.failed", "n1", 0, "llama", "fail", "exit 1: CUDA out of memory")
    out = engine.observe_event(failed)
    assert [(n.rule.name, n.instance, n.node, n.value) for n in out] == [
        ("inst", "llama", "n1", "exit 1: CUDA out of memory")
    ]
    assert out[0].text == "[rocm-console] FIRED inst: n1 GPU 0 instance llama: instance failed"
    assert engine.observe_event(failed) == []  # the same again within repeat_after
    assert engine.observe_event(Event(101.0, "gpu.xid", "n1", 0)) == []  # not this rule's node
    assert [n.rule.name for n in engine.observe_event(Event(102.0, "gpu.xid", "n2", 0))] == ["xid"]
    assert engine.active() == []


def test_rules_limited_to_nodes():
    engine = AlertEngine([rule("health == fail", nodes=("a",))])
    assert engine.observe_gpu(0, "b", 0, {}, "fail") == []
    assert len(engine.observe_gpu(0, "a", 0, {}, "fail")) == 1


def test_notice_payload_and_event():
    r = rule("temp_junction_c > 95 for 30s", name="hot", severity="fail")
    engine = AlertEngine([r])
    engine.observe_gpu(0, "n1", 2, {"temp_junction_c": 96.5})
    notice = engine.observe_gpu(30, "n1", 2, {"temp_junction_c": 96.5})[0]
    payload = json.loads(json.dumps(notice.payload()))
    assert payload["text"] == notice.text
    assert {k: payload[k] for k in ("alert", "state", "severity", "node", "gpu", "value", "condition")} == {
        "alert": "hot",
        "state": "fired",
        "severity": "fail",
        "node": "n1",
        "gpu": 2,
        "value": 96.5,
        "condition": "temp_junction_c > 95 for 30s",
    }
    event = notice.event()
    assert (event.kind, event.severity, event.node, event.gpu) == ("alert.fired", "fail", "n1", 2)
    assert event.message.startswith("FIRED hot: n1 GPU 2")
    test = notice_for_test(r, 5.0)
    assert test.payload()["state"] == "test" and test.event().details["test"] is True
    assert test.text.startswith("[rocm-console] TEST hot: ")


def test_gpu_values_from_telemetry_and_health():
    metrics = GpuMetrics(0, temp_junction_c=70.0, vram_used_mib=48000.0, vram_total_mib=192000.0)
    reading = HealthReading(t=0, gpu=0, ecc_correctable=4, pages_pending=1)
    values = gpu_values(metrics, reading, HealthVerdict("warn", throttle_share=0.4))
    assert values["temp_junction_c"] == 70.0 and values["vram_used_pct"] == 25.0
    assert values["ecc_correctable"] == 4.0 and values["pages_pending"] == 1.0 and values["throttle_pct"] == 40.0
    assert values["power_w"] is None and values["ecc_uncorrectable"] is None
