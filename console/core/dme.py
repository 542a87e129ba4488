"""AMD Device Metrics Exporter (DME) series in Prometheus -> the console's telemetry records.

Pure: builds the PromQL the Prometheus source sends and parses the JSON that comes
back into the same GpuStatic / GpuMetrics records the SSH agent produces. Metric
and label names, units and sources: docs/prometheus.md.

One instant query per refresh covers the whole fleet: every family is reduced
with ``max by (<GPU labels>)`` (newer DME releases add per-process labels, so one
GPU may have several series) and tagged with a ``console_field`` label by
``label_replace``; the families are joined with ``or``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from console.core.model import GpuMetrics, GpuStatic

# The labels DME always sets on a GPU series (docs/prometheus.md, "Labels").
GPU_ID = "gpu_id"
PARTITION_ID = "gpu_partition_id"
SERIAL = "serial_number"
MODEL = "card_model"
COMPUTE_PARTITION = "gpu_compute_partition_type"
MEMORY_PARTITION = "gpu_memory_partition_type"
GPU_LABELS = (GPU_ID, PARTITION_ID, SERIAL, MODEL, COMPUTE_PARTITION, MEMORY_PARTITION)
FIELD_LABEL = "console_field"

# console field -> (DME metric, extra label matcher or "").
# gpu_clock's clock_type is the enum name in DME's code (GPU_CLOCK_TYPE_SYSTEM)
# and the short form in newer docs (system): accept both.
FAMILIES: dict[str, tuple[str, str]] = {
    "util_pct": ("gpu_gfx_activity", ""),
    "umc_pct": ("gpu_umc_activity", ""),
    "vram_used_mib": ("gpu_used_vram", ""),
    "vram_total_mib": ("gpu_total_vram", ""),
    "power_w": ("gpu_package_power", ""),
    "power_usage_w": ("gpu_power_usage", ""),  # used where gpu_package_power is absent
    "temp_junction_c": ("gpu_junction_temperature", ""),
    "temp_mem_c": ("gpu_memory_temperature", ""),
    "gfx_clock_mhz": ("gpu_clock", 'clock_type=~"GPU_CLOCK_TYPE_SYSTEM|system"'),
    "mem_clock_mhz": ("gpu_clock", 'clock_type=~"GPU_CLOCK_TYPE_MEMORY|memory"'),
}
# Values of the physical device, reported on every partition of it by DME.
_DEVICE_FIELDS = frozenset(
    ("umc_pct", "power_w", "power_usage_w", "temp_junction_c", "temp_mem_c", "gfx_clock_mhz", "mem_clock_mhz")
)
# The newest sample time of each GPU: what "sample age" is measured from.
TS_FIELD = "ts"


class DmeResponseError(ValueError):
    """Prometheus answered something that is not a usable query result."""


@dataclass(frozen=True, slots=True)
class DmeHost:
    """One node's GPUs as DME last reported them through Prometheus."""

    hostname: str
    sample_ts: float | None  # newest scrape time of its series (Prometheus clock, epoch s)
    static: tuple[GpuStatic, ...]
    gpus: tuple[GpuMetrics, ...]


# ---------------------------------------------------------------- host names


def short_name(host: str) -> str:
    return host.split(".", 1)[0].lower()


def match_hosts(wanted: Mapping[str, str], found: Iterable[str]) -> dict[str, str]:
    """Profile node -> DME hostname label value.

    ``wanted`` maps node name -> the host name to look for. An exact match
    (ignoring case) wins; else the short names (before the first dot) match, so
    a profile's FQDN finds a node that reports its short name and vice versa.
    """
    exact: dict[str, str] = {}
    short: dict[str, str] = {}
    for host in found:
        exact.setdefault(host.lower(), host)
        short.setdefault(short_name(host), host)
    out = {}
    for node, host in wanted.items():
        hit = exact.get(host.lower()) or short.get(short_name(host))
        if hit is not None:
            out[node] = hit
    return out


