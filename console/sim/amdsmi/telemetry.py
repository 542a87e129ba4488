"""Telemetry: activity, power, energy, temperatures, clocks, memory, gpu_metrics and processes.

Only partition 0 of a physical GPU has power, thermal and clock metrics; the other
partitions answer "N/A" there, as on a partitioned MI300X.
"""

import os

from .enums import AmdSmiClkType, AmdSmiMemoryType, AmdSmiTemperatureMetric, AmdSmiTemperatureType, Status
from .errors import AmdSmiLibraryException, AmdSmiParameterException
from .health import TICKS_PER_S, faults, residency_ticks
from .library import LIB, checked, checked_with_state, processes_on
from .models import PARTITIONS, MiB, model_of
from .statefiles import sim_now
from .synthetic import logical_load, physical_sample, vram_total_mb, vram_used_bytes


def _secondary(h):
    """Only partition 0 of a physical GPU has power/thermal/clock metrics."""
    return h.partition > 0


def _all_na(keys):
    return dict.fromkeys(keys, "N/A")


def amdsmi_get_gpu_activity(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_activity")
    keys = ("gfx_activity", "umc_activity", "mm_activity")
    if _secondary(h):
        return _all_na(keys)
    s = physical_sample(LIB.state(), h.phys, sim_now())
    return {
        "gfx_activity": int(round(100 * s["gfx"])),
        "umc_activity": int(round(100 * s["umc"])),
        "mm_activity": 0,
    }


def amdsmi_get_power_info(processor_handle):
    h = checked(processor_handle, "amdsmi_get_power_info")
    keys = (
        "socket_power",
        "current_socket_power",
        "average_socket_power",
        "gfx_voltage",
        "soc_voltage",
        "mem_voltage",
        "power_limit",
    )
    if _secondary(h):
        return _all_na(keys)
    state = LIB.state()
    model = model_of(state)
    s = physical_sample(state, h.phys, sim_now())
    watts = int(round(s["power"]))
    return {
        "socket_power": watts,
        "current_socket_power": watts,
        "average_socket_power": "N/A",  # MI300 and later report current power only
        "gfx_voltage": int(600 + 350 * s["gfx_clk"] / model.gfx_max),
        "soc_voltage": 785,
        "mem_voltage": 1100,
        "power_limit": model.power_cap_w,  # W (amdsmi 7.x; 6.x gave hwmon's µW)
    }


def amdsmi_get_power_cap_info(processor_handle):
    h = checked(processor_handle, "amdsmi_get_power_cap_info")
    keys = ("power_cap", "default_power_cap", "dpm_cap", "min_power_cap", "max_power_cap")
    if _secondary(h):
        return _all_na(keys)
    model = model_of(LIB.state())
    cap = model.power_cap_w * 1000000  # µW
    return {
        "power_cap": cap,
        "default_power_cap": cap,
        "dpm_cap": model.gfx_max,
        "min_power_cap": (model.power_cap_w * 2 // 5) * 1000000,
        "max_power_cap": cap,
    }


def amdsmi_get_temp_metric(processor_handle, sensor_type, metric):
    h = checked(processor_handle, "amdsmi_get_temp_metric")
    if not isinstance(sensor_type, AmdSmiTemperatureType):
        raise AmdSmiParameterException(sensor_type, AmdSmiTemperatureType)
    if not isinstance(metric, AmdSmiTemperatureMetric):
        raise AmdSmiParameterException(metric, AmdSmiTemperatureMetric)
    # MI3xx has no edge sensor; secondary partitions have no thermal data.
    if _secondary(h) or sensor_type in (AmdSmiTemperatureType.EDGE, AmdSmiTemperatureType.PLX):
        raise AmdSmiLibraryException(Status.NOT_SUPPORTED)
    is_hotspot = sensor_type == AmdSmiTemperatureType.HOTSPOT
    if metric == AmdSmiTemperatureMetric.CRITICAL:
        return 110 if is_hotspot else 95
    if metric == AmdSmiTemperatureMetric.EMERGENCY:
        return 115 if is_hotspot else 100
    if metric != AmdSmiTemperatureMetric.CURRENT:
        raise AmdSmiLibraryException(Status.NOT_SUPPORTED)
    s = physical_sample(LIB.state(), h.phys, sim_now())
    if is_hotspot:
        return int(round(s["hotspot"]))
    if sensor_type == AmdSmiTemperatureType.VRAM:
        return int(round(s["mem_temp"]))
    return int(round(s["hbm"][int(sensor_type) - int(AmdSmiTemperatureType.HBM_0)]))


def amdsmi_get_clock_info(processor_handle, clock_type):
    h = checked(processor_handle, "amdsmi_get_clock_info")
    if not isinstance(clock_type, AmdSmiClkType):
        raise AmdSmiParameterException(clock_type, AmdSmiClkType)
    if clock_type not in (AmdSmiClkType.GFX, AmdSmiClkType.MEM, AmdSmiClkType.SOC):
        raise AmdSmiLibraryException(Status.NOT_SUPPORTED)
    if _secondary(h):
        return _all_na(("clk", "min_clk", "max_clk", "clk_locked", "clk_deep_sleep"))
    state = LIB.state()
    model = model_of(state)
    s = physical_sample(state, h.phys, sim_now())
    if clock_type == AmdSmiClkType.GFX:
        clk, lo, hi, sleep = s["gfx_clk"], model.gfx_min, model.gfx_max, s["deep_sleep"]
    elif clock_type == AmdSmiClkType.SOC:
        clk, lo, hi, sleep = s["soc_clk"], 400, model.soc_max, s["deep_sleep"]
    else:
        clk, lo, hi, sleep = s["mem_clk"], 900, model.mem_clk, 0
    return {"clk": clk, "min_clk": lo, "max_clk": hi, "clk_locked": 0, "clk_deep_sleep": sleep}


def amdsmi_get_gpu_vram_usage(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_vram_usage")
    state = LIB.state()
    return {
        "vram_total": vram_total_mb(state, h),
        "vram_used": vram_used_bytes(state, h) // MiB,
    }


def _memory(h, mem_type, api):
    h = checked(h, api)
    if not isinstance(mem_type, AmdSmiMemoryType):
        raise AmdSmiParameterException(mem_type, AmdSmiMemoryType)
    return h, LIB.state()


def amdsmi_get_gpu_memory_total(processor_handle, mem_type):
    h, state = _memory(processor_handle, mem_type, "amdsmi_get_gpu_memory_total")
    if mem_type == AmdSmiMemoryType.GTT:
        return (512 * 1024 * MiB) // (len(state["gpus"]) * h.num_partitions)
    return vram_total_mb(state, h) * MiB  # VIS_VRAM = VRAM: large BAR


def amdsmi_get_gpu_memory_usage(processor_handle, mem_type):
    h, state = _memory(processor_handle, mem_type, "amdsmi_get_gpu_memory_usage")
    if mem_type == AmdSmiMemoryType.GTT:
        return 12 * MiB + 2 * MiB * len(processes_on(state, h.phys, h.partition))
    return vram_used_bytes(state, h)


def amdsmi_get_gpu_vram_info(processor_handle):
    h, state, model = checked_with_state(processor_handle, "amdsmi_get_gpu_vram_info")
    return {
        "vram_type": model.vram_type,
        "vram_vendor": model.vram_vendor,
        "vram_size": vram_total_mb(state, h),
        "vram_bit_width": 8192,
        "vram_max_bandwidth": model.vram_bandwidth // h.num_partitions,
    }


# The energy counter integrates the simulated power curve as the agent reads it (trapezoid
# between reads), so energy and power agree as on a real GPU; before this process's first read
# it stands at a steady mean draw since the node was created. {(created, phys): (t, uJ, W)}
_ENERGY = {}  # type: dict


def _energy_uj(state, phys, t, power_w=None):
    if power_w is None:
        power_w = physical_sample(state, phys, t)["power"]
    key = (state.get("created"), phys)
    last = _ENERGY.get(key)
    if last is None:
        model = model_of(state)
        mean_w = model.idle_w + 0.3 * (model.power_cap_w - model.idle_w)
        uj = max(0.0, t - state.get("created", t)) * mean_w * 1e6 + phys * 1e9
    else:
        t0, uj, w0 = last
        if t <= t0:
            return uj
        uj += (t - t0) * (w0 + power_w) / 2.0 * 1e6
    _ENERGY[key] = (t, uj, power_w)
    return uj


def amdsmi_get_energy_count(processor_handle):
    h = checked(processor_handle, "amdsmi_get_energy_count")
    if _secondary(h):
        return _all_na(("energy_accumulator", "counter_resolution", "timestamp"))
    t = sim_now()
    return {
        "energy_accumulator": int(_energy_uj(LIB.state(), h.phys, t) / 15.259),
        "counter_resolution": 15.259,
        "timestamp": int(t * 1e9),
    }


# Sizes of the per-partition arrays of amdsmi_gpu_metrics_t (amdsmi.h).
_MAX_XCP, _MAX_XCC, _MAX_JPEG, _MAX_VCN = 8, 8, 32, 4


def _per_xcp(rows, size):
    """An xcp_stats.* value as the 7.0.2 wrapper returns it: one list per XCP slot
    (all 8), each padded to the C array size; unused slots are UINT_MAX -> "N/A"."""
    out = []
    for i in range(_MAX_XCP):
        row = list(rows[i]) if i < len(rows) else []
        out.append(row + ["N/A"] * (size - len(row)))
    return out


def amdsmi_get_gpu_metrics_info(processor_handle):
    """The flat gpu_metrics dict of amdsmi 7.0.2 (a subset of its keys, same names and shapes).

    Only a physical GPU's primary partition has a gpu_metrics table (the other
    partitions' devices have no such sysfs file): NOT_SUPPORTED there.  The
    primary's table carries every partition's gfx busy % in xcp_stats.
    """
    h = checked(processor_handle, "amdsmi_get_gpu_metrics_info")
    if _secondary(h):
        raise AmdSmiLibraryException(Status.NOT_SUPPORTED, "no gpu_metrics on a secondary partition")
    state = LIB.state()
    model = model_of(state)
    t = sim_now()
    s = physical_sample(state, h.phys, t)
    n = PARTITIONS[state["gpus"][h.phys]["compute_partition"]]
    xcc_per_xcp = max(1, model.xcds // n)
    ticks = int(t * TICKS_PER_S)  # accumulators advance at 100 Hz
    power_res = residency_ticks(h.phys, "power_throttle", t)
    thermal_res = residency_ticks(h.phys, "thermal_throttle", t)
    xgmi_kb = int(t * 1000) % (1 << 40)
    busy = [int(round(100 * u)) for u in s["per_partition"]]
    metrics = {
        "temperature_edge": "N/A",  # MI300 and later have no edge sensor
        "temperature_hotspot": int(round(s["hotspot"])),
        "temperature_mem": int(round(s["mem_temp"])),
        "temperature_vrgfx": "N/A",
        "temperature_vrsoc": int(round(s["hotspot"] - 8)),
        "temperature_vrmem": int(round(s["mem_temp"] - 3)),
        "temperature_hbm": [int(round(v)) for v in s["hbm"]],
        "average_gfx_activity": int(round(100 * s["gfx"])),
        "average_umc_activity": int(round(100 * s["umc"])),
        "average_mm_activity": 0,
        "average_socket_power": "N/A",  # MI300 and later: current power only
        "current_socket_power": int(round(s["power"])),
        "energy_accumulator": int(_energy_uj(state, h.phys, t, s["power"]) / 15.259),  # 15.259 uJ units
        "system_clock_counter": int(t * 1e9),
        "average_gfxclk_frequency": "N/A",
        "average_socclk_frequency": "N/A",
        "average_uclk_frequency": "N/A",
        # gpu_metrics >= 1.4 has per-XCC clocks; the library copies XCC 0's to current_gfxclk
        "current_gfxclk": s["gfx_clk"],
        "current_socclk": s["soc_clk"],
        "current_uclk": s["mem_clk"],
        "current_vclk0": 29,
        "current_dclk0": 22,
        "current_gfxclks": [s["gfx_clk"]] * model.xcds,
        "throttle_status": bool(power_res or thermal_res),
        "indep_throttle_status": False,
        "pcie_link_width": 8 if faults().of(h.phys, "pcie_degraded") else 16,
        "pcie_link_speed": 320,  # 0.1 GT/s units: Gen5
        "voltage_soc": 785,
        "voltage_gfx": int(600 + 350 * s["gfx_clk"] / model.gfx_max),
        "voltage_mem": 1100,
        "xgmi_link_width": 16,
        "xgmi_link_speed": 32,
        "xgmi_read_data_acc": [xgmi_kb] * 8,
        "xgmi_write_data_acc": [xgmi_kb] * 8,
        "xgmi_link_status": [1] * 8,
        "accumulation_counter": ticks,
        "prochot_residency_acc": 0,
        "ppt_residency_acc": power_res,
        "socket_thm_residency_acc": thermal_res,
        "vr_thm_residency_acc": 0,
        "hbm_thm_residency_acc": 0,
        "num_partition": n,
        # Per partition (XCP), per XCC: the only per-logical-GPU load figure.
        "xcp_stats.gfx_busy_inst": _per_xcp([[b] * xcc_per_xcp for b in busy], _MAX_XCC),
        "xcp_stats.jpeg_busy": _per_xcp([[0] * (_MAX_JPEG // n)] * n, _MAX_JPEG),
        "xcp_stats.vcn_busy": _per_xcp([[0] * max(1, _MAX_VCN // n)] * n, _MAX_VCN),
        "xcp_stats.gfx_busy_acc": _per_xcp([[int(ticks * b / 100.0)] * xcc_per_xcp for b in busy], _MAX_XCC),
        "vram_max_bandwidth": model.vram_bandwidth,
    }
    return metrics


def amdsmi_get_gpu_process_list(processor_handle):
    h, state, model = checked_with_state(processor_handle, "amdsmi_get_gpu_process_list")
    t = sim_now()
    entries = processes_on(state, h.phys, h.partition)
    if not entries:
        return []
    gfx, _ = logical_load(state.get("seed", 0), h.phys, h.partition, t, True)
    cus = model.cus // h.num_partitions
    try:
        file_time = os.stat(LIB.procs_file.path).st_mtime
    except OSError:
        file_time = t
    out = []
    for e in entries:
        vram = int(e.get("vram_bytes", 0) or 0)
        started = float(e.get("started", file_time))
        share = 1.0 / len(entries)
        out.append(
            {
                "name": str(e.get("name") or "N/A"),
                "pid": int(e.get("pid", 0)),
                "mem": vram,
                "engine_usage": {"gfx": int(max(0.0, t - started) * gfx * share * 1e9), "enc": 0},
                "memory_usage": {"gtt_mem": 2 * MiB, "cpu_mem": 64 * MiB, "vram_mem": vram},
                "cu_occupancy": int(round(cus * gfx * share)),
            }
        )
    return out
