"""Health readings from the vendors' records: ``from_nvml`` maps the NVML record of
console/agent/nvidia_health.py (docs/nvidia.md, "Health and energy"); ``from_amdsmi`` maps
the results of the amdsmi calls by their real names (the names and keys are held against
the real package by tests/core/test_health_amdsmi.py). Both give the vendor-neutral
HealthReading that console/core/health.py judges; rates and shares are computed there, from
the counters, never on the node."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from console.core.health import EccBlock, GpuFault, HealthReading, LinkHealth

__all__ = ["from_amdsmi", "from_nvml", "pcie_gen"]


# ---------------------------------------------------------------- NVML


# NVML clock event reason names (console/agent/nvidia_health.py) -> neutral names.
NVML_REASONS = {
    "sw_power_cap": "power",
    "hw_slowdown": "hw_slowdown",
    "sw_thermal": "sw_thermal",
    "hw_thermal": "hw_thermal",
    "hw_power_brake": "power_brake",
    "board_limit": "board_limit",
    "reliability": "reliability",
}
# NVML residency counters (ns) that mean throttling -> neutral names.  low_utilization
# and sync_boost are not a limit the GPU hit.
NVML_RESIDENCY = {
    "power": "power",
    "thermal": "thermal",
    "sw_thermal": "sw_thermal",
    "hw_thermal": "hw_thermal",
    "hw_power_brake": "power_brake",
    "board_limit": "board_limit",
    "reliability": "reliability",
}


def _int(value: object) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _flag_count(*flags: object) -> int | None:
    """NVML answers some counts as flags (a remap pending): True -> 1, all unknown -> None."""
    known = [f for f in flags if isinstance(f, bool)]
    if not known:
        return None
    return 1 if any(known) else 0


def _sum(*values: object) -> int | None:
    numbers = [_int(v) for v in values]
    known = [n for n in numbers if n is not None]
    return sum(known) if known else None


def from_nvml(record: Mapping[str, Any]) -> HealthReading:
    """The neutral reading of one NVML health record (or a 1 Hz run sample, which has fewer fields)."""
    names = record.get("clock_event_names")
    reasons: tuple[str, ...] | None = None
    if isinstance(names, list):
        reasons = tuple(dict.fromkeys(NVML_REASONS[n] for n in names if n in NVML_REASONS))
    residency = None
    raw = record.get("residency_ns")
    if isinstance(raw, Mapping):
        pairs = [(NVML_RESIDENCY[k], _num(v)) for k, v in raw.items() if k in NVML_RESIDENCY]
        residency = tuple((k, v / 1e9) for k, v in pairs if v is not None) or None
    links = None
    if isinstance(record.get("nvlink"), list):
        links = tuple(
            LinkHealth(
                int(entry.get("link", i)),
                entry.get("active") if isinstance(entry.get("active"), bool) else None,
                _sum(*(entry.get(k) for k in ("replay", "recovery", "crc_flit", "crc_data", "ecc_data"))),
            )
            for i, entry in enumerate(record["nvlink"])
            if isinstance(entry, Mapping)
        )
    t = float(record.get("t") or 0.0)
    faults = tuple(
        GpuFault("xid", float(e.get("at", t)), _int(e.get("xid")), f"XID {e.get('xid')}")
        for e in record.get("xid_events") or ()
        if isinstance(e, Mapping)
    )
    blocks = None
    by_location = record.get("ecc_aggregate_by_location")
    if isinstance(by_location, Mapping):
        blocks = tuple(
            EccBlock(str(name), _int(counts.get("corrected")), _int(counts.get("uncorrected")))
            for name, counts in by_location.items()
            if isinstance(counts, Mapping)
        )
    retired = _sum(record.get("remapped_correctable"), record.get("remapped_uncorrectable"))
    if retired is None:
        retired = _sum(record.get("retired_sbe"), record.get("retired_dbe"))
    energy = _num(record.get("energy_mj"))
    return HealthReading(
        t=t,
        gpu=int(record.get("gpu") or 0),
        vendor="nvidia",
        ecc_correctable=_int(record.get("ecc_volatile_corrected")),
        ecc_uncorrectable=_int(record.get("ecc_volatile_uncorrected")),
        ecc_blocks=blocks,
        pages_retired=retired,
        pages_pending=_flag_count(record.get("remapped_pending"), record.get("retired_pending")),
        pages_unreservable=_flag_count(record.get("remapped_failure")),
        throttle_reasons=reasons,
        idle=("idle" in names) if isinstance(names, list) else None,
        residency=residency,
        pcie_gen=_int(record.get("pcie_gen")),
        pcie_gen_max=_int(record.get("pcie_gen_max")),
        pcie_width=_int(record.get("pcie_width")),
        pcie_width_max=_int(record.get("pcie_width_max")),
        pcie_replay=_int(record.get("pcie_replay")),
        link_kind="nvlink" if links is not None else None,
        links=links,
        faults=faults,
        energy_j=energy / 1000.0 if energy is not None else None,
    )


# ---------------------------------------------------------------- amdsmi

# amdsmi's bad page status values (AmdSmiMemoryPageStatus; the test holds them to the real enum).
AMD_PAGE_RESERVED, AMD_PAGE_PENDING, AMD_PAGE_UNRESERVABLE = 0, 1, 2
# amdsmi_get_violation_status "active_*" flags and "acc_*" counters -> neutral reasons.
AMD_VIOLATIONS = (
    ("ppt_pwr", "power"),
    ("socket_thrm", "socket_thermal"),
    ("vr_thrm", "vr_thermal"),
    ("hbm_thrm", "hbm_thermal"),
    ("prochot_thrm", "prochot"),
)
# The same residency counters in amdsmi_get_gpu_metrics_info (where the violation call is missing).
AMD_METRICS_RESIDENCY = (
    ("ppt_residency_acc", "power"),
    ("socket_thm_residency_acc", "socket_thermal"),
    ("vr_thm_residency_acc", "vr_thermal"),
    ("hbm_thm_residency_acc", "hbm_thermal"),
    ("prochot_residency_acc", "prochot"),
)
# PCIe transfer rate (MT/s, amdsmi_get_pcie_info) -> generation
_PCIE_GEN_BY_MTS = ((64000, 6), (32000, 5), (16000, 4), (8000, 3), (5000, 2), (2500, 1))
# AmdSmiEventReader.read() "event" names (AmdSmiEvtNotificationType) -> fault kinds; a pre-reset
# and its post-reset are one reset.  amdsmi 7.0.2 has no ring-hang event (a hang shows as a reset);
# THERMAL_THROTTLE is left to the residency counters.
AMD_EVENTS = {"GPU_PRE_RESET": "reset", "GPU_POST_RESET": "reset", "VMFAULT": "vm_fault"}
# amdsmi_get_gpu_cper_entries entry keys read (the agent sends {index: entry}, the new ones only)
AMD_CPER_KEYS = ("error_severity", "notify_type")


def _amd(results: Mapping[str, Any], function: str, *keys: str) -> Any:
    """A value from one amdsmi call's result; None when the call failed, the key is
    missing or amdsmi said "N/A".  ``function`` is the real amdsmi function name."""
    value: Any = results.get(function)
    for key in keys:
        # decoded JSON is a dict: checked first, as isinstance against the Mapping ABC costs
        # a third of decoding a health line
        if type(value) is not dict and not isinstance(value, Mapping):
            return None
        value = value.get(key)
    if isinstance(value, str) and value.strip().upper() in ("N/A", "NA", ""):
        return None
    return value


def pcie_gen(mts: object) -> int | None:
    """A PCIe transfer rate in MT/s (amdsmi's unit; DME's GT/s times 1000) -> its generation."""
    rate = _num(mts)
    if rate is None or rate <= 0:
        return None
    for floor, gen in _PCIE_GEN_BY_MTS:
        if rate >= floor * 0.95:
            return gen
    return None


def from_amdsmi(
    gpu: int,
    t: float,
    results: Mapping[str, Any],
    events: Iterable[Mapping[str, Any]] = (),
) -> HealthReading:
    """The neutral reading of one physical AMD GPU from amdsmi results.

    ``results`` maps an amdsmi function name to what it returned for this GPU (a call
    that failed is absent or None): amdsmi_get_gpu_total_ecc_count,
    amdsmi_get_gpu_ecc_count (a dict of AmdSmiGpuBlock member name -> its result),
    amdsmi_get_gpu_bad_page_info, amdsmi_get_pcie_info, amdsmi_get_violation_status,
    amdsmi_get_gpu_metrics_info, amdsmi_get_gpu_xgmi_link_status, amdsmi_get_energy_count.
    ``events``: what AmdSmiEventReader.read() returned for this GPU since the last reading."""
    blocks = None
    per_block = results.get("amdsmi_get_gpu_ecc_count")
    if isinstance(per_block, Mapping):
        blocks = tuple(
            EccBlock(
                str(name),
                _int(_amd(results, "amdsmi_get_gpu_ecc_count", name, "correctable_count")),
                _int(_amd(results, "amdsmi_get_gpu_ecc_count", name, "uncorrectable_count")),
                _int(_amd(results, "amdsmi_get_gpu_ecc_count", name, "deferred_count")),
            )
            for name in per_block
        )
    pages = results.get("amdsmi_get_gpu_bad_page_info")
    retired = pending = unreservable = None
    if isinstance(pages, list):
        status = [_int(p.get("status")) for p in pages if isinstance(p, Mapping)]
        retired = sum(1 for s in status if s == AMD_PAGE_RESERVED)
        pending = sum(1 for s in status if s == AMD_PAGE_PENDING)
        unreservable = sum(1 for s in status if s == AMD_PAGE_UNRESERVABLE)

    # Current reasons from the violation flags; residency from its accumulators (or the metrics table's).
    reasons: list[str] = []
    any_flag = False
    for suffix, name in AMD_VIOLATIONS:
        flag = _amd(results, "amdsmi_get_violation_status", "active_" + suffix)
        if isinstance(flag, bool):
            any_flag = True
            if flag:
                reasons.append(name)
    residency: list[tuple[str, float]] = []
    clock = _num(_amd(results, "amdsmi_get_violation_status", "acc_counter"))
    if clock is not None:
        for suffix, name in AMD_VIOLATIONS:
            value = _num(_amd(results, "amdsmi_get_violation_status", "acc_" + suffix))
            if value is not None:
                residency.append((name, value))
    if not residency:
        clock = _num(_amd(results, "amdsmi_get_gpu_metrics_info", "accumulation_counter"))
        if clock is not None:
            for key, name in AMD_METRICS_RESIDENCY:
                value = _num(_amd(results, "amdsmi_get_gpu_metrics_info", key))
                if value is not None:
                    residency.append((name, value))

    links = None
    status_list = _amd(results, "amdsmi_get_gpu_xgmi_link_status", "status")
    if isinstance(status_list, list):
        # "U" up, "D" down, "X" disabled (not wired: not a fault, left out), "N/A" unknown
        links = tuple(
            LinkHealth(i, {"U": True, "D": False}.get(str(s).upper())) for i, s in enumerate(status_list) if s != "X"
        )

    energy = None
    acc = _num(_amd(results, "amdsmi_get_energy_count", "energy_accumulator"))
    resolution = _num(_amd(results, "amdsmi_get_energy_count", "counter_resolution"))
    if acc is not None and resolution is not None:
        energy = acc * resolution / 1e6  # the resolution is in µJ

    firmware = None
    fw_list = _amd(results, "amdsmi_get_fw_info", "fw_list")
    if isinstance(fw_list, list):
        # fw_name is the AmdSmiFwBlock member's name (FW_ID_SMU, ...): shown without its prefix
        firmware = tuple(
            (str(f.get("fw_name") or "?").removeprefix("FW_ID_"), str(f.get("fw_version")))
            for f in fw_list
            if isinstance(f, Mapping) and f.get("fw_version") is not None
        )

    cper = None
    entries = results.get("amdsmi_get_gpu_cper_entries")
    if isinstance(entries, Mapping):
        cper = tuple(
            (str(e.get(AMD_CPER_KEYS[0]) or "unknown"), str(e.get(AMD_CPER_KEYS[1]) or "unknown"))
            for _, e in sorted(entries.items(), key=lambda kv: _int_key(kv[0]))
            if isinstance(e, Mapping)
        )

    faults: list[GpuFault] = []
    pre_reset = False
    for event in events:
        kind = AMD_EVENTS.get(str(event.get("event", "")))
        if kind is None:
            continue
        if event.get("event") == "GPU_POST_RESET" and pre_reset:
            pre_reset = False
            continue  # the reset its pre-reset event already counted
        pre_reset = event.get("event") == "GPU_PRE_RESET"
        faults.append(GpuFault(kind, t, None, str(event.get("message") or "").strip()))

    return HealthReading(
        t=t,
        gpu=gpu,
        vendor="amd",
        ecc_correctable=_int(_amd(results, "amdsmi_get_gpu_total_ecc_count", "correctable_count")),
        ecc_uncorrectable=_int(_amd(results, "amdsmi_get_gpu_total_ecc_count", "uncorrectable_count")),
        ecc_deferred=_int(_amd(results, "amdsmi_get_gpu_total_ecc_count", "deferred_count")),
        ecc_blocks=blocks,
        pages_retired=retired,
        pages_pending=pending,
        pages_unreservable=unreservable,
        throttle_reasons=tuple(reasons) if any_flag else None,
        residency=tuple(residency) or None,
        residency_clock=clock if residency else None,
        pcie_gen=pcie_gen(_amd(results, "amdsmi_get_pcie_info", "pcie_metric", "pcie_speed")),
        pcie_gen_max=pcie_gen(_amd(results, "amdsmi_get_pcie_info", "pcie_static", "max_pcie_speed")),
        pcie_width=_int(_amd(results, "amdsmi_get_pcie_info", "pcie_metric", "pcie_width")),
        pcie_width_max=_int(_amd(results, "amdsmi_get_pcie_info", "pcie_static", "max_pcie_width")),
        pcie_replay=_int(_amd(results, "amdsmi_get_pcie_info", "pcie_metric", "pcie_replay_count")),
        pcie_recovery=_int(_amd(results, "amdsmi_get_pcie_info", "pcie_metric", "pcie_l0_to_recovery_count")),
        link_kind="xgmi" if links is not None else None,
        links=links,
        faults=tuple(faults),
        energy_j=energy,
        firmware=firmware,
        cper_records=cper,
    )


def _int_key(key: object) -> int:
    try:
        return int(str(key))
    except ValueError:
        return 0
