"""AMD Device Metrics Exporter (DME) series in Prometheus -> the console's telemetry records.

Pure: builds the PromQL the Prometheus source sends and parses the JSON that comes
back into the same GpuStatic / GpuMetrics records the SSH agent produces. Metric
and label names, units and sources: docs/prometheus.md.

Two instant queries cover the whole fleet, never one per node or GPU:

* the **layout** query (at start, every 30 s, and when a node's GPUs change):
  one series per logical GPU with DME's identity labels (serial, model,
  partition ids and modes) and its VRAM size;
* the **values** queries (every refresh, sent together): one per metric family,
  reduced to the labels ``(hostname, gpu_id)``, plus the newest scrape time per
  host. A JSON series costs ~70 bytes this way instead of ~350 with DME's full
  label set. (One expression joining the families with ``or`` was measured 3x
  slower in Prometheus 2.42 than the separate queries together.)
  Device-wide families (power, temperatures, clocks, memory activity) are read
  from partition 0 only: DME repeats them on every partition of a device, and the
  SSH agent too shows them once, on the device's first partition.

Every family is reduced with ``max by``: newer DME releases add per-process
labels, so one GPU can have several series.
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
LAYOUT_LABELS = (GPU_ID, PARTITION_ID, SERIAL, MODEL, COMPUTE_PARTITION, MEMORY_PARTITION)
# family key -> (GpuMetrics field, DME metrics (the first present wins), device-wide?)
# gpu_clock's clock_type is the enum name in DME's code (GPU_CLOCK_TYPE_SYSTEM) and
# the short form in newer docs (system): both match. Power: gpu_package_power (MI3xx)
# or else gpu_power_usage.
VALUE_FAMILIES: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "u": ("util_pct", ("gpu_gfx_activity",), False),
    "v": ("vram_used_mib", ("gpu_used_vram",), False),
    "m": ("umc_pct", ("gpu_umc_activity",), True),
    "p": ("power_w", ("gpu_package_power", "gpu_power_usage"), True),
    "j": ("temp_junction_c", ("gpu_junction_temperature",), True),
    "t": ("temp_mem_c", ("gpu_memory_temperature",), True),
    "g": ("gfx_clock_mhz", ('gpu_clock{clock_type=~"GPU_CLOCK_TYPE_SYSTEM|system"}',), True),
    "c": ("mem_clock_mhz", ('gpu_clock{clock_type=~"GPU_CLOCK_TYPE_MEMORY|memory"}',), True),
}
# Families that change slowly or matter less at a glance: asked every SLOW_EVERY
# refreshes, their last values carried in between (the agent, likewise, reads a
# partition's VRAM round-robin). Cuts the series per refresh by ~40 %.
SLOW_FAMILIES = frozenset(("m", "t", "g", "c"))
SLOW_EVERY = 5
TS_TAG = "s"  # newest scrape time of a host's series
_FIELD_OF = {tag: field for tag, (field, _, _) in VALUE_FAMILIES.items()}
Payloads = Mapping[str, object]  # family key (or TS_TAG) -> the answer to its query
LAYOUT_EVERY_S = 30.0  # how often the layout query runs when nothing changed


class DmeResponseError(ValueError):
    """Prometheus answered something that is not a usable query result."""


@dataclass(frozen=True, slots=True)
class DmeValues:
    """One host's latest values: sample time and, per logical GPU, field -> value."""

    sample_ts: float | None  # newest scrape of its series (Prometheus clock, epoch s)
    gpus: dict[int, dict[str, float | None]]


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


def _select(metric: str, *matchers: str) -> str:
    """``gpu_clock{clock_type=~"..."}`` + more matchers -> one selector."""
    name, _, inner = metric.partition("{")
    inner = inner.rstrip("}")
    return f"{name}{{{', '.join(m for m in (*matchers, inner) if m)}}}"


def layout_query(label: str = "hostname", hosts: Sequence[str] | None = None) -> str:
    by = ", ".join((label, *LAYOUT_LABELS))
    return f"max by ({by}) ({_select('gpu_total_vram', host_selector(label, hosts))})"


def value_queries(label: str = "hostname", hosts: Sequence[str] | None = None, *, slow: bool = True) -> dict[str, str]:
    """The queries of a refresh: family key -> its expression, by (host, gpu_id);
    the SLOW_FAMILIES only when ``slow``."""
    selector = host_selector(label, hosts)
    by = f"{label}, {GPU_ID}"
    out = {}
    for tag, (_, metrics, device) in VALUE_FAMILIES.items():
        if tag in SLOW_FAMILIES and not slow:
            continue
        matchers = (selector, f'{PARTITION_ID}="0"') if device else (selector,)
        out[tag] = " or ".join(f"max by ({by}) ({_select(metric, *matchers)})" for metric in metrics)
    out[TS_TAG] = f"max by ({label}) (timestamp({_select('gpu_total_vram', selector)}))"
    return out


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


