"""AMD Device Metrics Exporter (DME) series in Prometheus -> the console's telemetry records.

Pure: builds the PromQL the Prometheus source sends and parses the JSON that comes
back into the same GpuStatic / GpuMetrics records the SSH agent produces. Metric
and label names, units and sources: docs/prometheus.md; the names are checked
against DME's published list by tests/core/test_dme_contract.py.

What DME writes, and what the reader makes of it:

* Metric names may carry a prefix (DME's ``MetricsFieldPrefix``; its shipped
  example config sets ``amd_``). The prefix comes from the profile
  (``[prometheus] metric_prefix``) or is detected from the names Prometheus holds
  (none or ``amd_``; both are read when a fleet has both).
* ``gpu_partition_id`` is the partition index inside its physical GPU, ``NA``
  (or 4294967295 in some builds) on a GPU without partitions (MI2xx, Radeon,
  many VFs): both mean "no partition".
* Device-wide values (power, temperatures, clocks, memory activity) are reported
  on a physical GPU's first partition only; the others report power 0 and no
  temperature or clock. The reader takes them from that series (partition 0, or
  the GPU's only series) and shows them on the physical GPU's first row, as the
  SSH agent does.
* Utilization: ``gpu_gfx_activity`` exists on partition 0 only; a partition's
  own load is ``gpu_gfx_busy_instantaneous`` (one series per XCC, averaged). A
  partitioned GPU's rows use the latter, an unpartitioned GPU the former.
* The GPU list comes from ``gpu_total_vram`` and, for a host without it (a site
  may select which fields DME exports), from every GPU-labelled family it has.

Queries, never one per node or GPU:

* the **layout** (at start, every 30 s, when a node's GPUs change): which of the
  families the reader uses exist (an index look-up: this picks the prefix and the
  fields worth asking), which hosts have ``gpu_nodes_total`` (their scrape time
  is read from it: one series per host), the identity labels and VRAM size of
  every logical GPU (``gpu_total_vram``), and only for hosts that have no
  ``gpu_total_vram``, their identity from every GPU family (each series of a
  host: costly, so never for the whole fleet when it does not need it);
* the **values** (every refresh, sent together): one per console field, reduced
  to ``(hostname, gpu_id)``, plus the newest scrape time per host. A JSON series
  costs ~70 bytes this way instead of ~350 with DME's full label set. (One
  expression joining the fields with ``or`` was measured 3x slower in Prometheus
  2.42 than the separate queries together.)

Every family is reduced with ``max by`` (or ``avg by`` for per-XCC busy):
newer DME releases add per-process labels, so one GPU can have several series.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from console.core.health import EccBlock, HealthReading
from console.core.health_readings import pcie_gen
from console.core.model import GpuMetrics, GpuStatic

# ---------------------------------------------------------------- DME's names

# Labels DME sets on every GPU series (docs/prometheus.md, "Labels").
GPU_ID = "gpu_id"
PARTITION_ID = "gpu_partition_id"
SERIAL = "serial_number"
MODEL = "card_model"  # the board part number (102-G30211-0C); empty on many VFs
SERIES = "card_series"  # the market name (AMD Instinct MI300X OAM); optional label
COMPUTE_PARTITION = "gpu_compute_partition_type"
MEMORY_PARTITION = "gpu_memory_partition_type"
CLOCK_TYPE = "clock_type"
IDENTITY_LABELS = (GPU_ID, PARTITION_ID, SERIAL, MODEL, SERIES, COMPUTE_PARTITION, MEMORY_PARTITION)

# DME metric families the reader asks for (names without the prefix).
NODES_TOTAL = "gpu_nodes_total"
GFX_ACTIVITY = "gpu_gfx_activity"
GFX_BUSY = "gpu_gfx_busy_instantaneous"
UMC_ACTIVITY = "gpu_umc_activity"
USED_VRAM = "gpu_used_vram"
TOTAL_VRAM = "gpu_total_vram"
PACKAGE_POWER = "gpu_package_power"
AVERAGE_PACKAGE_POWER = "gpu_average_package_power"
POWER_USAGE = "gpu_power_usage"
JUNCTION_TEMP = "gpu_junction_temperature"
EDGE_TEMP = "gpu_edge_temperature"
MEMORY_TEMP = "gpu_memory_temperature"
CLOCK = "gpu_clock"
READ_FAMILIES = (
    NODES_TOTAL,
    GFX_ACTIVITY,
    GFX_BUSY,
    UMC_ACTIVITY,
    USED_VRAM,
    TOTAL_VRAM,
    PACKAGE_POWER,
    AVERAGE_PACKAGE_POWER,
    POWER_USAGE,
    JUNCTION_TEMP,
    EDGE_TEMP,
    MEMORY_TEMP,
    CLOCK,
)
# clock_type: DME's enum name in older releases, the short lower-case form now.
SYSTEM_CLOCK = "GPU_CLOCK_TYPE_SYSTEM|system"
MEMORY_CLOCK = "GPU_CLOCK_TYPE_MEMORY|memory"
# The series that carry a physical GPU's own values: its first partition, or the
# GPU's only series when it has no partitions (NA; 4294967295 in some builds). DME
# always sets the label; a matcher that also matched its absence would make
# Prometheus subtract every other partition's series, at every refresh.
DEVICE_SERIES = f'{PARTITION_ID}=~"0|NA|4294967295"'
_NO_PARTITION = frozenset(("", "NA", "N/A", "4294967295"))
_UNPARTITIONED_MODES = "spx|none|"  # compute partition types of a whole GPU
AUTO_PREFIXES = ("", "amd_")  # prefixes looked for when the profile names none
_ANY_GPU_FAMILY = r"(gpu|pcie)_.+"  # every DME GPU family (pcie_* carry gpu_id too)
_NAME_KEEPER = "dme_metric"  # a label of the console's own, inside one query only

# ---------------------------------------------------------------- fields

# field tag -> (GpuMetrics field, device-wide?)
VALUE_FAMILIES: dict[str, tuple[str, bool]] = {
    "u": ("util_pct", False),
    "v": ("vram_used_mib", False),
    "m": ("umc_pct", True),
    "p": ("power_w", True),
    "j": ("temp_junction_c", True),
    "t": ("temp_mem_c", True),
    "g": ("gfx_clock_mhz", True),
    "c": ("mem_clock_mhz", True),
}
# Families that change slowly or matter less at a glance: asked every SLOW_EVERY
# refreshes, their last values carried in between (the agent, likewise, reads a
# partition's VRAM round-robin: in CPX it is up to 8 ticks old there). Per
# refresh that leaves utilization, power, junction temperature and the scrape
# time.
SLOW_FAMILIES = frozenset(("v", "m", "t", "g", "c"))
SLOW_EVERY = 5
TS_TAG = "s"  # newest scrape time of a host's series
_FIELD_OF = {tag: field for tag, (field, _) in VALUE_FAMILIES.items()}
# A value outside its field's range is DME's "not available" (0 power, 0 degrees,
# 65535 or 2**32-1 sentinels of older releases) or garbage: shown as N/A.
# (low, high, low inclusive?) per field; high is exclusive.
_RANGES: dict[str, tuple[float, float, bool]] = {
    "util_pct": (0.0, 100.000001, True),
    "umc_pct": (0.0, 100.000001, True),
    "vram_used_mib": (0.0, 4294967295.0, True),
    "vram_total_mib": (0.0, 4294967295.0, False),
    "power_w": (0.0, 65535.0, False),
    "temp_junction_c": (0.0, 500.0, False),
    "temp_mem_c": (0.0, 500.0, False),
    "gfx_clock_mhz": (0.0, 65535.0, True),
    "mem_clock_mhz": (0.0, 65535.0, True),
}
Payloads = Mapping[str, object]  # field tag (or TS_TAG) -> the answer to its query
LAYOUT_EVERY_S = 30.0  # how often the layout query runs when nothing changed
_TEXT_MAX = 120  # characters kept of a label value shown to the user


class DmeResponseError(ValueError):
    """Prometheus answered something that is not a usable query result."""


@dataclass(frozen=True, slots=True)
class DmeValues:
    """One host's latest values: sample time and, per logical GPU, field -> value."""

    sample_ts: float | None  # newest scrape of its series (Prometheus clock, epoch s)
    gpus: dict[int, dict[str, float | None]]


