"""Shared fixtures: simulated local nodes in a temp state dir."""

from __future__ import annotations

import pytest

from console.core.model import NodeSpec, SimulateSpec


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