def parse_layout(payload: object, label: str = "hostname") -> dict[str, tuple[GpuStatic, ...]]:
    """The layout query's answer -> hostname -> its logical GPUs, by index."""
    hosts: dict[str, dict[int, tuple[Mapping[str, str], float | None]]] = {}
    for item in _data(payload, "vector"):
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            continue
        labels = item["metric"]
        value = item.get("value")
        host = labels.get(label)
        gpu = _int_label(labels, GPU_ID)
        if not host or gpu is None:
            continue
        total = _value(value[1]) if isinstance(value, list) and len(value) == 2 else None
        hosts.setdefault(host, {})[gpu] = (labels, total)
    out = {}
    for host, gpus in hosts.items():
        physical = _physical_indices({gpu: labels for gpu, (labels, _) in gpus.items()})
        out[host] = tuple(
            GpuStatic(
                index=gpu,
                physical=physical[gpu],
                partition_id=_int_label(labels, PARTITION_ID) or 0,
                model=labels.get(MODEL) or None,
                serial=labels.get(SERIAL) or None,
                vram_total_mib=total,
                compute_partition=_upper(labels.get(COMPUTE_PARTITION)),
                memory_partition=_upper(labels.get(MEMORY_PARTITION)),
            )
            for gpu, (labels, total) in sorted(gpus.items())
        )
    return out


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


_GPU_OF: dict[str, int] = {}  # "12" -> 12, for the hot loop below (gpu ids are few)


def parse_values(payloads: Payloads, label: str = "hostname") -> dict[str, DmeValues]:
    """The value queries' answers -> hostname -> DmeValues. Runs every refresh for
    every GPU of the fleet, so it is written for speed."""
    stamps: dict[str, float | None] = {}
    gpus: dict[str, dict[int, dict[str, float | None]]] = {}
    isfinite = math.isfinite
    gpu_of = _GPU_OF
    for tag, payload in payloads.items():
        field = _FIELD_OF.get(tag)
        if field is None and tag != TS_TAG:
            continue
        for item in _data(payload, "vector"):
            try:
                labels = item["metric"]
                raw = item["value"][1]
                host = labels[label]
            except (KeyError, IndexError, TypeError):
                continue
            try:
                value: float | None = float(raw)
            except (TypeError, ValueError):
                value = None
            if value is not None and not isfinite(value):
                value = None
            if field is None:
                stamps[host] = value
                continue
            try:
                gpu = gpu_of[labels[GPU_ID]]
            except KeyError:
                gpu_label = labels.get(GPU_ID)
                if not isinstance(gpu_label, str) or not gpu_label.isdigit():
                    continue
                gpu = gpu_of[gpu_label] = int(gpu_label)
            per_host = gpus.get(host)
            if per_host is None:
                per_host = gpus[host] = {}
            fields = per_host.get(gpu)
            if fields is None:
                fields = per_host[gpu] = {}
            fields[field] = value
    return {host: DmeValues(stamps.get(host), gpus.get(host, {})) for host in set(stamps) | set(gpus)}


def frame_gpus(static: Sequence[GpuStatic], values: Mapping[int, Mapping[str, float | None]]) -> tuple[GpuMetrics, ...]:
    """One GpuMetrics per logical GPU of the layout, in index order (a GPU without
    values is all N/A, as a GPU the agent could not read)."""
    empty: Mapping[str, float | None] = {}
    out = []
    for gpu in static:
        get = values.get(gpu.index, empty).get
        out.append(
            GpuMetrics(
                index=gpu.index,
                util_pct=get("util_pct"),
                umc_pct=get("umc_pct"),
                vram_used_mib=get("vram_used_mib"),
                vram_total_mib=gpu.vram_total_mib,
                power_w=get("power_w"),
                temp_junction_c=get("temp_junction_c"),
                temp_mem_c=get("temp_mem_c"),
                gfx_clock_mhz=get("gfx_clock_mhz"),
                mem_clock_mhz=get("mem_clock_mhz"),
            )
        )
    return tuple(out)


def parse_hosts(payload: object, label: str = "hostname") -> list[str]:
    """An answer to hosts_query -> the host names, sorted."""
    out = set()
    for item in _data(payload, "vector"):
        if isinstance(item, dict) and isinstance(item.get("metric"), dict):
            host = item["metric"].get(label)
            if host:
                out.add(host)
    return sorted(out)


def parse_history(payloads: Payloads) -> dict[int, list[tuple[float, dict[str, float | None]]]]:
    """query_range answers to value_queries for one host -> gpu_id -> [(ts, fields)], oldest first."""
    rows: dict[int, dict[float, dict[str, float | None]]] = {}
    for tag, payload in payloads.items():
        field = _FIELD_OF.get(tag)
        if field is None:
            continue
        for item in _data(payload, "matrix"):
            if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
                continue
            gpu = _int_label(item["metric"], GPU_ID)
            values = item.get("values")
            if gpu is None or not isinstance(values, list):
                continue
            by_ts = rows.setdefault(gpu, {})
            for pair in values:
                if isinstance(pair, list) and len(pair) == 2:
                    ts = _value(pair[0])
                    if ts is not None:
                        by_ts.setdefault(ts, {})[field] = _value(pair[1])
    return {gpu: [(ts, by_ts[ts]) for ts in sorted(by_ts)] for gpu, by_ts in sorted(rows.items())}
