"""Simulated ``pynvml`` (nvidia-ml-py): NVML for a fake H100/H200 node.

Uploaded beside the agent and imported as the top-level module ``pynvml``, with
statefiles.py (the simulators' shared state-file helpers) beside it: stdlib only,
Python >= 3.8, and it never prints.  Names, return shapes, units (mW, bytes, MHz, C)
and exceptions (``NVMLError`` and one ``NVMLError_<Name>`` subclass per
``NVML_ERROR_*`` code, with NVML's texts) follow the real package;
tests/agent/test_nvml_contract.py checks them.

Environment (shared with the simulated amdsmi and vLLM)
    ROCM_CONSOLE_SIM_DIR   folder holding the node's state (required)
    ROCM_CONSOLE_SIM_SPEC  JSON used to create nvml-state.json on first init:
                           {"gpu": "H100", "count": 8, "seed": 4, "busy": [0, 1],
                            "mig": [7]}   physical GPUs with MIG on (default layout)

Files in the folder
    nvml-state.json  per physical GPU: bus, MIG mode (current, pending) and its
                     instances; "faults" ({function: NVML error code}), and
                     "init_error" (a code nvmlInit raises: 18 is the driver/library
                     mismatch); written atomically.
    processes.json   the simulated processes (see statefiles.py): "gpu" is the
                     logical index the agent shows (a MIG instance counts as one).
"""

from __future__ import annotations

import hashlib
import math
import os
import time

from faults import FaultView  # type: ignore[import-not-found]  # shipped beside this file (console/sim/faults.py)
from statefiles import (  # shipped beside this file
    PROCESSES_FILE,
    SIM_DIR_ENV,
    SIM_SPEC_ENV,
    JsonFile,
    busy_workloads,
    gpu_processes,
    read_json,
    sim_now,
    sim_spec,
    write_json,
)

__simulated__ = True
__version__ = "12.575.51+sim"

ENV_DIR = SIM_DIR_ENV
ENV_SPEC = SIM_SPEC_ENV
STATE_FILE = "nvml-state.json"
MiB = 1024 * 1024

# NVML's constants and exceptions: nvml_errors.py, shipped beside this file
import nvml_errors as _e  # type: ignore[import-not-found]  # noqa: E402

globals().update(_e.exported())  # pynvml.NVML_*, pynvml.NVMLError_*, as the real module has them


# ------------------------------------------------------------------ models


class _Model(object):
    def __init__(self, name, vram_mib, cap_w, idle_w, sm_max, mem_clk, vbios, sms):
        self.name = name
        self.vram_mib = vram_mib
        self.cap_w = cap_w
        self.idle_w = idle_w
        self.sm_max = sm_max
        self.mem_clk = mem_clk
        self.vbios = vbios
        self.sms = sms


MODELS = {
    "H100": _Model("NVIDIA H100 80GB HBM3", 81559, 700, 70, 1980, 2619, "96.00.99.00.01", 132),
    "H200": _Model("NVIDIA H200", 143771, 700, 78, 1980, 3201, "96.00.A5.00.01", 132),
}

# MIG profiles of an 80 GB H100: (name, compute slices, memory MiB); 7 slices in all.
_PROFILES = {
    "1g.10gb": (1, 9984),
    "1g.20gb": (1, 19968),
    "2g.20gb": (2, 19968),
    "3g.40gb": (3, 40192),
    "4g.40gb": (4, 40192),
    "7g.80gb": (7, 80384),
}
_DEFAULT_MIG = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
MAX_MIG_DEVICES = 7


def _raise(code):
    raise _e.NVMLError(code)


