"""Replay the agent's lines captured on a real H100 through the console's parsing.

tests/fixtures/hardware/h100-nvml-2026-11-25.jsonl is what the agent wrote on the
device (INDEX.toml says how it was taken): 20 s idle, then a torch bf16 matmul loop.
Each line goes through console.core.telemetry.parse_agent_line into a node snapshot,
and from there into the fleet table's rows and the `status --json` view.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

from console.core.model import AgentHello, NodeHealth, NodeSnapshot, StaticInfo, TelemetryFrame
from console.core.status_view import node_dict
from console.core.telemetry import is_nvidia_source, parse_agent_line
from console.ui.model.format import partition_text
from console.ui.model.rows import RowFilter, node_rows

HARDWARE = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"
INDEX = {c["id"]: c for c in tomllib.loads((HARDWARE / "INDEX.toml").read_text())["capture"]}


def replay(capture_id):
    """(snapshots after each frame, the hello) from a capture's lines."""
    snap = NodeSnapshot(name="h100-real", health=NodeHealth.CONNECTING)
    hello, frames = None, []
    for line in (HARDWARE / INDEX[capture_id]["file"]).read_text().splitlines():
        message = parse_agent_line(line)
        if isinstance(message, AgentHello):
            hello = message
            snap = NodeSnapshot(name=snap.name, health=snap.health, source=message.source)
        elif isinstance(message, StaticInfo):
            snap = NodeSnapshot(name=snap.name, health=snap.health, source=snap.source, static=message.gpus)
        elif isinstance(message, TelemetryFrame):
            snap = NodeSnapshot(
                name=snap.name, health=NodeHealth.LIVE, source=snap.source, static=snap.static, latest=message
            )
            frames.append(snap)
    return frames, hello


@pytest.mark.parametrize(
    "capture_id", ["h100-nvml-2026-11-25", "h100-nvml-final-2026-11-25", "h100-nvidia-smi-2026-11-25"]
)
def test_real_h100_capture_becomes_one_fleet_row_with_the_real_model(capture_id):
    frames, hello = replay(capture_id)
    assert hello is not None and hello.source == "NVIDIA " + INDEX[capture_id]["mode"]
    assert is_nvidia_source(hello.source) and not is_nvidia_source("amdsmi (simulated)")
    last = frames[-1]
    rows = node_rows(last, RowFilter(""))
    assert [(r.gpu, r.physical) for r in rows] == [(None, None), (0, 0)]  # the node line, one GPU
    assert rows == node_rows(last, RowFilter("h100"))  # the model name is searchable
    view = node_dict(last)
    (gpu,) = view["gpus"]
    assert gpu["model"] == "NVIDIA H100 80GB HBM3" and gpu["bdf"] == "00000000:00:06.0"
    assert gpu["vram_total_mib"] == 81559 and gpu["power_cap_w"] == 700
    # MIG as the GPU reported it: disabled, so no partition (the rows of a MIG GPU say "MIG/<profile>")
    static = last.static[0]
    assert (static.compute_partition, static.memory_partition) == (None, None)
    assert partition_text(static.compute_partition, static.memory_partition) == "?"


@pytest.mark.parametrize("capture_id", ["h100-nvml-2026-11-25", "h100-nvml-final-2026-11-25"])
def test_real_h100_idle_then_loaded(capture_id):
    frames, _ = replay(capture_id)
    pid = INDEX[capture_id]["load_pid"]
    assert len(frames) == 62
    gpus = [node_dict(f)["gpus"][0] for f in frames]
    idle, loaded = gpus[:20], gpus[30:]
    assert all(g["util_pct"] == 0 and g["processes"] == [] for g in idle)
    assert all(60 < g["power_w"] < 80 for g in idle)  # an idle H100 SXM draws ~72 W
    assert all(g["gfx_clock_mhz"] == 345 for g in idle)
    assert all(g["util_pct"] >= 98 for g in loaded)
    assert all(
        650 < g["power_w"] <= 1.01 * g["power_cap_w"] for g in loaded
    )  # at its 700 W cap (a sample overshoots by ~3 W)
    assert all(g["vram_used_mib"] > idle[0]["vram_used_mib"] + 1000 for g in loaded)
    assert all(g["processes"] == [{"pid": pid, "name": "python3", "vram_mib": 1130.0}] for g in loaded)
    if "mig_mode" in frames[-1].static[0].__dataclass_fields__ and capture_id.endswith("final-2026-11-25"):
        assert frames[-1].static[0].mig_mode == "off"  # the final agent says so; the first capture predates the key
    # warming up under load: the GPU and HBM temperatures climb
    assert loaded[-1]["temp_junction_c"] > idle[-1]["temp_junction_c"] + 20
    assert loaded[-1]["temp_mem_c"] > idle[-1]["temp_mem_c"] + 15
