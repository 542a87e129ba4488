"""The simulated ``pynvml``'s constants and exceptions (console/sim/pynvml.py re-exports them).

Shipped beside pynvml.py and imported by it by file name (stdlib only, Python >= 3.8): the
values of nvml.h and nvidia-ml-py, ``NVMLError`` and one ``NVMLError_<Name>`` subclass per
``NVML_ERROR_*`` code with NVML's own texts; tests/agent/test_nvml_contract.py holds them
against the real package.
"""

# ------------------------------------------------------------------ constants

NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_TEMPERATURE_GPU = 0
NVML_TEMPERATURE_COUNT = 2
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_CLOCK_VIDEO = 3
NVML_DEVICE_MIG_DISABLE = 0x0
NVML_DEVICE_MIG_ENABLE = 0x1
NVML_FI_DEV_MEMORY_TEMP = 82
NVML_FI_DEV_POWER_AVERAGE = 185
NVML_FI_DEV_POWER_INSTANT = 186
NVML_VALUE_TYPE_DOUBLE = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VALUE_TYPE_UNSIGNED_LONG = 2
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4
NVML_VALUE_TYPE_SIGNED_INT = 5
NVML_VALUE_TYPE_UNSIGNED_SHORT = 6
NVML_FI_DEV_PERF_POLICY_POWER = 74
NVML_FI_DEV_PERF_POLICY_THERMAL = 75
NVML_FI_DEV_PERF_POLICY_SYNC_BOOST = 76
NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT = 77
NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION = 78
NVML_FI_DEV_PERF_POLICY_RELIABILITY = 79
NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION = 83
NVML_FI_DEV_ENERGY = 191
NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN = 269
NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN = 270
NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN = 271
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_MEMORY_LOCATION_L1_CACHE = 0
NVML_MEMORY_LOCATION_L2_CACHE = 1
NVML_MEMORY_LOCATION_DRAM = 2
NVML_MEMORY_LOCATION_DEVICE_MEMORY = 2
NVML_MEMORY_LOCATION_REGISTER_FILE = 3
NVML_MEMORY_LOCATION_TEXTURE_MEMORY = 4
NVML_MEMORY_LOCATION_TEXTURE_SHM = 5
NVML_MEMORY_LOCATION_CBU = 6
NVML_MEMORY_LOCATION_SRAM = 7
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
NVML_NVLINK_MAX_LINKS = 36
NVML_NVLINK_ERROR_DL_REPLAY = 0
NVML_NVLINK_ERROR_DL_RECOVERY = 1
NVML_NVLINK_ERROR_DL_CRC_FLIT = 2
NVML_NVLINK_ERROR_DL_CRC_DATA = 3
NVML_NVLINK_ERROR_DL_ECC_DATA = 4
nvmlClocksEventReasonGpuIdle = 0x1
nvmlClocksEventReasonSwPowerCap = 0x4
nvmlClocksEventReasonSwThermalSlowdown = 0x20
nvmlEventTypeXidCriticalError = 0x8

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_FREQ_NOT_SUPPORTED = 24
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_DEPRECATED = 26
NVML_ERROR_NOT_READY = 27
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_INVALID_STATE = 29
NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30
NVML_ERROR_UNKNOWN = 999

# NVML's own messages (nvmlErrorString), as the real wrapper prints them.
_TEXT = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
    NVML_ERROR_INSUFFICIENT_POWER: "Insufficient External Power",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_IRQ_ISSUE: "Interrupt Request Issue",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_CORRUPTED_INFOROM: "Corrupted infoROM",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
    NVML_ERROR_OPERATING_SYSTEM: "The operating system has blocked the request.",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
    NVML_ERROR_IN_USE: "In use by another client",
    NVML_ERROR_MEMORY: "Insufficient Memory",
    NVML_ERROR_NO_DATA: "No data",
    NVML_ERROR_INSUFFICIENT_RESOURCES: "Insufficient resources",
    NVML_ERROR_NOT_READY: "Not Ready",
    NVML_ERROR_GPU_NOT_FOUND: "GPU not found",
    NVML_ERROR_INVALID_STATE: "Invalid state",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


class NVMLError(Exception):
    """NVMLError(code) is an instance of the code's own subclass, like the real one."""

    _valClassMapping = {}  # type: dict

    def __new__(typ, value):
        if typ is NVMLError:
            typ = NVMLError._valClassMapping.get(value, typ)
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self):
        return _TEXT.get(self.value, "NVML Error with code %d" % self.value)

    def __eq__(self, other):
        return isinstance(other, NVMLError) and self.value == other.value

    def __hash__(self):
        return hash(self.value)


def _class_name(constant):
    """NVML_ERROR_LIB_RM_VERSION_MISMATCH -> NVMLError_LibRmVersionMismatch (the real rule)."""
    words = constant[len("NVML_ERROR_") :].split("_")
    return "NVMLError_" + "".join(w[:1].upper() + w[1:].lower() for w in words)


def _make_error_classes():
    here = globals()
    for name in sorted(n for n in here if n.startswith("NVML_ERROR_")):
        code = here[name]

        def new(typ, *args, _code=code):
            return NVMLError.__new__(typ, _code)

        cls = type(_class_name(name), (NVMLError,), {"__new__": new})
        cls.__module__ = "pynvml"  # as the real classes say
        here[cls.__name__] = cls
        NVMLError._valClassMapping[code] = cls


_make_error_classes()


def nvmlExceptionClass(nvmlErrorCode):
    if nvmlErrorCode not in NVMLError._valClassMapping:
        raise ValueError("nvmlErrorCode %s is not valid" % nvmlErrorCode)
    return NVMLError._valClassMapping[nvmlErrorCode]


def nvmlErrorString(result):
    return _TEXT.get(result, "Unknown Error")


def exported():
    """The public names, for pynvml.py's namespace."""
    return dict((k, v) for k, v in globals().items() if k.startswith(("NVML", "nvml")))
