"""The NVIDIA sampler and the simulated NVML against the real ``pynvml`` (nvidia-ml-py).

The real module imports without a driver (it loads libnvidia-ml.so.1 only at
nvmlInit), so it is inspected directly:

- every ``nvml*`` function, ``NVML_*`` constant and ``NVMLError*`` class named in
  console/agent/nvidia.py exists in the real module, and each call passes a number
  of arguments the real function accepts (``self._call("nvmlX", h, a)`` passes
  ``h, a``; ``self._tick_read(gpu, "nvmlX", a)`` passes the GPU's handle first);
- the simulator (console/sim/pynvml.py) has the real names: its functions take the
  real parameters, its constants have the real values, each ``NVMLError_<Name>``
  stands for the real code and prints NVML's real text, and the objects it returns
  have the fields of the real ctypes structures (the fields the agent reads).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import inspect
import json
import re
from pathlib import Path

import pytest

from tests.sim.simulators import load_pynvml

real = pytest.importorskip("pynvml")

ROOT = Path(__file__).resolve().parents[2]
AGENT_NVIDIA = ROOT / "console" / "agent" / "nvidia.py"
PINNED = "13.615.71"

NAME = re.compile(r"\b(nvml[A-Z]\w*|NVML_[A-Z0-9_]+|NVMLError(?:_[A-Za-z]\w*)?)\b")
STRUCT_FIELDS = {"nvmlReturn"}  # a field of c_nvmlFieldValue_t the agent reads, not a module name
HELPERS = {"_call": 0, "_tick_read": 1}  # helper -> positional arguments it adds before the rest (the handle)


def test_the_pinned_package_is_the_one_inspected():
    assert importlib.metadata.version("nvidia-ml-py") == PINNED


def agent_names() -> set[str]:
    return set(NAME.findall(AGENT_NVIDIA.read_text())) - STRUCT_FIELDS


def test_every_name_the_agent_uses_exists_in_the_real_module():
    names = agent_names()
    assert {"nvmlInit", "nvmlDeviceGetMigMode", "NVML_TEMPERATURE_GPU", "NVMLError_NotSupported"} <= names
    missing = sorted(n for n in names if not hasattr(real, n))
    assert missing == [], f"not in pynvml {PINNED}: {missing}"


def agent_calls() -> list[tuple[str, int, int]]:
    """(nvml function, positional argument count, line) of every call in nvidia.py."""
    out = []
    for node in ast.walk(ast.parse(AGENT_NVIDIA.read_text())):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr = node.func.attr
        if attr.startswith("nvml"):
            out.append((attr, len(node.args), node.lineno))
        elif attr in HELPERS:
            # _call("nvmlX", *args) / _tick_read(gpu, "nvmlX", *args)
            pos = 0 if attr == "_call" else 1
            name = node.args[pos] if len(node.args) > pos else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                out.append((name.value, len(node.args) - pos - 1 + HELPERS[attr], node.lineno))
    return out


def test_every_call_passes_what_the_real_function_accepts():
    calls = agent_calls()
    assert len(calls) >= 20
    bad = []
    for name, n, line in calls:
        fn = getattr(real, name, None)
        if fn is None:
            bad.append(f"line {line}: {name} does not exist")
            continue
        try:
            inspect.signature(fn).bind(*([None] * n))
        except TypeError as exc:
            bad.append(f"line {line}: {name} with {n} argument(s): {exc}")
    assert bad == []


def test_the_field_value_union_members_the_agent_reads():
    """field_number() picks the union member by valueType: both must be the real ones."""
    src = AGENT_NVIDIA.read_text()
    mapping = ast.literal_eval(re.search(r"\{0: \"dVal\"[^}]*\}", src).group(0))
    union = [f[0] for f in real.c_nvmlValue_t._fields_]
    assert set(mapping.values()) <= set(union)
    types = {
        real.NVML_VALUE_TYPE_DOUBLE: "dVal",
        real.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
        real.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
        real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
        real.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
        real.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
        real.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
    }
    assert mapping == types
    fields = {f[0] for f in real.c_nvmlFieldValue_t._fields_}
    assert {"nvmlReturn", "valueType", "value"} <= fields


def test_the_struct_fields_the_agent_reads_exist():
    src = AGENT_NVIDIA.read_text()
    reads = {
        "c_nvmlMemory_t": ("used", "total"),
        "c_nvmlUtilization_t": ("gpu", "memory"),
        "nvmlPciInfo_t": ("busId",),
        "c_nvmlProcessInfo_v3_t": ("pid", "usedGpuMemory"),
    }
    for struct, fields in reads.items():
        real_fields = {f[0] for f in getattr(real, struct)._fields_}
        for field in fields:
            assert field in real_fields, (struct, field)
            assert f'"{field}"' in src, f"the agent no longer reads {struct}.{field}: update this test"


# ------------------------------------------------------------------ the simulator


@pytest.fixture(scope="module")
def sim():
    return load_pynvml("pynvml_sim_contract")


def public(module, prefix):
    return sorted(n for n in vars(module) if n.startswith(prefix))


def test_sim_functions_exist_with_the_real_parameters(sim):
    names = [n for n in public(sim, "nvml") if inspect.isfunction(getattr(sim, n))]
    assert len(names) >= 30
    for name in names:
        assert hasattr(real, name), f"{name} is not a pynvml function"
        ours = list(inspect.signature(getattr(sim, name)).parameters)
        theirs = list(inspect.signature(getattr(real, name)).parameters)
        assert ours == theirs, name


def test_sim_covers_every_function_the_agent_calls(sim):
    called = {name for name, _, _ in agent_calls()}
    assert called - set(vars(sim)) == set()


def test_sim_constants_have_the_real_values(sim):
    names = public(sim, "NVML_")
    assert len(names) >= 50
    for name in names:
        assert getattr(sim, name) == getattr(real, name), name


def test_sim_errors_are_the_real_classes_codes_and_texts(sim):
    classes = public(sim, "NVMLError_")
    real_classes = public(real, "NVMLError_")
    assert classes == real_classes
    for name in classes:
        ours, theirs = getattr(sim, name)(), getattr(real, name)()
        assert issubclass(getattr(sim, name), sim.NVMLError)
        assert ours.value == theirs.value, name
        assert type(sim.NVMLError(ours.value)) is getattr(sim, name)  # NVMLError(code) is the subclass
        if theirs.value in real.NVMLError._errcode_to_string:  # texts the wrapper has without the library
            assert str(ours) == str(theirs), name
    assert str(sim.NVMLError_LibRmVersionMismatch()) == "RM has detected an NVML/RM version mismatch."


def test_sim_results_have_the_real_struct_fields(sim, tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_DIR", str(tmp_path))
    monkeypatch.setenv("ROCM_CONSOLE_SIM_SPEC", json.dumps({"gpu": "H100", "count": 2, "busy": [0], "mig": [1]}))
    sim.nvmlInit()
    try:
        h = sim.nvmlDeviceGetHandleByIndex(0)
        mig = sim.nvmlDeviceGetMigDeviceHandleByIndex(sim.nvmlDeviceGetHandleByIndex(1), 0)

        def fields(struct):
            return {f[0] for f in getattr(real, struct)._fields_}

        assert set(vars(sim.nvmlDeviceGetMemoryInfo(h))) == fields("c_nvmlMemory_t")
        assert set(vars(sim.nvmlDeviceGetMemoryInfo(mig))) == fields("c_nvmlMemory_t")
        assert set(vars(sim.nvmlDeviceGetUtilizationRates(h))) == fields("c_nvmlUtilization_t")
        assert set(vars(sim.nvmlDeviceGetPciInfo(h))) == fields("nvmlPciInfo_t")
        (fv,) = sim.nvmlDeviceGetFieldValues(h, [sim.NVML_FI_DEV_MEMORY_TEMP])
        assert set(vars(fv)) == fields("c_nvmlFieldValue_t")
        assert set(vars(fv.value)) == fields("c_nvmlValue_t")
        (proc,) = sim.nvmlDeviceGetComputeRunningProcesses(h)
        assert set(vars(proc)) == fields("c_nvmlProcessInfo_v3_t")
        # units: mW, bytes, MHz, as NVML reports them
        assert 60_000 < sim.nvmlDeviceGetPowerUsage(h) <= sim.nvmlDeviceGetEnforcedPowerLimit(h) == 700_000
        assert sim.nvmlDeviceGetMemoryInfo(h).total == 81559 * 2**20
        assert sim.nvmlDeviceGetClockInfo(h, sim.NVML_CLOCK_MEM) == 2619
        assert sim.nvmlDeviceGetMigMode(sim.nvmlDeviceGetHandleByIndex(1)) == [1, 1]
        with pytest.raises(sim.NVMLError_NotSupported):  # MIG mode: no whole-GPU activity
            sim.nvmlDeviceGetUtilizationRates(sim.nvmlDeviceGetHandleByIndex(1))
        with pytest.raises(sim.NVMLError_NotFound):  # an empty MIG slot
            sim.nvmlDeviceGetMigDeviceHandleByIndex(sim.nvmlDeviceGetHandleByIndex(1), 6)
    finally:
        sim.nvmlShutdown()


def test_the_sample_energy_and_throttle_calls_are_real_pynvml_calls():
    """energy_j comes from the energy counter at nvml_energy.py's cadence and throttled from the
    tick's clock event reasons (nvidia.py): real pynvml functions, and the reason bits are the
    real clock event reasons that mean a limit was hit."""
    spec = importlib.util.spec_from_file_location("nvidia_contract_fields", AGENT_NVIDIA)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(getattr(real, module.ENERGY_READ))
    for name in module.TICK_READS:
        assert callable(getattr(real, name)), name
    assert module.THROTTLE_REASON_BITS == (
        real.nvmlClocksEventReasonSwPowerCap
        | real.nvmlClocksEventReasonHwSlowdown
        | real.nvmlClocksEventReasonSwThermalSlowdown
        | real.nvmlClocksEventReasonHwThermalSlowdown
        | real.nvmlClocksEventReasonHwPowerBrakeSlowdown
    )
