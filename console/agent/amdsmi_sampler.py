"""The amdsmi Python module as a telemetry source: library calls only, no process per tick.

Runs on the node (stdlib + amdsmi, Python >= 3.8); shipped beside node_agent.py,
which imports it at start (it is the source of an AMD node).
"""

from __future__ import annotations

import contextlib
import math
import sys

from amd_health import AmdHealth  # type: ignore[import-not-found]
from sampling import (
    AgentError,
    Sampler,
    assemble_static,
    caps_list,
    describe,
    dig,
    first,
    gpu_metrics,
    primaries_of,
    text,
)

# gpu_metrics' energy accumulator counts 15.259 uJ (2^-16 J) units on MI300 (amdgpu's
# kgd_pp_interface.h); amdsmi_get_energy_count's counter_resolution says so where it answers.
ENERGY_UNIT_UJ = 15.259
# gpu_metrics' throttle residency accumulators: one that grew over a tick means the GPU
# was held back by power (PPT), socket / VR / HBM temperature or PROCHOT during it.
RESIDENCY_KEYS = (
    "ppt_residency_acc",
    "socket_thm_residency_acc",
    "vr_thm_residency_acc",
    "hbm_thm_residency_acc",
    "prochot_residency_acc",
)

# The amdsmi path's values.  The C library marks "unsupported" with the all-ones
# value of a field's width; the 7.0.2 wrapper turns only some of those into "N/A"
# (e.g. power_info only 0xFFFF, though the header says UINT32_MAX), so the agent
# checks the width of each field itself, and only that width: 65535 MB of VRAM in
# a uint32 field is a real reading.


