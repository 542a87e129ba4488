"""Simulated `amdsmi`: the AMD SMI Python API for a fake MI300X/MI325X/MI355X node.

This file is uploaded to a node and imported as the top-level module `amdsmi`,
so it is self-contained: stdlib only, Python >= 3.8, and it never prints.

Names, return shapes, units, enums and exceptions follow the real package
(amdsmi 7.0.2); values are synthetic but plausible and deterministic for a
given (seed, GPU, time).

Environment
    ROCM_CONSOLE_SIM_DIR   folder holding the node's state (required)
    ROCM_CONSOLE_SIM_SPEC  JSON used to create state.json on first init:
                           {"gpu": "MI300X", "count": 8, "compute_partition": "SPX",
                            "memory_partition": "NPS1", "seed": 0}

Files in the folder
    state.json       partition modes per physical GPU and a few knobs (see
                     `_new_state`); written atomically.
    processes.json   simulated GPU processes, written by other simulator parts:
                     [{"pid", "name", "gpu" (logical index, or "gpus": [..]),
                       "vram_bytes", "sticky"?, "started"?}] or {"processes": [...]}.
                     Entries count while their pid is alive, or when "sticky".
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections import namedtuple
from enum import IntEnum


def _now() -> float:
    """The simulator's clock. ROCM_CONSOLE_SIM_TIME freezes it, for deterministic screenshots."""
    frozen = os.environ.get("ROCM_CONSOLE_SIM_TIME")
    if frozen:
        try:
            return float(frozen)
        except ValueError:
            pass
    return time.time()


__simulated__ = True
__version__ = "7.0.2+sim"
# What the simulated node has installed besides amdsmi, for the agent's probe (the header's
# versions): the simulated vllm (console/sim/vllm, constants.VERSION; a test keeps them equal).
SIM_VLLM_VERSION = "0.32.0+sim"

ENV_DIR = "ROCM_CONSOLE_SIM_DIR"
ENV_SPEC = "ROCM_CONSOLE_SIM_SPEC"

MiB = 1024 * 1024


# --------------------------------------------------------------------------- enums


