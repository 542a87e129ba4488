"""NVIDIA GPUs for the node agent: NVML through ``pynvml``, or ``nvidia-smi``.

Shipped beside node_agent.py and imported by it only when no AMD source works
(stdlib + optional pynvml from nvidia-ml-py, Python >= 3.8).  Both samplers
write the same static/sample records as the AMD ones, so the console shows the
same rows.  MIG instances are the logical GPUs of a MIG-enabled physical GPU,
numbered like AMD partitions: ``physical`` is the GPU's NVML index,
``partition_id`` the instance's position under it; ``compute_partition`` is
"MIG" and ``memory_partition`` the instance's profile ("3g.40gb").

Units: NVML reports power in mW, memory in bytes, clocks in MHz, temperatures
in degrees C; records carry W, MiB, MHz, C.  nvidia-smi's CSV (``nounits``)
carries W, MiB, MHz, C already.

``open_nvidia(agent, paths, reasons)`` returns ``(sampler, note)``, or None
after appending why each source is unavailable to ``reasons``; an NVML that
loads but fails (driver/library mismatch, no GPU) is an ``agent.AgentError``:
the console shows that one line as the node's reason.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import shutil
import subprocess
import sys
import time

# Loaded by its path (tests, tools): its folder on sys.path for nvml_energy.py, as on the node.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import nvml_energy  # noqa: E402 - shipped beside this file

MIB = float(2**20)
MAX_ENUM_FAILURES = 5  # consecutive ticks a MIG layout may stay unreadable before the agent gives up
SMI_TIMEOUT = 20.0
SMI_PROCESS_EVERY = 5  # nvidia-smi ticks between process listings (each listing is a process)
_NAME_CACHE_MAX = 512

# Every per-tick NVML read of one physical GPU; a function that answers
# NotSupported for a GPU is not asked again until the next enumeration.
TICK_READS = (
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetCurrentClocksEventReasons",
)
# Not per tick: they cost milliseconds each on an H200 where the reads above cost
# microseconds (tests/perf/README.md, "NVML call cost").  The energy counter (mJ since
# the driver loaded) is read by nvml_energy.EnergyMeter's cadence, the throttle residency
# counters (fields 74-79, 269-271) by the health readings (nvidia_health.py).
ENERGY_READ = "nvmlDeviceGetTotalEnergyConsumption"
# Clock event reason bits that mean a limit was hit (SW power cap, HW slowdown, SW / HW
# thermal, power brake): the tick's ``throttled``.
THROTTLE_REASON_BITS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80

SMI_FIELDS = (
    "index",
    "name",
    "serial",
    "pci.bus_id",
    "vbios_version",
    "memory.total",
    "memory.used",
    "utilization.gpu",
    "utilization.memory",
    "power.draw",
    "power.limit",
    "temperature.gpu",
    "temperature.memory",
    "clocks.sm",
    "clocks.mem",
    "mig.mode.current",
    "mig.mode.pending",
)
SMI_APP_FIELDS = ("gpu_bus_id", "pid", "process_name", "used_memory")
# The nvidia-smi fallback's health: one query for every GPU per round of health readings
# (field names from the H100's --help-query-gpu; its answers idle and at the power cap are
# kept in tests/fixtures/hardware), mapped onto nvidia_health.HealthReader's record keys.
SMI_HEALTH_FIELDS = (
    ("index", None),
    ("ecc.errors.corrected.volatile.total", "ecc_volatile_corrected"),
    ("ecc.errors.uncorrected.volatile.total", "ecc_volatile_uncorrected"),
    ("ecc.errors.corrected.aggregate.total", "ecc_aggregate_corrected"),
    ("ecc.errors.uncorrected.aggregate.total", "ecc_aggregate_uncorrected"),
    ("remapped_rows.correctable", "remapped_correctable"),
    ("remapped_rows.uncorrectable", "remapped_uncorrectable"),
    ("remapped_rows.pending", "remapped_pending"),
    ("remapped_rows.failure", "remapped_failure"),
    ("retired_pages.sbe", "retired_sbe"),
    ("retired_pages.dbe", "retired_dbe"),
    ("retired_pages.pending", "retired_pending"),
    ("clocks_event_reasons.active", "clock_event_reasons"),
    ("pcie.link.gen.current", "pcie_gen"),
    ("pcie.link.gen.max", "pcie_gen_max"),
    ("pcie.link.width.current", "pcie_width"),
    ("pcie.link.width.max", "pcie_width_max"),
)
_SMI_FLAGS = ("remapped_pending", "remapped_failure", "retired_pending")
# nvidia-smi -L: "  MIG 3g.40gb     Device  0: (UUID: MIG-...)" under its "GPU n: ..." line
_SMI_GPU_LINE = re.compile(r"^GPU\s+(\d+):.*\(UUID:\s*(GPU-[^)\s]+)\)")
_SMI_MIG_LINE = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+):.*\(UUID:\s*(MIG-[^)\s]+)\)")
_MIG_PROFILE = re.compile(r"MIG\s+(\S+)\s*$")


def _str(value):
    """NVML strings: str from current wrappers, bytes from ctypes arrays (busId)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if value is None:
        return None
    value = str(value).strip().rstrip("\x00")
    return value or None