def reading(value, bits):
    """An amdsmi number, or None for "N/A", non-numbers and the field's all-ones sentinel."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None if value == (1 << bits) - 1 else value


def percent(value, bits):
    """An activity in %: the wrapper maps >100 to "N/A" for some fields, not for all."""
    value = reading(value, bits)
    return value if value is not None and 0 <= value <= 100 else None


def busy_mean(per_xcc):
    """One partition's gfx busy %: the mean over its XCCs.  Unused XCC slots are
    "N/A" (or UINT32_MAX, > 100, where the wrapper left them): skipped."""
    if not isinstance(per_xcc, (list, tuple)):
        return None
    values = [x for x in per_xcc if isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 100]
    return sum(values) / float(len(values)) if values else None


def throttled(before, now):
    """True when a residency accumulator grew since the last tick, False when none did,
    None when unknown (the first tick, or the table has no accumulators)."""
    if before is None or now is None:
        return None
    grew = known = False
    for a, b in zip(before, now):
        if a is not None and b is not None:
            known = True
            grew = grew or b > a
    return grew if known else None


class AmdsmiSampler(Sampler):
    """The amdsmi Python module: library calls only, no process per tick.

    Per tick and physical GPU at most 3 library calls (docs/hardware.md, "Sampling
    cost"), in every partition mode:

    - one ``amdsmi_get_gpu_metrics_info`` of its primary partition: power,
      temperatures, clocks, memory activity, the gfx busy % of every partition
      (``xcp_stats.gfx_busy_inst``) and the partition count (a compute-mode switch
      shows there at once);
    - one VRAM read: the lane visits the node's logical GPUs round-robin, as many
      per tick as there are physical GPUs, so a partition's VRAM is at most
      (partitions per GPU) ticks old;
    - one slow-lane read: process lists round-robin the same way, except for one
      slot per tick (every other tick on a one-GPU node) that checks a
      slow-changing fact: a GPU's memory mode, its power cap, its compute mode
      when gpu_metrics has no partition count.

    Static facts (identity, partition modes, every partition's VRAM and processes
    once) are read at start and after a re-enumeration only.
    """

    source = "amdsmi"

    def __init__(self, module):
        self.m = module
        self.simulated = bool(getattr(module, "__simulated__", False))
        self.handles = []
        self.rows = []
        self._gpus = []  # one dict per physical GPU, in physical order
        self._vram = {}  # logical index -> (used MiB, total MiB), last read
        self._procs = {}  # logical index -> process list (None: unknown), last read
        self._vram_next = self._procs_next = self._check_next = 0
        self._check_slot = False
        self._health = None  # AmdHealth, made at the first health reading
        try:
            with contextlib.redirect_stdout(sys.stderr):
                module.amdsmi_init()
        except Exception as exc:
            raise AgentError("amdsmi_init failed (%s)" % describe(exc)) from None
        self._enumerate()

    def _api(self, name, *args):
        """One amdsmi call: ``name`` with ``args``.  A failure (AmdSmiLibraryException,
        a function this release lacks, ...) means 'unknown' for the fields it feeds."""
        try:
            return getattr(self.m, name)(*args)
        except Exception:
            return None

    # -- enumeration: start and partition changes only

    def _enumerate(self):
        try:
            self.handles = list(self.m.amdsmi_get_processor_handles())
        except Exception as exc:
            raise AgentError("amdsmi_get_processor_handles failed (%s)" % describe(exc)) from None
        raws = [self._raw_static(i, h) for i, h in enumerate(self.handles)]
        self.rows = assemble_static(raws)
        self._vram = dict((raw["index"], raw["vram"]) for raw in raws)
        self._procs = dict((i, self._processes(h)) for i, h in enumerate(self.handles))
        primaries = primaries_of(self.rows)
        self._gpus = []
        for physical in sorted(primaries):
            row = primaries[physical]
            primary = self.handles[row["index"]]
            self._gpus.append(
                {
                    "primary_index": row["index"],
                    "primary": primary,
                    "partitions": sum(1 for r in self.rows if r["physical"] == physical),
                    # the partition count gpu_metrics should report; a change means a switch
                    "baseline": sum(1 for r in self.rows if r["physical"] == physical),
                    "modes": (row["compute_partition"], row["memory_partition"]),
                    "power_cap_w": self._power_cap(primary),
                    # the documented unit until a health reading's amdsmi_get_energy_count says
                    "energy_unit_uj": ENERGY_UNIT_UJ,
                    "metrics": None,
                    "residency": None,  # the last tick's residency accumulators
                }
            )
        self._vram_next = self._procs_next = self._check_next = 0
        if self._health is not None:
            self._health.enumerate([gpu["primary"] for gpu in self._gpus])

    def _raw_static(self, index, h):
        asic = self._api("amdsmi_get_gpu_asic_info", h)
        board = self._api("amdsmi_get_gpu_board_info", h)
        vbios = self._api("amdsmi_get_gpu_vbios_info", h)
        kfd = self._api("amdsmi_get_gpu_kfd_info", h)
        config = self._api("amdsmi_get_gpu_memory_partition_config", h)
        vram = self._vram_usage(h)
        return {
            "index": index,
            "bdf": text(self._api("amdsmi_get_gpu_device_bdf", h)),
            "partition_hint": reading(dig(kfd, "current_partition_id"), 32),
            "model": text(dig(asic, "market_name")),
            "serial": first(text(dig(asic, "asic_serial")), text(dig(board, "product_serial"))),
            "vbios": text(dig(vbios, "version")),
            "vram_total_mib": vram[1],
            "vram": vram,
            "compute_partition": text(self._api("amdsmi_get_gpu_compute_partition", h)),
            "memory_partition": text(self._api("amdsmi_get_gpu_memory_partition", h)),
            "memory_caps": caps_list(dig(config, "partition_caps")),
        }

    def _reinit(self):
        # After a partition change every handle is invalid (reference §4).
        self._api("amdsmi_shut_down")
        try:
            with contextlib.redirect_stdout(sys.stderr):
                self.m.amdsmi_init()
        except Exception as exc:
            raise AgentError("amdsmi_init failed after a GPU change (%s)" % describe(exc)) from None
        self._enumerate()
        self._read_all_metrics()
        # The count the driver reports now is the new baseline: one that never
        # matches the enumeration (DRM's 64-node limit hides a CPX partition)
        # re-enumerates once, not at every tick.
        for gpu in self._gpus:
            count = (gpu["metrics"] or {}).get("partitions")
            if count is not None:
                gpu["baseline"] = count
        return self.rows

    # -- the reads of a tick

    def _physical_metrics(self, h, partitions):
        """One gpu_metrics read of a primary partition: the physical GPU's values
        and the gfx busy % of its first ``partitions`` partitions."""
        raw = self._api("amdsmi_get_gpu_metrics_info", h)
        if not isinstance(raw, dict):
            return None
        energy = reading(raw.get("energy_accumulator"), 64)
        residency = [reading(raw.get(k), 64) for k in RESIDENCY_KEYS]
        gfxclks = [reading(v, 16) for v in raw.get("current_gfxclks") or ()]
        xcps = raw.get("xcp_stats.gfx_busy_inst")  # per partition, per XCC
        return {
            "partitions": reading(raw.get("num_partition"), 16),
            "util_pct": percent(raw.get("average_gfx_activity"), 16),
            "umc_pct": percent(raw.get("average_umc_activity"), 16),
            # MI300 and later report current power only, older GPUs the average (W)
            "power_w": first(
                reading(raw.get("current_socket_power"), 16), reading(raw.get("average_socket_power"), 16)
            ),
            "temp_junction_c": reading(raw.get("temperature_hotspot"), 16),
            "temp_mem_c": reading(raw.get("temperature_mem"), 16),
            # MI300 (gpu_metrics >= 1.4) has per-XCC clocks; current_gfxclk is XCC 0's
            "gfx_clock_mhz": first(
                reading(raw.get("current_gfxclk"), 16),
                first(*gfxclks),
                reading(raw.get("average_gfxclk_frequency"), 16),
            ),
            "mem_clock_mhz": first(
                reading(raw.get("current_uclk"), 16), reading(raw.get("average_uclk_frequency"), 16)
            ),
            "xcp_busy": [busy_mean(x) for x in xcps[:partitions]] if isinstance(xcps, list) else [],
            "energy": energy,
            "residency": residency if any(v is not None for v in residency) else None,
            "raw": raw,  # the health reading takes its residency keys from this tick's table
        }

    def _vram_usage(self, h):
        """(used MiB, total MiB) of one logical GPU; amdsmi's MB are 2**20 bytes."""
        usage = self._api("amdsmi_get_gpu_vram_usage", h)
        return reading(dig(usage, "vram_used"), 32), reading(dig(usage, "vram_total"), 32)

    def _power_cap(self, h):
        """The settable power cap in W (amdsmi reports it in µW; 0 means unread)."""
        cap = reading(dig(self._api("amdsmi_get_power_cap_info", h), "power_cap"), 64)
        return cap / 1e6 if cap else None

    def _processes(self, h):
        items = self._api("amdsmi_get_gpu_process_list", h)
        if not isinstance(items, list):
            return None
        out = []
        for item in items:
            if not isinstance(item, dict):
                continue
            pid = reading(item.get("pid"), 32)
            if pid is None:
                continue
            used = first(reading(dig(item, "memory_usage", "vram_mem"), 64), reading(item.get("mem"), 64))
            out.append(
                {
                    "pid": int(pid),
                    "name": text(item.get("name")) or "",
                    "vram_mib": None if used is None else used / 2.0**20,
                }
            )
        return out

    def _read_all_metrics(self):
        """gpu_metrics of every physical GPU; True when a partition count changed."""
        changed = False
        for gpu in self._gpus:
            before = (gpu["metrics"] or {}).get("residency")
            gpu["metrics"] = metrics = self._physical_metrics(gpu["primary"], gpu["partitions"])
            gpu["throttled"] = throttled(before, metrics["residency"] if metrics else None)
            count = metrics["partitions"] if metrics else None
            changed = changed or (count is not None and count != gpu["baseline"])
        return changed

    def _check(self):
        """One slow-changing fact, round-robin over (memory mode, power cap, compute
        mode) of each GPU; the compute mode only where gpu_metrics lacks num_partition
        (older driver).  True when a mode changed: the GPUs must be enumerated again."""
        tasks = 3 * len(self._gpus)
        for _ in range(tasks):
            k = self._check_next % tasks
            self._check_next = k + 1
            gpu, task = self._gpus[k // 3], k % 3
            if task == 0:
                mode = text(self._api("amdsmi_get_gpu_memory_partition", gpu["primary"]))
                return None not in (mode, gpu["modes"][1]) and mode != gpu["modes"][1]
            if task == 1:
                gpu["power_cap_w"] = self._power_cap(gpu["primary"])
                return False
            if gpu["metrics"] is None or gpu["metrics"]["partitions"] is None:
                mode = text(self._api("amdsmi_get_gpu_compute_partition", gpu["primary"]))
                return None not in (mode, gpu["modes"][0]) and mode != gpu["modes"][0]
        return False

    # -- Sampler

    def static(self):
        return self.rows

    def refresh(self, tick):
        if self._read_all_metrics():
            return self._reinit()
        # one slot per tick for a check; a one-GPU node gives it every other tick
        self._check_slot = tick > 0 and (len(self._gpus) > 1 or tick % 2 == 0)
        if self._check_slot and self._check():
            return self._reinit()
        return None

    def sample(self):
        n = len(self.handles)
        for _ in range(min(len(self._gpus), n)):
            i = self._vram_next % n
            self._vram_next = i + 1
            self._vram[i] = self._vram_usage(self.handles[i])
        for _ in range(min(len(self._gpus) - (1 if self._check_slot else 0), n)):
            i = self._procs_next % n
            self._procs_next = i + 1
            self._procs[i] = self._processes(self.handles[i])
        gpus = []
        for row in self.rows:
            gpu = self._gpus[row["physical"]]
            metrics = gpu["metrics"] or {}
            busy = metrics.get("xcp_busy") or []
            own = busy[row["partition_id"]] if row["partition_id"] < len(busy) else None
            # an unpartitioned GPU: the GPU use amd-smi shows; a partition: its XCCs' busy %
            util = first(metrics.get("util_pct"), own) if gpu["partitions"] == 1 else own
            used, total = self._vram.get(row["index"], (None, None))
            values = {
                "util_pct": util,
                "vram_used_mib": used,
                "vram_total_mib": total,
                "processes": self._procs.get(row["index"]),
            }
            if row["index"] == gpu["primary_index"]:  # the physical GPU's values, shown once
                values.update(
                    (k, metrics.get(k))
                    for k in ("umc_pct", "power_w", "temp_junction_c", "temp_mem_c", "gfx_clock_mhz", "mem_clock_mhz")
                )
                values["power_cap_w"] = gpu["power_cap_w"]
                energy = metrics.get("energy")
                values["energy_j"] = energy * gpu["energy_unit_uj"] / 1e6 if energy is not None else None
                values["throttled"] = gpu.get("throttled")
            gpus.append(gpu_metrics(row["index"], **values))
        return gpus

    def physical_count(self):
        return len(self._gpus)

    def health(self, physicals):
        """The health entries of these physical GPUs (amd_health.py)."""
        if self._health is None:
            self._health = AmdHealth(self.m)
            self._health.enumerate([gpu["primary"] for gpu in self._gpus])
        out = []
        for physical in physicals:
            if physical < len(self._gpus):
                gpu = self._gpus[physical]
                entry = self._health.read(physical, (gpu["metrics"] or {}).get("raw"))
                # µJ per count of the energy accumulator, as the library states it (no extra call)
                unit = dig(entry["results"], "amdsmi_get_energy_count", "counter_resolution")
                if isinstance(unit, float) and unit > 0:
                    gpu["energy_unit_uj"] = unit
                out.append(entry)
        return out

    def close(self):
        if self._health is not None:
            self._health.close()
        self._api("amdsmi_shut_down")