def _new_state(spec):
    gpu = str(spec.get("gpu", "H100")).upper()
    if gpu not in MODELS:
        _raise(_e.NVML_ERROR_GPU_NOT_FOUND)
    count = spec.get("count", 8)
    if not isinstance(count, int) or not 0 <= count <= 16:
        _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    mig = [g for g in spec.get("mig") or () if isinstance(g, int)]
    gpus = []
    for i in range(count):
        on = i in mig
        gpus.append(
            {
                "index": i,
                "bus": _BUSES[i] if i < len(_BUSES) else "%02x" % (0xC0 + i),
                "mig": [int(on), int(on)],
                "instances": _layout(_DEFAULT_MIG) if on else [],
            }
        )
    return {
        "version": 1,
        "gpu": gpu,
        "seed": int(spec.get("seed", 0)),
        "faults": {},
        "init_error": None,
        "created": sim_now(),  # the energy counters count from here (the driver's load)
        "gpus": gpus,
    }


def _layout(profiles):
    """MIG instances of one GPU: GPU instance ids as nvidia-smi numbers them, one CI each."""
    return [{"gi": 1 + 2 * n, "ci": 0, "profile": p} for n, p in enumerate(profiles)]


class _Lib(object):
    def __init__(self):
        self.refcount = 0
        self.folder = None
        self._files = {}

    def read(self, name, default=None):
        """A JSON file of the folder, re-read only when it changes."""
        path = os.path.join(self.folder, name)
        if path not in self._files:
            self._files[path] = JsonFile(path)
        return self._files[path].read(default)

    def state(self):
        data = self.read(STATE_FILE)
        if not isinstance(data, dict):
            _raise(_e.NVML_ERROR_DRIVER_NOT_LOADED)
        return data


_lib = _Lib()


class c_nvmlDevice_t(object):
    """Opaque device handle: a GPU, or one MIG device (slot) of it."""

    __slots__ = ("phys", "slot", "gi", "ci")

    def __init__(self, phys, slot=None, gi=None, ci=None):
        self.phys = phys
        self.slot = slot
        self.gi = gi
        self.ci = ci

    def __repr__(self):
        if self.slot is None:
            return "<nvmlDevice (sim) %d>" % self.phys
        return "<nvmlDevice (sim) %d MIG %d>" % (self.phys, self.slot)


class _Struct(object):
    """Stands for the ctypes structures the real calls return: fields as attributes."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in sorted(self.__dict__.items())))


class c_nvmlMemory_t(_Struct):
    pass


class c_nvmlUtilization_t(_Struct):
    pass


class nvmlPciInfo_t(_Struct):
    pass


class c_nvmlFieldValue_t(_Struct):
    pass


class c_nvmlValue_t(_Struct):
    pass


class nvmlFriendlyObject(_Struct):
    pass


# ------------------------------------------------------------------ helpers


def _require_init():
    if _lib.refcount <= 0:
        _raise(_e.NVML_ERROR_UNINITIALIZED)


def _fault(api):
    code = (_lib.state().get("faults") or {}).get(api)
    if code:
        _raise(int(code))


def _gpu(handle, api, mig_ok=False):
    """The state of the handle's GPU; NotSupported for what a MIG device does not report."""
    _require_init()
    if not isinstance(handle, c_nvmlDevice_t):
        _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    state = _lib.state()
    _fault(api)
    if handle.phys >= len(state["gpus"]):
        _raise(_e.NVML_ERROR_GPU_IS_LOST)
    gpu = state["gpus"][handle.phys]
    if handle.slot is not None:
        if not mig_ok:
            _raise(_e.NVML_ERROR_NOT_SUPPORTED)
        if _instance(gpu, handle) is None:  # destroyed since the handle was taken
            _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    return state, gpu


def _instance(gpu, handle):
    instances = gpu.get("instances") or []
    if gpu["mig"][0] != 1 or handle.slot >= len(instances):
        return None
    inst = instances[handle.slot]
    return inst if (inst["gi"], inst["ci"]) == (handle.gi, handle.ci) else None


def _logical_base(state, phys):
    """The agent's logical index of a GPU's first unit (MIG instances count one each)."""
    n = 0
    for gpu in state["gpus"][:phys]:
        n += len(gpu["instances"]) if gpu["mig"][0] == 1 and gpu["instances"] else 1
    return n


