"""Every amdsmi name console/core/health_readings.py maps from is held against the real package.

The mapping reads amdsmi results by function name and key (``_amd(results,
"amdsmi_get_pcie_info", "pcie_metric", "pcie_speed")``, ``results.get("amdsmi_...")``).
This test finds each such use in the source with ``ast`` (so a new one is checked
without anyone listing it) and checks, in the real amdsmi package's source (parsed
like tests/agent/test_amdsmi_contract.py does; it cannot be imported without
libamd_smi.so): the function exists, and every key is one the function builds.
The bad page status values and the event names are held to the real enums.
"""

from __future__ import annotations

import ast
import importlib.metadata
from pathlib import Path

import pytest

from console.core import health_readings
from tests.agent.test_amdsmi_contract import Interface, package_dir, read_interface

HEALTH_PY = Path(health_readings.__file__)


@pytest.fixture(scope="module")
def real() -> Interface:
    return read_interface(package_dir(), importlib.metadata.version("amdsmi"))


@pytest.fixture(scope="module")
def interface_tree() -> ast.Module:
    path = package_dir() / "amdsmi_interface.py"
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def const(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def uses() -> list[tuple[str, tuple[str, ...], int]]:
    """(function, keys, line) of every amdsmi read in health_readings.py."""
    tree = ast.parse(HEALTH_PY.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "_amd" and len(node.args) >= 2:
            name = const(node.args[1])
            keys = tuple(const(a) for a in node.args[2:])
            if name is None or None in keys:
                # "acc_" + suffix: the suffixes come from AMD_VIOLATIONS, checked below
                keys = tuple(k for k in keys if k is not None)
            out.append((name, keys, node.lineno))
        elif isinstance(func, ast.Attribute) and func.attr == "get" and node.args:
            name = const(node.args[0])
            if name and name.startswith("amdsmi_"):
                out.append((name, (), node.lineno))
    return out


def test_the_mapping_reads_what_the_real_functions_return(real):
    found = uses()
    assert len(found) >= 15, "the ast walk finds the mapping's reads"
    functions = {name for name, _, _ in found}
    assert {
        "amdsmi_get_gpu_total_ecc_count",
        "amdsmi_get_gpu_ecc_count",
        "amdsmi_get_gpu_bad_page_info",
        "amdsmi_get_pcie_info",
        "amdsmi_get_violation_status",
        "amdsmi_get_gpu_metrics_info",
        "amdsmi_get_gpu_xgmi_link_status",
        "amdsmi_get_energy_count",
    } <= functions
    problems = []
    for name, keys, line in found:
        if name not in real.functions:
            problems.append(f"health_readings.py:{line}: {name} is not a function of amdsmi {real.version}")
            continue
        for key in keys:
            if key not in real.keys[name]:
                problems.append(f"health_readings.py:{line}: {name}() builds no key {key!r}")
    assert not problems, "\n".join(problems)


def test_violation_and_metrics_keys_built_from_suffixes(real):
    status_keys = real.keys["amdsmi_get_violation_status"]
    for suffix, _reason in health_readings.AMD_VIOLATIONS:
        assert "active_" + suffix in status_keys and "acc_" + suffix in status_keys, suffix
    assert "acc_counter" in status_keys
    metric_keys = real.keys["amdsmi_get_gpu_metrics_info"]
    for key, _reason in health_readings.AMD_METRICS_RESIDENCY:
        assert key in metric_keys, key
    assert "accumulation_counter" in metric_keys


def test_bad_page_records_and_status_values(real):
    # amdsmi_get_gpu_bad_page_info returns _format_bad_page_info's records.
    assert "status" in real.keys["_format_bad_page_info"]
    members = real.enums["AmdSmiMemoryPageStatus"]
    assert members == {
        "RESERVED": health_readings.AMD_PAGE_RESERVED,
        "PENDING": health_readings.AMD_PAGE_PENDING,
        "UNRESERVABLE": health_readings.AMD_PAGE_UNRESERVABLE,
    }


def test_xgmi_link_status_letters(interface_tree):
    fn = next(
        n for n in interface_tree.body if isinstance(n, ast.FunctionDef) and n.name == "amdsmi_get_gpu_xgmi_link_status"
    )
    letters = {
        const(call.args[0])
        for call in ast.walk(fn)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append"
    }
    # The mapping reads U as up, D as down, X as disabled (left out), anything else unknown.
    assert letters == {"X", "U", "D", "N/A"}


def test_event_names_are_the_real_notification_types(real, interface_tree):
    members = real.enums["AmdSmiEvtNotificationType"]
    for name in health_readings.AMD_EVENTS:
        assert name in members, name
    reader = next(n for n in interface_tree.body if isinstance(n, ast.ClassDef) and n.name == "AmdSmiEventReader")
    read = next(n for n in reader.body if isinstance(n, ast.FunctionDef) and n.name == "read")
    keys = {const(k) for d in ast.walk(read) if isinstance(d, ast.Dict) for k in d.keys}
    assert {"event", "message"} <= keys


def test_cper_entries_call_and_keys_are_the_real_ones(real):
    # amdsmi_get_gpu_cper_entries(processor_handle, severity_mask, buffer_size, cursor) -> (entries, cursor, ...)
    params = real.functions["amdsmi_get_gpu_cper_entries"]
    assert params.positional == ["processor_handle", "severity_mask", "buffer_size", "cursor"]
    for key in health_readings.AMD_CPER_KEYS:
        assert key in real.keys["amdsmi_get_gpu_cper_entries"], key
    # the severity names the mapping compares with: amdsmi_cper_sev_t without its prefix, lower case
    wrapper = (package_dir() / "amdsmi_wrapper.py").read_text(encoding="utf-8")
    assert "'AMDSMI_CPER_SEV_FATAL'" in wrapper and "'AMDSMI_CPER_SEV_NON_FATAL_UNCORRECTED'" in wrapper


def test_cper_records_map_into_the_reading_in_record_order():
    entries = {
        "1": {"error_severity": "fatal", "notify_type": "MCE", "timestamp": "2026/11/26 10:00:01"},
        "0": {"error_severity": "non_fatal_corrected", "notify_type": "CMC", "timestamp": "2026/11/26 10:00:00"},
    }
    reading = health_readings.from_amdsmi(3, 1.0, {"amdsmi_get_gpu_cper_entries": entries})
    assert reading.cper_records == (("non_fatal_corrected", "CMC"), ("fatal", "MCE"))
    assert health_readings.from_amdsmi(3, 1.0, {"amdsmi_get_gpu_cper_entries": {}}).cper_records == ()
    assert health_readings.from_amdsmi(3, 1.0, {}).cper_records is None  # not read this time: never "none"
