"""The fit model: KV bytes per token, partition memory, the budget, verdicts, the plan table, errors."""

from __future__ import annotations

import json

import pytest

import console.sim.amdsmi as sim
from console.core.models.config import read_config
from console.core.models.fit import (
    GPU_SPECS,
    FitError,
    GiB,
    MiB,
    Reserve,
    ServeSettings,
    Verdict,
    default_batch,
    kv_bytes_per_token,
    partition_memory_bytes,
    plan_table,
    predict,
    tp_refusal,
    weights_per_gpu,
)
from console.core.partition_rules import compatibility_refusal
from tests.core.models.fixtures import DEEPSEEK_V3, config, facts

L8 = "amd--Llama-3.1-8B-Instruct-FP8-KV"
L70 = "meta-llama--Llama-3.1-70B-Instruct"
L70_FP8 = "amd--Llama-3.1-70B-Instruct-FP8-KV"


def test_kv_bytes_per_token_split_and_replicated_heads():
    f = facts(L8)  # 32 layers, 8 KV heads of 128
    assert kv_bytes_per_token(f, 1, "bfloat16") == 2 * 32 * 8 * 128 * 2 == 131072  # 128 KiB
    assert kv_bytes_per_token(f, 1, "fp8") == 131072 // 2  # fp8 KV halves it
    assert kv_bytes_per_token(f, 2, "bfloat16") == 2 * 32 * 4 * 128 * 2  # 4 KV heads per GPU
    assert kv_bytes_per_token(f, 8, "bfloat16") == 2 * 32 * 1 * 128 * 2  # 1 head per GPU
    # 16 ranks, 8 KV heads: each rank still keeps a whole head (replicated), so no further halving
    assert kv_bytes_per_token(f, 16, "bfloat16") == kv_bytes_per_token(f, 8, "bfloat16")
    # latent attention: one 512 + 64 latent per layer, the same on every GPU
    ds = read_config(DEEPSEEK_V3, name="ds")
    assert kv_bytes_per_token(ds, 8, "fp8") == kv_bytes_per_token(ds, 1, "fp8") == 61 * (512 + 64)


def test_tp_must_split_the_heads():
    f = facts(L70)
    assert tp_refusal(f, 8) is None and tp_refusal(f, 16) is None and tp_refusal(f, 64) is None
    assert tp_refusal(f, 3) == "TP 3 does not divide the 64 attention heads"
    odd = read_config({**config(L70), "num_attention_heads": 12, "num_key_value_heads": 4, "hidden_size": 1536})
    assert tp_refusal(odd, 6) == "TP 6 and the 4 KV heads: one must be a multiple of the other"
    with pytest.raises(FitError, match=r"^m: TP 3 does not divide the 64 attention heads$"):
        predict(read_config(config(L70), name="m"), 192 * GiB, ServeSettings(tp=3))


def test_partition_memory_follows_the_compute_mode():
    spx = partition_memory_bytes("MI300X", "SPX")
    assert spx == 196592 * MiB  # the driver's figure for 192 GB
    assert partition_memory_bytes("AMD Instinct MI300X", "DPX") == 98296 * MiB  # reference/amdsmi.md
    cpx = partition_memory_bytes("mi300x", "CPX")
    assert cpx == spx // 8 and round(cpx / GiB) == 24  # "one of its CPX partitions 24 GB"
    assert round(partition_memory_bytes("MI325X") / GiB) == 256 and round(partition_memory_bytes("MI355X") / GiB) == 288
    assert partition_memory_bytes("MI300X", "CPX", reported_mib=20000) == 20000 * MiB  # the device's figure wins
    with pytest.raises(FitError, match=r"^GPU 'H100': unknown, known are MI300X, MI325X, MI355X$"):
        partition_memory_bytes("H100")
    with pytest.raises(FitError, match=r"^compute partition 'TPX'"):
        partition_memory_bytes("MI300X", "TPX")


def test_gpu_table_agrees_with_the_simulator():
    for name, spec in GPU_SPECS.items():
        assert sim.MODELS[name].vram_mb == spec.memory_mib, name
        assert tuple(sim.MODELS[name].memory_caps) == spec.memory_modes, name