def _entries():
    return gpu_processes(_lib.read(PROCESSES_FILE, []))


def _units(state, handle):
    """Logical indices a handle covers: its MIG instance, or all of its GPU's units."""
    gpu = state["gpus"][handle.phys]
    base = _logical_base(state, handle.phys)
    if handle.slot is not None:
        return [base + handle.slot]
    n = len(gpu["instances"]) if gpu["mig"][0] == 1 and gpu["instances"] else 1
    return list(range(base, base + n))


def _wave(seed, phys, t):
    digest = hashlib.sha256(("nv:%s:%s" % (seed, phys)).encode()).digest()
    p1, p2 = 2 * math.pi * digest[0] / 255.0, 2 * math.pi * digest[1] / 255.0
    w = 0.5 + 0.3 * math.sin(2 * math.pi * t / (50 + digest[2] % 40) + p1) + 0.2 * math.sin(t / 3.0 + p2)
    return min(1.0, max(0.0, w))


def _load(state, phys, t):
    """(busy 0..1, lagged 0..1) of a physical GPU: high when a simulated process holds it."""
    units = set(_units(state, c_nvmlDevice_t(phys)))
    busy = any(g in units for g, _ in _entries())
    seed = state.get("seed", 0)
    if not busy:
        return 0.0, 0.05 * _wave(seed, phys, t)
    return 0.55 + 0.45 * _wave(seed, phys, t), 0.55 + 0.45 * _wave(seed, phys, t - 10)


def _model(state):
    return MODELS[state["gpu"]]


# ------------------------------------------------------------------ library life


def nvmlInitWithFlags(flags):
    folder = os.environ.get(ENV_DIR)
    if not folder:
        _raise(_e.NVML_ERROR_LIBRARY_NOT_FOUND)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        _raise(_e.NVML_ERROR_DRIVER_NOT_LOADED)
    _lib.folder = folder
    path = os.path.join(folder, STATE_FILE)
    if not os.path.exists(path):
        try:
            spec = sim_spec()
        except ValueError:
            _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
        write_json(path, _new_state(spec), indent=1)
        busy = busy_workloads(spec, 5000, (18, 27, 36, 45))
        if busy and not os.path.exists(os.path.join(folder, PROCESSES_FILE)):
            write_json(os.path.join(folder, PROCESSES_FILE), busy, indent=1)
    state = _lib.state()
    code = state.get("init_error")
    if code:
        _raise(int(code))
    _write_uuids(folder, state)
    _lib.refcount += 1


def _write_uuids(folder, state):
    """nvml-uuids.json: {"MIG-…": logical index}, for the simulated vLLM, which is given a
    MIG instance as CUDA_VISIBLE_DEVICES=MIG-<uuid> like real CUDA is."""
    uuids = {}
    for phys, gpu in enumerate(state["gpus"]):
        if gpu["mig"][0] == 1:
            base = _logical_base(state, phys)
            for slot in range(len(gpu.get("instances") or [])):
                uuids[_uuid(state, phys, slot)] = base + slot
    path = os.path.join(folder, "nvml-uuids.json")
    if read_json(path) == uuids:
        return
    try:
        write_json(path, uuids, indent=1)
    except OSError:
        pass


def nvmlInit():
    nvmlInitWithFlags(0)


def nvmlShutdown():
    _require_init()
    _lib.refcount -= 1


def nvmlSystemGetDriverVersion():
    _require_init()
    return "575.57.08"


def nvmlSystemGetNVMLVersion():
    _require_init()
    return "12.575.57.08"


def nvmlSystemGetCudaDriverVersion():
    _require_init()
    return 12090


def nvmlSystemGetProcessName(pid):
    _require_init()
    for _, e in _entries():
        if e.get("pid") == pid:
            return str(e.get("name") or "python3")
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except (OSError, TypeError):
        _raise(_e.NVML_ERROR_NOT_FOUND)


