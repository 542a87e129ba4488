"""console/agent/nvidia_health.py against the real ``pynvml`` (nvidia-ml-py, pinned).

The real module imports without a driver, so it is inspected directly:

- every ``nvml*`` function or constant, ``NVML_*`` constant and ``NVMLError*``
  class the health module names exists in the real module;
- each call passes a number of arguments the real function accepts
  (``self._read(gpu, "nvmlX", a, key=...)`` passes the GPU's handle and ``a``);
- every literal the module falls back on (a bit of a clock event reason, a field
  id, a memory location, an NVLink counter, ``self._const("NAME", default)``) is
  the real value, and the struct fields it reads are the real ones;
- on this machine (no NVIDIA driver) the real wrapper's init failure becomes one
  line naming NVML.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

real = pytest.importorskip("pynvml")

ROOT = Path(__file__).resolve().parents[2]
HEALTH = ROOT / "console" / "agent" / "nvidia_health.py"
PINNED = "13.615.71"  # the version tests/agent/test_nvml_contract.py inspects
SRC = HEALTH.read_text()

NAME = re.compile(r"\b(nvml[A-Z]\w*|NVML_[A-Z0-9_]+|NVMLError(?:_[A-Za-z]\w*)?)\b")
STRUCT_FIELDS = {"nvmlReturn"}  # a field of c_nvmlFieldValue_t, not a module name


@pytest.fixture(scope="module")
def health():
    spec = importlib.util.spec_from_file_location("nvidia_health_contract", HEALTH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pinned_package_is_the_one_inspected():
    assert importlib.metadata.version("nvidia-ml-py") == PINNED


def test_every_name_the_health_module_uses_exists_in_the_real_module():
    names = set(NAME.findall(SRC)) - STRUCT_FIELDS
    expected = {
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetMemoryErrorCounter",
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetRetiredPages",
        "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetViolationStatus",
        "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetCurrPcieLinkWidth",
        "nvmlDeviceGetMaxPcieLinkGeneration",
        "nvmlDeviceGetMaxPcieLinkWidth",
        "nvmlDeviceGetPcieReplayCounter",
        "nvmlDeviceGetNvLinkState",
        "nvmlDeviceGetNvLinkErrorCounter",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlEventSetCreate",
        "nvmlDeviceRegisterEvents",
        "nvmlEventSetWait",
        "nvmlEventSetFree",
        "nvmlEventTypeXidCriticalError",
        "NVML_NVLINK_MAX_LINKS",
        "NVMLError_NotSupported",
        "NVMLError_Timeout",
    }
    assert expected <= names
    missing = sorted(n for n in names if not hasattr(real, n))
    assert missing == [], f"not in pynvml {PINNED}: {missing}"


def calls() -> list[tuple[str, int, int]]:
    """(nvml function, positional arguments it gets, line) of every NVML call in the module."""
    out = []
    for node in ast.walk(ast.parse(SRC)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr = node.func.attr
        if attr.startswith("nvml"):  # self.m.nvmlX(...)
            out.append((attr, len(node.args), node.lineno))
        elif attr == "_read":  # self._read(gpu, "nvmlX", *args, key=...): the handle comes first
            name = node.args[1]
            assert isinstance(name, ast.Constant), f"line {node.lineno}: _read needs the name as a literal"
            out.append((name.value, len(node.args) - 1, node.lineno))
    # fn = getattr(self.m, "nvmlDeviceGetNvLinkState", None); fn(handle, link)
    out.append(("nvmlDeviceGetNvLinkState", 2, 0))
    return out


def test_every_call_passes_what_the_real_function_accepts():
    found = calls()
    assert len(found) >= 25
    bad = []
    for name, n, line in found:
        fn = getattr(real, name, None)
        if fn is None:
            bad.append(f"line {line}: {name} does not exist")
            continue
        try:
            inspect.signature(fn).bind(*([None] * n))
        except TypeError as exc:
            bad.append(f"line {line}: {name} with {n} argument(s): {exc}")
    assert bad == []


def test_every_fallback_literal_is_the_real_value(health):
    tables = (
        health.CLOCK_EVENT_REASONS,
        health.RESIDENCY_FIELDS,
        [row[:3] for row in health.RUN_FIELDS],
        health.ECC_LOCATIONS,
        health.NVLINK_COUNTERS,
    )
    literal = 0
    for table in tables:
        for name, const, value in table:
            assert getattr(real, const) == value, (name, const)
    for node in ast.walk(ast.parse(SRC)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "_const":
            if all(isinstance(a, ast.Constant) for a in node.args):  # others come from the tables above
                const, default = (a.value for a in node.args)
                assert getattr(real, const) == default, const
                literal += 1
    assert literal >= 10


def test_every_clock_event_reason_nvml_defines_has_a_name(health):
    bits = {bit for _name, _const, bit in health.CLOCK_EVENT_REASONS}
    assert bits == {1 << n for n in range(11)}
    assert real.nvmlClocksThrottleReasonAll | real.nvmlClocksEventReasonAll == sum(bits)
    assert set(health.THROTTLING) <= {name for name, _c, _b in health.CLOCK_EVENT_REASONS}
    assert health.decode_reasons(real.nvmlClocksEventReasonSwPowerCap | real.nvmlClocksEventReasonGpuIdle) == [
        "idle",
        "sw_power_cap",
    ]


def test_the_struct_fields_the_module_reads_exist():
    reads = {
        "c_nvmlFieldValue_t": ("nvmlReturn", "valueType", "value"),
        "c_nvmlViolationTime_t": ("violationTime",),
        "c_nvmlEventData_t": ("device", "eventType", "eventData"),
        "c_nvmlUtilization_t": ("gpu", "memory"),
    }
    for struct, fields in reads.items():
        real_fields = {f[0] for f in getattr(real, struct)._fields_}
        for field in fields:
            assert field in real_fields, (struct, field)
            assert f'"{field}"' in SRC or f".{field}" in SRC, f"the module no longer reads {struct}.{field}"
    union = {f[0] for f in real.c_nvmlValue_t._fields_}
    assert {"dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal"} <= union


def test_a_timeout_from_the_wrapper_is_the_class_the_drain_stops_on():
    """nvmlEventSetWait with 0 ms raises NVMLError(NVML_ERROR_TIMEOUT) when nothing waits."""
    assert type(real.NVMLError(real.NVML_ERROR_TIMEOUT)) is real.NVMLError_Timeout
    assert type(real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)) is real.NVMLError_NotSupported
    params = list(inspect.signature(real.nvmlEventSetWait).parameters)
    assert params == ["eventSet", "timeoutms"]


def test_the_real_wrapper_without_a_driver_is_one_line(health):
    try:
        real.nvmlInit()
    except real.NVMLError:
        pass
    else:
        real.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    with pytest.raises(health.HealthError) as err:
        health.HealthReader(real)
    text = str(err.value)
    assert text.startswith("NVML init failed: ") and "\n" not in text
    assert "(NVMLError_" in text
