"""The partition dialog's lines (console/core/partition_view.py), from snapshots and switch results."""

from __future__ import annotations

import dataclasses

from console.core.gpus import gpu_span
from console.core.model import GpuMetrics, GpuProcess, GpuStatic, NodeHealth, NodeSnapshot, ServePreset, TelemetryFrame
from console.core.partition_rules import Blocker, describe_change, effective_modes, preflight, process_blockers
from console.core.partition_view import (
    ROOT_HINT,
    blockers_text,
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
    renumber_lines,
    switched_compute,
    switching_text,
    unchanged_text,
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
    assert local_reasons("n", snap, [0, 1], "CPX", None) == []


def test_choosing_the_mode_a_gpu_has_is_unchanged_and_warns_of_no_reload():
    snap = snapshot("CPX", per_physical=8)
    assert unchanged_text(snap, [1], "CPX", None) == "unchanged: GPU 1 is already CPX/NPS1 (nothing to switch)"
    assert unchanged_text(snap, [0, 1], "CPX", "NPS1") == "unchanged: GPU 0,1 are already CPX/NPS1 (nothing to switch)"
    assert unchanged_text(snap, [1], "SPX", "NPS1") is None  # the compute mode changes
    # the memory mode it already has is no memory change: no driver reload in what the dialog says
    change = describe_change(snap, [1], "SPX", "NPS1")
    assert change == "1 physical GPU CPX/NPS1 → SPX/NPS1: 64 → 57 logical GPUs"
    assert "reload" not in change
    assert effective_modes(snap, [1], "SPX", "NPS1") == ("SPX", None)
    assert effective_modes(snap, [1], "CPX", "NPS4") == (None, "NPS4")
    assert "the amdgpu driver is reloaded" in describe_change(snap, [1], "CPX", "NPS4")
    assert describe_change(snap, [1], "CPX", "NPS1") == "unchanged: 1 physical GPU already CPX/NPS1"


def test_a_switch_that_renumbers_says_which_numbers_and_instances_change():
    snap = snapshot("CPX", per_physical=8)
    # GPU 1 of 8 CPX GPUs to SPX: its 8-15 become 8; GPUs 2-7 (16-63) move down by 7
    lines = renumber_lines(snap, [1], "SPX", {"llama-a": (20,), "llama-b": (3,), "tp2": (40, 41)})
    assert lines == [
        "renumbers logical GPUs:",
        "logical GPU 8-15 → 8 (physical 1, switched)",
        "logical GPU 16-63 → 9-56 (physical 2-7: not switched, renumbered)",
        "instance llama-a: HIP_VISIBLE_DEVICES=20 is GPU 13 after the switch; it keeps running, but its "
        "recorded GPUs (and a restart) would name other GPUs",
        "instance tp2: HIP_VISIBLE_DEVICES=40,41 is GPU 33,34 after the switch; it keeps running, but its "
        "recorded GPUs (and a restart) would name other GPUs",
    ]  # llama-b on physical 0 keeps its number
    # the last GPU, or a memory-only switch: no number of another GPU changes
    assert renumber_lines(snap, [7], "SPX", {"llama-a": (20,)}) == [
        "renumbers logical GPUs:",
        "logical GPU 56-63 → 56 (physical 7, switched)",
    ]
    assert renumber_lines(snap, [1], None, {"llama-a": (20,)}) == []
    # the whole node: every number changes, and two groups of GPUs move differently
    assert renumber_lines(snap, list(range(8)), "SPX")[1] == "logical GPU 0-63 → 0-7 (physical 0-7, switched)"
    spx = snapshot()
    assert renumber_lines(spx, [0, 2], "DPX")[2:] == [
        "logical GPU 1 → 2 (physical 1: not switched, renumbered)",
        "logical GPU 3-7 → 5-9 (physical 3-7: not switched, renumbered)",
    ]


def test_blocking_processes_are_listed_once_with_their_gpus():
    snap = snapshot("CPX", per_physical=8)
    frame = TelemetryFrame(
        0.0,
        0,
        tuple(
            GpuMetrics(
                i,
                processes=(GpuProcess(4000 + (i % 2), "python3"),) if i in (8, 9, 10, 20) else (),
            )
            for i in range(64)
        ),
    )
    snap = dataclasses.replace(snap, latest=frame)
    assert process_blockers(snap, [1]) == [Blocker(4000, "python3", (8, 10)), Blocker(4001, "python3", (9,))]
    assert process_blockers(snap, [1], {9: "inst"}) == [Blocker(4000, "python3", (8, 10))]
    assert process_blockers(snap, [1], ignore_pids={4000}) == [Blocker(4001, "python3", (9,))]
    assert process_blockers(snap, [3]) == [] and process_blockers(snap, [2]) == [Blocker(4000, "python3", (20,))]
    assert preflight(snap, [1], compute="SPX", memory=None) == [
        "GPU 8,10: process 4000 (python3) is using it",
        "GPU 9: process 4001 (python3) is using it",
    ]
    assert blockers_text(process_blockers(snap, [1]), 5.0) == (
        "k: end the 2 blocking processes (SIGTERM, then SIGKILL after 5 s); asks first"
    )
    assert blockers_text([], 5.0) == ""
    assert blockers_text([], 5.0, instances=1) == "k: stop the instance; asks first"
    assert blockers_text(process_blockers(snap, [2]), 2.5, instances=2) == (
        "k: stop the 2 instances and end the blocking process (SIGTERM, then SIGKILL after 2.5 s); asks first"
    )


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