# ------------------------------------------------------------------ devices


def nvmlDeviceGetCount():
    _require_init()
    _fault("nvmlDeviceGetCount")
    return len(_lib.state()["gpus"])


def nvmlDeviceGetHandleByIndex(index):
    _require_init()
    _fault("nvmlDeviceGetHandleByIndex")
    if not isinstance(index, int) or not 0 <= index < len(_lib.state()["gpus"]):
        _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    return c_nvmlDevice_t(index)


def nvmlDeviceGetIndex(handle):
    _gpu(handle, "nvmlDeviceGetIndex")
    return handle.phys


def nvmlDeviceGetName(handle):
    state, gpu = _gpu(handle, "nvmlDeviceGetName", mig_ok=True)
    name = _model(state).name
    if handle.slot is not None:
        return "%s MIG %s" % (name, _instance(gpu, handle)["profile"])
    return name


def _digest(*parts):
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()


def nvmlDeviceGetSerial(handle):
    state, _ = _gpu(handle, "nvmlDeviceGetSerial")
    return str(1650000000000 + int(_digest("serial", state.get("seed"), handle.phys)[:8], 16) % 99999999)


def _uuid(state, phys, slot):
    d = _digest("uuid", state.get("seed"), phys, slot)
    prefix = "MIG" if slot is not None else "GPU"
    return "%s-%s-%s-%s-%s-%s" % (prefix, d[:8], d[8:12], d[12:16], d[16:20], d[20:32])


def nvmlDeviceGetUUID(handle):
    state, _ = _gpu(handle, "nvmlDeviceGetUUID", mig_ok=True)
    return _uuid(state, handle.phys, handle.slot)


def nvmlDeviceGetPciInfo(handle):
    _, gpu = _gpu(handle, "nvmlDeviceGetPciInfo")
    bus = int(gpu["bus"], 16)
    bus_id = ("00000000:%02X:00.0" % bus).encode()
    return nvmlPciInfo_t(
        busIdLegacy=bus_id[4:],
        domain=0,
        bus=bus,
        device=0,
        pciDeviceId=0x233010DE,
        pciSubSystemId=0x16C110DE,
        busId=bus_id,
    )


def nvmlDeviceGetPciInfo_v3(handle):
    return nvmlDeviceGetPciInfo(handle)


def nvmlDeviceGetVbiosVersion(handle):
    state, _ = _gpu(handle, "nvmlDeviceGetVbiosVersion")
    return _model(state).vbios


def nvmlDeviceGetMemoryInfo(handle, version=None):
    state, gpu = _gpu(handle, "nvmlDeviceGetMemoryInfo", mig_ok=True)
    if handle.slot is not None:
        total = _PROFILES.get(_instance(gpu, handle)["profile"], (1, 9984))[1] * MiB
        reserved = 13 * MiB
    else:
        total = _model(state).vram_mib * MiB
        reserved = 480 * MiB  # what NVML reported used on an idle H100 80GB (driver 580)
    units = set(_units(state, handle))
    used = reserved + sum(int(e.get("vram_bytes", 0) or 0) for g, e in _entries() if g in units)
    used = min(total, used)
    return c_nvmlMemory_t(total=total, free=total - used, used=used)


def nvmlDeviceGetUtilizationRates(handle):
    state, gpu = _gpu(handle, "nvmlDeviceGetUtilizationRates")
    if gpu["mig"][0] == 1:
        _raise(_e.NVML_ERROR_NOT_SUPPORTED)  # MIG mode: no whole-GPU activity through NVML
    busy, _ = _load(state, handle.phys, sim_now())
    return c_nvmlUtilization_t(gpu=int(round(100 * busy)), memory=int(round(60 * busy)))


def _power_mw(state, phys, t):
    model = _model(state)
    busy, _ = _load(state, phys, t)
    return int(1000 * (model.idle_w + (0.92 * model.cap_w - model.idle_w) * busy + 3 * _wave(7, phys, t)))


