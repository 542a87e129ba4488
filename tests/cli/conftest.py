"""A profile with one simulated local node, for the CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def profile(tmp_path) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(f"""
[nodes.sim]
transport = "local"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 11 }}
""")
    return path
