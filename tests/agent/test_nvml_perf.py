"""Smoke run of tests/perf/nvidia_cost.py (figures, no budget asserted beyond the call count,
which does not depend on the machine's speed)."""

from __future__ import annotations

import pytest

from tests.perf.test_perf_smoke import number, run_quick


@pytest.mark.timeout(240)
def test_nvidia_cost_quick():
    r = run_quick("nvidia_cost.py")
    sim = r["sim"]
    assert sim["physical_gpus"] == 8 and sim["logical_gpus"] == 11
    assert number(sim["cpu_ms_per_tick"]["mean"]) and number(sim["init_cpu_ms"])
    # calls are counted, not timed: the budget holds on any machine
    assert r["budgets"]["sim_calls_per_tick"]["met"] is True
    assert sim["calls_last_tick"]["nvmlDeviceGetPowerUsage"] == 8
    assert "skipped" in r["real_nvml"] or r["budgets"]["real_nvml_calls_per_tick"]["met"] is True
