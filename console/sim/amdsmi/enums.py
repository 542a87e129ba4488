"""amdsmi's enums, with the values of amdsmi.h, and the library's status codes."""

from enum import IntEnum


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
