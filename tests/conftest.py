"""Shared fixtures: simulated local nodes in a temp state dir."""

from __future__ import annotations

import pytest

from console.core.model import NodeSpec, SimulateSpec


@pytest.fixture(autouse=True)
def own_data_dir(tmp_path, monkeypatch):
    """Each test writes its results, events and form memory in a folder of its own, never the
    user's (a test may point ROCM_CONSOLE_DATA_DIR elsewhere itself); the commands a test runs
    inherit it."""
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "own-data"))


@pytest.fixture
def sim_node(tmp_path):
    """Factory for simulated nodes reached through LocalTransport."""

    def make(
        name: str = "sim-a",
        *,
        gpu: str = "MI300X",
        count: int = 8,
        compute: str = "SPX",
        memory: str = "NPS1",
        seed: int = 0,
        **overrides,
    ) -> NodeSpec:
        spec = SimulateSpec(gpu=gpu, count=count, compute_partition=compute, memory_partition=memory, seed=seed)
        fields = dict(name=name, host="localhost", transport="local", state_dir=str(tmp_path / "state"), simulate=spec)
        fields.update(overrides)
        return NodeSpec(**fields)

    return make