def nvmlDeviceGetPowerUsage(handle):
    """The mean draw over the last second, as on Ampere and later (the instant value is field 186)."""
    state, _ = _gpu(handle, "nvmlDeviceGetPowerUsage")
    t = sim_now()
    points = [_power_mw(state, handle.phys, t - 1.0 + k / 4.0) for k in range(5)]
    return int((points[0] + points[-1] + 2 * sum(points[1:-1])) / 8.0)


def nvmlDeviceGetEnforcedPowerLimit(handle):
    state, _ = _gpu(handle, "nvmlDeviceGetEnforcedPowerLimit")
    return _model(state).cap_w * 1000


def nvmlDeviceGetPowerManagementLimit(handle):
    state, _ = _gpu(handle, "nvmlDeviceGetPowerManagementLimit")
    return _model(state).cap_w * 1000


def _temps(state, phys, t):
    _, lagged = _load(state, phys, t)
    gpu_c = int(round(31 + 45 * lagged))
    return gpu_c, gpu_c + 6


def nvmlDeviceGetTemperature(handle, sensor):
    state, _ = _gpu(handle, "nvmlDeviceGetTemperature")
    if sensor != _e.NVML_TEMPERATURE_GPU:
        _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    return _temps(state, handle.phys, sim_now())[0]


def nvmlDeviceGetClockInfo(handle, type):
    state, _ = _gpu(handle, "nvmlDeviceGetClockInfo")
    model = _model(state)
    if type == _e.NVML_CLOCK_MEM:
        return model.mem_clk
    if type in (_e.NVML_CLOCK_SM, _e.NVML_CLOCK_GRAPHICS):
        busy, _ = _load(state, handle.phys, sim_now())
        return 345 if busy == 0 else int(round(min(model.sm_max, 1410 + 600 * busy)))
    if type == _e.NVML_CLOCK_VIDEO:
        return 765
    _raise(_e.NVML_ERROR_INVALID_ARGUMENT)


def nvmlDeviceGetFieldValues(handle, fieldIds):
    state, _ = _gpu(handle, "nvmlDeviceGetFieldValues")
    t = sim_now()
    out = []
    for field in fieldIds:
        scope = 0
        if isinstance(field, (tuple, list)):
            field, scope = field
        value, kind, ret = None, _e.NVML_VALUE_TYPE_UNSIGNED_INT, _e.NVML_SUCCESS
        if field == _e.NVML_FI_DEV_MEMORY_TEMP:
            value = _temps(state, handle.phys, t)[1]
        elif field in (_e.NVML_FI_DEV_POWER_INSTANT, _e.NVML_FI_DEV_POWER_AVERAGE):
            value = _power_mw(state, handle.phys, t)
        elif field in (_e.NVML_FI_DEV_ENERGY, _e.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION):
            value, kind = _energy_mj(state, handle.phys, t), _e.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
        elif field in _RESIDENCY_FAULT:
            value, kind = _residency_ns(handle.phys, _RESIDENCY_FAULT[field], t), _e.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
        else:
            ret = _e.NVML_ERROR_NOT_SUPPORTED
        zero = dict(dVal=0.0, uiVal=0, ulVal=0, ullVal=0, sllVal=0, siVal=0, usVal=0)
        if value is not None:
            zero["ullVal" if kind == _e.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG else "uiVal"] = value
        out.append(
            c_nvmlFieldValue_t(
                fieldId=field,
                scopeId=scope,
                timestamp=int(t * 1e6),
                latencyUsec=0,
                valueType=kind,
                nvmlReturn=ret,
                value=c_nvmlValue_t(**zero),
            )
        )
    return out


