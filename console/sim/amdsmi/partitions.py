"""Partitions: compute (accelerator profiles) and memory (NPS) modes, and the driver reload
that applies a memory mode. Changes need root and idle GPUs, and take switch_seconds."""

from .enums import AmdSmiComputePartitionType, AmdSmiMemoryPartitionType, Status
from .errors import AmdSmiLibraryException, AmdSmiParameterException
from .library import LIB, ProcessorHandle, busy_physical, checked, fault, require_init, require_root, sleep_switch
from .models import COMPATIBLE, PARTITIONS, RESOURCES, memory_caps, model_of


def amdsmi_get_gpu_compute_partition(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_compute_partition")
    return LIB.state()["gpus"][h.phys]["compute_partition"]


def amdsmi_get_gpu_memory_partition(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_memory_partition")
    return LIB.state()["gpus"][h.phys]["memory_partition"]


def amdsmi_get_gpu_memory_partition_config(processor_handle):
    h = checked(processor_handle, "amdsmi_get_gpu_memory_partition_config")
    state = LIB.state()
    return {
        "partition_caps": list(model_of(state).memory_caps),
        "mp_mode": state["gpus"][h.phys]["memory_partition"],
        "num_numa_ranges": "N/A",
        "numa_range": "N/A",
    }


def _resources(model, compute):
    """Per-partition engine shares of a compute mode, as accelerator profiles list them."""
    n = PARTITIONS[compute]
    out = []
    for kind, total in RESOURCES:
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
        "memory_caps": memory_caps(model, compute),
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
        h = checked(processor_handle, "amdsmi_get_gpu_accelerator_partition_profile")
        state = LIB.state()
        compute = state["gpus"][h.phys]["compute_partition"]
        result = {"partition_id": [h.partition], "partition_profile": _profile(model_of(state), compute)}
    except AmdSmiLibraryException as exc:
        if exc.get_error_code() == Status.NOT_SUPPORTED:
            raise
    return result


def amdsmi_get_gpu_accelerator_partition_profile_config(processor_handle):
    checked(processor_handle, "amdsmi_get_gpu_accelerator_partition_profile_config")
    state = LIB.state()
    require_root(state)  # NO_PERM for non-root since ROCm 6.4.0
    model = model_of(state)
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
    state = LIB.fresh_state()
    require_root(state)
    model = model_of(state)
    gpu = state["gpus"][h.phys]
    if mode == "INVALID":
        raise AmdSmiLibraryException(Status.INVAL)
    if mode not in model.compute_modes:
        raise AmdSmiLibraryException(Status.SETTING_UNAVAILABLE, "{} has no {} mode".format(model.name, mode))
    if gpu["compute_partition"] == mode:  # sysfs write of the current mode is a no-op
        return
    if gpu["memory_partition"] not in COMPATIBLE[mode]:
        raise AmdSmiLibraryException(Status.INVAL, "{} is not valid with {}".format(mode, gpu["memory_partition"]))
    if h.phys in busy_physical(state):
        raise AmdSmiLibraryException(Status.BUSY, "processes are using this GPU")
    sleep_switch(state)
    state = LIB.fresh_state()
    state["gpus"][h.phys]["compute_partition"] = mode
    LIB.save(state)


def amdsmi_set_gpu_compute_partition(processor_handle, compute_partition):
    h = checked(processor_handle, "amdsmi_set_gpu_compute_partition")
    if not isinstance(compute_partition, AmdSmiComputePartitionType):
        raise AmdSmiParameterException(compute_partition, AmdSmiComputePartitionType)
    _set_compute(h, compute_partition.name)


def amdsmi_set_gpu_accelerator_partition_profile(processor_handle, profile_index):
    h = checked(processor_handle, "amdsmi_set_gpu_accelerator_partition_profile")
    if not isinstance(profile_index, int) or isinstance(profile_index, bool):
        raise AmdSmiParameterException(profile_index, int)
    modes = model_of(LIB.state()).compute_modes
    if not 0 <= profile_index < len(modes):
        raise AmdSmiLibraryException(Status.INVAL, "no profile {}".format(profile_index))
    _set_compute(h, modes[profile_index])


def amdsmi_set_gpu_memory_partition(processor_handle, memory_partition):
    """Stage a memory (NPS) mode for the whole hive; amdsmi_gpu_driver_reload() applies it."""
    checked(processor_handle, "amdsmi_set_gpu_memory_partition")
    if not isinstance(memory_partition, AmdSmiMemoryPartitionType):
        raise AmdSmiParameterException(memory_partition, AmdSmiMemoryPartitionType)
    mode = memory_partition.name
    state = LIB.fresh_state()
    require_root(state)
    model = model_of(state)
    if mode == "UNKNOWN":
        raise AmdSmiLibraryException(Status.INVAL)
    if mode not in model.memory_caps:
        raise AmdSmiLibraryException(Status.SETTING_UNAVAILABLE, "{} has no {} mode".format(model.name, mode))
    for gpu in state["gpus"]:
        if mode not in COMPATIBLE[gpu["compute_partition"]]:
            raise AmdSmiLibraryException(
                Status.INVAL,
                "GPU {} is in {}, not valid with {}".format(gpu["index"], gpu["compute_partition"], mode),
            )
    if all(g["memory_partition"] == mode and not g.get("pending_memory_partition") for g in state["gpus"]):
        return
    if busy_physical(state):
        raise AmdSmiLibraryException(Status.BUSY, "processes are using the GPUs")
    for gpu in state["gpus"]:
        gpu["pending_memory_partition"] = None if gpu["memory_partition"] == mode else mode
    LIB.save(state)


# The 7.0.2 wrapper also exports this name for the same C call.
amdsmi_set_gpu_memory_partition_mode = amdsmi_set_gpu_memory_partition


def amdsmi_gpu_driver_reload():
    """Reload amdgpu: applies pending memory partitions (manual since ROCm 7.0)."""
    require_init()
    fault("amdsmi_gpu_driver_reload")
    state = LIB.fresh_state()
    require_root(state)
    if busy_physical(state):
        raise AmdSmiLibraryException(Status.AMDGPU_RESTART_ERR, "GPU processes still running; amdgpu cannot unload")
    sleep_switch(state)
    state = LIB.fresh_state()
    for gpu in state["gpus"]:
        pending = gpu.get("pending_memory_partition")
        if pending:
            gpu["memory_partition"] = pending
            gpu["pending_memory_partition"] = None
        # A reload "may reset the accelerator partition": fall back to the
        # smallest compute mode the new memory mode allows.
        if gpu["memory_partition"] not in COMPATIBLE[gpu["compute_partition"]]:
            for mode in model_of(state).compute_modes:
                if gpu["memory_partition"] in COMPATIBLE[mode]:
                    gpu["compute_partition"] = mode
                    break
    LIB.save(state)
