"""Simulated `amdsmi`: the AMD SMI Python API for a fake MI300X/MI325X/MI355X node.

This folder is uploaded to a node and imported as the top-level package `amdsmi`
(its parent folder is the agent's --amdsmi-path), so it is self-contained: stdlib
only, Python >= 3.8, its modules import each other relatively, and it never prints.

Names, return shapes, units, enums and exceptions follow the real package
(amdsmi 7.0.2); values are synthetic but plausible and deterministic for a
given (seed, GPU, time).

Modules
    enums       amdsmi's enums and status codes      errors      its exceptions
    models      the GPU models and partition tables  library     init, handles, state files
    synthetic   the synthetic telemetry values       identity    ASIC, board, ids, driver
    telemetry   activity, power, clocks, memory,     partitions  compute and memory modes,
                gpu_metrics, processes                           the driver reload
    health      ECC, bad pages, PCIe, violation status, XGMI links, firmware, events
    faults      faults.json, the faults a GPU develops (console/sim/faults.py)
    statefiles  the simulators' shared state-file helpers (the agent's statefiles.py)

Environment
    ROCM_CONSOLE_SIM_DIR   folder holding the node's state (required)
    ROCM_CONSOLE_SIM_SPEC  JSON used to create state.json on first init:
                           {"gpu": "MI300X", "count": 8, "compute_partition": "SPX",
                            "memory_partition": "NPS1", "seed": 0}

Files in the folder
    state.json       partition modes per physical GPU and a few knobs (see
                     `library._new_state`); written atomically.
    faults.json      faults the GPUs develop (faults.py; healthy when absent)
    processes.json   simulated GPU processes, written by other simulator parts
                     (statefiles.py describes it). Entries count while their pid is
                     alive, or when "sticky".
"""

from .enums import (
    AmdSmiClkType,
    AmdSmiComputePartitionType,
    AmdSmiEvtNotificationType,
    AmdSmiFwBlock,
    AmdSmiGpuBlock,
    AmdSmiInitFlags,
    AmdSmiMemoryPartitionType,
    AmdSmiMemoryType,
    AmdSmiTemperatureMetric,
    AmdSmiTemperatureType,
)
from .errors import (
    AmdSmiException,
    AmdSmiLibraryException,
    AmdSmiParameterException,
    AmdSmiRetryException,
    AmdSmiTimeoutException,
)
from .health import (
    AmdSmiEventReader,
    amdsmi_get_fw_info,
    amdsmi_get_gpu_bad_page_info,
    amdsmi_get_gpu_cper_entries,
    amdsmi_get_gpu_ecc_count,
    amdsmi_get_gpu_total_ecc_count,
    amdsmi_get_gpu_xgmi_link_status,
    amdsmi_get_pcie_info,
    amdsmi_get_violation_status,
)
from .identity import (
    amdsmi_get_gpu_asic_info,
    amdsmi_get_gpu_board_info,
    amdsmi_get_gpu_device_bdf,
    amdsmi_get_gpu_device_uuid,
    amdsmi_get_gpu_driver_info,
    amdsmi_get_gpu_enumeration_info,
    amdsmi_get_gpu_kfd_info,
    amdsmi_get_gpu_vbios_info,
)
from .library import (
    ProcessorHandle,
    amdsmi_get_processor_handles,
    amdsmi_init,
    amdsmi_shut_down,
    amdsmi_wrapper,
)
from .models import COMPATIBLE, MODELS, PARTITIONS, MiB
from .partitions import (
    amdsmi_get_gpu_accelerator_partition_profile,
    amdsmi_get_gpu_accelerator_partition_profile_config,
    amdsmi_get_gpu_compute_partition,
    amdsmi_get_gpu_memory_partition,
    amdsmi_get_gpu_memory_partition_config,
    amdsmi_gpu_driver_reload,
    amdsmi_set_gpu_accelerator_partition_profile,
    amdsmi_set_gpu_compute_partition,
    amdsmi_set_gpu_memory_partition,
    amdsmi_set_gpu_memory_partition_mode,
)
from .statefiles import SIM_DIR_ENV, SIM_SPEC_ENV
from .telemetry import (
    amdsmi_get_clock_info,
    amdsmi_get_energy_count,
    amdsmi_get_gpu_activity,
    amdsmi_get_gpu_memory_total,
    amdsmi_get_gpu_memory_usage,
    amdsmi_get_gpu_metrics_info,
    amdsmi_get_gpu_process_list,
    amdsmi_get_gpu_vram_info,
    amdsmi_get_gpu_vram_usage,
    amdsmi_get_power_cap_info,
    amdsmi_get_power_info,
    amdsmi_get_temp_metric,
)

