"""The partition dialog's lines (console/core/partition_view.py), from snapshots and switch results."""

from __future__ import annotations

from console.core.gpus import gpu_span
from console.core.model import GpuStatic, NodeHealth, NodeSnapshot, ServePreset
from console.core.partition_view import (
    ROOT_HINT,
    done_text,
    failure_text,
    local_reasons,
    modes_after,
    modes_now,
    new_logical_gpus,
    offer_text,
    physical_of,
    preflight_text,
    preset_for_mode,
    switched_compute,
    switching_text,
)

CPX_PRESET = ServePreset(name="llama-3.1-8b-fp8-cpx", model="amd/Llama-3.1-8B-Instruct-FP8-KV", tp=1)
PRESETS = (ServePreset(name="llama-3.1-70b-fp8", model="amd/Llama-3.1-70B-Instruct-FP8-KV", tp=8), CPX_PRESET)


def snapshot(compute: str = "SPX", per_physical: int = 1, physical: int = 8, health=NodeHealth.LIVE) -> NodeSnapshot:
    static = tuple(
        GpuStatic(
            index=i,
            physical=i // per_physical,
            partition_id=i % per_physical,
            compute_partition=compute,
            memory_partition="NPS1",
        )
        for i in range(physical * per_physical)
    )
    return NodeSnapshot("n", health, static=static, error="link lost" if health == NodeHealth.DOWN else None)


def switched(cpx: set[int]) -> tuple[dict, ...]:
    return tuple(
        {
            "physical": p,
            "compute_partition": "CPX" if p in cpx else "SPX",
            "memory_partition": "NPS1",
            "logical_gpus": 8 if p in cpx else 1,
        }
        for p in range(8)
    )


def test_gpu_span():
    assert gpu_span([0, 1, 2, 5, 7, 8]) == "0-2,5,7,8"
    assert gpu_span([], "-") == "-"


def test_the_preset_named_for_a_mode_tp1_first():
    assert preset_for_mode(PRESETS, "CPX") is CPX_PRESET
    assert preset_for_mode(PRESETS, "SPX") is None and preset_for_mode(PRESETS, "QPX") is None


def test_logical_gpus_after_a_switch_follow_amdsmi_order():
    assert new_logical_gpus(switched({2, 3}), [2, 3]) == tuple(range(2, 18))
    assert switched_compute(switched({2, 3}), [2, 3]) == "CPX"
    assert switched_compute(switched({2}), [2, 3]) is None  # two modes: no one preset fits


def test_physical_of_marked_logical_gpus():
    assert physical_of(snapshot("CPX", per_physical=8, physical=2), [3, 9, 10]) == [0, 1]


def test_modes_now_and_after():
    assert modes_now(snapshot(), [0, 1]) == "GPU 0,1  SPX/NPS1 · 1 logical GPU each"
    assert modes_after(switched({0, 1, 2}), [0, 1, 2]) == "GPU 0-2  CPX/NPS1 · 8 logical GPUs each"
    assert modes_now(snapshot(), []) == "-"


def test_what_refuses_a_target_without_asking_the_node():
    snap = snapshot()
    assert local_reasons("n", NodeSnapshot("n", NodeHealth.CONNECTING), [0], "CPX", None) == [
        "n has not reported its GPUs yet (connecting)"
    ]
    assert local_reasons("n", snapshot(health=NodeHealth.DOWN), [0], "CPX", None) == ["n is down: link lost"]
    assert local_reasons("n", snap, "no physical GPU 9", "CPX", None) == ["no physical GPU 9"]
    assert local_reasons("n", snap, [0], None, None) == ["choose a compute and/or a memory partition"]
    assert local_reasons("n", snap, [0, 1], "SPX", None) == ["nothing to change: GPU 0,1 are already SPX/NPS1"]
    assert local_reasons("n", snap, [0, 1], "CPX", None) == []


def test_lines_of_the_dialog():
    assert preflight_text([], checking=True, memory=None).startswith("preflight: checking")
    assert preflight_text(["GPU 1: busy"], checking=False, memory=None) == "✗ GPU 1: busy"
    assert preflight_text([], checking=False, memory="NPS4").endswith("asks once more before the driver reload")
    assert switching_text("n", [0, 1], "CPX", None, 4.4).startswith("switching n GPU 0,1 to CPX… 4 s")
    done = done_text("n", [0, 1], switched({0, 1}), "verified", 41.25, 22)
    assert done.startswith("✓ n: GPU 0,1 now CPX/NPS1 (verified, 41.2 s): 22 logical GPUs on the node.")
    assert failure_text("permission denied", "no_perm") == f"permission denied ({ROOT_HINT})"
    assert "passwordless sudo" in failure_text("sudo: a password is required", "no_perm")
    assert failure_text("busy", "busy") == "busy"
    assert "GPUs 0-15? llama-3.1-8b-fp8-cpx" in offer_text(CPX_PRESET, tuple(range(16)))
