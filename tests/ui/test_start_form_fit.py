"""The start dialog's fit line (console/ui/model/start_form.fit_text), from the same planner as `serve plan`."""

from __future__ import annotations

from console.core.model import GpuStatic, ServePreset
from console.ui.model.start_form import fit_text
from tests.core.models.fixtures import facts

CPX = [GpuStatic(index=i, physical=i // 8, partition_id=i % 8, vram_total_mib=24574) for i in range(16)]
SPX = [GpuStatic(index=i, physical=i, partition_id=0, vram_total_mib=196592) for i in range(8)]
EIGHT_B = ServePreset(name="8b-cpx", model="amd/Llama-3.1-8B-Instruct-FP8-KV", args=("--max-model-len", "4608"))
SEVENTY = ServePreset(name="70b", model="meta-llama/Llama-3.1-70B-Instruct")


def test_fits_on_a_cpx_partition_and_shows_tokens_and_length():
    state, line = fit_text(facts("amd--Llama-3.1-8B-Instruct-FP8-KV"), CPX, [1], EIGHT_B, {})
    assert state == "ok" and line.startswith("fits (24.0 GiB/GPU x 1): KV cache ")
    assert "max len 4,608" not in line  # the largest that fits, not the asked one
    # asking for the model's whole context: only a shorter one fits
    state, line = fit_text(facts("amd--Llama-3.1-8B-Instruct-FP8-KV"), CPX, [1], EIGHT_B, {"max_model_len": "131072"})
    assert state == "warn" and "max len" in line


def test_seventy_b_does_not_fit_a_partition_but_fits_spx():
    seventy = facts("meta-llama--Llama-3.1-70B-Instruct")
    state, line = fit_text(seventy, CPX, [0], SEVENTY, {})
    assert state == "fail" and line.startswith("does not fit (24.0 GiB/GPU x 1)")
    state, _ = fit_text(seventy, SPX, [0, 1, 2, 3, 4, 5, 6, 7], SEVENTY, {})
    assert state == "ok"
    assert fit_text(None, SPX, [0], SEVENTY, {}) is None and fit_text(seventy, SPX, [], SEVENTY, {}) is None
    state, line = fit_text(seventy, SPX, [0], SEVENTY, {"gpu_memory_utilization": "2"})
    assert state == "warn" and "gpu_memory_utilization" in line