def mig_profile(name):
    """'NVIDIA H100 80GB HBM3 MIG 3g.40gb' -> '3g.40gb' (None when not a MIG name)."""
    match = _MIG_PROFILE.search(name or "")
    return match.group(1) if match else None


def mig_mode_text(mode):
    """MIG mode as the GPU reports it: "off", "on", "off (on after a GPU reset)"; None: no MIG."""
    current, pending = mode
    if current is None:
        return None
    word = {0: "off", 1: "on"}
    text = word.get(current, str(current))
    if pending is not None and pending != current:
        text += " (%s after a GPU reset)" % word.get(pending, str(pending))
    return text


def smi_mig_mode(current, pending):
    """nvidia-smi's mig.mode.current / .pending ("Enabled", "Disabled", "[N/A]") as mig_mode_text."""
    codes = {"enabled": 1, "disabled": 0}
    return mig_mode_text((codes.get(text_of(current).lower()), codes.get(text_of(pending).lower())))


def nvml_error(exc):
    """NVML's own text and the error class: 'RM has detected an NVML/RM version mismatch. (NVMLError_...)'."""
    return "%s (%s)" % (str(exc) or "no message", type(exc).__name__)


def field_number(fv):
    """The number of one nvmlDeviceGetFieldValues entry, or None when NVML could not read it."""
    if getattr(fv, "nvmlReturn", 1) != 0:
        return None
    value = getattr(fv, "value", None)
    kind = getattr(fv, "valueType", None)
    attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(kind)
    return getattr(value, attr, None) if attr else None


class EnumerationFailed(Exception):
    """An NVML call failed while walking one GPU (its MIG layout, mostly)."""

    def __init__(self, gpu_index, cause, mig=False):
        Exception.__init__(self, str(cause))
        self.gpu_index = gpu_index
        self.cause = cause
        self.mig = mig  # MIG on (or pending) on that GPU