def unmatched_hosts(wanted: Iterable[str], found: Iterable[str]) -> list[str]:
    """Hostnames in Prometheus that no profile host matches (``status --discover``)."""
    wanted = list(wanted)
    exact = {h.lower() for h in wanted}
    shorts = {short_name(h) for h in wanted}
    return sorted(h for h in set(found) if h.lower() not in exact and short_name(h) not in shorts)


def _promql_string(text: str) -> str:
    return json.dumps(text)  # PromQL double-quoted strings take JSON's escapes


def host_selector(label: str, hosts: Sequence[str] | None) -> str:
    """``hostname=~"a(\\..*)?|b(\\..*)?"``: each host by its short name, with or without a domain.

    Wider than match_hosts on purpose (gpu-1.a also fetches gpu-1.b); match_hosts
    then picks the right series.
    """
    if not hosts:
        return f'{label}!=""'
    alternatives = []
    for short in sorted({host.split(".", 1)[0] for host in hosts}):
        alternatives.append(re.escape(short) + r"(\..*)?")  # the short name and any FQDN of it
    return f"{label}=~{_promql_string('|'.join(alternatives))}"


# ---------------------------------------------------------------- queries


def fleet_query(label: str = "hostname", hosts: Sequence[str] | None = None) -> str:
    """The one instant query of a refresh: every family for the given hosts."""
    by = ", ".join((label, *GPU_LABELS))
    selector = host_selector(label, hosts)
    parts = []
    for field, (metric, extra) in FAMILIES.items():
        matchers = f"{selector}, {extra}" if extra else selector
        expr = f"max by ({by}) ({metric}{{{matchers}}})"
        parts.append(_tag(expr, field))
    stamp = f"max by ({by}) (timestamp(gpu_total_vram{{{selector}}}))"
    parts.append(_tag(stamp, TS_FIELD))
    return " or ".join(parts)


def _tag(expr: str, field: str) -> str:
    return f'label_replace({expr}, "{FIELD_LABEL}", "{field}", "", "")'


def hosts_query(label: str = "hostname") -> str:
    """Every host that has DME GPU series (for discovery)."""
    return f'count by ({label}) (gpu_total_vram{{{label}!=""}})'


# ---------------------------------------------------------------- parsing


