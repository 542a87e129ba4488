import pytest

from console.core.model import GpuMetrics, GpuProcess, GpuStatic, NodeHealth, NodeSnapshot, TelemetryFrame
from console.core.partition_rules import (
    compatibility_refusal,
    describe_change,
    parse_physical,
    physical_gpus,
    preflight,
)


def snapshot(mode="SPX", memory="NPS1", count=2, procs=None, caps=("NPS1", "NPS4")):
    per = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}[mode]
    static, metrics = [], []
    for phys in range(count):
        for part in range(per):
            i = phys * per + part
            static.append(
                GpuStatic(
                    i,
                    phys,
                    part,
                    model="AMD Instinct MI300X",
                    compute_partition=mode,
                    memory_partition=memory,
                    memory_caps=caps,
                )
            )
            metrics.append(GpuMetrics(i, processes=tuple((procs or {}).get(i, ()))))
    return NodeSnapshot("n", NodeHealth.LIVE, static=tuple(static), latest=TelemetryFrame(0, 0, tuple(metrics)))


@pytest.mark.parametrize(
    "compute, memory, ok",
    [
        ("SPX", "NPS1", True),
        ("SPX", "NPS4", False),
        ("DPX", "NPS2", True),
        ("DPX", "NPS4", False),
        ("QPX", "NPS4", True),
        ("CPX", "NPS1", True),
        ("CPX", "NPS4", True),
        ("CPX", "NPS2", False),
    ],
)
def test_compatibility_table(compute, memory, ok):
    assert (compatibility_refusal(compute, memory) is None) == ok


def test_device_caps_win():
    assert "supports NPS1/NPS2" in compatibility_refusal("CPX", "NPS4", ("NPS1", "NPS2"))


def test_cpx_describes_64_gpus_and_tp1():
    snap = snapshot(count=8)
    text = describe_change(snap, list(range(8)), "CPX", None)
    assert "8 physical MI300X SPX/NPS1 → CPX/NPS1: 8 → 64 logical GPUs" in text and "TP 1" in text
    assert "driver is reloaded" in describe_change(snap, [0], None, "NPS4")


def test_preflight_refusals_one_line_each():
    snap = snapshot(procs={1: [GpuProcess(42, "python3", 100.0)]})
    assert preflight(snap, [0], compute="CPX", memory=None) == []
    reasons = preflight(snap, [0, 1], compute="SPX", memory="NPS4", instances_on_gpu={0: "llama-a"}, can_be_root=False)
    assert reasons == [
        "GPUs 0, 1: SPX needs NPS1, the memory mode would be NPS4",
        "GPU 0 runs instance llama-a: stop it first",
        "GPU 1: process 42 (python3) is using it",
        "no root: set sudo = true in the profile (passwordless sudo), or log in as root",
    ]
    assert preflight(snap, [0], compute=None, memory=None) == [
        "nothing to change: give a compute and/or a memory partition"
    ]


def test_physical_grouping_and_parsing():
    snap = snapshot(mode="CPX", count=2)
    gpus = physical_gpus(snap)
    assert [(g.physical, len(g.logical)) for g in gpus] == [(0, 8), (1, 8)]
    assert parse_physical("all", [0, 1]) == [0, 1]
    assert parse_physical("1,0,1", [0, 1]) == [0, 1]
    assert "no physical GPU 5" in parse_physical("5", [0, 1])
    assert "expected all" in parse_physical("x", [0, 1])