def nvmlDeviceGetComputeRunningProcesses(handle):
    state, gpu = _gpu(handle, "nvmlDeviceGetComputeRunningProcesses", mig_ok=True)
    units = _units(state, handle)
    base = _logical_base(state, handle.phys)
    on_mig = gpu["mig"][0] == 1 and gpu["instances"]
    out = []
    for g, e in _entries():
        if g not in units:
            continue
        inst = gpu["instances"][g - base] if on_mig else None
        out.append(
            nvmlFriendlyObject(
                pid=int(e.get("pid", 0)),
                usedGpuMemory=int(e.get("vram_bytes", 0) or 0),
                gpuInstanceId=inst["gi"] if inst else 0xFFFFFFFF,
                computeInstanceId=inst["ci"] if inst else 0xFFFFFFFF,
            )
        )
    return out


# ------------------------------------------------------------------ MIG


def nvmlDeviceGetMigMode(device):
    _, gpu = _gpu(device, "nvmlDeviceGetMigMode")
    return [int(gpu["mig"][0]), int(gpu["mig"][1])]


def nvmlDeviceGetMaxMigDeviceCount(device):
    _, gpu = _gpu(device, "nvmlDeviceGetMaxMigDeviceCount")
    return MAX_MIG_DEVICES


def nvmlDeviceGetMigDeviceHandleByIndex(device, index):
    _, gpu = _gpu(device, "nvmlDeviceGetMigDeviceHandleByIndex")
    if gpu["mig"][0] != 1:
        _raise(_e.NVML_ERROR_NOT_SUPPORTED)
    if not isinstance(index, int) or not 0 <= index < MAX_MIG_DEVICES:
        _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    instances = gpu.get("instances") or []
    if index >= len(instances):
        _raise(_e.NVML_ERROR_NOT_FOUND)
    inst = instances[index]
    return c_nvmlDevice_t(device.phys, index, inst["gi"], inst["ci"])


def nvmlDeviceIsMigDeviceHandle(device):
    _require_init()
    return int(isinstance(device, c_nvmlDevice_t) and device.slot is not None)


def nvmlDeviceGetGpuInstanceId(device):
    _, gpu = _gpu(device, "nvmlDeviceGetGpuInstanceId", mig_ok=True)
    if device.slot is None:
        _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    return _instance(gpu, device)["gi"]


def nvmlDeviceGetComputeInstanceId(device):
    _, gpu = _gpu(device, "nvmlDeviceGetComputeInstanceId", mig_ok=True)
    if device.slot is None:
        _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    return _instance(gpu, device)["ci"]