def _data(payload: object, want: str) -> list:
    if not isinstance(payload, dict):
        raise DmeResponseError("not a JSON object")
    if payload.get("status") != "success":
        kind = payload.get("errorType") or "error"
        raise DmeResponseError(f"{kind}: {payload.get('error') or 'no message'}")
    data = payload.get("data")
    if not isinstance(data, dict):
        raise DmeResponseError("no data in the answer")
    if data.get("resultType") != want:
        raise DmeResponseError(f"expected a {want} result, got {data.get('resultType')!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise DmeResponseError("result is not a list")
    return result


def _value(raw: object) -> float | None:
    try:
        number = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _int_label(labels: Mapping[str, str], key: str) -> int | None:
    try:
        return int(labels.get(key, ""))
    except ValueError:
        return None


def _upper(value: str | None) -> str | None:
    return value.upper() if value else None


def parse_fleet(payload: object, label: str = "hostname") -> dict[str, DmeHost]:
    """An instant-query answer to fleet_query -> hostname -> DmeHost."""
    # hostname -> gpu_id -> (labels, {field: value})
    hosts: dict[str, dict[int, tuple[dict, dict[str, float | None]]]] = {}
    for item in _data(payload, "vector"):
        if not isinstance(item, dict):
            continue
        labels = item.get("metric")
        value = item.get("value")
        if not isinstance(labels, dict) or not isinstance(value, list) or len(value) != 2:
            continue
        host = labels.get(label)
        gpu = _int_label(labels, GPU_ID)
        field = labels.get(FIELD_LABEL)
        if not host or gpu is None or not field:
            continue
        entry = hosts.setdefault(host, {}).setdefault(gpu, (labels, {}))
        entry[1][field] = _value(value[1])
    return {host: _host(host, gpus) for host, gpus in hosts.items()}


def _host(host: str, gpus: Mapping[int, tuple[dict, dict[str, float | None]]]) -> DmeHost:
    physical = _physical_indices({gpu: labels for gpu, (labels, _) in gpus.items()})
    primary: dict[int, int] = {}
    for gpu in sorted(gpus):
        primary.setdefault(physical[gpu], gpu)
    static = []
    metrics = []
    newest: float | None = None
    for gpu in sorted(gpus):
        labels, fields = gpus[gpu]
        if primary[physical[gpu]] != gpu:
            # Like the SSH agent, a device's power, temperatures and clocks go on its
            # first partition only, so summing a node's power counts each GPU once.
            fields = {k: v for k, v in fields.items() if k not in _DEVICE_FIELDS}
        static.append(
            GpuStatic(
                index=gpu,
                physical=physical[gpu],
                partition_id=_int_label(labels, PARTITION_ID) or 0,
                model=labels.get(MODEL) or None,
                serial=labels.get(SERIAL) or None,
                vram_total_mib=fields.get("vram_total_mib"),
                compute_partition=_upper(labels.get(COMPUTE_PARTITION)),
                memory_partition=_upper(labels.get(MEMORY_PARTITION)),
            )
        )
        metrics.append(_metrics(gpu, fields))
        ts = fields.get(TS_FIELD)
        if ts is not None and (newest is None or ts > newest):
            newest = ts
    return DmeHost(host, newest, tuple(static), tuple(metrics))


def _metrics(gpu: int, fields: Mapping[str, float | None]) -> GpuMetrics:
    get = fields.get
    power = get("power_w")
    return GpuMetrics(
        index=gpu,
        util_pct=get("util_pct"),
        umc_pct=get("umc_pct"),
        vram_used_mib=get("vram_used_mib"),
        vram_total_mib=get("vram_total_mib"),
        power_w=power if power is not None else get("power_usage_w"),
        temp_junction_c=get("temp_junction_c"),
        temp_mem_c=get("temp_mem_c"),
        gfx_clock_mhz=get("gfx_clock_mhz"),
        mem_clock_mhz=get("mem_clock_mhz"),
    )


def _physical_indices(labels_by_gpu: Mapping[int, Mapping[str, str]]) -> dict[int, int]:
    """Logical GPU -> physical GPU: partitions of one device share its serial_number
    (DME labels a partition with its parent's serial); devices are numbered in
    the order of their lowest logical index. A GPU without a serial stands alone."""
    first_of: dict[str, int] = {}
    for gpu in sorted(labels_by_gpu):
        serial = labels_by_gpu[gpu].get(SERIAL) or f"\0{gpu}"
        first_of.setdefault(serial, gpu)
    rank = {serial: i for i, serial in enumerate(sorted(first_of, key=first_of.__getitem__))}
    return {gpu: rank[labels.get(SERIAL) or f"\0{gpu}"] for gpu, labels in labels_by_gpu.items()}


def parse_hosts(payload: object, label: str = "hostname") -> list[str]:
    """An answer to hosts_query -> the host names, sorted."""
    out = set()
    for item in _data(payload, "vector"):
        if isinstance(item, dict) and isinstance(item.get("metric"), dict):
            host = item["metric"].get(label)
            if host:
                out.add(host)
    return sorted(out)


def parse_history(payload: object) -> dict[int, list[tuple[float, GpuMetrics]]]:
    """A query_range answer to fleet_query for one host -> gpu_id -> [(ts, metrics)], oldest first."""
    rows: dict[int, dict[float, dict[str, float | None]]] = {}
    for item in _data(payload, "matrix"):
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            continue
        labels = item["metric"]
        gpu = _int_label(labels, GPU_ID)
        field = labels.get(FIELD_LABEL)
        values = item.get("values")
        if gpu is None or not field or field == TS_FIELD or not isinstance(values, list):
            continue
        by_ts = rows.setdefault(gpu, {})
        for pair in values:
            if isinstance(pair, list) and len(pair) == 2:
                ts = _value(pair[0])
                if ts is not None:
                    by_ts.setdefault(ts, {})[field] = _value(pair[1])
    return {gpu: [(ts, _metrics(gpu, by_ts[ts])) for ts in sorted(by_ts)] for gpu, by_ts in sorted(rows.items())}
