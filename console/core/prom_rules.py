"""The profile's ``[[alert]]`` conditions as Prometheus alerting rules (``rocm-console alerts
export --prometheus-rules FILE``, docs/watch.md "Prometheus").

For sites whose Prometheus scrapes AMD's Device Metrics Exporter (DME): a GPU metric or
health figure becomes a PromQL expression over DME's series (the names console/core/dme.py
reads, by ``(hostname, gpu_id)``), ``health`` and ``node`` conditions the console's own
series (``rocm_console_gpu_health_state``, ``rocm_console_node_state``: a watcher with
``--metrics-port``). What neither has (instance and event conditions, bad pages, the power
cap) is not written: ``Translation.skipped`` names each rule, one line each.

Pure and stdlib: the YAML is written here by hand, every string double-quoted with YAML's
escapes (``yaml_string``), so no text from a profile can break the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from console.core.alerts import AlertRule, Condition
from console.core.dme import CLOCK_TYPE, DEVICE_SERIES, GPU_ID, MEMORY_CLOCK, SYSTEM_CLOCK, host_selector

__all__ = ["HEALTH_VALUES", "PromRule", "Translation", "rules_yaml", "translate", "yaml_string"]

# rocm_console_gpu_health_state's values (console/services/metrics_export.py says the same)
HEALTH_VALUES = {"unknown": -1, "ok": 0, "warn": 1, "fail": 2}
_ALERT_NAME_RE = re.compile(r"[^A-Za-z0-9_:]")

# console metric -> (DME families tried in order, device-wide?, extra matcher, how a value reads)
# Device-wide values live on a physical GPU's first partition's series (DEVICE_SERIES); a
# family whose 0 means "not available" (power, temperatures) is asked with "> 0".
_SIMPLE: dict[str, tuple[tuple[str, ...], bool, str, str]] = {
    "util_pct": (("gpu_gfx_activity",), False, "", ""),
    "umc_pct": (("gpu_umc_activity",), True, "", ""),
    "vram_used_mib": (("gpu_used_vram",), False, "", ""),
    "vram_total_mib": (("gpu_total_vram",), False, "", ""),
    "power_w": (("gpu_package_power", "gpu_average_package_power", "gpu_power_usage"), True, "", " > 0"),
    "temp_junction_c": (("gpu_junction_temperature", "gpu_edge_temperature"), True, "", " > 0"),
    "temp_mem_c": (("gpu_memory_temperature",), True, "", " > 0"),
    "gfx_clock_mhz": (("gpu_clock",), True, f'{CLOCK_TYPE}=~"{SYSTEM_CLOCK}"', ""),
    "mem_clock_mhz": (("gpu_clock",), True, f'{CLOCK_TYPE}=~"{MEMORY_CLOCK}"', ""),
    "ecc_correctable": (("gpu_ecc_correct_total",), True, "", ""),
    "ecc_uncorrectable": (("gpu_ecc_uncorrect_total",), True, "", ""),
    "ecc_deferred": (("gpu_ecc_deferred_total",), True, "", ""),
    "pcie_replay": (("pcie_replay_count",), True, "", ""),
}
_RESIDENCY = "gpu_violation_(ppt|socket_thermal|vr_thermal|hbm_thermal|processor_hot)_residency_accumulated"
_VIOLATION_CLOCK = "gpu_violation_current_accumulated_counter"
_NO_DME = {
    "power_cap_w": "DME exports no power cap",
    "pages_retired": "DME exports no bad pages",
    "pages_pending": "DME exports no bad pages",
    "pages_unreservable": "DME exports no bad pages",
}


@dataclass(frozen=True)
class PromRule:
    """One alerting rule as Prometheus reads it."""

    alert: str
    expr: str
    for_s: float
    labels: tuple[tuple[str, str], ...]
    annotations: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Translation:
    rules: tuple[PromRule, ...]
    skipped: tuple[str, ...]  # one line per rule not written, naming it and why


# ---------------------------------------------------------------- PromQL


def _number(value: float) -> str:
    text = repr(float(value))
    return text.replace("inf", "Inf") if math.isinf(value) else text


def _promql_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _selector(family: str, prefix: str | None, matchers: Sequence[str]) -> str:
    """``amd_gpu_x{...}``, or, when the prefix is not known, both DME spellings by name."""
    where = [m for m in matchers if m]
    if prefix is None:
        return "{" + ", ".join([f"__name__=~{_promql_string('(amd_)?' + family)}", *where]) + "}"
    return f"{prefix}{family}" + ("{" + ", ".join(where) + "}" if where else "")


def _dme_expr(metric: str, *, prefix: str | None, host_label: str, hosts: str, throttle_window: float) -> str | None:
    by = f"max by ({host_label}, {GPU_ID})"
    if metric in _SIMPLE:
        families, device, extra, cond = _SIMPLE[metric]
        matchers = [hosts, DEVICE_SERIES if device else "", extra]
        terms = [f"{by} ({_selector(f, prefix, matchers)}{cond})" for f in families]
        return terms[0] if len(terms) == 1 else "(" + " or ".join(terms) + ")"
    if metric == "energy_j":  # DME: microjoules
        return f"{by} ({_selector('gpu_energy_consumed', prefix, [hosts, DEVICE_SERIES])}) / 1e6"
    if metric == "vram_used_pct":
        used = f"{by} ({_selector('gpu_used_vram', prefix, [hosts])})"
        total = f"{by} ({_selector('gpu_total_vram', prefix, [hosts])} > 0)"
        return f"100 * {used} / {total}"
    if metric == "throttle_pct":  # the largest reason's share of the window, as health.py counts it
        window = f"[{_duration(throttle_window)}]"
        residency = _selector(_RESIDENCY, prefix, [hosts, DEVICE_SERIES])
        clock = _selector(_VIOLATION_CLOCK, prefix, [hosts, DEVICE_SERIES])
        return f"100 * {by} (rate({residency}{window})) / {by} (rate({clock}{window}) > 0)"
    return None


def _expr(
    rule: AlertRule,
    *,
    prefix: str | None,
    host_label: str,
    node_hosts: Mapping[str, str],
    throttle_window: float,
) -> tuple[str | None, str]:
    """(PromQL, '') or (None, why it has no series)."""
    c: Condition = rule.condition
    if c.subject in ("metric",):
        if c.name in _NO_DME:
            return None, _NO_DME[c.name]
        hosts = host_selector(host_label, [node_hosts.get(n, n) for n in rule.nodes]) if rule.nodes else ""
        expr = _dme_expr(c.name, prefix=prefix, host_label=host_label, hosts=hosts, throttle_window=throttle_window)
        if expr is None:
            return None, f"no DME series for {c.name}"
        return f"{expr} {c.op} {_number(float(c.value or 0.0))}", ""
    nodes = f"node=~{_promql_string('|'.join(re.escape(n) for n in rule.nodes))}" if rule.nodes else ""
    if c.subject == "health":
        series = "rocm_console_gpu_health_state" + ("{" + nodes + "}" if nodes else "")
        return f"{series} {c.op} {HEALTH_VALUES[str(c.value)]}", ""
    if c.subject == "node":
        matchers = ", ".join(m for m in (nodes, f"state={_promql_string(str(c.value))}") if m)
        return f"rocm_console_node_state{{{matchers}}} == {1 if c.op == '==' else 0}", ""
    kind = "an instance event" if c.subject == "instance" else "an event of the timeline"
    return None, f"{kind}: no series to evaluate (only a console or the watcher sees it)"


# ---------------------------------------------------------------- rules


def _duration(seconds: float) -> str:
    ms = round(seconds * 1000)
    if ms % 1000:
        return f"{ms}ms"
    s = ms // 1000
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s and s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


def _template_safe(text: str) -> str:
    """Profile text inside an annotation (a Go template): '{{' and '}}' must not start one."""
    return text.replace("{{", "{ {").replace("}}", "} }")


def _alert_name(name: str) -> str:
    """Prometheus alert names are metric names: [a-zA-Z_:][a-zA-Z0-9_:]*."""
    safe = _ALERT_NAME_RE.sub("_", name) or "alert"
    return safe if not safe[0].isdigit() else "_" + safe


def translate(
    rules: Sequence[AlertRule],
    *,
    prefix: str | None = None,
    host_label: str = "hostname",
    node_hosts: Mapping[str, str] | None = None,
    throttle_window: float = 60.0,
) -> Translation:
    """Every rule with series to evaluate as a PromRule; the others named in ``skipped``.

    prefix: DME's metric prefix ("" or "amd_"; None: both spellings); node_hosts: profile
    node -> its DME hostname (a rule's ``nodes``); throttle_window: [health] throttle_window."""
    hosts = dict(node_hosts or {})
    out: list[PromRule] = []
    skipped: list[str] = []
    for rule in rules:
        expr, why = _expr(rule, prefix=prefix, host_label=host_label, node_hosts=hosts, throttle_window=throttle_window)
        where = f"{rule.source}:{rule.line}: " if rule.source and rule.line else ""
        if expr is None:
            skipped.append(f"{where}[[alert]] rule {rule.name!r} ({rule.condition.text}): not written: {why}")
            continue
        c = rule.condition
        if c.subject in ("health", "node"):
            subject = "{{ $labels.node }}" + (" GPU {{ $labels.gpu }}" if c.subject == "health" else "")
        else:
            subject = "{{ $labels." + host_label + " }} GPU {{ $labels." + GPU_ID + " }}"
        name = _template_safe(rule.name)
        out.append(
            PromRule(
                alert=_alert_name(rule.name),
                expr=expr,
                for_s=c.duration,
                labels=(("severity", rule.severity), ("rule", rule.name), ("source", "rocm-console")),
                annotations=(
                    ("summary", f"{name}: {subject}: {_template_safe(c.describe())} (now {{{{ $value }}}})"),
                    ("condition", _template_safe(c.text)),
                ),
            )
        )
    return Translation(tuple(out), tuple(skipped))


# ---------------------------------------------------------------- YAML


def yaml_string(text: str) -> str:
    """A YAML double-quoted scalar holding exactly ``text``: quotes and backslashes escaped,
    every character YAML does not allow printed (controls, C1, surrogates, BOM) as an escape."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF or code in (0xFEFF, 0xFFFE, 0xFFFF, 0x2028, 0x2029):
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def rules_yaml(translation: Translation, *, group: str = "rocm-console", header: Sequence[str] = ()) -> str:
    """The rule file (Prometheus ``rule_files``): one group holding every rule."""
    lines = [f"# {_one_line(h)}" for h in header]
    lines += ["groups:", f"  - name: {yaml_string(group)}", "    rules:" + ("" if translation.rules else " []")]
    for r in translation.rules:
        lines.append(f"      - alert: {yaml_string(r.alert)}")
        lines.append(f"        expr: {yaml_string(r.expr)}")
        if r.for_s:
            lines.append(f"        for: {_duration(r.for_s)}")
        for key, table in (("labels", r.labels), ("annotations", r.annotations)):
            lines.append(f"        {key}:")
            lines += [f"          {k}: {yaml_string(v)}" for k, v in table]
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in text)