__simulated__ = True
__version__ = "7.0.2+sim"
# What the simulated node has installed besides amdsmi, for the agent's probe (the header's
# versions): the simulated vllm (console/sim/vllm, constants.VERSION; a test keeps them equal).
SIM_VLLM_VERSION = "0.32.0+sim"

ENV_DIR = SIM_DIR_ENV
ENV_SPEC = SIM_SPEC_ENV

__all__ = [
    "COMPATIBLE",
    "ENV_DIR",
    "ENV_SPEC",
    "MODELS",
    "PARTITIONS",
    "SIM_VLLM_VERSION",
    "AmdSmiClkType",
    "AmdSmiComputePartitionType",
    "AmdSmiEventReader",
    "AmdSmiEvtNotificationType",
    "AmdSmiException",
    "AmdSmiFwBlock",
    "AmdSmiGpuBlock",
    "AmdSmiInitFlags",
    "AmdSmiLibraryException",
    "AmdSmiMemoryPartitionType",
    "AmdSmiMemoryType",
    "AmdSmiParameterException",
    "AmdSmiRetryException",
    "AmdSmiTemperatureMetric",
    "AmdSmiTemperatureType",
    "AmdSmiTimeoutException",
    "MiB",
    "ProcessorHandle",
    "amdsmi_get_clock_info",
    "amdsmi_get_energy_count",
    "amdsmi_get_gpu_accelerator_partition_profile",
    "amdsmi_get_gpu_accelerator_partition_profile_config",
    "amdsmi_get_gpu_activity",
    "amdsmi_get_gpu_asic_info",
    "amdsmi_get_gpu_board_info",
    "amdsmi_get_gpu_compute_partition",
    "amdsmi_get_gpu_device_bdf",
    "amdsmi_get_gpu_device_uuid",
    "amdsmi_get_fw_info",
    "amdsmi_get_gpu_bad_page_info",
    "amdsmi_get_gpu_cper_entries",
    "amdsmi_get_gpu_ecc_count",
    "amdsmi_get_gpu_xgmi_link_status",
    "amdsmi_get_pcie_info",
    "amdsmi_get_violation_status",
    "amdsmi_get_gpu_driver_info",
    "amdsmi_get_gpu_enumeration_info",
    "amdsmi_get_gpu_kfd_info",
    "amdsmi_get_gpu_memory_partition",
    "amdsmi_get_gpu_memory_partition_config",
    "amdsmi_get_gpu_memory_total",
    "amdsmi_get_gpu_memory_usage",
    "amdsmi_get_gpu_metrics_info",
    "amdsmi_get_gpu_process_list",
    "amdsmi_get_gpu_total_ecc_count",
    "amdsmi_get_gpu_vbios_info",
    "amdsmi_get_gpu_vram_info",
    "amdsmi_get_gpu_vram_usage",
    "amdsmi_get_power_cap_info",
    "amdsmi_get_power_info",
    "amdsmi_get_processor_handles",
    "amdsmi_get_temp_metric",
    "amdsmi_gpu_driver_reload",
    "amdsmi_init",
    "amdsmi_set_gpu_accelerator_partition_profile",
    "amdsmi_set_gpu_compute_partition",
    "amdsmi_set_gpu_memory_partition",
    "amdsmi_set_gpu_memory_partition_mode",
    "amdsmi_shut_down",
    "amdsmi_wrapper",
]
