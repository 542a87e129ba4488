"""The library's life and state: init and shut-down, the handles, state.json and processes.json.

One library per process (or per private copy of the package): LIB holds the init ref count,
the handles enumerated at init and the cached state files.
"""

from __future__ import annotations

import json
import os
import time

from .enums import AmdSmiInitFlags, Status
from .errors import AmdSmiLibraryException, AmdSmiParameterException, error_for
from .models import BUSES, MODELS, PARTITIONS, memory_caps, model_of
from .statefiles import (
    PROCESSES_FILE,
    SIM_DIR_ENV,
    JsonFile,
    busy_workloads,
    gpu_processes,
    sim_now,
    sim_spec,
    write_json,
)

# ------------------------------------------------------------------ state files


def _sim_dir():
    path = os.environ.get(SIM_DIR_ENV)
    if not path:
        raise AmdSmiLibraryException(
            Status.DRIVER_NOT_LOADED,
            "{} is not set; the simulated amdsmi needs a state folder".format(SIM_DIR_ENV),
        )
    return path


def _new_state(spec):
    """state.json content for a fresh node built from ROCM_CONSOLE_SIM_SPEC."""
    gpu = str(spec.get("gpu", "MI300X")).upper()
    if gpu not in MODELS:
        raise AmdSmiLibraryException(Status.INIT_ERROR, "unknown gpu {!r}; one of {}".format(gpu, sorted(MODELS)))
    model = MODELS[gpu]
    count = spec.get("count", 8)
    compute = str(spec.get("compute_partition", "SPX")).upper()
    memory = str(spec.get("memory_partition", "NPS1")).upper()
    if not isinstance(count, int) or not 1 <= count <= 64:
        raise AmdSmiLibraryException(Status.INIT_ERROR, "count must be 1..64")
    if compute not in model.compute_modes or memory not in memory_caps(model, compute):
        raise AmdSmiLibraryException(
            Status.INIT_ERROR,
            "{}/{} is not a valid mode for {}".format(compute, memory, gpu),
        )
    buses = list(BUSES) + ["{:02x}".format(0xE0 + i) for i in range(count)]
    return {
        "version": 1,
        "gpu": gpu,
        "seed": int(spec.get("seed", 0)),
        "created": sim_now(),
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
            raise AmdSmiLibraryException(Status.DRIVER_NOT_LOADED, "state.json vanished")
        return data

    def fresh_state(self):
        """Read state.json from disk, bypassing the cache (before a change)."""
        try:
            with open(self.state_file.path) as f:
                return json.load(f)
        except (OSError, ValueError) as exc:
            raise AmdSmiLibraryException(Status.DRIVER_NOT_LOADED, "state.json: {}".format(exc)) from exc

    def save(self, state):
        write_json(self.state_file.path, state, indent=1)


LIB = _Library()


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


for _status in Status:
    setattr(_Wrapper, "AMDSMI_STATUS_" + _status.name, int(_status))
amdsmi_wrapper = _Wrapper


def require_init():
    if LIB.refcount <= 0:
        raise AmdSmiLibraryException(Status.NOT_INIT)


def fault(api):
    """Raise the status configured for `api` in state.json "faults", if any."""
    code = (LIB.state().get("faults") or {}).get(api)
    if code:
        raise error_for(int(code), "injected fault")


def checked(handle, api):
    """Validate a handle like the real wrapper and library, then apply faults."""
    if not isinstance(handle, ProcessorHandle):
        raise AmdSmiParameterException(handle, ProcessorHandle)
    if LIB.refcount <= 0 or handle._session != LIB.session:
        raise AmdSmiLibraryException(Status.NOT_INIT, "handle used after amdsmi_shut_down")
    fault(api)
    return handle


def checked_with_state(handle, api):
    """checked(), then the node's state.json content and its model: how most calls begin."""
    h = checked(handle, api)
    state = LIB.state()
    return h, state, model_of(state)


def _is_root(state):
    forced = state.get("root")
    if forced is not None:
        return bool(forced)
    return hasattr(os, "geteuid") and os.geteuid() == 0


def require_root(state):
    if not _is_root(state):
        raise AmdSmiLibraryException(Status.NO_PERM, "partition changes need root")


def sleep_switch(state):
    seconds = float(state.get("switch_seconds", 2.0))
    if seconds > 0:
        time.sleep(seconds)


# ------------------------------------------------------------------ processes


def live_processes():
    """(logical index, entry) for every live or sticky simulated process."""
    return gpu_processes(LIB.procs_file.read(default=[]))


def layout(state):
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
    return layout(state)[phys] + partition


def processes_on(state, phys, partition):
    index = _logical_now(state, phys, partition)
    if index is None:
        return []
    return [e for g, e in live_processes() if g == index]


def busy_physical(state):
    """Physical GPUs with at least one live simulated process."""
    offsets = layout(state)
    busy = set()
    for g, _ in live_processes():
        for phys in range(len(offsets) - 1, -1, -1):
            if g >= offsets[phys]:
                if g < offsets[phys] + PARTITIONS[state["gpus"][phys]["compute_partition"]]:
                    busy.add(phys)
                break
    return busy


# ------------------------------------------------------------------ library life


def amdsmi_init(flag=AmdSmiInitFlags.INIT_AMD_GPUS):
    if not isinstance(flag, AmdSmiInitFlags):
        raise AmdSmiParameterException(flag, AmdSmiInitFlags)
    if LIB.refcount > 0:  # ref-counted: later inits keep the first enumeration
        LIB.refcount += 1
        return
    folder = _sim_dir()
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise AmdSmiLibraryException(Status.DRIVER_NOT_LOADED, str(exc)) from exc
    state_path = os.path.join(folder, "state.json")
    if not os.path.exists(state_path):
        try:
            spec = sim_spec()
        except ValueError as exc:
            raise AmdSmiLibraryException(Status.INIT_ERROR, str(exc)) from exc
        write_json(state_path, _new_state(spec), indent=1)
        busy = busy_workloads(spec, 4000, (20, 27, 34, 41, 48))
        if busy:
            write_json(os.path.join(folder, PROCESSES_FILE), busy, indent=1)
    LIB.state_file = JsonFile(state_path)
    LIB.procs_file = JsonFile(os.path.join(folder, PROCESSES_FILE))
    state = LIB.state()

    # Enumerate once, like the real library: handles describe the partition
    # layout at init time until amdsmi_shut_down() + amdsmi_init().
    LIB.session += 1
    LIB.handles = []
    if int(flag) & AmdSmiInitFlags.INIT_AMD_GPUS:
        for phys, gpu in enumerate(state["gpus"]):
            n = PARTITIONS[gpu["compute_partition"]]
            for part in range(n):
                LIB.handles.append(ProcessorHandle(LIB.session, len(LIB.handles), phys, part, n))
    LIB.refcount = 1


def amdsmi_shut_down():
    if LIB.refcount <= 0:
        return
    LIB.refcount -= 1
    if LIB.refcount == 0:
        LIB.handles = []


def amdsmi_get_processor_handles():
    require_init()
    fault("amdsmi_get_processor_handles")
    return list(LIB.handles)
