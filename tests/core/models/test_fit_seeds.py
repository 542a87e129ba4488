"""The seeds' cases, predicted right: what the AMD guides run where must fit, what they say needs
more GPUs must not.

Each case quotes the seed (the test checks the quote is in the seed, so a case cannot drift
from its source), names the model's config.json fixture (tests/fixtures/models/INDEX.toml),
the partition and the flags the seed uses, and the verdict. `ARITHMETIC` redoes the headline
numbers by hand, from the parameter counts and the KV formula, for a reader to check.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from console.core.models.fit import GiB, ServeSettings, Verdict, partition_memory_bytes, plan_table, predict
from tests.core.models.fixtures import facts, seed_text

L8 = "amd--Llama-3.1-8B-Instruct-FP8-KV"
L70 = "meta-llama--Llama-3.1-70B-Instruct"
L70_FP8 = "amd--Llama-3.1-70B-Instruct-FP8-KV"
L405 = "amd--Llama-3.1-405B-Instruct-FP8-KV"


@dataclass(frozen=True)
class Case:
    id: str
    seed: str  # file name prefix in tests/fixtures/seeds
    quotes: tuple[str, ...]  # what the seed says, whitespace collapsed
    model: str  # fixture key
    gpu: str
    compute: str
    settings: ServeSettings
    verdict: Verdict


CASES = [
    Case(
        "8B FP8 on one CPX partition (seed's benchmark)",
        "000",
        (
            "Currently only CPX-NPS1 mode is supported. So ONLY tp=1 is supported in CPX mode.",
            "Example of running Llama3.1-8B on 1 CPX-NPS1 GPU with input 4096 and output 512.",
            "--max-model-len 4608 --num-scheduler-steps 10 --num-prompts 100 --model amd/Llama-3.1-8B-Instruct-FP8-KV"
            " --input-len 4096 --output-len 512 --dtype float16 --tensor-parallel-size 1",
            "--quantization fp8 --gpu-memory-utilization 0.99",
        ),
        L8,
        "MI300X",
        "CPX",
        # benchmark_throughput is vLLM's offline LLM class: 8192 batched tokens by default below 70 GiB
        ServeSettings(
            dtype="float16",
            quantization="fp8",
            max_model_len=4608,
            gpu_memory_utilization=0.99,
            max_num_batched_tokens=8192,
        ),
        Verdict.FITS,
    ),
    Case(
        "70B on one SPX MI300X, TP 1",
        "003",
        (
            "and Llama3‑70B can fit a single MI300X/MI355X",
            "vllm serve meta-llama/Llama-3.3-70B-Instruct --gpu-memory-utilization 0.95 --max-model-len 8192 --port 8000",
        ),
        L70,  # Llama 3.3 70B has Llama 3.1 70B's shape
        "MI300X",
        "SPX",
        ServeSettings(tp=1, gpu_memory_utilization=0.95, max_model_len=8192),
        Verdict.FITS,
    ),
    Case(
        "70B FP8 on SPX, TP 8 (seed's serving benchmark)",
        "000",
        (
            "vllm serve amd/Llama-3.1-70B-Instruct-FP8-KV --swap-space 16 --disable-log-requests --quantization fp8"
            " --kv-cache-dtype fp8 --dtype float16 --max-model-len 8192 --tensor-parallel-size 8"
            " --max-num-batched-tokens 65536 --gpu-memory-utilization 0.99",
        ),
        L70_FP8,
        "MI300X",
        "SPX",
        ServeSettings(
            tp=8,
            dtype="float16",
            kv_cache_dtype="fp8",
            max_model_len=8192,
            max_num_batched_tokens=65536,
            gpu_memory_utilization=0.99,
        ),
        Verdict.FITS,
    ),
    Case(
        "70B bf16 on SPX, TP 8 (the same benchmark with the FP16 model)",
        "000",
        (
            "--max-model-len 8192 --tensor-parallel-size 8 --max-num-batched-tokens 65536 --gpu-memory-utilization 0.99",
            "For FP16 models, remove `--kv-cache-dtype fp8`. Change port",
        ),
        L70,
        "MI300X",
        "SPX",
        ServeSettings(
            tp=8, dtype="float16", max_model_len=8192, max_num_batched_tokens=65536, gpu_memory_utilization=0.99
        ),
        Verdict.FITS,
    ),
    Case(
        "70B on SPX, TP 4 (seed 004)",
        "004",
        (
            "VLLM_USE_TRITON_FLASH_ATTN=0 vllm serve -tp 4 meta-llama/Llama-3.1-70B-Instruct --gpu_memory_utiliz ation=0.98",
        ),
        L70,
        "MI300X",
        "SPX",
        ServeSettings(tp=4, gpu_memory_utilization=0.98),
        Verdict.FITS,
    ),
    Case(
        "405B FP8 on one 8xMI300X node, throughput benchmark",
        "000",
        (
            "MODEL=amd/Llama-3.1-405B-Instruct-FP8-KV IN=128 OUT=2048 TP=8 PROMPTS=1500 MAX_NUM_SEQS=1500",
            "--kv-cache-dtype fp8 --dtype float16 --disable-detokenize --gpu-memory-utilization 0.9 --trust-remote-code"
            " --model $MODEL --max-model-len 8192 --max-num-batched-tokens 131072",
        ),
        L405,
        "MI300X",
        "SPX",
        ServeSettings(
            tp=8,
            dtype="float16",
            kv_cache_dtype="fp8",
            max_model_len=8192,
            max_num_batched_tokens=131072,
            max_num_seqs=1500,
            gpu_memory_utilization=0.9,
        ),
        Verdict.FITS,
    ),
    Case(
        "405B FP8, TP 8, speculative-decoding run's context",
        "000",
        ("--model amd/Llama-3.1-405B-Instruct-FP8-KV --max-model-len 26720 -tp 8",),
        L405,
        "MI300X",
        "SPX",
        ServeSettings(tp=8, max_model_len=26720),
        Verdict.FITS,
    ),
    Case(
        "405B FP8 on one node, TP 8, the whole context",
        "003",
        ("Llama3.1‑405B fits on a single 8×MI300X/MI355X node",),
        L405,
        "MI300X",
        "SPX",
        ServeSettings(tp=8),
        Verdict.FITS,
    ),
    Case(
        "405B FP8 does not fit two MI300X",
        "003",
        ("Llama3.1‑405B fits on a single 8×MI300X/MI355X node",),
        L405,
        "MI300X",
        "SPX",
        ServeSettings(tp=2),
        Verdict.WEIGHTS_TOO_BIG,
    ),
    Case(
        "70B does not fit a CPX partition",
        "000",
        ("Currently only CPX-NPS1 mode is supported. So ONLY tp=1 is supported in CPX mode.",),
        L70,
        "MI300X",
        "CPX",
        ServeSettings(),
        Verdict.WEIGHTS_TOO_BIG,
    ),
    Case(
        "405B FP8 on one 8xMI355X node (288 GB each)",
        "003",
        ("Llama3.1‑405B fits on a single 8×MI300X/MI355X node",),
        L405,
        "MI355X",
        "SPX",
        ServeSettings(tp=8),
        Verdict.FITS,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_seed_case(case: Case):
    text = seed_text(case.seed)
    for quote in case.quotes:
        assert quote in text, f"seed {case.seed} no longer says: {quote}"
    p = predict(facts(case.model), partition_memory_bytes(case.gpu, case.compute), case.settings)
    assert p.verdict is case.verdict, p.line()
    if case.verdict is Verdict.FITS:
        wanted = p.engine_max_model_len
        assert wanted is not None and p.kv.tokens >= wanted and p.concurrency() >= 1, p.line()


# (case id, weights GiB per GPU from the parameter count, usable GiB, KV bytes per token per GPU)
ARITHMETIC = [
    # 8B: 6,979,321,856 linear params in 1 byte + 1,050,673,152 embedding/lm_head params in 2 bytes
    # (+ norms); 24 GiB x 0.99; fp16 KV: 2 x 32 layers x 8 heads x 128 x 2 bytes
    (CASES[0].id, (6_979_321_856 + 2 * 1_050_673_152) / GiB, 24.0 * 0.99, 2 * 32 * 8 * 128 * 2),
    # 70B: 70,553,706,496 params x 2 bytes; 192 GiB x 0.95; 2 x 80 x 8 x 128 x 2
    (CASES[1].id, 70_553_706_496 * 2 / GiB, 192.0 * 0.95, 2 * 80 * 8 * 128 * 2),
    # 70B FP8 / 8: (68,451,041,280 x 1 + 2,101,346,304 x 2) / 8; fp8 KV, one head per GPU: 2 x 80 x 1 x 128 x 1
    (CASES[2].id, (68_451_041_280 + 2 * 2_101_346_304) / 8 / GiB, 192.0 * 0.99, 2 * 80 * 1 * 128 * 1),
    # 405B FP8 / 8: (401,646,551,040 linear params x 1 + 4,202,692,608 x 2) / 8; fp8 KV: 2 x 126 x 1 x 128 x 1
    (CASES[5].id, (405_853_388_800 - 4_202_692_608 + 2 * 4_202_692_608) / 8 / GiB, 192.0 * 0.9, 2 * 126 * 128),
    # 405B FP8 / 2: about 191 GiB of weights per GPU, more than 172.8 usable
    (CASES[8].id, (405_853_388_800 + 4_202_692_608) / 2 / GiB, 192.0 * 0.9, 2 * 126 * 4 * 128 * 2),
]


@pytest.mark.parametrize(("case_id", "weights_gib", "usable_gib", "kv_per_token"), ARITHMETIC)
def test_seed_case_arithmetic(case_id, weights_gib, usable_gib, kv_per_token):
    case = next(c for c in CASES if c.id == case_id)
    p = predict(facts(case.model), partition_memory_bytes(case.gpu, case.compute), case.settings)
    assert p.weight_bytes / GiB == pytest.approx(weights_gib, rel=1e-3)  # norms are the only difference
    assert p.budget_bytes / GiB == pytest.approx(usable_gib, rel=1e-3)
    assert p.kv_bytes_per_token == kv_per_token
    assert (p.weight_bytes < p.budget_bytes) is (case.verdict is not Verdict.WEIGHTS_TOO_BIG)


def test_which_node_layouts_hold_405b():
    """Before switching modes: on one 8xMI300X node 405B FP8 runs at TP 4 or 8 in SPX, nowhere in CPX."""
    rows = plan_table(facts(L405), "MI300X", physical_gpus=8)
    fits = {
        (r.mode, r.tp) for r in rows if r.prediction is not None and r.prediction.verdict is not Verdict.WEIGHTS_TOO_BIG
    }
    assert ("SPX-NPS1", 8) in fits and ("SPX-NPS1", 4) in fits
    assert ("SPX-NPS1", 1) not in fits and ("SPX-NPS1", 2) not in fits
    assert not any(mode.startswith("CPX") for mode, _ in fits)


def test_which_node_layouts_hold_8b_fp8():
    """The 8B FP8 model fits every layout, a CPX partition too, 64 instances per node."""
    rows = plan_table(facts(L8), "MI300X", physical_gpus=8)
    assert all(r.prediction is not None and r.prediction.verdict in (Verdict.FITS, Verdict.FITS_SHORTER) for r in rows)
    cpx = [r for r in rows if r.compute == "CPX"]
    assert {r.instances for r in cpx} == {64}
    for r in cpx:  # 24 GiB hold fewer than the model's 131,072 tokens, but far more than the seed's 4,608
        assert r.prediction is not None and 4608 < r.prediction.largest_max_model_len < 131072


def test_70b_needs_tp_8_for_its_whole_context():
    """A prediction beyond the seeds: at TP 1 the KV cache holds fewer than 131,072 tokens, at TP 8 many times that."""
    spx = partition_memory_bytes("MI300X", "SPX")
    one, eight = (predict(facts(L70), spx, ServeSettings(tp=tp)) for tp in (1, 8))
    assert one.verdict is Verdict.FITS_SHORTER and 8192 < one.largest_max_model_len < 131072
    assert eight.verdict is Verdict.FITS and eight.concurrency(131072) > 10