def test_vllm_batch_defaults_by_gpu_memory():
    assert default_batch(partition_memory_bytes("MI300X", "SPX")) == (16384, 1024)
    assert default_batch(partition_memory_bytes("MI300X", "DPX")) == (8192, 1024)
    assert default_batch(partition_memory_bytes("MI300X", "QPX")) == (2048, 256)
    assert default_batch(partition_memory_bytes("MI300X", "CPX")) == (2048, 256)


def test_the_budget_is_arithmetic_a_reader_can_redo():
    f = facts(L8)
    cpx = partition_memory_bytes("MI300X", "CPX")
    p = predict(f, cpx, ServeSettings(gpu_memory_utilization=0.9))
    budget = int(cpx * 0.9)
    weights = weights_per_gpu(f)
    forward = 2048 * 2 * (3 * 14336 + (32 + 2 * 8) * 128 + 2 * 4096)  # batched tokens x bf16 x widths
    sampler = 256 * 128256 * 20  # max_num_seqs x vocabulary x bytes per logit
    assert p.activation_bytes == max(forward, sampler) == sampler
    reserve = max(forward, sampler) + 1 * GiB + 1 * GiB  # + non-torch + graphs
    kv_bytes = budget - weights - reserve
    blocks = kv_bytes // (131072 * 16)
    assert (p.budget_bytes, p.reserve_bytes, p.kv.kv_cache_bytes) == (budget, reserve, kv_bytes)
    assert p.kv.tokens == blocks * 16
    assert p.concurrency(4608) == blocks / (4608 // 16)
    assert json.loads(json.dumps(p.as_dict()))["kv_cache_tokens"] == blocks * 16


def test_verdicts_and_their_lines():
    spx = partition_memory_bytes("MI300X", "SPX")
    cpx = partition_memory_bytes("MI300X", "CPX")
    big = predict(facts(L70), cpx)
    assert big.verdict is Verdict.WEIGHTS_TOO_BIG
    assert (
        big.line()
        == "does not fit (weights exceed memory): 131.4 GiB of weights per GPU, 21.6 GiB usable (24.0 GiB x 0.9)"
    )

    one = predict(facts(L70), spx)  # 131.4 GiB of weights leave room for ~118k tokens, not 131,072
    assert one.verdict is Verdict.FITS_SHORTER and one.largest_max_model_len == one.kv.tokens < 131072
    assert one.line().startswith(f"fits with max_model_len ≤ {one.kv.tokens:,} (the model's 131,072 does not): ")

    asked = predict(facts(L70), spx, ServeSettings(max_model_len=8192))
    assert asked.verdict is Verdict.FITS and "concurrency at 8,192 tokens" in asked.line()
    too_long = predict(facts(L70), spx, ServeSettings(max_model_len=131072, gpu_memory_utilization=0.8))
    assert too_long.verdict is Verdict.FITS_SHORTER and "(asked 131,072 does not)" in too_long.line()

    # weights load, but the reserve eats the rest: no block of KV cache is left
    tight = predict(facts(L8), weights_per_gpu(facts(L8)) + GiB, ServeSettings(gpu_memory_utilization=1.0))
    assert tight.verdict is Verdict.NO_KV_ROOM and tight.kv.tokens == 0
    assert tight.line().startswith("does not fit (no memory left for the KV cache): ")


def test_eager_mode_frees_the_graph_reserve():
    cpx = partition_memory_bytes("MI300X", "CPX")
    graphs, eager = predict(facts(L8), cpx), predict(facts(L8), cpx, ServeSettings(enforce_eager=True))
    assert eager.kv.kv_cache_bytes - graphs.kv.kv_cache_bytes == Reserve().graph_bytes


def test_weights_split_across_tp_with_norms_on_every_gpu():
    f = facts(L70)
    one, eight = weights_per_gpu(f, 1), weights_per_gpu(f, 8)
    norms = (2 * 80 + 1) * 8192 * 2  # bf16 norm weights, whole on each GPU
    assert eight * 8 - one == pytest.approx(7 * norms, abs=8)
    # 16 ranks over 8 KV heads: k/v projections are replicated, so more than half of TP 8's share
    assert weights_per_gpu(f, 16) > eight / 2


def test_on_the_fly_fp8_weighs_what_the_fp8_checkpoint_weighs():
    # --quantization fp8 on the bf16 checkpoint stores the linear layers in 1 byte, like AMD's FP8 export
    assert weights_per_gpu(facts(L70), quantization="fp8") == weights_per_gpu(facts(L70_FP8))
    assert weights_per_gpu(facts(L70_FP8), quantization="fp8") == weights_per_gpu(facts(L70_FP8))


def test_plan_table_lists_what_the_partition_rules_allow():
    rows = plan_table(facts(L8), "MI300X")
    modes = sorted({r.mode for r in rows})
    expected = sorted(
        f"{c}-{m}" for c in ("SPX", "DPX", "QPX", "CPX") for m in ("NPS1", "NPS4") if not compatibility_refusal(c, m)
    )
    assert modes == expected == ["CPX-NPS1", "CPX-NPS4", "DPX-NPS1", "QPX-NPS1", "QPX-NPS4", "SPX-NPS1"]
    by_mode = {m: [(r.tp, r.instances) for r in rows if r.mode == m] for m in modes}
    assert by_mode["SPX-NPS1"] == [(1, 8), (2, 4), (4, 2), (8, 1)]
    assert by_mode["DPX-NPS1"][-1] == (16, 1) and by_mode["QPX-NPS4"][-1] == (32, 1)
    assert by_mode["CPX-NPS1"] == [(1, 64)]  # CPX runs TP 1 only, 64 instances on 8 GPUs
    cpx = next(r for r in rows if r.mode == "CPX-NPS1")
    assert cpx.line().startswith("CPX-NPS1 TP 1 x64 (24.0 GiB/GPU): fits")

    mi355 = {r.mode for r in plan_table(facts(L8), "MI355X", physical_gpus=1)}
    assert mi355 == {"SPX-NPS1", "DPX-NPS1", "DPX-NPS2", "QPX-NPS1", "CPX-NPS1"}  # its memory modes: NPS1, NPS2


def test_plan_table_rows_a_tp_the_heads_cannot_split():
    odd = read_config({**config(L70), "num_attention_heads": 40, "num_key_value_heads": 8, "hidden_size": 5120})
    rows = [r for r in plan_table(odd, "MI300X") if r.mode == "DPX-NPS1"]
    assert [r.tp for r in rows if r.prediction is None] == [16]
    assert (
        rows[-1].line()
        == "DPX-NPS1 TP 16 x1 (96.0 GiB/GPU): not possible: TP 16 does not divide the 40 attention heads"
    )


def test_plan_table_uses_the_devices_reported_memory():
    rows = plan_table(facts(L8), "MI300X", reported_mib={"CPX": 20000})
    assert {r.gpu_memory_bytes for r in rows if r.compute == "CPX"} == {20000 * MiB}
    assert {r.gpu_memory_bytes for r in rows if r.compute == "SPX"} == {196592 * MiB}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (ServeSettings(gpu_memory_utilization=1.2), "gpu_memory_utilization 1.2: expected a fraction above 0"),
        (ServeSettings(gpu_memory_utilization=0), "gpu_memory_utilization 0: expected a fraction above 0"),
        (ServeSettings(kv_cache_dtype="fp4"), "--kv-cache-dtype 'fp4': expected auto or one of"),
        (ServeSettings(dtype="int8"), "--dtype 'int8': expected auto or one of"),
        (ServeSettings(tp=0), "TP 0: expected a positive integer"),
        (ServeSettings(max_model_len=0), "max_model_len 0: expected a positive integer"),
        (ServeSettings(block_size=-16), "block_size -16: expected a positive integer"),
    ],
)
def test_bad_settings_are_one_line_errors(settings, message):
    with pytest.raises(FitError) as err:
        predict(facts(L8), 192 * GiB, settings)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_bad_gpu_memory():
    with pytest.raises(FitError, match=r"^GPU memory -1: expected a positive number of bytes$"):
        predict(facts(L8), -1)