class NvmlSampler:
    """NVML in-process: no process per tick.

    Per tick and physical GPU at most 6 reads of microseconds each
    (utilization, power, GPU temperature, SM clock, memory temperature through
    one field-values call, the clock event reasons; utilization is not asked
    of a MIG-enabled GPU, which does not report it), then two lanes that visit
    as many logical GPUs per tick as there are physical ones: memory info,
    running processes.  One more slot per tick checks a slow fact
    round-robin: a GPU's enforced power limit, its memory clock, its MIG mode
    (current and pending) and, when MIG is on, one MIG slot (an instance
    created or destroyed there).  So a tick costs at most 8 calls per
    physical GPU + 1, and the energy counter (milliseconds) one more call per
    GPU every ``energy_every_s`` seconds or at a power step (nvml_energy.py;
    tests/perf/README.md measures the CPU).  Names, serials, BDFs, VBIOS,
    UUIDs and totals are read at start and after a
    re-enumeration only; a process name once per PID.
    """

    source = "nvml"
    vendor = "nvidia"

    def __init__(self, agent, module):
        self.agent = agent
        self.m = module
        self.simulated = bool(getattr(module, "__simulated__", False))
        self.rows = []
        self.gpus = []  # one dict per physical GPU
        self.logical = []  # (row index -> handle)
        self._vram = {}
        self._procs = {}
        self._names = {}
        self._skip = set()  # (physical, function) that answered NotSupported
        self._vram_next = self._procs_next = self._check_next = 0
        self._check_slot = False
        self._stale = False  # a MIG handle went away: enumerate again next tick
        self._enum_failures = 0
        self._health = None  # nvidia_health.HealthReader, made at the first health reading
        self.clock = time.monotonic
        self.energy_every_s = nvml_energy.ENERGY_EVERY_S
        self._meters = {}  # physical -> nvml_energy.EnergyMeter, kept over re-enumerations
        self._health_failed = False
        try:
            with contextlib.redirect_stdout(sys.stderr):
                module.nvmlInit()
        except Exception as exc:
            raise agent.AgentError("NVML init failed: %s" % nvml_error(exc)) from None
        try:
            self.count = module.nvmlDeviceGetCount()
            if not self.count:
                raise agent.AgentError("NVML found no NVIDIA GPU on this node (nvmlDeviceGetCount() = 0)")
            self._enumerate()
            for gpu in self.gpus:  # the energy counters' first reading, at start rather than in a tick
                self._energy_j(gpu, None)
        except Exception as exc:
            self.close()
            if isinstance(exc, agent.AgentError):
                raise
            raise agent.AgentError(self._enum_message(exc)) from None

    # -- calls

    def _call(self, name, *args):
        """One NVML call; an NVMLError (or a function this release lacks) is 'unknown'."""
        try:
            return getattr(self.m, name)(*args)
        except Exception:
            return None

    def _tick_read(self, gpu, name, *args):
        if (gpu["physical"], name) in self._skip:
            return None
        try:
            return getattr(self.m, name)(gpu["handle"], *args)
        except Exception as exc:
            if self._is(exc, "NVMLError_NotSupported") or isinstance(exc, AttributeError):
                self._skip.add((gpu["physical"], name))
            return None

    def _is(self, exc, cls_name):
        cls = getattr(self.m, cls_name, None)
        return isinstance(cls, type) and isinstance(exc, cls)

    @staticmethod
    def _enum_message(exc):
        if isinstance(exc, EnumerationFailed):
            what = "the MIG instances of GPU %d" if exc.mig else "GPU %d"
            return "NVML cannot read %s: %s" % (what % exc.gpu_index, nvml_error(exc.cause))
        return "NVML cannot read the GPUs: %s" % nvml_error(exc)

    # -- enumeration: start, MIG changes

    def _mig_mode(self, handle):
        """(current, pending) MIG mode, (None, None) where MIG is not supported."""
        got = self._call("nvmlDeviceGetMigMode", handle)
        if isinstance(got, (list, tuple)) and len(got) == 2:
            return int(got[0]), int(got[1])
        return None, None

    def _mig_devices(self, handle):
        """(slot count, [(slot, handle)]) of the MIG devices of one GPU; raises when the layout is in flux."""
        slots = self.m.nvmlDeviceGetMaxMigDeviceCount(handle)
        out = []
        for slot in range(int(slots)):
            try:
                out.append((slot, self.m.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)))
            except Exception as exc:
                if self._is(exc, "NVMLError_NotFound"):
                    continue  # an empty slot
                raise
        return int(slots), out

    def _enumerate(self):
        rows, gpus, logical = [], [], []
        enabled = getattr(self.m, "NVML_DEVICE_MIG_ENABLE", 1)
        for physical in range(self.count):
            mode = (None, None)
            try:
                handle = self.m.nvmlDeviceGetHandleByIndex(physical)
                mode = self._mig_mode(handle)
                max_mig, migs = self._mig_devices(handle) if mode[0] == enabled else (0, [])
            except Exception as exc:
                raise EnumerationFailed(physical, exc, enabled in mode) from None
            pci = self._call("nvmlDeviceGetPciInfo", handle)
            name = _str(self._call("nvmlDeviceGetName", handle))
            base = {
                "bdf": _str(getattr(pci, "busId", None)),
                "model": name,
                "serial": _str(self._call("nvmlDeviceGetSerial", handle)),
                "vbios": _str(self._call("nvmlDeviceGetVbiosVersion", handle)),
                "memory_caps": [],
            }
            gpu = {
                "physical": physical,
                "handle": handle,
                "primary_index": len(rows),
                "mig": mode,
                "migs": [(slot, self._mig_ids(h)) for slot, h in migs],
                "max_mig": max_mig,
                "slot_next": 0,
                "power_cap_w": self._power_limit(handle),
                "mem_clock_mhz": self._call("nvmlDeviceGetClockInfo", handle, self.m.NVML_CLOCK_MEM),
                "metrics": {},
            }
            gpus.append(gpu)
            units = [(handle, name)] if not migs else [(h, _str(self._call("nvmlDeviceGetName", h))) for _, h in migs]
            for partition_id, (h, mig_name) in enumerate(units):
                used, total = self._memory(h)
                row = dict(base)
                row.update(
                    {
                        "index": len(rows),
                        "physical": physical,
                        "partition_id": partition_id,
                        "vram_total_mib": total,
                        "compute_partition": "MIG" if migs else None,
                        "memory_partition": mig_profile(mig_name) if migs else None,
                        # what CUDA_VISIBLE_DEVICES must name for a MIG instance ("MIG-...")
                        "uuid": _str(self._call("nvmlDeviceGetUUID", h)),
                        "mig_mode": mig_mode_text(mode),
                    }
                )
                self._vram[row["index"]] = (used, total)
                self._procs[row["index"]] = self._processes(h)
                rows.append(row)
                logical.append(h)
        self.rows = [self._ordered(r) for r in rows]
        self.gpus, self.logical = gpus, logical
        self._skip = set()
        self._vram_next = self._procs_next = self._check_next = 0
        self._stale = False

    def _mig_ids(self, handle):
        return (self._call("nvmlDeviceGetGpuInstanceId", handle), self._call("nvmlDeviceGetComputeInstanceId", handle))

    @staticmethod
    def _ordered(row):
        keys = (
            "index",
            "physical",
            "partition_id",
            "bdf",
            "model",
            "serial",
            "vbios",
            "vram_total_mib",
            "compute_partition",
            "memory_partition",
            "memory_caps",
            "uuid",  # NVIDIA only (these two): the AMD records have no such keys
            "mig_mode",
        )
        return dict((k, row.get(k)) for k in keys)

    # -- reads

    def _memory(self, handle):
        """(used MiB, total MiB); NVML gives bytes."""
        info = self._call("nvmlDeviceGetMemoryInfo", handle)
        if info is None:
            return None, None
        used, total = getattr(info, "used", None), getattr(info, "total", None)
        return (None if used is None else used / MIB), (None if total is None else total / MIB)

    def _power_limit(self, handle):
        """The enforced power limit in W (NVML: mW)."""
        mw = self._call("nvmlDeviceGetEnforcedPowerLimit", handle)
        return mw / 1000.0 if mw else None

    def _process_name(self, pid):
        name = self._names.get(pid)
        if name is None:
            # NVML's PIDs are the host's: /proc of an agent in a container could name
            # another process, so a name NVML cannot give stays empty
            name = _str(self._call("nvmlSystemGetProcessName", pid)) or ""
            if len(self._names) >= _NAME_CACHE_MAX:
                self._names.clear()
            self._names[pid] = name
        return os.path.basename(name) if name.startswith("/") else name

    def _processes(self, handle):
        items = self._call("nvmlDeviceGetComputeRunningProcesses", handle)
        if not isinstance(items, list):
            return None
        out = []
        for item in items:
            pid = getattr(item, "pid", None)
            if not isinstance(pid, int):
                continue
            used = getattr(item, "usedGpuMemory", None)
            out.append(
                {
                    "pid": pid,
                    "name": self._process_name(pid),
                    "vram_mib": used / MIB if isinstance(used, int) else None,
                }
            )
        return out

    def _throttled(self, gpu):
        """Whether a limiting clock event reason is set now (one call of microseconds); the
        residency counters, which say for how long, cost milliseconds and come with health."""
        name = "nvmlDeviceGetCurrentClocksEventReasons"
        if (gpu["physical"], name) in self._skip:
            name = "nvmlDeviceGetCurrentClocksThrottleReasons"  # the older spelling
        mask = self._tick_read(gpu, name)
        return bool(mask & THROTTLE_REASON_BITS) if isinstance(mask, int) else None

    def _energy_j(self, gpu, power_w):
        """The tick's energy figure: the counter when it is due, else its last reading plus the power since."""
        meter, now = self._meters.get(gpu["physical"]), self.clock()
        if meter is None:  # the GPUs' periodic reads spread over the period, not all in one tick
            offset = self.energy_every_s * gpu["physical"] / max(1, self.count)
            meter = self._meters[gpu["physical"]] = nvml_energy.EnergyMeter(self.energy_every_s, offset)
        if meter.due(now, power_w):
            meter.counter(self._tick_read(gpu, ENERGY_READ), now, power_w)
        else:
            meter.power(power_w, now)
        return meter.joules()

    def _physical(self, gpu):
        h_util = None
        if gpu["migs"] == []:
            h_util = self._tick_read(gpu, "nvmlDeviceGetUtilizationRates")
        power = self._tick_read(gpu, "nvmlDeviceGetPowerUsage")
        power_w = power / 1000.0 if isinstance(power, (int, float)) else None
        fields = self._tick_read(gpu, "nvmlDeviceGetFieldValues", [self.m.NVML_FI_DEV_MEMORY_TEMP])
        mem_temp = field_number(fields[0]) if fields else None
        return {
            "util_pct": getattr(h_util, "gpu", None),
            "umc_pct": getattr(h_util, "memory", None),
            "power_w": power_w,
            "temp_junction_c": self._tick_read(gpu, "nvmlDeviceGetTemperature", self.m.NVML_TEMPERATURE_GPU),
            "temp_mem_c": mem_temp if mem_temp else None,  # 0: no HBM sensor on this board
            "gfx_clock_mhz": self._tick_read(gpu, "nvmlDeviceGetClockInfo", self.m.NVML_CLOCK_SM),
            "energy_j": self._energy_j(gpu, power_w),
            "throttled": self._throttled(gpu),
        }

    def _check(self):
        """One slow fact of one GPU; True when the GPUs must be enumerated again."""
        tasks = 4 * len(self.gpus)
        k = self._check_next % tasks
        self._check_next = k + 1
        gpu, task = self.gpus[k // 4], k % 4
        if task == 0:
            gpu["power_cap_w"] = self._power_limit(gpu["handle"])
        elif task == 1:
            gpu["mem_clock_mhz"] = self._call("nvmlDeviceGetClockInfo", gpu["handle"], self.m.NVML_CLOCK_MEM)
        elif task == 2:
            mode = self._mig_mode(gpu["handle"])
            if mode != gpu["mig"]:  # switched, or a change now pending a GPU reset: new static rows
                return True
        elif gpu["migs"]:
            # one MIG slot per check: an instance created in an empty slot, or one gone
            # (a gone or replaced instance also fails the VRAM lane's read of its handle)
            slot = gpu["slot_next"] % max(1, gpu["max_mig"])
            gpu["slot_next"] = slot + 1
            try:
                self.m.nvmlDeviceGetMigDeviceHandleByIndex(gpu["handle"], slot)
                present = True
            except Exception as exc:
                if not self._is(exc, "NVMLError_NotFound"):
                    return True
                present = False
            return present != (slot in dict(gpu["migs"]))
        return False

    # -- Sampler

    def static(self):
        return self.rows

    def refresh(self, tick):
        changed = self._stale
        if not changed:
            self._check_slot = tick > 0 and (len(self.gpus) > 1 or tick % 2 == 0)
            changed = self._check_slot and self._check()
        if not changed:
            for gpu in self.gpus:
                gpu["metrics"] = self._physical(gpu)
            return None
        try:
            self._enumerate()
        except Exception as exc:
            # MIG instances being created or destroyed: handles vanish mid-walk
            self._stale = True
            self._enum_failures += 1
            if self._enum_failures >= MAX_ENUM_FAILURES:
                raise self.agent.AgentError(
                    "%s (%d ticks in a row; are MIG instances being reconfigured?)"
                    % (self._enum_message(exc), self._enum_failures)
                ) from None
            sys.stderr.write("node_agent: warning: %s; retrying\n" % self._enum_message(exc))
            return None
        self._enum_failures = 0
        for gpu in self.gpus:
            gpu["metrics"] = self._physical(gpu)
        return self.rows

    def _lane(self, attr, slots, read, store):
        n = len(self.logical)
        for _ in range(min(slots, n)):
            i = getattr(self, attr) % n
            setattr(self, attr, i + 1)
            store[i] = read(self.logical[i])

    def sample(self):
        if self._stale:
            return None  # the layout is being re-read: the console marks the node stale
        slots = len(self.gpus)
        self._lane("_vram_next", slots, self._memory_checked, self._vram)
        self._lane("_procs_next", slots - (1 if self._check_slot else 0), self._processes, self._procs)
        out = []
        for row in self.rows:
            gpu = self.gpus[row["physical"]]
            used, total = self._vram.get(row["index"], (None, None))
            values = {"vram_used_mib": used, "vram_total_mib": total, "processes": self._procs.get(row["index"])}
            if row["index"] == gpu["primary_index"]:  # the physical GPU's values, shown once
                values.update(gpu["metrics"])
                values["power_cap_w"] = gpu["power_cap_w"]
                values["mem_clock_mhz"] = gpu["mem_clock_mhz"]
            if gpu["migs"]:
                values["util_pct"] = values["umc_pct"] = None  # NVML has no per-instance activity
            out.append(self.agent.gpu_metrics(row["index"], **values))
        return out

    def physical_count(self):
        return 0 if self._stale else len(self.gpus)

    def health(self, physicals):
        """The health entries of these physical GPUs: nvidia_health.HealthReader's records."""
        if self._health is None and not self._health_failed:
            try:
                import nvidia_health  # type: ignore[import-not-found]  # noqa: PLC0415 - shipped beside this file

                self._health = nvidia_health.HealthReader(self.m)
            except Exception as exc:  # no reader: the node streams telemetry without health
                self._health_failed = True
                sys.stderr.write("node_agent: warning: no NVML health readings (%s)\n" % exc)
        if self._health is None:
            return None
        return [
            {
                "physical": p,
                "vendor": "nvidia",
                "source": "nvml",
                "nvml": self._health.read_gpu(p, energy_mj=self._shown(p)),
            }
            for p in physicals
            if p < len(self._health.gpus)
        ]

    def _shown(self, physical):
        """The energy figure the samples carry (mJ), for the health record: not a second counter read."""
        meter = self._meters.get(physical)
        return None if meter is None or meter.shown_mj is None else int(meter.shown_mj)

    def _memory_checked(self, handle):
        info = self._memory(handle)
        if info == (None, None) and self.gpus and any(g["migs"] for g in self.gpus):
            self._stale = True  # a MIG instance that no longer answers: enumerate again
        return info

    def close(self):
        if self._health is not None:
            self._health.close()  # its own nvmlInit's shutdown (NVML counts them)
        self._call("nvmlShutdown")


# ------------------------------------------------------------------ nvidia-smi


def smi_csv(out):
    """Rows of nvidia-smi's --format=csv,noheader,nounits output."""
    return [[cell.strip() for cell in row] for row in csv.reader(out.splitlines()) if row and any(row)]


def smi_number(agent, cell):
    """A CSV cell: '[N/A]', '[Not Supported]', 'N/A' are None."""
    return agent.num(cell)


class SmiSampler:
    """``nvidia-smi --query-gpu=... --format=csv,noheader,nounits``: one process per tick.

    Processes come from ``--query-compute-apps`` every SMI_PROCESS_EVERY ticks.
    MIG instances come from ``nvidia-smi -L`` at start (rows with their
    profile; per-instance VRAM and activity are not in the CSV: null).
    """

    source = "nvidia-smi"
    vendor = "nvidia"
    simulated = False

    def __init__(self, agent, exe):
        self.agent = agent
        self.exe = exe
        self.failures = 0
        self.procs = {}
        self.uuids = {}
        self._health_rows = None  # physical -> the last health query's CSV row
        self._health_served = set()
        self._health_off = False
        self.doc = self._query()
        if not self.doc:
            raise agent.SourceUnavailable("nvidia-smi listed no GPU")
        self.migs = self._mig_layout()
        self.rows = self._static(self.doc)

    def _run(self, args):
        try:
            proc = subprocess.run(
                [self.exe] + list(args),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=SMI_TIMEOUT,
                encoding="utf-8",
                errors="replace",
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise self.agent.SourceUnavailable("%s: %s" % (os.path.basename(self.exe), exc)) from None
        if proc.returncode != 0:
            said = (proc.stdout.strip() or proc.stderr.strip() or "exit %d" % proc.returncode).splitlines()
            raise self.agent.SourceUnavailable("nvidia-smi: %s" % (said[0] if said else "failed"))
        return proc.stdout

    def _query(self):
        rows = smi_csv(self._run(["--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"]))
        out = []
        for row in rows:
            if len(row) != len(SMI_FIELDS):
                raise self.agent.SourceUnavailable(
                    "nvidia-smi printed %d fields, expected %d: %s" % (len(row), len(SMI_FIELDS), ",".join(row)[:80])
                )
            out.append(dict(zip(SMI_FIELDS, row)))
        return out

    def _mig_layout(self):
        """{physical index: [(profile, uuid), ...]} of MIG instances and {index: uuid} of GPUs, from nvidia-smi -L."""
        self.uuids = {}
        try:
            out = self._run(["-L"])
        except self.agent.SourceUnavailable:
            return {}
        layout, gpu = {}, None
        for line in out.splitlines():
            g = _SMI_GPU_LINE.match(line)
            if g:
                gpu = int(g.group(1))
                self.uuids[gpu] = g.group(2)
                continue
            m = _SMI_MIG_LINE.match(line)
            if m and gpu is not None:
                layout.setdefault(gpu, []).append((m.group(1), m.group(3)))
        return layout

    def _static(self, doc):
        rows = []
        for rec in doc:
            physical = int(self.agent.num(rec["index"]) or 0)
            migs = self.migs.get(physical) if text_of(rec["mig.mode.current"]) == "Enabled" else None
            base = {
                "physical": physical,
                "bdf": self.agent.text(rec["pci.bus_id"]),
                "model": self.agent.text(rec["name"]),
                "serial": na_text(self.agent, rec["serial"]),
                "vbios": na_text(self.agent, rec["vbios_version"]),
                "memory_caps": [],
            }
            for partition_id, (profile, uuid) in enumerate(migs or [(None, self.uuids.get(physical))]):
                row = dict(base)
                row.update(
                    {
                        "index": len(rows),
                        "partition_id": partition_id,
                        "vram_total_mib": None if migs else smi_number(self.agent, rec["memory.total"]),
                        "compute_partition": "MIG" if migs else None,
                        "memory_partition": profile,
                        "uuid": uuid,
                        "mig_mode": smi_mig_mode(rec["mig.mode.current"], rec["mig.mode.pending"]),
                    }
                )
                rows.append(NvmlSampler._ordered(row))
        return rows

    def _processes(self):
        rows = smi_csv(self._run(["--query-compute-apps=" + ",".join(SMI_APP_FIELDS), "--format=csv,noheader,nounits"]))
        by_bus = {}
        for row in rows:
            if len(row) != len(SMI_APP_FIELDS):
                continue
            bus, pid, name, used = row
            pid_n = self.agent.num(pid)
            if pid_n is None:
                continue
            by_bus.setdefault(bus.lower(), []).append(
                {"pid": int(pid_n), "name": os.path.basename(name), "vram_mib": smi_number(self.agent, used)}
            )
        return by_bus

    def physical_count(self):
        return len(set(r["physical"] for r in self.rows)) if self.doc and not self._health_off else 0

    def health(self, physicals):
        """Health records from one ``--query-gpu`` of SMI_HEALTH_FIELDS per round: a GPU read
        again asks nvidia-smi again; what it prints as [N/A] is left out."""
        if self._health_rows is None or any(p in self._health_served for p in physicals):
            try:
                out = self._run(
                    ["--query-gpu=" + ",".join(f for f, _ in SMI_HEALTH_FIELDS), "--format=csv,noheader,nounits"]
                )
            except self.agent.SourceUnavailable as exc:
                self._health_off = True  # an nvidia-smi without these fields: no health lines, said once
                sys.stderr.write("node_agent: no nvidia-smi health readings (%s)\n" % exc)
                return None
            self._health_rows = dict(
                (int(self.agent.num(row[0]) or 0), row) for row in smi_csv(out) if len(row) == len(SMI_HEALTH_FIELDS)
            )
            self._health_served = set()
        out = []
        for physical in physicals:
            row = self._health_rows.get(physical)
            if row is None:
                continue
            self._health_served.add(physical)
            out.append(
                {"physical": physical, "vendor": "nvidia", "source": "nvidia-smi", "nvml": self._record(physical, row)}
            )
        return out

    def _record(self, physical, row):
        import time  # noqa: PLC0415 - only where health is read

        record = {"type": "health", "gpu": physical, "t": round(time.time(), 3)}
        for (_, key), cell in zip(SMI_HEALTH_FIELDS[1:], row[1:]):
            cell = text_of(cell)
            if key in _SMI_FLAGS:
                value = {"yes": True, "no": False}.get(cell.lower())
            elif key == "clock_event_reasons":
                try:
                    value = int(cell, 16)
                except ValueError:
                    value = None
            else:
                number = smi_number(self.agent, cell)
                value = int(number) if number is not None else None
            if value is not None:
                record[key] = value
        mask = record.get("clock_event_reasons")
        if mask is not None:
            try:
                import nvidia_health  # noqa: PLC0415 - shipped beside this file

                record["clock_event_names"] = nvidia_health.decode_reasons(mask)
                record["throttled"] = nvidia_health.is_throttled(record["clock_event_names"])
            except ImportError:
                pass
        return record

    def static(self):
        return self.rows

    def refresh(self, tick):
        try:
            if tick:
                self.doc = self._query()
            if tick % SMI_PROCESS_EVERY == 0:
                self.procs = self._processes()
            self.failures = 0
        except self.agent.SourceUnavailable as exc:
            self.failures += 1
            self.doc = None
            if self.failures >= self.agent.MAX_CLI_FAILURES:
                raise self.agent.AgentError("nvidia-smi failed %d times in a row (%s)" % (self.failures, exc)) from None
            return None
        if len(self.doc) != len({r["physical"] for r in self.rows}):
            self.migs = self._mig_layout()
            self.rows = self._static(self.doc)
            return self.rows
        return None

    def sample(self):
        if not self.doc:
            return None
        by_physical = dict((int(self.agent.num(r["index"]) or 0), r) for r in self.doc)
        out = []
        for row in self.rows:
            rec = by_physical.get(row["physical"])
            if rec is None:
                continue
            cells = dict((key, smi_number(self.agent, rec[key])) for key in SMI_FIELDS[5:15])
            n = cells.get
            procs = self.procs.get((row["bdf"] or "").lower())
            values = {"processes": procs if row["compute_partition"] is None else None}
            if row["partition_id"] == 0:
                values.update(
                    {
                        "power_w": n("power.draw"),
                        "power_cap_w": n("power.limit"),
                        "temp_junction_c": n("temperature.gpu"),
                        "temp_mem_c": n("temperature.memory"),
                        "gfx_clock_mhz": n("clocks.sm"),
                        "mem_clock_mhz": n("clocks.mem"),
                    }
                )
            if row["compute_partition"] is None:
                values.update(
                    {
                        "util_pct": n("utilization.gpu"),
                        "umc_pct": n("utilization.memory"),
                        "vram_used_mib": n("memory.used"),
                        "vram_total_mib": n("memory.total"),
                    }
                )
            out.append(self.agent.gpu_metrics(row["index"], **values))
        return out

    def close(self):
        pass


def text_of(cell):
    return (cell or "").strip()


def na_text(agent, cell):
    """nvidia-smi's '[N/A]' and '[Not Supported]' are no value."""
    value = agent.text(cell)
    return None if value is None or value.startswith("[") else value


# ------------------------------------------------------------ source choice


def load_pynvml(paths):
    """(module, None) or (None, one-line reason); the agent's --amdsmi-path dirs come first (the sim)."""
    for path in reversed(paths or ()):
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            import pynvml  # noqa: PLC0415 - optional, found at run time
    except Exception as exc:
        return None, "%s: %s" % (type(exc).__name__, exc)
    return pynvml, None


def probe_source(paths):
    """The source open_nvidia would stream from: "nvml" where pynvml loads and NVML answers
    (or fails with its own reason, which the agent reports), "nvidia-smi", or None."""
    module, _ = load_pynvml(paths)
    if module is not None:
        try:
            with contextlib.redirect_stdout(sys.stderr):
                module.nvmlInit()
            module.nvmlShutdown()
        except Exception as exc:  # no driver: the agent falls through to nvidia-smi too
            if "LibraryNotFound" in type(exc).__name__:
                return "nvidia-smi" if shutil.which("nvidia-smi") else None
        return "nvml"
    return "nvidia-smi" if shutil.which("nvidia-smi") else None


def open_nvidia(agent, paths, reasons):
    """(sampler, note) from pynvml, else nvidia-smi; None when neither is here."""
    module, why = load_pynvml(paths)
    if module is not None:
        try:
            return NvmlSampler(agent, module), (("; ".join(reasons) + "; using NVML") if reasons else None)
        except agent.AgentError as exc:
            if "NVMLError_LibraryNotFound" not in str(exc):
                raise  # NVML is there and says what is wrong: that is the node's reason
            reasons.append("pynvml present but no NVIDIA driver (libnvidia-ml.so.1 not found)")
    else:
        reasons.append("pynvml unavailable (%s)" % why)
    exe = shutil.which("nvidia-smi")
    if exe is None:
        reasons.append("nvidia-smi not found")
        return None
    try:
        sampler = SmiSampler(agent, exe)
    except agent.SourceUnavailable as exc:
        reasons.append("nvidia-smi failed (%s)" % exc)
        return None
    return sampler, "; ".join(reasons) + "; using nvidia-smi --query-gpu"
