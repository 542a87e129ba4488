"""Partition switching is AMD-only: on an NVIDIA node the CLI and the UI say so in one line
naming the node, and nothing reaches the agent. The H100 node is simulated (real agent,
simulated NVML, LocalTransport); the UI is the real app."""

from __future__ import annotations

import json
from dataclasses import replace

from console.core.model import Profile, SimulateSpec
from console.ui.app import ConsoleApp
from console.ui.screens.partition import PartitionScreen
from console.ui.widgets.gpu_table import GpuTable
from tests.cli.cli_helpers import run
from tests.ui.conftest import screen_text, wait_for

REASON = "partition switching is AMD-only: this is an NVIDIA node (NVIDIA nvml (simulated)); MIG is set up with `nvidia-smi mig`"


def test_cli_set_on_an_nvidia_node_is_refused_in_one_line():
    proc = run("partition", "set", "--demo", "--node", "h100", "--compute", "CPX", "--yes")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [f"rocm-console: h100: refused: {REASON}"]
    assert "Traceback" not in proc.stderr


def test_cli_show_lists_the_gpus_with_the_note():
    proc = run("partition", "show", "--demo", "--node", "h100", "--json")
    assert proc.returncode == 0, proc.stderr
    (node,) = json.loads(proc.stdout)["nodes"]
    assert node["note"] == REASON
    # GPU 7's four MIG instances are the logical GPUs of one physical GPU
    assert [g["logical_gpus"] for g in node["gpus"]] == [1] * 7 + [4]


async def test_ui_partition_key_on_an_nvidia_node_names_it_and_opens_nothing(sim_node):
    h100 = replace(sim_node("h100"), simulate=SimulateSpec(gpu="H100", count=2, seed=4, mig=(1,)))
    app = ConsoleApp(Profile(nodes=(h100,)), interval=0.2, notify_health=False, cursor_blink=False)
    async with app.run_test(size=(140, 36), notifications=True) as pilot:
        table = app.screen.query_one(GpuTable)

        def rows():
            return [(r.gpu, r.physical, r.tree) for r in table.rows if r.gpu is not None]

        assert await wait_for(pilot, lambda: len(rows()) == 5, timeout=20)
        assert rows() == [(0, 0, ""), (1, 1, "┬"), (2, 1, "├"), (3, 1, "├"), (4, 1, "└")]  # MIG under GPU 1
        assert await wait_for(pilot, lambda: "NVIDIA nvml (simulated)" in screen_text(app))
        assert "MIG/3g.40gb" in screen_text(app)

        # the node line: MIG profiles, no "?" mode for the whole GPU, no ROCm version to report
        def header():
            return next(line for line in screen_text(app).splitlines() if "h100" in line)

        assert await wait_for(pilot, lambda: "· vLLM" in header(), timeout=20)  # the probe arrived
        assert "2×NVIDIA H100 80GB HBM3 = 5 GPUs · MIG/1g.10gb MIG/2g.20gb MIG/3g.40gb · vLLM" in header()
        assert "ROCm" not in header()
        await pilot.press("P")
        assert await wait_for(pilot, lambda: [n.message for n in app._notifications] == [f"h100: {REASON}"])
        assert not isinstance(app.screen, PartitionScreen)


def test_status_table_of_the_nvidia_node():
    proc = run("status", "--demo", "--node", "h100", "--no-probe")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "h100  LIVE  NVIDIA nvml (simulated)"
    parts = [line.split()[2] for line in lines[2:] if line.strip()]
    assert parts == ["-"] * 7 + ["MIG/3g.40gb", "MIG/2g.20gb", "MIG/1g.10gb", "MIG/1g.10gb"]


def test_fleet_header_names_a_pending_mig_change():
    from console.core.model import GpuStatic, NodeHealth, NodeSnapshot
    from console.ui.model.format import node_facts

    gpus = (
        GpuStatic(0, 0, 0, model="NVIDIA H100 80GB HBM3", mig_mode="off"),
        GpuStatic(1, 1, 0, model="NVIDIA H100 80GB HBM3", mig_mode="off (on after a GPU reset)"),
    )
    snap = NodeSnapshot(name="h", health=NodeHealth.LIVE, source="NVIDIA nvml", static=gpus)
    assert node_facts(snap) == ["2×NVIDIA H100 80GB HBM3", "MIG change pending a reset on GPU 1", "NVIDIA nvml"]
