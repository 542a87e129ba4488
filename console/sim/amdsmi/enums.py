"""amdsmi's enums, with the values of amdsmi.h, and the library's status codes."""

from enum import IntEnum


def _numbered(name, members, bits=False):
    """An IntEnum listed as amdsmi.h lists it: members in order, numbered 0, 1, 2, ... (with
    bits: the first is 0, then one bit each); "NEW=OLD" makes NEW an alias of OLD."""
    values = {}
    pairs = []
    for n, member in enumerate(m for m in members.split() if "=" not in m):
        values[member] = (1 << (n - 1) if n else 0) if bits else n
    for member in members.split():
        alias, _, target = member.partition("=")
        pairs.append((alias, values[target or alias]))
    return IntEnum(name, pairs, module=__name__)


class AmdSmiInitFlags(IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1 << 0
    INIT_AMD_GPUS = 1 << 1
    INIT_NON_AMD_CPUS = 1 << 2
    INIT_NON_AMD_GPUS = 1 << 3
    INIT_AMD_APUS = (1 << 0) | (1 << 1)


class Status(IntEnum):
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


AmdSmiComputePartitionType = _numbered("AmdSmiComputePartitionType", "INVALID SPX DPX TPX QPX CPX")


class AmdSmiMemoryPartitionType(IntEnum):
    UNKNOWN = 0
    NPS1 = 1
    NPS2 = 2
    NPS4 = 4
    NPS8 = 8


AmdSmiTemperatureType = _numbered(
    "AmdSmiTemperatureType", "EDGE HOTSPOT JUNCTION=HOTSPOT VRAM HBM_0 HBM_1 HBM_2 HBM_3 PLX"
)
AmdSmiTemperatureMetric = _numbered(
    "AmdSmiTemperatureMetric",
    "CURRENT MAX MIN MAX_HYST MIN_HYST CRITICAL CRITICAL_HYST EMERGENCY EMERGENCY_HYST CRIT_MIN CRIT_MIN_HYST"
    " OFFSET LOWEST HIGHEST",
)
AmdSmiClkType = _numbered("AmdSmiClkType", "SYS GFX=SYS DF DCEF SOC MEM PCIE VCLK0 VCLK1 DCLK0 DCLK1")
AmdSmiMemoryType = _numbered("AmdSmiMemoryType", "VRAM VIS_VRAM GTT")
AmdSmiGpuBlock = _numbered("AmdSmiGpuBlock", "INVALID UMC SDMA GFX MMHUB ATHUB PCIE_BIF HDP XGMI_WAFL DF", bits=True)


class AmdSmiEvtNotificationType(IntEnum):
    NONE = 0
    VMFAULT = 1
    THERMAL_THROTTLE = 2
    GPU_PRE_RESET = 3
    GPU_POST_RESET = 4
    MIGRATE_START = 5
    MIGRATE_END = 6
    PAGE_FAULT_START = 8  # sic: the 7.0.2 wrapper maps it to AMDSMI_EVT_NOTIF_PAGE_FAULT_END
    PAGE_FAULT_END = 8
    QUEUE_EVICTION = 9
    QUEUE_RESTORE = 10
    UNMAP_FROM_GPU = 11
    PROCESS_START = 12
    PROCESS_END = 13


class AmdSmiFwBlock(IntEnum):
    """The firmware blocks a simulated MI300X lists (a subset of the real enum, real values)."""

    AMDSMI_FW_ID_SMU = 1
    AMDSMI_FW_ID_CP_MEC1 = 7
    AMDSMI_FW_ID_RLC = 9
    AMDSMI_FW_ID_SDMA0 = 10
    AMDSMI_FW_ID_VCN = 18
    AMDSMI_FW_ID_PSP_SOSDRV = 30
    AMDSMI_FW_ID_TA_RAS = 73
    AMDSMI_FW_ID_TA_XGMI = 74
    AMDSMI_FW_ID_PM = 77
