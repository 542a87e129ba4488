"""Smoke check of the performance scripts: each runs with --quick and prints one JSON object.

No budget is asserted here (CI machines are noisy): only that every script runs
end to end and reports its figures, its budgets and the machine's load. The
figures themselves are produced by running the scripts in full (tests/perf/README.md).
"""

from __future__ import annotations

import json
import numbers
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.vllm_cpu import vllm_available

ROOT = Path(__file__).resolve().parents[2]
PERF = Path(__file__).resolve().parent

COMMON = ("script", "quick", "machine", "python", "loadavg_before", "budgets", "budgets_met")


def run_quick(script: str, timeout: float = 240, extra: tuple[str, ...] = ()) -> dict:
    proc = subprocess.run(
        [sys.executable, str(PERF / script), "--quick", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    out = proc.stdout.strip()
    assert out.count("\n") == 0, f"{script} printed more than one line:\n{out[:2000]}"
    result = json.loads(out)  # exactly one JSON object
    assert isinstance(result, dict)
    for key in COMMON:
        assert key in result, f"{script}: no {key!r} in {sorted(result)}"
    assert result["script"] == script.removesuffix(".py") and result["quick"] is True
    assert len(result["loadavg_before"]) == 3
    for name, budget in result["budgets"].items():
        assert {"figure", "budget", "met"} <= set(budget), name
        assert isinstance(budget["figure"], numbers.Real), f"{script}: budget {name} has no figure"
    return result


def number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@pytest.mark.timeout(240)
def test_fleet_scale_quick():
    r = run_quick("fleet_scale.py")
    assert r["source"].startswith("replayed agent traces, from a process of their own")
    assert number(r["steady"]["far_end_cpu_percent"])  # the agents' process, measured apart
    assert r["nodes"] == 64 and r["logical_gpus"] == 64 * 64
    assert number(r["cpu_percent"]) and number(r["peak_rss_mb"])
    for key in ("sample_to_screen_ms", "key_to_repaint_ms"):
        assert r[key]["n"] > 0 and number(r[key]["p50"]) and number(r[key]["p95"])
    assert number(r["redraw_ms_per_frame"]["paint"]["p95"])
    assert set(r["budgets"]) == {
        "cpu_percent",
        "peak_rss_mb",
        "sample_to_screen_p95_ms",
        "key_to_repaint_p95_ms",
        "history_seconds_per_gpu",
        "sample_age_on_screen_max_s",
        "heard_age_max_s",
    }
    assert r["gc"]["tracked_objects"] > 0 and number(r["gc"]["full_collection_ms"]["frozen"])


@pytest.mark.timeout(240)
def test_fleet_scale_ssh_rate_control_quick():
    """The 1,024 x 8 SSH row at tiny scale: nodes off screen are asked for fewer samples and send tick lines."""
    r = run_quick("fleet_scale.py", extra=("--nodes", "8", "--layout", "spx"))
    assert r["logical_gpus"] == 8 * 8
    steady = r["steady"]
    assert steady["nodes_sending_less"] > 0 and steady["tick_lines_per_s"] > 0
    assert number(steady["sample_age_max_s"]["on_screen"]) and number(steady["heard_age_max_s"])
    assert r["budgets"]["cpu_percent"]["budget"] == "<= 10"


@pytest.mark.timeout(120)
def test_fleet_scale_inline_agents_quick():
    """--agents inline: the replayed agents in the console's own process, as before."""
    r = run_quick("fleet_scale.py", extra=("--nodes", "4", "--layout", "spx", "--agents", "inline"))
    assert r["source"].endswith("in the console's process (--agents inline)")
    assert r["steady"]["tick_lines_per_s"] >= 0 and "far_end_cpu_percent" not in r["steady"]


@pytest.mark.timeout(240)
def test_fleet_scale_answers_quick():
    """The 65,536-GPU row (1,024 x 64 CPX through Prometheus-style answers) at tiny scale."""
    r = run_quick("fleet_scale.py", extra=("--source", "answers", "--nodes", "4", "--layout", "cpx"))
    assert r["source"].startswith("simulated Prometheus answers")
    assert r["logical_gpus"] == 4 * 64 and r["history"]["seconds_per_gpu"] >= 300
    assert r["steady"]["answers"]["refresh_cpu_ms"]["n"] > 0 and r["key_to_repaint_ms"]["n"] > 0
    assert r["budgets"]["peak_rss_mb"]["budget"] == "<= 400"


@pytest.mark.timeout(120)
def test_idle_cpu_quick():
    r = run_quick("idle_cpu.py", timeout=120)
    assert "error" not in r, r.get("error")
    assert r["nodes"] == 4 and number(r["cpu_percent"]) and number(r["rss_mb"]) and r["seconds"] > 0
    assert number(r["idle"]["main_thread_cpu_percent"]) and "unattended" not in r  # --quick: the idle window only
    assert r["budgets"]["cpu_percent"]["budget"] == "<= 1"


@pytest.mark.integration
@pytest.mark.timeout(240)
@pytest.mark.skipif(
    not os.path.exists("/usr/bin/prometheus") and not os.environ.get("CI"),
    reason="prometheus not installed (scripts/test-all installs it); CI always runs it",
)
def test_fleet_scale_prometheus_quick():
    r = run_quick("fleet_scale.py", extra=("--source", "prometheus", "--nodes", "4", "--layout", "spx"))
    assert r["source"] == "real Prometheus scraping simulated DME"
    assert r["logical_gpus"] == 4 * 8
    prom = r["steady"]["prometheus"]
    assert prom["targets"] == 4 and number(prom["prometheus_cpu_percent"]) and number(prom["exporter_cpu_percent"])
    assert prom["console_refresh_cpu_ms"]["n"] > 0 and number(prom["refresh_cpu_percent_at_1hz"])
    assert r["key_to_repaint_ms"]["n"] > 0


@pytest.mark.timeout(240)
def test_agent_cost_quick():
    r = run_quick("agent_cost.py")
    for case in ("spx_8_gpus", "cpx_64_partitions"):
        c = r[case]
        assert number(c["resident_cpu_ms_per_tick"]) and number(c["spawn_cpu_ms_per_tick"]) and number(c["ratio"])
        assert c["budget"] == ">= 100" and isinstance(c["met"], bool)
    assert "note" in r  # says why when a ratio misses its budget


@pytest.mark.timeout(240)
def test_startup_quick():
    r = run_quick("startup.py")
    assert not r["errors"]
    assert number(r["hello_world_first_frame_s"]["median"])
    assert number(r["console_full_fleet_frame_s"]["median"])
    assert number(r["ratio_median"]) and r["budget"] == "<= 2"
    assert number(r["console_first_paint_s"]["median"]) and number(r["first_paint_ratio_median"])
    assert r["budgets"]["first_paint_vs_hello"]["budget"] == "<= 1.5"


@pytest.mark.integration
@pytest.mark.timeout(300)
@pytest.mark.skipif(
    not vllm_available() and not os.environ.get("CI"),
    reason="vLLM-CPU venv missing (scripts/setup-vllm-cpu); CI always runs it",
)
def test_observer_effect_quick():
    r = run_quick("observer_effect.py", timeout=300)
    assert r["pairs"] == 1 and len(r["runs"]) == 2
    assert number(r["output_tok_s_with"]["median"]) and number(r["output_tok_s_without"]["median"])
    assert number(r["ratio_median"]) and r["budget"] == ">= 0.98"