@dataclass(frozen=True, slots=True)
class DmePlan:
    """What to ask Prometheus, as learnt from the families each host has."""

    prefixes: tuple[str, ...] = AUTO_PREFIXES  # metric name prefixes in use
    families: frozenset[str] | None = None  # DME families present (no prefix); None: not known yet
    # Scrape-time query: (family, host label values) groups; hosts not in any group
    # are asked through the first group's family (or every family when no group).
    ts_groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
    partitioned: bool = True  # any GPU in a partitioned mode (else per-partition busy is not asked)

    def has(self, family: str) -> bool:
        return self.families is None or family in self.families


# ---------------------------------------------------------------- text from Prometheus

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def clean_text(value: object, limit: int = _TEXT_MAX) -> str:
    """A label value or error text as one printable line (control characters and
    escape sequences become spaces, long text is cut)."""
    text = _CONTROL_RE.sub(" ", str(value)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _label_text(labels: Mapping[str, object], key: str) -> str | None:
    value = labels.get(key)
    if not isinstance(value, str):
        return None
    text = clean_text(value)
    return text if text and text.upper() not in ("N/A", "NA") else None


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
        if not isinstance(host, str):
            continue
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


def _exact_hosts(label: str, hosts: Sequence[str]) -> str:
    return f"{label}=~{_promql_string('|'.join(re.escape(h) for h in sorted(hosts)))}"


# ---------------------------------------------------------------- queries


def _names_regex(families: Iterable[str], prefixes: Sequence[str]) -> str:
    """RE2 for the prefixed names: ``gpu_a|gpu_b|amd_gpu_a|amd_gpu_b``."""
    return "|".join(re.escape(p) + re.escape(f) for p in prefixes for f in families)


def _select(family: str, prefixes: Sequence[str], *matchers: str) -> str:
    """One family (every prefix in use) with matchers -> a selector."""
    if len(prefixes) == 1:
        return f"{prefixes[0]}{family}{{{', '.join(m for m in matchers if m)}}}"
    name = f"__name__=~{_promql_string(_names_regex((family,), prefixes))}"
    return f"{{{', '.join((name, *(m for m in matchers if m)))}}}"


def _any_family(prefixes: Sequence[str]) -> str:
    return "|".join(re.escape(p) + _ANY_GPU_FAMILY for p in prefixes)


def prefixes_for(configured: str | None) -> tuple[str, ...]:
    return AUTO_PREFIXES if configured is None else (configured,)


def names_match(label: str = "hostname", hosts: Sequence[str] | None = None, prefixes=AUTO_PREFIXES) -> str:
    """The series selector for Prometheus's label-values API (``__name__`` values):
    which of the families the reader uses exist. An index look-up, no samples read."""
    names = _promql_string(_names_regex(READ_FAMILIES, prefixes))
    return f"{{__name__=~{names}, {host_selector(label, hosts)}}}"


def hosts_match(label: str = "hostname", prefixes=AUTO_PREFIXES) -> str:
    """The selector whose ``label`` values are every host with DME GPU series (discovery)."""
    return f'{{__name__=~{_promql_string(_any_family(prefixes))}, {GPU_ID}!="", {label}!=""}}'


def nodes_query(label: str = "hostname", hosts: Sequence[str] | None = None, prefixes=AUTO_PREFIXES) -> str:
    """The hosts that have ``gpu_nodes_total`` (one series each: the cheap scrape-time family)."""
    return f"count by ({label}) ({_select(NODES_TOTAL, prefixes, host_selector(label, hosts))})"


def layout_query(
    label: str = "hostname",
    hosts: Sequence[str] | None = None,
    prefixes=AUTO_PREFIXES,
    *,
    every_family: bool = False,
    exact: bool = False,
) -> str:
    """Identity labels of every logical GPU: from ``gpu_total_vram`` (its value is the
    VRAM size), or, for hosts that have none, from every GPU-labelled family present."""
    by = ", ".join((label, *IDENTITY_LABELS))
    where = _exact_hosts(label, hosts or ()) if exact else host_selector(label, hosts)
    if not every_family:
        return f"max by ({by}) ({_select(TOTAL_VRAM, prefixes, where)})"
    names = _promql_string(_any_family(prefixes))
    return f'max by ({by}) ({{__name__=~{names}, {GPU_ID}!="", {where}}})'


def _field_terms(tag: str, plan: DmePlan, selector: str, by: str) -> list[str]:
    """The alternatives of one field, best first (joined with ``or``: the first
    that has a series for a GPU gives its value)."""
    pre = plan.prefixes
    device = (selector, DEVICE_SERIES)

    def agg(family: str, *matchers: str, how: str = "max", cond: str = "") -> str:
        return f"{how} by ({by}) ({_select(family, pre, *matchers)}{cond})"

    terms: list[str] = []
    if tag == "u":
        if plan.has(GFX_BUSY) and plan.partitioned:  # a partition's own load, where the GPU is partitioned
            partitioned = f'{COMPUTE_PARTITION}!~"{_UNPARTITIONED_MODES}"'
            terms.append(agg(GFX_BUSY, selector, partitioned, how="avg", cond=" <= 100"))
        if plan.has(GFX_ACTIVITY):
            terms.append(agg(GFX_ACTIVITY, selector))
        elif plan.families is not None and plan.has(GFX_BUSY):  # a site that exports busy only
            terms.append(agg(GFX_BUSY, selector, how="avg", cond=" <= 100"))
    elif tag == "v":
        if plan.has(USED_VRAM):
            terms.append(agg(USED_VRAM, selector))
    elif tag == "m":
        if plan.has(UMC_ACTIVITY):
            terms.append(agg(UMC_ACTIVITY, *device))
    elif tag == "p":  # 0 W is DME's "not available": the next family may know
        for family in (PACKAGE_POWER, AVERAGE_PACKAGE_POWER):
            if plan.has(family):
                terms.append(agg(family, *device, cond=" > 0"))
        # gpu_power_usage is there beside them (MI2xx and MI3xx): asked only when a fleet
        # has neither, one family less per refresh
        if plan.has(POWER_USAGE) and not terms or plan.families is None:
            terms.append(agg(POWER_USAGE, *device, cond=" > 0"))
    elif tag == "j":  # MI2xx has no junction sensor in DME: its edge sensor stands in
        for family in (JUNCTION_TEMP, EDGE_TEMP):
            if plan.has(family):
                terms.append(agg(family, *device, cond=" > 0"))
    elif tag == "t":
        if plan.has(MEMORY_TEMP):
            terms.append(agg(MEMORY_TEMP, *device, cond=" > 0"))
    elif tag in ("g", "c") and plan.has(CLOCK):  # several system clocks (one per XCD): the highest
        kinds = SYSTEM_CLOCK if tag == "g" else MEMORY_CLOCK
        terms.append(agg(CLOCK, *device, f'{CLOCK_TYPE}=~"{kinds}"'))
    return terms


def _ts_term(family: str, where: str, prefixes: Sequence[str], by: str) -> str:
    if family == "*":  # a host with neither family: any of its GPU families
        names = _promql_string(_any_family(prefixes))
        series = f"{{__name__=~{names}, {where}}}"
    else:
        series = _select(family, prefixes, where)
    if family == "*" or len(prefixes) > 1:
        # timestamp() drops the metric name: series of several names would collide
        series = f'label_replace({series}, "{_NAME_KEEPER}", "$1", "__name__", "(.+)")'
    return f"max by ({by}) (timestamp({series}))"


def ts_query(label: str = "hostname", hosts: Sequence[str] | None = None, plan: DmePlan | None = None) -> str:
    """The newest scrape time of each host, through the cheapest family it has
    (``gpu_nodes_total``: one series per host). The first group's family is asked
    for every host, so a host that appears later is seen at once."""
    plan = plan or DmePlan()
    groups = plan.ts_groups or (("*", ()),)
    terms = [_ts_term(groups[0][0], host_selector(label, hosts), plan.prefixes, label)]
    for family, group in groups[1:]:
        terms.append(_ts_term(family, _exact_hosts(label, group), plan.prefixes, label))
    return " or ".join(terms)


def value_queries(
    label: str = "hostname",
    hosts: Sequence[str] | None = None,
    *,
    slow: bool = True,
    plan: DmePlan | None = None,
) -> dict[str, str]:
    """The queries of a refresh: field tag -> its expression, by (host, gpu_id);
    the SLOW_FAMILIES only when ``slow``; a field no family of the plan can give
    is not asked."""
    plan = plan or DmePlan()
    selector = host_selector(label, hosts)
    by = f"{label}, {GPU_ID}"
    out = {}
    for tag in VALUE_FAMILIES:
        if tag in SLOW_FAMILIES and not slow:
            continue
        terms = _field_terms(tag, plan, selector, by)
        if terms:
            out[tag] = " or ".join(terms)
    out[TS_TAG] = ts_query(label, hosts, plan)
    return out


# ---------------------------------------------------------------- the plan


def _success_data(payload: object) -> object:
    """The `data` of a Prometheus API answer; its own error (or a wrong shape) as one line."""
    if not isinstance(payload, dict):
        raise DmeResponseError("not a JSON object")
    if payload.get("status") != "success":
        kind = clean_text(payload.get("errorType") or "error", 40)
        raise DmeResponseError(f"{kind}: {clean_text(payload.get('error') or 'no message', 200)}")
    return payload.get("data")


def parse_names(payload: object) -> set[str]:
    """An answer of the label-values API -> the values (metric names, host names)."""
    data = _success_data(payload)
    if not isinstance(data, list):
        raise DmeResponseError("no list of values in the answer")
    return {value for value in data if isinstance(value, str) and value}


_TS_PREFERENCE = (NODES_TOTAL, TOTAL_VRAM)


def make_plan(
    names: Iterable[str],
    configured_prefix: str | None = None,
    ts_family: Mapping[str, str] | None = None,
    partitioned: bool = True,
) -> DmePlan:
    """The plan for what Prometheus holds: the prefixes in use (from the metric names
    present), the families present, and for each host the family its scrape time is
    read from (``ts_family``: host label value -> family; "*" for any GPU family)."""
    names = set(names)
    if configured_prefix is not None:
        prefixes: tuple[str, ...] = (configured_prefix,)
    else:
        prefixed = {p for p in AUTO_PREFIXES[1:] for name in names if name.startswith(p)}
        plain = any(not name.startswith(AUTO_PREFIXES[1:]) for name in names)
        prefixes = tuple(p for p in AUTO_PREFIXES if p in prefixed or (p == "" and plain)) or AUTO_PREFIXES
    known = set(READ_FAMILIES)
    longest_first = sorted(prefixes, key=len, reverse=True)
    families = set()
    for name in names:
        for p in longest_first:
            if name.startswith(p) and name[len(p) :] in known:
                families.add(name[len(p) :])
                break
    groups: dict[str, list[str]] = {}
    for host, family in sorted((ts_family or {}).items()):
        groups.setdefault(family, []).append(host)
    rank = {f: i for i, f in enumerate(_TS_PREFERENCE)}
    # the most common family first: it is asked for every host (a new one too)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), rank.get(kv[0], 99), kv[0]))
    groups_ = tuple((f, tuple(h)) for f, h in ordered)
    return DmePlan(prefixes, frozenset(families) if names else None, groups_, partitioned or not names)


# ---------------------------------------------------------------- parsing


def _data(payload: object, want: str) -> list:
    data = _success_data(payload)
    if not isinstance(data, dict):
        raise DmeResponseError("no data in the answer")
    if data.get("resultType") != want:
        raise DmeResponseError(f"expected a {want} result, got {clean_text(data.get('resultType'), 40)!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise DmeResponseError("result is not a list")
    return result


def _number(raw: object) -> float | None:
    try:
        number = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _in_range(field: str, value: float | None) -> float | None:
    if value is None:
        return None
    low, high, inclusive = _RANGES.get(field, (-math.inf, math.inf, True))
    if value >= high or value < low or (value == low and not inclusive):
        return None
    return value


def _int_label(labels: Mapping[str, object], key: str) -> int | None:
    raw = labels.get(key)
    if not isinstance(raw, str) or not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        return None
    return int(raw)


def partition_of(labels: Mapping[str, object]) -> int | None:
    """gpu_partition_id -> the partition index; None for "no partition" (NA, 4294967295, absent)."""
    raw = labels.get(PARTITION_ID)
    if not isinstance(raw, str) or raw.upper() in _NO_PARTITION:
        return None
    return _int_label(labels, PARTITION_ID)


def _mode(labels: Mapping[str, object], key: str) -> str | None:
    text = _label_text(labels, key)
    return text.upper() if text and text.lower() != "none" else None


def parse_layout(
    payload: object, label: str = "hostname", *, with_vram: bool = True
) -> dict[str, tuple[GpuStatic, ...]]:
    """The layout query's answer -> hostname -> its logical GPUs, by index (the value
    is the VRAM size when the query was over ``gpu_total_vram``)."""
    hosts: dict[str, dict[int, tuple[Mapping[str, object], float | None]]] = {}
    for item in _data(payload, "vector"):
        labels = item.get("metric") if isinstance(item, dict) else None
        if not isinstance(labels, dict):
            continue
        host = labels.get(label)
        gpu = _int_label(labels, GPU_ID)
        if not isinstance(host, str) or not host or gpu is None:
            continue
        value = item.get("value")
        total = None
        if with_vram and isinstance(value, list) and len(value) == 2:
            total = _in_range("vram_total_mib", _number(value[1]))
        hosts.setdefault(host, {})[gpu] = (labels, total)
    out = {}
    for host, gpus in hosts.items():
        physical = _physical_indices({gpu: labels for gpu, (labels, _) in gpus.items()})
        out[host] = tuple(
            GpuStatic(
                index=gpu,
                physical=physical[gpu],
                partition_id=partition_of(labels) or 0,
                # the market name; the part number only where DME gives nothing else
                model=_label_text(labels, SERIES) or _label_text(labels, MODEL),
                serial=_label_text(labels, SERIAL),
                vram_total_mib=total,
                compute_partition=_mode(labels, COMPUTE_PARTITION),
                memory_partition=_mode(labels, MEMORY_PARTITION),
            )
            for gpu, (labels, total) in sorted(gpus.items())
        )
    return out


def _physical_indices(labels_by_gpu: Mapping[int, Mapping[str, object]]) -> dict[int, int]:
    """Logical GPU -> physical GPU: partitions of one device share its serial_number
    (DME labels a partition with its parent's serial); devices are numbered in
    the order of their lowest logical index. Without a serial, partition k joins
    the GPU just before it when that one is partition k-1; else it stands alone."""
    key_of: dict[int, str] = {}
    for gpu in sorted(labels_by_gpu):
        labels = labels_by_gpu[gpu]
        serial = _label_text(labels, SERIAL)
        if serial:
            key_of[gpu] = serial
            continue
        part = partition_of(labels)
        before = labels_by_gpu.get(gpu - 1)
        if part and before is not None and partition_of(before) == part - 1 and not _label_text(before, SERIAL):
            key_of[gpu] = key_of[gpu - 1]
        else:
            key_of[gpu] = f"\0{gpu}"
    first_of: dict[str, int] = {}
    for gpu in sorted(key_of):
        first_of.setdefault(key_of[gpu], gpu)
    rank = {key: i for i, key in enumerate(sorted(first_of, key=first_of.__getitem__))}
    return {gpu: rank[key] for gpu, key in key_of.items()}


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
        low, high, inclusive = _RANGES.get(field or "", (0.0, math.inf, False))
        for item in _data(payload, "vector"):
            try:
                labels = item["metric"]
                raw = item["value"][1]
                host = labels[label]
            except (KeyError, IndexError, TypeError):
                continue
            if not isinstance(host, str):
                continue
            try:
                value: float | None = float(raw)
            except (TypeError, ValueError, OverflowError):
                value = None
            if value is not None and (not isfinite(value) or value >= high or value < low):
                value = None
            elif value == low and not inclusive:
                value = None
            if field is None:
                stamps[host] = value
                continue
            try:
                gpu = gpu_of[labels[GPU_ID]]
            except (KeyError, TypeError):
                gpu_label = labels.get(GPU_ID)
                if not isinstance(gpu_label, str) or not (gpu_label.isascii() and gpu_label.isdigit()):
                    continue
                if len(gpu_label) > 9:
                    continue
                if len(gpu_of) > 65536:  # bounded, whatever ids an answer makes up
                    gpu_of.clear()
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
            if isinstance(host, str) and host:
                out.add(clean_text(host))
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
                    ts = _number(pair[0])
                    if ts is not None:
                        by_ts.setdefault(ts, {})[field] = _in_range(field, _number(pair[1]))
    return {gpu: [(ts, by_ts[ts]) for ts in sorted(by_ts)] for gpu, by_ts in sorted(rows.items())}


# ---------------------------------------------------------------- health families

# DME's health families (names without the prefix; docs/prometheus.md, "DME health
# families"), read at the health cadence, never every refresh. Device-wide: taken from a
# physical GPU's first partition (DEVICE_SERIES), like power and temperatures.
ECC_KINDS = ("correct", "uncorrect", "deferred")  # gpu_ecc_<kind>_<block>; block "total" = the sums
PCIE_SPEED = "pcie_speed"  # GT/s
PCIE_MAX_SPEED = "pcie_max_speed"
PCIE_REPLAY = "pcie_replay_count"
PCIE_RECOVERY = "pcie_recovery_count"
VIOLATION_CLOCK = "gpu_violation_current_accumulated_counter"
# gpu_violation_<x>_residency_accumulated -> the neutral reason (core/health.py THROTTLE_LABELS):
# the same accumulators amdsmi_get_violation_status gives the agent
VIOLATION_RESIDENCY = (
    ("gpu_violation_ppt_residency_accumulated", "power"),
    ("gpu_violation_socket_thermal_residency_accumulated", "socket_thermal"),
    ("gpu_violation_vr_thermal_residency_accumulated", "vr_thermal"),
    ("gpu_violation_hbm_thermal_residency_accumulated", "hbm_thermal"),
    ("gpu_violation_processor_hot_residency_accumulated", "prochot"),
)
ENERGY = "gpu_energy_consumed"  # µJ
# The families of the health query: every one a GPU has, except the per-block ECC counts
# (60 families: 20 blocks x 3 kinds), asked only where they are not zero (ECC_BLOCKS_RE): a
# healthy fleet's block counters are all 0, and a 16k-GPU fleet would bring ~1M series.
HEALTH_BASE_RE = (
    r"gpu_ecc_(correct|uncorrect|deferred)_total"
    r"|pcie_(speed|max_speed|replay_count|recovery_count)"
    r"|gpu_violation_current_accumulated_counter"
    r"|gpu_violation_(ppt|socket_thermal|vr_thermal|hbm_thermal|processor_hot)_residency_accumulated"
    r"|gpu_energy_consumed"
)
ECC_BLOCKS_RE = r"gpu_ecc_(correct|uncorrect|deferred)_[a-z0-9_]+"
HEALTH_FAMILIES_RE = f"{HEALTH_BASE_RE}|{ECC_BLOCKS_RE}"
_HEALTH_NAME_RE = re.compile(HEALTH_FAMILIES_RE)


def health_queries(
    label: str = "hostname", hosts: Sequence[str] | None = None, prefixes=AUTO_PREFIXES
) -> dict[str, str]:
    """The health families of every host in two queries, one series per (family, host,
    logical GPU): ``max by (__name__, ...)`` keeps the family's name (newer DME releases add
    per-process labels, so a GPU can have several series). ``b``: the per-block ECC counts
    that are not zero."""
    where = f"{host_selector(label, hosts)}, {DEVICE_SERIES}"
    by = f"__name__, {label}, {GPU_ID}"
    out = {}
    for tag, pattern, cond in (("h", HEALTH_BASE_RE, ""), ("b", ECC_BLOCKS_RE, " > 0")):
        names = "|".join(re.escape(p) + f"(?:{pattern})" for p in prefixes)
        out[tag] = f"max by ({by}) ({{__name__=~{_promql_string(names)}, {where}}}{cond})"
    return out


def parse_health(
    payloads: Payloads, label: str = "hostname", prefixes=AUTO_PREFIXES
) -> dict[str, dict[int, dict[str, float]]]:
    """The health queries' answers (tag -> answer) -> hostname -> logical GPU -> family (no
    prefix) -> value. A value that is not a finite number (DME's NaN for "not available") is
    left out."""
    longest_first = sorted(prefixes, key=len, reverse=True)
    out: dict[str, dict[int, dict[str, float]]] = {}
    items = [item for payload in payloads.values() for item in _data(payload, "vector")]
    for item in items:
        labels = item.get("metric") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if not isinstance(labels, dict) or not isinstance(value, list) or len(value) != 2:
            continue
        name, host, gpu = labels.get("__name__"), labels.get(label), _int_label(labels, GPU_ID)
        if not isinstance(name, str) or not isinstance(host, str) or not host or gpu is None:
            continue
        family = None
        for p in longest_first:
            if name.startswith(p) and _HEALTH_NAME_RE.fullmatch(name[len(p) :]):
                family = name[len(p) :]
                break
        number = _number(value[1])
        if family is None or number is None:
            continue
        out.setdefault(host, {}).setdefault(gpu, {})[family] = number
    return out


def _count(value: float | None) -> int | None:
    return int(value) if value is not None and value >= 0 else None


def _pcie_gen_of(gts: float | None) -> int | None:
    """DME's PCIe rate (GT/s) -> its generation, by amdsmi's table (MT/s)."""
    return None if gts is None else pcie_gen(gts * 1000.0)


def from_dme(gpu: int, t: float, values: Mapping[str, float]) -> HealthReading:
    """One physical GPU's health reading from its DME health families (``values``: family
    without prefix -> value, from parse_health). What DME does not export stays None:
    bad pages, PCIe width, the current throttle reasons, XGMI link state, resets."""
    get = values.get
    blocks: dict[str, dict[str, int | None]] = {}
    for family, value in values.items():
        if not family.startswith("gpu_ecc_"):
            continue
        kind, _, block = family[len("gpu_ecc_") :].partition("_")
        if kind in ECC_KINDS and block and block != "total":
            blocks.setdefault(block.upper(), {})[kind] = _count(value)
    residency = tuple((reason, get(family)) for family, reason in VIOLATION_RESIDENCY if get(family) is not None)
    clock = get(VIOLATION_CLOCK)
    energy = get(ENERGY)
    return HealthReading(
        t=t,
        gpu=gpu,
        vendor="amd",
        ecc_correctable=_count(get("gpu_ecc_correct_total")),
        ecc_uncorrectable=_count(get("gpu_ecc_uncorrect_total")),
        ecc_deferred=_count(get("gpu_ecc_deferred_total")),
        ecc_blocks=tuple(
            EccBlock(name, b.get("correct"), b.get("uncorrect"), b.get("deferred"))
            for name, b in sorted(blocks.items())
        )
        or None,
        residency=residency if residency and clock is not None else None,  # type: ignore[arg-type]
        residency_clock=clock if residency and clock is not None else None,
        pcie_gen=_pcie_gen_of(get(PCIE_SPEED)),
        pcie_gen_max=_pcie_gen_of(get(PCIE_MAX_SPEED)),
        pcie_replay=_count(get(PCIE_REPLAY)),
        pcie_recovery=_count(get(PCIE_RECOVERY)),
        energy_j=energy / 1e6 if energy is not None and energy >= 0 else None,
    )


def health_readings(
    static: Sequence[GpuStatic], gpus: Mapping[int, Mapping[str, float]], t: float
) -> tuple[HealthReading, ...]:
    """One reading per physical GPU of a node's layout that has health series (its values
    come from the first partition's series: the logical GPU with the lowest index)."""
    first: dict[int, int] = {}
    for g in static:
        first.setdefault(g.physical, g.index)
    return tuple(from_dme(phys, t, gpus[index]) for phys, index in sorted(first.items()) if gpus.get(index))
