"""Issue U2: a preset's `env_by_vllm` reaches a start for what the node's vLLM reads: on the
simulated node (vLLM 0.32) the shipped seed presets' VLLM_USE_TRITON_FLASH_ATTN, which 0.32 no
longer has, is not set, so the start draws no version warning (the toast on every start)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from console.core.profiles import load_profile
from console.services.instances import InstanceService
from console.services.status import sample_node
from console.services.transports import TransportPool
from tests.helpers import free_port

PRESETS = load_profile([Path(__file__).resolve().parents[2] / "profiles" / "presets.toml"])
TINY = next(p for p in PRESETS.serve_presets if p.name == "tiny")
SEED = next(p for p in PRESETS.serve_presets if p.name == "llama-3.1-8b-fp8")


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


@pytest.mark.timeout(120)
async def test_the_seed_env_a_vllm_release_lacks_is_not_set_and_not_warned(sim_node):
    node = sim_node("envv")
    pool = TransportPool()
    svc = InstanceService(pool)
    # the seed preset's env, on the tiny model the simulator serves at once
    seeded = dataclasses.replace(TINY, env=SEED.env, env_by_vllm=SEED.env_by_vllm)
    old_style = dataclasses.replace(TINY, env=(("VLLM_USE_TRITON_FLASH_ATTN", "0"),))
    try:
        snap = await sample_node(pool, node, probe=True)
        assert snap.probe is not None and snap.probe.vllm.startswith("0.32")
        view = await svc.start(node, seeded, gpus=[1], snapshot=snap, port=free_port(), name="seeded")
        before = await svc.start(node, old_style, gpus=[2], snapshot=snap, port=free_port(), name="old")
    finally:
        for name in ("seeded", "old"):
            try:
                await svc.stop(node, name, int_timeout=5, term_timeout=2)
            except Exception:  # noqa: BLE001 - one that never started
                pass
        await pool.close()
    assert not [w for w in view.warnings if "VLLM_USE_TRITON_FLASH_ATTN" in w], view.warnings
    # the same variable set plainly still warns: the check is alive, the preset no longer trips it
    assert any("VLLM_USE_TRITON_FLASH_ATTN is gone in vLLM 0.32" in w for w in before.warnings), before.warnings
