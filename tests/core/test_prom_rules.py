"""[[alert]] conditions as Prometheus alerting rules (console/core/prom_rules.py): each kind of
condition over DME's series or the console's own, the rules with no series named (never
dropped in silence), and YAML that reads back exactly whatever a profile holds."""

from __future__ import annotations

import yaml

from console.core.alerts import AlertRule, parse_condition
from console.core.prom_rules import rules_yaml, translate, yaml_string


def _rule(name: str, when: str, **kw) -> AlertRule:
    return AlertRule(name=name, condition=parse_condition(when), **kw)


def _one(rule: AlertRule, **kw):
    done = translate([rule], **kw)
    assert done.skipped == ()
    return done.rules[0]


def test_gpu_metrics_read_dmes_series_by_host_and_gpu():
    hot = _one(_rule("hot", "temp_junction_c > 95 for 30s"), prefix="")
    assert hot.expr.startswith("(max by (hostname, gpu_id) (gpu_junction_temperature{")
    assert "or max by (hostname, gpu_id) (gpu_edge_temperature{" in hot.expr  # MI2xx: the edge sensor
    assert hot.expr.endswith(") > 95.0")
    assert hot.for_s == 30
    busy = _one(_rule("busy", "util_pct >= 90"), prefix="amd_")
    assert busy.expr == "max by (hostname, gpu_id) (amd_gpu_gfx_activity) >= 90.0"
    either = _one(_rule("busy", "util_pct >= 90"))  # prefix not known: both spellings
    assert '{__name__=~"(amd_)?gpu_gfx_activity"}' in either.expr
    ecc = _one(_rule("ecc", "ecc_uncorrectable > 0"), prefix="", host_label="host")
    assert ecc.expr.startswith("max by (host, gpu_id) (gpu_ecc_uncorrect_total{")
    energy = _one(_rule("e", "energy_j > 1000"), prefix="")
    assert "gpu_energy_consumed" in energy.expr and "/ 1e6" in energy.expr  # DME counts µJ
    throttled = _one(_rule("t", "throttle_pct > 50 for 5m"), prefix="", throttle_window=120)
    assert "[2m]" in throttled.expr and "gpu_violation_current_accumulated_counter" in throttled.expr


def test_a_rules_nodes_become_its_hosts():
    rule = _rule("busy", "util_pct > 90", nodes=("gpu-a",))
    got = _one(rule, prefix="", node_hosts={"gpu-a": "gpu-a.lab.example"})
    assert 'hostname=~"gpu\\\\-a(\\\\..*)?"' in got.expr  # the short name, with or without a domain


def test_health_and_node_conditions_read_the_consoles_own_series():
    sick = _one(_rule("sick", "health >= warn", severity="fail", nodes=("n1",)))
    assert sick.expr == 'rocm_console_gpu_health_state{node=~"n1"} >= 1'
    assert ("severity", "fail") in sick.labels
    down = _one(_rule("gone", "node down for 1m"))
    assert down.expr == 'rocm_console_node_state{state="down"} == 1' and down.for_s == 60
    not_up = _one(_rule("away", "node != up"))
    assert not_up.expr == 'rocm_console_node_state{state="live"} == 0'


def test_conditions_with_no_series_are_named_one_line_each():
    rules = [
        _rule("xid", "event gpu.xid", source="lab.toml", line=12),
        _rule("inst", "instance failed"),
        _rule("pages", "pages_retired > 0"),
        _rule("hot", "temp_junction_c > 95"),
    ]
    done = translate(rules)
    assert [r.alert for r in done.rules] == ["hot"]
    assert len(done.skipped) == 3
    assert done.skipped[0].startswith("lab.toml:12: [[alert]] rule 'xid' (event gpu.xid): not written")
    assert "'inst'" in done.skipped[1] and "'pages'" in done.skipped[2] and "bad pages" in done.skipped[2]
    assert all("\n" not in line for line in done.skipped)


def test_the_yaml_reads_back_exactly_and_alert_names_are_prometheus_names():
    rule = _rule("gpu-sick.v2", "health == fail for 90s")
    text = rules_yaml(translate([rule]), header=["a header: with a colon"])
    doc = yaml.safe_load(text)
    got = doc["groups"][0]["rules"][0]
    assert got["alert"] == "gpu_sick_v2"
    assert got["labels"]["rule"] == "gpu-sick.v2"
    assert got["for"] == "90s"
    assert got["expr"] == "rocm_console_gpu_health_state == 2"
    assert "{{ $labels.node }}" in got["annotations"]["summary"]
    assert yaml.safe_load(rules_yaml(translate([])))["groups"][0]["rules"] == []


def test_yaml_string_holds_any_text():
    for text in [
        'a "quoted" \\ back',
        "tab\tnew\nline",
        "\x00\x1b[31m\x7f\x85",
        "é ü 中文 🎉",
        "\ufeffbom",
        ": - [ ] { } # &",
    ]:
        assert yaml.safe_load("k: " + yaml_string(text))["k"] == text