class AmdSmiInitFlags(IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1 << 0
    INIT_AMD_GPUS = 1 << 1
    INIT_NON_AMD_CPUS = 1 << 2
    INIT_NON_AMD_GPUS = 1 << 3
    INIT_AMD_APUS = (1 << 0) | (1 << 1)


class _Status(IntEnum):
    """amdsmi_status_t; the real package has these only as amdsmi_wrapper.AMDSMI_STATUS_* ints."""

    SUCCESS = 0
    INVAL = 1
    NOT_SUPPORTED = 2
    NOT_YET_IMPLEMENTED = 3
    FAIL_LOAD_MODULE = 4
    FAIL_LOAD_SYMBOL = 5
    DRM_ERROR = 6
    API_FAILED = 7
    TIMEOUT = 8
    RETRY = 9
    NO_PERM = 10
    INTERRUPT = 11
    IO = 12
    ADDRESS_FAULT = 13
    FILE_ERROR = 14
    OUT_OF_RESOURCES = 15
    INTERNAL_EXCEPTION = 16
    INPUT_OUT_OF_BOUNDS = 17
    INIT_ERROR = 18
    REFCOUNT_OVERFLOW = 19
    BUSY = 30
    NOT_FOUND = 31
    NOT_INIT = 32
    NO_SLOT = 33
    DRIVER_NOT_LOADED = 34
    NO_DATA = 40
    INSUFFICIENT_SIZE = 41
    UNEXPECTED_SIZE = 42
    UNEXPECTED_DATA = 43
    FILE_NOT_FOUND = 52
    ARG_PTR_NULL = 53
    AMDGPU_RESTART_ERR = 54
    SETTING_UNAVAILABLE = 55
    MAP_ERROR = 0xFFFFFFFE
    UNKNOWN_ERROR = 0xFFFFFFFF


class AmdSmiComputePartitionType(IntEnum):
    INVALID = 0
    SPX = 1
    DPX = 2
    TPX = 3
    QPX = 4
    CPX = 5


class AmdSmiMemoryPartitionType(IntEnum):
    UNKNOWN = 0
    NPS1 = 1
    NPS2 = 2
    NPS4 = 4
    NPS8 = 8


class AmdSmiTemperatureType(IntEnum):
    EDGE = 0
    HOTSPOT = 1
    JUNCTION = 1  # alias of HOTSPOT, as in amdsmi.h
    VRAM = 2
    HBM_0 = 3
    HBM_1 = 4
    HBM_2 = 5
    HBM_3 = 6
    PLX = 7


class AmdSmiTemperatureMetric(IntEnum):
    CURRENT = 0
    MAX = 1
    MIN = 2
    MAX_HYST = 3
    MIN_HYST = 4
    CRITICAL = 5
    CRITICAL_HYST = 6
    EMERGENCY = 7
    EMERGENCY_HYST = 8
    CRIT_MIN = 9
    CRIT_MIN_HYST = 10
    OFFSET = 11
    LOWEST = 12
    HIGHEST = 13


class AmdSmiClkType(IntEnum):
    SYS = 0
    GFX = 0  # alias of SYS, as in amdsmi.h
    DF = 1
    DCEF = 2
    SOC = 3
    MEM = 4
    PCIE = 5
    VCLK0 = 6
    VCLK1 = 7
    DCLK0 = 8
    DCLK1 = 9


class AmdSmiMemoryType(IntEnum):
    VRAM = 0
    VIS_VRAM = 1
    GTT = 2


class AmdSmiGpuBlock(IntEnum):
    INVALID = 0
    UMC = 1
    SDMA = 2
    GFX = 4
    MMHUB = 8
    ATHUB = 16
    PCIE_BIF = 32
    HDP = 64
    XGMI_WAFL = 128
    DF = 256


# ---------------------------------------------------------------------- exceptions

_ERROR_TEXT = {
    _Status.INVAL: "Invalid parameters",
    _Status.NOT_SUPPORTED: "Feature not supported",
    _Status.TIMEOUT: "Timeout in API call",
    _Status.RETRY: "Retry operation",
    _Status.NO_PERM: "Permission Denied",
    _Status.INIT_ERROR: "Initialization error",
    _Status.BUSY: "Device busy",
    _Status.NOT_FOUND: "Device Not found",
    _Status.NOT_INIT: "Device not initialized",
    _Status.DRIVER_NOT_LOADED: "Driver not loaded",
    _Status.NO_DATA: "No data was found for given input",
    _Status.INSUFFICIENT_SIZE: "Insufficient size for operation",
    _Status.UNEXPECTED_DATA: "The data read or provided was unexpected",
    _Status.AMDGPU_RESTART_ERR: "AMDGPU restart failed",
    _Status.SETTING_UNAVAILABLE: "Setting is not available",
}


class AmdSmiException(Exception):
    """Base class of every amdsmi exception."""


class AmdSmiLibraryException(AmdSmiException):
    """A non-success status from the library; `detail` is a simulator-only extra."""

    def __init__(self, err_code, detail=None):
        err_code = abs(int(err_code))
        super().__init__(err_code)
        self.err_code = err_code
        try:
            name = _Status(err_code).name
        except ValueError:
            name = "UNKNOWN_ERROR"
        text = _ERROR_TEXT.get(err_code, "An unknown error occurred")
        self.err_info = "AMDSMI_STATUS_{} - {}".format(name, text)
        if detail:
            self.err_info += " (sim: {})".format(detail)

    def __str__(self):
        return "Error code:\n\t{} | {}".format(self.err_code, self.err_info)

    def get_error_info(self):
        return self.err_info

    def get_error_code(self):
        return self.err_code


class AmdSmiRetryException(AmdSmiLibraryException):
    def __init__(self, detail=None):
        super().__init__(_Status.RETRY, detail)


class AmdSmiTimeoutException(AmdSmiLibraryException):
    def __init__(self, detail=None):
        super().__init__(_Status.TIMEOUT, detail)


class AmdSmiParameterException(AmdSmiException):
    """A Python argument of the wrong type (checked before the library is called)."""

    def __init__(self, receivedValue, expectedType, msg=None):
        super().__init__(msg)
        self.err_code = None
        self.actualType = type(receivedValue)
        self.expectedType = expectedType
        self.err_msg = msg or "Invalid parameter:\nActual type: {}\nExpected type: {}".format(
            self.actualType, expectedType
        )

    def __str__(self):
        return self.err_msg


def _error(code, detail=None):
    """The exception class the real wrapper raises for `code`."""
    if code == _Status.RETRY:
        return AmdSmiRetryException(detail)
    if code == _Status.TIMEOUT:
        return AmdSmiTimeoutException(detail)
    return AmdSmiLibraryException(code, detail)


# ----------------------------------------------------------------------- GPU models

_Model = namedtuple(
    "_Model",
    "name market_name device_id gfx_target cus xcds vram_mb vram_type vram_vendor"
    " vram_bandwidth power_cap_w idle_w gfx_min gfx_max soc_max mem_clk"
    " compute_modes memory_caps vbios_part",
)

# vram_mb is what the driver reports (a little under the marketing GB);
# vram_type is the amdsmi_vram_type_t value (HBM3 4, HBM3E 5).
MODELS = {
    "MI300X": _Model(
        "MI300X",
        "AMD Instinct MI300X",
        0x74A1,
        "gfx942",
        304,
        8,
        196592,
        4,
        "HYNIX",
        5300,
        750,
        140,
        500,
        2100,
        1143,
        1300,
        ("SPX", "DPX", "QPX", "CPX"),
        ("NPS1", "NPS4"),
        "113-M3000100-102",
    ),
    "MI325X": _Model(
        "MI325X",
        "AMD Instinct MI325X",
        0x74A5,
        "gfx942",
        304,
        8,
        262128,
        5,
        "HYNIX",
        6000,
        1000,
        165,
        500,
        2100,
        1143,
        1300,
        ("SPX", "DPX", "QPX", "CPX"),
        ("NPS1", "NPS4"),
        "113-M3250100-100",
    ),
    "MI355X": _Model(
        "MI355X",
        "AMD Instinct MI355X",
        0x75A3,
        "gfx950",
        256,
        8,
        294896,
        5,
        "SAMSUNG",
        8000,
        1400,
        220,
        500,
        2400,
        1200,
        1300,
        ("SPX", "DPX", "QPX", "CPX"),
        ("NPS1", "NPS2"),
        "113-M3550100-100",
    ),
}

# Logical GPUs per physical GPU for each compute mode.
PARTITIONS = {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4, "CPX": 8}

# Which memory (NPS) modes each compute mode works with (partition.md).
COMPATIBLE = {
    "SPX": ("NPS1",),
    "DPX": ("NPS1", "NPS2"),
    "QPX": ("NPS1", "NPS4"),
    "CPX": ("NPS1", "NPS4"),
}

# PCI buses of the eight OAM slots on an MI300X platform; more GPUs get made-up buses.
_BUSES = ("0c", "22", "38", "5c", "9f", "af", "bf", "df")

# Engines of one physical GPU, split among partitions (accelerator profiles).
_RESOURCES = (("XCC", 8), ("DECODER", 4), ("DMA", 16), ("JPEG", 32))

_CPU_NODES = 2  # KFD/HSA number CPU agents first; a 2-socket host is assumed


def _memory_caps(model, compute):
    """NPS modes usable with `compute` on this model, in the model's order."""
    return [m for m in model.memory_caps if m in COMPATIBLE.get(compute, ())]


# -------------------------------------------------------------------------- storage


def _sim_dir():
    path = os.environ.get(ENV_DIR)
    if not path:
        raise AmdSmiLibraryException(
            _Status.DRIVER_NOT_LOADED,
            "{} is not set; the simulated amdsmi needs a state folder".format(ENV_DIR),
        )
    return path


def _write_json(path, data):
    """Write atomically: a reader never sees half a file."""
    tmp = "{}.{}.tmp".format(path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _new_state(spec):
    """state.json content for a fresh node built from ROCM_CONSOLE_SIM_SPEC."""
    gpu = str(spec.get("gpu", "MI300X")).upper()
    if gpu not in MODELS:
        raise AmdSmiLibraryException(_Status.INIT_ERROR, "unknown gpu {!r}; one of {}".format(gpu, sorted(MODELS)))
    model = MODELS[gpu]
    count = spec.get("count", 8)
    compute = str(spec.get("compute_partition", "SPX")).upper()
    memory = str(spec.get("memory_partition", "NPS1")).upper()
    if not isinstance(count, int) or not 1 <= count <= 64:
        raise AmdSmiLibraryException(_Status.INIT_ERROR, "count must be 1..64")
    if compute not in model.compute_modes or memory not in _memory_caps(model, compute):
        raise AmdSmiLibraryException(
            _Status.INIT_ERROR,
            "{}/{} is not a valid mode for {}".format(compute, memory, gpu),
        )
    buses = list(_BUSES) + ["{:02x}".format(0xE0 + i) for i in range(count)]
    return {
        "version": 1,
        "gpu": gpu,
        "seed": int(spec.get("seed", 0)),
        "created": _now(),
        # null: root means euid 0; true/false force it (the demo and tests).
        "root": spec.get("root"),
        "switch_seconds": float(spec.get("switch_seconds", 2.0)),
        # {"amdsmi_get_power_info": 9} makes that call raise status 9 (tests).
        "faults": {},
        "gpus": [
            {
                "index": i,
                "bus": buses[i],
                "compute_partition": compute,
                "memory_partition": memory,
                "pending_memory_partition": None,
            }
            for i in range(count)
        ],
    }


def _busy_processes(spec):
    """Sticky workloads on the logical GPUs listed in the spec's "busy" (the demo's load)."""
    out = []
    for n, gpu in enumerate(spec.get("busy") or ()):
        if isinstance(gpu, int) and not isinstance(gpu, bool) and gpu >= 0:
            out.append(
                {
                    "pid": 4000 + 17 * n,
                    "name": "python3 (sim workload)",
                    "gpu": gpu,
                    "vram_bytes": (20 + 7 * (n % 5)) * 2**30,
                    "sticky": True,
                }
            )
    return out


class _JsonFile:
    """A JSON file re-read only when it changes (telemetry reads it very often)."""

    def __init__(self, path):
        self.path = path
        self._key = None
        self._data = None

    def read(self, default=None):
        try:
            st = os.stat(self.path)
        except OSError:
            self._key, self._data = None, None
            return default
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key != self._key:
            try:
                with open(self.path) as f:
                    self._data = json.load(f)
            except (OSError, ValueError):
                return default
            self._key = key
        return self._data


class _Library:
    """Per-process library state: init ref count and the handle snapshot."""

    def __init__(self):
        self.refcount = 0
        self.session = 0  # bumped at every first init; stale handles carry an older one
        self.handles = []
        self.state_file = None
        self.procs_file = None

    def state(self):
        data = self.state_file.read()
        if data is None:
            raise AmdSmiLibraryException(_Status.DRIVER_NOT_LOADED, "state.json vanished")
        return data

    def fresh_state(self):
        """Read state.json from disk, bypassing the cache (before a change)."""
        try:
            with open(self.state_file.path) as f:
                return json.load(f)
        except (OSError, ValueError) as exc:
            raise AmdSmiLibraryException(_Status.DRIVER_NOT_LOADED, "state.json: {}".format(exc))

    def save(self, state):
        _write_json(self.state_file.path, state)


_lib = _Library()


class ProcessorHandle:
    """Opaque handle of one logical GPU, as enumerated at init time."""

    __slots__ = ("_session", "index", "phys", "partition", "num_partitions")

    def __init__(self, session, index, phys, partition, num_partitions):
        self._session = session
        self.index = index  # logical index at enumeration
        self.phys = phys
        self.partition = partition
        self.num_partitions = num_partitions  # of its physical GPU, at enumeration

    def __repr__(self):
        return "<amdsmi_processor_handle (sim) gpu {} = physical {} partition {}/{}>".format(
            self.index, self.phys, self.partition, self.num_partitions
        )


class _Wrapper:
    """Stand-in for `amdsmi.amdsmi_wrapper`: status constants and the handle type."""

    amdsmi_processor_handle = ProcessorHandle


for _status in _Status:
    setattr(_Wrapper, "AMDSMI_STATUS_" + _status.name, int(_status))
amdsmi_wrapper = _Wrapper


def _require_init():
    if _lib.refcount <= 0:
        raise AmdSmiLibraryException(_Status.NOT_INIT)


def _fault(api):
    """Raise the status configured for `api` in state.json "faults", if any."""
    code = (_lib.state().get("faults") or {}).get(api)
    if code:
        raise _error(int(code), "injected fault")


def _gpu(handle, api):
    """Validate a handle like the real wrapper and library, then apply faults."""
    if not isinstance(handle, ProcessorHandle):
        raise AmdSmiParameterException(handle, ProcessorHandle)
    if _lib.refcount <= 0 or handle._session != _lib.session:
        raise AmdSmiLibraryException(_Status.NOT_INIT, "handle used after amdsmi_shut_down")
    _fault(api)
    return handle


def _model(state):
    return MODELS[state["gpu"]]


def _is_root(state):
    forced = state.get("root")
    if forced is not None:
        return bool(forced)
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _require_root(state):
    if not _is_root(state):
        raise AmdSmiLibraryException(_Status.NO_PERM, "partition changes need root")


def _sleep_switch(state):
    seconds = float(state.get("switch_seconds", 2.0))
    if seconds > 0:
        time.sleep(seconds)


# ------------------------------------------------------------------------ processes


def _pid_alive(pid):
    if not isinstance(pid, int) or pid <= 0:  # never signal a process group
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return False
    try:  # an unreaped zombie still answers kill(0)
        with open("/proc/{}/stat".format(pid)) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _live_processes():
    """(logical index, entry) for every live or sticky simulated process."""
    data = _lib.procs_file.read(default=[])
    if isinstance(data, dict):
        data = data.get("processes", [])
    if not isinstance(data, list):
        return []
    out = []
    for entry in data:
        if not isinstance(entry, dict):
            continue
        if not (entry.get("sticky") or _pid_alive(entry.get("pid"))):
            continue
        gpus = entry.get("gpus", entry.get("gpu"))
        for g in gpus if isinstance(gpus, list) else [gpus]:
            if isinstance(g, int):
                out.append((g, entry))
    return out


def _layout(state):
    """First logical index of each physical GPU under the current modes."""
    offsets, n = [], 0
    for gpu in state["gpus"]:
        offsets.append(n)
        n += PARTITIONS[gpu["compute_partition"]]
    return offsets


def _logical_now(state, phys, partition):
    """Logical index that (phys, partition) has now, or None if it no longer exists."""
    if partition >= PARTITIONS[state["gpus"][phys]["compute_partition"]]:
        return None
    return _layout(state)[phys] + partition


def _processes_on(state, phys, partition):
    index = _logical_now(state, phys, partition)
    if index is None:
        return []
    return [e for g, e in _live_processes() if g == index]


def _busy_physical(state):
    """Physical GPUs with at least one live simulated process."""
    offsets = _layout(state)
    busy = set()
    for g, _ in _live_processes():
        for phys in range(len(offsets) - 1, -1, -1):
            if g >= offsets[phys]:
                if g < offsets[phys] + PARTITIONS[state["gpus"][phys]["compute_partition"]]:
                    busy.add(phys)
                break
    return busy


# ------------------------------------------------------------------- synthetic data

_phase_cache = {}


def _phases(seed, phys, partition):
    """Per-GPU wave phases and periods, derived from the seed (stable across runs)."""
    key = (seed, phys, partition)
    if key not in _phase_cache:
        digest = hashlib.sha256("{}:{}:{}".format(seed, phys, partition).encode()).digest()
        u = [b / 255.0 for b in digest[:6]]
        _phase_cache[key] = (
            (2 * math.pi * u[0], 60 + 60 * u[3]),
            (2 * math.pi * u[1], 15 + 15 * u[4]),
            (2 * math.pi * u[2], 4 + 4 * u[5]),
        )
    return _phase_cache[key]


def _wave(seed, phys, partition, t):
    """A smooth 0..1 signal: three sines of different periods."""
    (p1, t1), (p2, t2), (p3, t3) = _phases(seed, phys, partition)
    w = (
        0.5
        + 0.3 * math.sin(2 * math.pi * t / t1 + p1)
        + 0.15 * math.sin(2 * math.pi * t / t2 + p2)
        + 0.05 * math.sin(2 * math.pi * t / t3 + p3)
    )
    return min(1.0, max(0.0, w))


def _logical_load(seed, phys, partition, t, busy):
    """(gfx, umc) activity 0..1 of one logical GPU; a GPU with a process works."""
    w = _wave(seed, phys, partition, t)
    if busy:
        return 0.35 + 0.65 * w, 0.15 + 0.55 * w
    return 0.08 * w * w, 0.01 * w


_SAMPLE_MEMO = {}  # one entry per physical GPU: (key, sample)


def _physical_sample(state, phys, t):
    """Physical-GPU telemetry at time t, memoised for 50 ms.

    A telemetry tick asks for the same GPU's values through many calls
    (activity, power, temperatures, clocks); computing them once per tick keeps
    the simulator's cost from dominating what the agent's cost is measured with.
    """
    used = frozenset(g for g, _ in _live_processes())
    key = (id(state), phys, int(t * 20), used)
    hit = _SAMPLE_MEMO.get(phys)
    if hit is not None and hit[0] == key:
        return hit[1]
    sample = _compute_physical_sample(state, phys, t, used)
    _SAMPLE_MEMO[phys] = (key, sample)
    return sample


def _compute_physical_sample(state, phys, t, used):
    """Physical-GPU telemetry at time t: activity, power, temperatures, clocks."""
    model = _model(state)
    seed = state.get("seed", 0)
    n = PARTITIONS[state["gpus"][phys]["compute_partition"]]
    base = _layout(state)[phys]
    busy = [(base + p) in used for p in range(n)]

    def load(at):
        parts = [_logical_load(seed, phys, p, at, busy[p]) for p in range(n)]
        return sum(g for g, _ in parts) / n, sum(u for _, u in parts) / n, [g for g, _ in parts]

    gfx, umc, per_partition = load(t)
    # Temperatures follow the load with a lag (thermal mass).
    lagged = sum(load(t - lag)[0] for lag in (0, 8, 16, 24)) / 4
    jitter = _wave(seed, phys, 99, t) - 0.5  # small independent wobble, -0.5..0.5

    power = model.idle_w + (0.96 * model.power_cap_w - model.idle_w) * gfx**1.1
    power = min(model.power_cap_w, power + 0.04 * model.idle_w * jitter)
    hotspot = min(95.0, max(35.0, 37 + 53 * lagged**0.9 + 2 * jitter))
    mem_temp = max(30.0, hotspot - 4 - 6 * lagged)

    if not any(busy):  # idle: deep sleep, clock below the DPM minimum
        gfx_clk, deep_sleep = 140 + 60 * (jitter + 0.5), 1
    else:
        span = model.gfx_max - model.gfx_min
        gfx_clk, deep_sleep = model.gfx_min + span * min(1.0, 0.25 + 1.2 * gfx), 0
        if power > 0.93 * model.power_cap_w:  # power-capped: clocks back off
            gfx_clk *= 0.93
    soc_clk = 400 + (model.soc_max - 400) * min(1.0, 2 * gfx)
    return {
        "gfx": gfx,
        "umc": umc,
        "per_partition": per_partition,
        "power": power,
        "hotspot": hotspot,
        "mem_temp": mem_temp,
        "hbm": [mem_temp + d for d in (-1.0, 0.5, 1.0, -0.5)],
        "gfx_clk": int(round(min(model.gfx_max, max(120, gfx_clk)))),
        "soc_clk": int(round(soc_clk)),
        "mem_clk": model.mem_clk,
        "deep_sleep": deep_sleep,
    }


def _vram_used_bytes(state, h):
    baseline = (283 * MiB) // h.num_partitions + 8 * MiB  # driver/firmware reservations
    procs = sum(int(e.get("vram_bytes", 0) or 0) for e in _processes_on(state, h.phys, h.partition))
    return min(_vram_total_mb(state, h) * MiB, baseline + procs)


def _vram_total_mb(state, h):
    return _model(state).vram_mb // h.num_partitions


def _digest(*parts):
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()


def _serial(state, phys):
    return _digest("serial", state.get("seed", 0), phys)[:16].upper()


def _secondary(h):
    """Only partition 0 of a physical GPU has power/thermal/clock metrics."""
    return h.partition > 0


def _all_na(keys):
    return {k: "N/A" for k in keys}


# --------------------------------------------------------------------- library life


def amdsmi_init(flag=AmdSmiInitFlags.INIT_AMD_GPUS):
    if not isinstance(flag, AmdSmiInitFlags):
        raise AmdSmiParameterException(flag, AmdSmiInitFlags)
    if _lib.refcount > 0:  # ref-counted: later inits keep the first enumeration
        _lib.refcount += 1
        return
    folder = _sim_dir()
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise AmdSmiLibraryException(_Status.DRIVER_NOT_LOADED, str(exc))
    state_path = os.path.join(folder, "state.json")
    if not os.path.exists(state_path):
        try:
            spec = json.loads(os.environ.get(ENV_SPEC) or "{}")
        except ValueError as exc:
            raise AmdSmiLibraryException(_Status.INIT_ERROR, "bad {}: {}".format(ENV_SPEC, exc))
        if not isinstance(spec, dict):
            raise AmdSmiLibraryException(_Status.INIT_ERROR, ENV_SPEC + " must be an object")
        _write_json(state_path, _new_state(spec))
        busy = _busy_processes(spec)
        if busy:
            _write_json(os.path.join(folder, "processes.json"), busy)
    _lib.state_file = _JsonFile(state_path)
    _lib.procs_file = _JsonFile(os.path.join(folder, "processes.json"))
    state = _lib.state()

    # Enumerate once, like the real library: handles describe the partition
    # layout at init time until amdsmi_shut_down() + amdsmi_init().
    _lib.session += 1
    _lib.handles = []
    if int(flag) & AmdSmiInitFlags.INIT_AMD_GPUS:
        for phys, gpu in enumerate(state["gpus"]):
            n = PARTITIONS[gpu["compute_partition"]]
            for part in range(n):
                _lib.handles.append(ProcessorHandle(_lib.session, len(_lib.handles), phys, part, n))
    _lib.refcount = 1


def amdsmi_shut_down():
    if _lib.refcount <= 0:
        return
    _lib.refcount -= 1
    if _lib.refcount == 0:
        _lib.handles = []


def amdsmi_get_processor_handles():
    _require_init()
    _fault("amdsmi_get_processor_handles")
    return list(_lib.handles)


def amdsmi_gpu_driver_reload():
    """Reload amdgpu: applies pending memory partitions (manual since ROCm 7.0)."""
    _require_init()
    _fault("amdsmi_gpu_driver_reload")
    state = _lib.fresh_state()
    _require_root(state)
    if _busy_physical(state):
        raise AmdSmiLibraryException(_Status.AMDGPU_RESTART_ERR, "GPU processes still running; amdgpu cannot unload")
    _sleep_switch(state)
    state = _lib.fresh_state()
    for gpu in state["gpus"]:
        pending = gpu.get("pending_memory_partition")
        if pending:
            gpu["memory_partition"] = pending
            gpu["pending_memory_partition"] = None
        # A reload "may reset the accelerator partition": fall back to the
        # smallest compute mode the new memory mode allows.
        if gpu["memory_partition"] not in COMPATIBLE[gpu["compute_partition"]]:
            for mode in _model(state).compute_modes:
                if gpu["memory_partition"] in COMPATIBLE[mode]:
                    gpu["compute_partition"] = mode
                    break
    _lib.save(state)


# ----------------------------------------------------------------- identification


def amdsmi_get_gpu_asic_info(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_asic_info")
    state = _lib.state()
    model = _model(state)
    return {
        "market_name": model.market_name,
        "vendor_id": "0x1002",
        "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
        "subvendor_id": "0x1002",
        "device_id": hex(model.device_id),
        "rev_id": "0x00",
        "asic_serial": "0x" + _serial(state, h.phys),
        "oam_id": h.phys,
        "num_compute_units": model.cus // h.num_partitions,
        "target_graphics_version": model.gfx_target,
        "subsystem_id": hex(model.device_id),
    }


def amdsmi_get_gpu_board_info(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_board_info")
    state = _lib.state()
    model = _model(state)
    return {
        "model_number": "102-G{}-00".format(model.name[2:5]),
        "product_serial": "PCB" + _serial(state, h.phys)[:9],
        "fru_id": "FRU-{:02d}".format(h.phys),
        "product_name": "{}-O OAM {}GB {}W".format(model.name, int(round(model.vram_mb / 1024.0)), model.power_cap_w),
        "manufacturer_name": "AMD",
    }


def _bdf(state, h):
    bus = state["gpus"][h.phys]["bus"]
    return "0000:{}:00.{}".format(bus, h.partition)


def amdsmi_get_gpu_device_bdf(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_device_bdf")
    return _bdf(_lib.state(), h)


def amdsmi_get_gpu_device_uuid(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_device_uuid")
    state = _lib.state()
    d = _digest("uuid", state.get("seed", 0), h.phys, h.partition)
    # Shaped like the driver's: partition and device id up front.
    return "{:02x}ff{:04x}-0000-1000-80{}-{}".format(h.partition, _model(state).device_id, d[:2], d[2:14])


def amdsmi_get_gpu_enumeration_info(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_enumeration_info")
    state = _lib.state()
    return {
        "drm_render": 128 + h.index,
        "drm_card": h.index,
        "hsa_id": _CPU_NODES + h.index,
        "hip_id": h.index,
        "hip_uuid": "GPU-" + _digest("hip", state.get("seed", 0), h.phys, h.partition)[:16],
    }


def amdsmi_get_gpu_kfd_info(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_kfd_info")
    state = _lib.state()
    return {
        "kfd_id": 1000 + int(_digest("kfd", state.get("seed", 0), h.phys, h.partition)[:4], 16),
        "node_id": _CPU_NODES + h.index,
        "current_partition_id": h.partition,
    }


def amdsmi_get_gpu_vbios_info(processor_handle):
    _gpu(processor_handle, "amdsmi_get_gpu_vbios_info")
    model = _model(_lib.state())
    return {
        "name": "AMD {} OAM".format(model.name),
        "build_date": "2024/05/09 13:47",
        "part_number": model.vbios_part,
        "version": "022.040.003.043.000001",
    }


def amdsmi_get_gpu_driver_info(processor_handle):
    _gpu(processor_handle, "amdsmi_get_gpu_driver_info")
    return {"driver_name": "amdgpu", "driver_version": "6.12.12", "driver_date": "2015/01/01 00:00"}


# ----------------------------------------------------------------------- telemetry


def amdsmi_get_gpu_activity(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_activity")
    keys = ("gfx_activity", "umc_activity", "mm_activity")
    if _secondary(h):
        return _all_na(keys)
    s = _physical_sample(_lib.state(), h.phys, _now())
    return {
        "gfx_activity": int(round(100 * s["gfx"])),
        "umc_activity": int(round(100 * s["umc"])),
        "mm_activity": 0,
    }


def amdsmi_get_power_info(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_power_info")
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
    state = _lib.state()
    model = _model(state)
    s = _physical_sample(state, h.phys, _now())
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
    h = _gpu(processor_handle, "amdsmi_get_power_cap_info")
    keys = ("power_cap", "default_power_cap", "dpm_cap", "min_power_cap", "max_power_cap")
    if _secondary(h):
        return _all_na(keys)
    model = _model(_lib.state())
    cap = model.power_cap_w * 1000000  # µW
    return {
        "power_cap": cap,
        "default_power_cap": cap,
        "dpm_cap": model.gfx_max,
        "min_power_cap": (model.power_cap_w * 2 // 5) * 1000000,
        "max_power_cap": cap,
    }


def amdsmi_get_temp_metric(processor_handle, sensor_type, metric):
    h = _gpu(processor_handle, "amdsmi_get_temp_metric")
    if not isinstance(sensor_type, AmdSmiTemperatureType):
        raise AmdSmiParameterException(sensor_type, AmdSmiTemperatureType)
    if not isinstance(metric, AmdSmiTemperatureMetric):
        raise AmdSmiParameterException(metric, AmdSmiTemperatureMetric)
    # MI3xx has no edge sensor; secondary partitions have no thermal data.
    if _secondary(h) or sensor_type in (AmdSmiTemperatureType.EDGE, AmdSmiTemperatureType.PLX):
        raise AmdSmiLibraryException(_Status.NOT_SUPPORTED)
    is_hotspot = sensor_type == AmdSmiTemperatureType.HOTSPOT
    if metric == AmdSmiTemperatureMetric.CRITICAL:
        return 110 if is_hotspot else 95
    if metric == AmdSmiTemperatureMetric.EMERGENCY:
        return 115 if is_hotspot else 100
    if metric != AmdSmiTemperatureMetric.CURRENT:
        raise AmdSmiLibraryException(_Status.NOT_SUPPORTED)
    s = _physical_sample(_lib.state(), h.phys, _now())
    if is_hotspot:
        return int(round(s["hotspot"]))
    if sensor_type == AmdSmiTemperatureType.VRAM:
        return int(round(s["mem_temp"]))
    return int(round(s["hbm"][int(sensor_type) - int(AmdSmiTemperatureType.HBM_0)]))


def amdsmi_get_clock_info(processor_handle, clock_type):
    h = _gpu(processor_handle, "amdsmi_get_clock_info")
    if not isinstance(clock_type, AmdSmiClkType):
        raise AmdSmiParameterException(clock_type, AmdSmiClkType)
    if clock_type not in (AmdSmiClkType.GFX, AmdSmiClkType.MEM, AmdSmiClkType.SOC):
        raise AmdSmiLibraryException(_Status.NOT_SUPPORTED)
    if _secondary(h):
        return _all_na(("clk", "min_clk", "max_clk", "clk_locked", "clk_deep_sleep"))
    state = _lib.state()
    model = _model(state)
    s = _physical_sample(state, h.phys, _now())
    if clock_type == AmdSmiClkType.GFX:
        clk, lo, hi, sleep = s["gfx_clk"], model.gfx_min, model.gfx_max, s["deep_sleep"]
    elif clock_type == AmdSmiClkType.SOC:
        clk, lo, hi, sleep = s["soc_clk"], 400, model.soc_max, s["deep_sleep"]
    else:
        clk, lo, hi, sleep = s["mem_clk"], 900, model.mem_clk, 0
    return {"clk": clk, "min_clk": lo, "max_clk": hi, "clk_locked": 0, "clk_deep_sleep": sleep}


def amdsmi_get_gpu_vram_usage(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_vram_usage")
    state = _lib.state()
    return {
        "vram_total": _vram_total_mb(state, h),
        "vram_used": _vram_used_bytes(state, h) // MiB,
    }


def _memory(h, mem_type, api):
    h = _gpu(h, api)
    if not isinstance(mem_type, AmdSmiMemoryType):
        raise AmdSmiParameterException(mem_type, AmdSmiMemoryType)
    return h, _lib.state()


def amdsmi_get_gpu_memory_total(processor_handle, mem_type):
    h, state = _memory(processor_handle, mem_type, "amdsmi_get_gpu_memory_total")
    if mem_type == AmdSmiMemoryType.GTT:
        return (512 * 1024 * MiB) // (len(state["gpus"]) * h.num_partitions)
    return _vram_total_mb(state, h) * MiB  # VIS_VRAM = VRAM: large BAR


def amdsmi_get_gpu_memory_usage(processor_handle, mem_type):
    h, state = _memory(processor_handle, mem_type, "amdsmi_get_gpu_memory_usage")
    if mem_type == AmdSmiMemoryType.GTT:
        return 12 * MiB + 2 * MiB * len(_processes_on(state, h.phys, h.partition))
    return _vram_used_bytes(state, h)


def amdsmi_get_gpu_vram_info(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_vram_info")
    state = _lib.state()
    model = _model(state)
    return {
        "vram_type": model.vram_type,
        "vram_vendor": model.vram_vendor,
        "vram_size": _vram_total_mb(state, h),
        "vram_bit_width": 8192,
        "vram_max_bandwidth": model.vram_bandwidth // h.num_partitions,
    }


def amdsmi_get_gpu_total_ecc_count(processor_handle):
    _gpu(processor_handle, "amdsmi_get_gpu_total_ecc_count")
    return {"correctable_count": 0, "uncorrectable_count": 0, "deferred_count": 0}


def _energy_uj(state, phys, t):
    # A steady average draw integrated since the node was created: monotonic.
    model = _model(state)
    mean_w = model.idle_w + 0.3 * (model.power_cap_w - model.idle_w)
    return max(0.0, t - state.get("created", t)) * mean_w * 1e6 + phys * 1e9


def amdsmi_get_energy_count(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_energy_count")
    if _secondary(h):
        return _all_na(("energy_accumulator", "counter_resolution", "timestamp"))
    t = _now()
    return {
        "energy_accumulator": int(_energy_uj(_lib.state(), h.phys, t) / 15.259),
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
    h = _gpu(processor_handle, "amdsmi_get_gpu_metrics_info")
    if _secondary(h):
        raise AmdSmiLibraryException(_Status.NOT_SUPPORTED, "no gpu_metrics on a secondary partition")
    state = _lib.state()
    model = _model(state)
    t = _now()
    s = _physical_sample(state, h.phys, t)
    n = PARTITIONS[state["gpus"][h.phys]["compute_partition"]]
    xcc_per_xcp = max(1, model.xcds // n)
    ticks = int(t * 100)  # accumulators advance at 100 Hz
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
        "energy_accumulator": int(_energy_uj(state, h.phys, t) / 15.259),  # 15.259 uJ units
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
        "throttle_status": False,
        "indep_throttle_status": False,
        "pcie_link_width": 16,
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
        "ppt_residency_acc": 0,
        "socket_thm_residency_acc": 0,
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
    h = _gpu(processor_handle, "amdsmi_get_gpu_process_list")
    state = _lib.state()
    model = _model(state)
    t = _now()
    entries = _processes_on(state, h.phys, h.partition)
    if not entries:
        return []
    gfx, _ = _logical_load(state.get("seed", 0), h.phys, h.partition, t, True)
    cus = model.cus // h.num_partitions
    try:
        file_time = os.stat(_lib.procs_file.path).st_mtime
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


# ----------------------------------------------------------------------- partitions


def amdsmi_get_gpu_compute_partition(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_compute_partition")
    return _lib.state()["gpus"][h.phys]["compute_partition"]


def amdsmi_get_gpu_memory_partition(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_memory_partition")
    return _lib.state()["gpus"][h.phys]["memory_partition"]


def amdsmi_get_gpu_memory_partition_config(processor_handle):
    h = _gpu(processor_handle, "amdsmi_get_gpu_memory_partition_config")
    state = _lib.state()
    return {
        "partition_caps": list(_model(state).memory_caps),
        "mp_mode": state["gpus"][h.phys]["memory_partition"],
        "num_numa_ranges": "N/A",
        "numa_range": "N/A",
    }


def _resources(model, compute):
    """Per-partition engine shares of a compute mode, as accelerator profiles list them."""
    n = PARTITIONS[compute]
    out = []
    for kind, total in _RESOURCES:
        per = max(1, total // n)
        out.append(
            {
                "resource_type": kind,
                "partition_resource": per,
                "num_partitions_share_resource": max(1, (n * per) // total),
            }
        )
    return out


def _profile(model, compute):
    resources = _resources(model, compute)
    return {
        "profile_type": compute,
        "num_partitions": PARTITIONS[compute],
        "profile_index": model.compute_modes.index(compute),
        "memory_caps": _memory_caps(model, compute),
        "num_resources": len(resources),
        "resources": resources,
    }


def amdsmi_get_gpu_accelerator_partition_profile(processor_handle):
    if not isinstance(processor_handle, ProcessorHandle):
        raise AmdSmiParameterException(processor_handle, ProcessorHandle)
    result = {
        "partition_id": [0],
        "partition_profile": {
            "profile_type": "N/A",
            "num_partitions": 0,
            "profile_index": 0,
            "memory_caps": [],
            "num_resources": 0,
            "resources": [],
        },
    }
    # Reproduces the 7.0.2 wrapper's `return` in `finally`: any error except
    # NOT_SUPPORTED is swallowed and the zeroed profile above comes back.
    try:
        h = _gpu(processor_handle, "amdsmi_get_gpu_accelerator_partition_profile")
        state = _lib.state()
        compute = state["gpus"][h.phys]["compute_partition"]
        result = {"partition_id": [h.partition], "partition_profile": _profile(_model(state), compute)}
    except AmdSmiLibraryException as exc:
        if exc.get_error_code() == _Status.NOT_SUPPORTED:
            raise
    return result


def amdsmi_get_gpu_accelerator_partition_profile_config(processor_handle):
    _gpu(processor_handle, "amdsmi_get_gpu_accelerator_partition_profile_config")
    state = _lib.state()
    _require_root(state)  # NO_PERM for non-root since ROCm 6.4.0
    model = _model(state)
    profiles = [_profile(model, mode) for mode in model.compute_modes]
    resource_profiles = [dict(r, profile_index=p["profile_index"]) for p in profiles for r in p["resources"]]
    for p in profiles:
        del p["num_resources"]
    return {
        "num_profiles": len(profiles),
        "num_resource_profiles": len(resource_profiles),
        "resource_profiles": resource_profiles,
        "default_profile_index": 0,
        "profiles": profiles,
    }


def _set_compute(h, mode):
    state = _lib.fresh_state()
    _require_root(state)
    model = _model(state)
    gpu = state["gpus"][h.phys]
    if mode == "INVALID":
        raise AmdSmiLibraryException(_Status.INVAL)
    if mode not in model.compute_modes:
        raise AmdSmiLibraryException(_Status.SETTING_UNAVAILABLE, "{} has no {} mode".format(model.name, mode))
    if gpu["compute_partition"] == mode:  # sysfs write of the current mode is a no-op
        return
    if gpu["memory_partition"] not in COMPATIBLE[mode]:
        raise AmdSmiLibraryException(_Status.INVAL, "{} is not valid with {}".format(mode, gpu["memory_partition"]))
    if h.phys in _busy_physical(state):
        raise AmdSmiLibraryException(_Status.BUSY, "processes are using this GPU")
    _sleep_switch(state)
    state = _lib.fresh_state()
    state["gpus"][h.phys]["compute_partition"] = mode
    _lib.save(state)


def amdsmi_set_gpu_compute_partition(processor_handle, compute_partition):
    h = _gpu(processor_handle, "amdsmi_set_gpu_compute_partition")
    if not isinstance(compute_partition, AmdSmiComputePartitionType):
        raise AmdSmiParameterException(compute_partition, AmdSmiComputePartitionType)
    _set_compute(h, compute_partition.name)


def amdsmi_set_gpu_accelerator_partition_profile(processor_handle, profile_index):
    h = _gpu(processor_handle, "amdsmi_set_gpu_accelerator_partition_profile")
    if not isinstance(profile_index, int) or isinstance(profile_index, bool):
        raise AmdSmiParameterException(profile_index, int)
    modes = _model(_lib.state()).compute_modes
    if not 0 <= profile_index < len(modes):
        raise AmdSmiLibraryException(_Status.INVAL, "no profile {}".format(profile_index))
    _set_compute(h, modes[profile_index])


def amdsmi_set_gpu_memory_partition(processor_handle, memory_partition):
    """Stage a memory (NPS) mode for the whole hive; amdsmi_gpu_driver_reload() applies it."""
    _gpu(processor_handle, "amdsmi_set_gpu_memory_partition")
    if not isinstance(memory_partition, AmdSmiMemoryPartitionType):
        raise AmdSmiParameterException(memory_partition, AmdSmiMemoryPartitionType)
    mode = memory_partition.name
    state = _lib.fresh_state()
    _require_root(state)
    model = _model(state)
    if mode == "UNKNOWN":
        raise AmdSmiLibraryException(_Status.INVAL)
    if mode not in model.memory_caps:
        raise AmdSmiLibraryException(_Status.SETTING_UNAVAILABLE, "{} has no {} mode".format(model.name, mode))
    for gpu in state["gpus"]:
        if mode not in COMPATIBLE[gpu["compute_partition"]]:
            raise AmdSmiLibraryException(
                _Status.INVAL,
                "GPU {} is in {}, not valid with {}".format(gpu["index"], gpu["compute_partition"], mode),
            )
    if all(g["memory_partition"] == mode and not g.get("pending_memory_partition") for g in state["gpus"]):
        return
    if _busy_physical(state):
        raise AmdSmiLibraryException(_Status.BUSY, "processes are using the GPUs")
    for gpu in state["gpus"]:
        gpu["pending_memory_partition"] = None if gpu["memory_partition"] == mode else mode
    _lib.save(state)


# The 7.0.2 wrapper also exports this name for the same C call.
amdsmi_set_gpu_memory_partition_mode = amdsmi_set_gpu_memory_partition