def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(migDevice):
    _gpu(migDevice, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", mig_ok=True)
    return c_nvmlDevice_t(migDevice.phys)


# ------------------------------------------------------------------ health
#
# Healthy by default; faults.json (faults.py, beside this file) makes a physical GPU
# unwell.  Shapes as the real H100 answered (tests/fixtures/hardware/h100-nvml-health-*):
# ECC by location only for DRAM and SRAM, rows remapped (no page retirement), PCIe Gen5
# x16; the simulated board has 18 NVLinks (SXM).

NVLINKS = 18
DEFAULT_XID = 79
_FAULTS = {}  # type: dict  # sim folder -> FaultView
_EVENT_SETS = []  # type: list  # open event sets of this process
_XID_DELIVERED = set()  # type: set  # (physical GPU, fault id)
# residency field -> the fault that makes it grow
_RESIDENCY_FAULT = {
    _e.NVML_FI_DEV_PERF_POLICY_POWER: "power_throttle",
    _e.NVML_FI_DEV_PERF_POLICY_THERMAL: "thermal_throttle",
    _e.NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN: "thermal_throttle",
    _e.NVML_FI_DEV_PERF_POLICY_SYNC_BOOST: None,
    _e.NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT: None,
    _e.NVML_FI_DEV_PERF_POLICY_RELIABILITY: None,
    _e.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN: None,
    _e.NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN: None,
}


def _faults():
    folder = _lib.folder or os.environ.get(ENV_DIR) or ""
    view = _FAULTS.get(folder)
    if view is None:
        view = _FAULTS[folder] = FaultView(folder)
    return view


def _residency_ns(phys, kind, t):
    since = _faults().since(phys, kind) if kind else None
    return 0 if since is None else int(max(0.0, t - since) * 1e9)


# The energy counter integrates the simulated power curve as it is read (trapezoid between
# reads), so energy and power agree as on a real GPU; before this process's first read it
# stands at a steady mean draw since the driver loaded. {(created, phys): (t, mJ, mW)}
_ENERGY = {}  # type: dict


def _energy_mj(state, phys, t):
    """The energy counter since the driver loaded (mJ), monotonic."""
    power_mw = _power_mw(state, phys, t)
    created = state.get("created") or 1.79e9  # a state file written before the field: from Sept. 2026
    key = (created, phys)
    last = _ENERGY.get(key)
    if last is None:
        model = _model(state)
        mean_w = model.idle_w + 0.3 * (model.cap_w - model.idle_w)
        mj = max(0.0, t - created) * mean_w * 1000 + phys * 1000000
    else:
        t0, mj, mw0 = last
        if t <= t0:
            return int(mj)
        # the power curve in steps of at most 0.5 s: a counter read every 30 s is the integral
        # of the curve as a real one is, not one trapezoid over the 30 s
        n = min(600, max(1, int(math.ceil((t - t0) / 0.5))))
        for k in range(1, n + 1):
            tk = t0 + (t - t0) * k / n
            mwk = power_mw if k == n else _power_mw(state, phys, tk)
            mj += (tk - t0 - (t - t0) * (k - 1) / n) * (mw0 + mwk) / 2.0  # mW x s = mJ
            mw0 = mwk
    _ENERGY[key] = (t, mj, power_mw)
    return int(mj)


def _ecc_count(phys, error_type):
    kind = "ecc_uncorrectable" if error_type == _e.NVML_MEMORY_ERROR_TYPE_UNCORRECTED else "ecc_correctable"
    return _faults().count(phys, kind)


def nvmlDeviceGetEccMode(handle):
    _gpu(handle, "nvmlDeviceGetEccMode")
    return [_e.NVML_FEATURE_ENABLED, _e.NVML_FEATURE_ENABLED]


def nvmlDeviceGetTotalEccErrors(handle, errorType, counterType):
    _gpu(handle, "nvmlDeviceGetTotalEccErrors")
    return _ecc_count(handle.phys, errorType)


def nvmlDeviceGetMemoryErrorCounter(handle, errorType, counterType, locationType):
    _gpu(handle, "nvmlDeviceGetMemoryErrorCounter")
    if locationType not in (_e.NVML_MEMORY_LOCATION_DRAM, _e.NVML_MEMORY_LOCATION_SRAM):
        _raise(_e.NVML_ERROR_NOT_SUPPORTED)
    return _ecc_count(handle.phys, errorType) if locationType == _e.NVML_MEMORY_LOCATION_DRAM else 0


def nvmlDeviceGetRemappedRows(device):
    _gpu(device, "nvmlDeviceGetRemappedRows")
    pending = _faults().count(device.phys, "page_pending")
    uncorrectable = _faults().count(device.phys, "ecc_uncorrectable")
    return (0, uncorrectable, 1 if pending else 0, 0)


def nvmlDeviceGetRetiredPages(device, sourceFilter):
    _gpu(device, "nvmlDeviceGetRetiredPages")
    _raise(_e.NVML_ERROR_NOT_SUPPORTED)  # Hopper remaps rows instead


def nvmlDeviceGetRetiredPagesPendingStatus(device):
    _gpu(device, "nvmlDeviceGetRetiredPagesPendingStatus")
    _raise(_e.NVML_ERROR_NOT_SUPPORTED)


def nvmlDeviceGetCurrentClocksEventReasons(handle):
    state, _ = _gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons")
    mask = 0
    if _faults().of(handle.phys, "power_throttle"):
        mask |= _e.nvmlClocksEventReasonSwPowerCap
    if _faults().of(handle.phys, "thermal_throttle"):
        mask |= _e.nvmlClocksEventReasonSwThermalSlowdown
    busy, _ = _load(state, handle.phys, sim_now())
    return mask or (_e.nvmlClocksEventReasonGpuIdle if busy == 0 else 0)


def nvmlDeviceGetCurrentClocksThrottleReasons(handle):
    return nvmlDeviceGetCurrentClocksEventReasons(handle)


def nvmlDeviceGetMaxPcieLinkGeneration(handle):
    _gpu(handle, "nvmlDeviceGetMaxPcieLinkGeneration")
    return 5


def nvmlDeviceGetMaxPcieLinkWidth(handle):
    _gpu(handle, "nvmlDeviceGetMaxPcieLinkWidth")
    return 16


def nvmlDeviceGetCurrPcieLinkGeneration(handle):
    _gpu(handle, "nvmlDeviceGetCurrPcieLinkGeneration")
    return 5


def nvmlDeviceGetCurrPcieLinkWidth(handle):
    _gpu(handle, "nvmlDeviceGetCurrPcieLinkWidth")
    return 8 if _faults().of(handle.phys, "pcie_degraded") else 16


def nvmlDeviceGetPcieReplayCounter(handle):
    _gpu(handle, "nvmlDeviceGetPcieReplayCounter")
    return 0


def nvmlDeviceGetTotalEnergyConsumption(handle):
    state, _ = _gpu(handle, "nvmlDeviceGetTotalEnergyConsumption")
    return _energy_mj(state, handle.phys, sim_now())


def nvmlDeviceGetNvLinkState(device, link):
    _gpu(device, "nvmlDeviceGetNvLinkState")
    if not 0 <= link < NVLINKS:
        _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    return _e.NVML_FEATURE_DISABLED if link < _faults().count(device.phys, "nvlink_down") else _e.NVML_FEATURE_ENABLED


def nvmlDeviceGetNvLinkErrorCounter(device, link, counter):
    _gpu(device, "nvmlDeviceGetNvLinkErrorCounter")
    if not 0 <= link < NVLINKS:
        _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    return 0


class c_nvmlEventData_t(_Struct):
    pass


class _EventSet(object):
    def __init__(self):
        self.watched = {}  # physical GPU -> (event mask, registered at)


def nvmlEventSetCreate():
    _require_init()
    events = _EventSet()
    _EVENT_SETS.append(events)
    return events


def nvmlDeviceRegisterEvents(handle, eventTypes, eventSet):
    _gpu(handle, "nvmlDeviceRegisterEvents")
    if not isinstance(eventSet, _EventSet):
        _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    eventSet.watched[handle.phys] = (int(eventTypes), time.time())  # faults.json's "at" is wall-clock


def nvmlEventSetWait(eventSet, timeoutms):
    """The next XID a fault injected after registration raised, once; Timeout when none
    (the simulator never waits: the agent asks with 0 ms)."""
    _require_init()
    if not isinstance(eventSet, _EventSet):
        _raise(_e.NVML_ERROR_INVALID_ARGUMENT)
    for phys, (mask, since) in sorted(eventSet.watched.items()):
        if not mask & _e.nvmlEventTypeXidCriticalError:
            continue
        for entry in _faults().of(phys, "xid"):
            key = (phys, entry["id"])
            if key in _XID_DELIVERED or entry["at"] < since:
                continue
            _XID_DELIVERED.add(key)
            return c_nvmlEventData_t(
                device=c_nvmlDevice_t(phys),
                eventType=_e.nvmlEventTypeXidCriticalError,
                eventData=int(entry.get("code") or DEFAULT_XID),
                gpuInstanceId=0xFFFFFFFF,
                computeInstanceId=0xFFFFFFFF,
            )
    _raise(_e.NVML_ERROR_TIMEOUT)


def nvmlEventSetFree(eventSet):
    if eventSet in _EVENT_SETS:
        _EVENT_SETS.remove(eventSet)
