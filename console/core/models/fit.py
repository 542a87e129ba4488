"""Will it fit? Weight memory, KV-cache capacity and the largest max_model_len, per GPU.

The model (docs/models.md has it with worked numbers) follows how vLLM 0.32 sizes
its KV cache on a GPU (`gpu_worker.determine_available_memory`):

    budget   = GPU memory x gpu_memory_utilization
    kv bytes = budget - weights/GPU - activation peak - non-torch memory - graph memory
    blocks   = kv bytes // (KV bytes per token x block size);  tokens = blocks x block size

* weights/GPU: the real checkpoint size when known (safetensors index), split the way
  tensor parallelism splits it; else estimated from the shapes at the stored bits.
* KV bytes per token (per GPU) = 2 x layers x KV heads on the GPU x head size x KV bytes;
  the KV heads are split across TP ranks, one whole head per rank when there are fewer
  KV heads than ranks (replicated). fp8 KV is 1 byte, so it halves bf16's.
* activation peak: vLLM profiles it with a dummy batch; here it is the larger of the
  forward pass (max_num_batched_tokens x (3 x MLP width/TP + q/k/v width/TP + 2 x hidden)
  x activation bytes) and the sampler (max_num_seqs x vocabulary x bytes per logit).
* non-torch memory (runtime, RCCL buffers) and graph memory are fixed reserves (`Reserve`).

What vLLM logs, "GPU KV cache size: N tokens, Maximum concurrency for L tokens per
request: C x", is C = blocks / ceil(L / block size) and N = int(C x L): `KvCapacity`
computes both, so a prediction can be paired with the logged figures (`compare`).

On vLLM-CPU the KV cache is VLLM_CPU_KVCACHE_SPACE GiB, nothing is profiled, and the
block size is 128 (`predict_cpu`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from console.core.models.config import DTYPE_BYTES, ModelFacts
from console.core.partition_rules import COMPUTE_MODES, LOGICAL_PER_PHYSICAL, MEMORY_MODES, compatibility_refusal
from console.core.serve.log import FatalLine, StageReached, parse_serve_line
from console.core.serve.rules import check_cpx_tp

__all__ = [
    "CPU_BLOCK_SIZE",
    "GPU_SPECS",
    "FitComparison",
    "FitError",
    "FitPrediction",
    "GpuSpec",
    "KV_DTYPE_BYTES",
    "KvCapacity",
    "LoggedKv",
    "PlanRow",
    "Reserve",
    "ServeSettings",
    "Verdict",
    "compare",
    "default_batch",
    "gpu_spec",
    "kv_bytes_per_token",
    "logged_kv",
    "partition_memory_bytes",
    "plan_table",
    "predict",
    "predict_cpu",
    "tp_refusal",
    "weights_per_gpu",
]

GiB = 1 << 30
MiB = 1 << 20
CPU_BLOCK_SIZE = 128  # vLLM-CPU's default block size (platforms/cpu.py) when none is given


class FitError(ValueError):
    """A setting a plan cannot use (unknown dtype, utilization out of range, ...). One line."""


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One physical GPU: its memory as the driver reports it, and its memory partition modes."""

    name: str
    memory_mib: int
    memory_modes: tuple[str, ...]


# Driver-reported VRAM of one physical GPU (amd-smi `vram_total`, MiB): a little under the
# marketing 192/256/288 GB. MI300X: reference/amdsmi.md gives DPX 98296 MB per partition
# (x2 = 196592) and CPX 24 GB; the simulator (console/sim/amdsmi.py) uses the same figures,
# which tests/core/models/test_fit.py checks. Memory modes: amdsmi.md §4 and the simulator.
GPU_SPECS: Mapping[str, GpuSpec] = {
    "MI300X": GpuSpec("MI300X", 196592, ("NPS1", "NPS4")),
    "MI325X": GpuSpec("MI325X", 262128, ("NPS1", "NPS4")),
    "MI355X": GpuSpec("MI355X", 294896, ("NPS1", "NPS2")),
}

# Bytes per element of a KV-cache dtype (vLLM's --kv-cache-dtype names).
KV_DTYPE_BYTES: Mapping[str, int] = {
    **DTYPE_BYTES,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "int8": 1,
}

# --quantization values that store an unquantized checkpoint's linear layers in 8 bits on load.
_ON_THE_FLY_8BIT = ("fp8", "ptpc_fp8", "fp8_pertensor", "experts_int8")


def gpu_spec(name: str | GpuSpec) -> GpuSpec:
    """'MI300X', 'mi300x' or 'AMD Instinct MI300X' -> its GpuSpec; FitError naming the rest."""
    if isinstance(name, GpuSpec):
        return name
    key = name.upper().replace("AMD INSTINCT", "").replace(" ", "")
    if key not in GPU_SPECS:
        raise FitError(f"GPU {name!r}: unknown, known are {', '.join(GPU_SPECS)}")
    return GPU_SPECS[key]


def partition_memory_bytes(gpu: str | GpuSpec, compute: str = "SPX", *, reported_mib: float | None = None) -> int:
    """Memory of one logical GPU in a compute partition mode (the device's own figure wins).

    Each mode splits the physical GPU's memory evenly (SPX 1, DPX 2, QPX 4, CPX 8 logical GPUs):
    an MI300X CPX partition has 24 GiB whether the memory mode is NPS1 or NPS4.
    """
    if reported_mib is not None:
        if reported_mib <= 0:
            raise FitError(f"reported GPU memory {reported_mib} MiB: expected a positive size")
        return int(reported_mib * MiB)
    spec = gpu_spec(gpu)
    per = LOGICAL_PER_PHYSICAL.get(compute.upper())
    if per is None:
        raise FitError(f"compute partition {compute!r}: expected one of {', '.join(COMPUTE_MODES)}")
    return spec.memory_mib * MiB // per


@dataclass(frozen=True, slots=True)
class Reserve:
    """GPU memory vLLM keeps besides weights and KV cache, beyond the modelled activation peak.

    Defaults (bytes per GPU) are round figures, not measurements on MI300X: vLLM's own memory
    profile printed 1.79 GiB non-torch memory at TP 1 and 3.58 GiB at TP 2 on an H100
    (vllm-project/vllm PR 10511); graph capture typically takes 0.5-1.5 GiB and vLLM 0.32
    subtracts its estimate from the KV cache unless --enforce-eager. The comparison with
    vLLM's logged figures after a start says how far off they are.
    """

    non_torch_bytes: int = 1 * GiB  # TP 1: the HIP runtime and libraries' own buffers
    non_torch_bytes_tp: int = 2 * GiB  # TP > 1: plus RCCL and the custom all-reduce buffers
    graph_bytes: int = 1 * GiB  # HIP graphs (0 with --enforce-eager)
    sampler_bytes_per_logit: int = 20  # fp32 logits + probabilities + sorted copy + int64 indices

    def non_torch(self, tp: int) -> int:
        return self.non_torch_bytes if tp == 1 else self.non_torch_bytes_tp


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """The `vllm serve` flags a fit depends on; None = vLLM's default."""

    tp: int = 1
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None  # None: vLLM 0.32's default for the GPU's memory
    max_num_seqs: int | None = None
    block_size: int = 16
    quantization: str | None = None  # --quantization (fp8 / ptpc_fp8 quantize a bf16 checkpoint on load)
    enforce_eager: bool = False


def default_batch(gpu_memory_bytes: int) -> tuple[int, int]:
    """vLLM 0.32's serving defaults (max_num_batched_tokens, max_num_seqs) for a GPU this size.

    engine/arg_utils.py get_batch_defaults: >= 160 GiB 16384/1024, >= 70 GiB 8192/1024,
    else 2048/256 (so an MI300X in SPX gets 16384, in DPX 8192, in QPX and CPX 2048).
    """
    if gpu_memory_bytes >= 160 * GiB:
        return 16384, 1024
    if gpu_memory_bytes >= 70 * GiB:
        return 8192, 1024
    return 2048, 256


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FitError(f"{what} {value!r}: expected a positive integer")
    return value


def _resolve_dtype(facts: ModelFacts, dtype: str) -> str:
    """vLLM's --dtype auto: the checkpoint's dtype, float32 checkpoints served in bfloat16."""
    if dtype == "auto":
        return "bfloat16" if facts.dtype == "float32" else facts.dtype
    if dtype not in DTYPE_BYTES:
        raise FitError(f"--dtype {dtype!r}: expected auto or one of {', '.join(DTYPE_BYTES)}")
    return dtype


def _resolve_kv_dtype(facts: ModelFacts, kv_cache_dtype: str, dtype: str) -> str:
    if kv_cache_dtype == "auto":
        # auto is the model dtype, except ModelOpt checkpoints that declare fp8 KV (vLLM 0.32)
        return "fp8" if facts.quantization is not None and facts.quantization.kv_auto_fp8 else dtype
    if kv_cache_dtype not in KV_DTYPE_BYTES:
        raise FitError(f"--kv-cache-dtype {kv_cache_dtype!r}: expected auto or one of {', '.join(KV_DTYPE_BYTES)}")
    return kv_cache_dtype


def tp_refusal(facts: ModelFacts, tp: int) -> str | None:
    """Why vLLM cannot shard this model over `tp` GPUs (heads must split evenly), or None."""
    heads, kv = facts.num_attention_heads, facts.num_kv_heads
    if heads % tp:
        return f"TP {tp} does not divide the {heads} attention heads"
    if not facts.is_mla and (kv % tp if kv >= tp else tp % kv):
        return f"TP {tp} and the {kv} KV heads: one must be a multiple of the other"
    return None


def _kv_heads_per_gpu(facts: ModelFacts, tp: int) -> int:
    # fewer KV heads than ranks: each rank keeps one whole head (replicated)
    return max(1, facts.num_kv_heads // tp)


def kv_bytes_per_token(facts: ModelFacts, tp: int, kv_cache_dtype: str) -> int:
    """KV-cache bytes one token takes on one GPU (2 x layers x KV heads/GPU x head size x bytes).

    Multi-head latent attention caches one latent per token and layer, on every GPU alike.
    """
    size = KV_DTYPE_BYTES[kv_cache_dtype]
    if facts.is_mla:
        return facts.num_layers * (facts.kv_lora_rank + facts.qk_rope_head_dim) * size
    return 2 * facts.num_layers * _kv_heads_per_gpu(facts, tp) * facts.head_dim * size


def _stored_bits(facts: ModelFacts, dtype: str, quantization: str | None) -> float | None:
    """Bits per linear weight in GPU memory: the checkpoint's quantization, else on-the-fly, else dtype."""
    if facts.quantization is not None:
        return facts.quantization.bits_per_weight
    if quantization in _ON_THE_FLY_8BIT:
        return 8.0
    return 8.0 * DTYPE_BYTES[dtype]


def _weights_on_rank(facts: ModelFacts, tp: int, linear_bits: float, dtype: str) -> float:
    parts = facts.param_parts()
    kv_share = _kv_heads_per_gpu(facts, tp) / facts.num_kv_heads
    linear = parts.split_linear / tp + parts.kv_linear * kv_share + parts.replicated_linear
    other = parts.embeddings / tp + parts.replicated
    return linear * linear_bits / 8 + other * DTYPE_BYTES[dtype]


def weights_per_gpu(facts: ModelFacts, tp: int = 1, dtype: str = "auto", quantization: str | None = None) -> int:
    """Weight bytes on each of `tp` GPUs.

    With the checkpoint's real size known, that size is split the way the estimate splits
    (layers 1/TP, KV heads whole, norms on every GPU) and scaled from the stored to the
    served format (a float32 checkpoint served in bfloat16 takes half).
    """
    tp = _positive_int(tp, "TP")
    dtype = _resolve_dtype(facts, dtype)
    bits = _stored_bits(facts, dtype, quantization)
    if bits is None:
        method = facts.quantization.method if facts.quantization else "?"
        if facts.weight_bytes is None:
            raise FitError(
                f"{facts.name}: quant_method {method!r}: its bits per weight are unknown here;"
                " give the weights' real size (safetensors index total_size)"
            )
        return math.ceil(facts.weight_bytes / tp)
    served = _weights_on_rank(facts, tp, bits, dtype)
    if facts.weight_bytes is None:
        return math.ceil(served)
    stored_bits = facts.quantization.bits_per_weight if facts.quantization else 8.0 * DTYPE_BYTES[facts.dtype]
    assert stored_bits is not None  # bits is not None above, and it came from the same quantization
    stored = _weights_on_rank(facts, 1, stored_bits, facts.dtype)
    return math.ceil(facts.weight_bytes * served / stored)


def _activation_bytes(facts: ModelFacts, tp: int, dtype: str, tokens: int, seqs: int, reserve: Reserve) -> int:
    """The profiled peak: the larger of the forward pass and the sampler's (they do not overlap)."""
    act = DTYPE_BYTES[dtype]
    dense = 3 * facts.intermediate_size if (not facts.is_moe or facts.dense_layers) else 0
    moe = 3 * (facts.experts_per_token * facts.moe_intermediate_size + facts.shared_expert_intermediate_size)
    mlp = max(dense, moe if facts.is_moe else 0) / tp
    if facts.is_mla:
        qkv = facts.num_attention_heads / tp * (facts.qk_nope_head_dim + facts.qk_rope_head_dim + facts.v_head_dim)
        qkv += facts.kv_lora_rank + facts.qk_rope_head_dim
    else:
        qkv = (facts.num_attention_heads / tp + 2 * _kv_heads_per_gpu(facts, tp)) * facts.head_dim
    forward = tokens * act * (mlp + qkv + 2 * facts.hidden_size)
    sampler = seqs * facts.vocab_size * reserve.sampler_bytes_per_logit  # full vocabulary: logits are gathered
    return math.ceil(max(forward, sampler))


# ---------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class KvCapacity:
    """A KV cache of `kv_cache_bytes`, cut in blocks, and what vLLM would log about it."""

    kv_cache_bytes: int
    kv_bytes_per_token: int  # on one GPU
    block_size: int
    max_model_len: int | None  # the engine's: what the log line's "for L tokens" names

    @property
    def blocks(self) -> int:
        if self.kv_cache_bytes <= 0:
            return 0
        return self.kv_cache_bytes // (self.kv_bytes_per_token * self.block_size)

    @property
    def tokens(self) -> int:
        """Tokens the whole cache holds (every block full)."""
        return self.blocks * self.block_size

    def concurrency(self, context: int | None = None) -> float | None:
        """Requests of `context` tokens that fit at once (vLLM: blocks / ceil(L / block))."""
        length = context if context is not None else self.max_model_len
        if length is None or length <= 0:
            return None
        return self.blocks / math.ceil(length / self.block_size)

    def logged_tokens(self, context: int | None = None) -> int | None:
        """The figure vLLM 0.32 prints as "KV cache size: N tokens" (int(concurrency x L))."""
        length = context if context is not None else self.max_model_len
        factor = self.concurrency(length)
        if factor is None or length is None:
            return None
        return int(factor * length)


class Verdict(Enum):
    FITS = "fits"
    FITS_SHORTER = "fits with a shorter max_model_len"
    NO_KV_ROOM = "does not fit: no memory left for the KV cache"
    WEIGHTS_TOO_BIG = "does not fit: weights exceed memory"


def _gib(value: float) -> str:
    return f"{value / GiB:.1f}"


@dataclass(frozen=True, slots=True)
class FitPrediction:
    """One model on `tp` GPUs of `gpu_memory_bytes` each, with the serve settings applied."""

    model: str
    tp: int
    gpu_memory_bytes: int
    gpu_memory_utilization: float
    dtype: str
    kv_cache_dtype: str
    weight_bytes: int  # per GPU
    activation_bytes: int
    non_torch_bytes: int
    graph_bytes: int
    kv_bytes_per_token: int  # per GPU
    block_size: int
    max_num_batched_tokens: int
    max_num_seqs: int
    model_max_len: int | None  # what config.json allows
    requested_max_model_len: int | None = None

    @property
    def budget_bytes(self) -> int:
        return int(self.gpu_memory_bytes * self.gpu_memory_utilization)

    @property
    def reserve_bytes(self) -> int:
        return self.activation_bytes + self.non_torch_bytes + self.graph_bytes

    @property
    def kv(self) -> KvCapacity:
        budget = self.budget_bytes - self.weight_bytes - self.reserve_bytes
        return KvCapacity(budget, self.kv_bytes_per_token, self.block_size, self.engine_max_model_len)

    @property
    def engine_max_model_len(self) -> int | None:
        return self.requested_max_model_len if self.requested_max_model_len is not None else self.model_max_len

    @property
    def largest_max_model_len(self) -> int:
        """The longest context one request can have: the KV cache's tokens, capped by the model's."""
        tokens = self.kv.tokens
        return min(tokens, self.model_max_len) if self.model_max_len is not None else tokens

    @property
    def verdict(self) -> Verdict:
        if self.weight_bytes >= self.budget_bytes:
            return Verdict.WEIGHTS_TOO_BIG
        if self.kv.blocks == 0:
            return Verdict.NO_KV_ROOM
        wanted = self.engine_max_model_len
        if wanted is not None and wanted > self.largest_max_model_len:
            return Verdict.FITS_SHORTER
        return Verdict.FITS

    def concurrency(self, context: int | None = None) -> float | None:
        return self.kv.concurrency(context)

    def line(self) -> str:
        """The verdict in one line a person reads before starting."""
        verdict, kv = self.verdict, self.kv
        usable = f"{_gib(self.gpu_memory_bytes)} GiB x {self.gpu_memory_utilization:g}"
        if verdict is Verdict.WEIGHTS_TOO_BIG:
            return (
                f"does not fit (weights exceed memory): {_gib(self.weight_bytes)} GiB of weights per GPU,"
                f" {_gib(self.budget_bytes)} GiB usable ({usable})"
            )
        if verdict is Verdict.NO_KV_ROOM:
            return (
                f"does not fit (no memory left for the KV cache): {_gib(self.budget_bytes)} GiB usable ({usable})"
                f" - {_gib(self.weight_bytes)} GiB weights - {_gib(self.reserve_bytes)} GiB reserve"
            )
        head = (
            f"{_gib(self.weight_bytes)} GiB weights/GPU, KV cache {kv.tokens:,} tokens ({_gib(kv.kv_cache_bytes)} GiB)"
        )
        if verdict is Verdict.FITS_SHORTER:
            wanted = self.engine_max_model_len
            whose = "asked" if self.requested_max_model_len is not None else "the model's"
            return f"fits with max_model_len ≤ {self.largest_max_model_len:,} ({whose} {wanted:,} does not): {head}"
        length = self.engine_max_model_len
        if length is None:
            return f"fits: {head}"
        return f"fits: {head}, {kv.concurrency(length):.2f}x concurrency at {length:,} tokens"

    def as_dict(self) -> dict[str, Any]:
        """Plain values for --json: inputs, the parts of the budget, and the results."""
        kv = self.kv
        return {
            "model": self.model,
            "tp": self.tp,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "dtype": self.dtype,
            "kv_cache_dtype": self.kv_cache_dtype,
            "weight_bytes_per_gpu": self.weight_bytes,
            "activation_bytes": self.activation_bytes,
            "non_torch_bytes": self.non_torch_bytes,
            "graph_bytes": self.graph_bytes,
            "kv_cache_bytes": kv.kv_cache_bytes,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "block_size": self.block_size,
            "kv_cache_tokens": kv.tokens,
            "model_max_len": self.model_max_len,
            "max_model_len": self.engine_max_model_len,
            "largest_max_model_len": self.largest_max_model_len,
            "max_concurrency": kv.concurrency(),
            "verdict": self.verdict.name.lower(),
            "line": self.line(),
        }


def _check_settings(s: ServeSettings) -> None:
    _positive_int(s.tp, "TP")
    _positive_int(s.block_size, "block_size")
    util = s.gpu_memory_utilization
    if isinstance(util, bool) or not isinstance(util, int | float) or not 0 < util <= 1:
        raise FitError(f"gpu_memory_utilization {util!r}: expected a fraction above 0 and at most 1")
    for value, what in (
        (s.max_model_len, "max_model_len"),
        (s.max_num_batched_tokens, "max_num_batched_tokens"),
        (s.max_num_seqs, "max_num_seqs"),
    ):
        if value is not None:
            _positive_int(value, what)


def predict(
    facts: ModelFacts,
    gpu_memory_bytes: int,
    settings: ServeSettings | None = None,
    reserve: Reserve | None = None,
) -> FitPrediction:
    """The fit of `facts` on settings.tp GPUs of `gpu_memory_bytes` each (see the module doc).

    FitError (one line) for a setting it cannot use, a TP the model's heads cannot split
    over, or a quantization whose size is unknown without the checkpoint's real size.
    """
    settings = settings if settings is not None else ServeSettings()
    reserve = reserve if reserve is not None else Reserve()
    _check_settings(settings)
    if isinstance(gpu_memory_bytes, bool) or not isinstance(gpu_memory_bytes, int) or gpu_memory_bytes <= 0:
        raise FitError(f"GPU memory {gpu_memory_bytes!r}: expected a positive number of bytes")
    tp = settings.tp
    why = tp_refusal(facts, tp)
    if why:
        raise FitError(f"{facts.name}: {why}")
    dtype = _resolve_dtype(facts, settings.dtype)
    kv_dtype = _resolve_kv_dtype(facts, settings.kv_cache_dtype, dtype)
    tokens, seqs = default_batch(gpu_memory_bytes)
    tokens = settings.max_num_batched_tokens or tokens
    seqs = settings.max_num_seqs or seqs
    return FitPrediction(
        model=facts.name,
        tp=tp,
        gpu_memory_bytes=gpu_memory_bytes,
        gpu_memory_utilization=float(settings.gpu_memory_utilization),
        dtype=dtype,
        kv_cache_dtype=kv_dtype,
        weight_bytes=weights_per_gpu(facts, tp, dtype, settings.quantization),
        activation_bytes=_activation_bytes(facts, tp, dtype, tokens, seqs, reserve),
        non_torch_bytes=reserve.non_torch(tp),
        graph_bytes=0 if settings.enforce_eager else reserve.graph_bytes,
        kv_bytes_per_token=kv_bytes_per_token(facts, tp, kv_dtype),
        block_size=settings.block_size,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        model_max_len=facts.max_position_embeddings,
        requested_max_model_len=settings.max_model_len,
    )


def predict_cpu(
    facts: ModelFacts,
    *,
    kvcache_space_gib: int,
    dtype: str = "auto",
    kv_cache_dtype: str = "auto",
    max_model_len: int | None = None,
    block_size: int = CPU_BLOCK_SIZE,
) -> KvCapacity:
    """vLLM-CPU's KV cache: VLLM_CPU_KVCACHE_SPACE GiB (an integer, as vLLM reads it), TP 1.

    Nothing is profiled on CPU: the whole space is the cache, cut in blocks of 128 tokens.
    """
    space = _positive_int(kvcache_space_gib, "VLLM_CPU_KVCACHE_SPACE")
    _positive_int(block_size, "block_size")
    if max_model_len is not None:
        _positive_int(max_model_len, "max_model_len")
    served = _resolve_dtype(facts, dtype)
    kv_dtype = _resolve_kv_dtype(facts, kv_cache_dtype, served)
    length = max_model_len if max_model_len is not None else facts.max_position_embeddings
    return KvCapacity(space * GiB, kv_bytes_per_token(facts, 1, kv_dtype), block_size, length)


# ---------------------------------------------------------------- the plan table


@dataclass(frozen=True, slots=True)
class PlanRow:
    """One partition mode x TP of a node: how many such instances fit, and each one's fit."""

    compute: str
    memory: str
    tp: int
    instances: int  # how many instances of this TP the node's logical GPUs hold at once
    gpu_memory_bytes: int
    prediction: FitPrediction | None
    refusal: str | None = None  # why this TP cannot run the model at all

    @property
    def mode(self) -> str:
        return f"{self.compute}-{self.memory}"

    def line(self) -> str:
        what = self.prediction.line() if self.prediction is not None else f"not possible: {self.refusal}"
        return f"{self.mode} TP {self.tp} x{self.instances} ({_gib(self.gpu_memory_bytes)} GiB/GPU): {what}"


def plan_table(
    facts: ModelFacts,
    gpu: str | GpuSpec = "MI300X",
    *,
    physical_gpus: int = 8,
    memory_modes: Sequence[str] | None = None,
    settings: ServeSettings | None = None,
    reserve: Reserve | None = None,
    reported_mib: Mapping[str, float] | None = None,
) -> list[PlanRow]:
    """Every partition mode x TP the node allows, each with its fit.

    Modes: each compute mode with each memory mode the GPU supports that the partition
    rules accept (SPX-NPS1, DPX-NPS1/NPS2, QPX-NPS1/NPS4, CPX-NPS1/NPS4). TP: powers of
    two up to the node's logical GPUs in that mode, TP 1 only in CPX (serve_rules). The
    row's GPU memory is the device's reported figure for that compute mode when given
    (`reported_mib`, e.g. {"SPX": 196592}), else the GPU's memory split by the mode.
    settings.tp is replaced by each row's TP; the rest applies to every row.
    """
    spec = gpu_spec(gpu)
    settings = settings if settings is not None else ServeSettings()
    physical_gpus = _positive_int(physical_gpus, "physical GPUs")
    modes = tuple(memory_modes) if memory_modes is not None else spec.memory_modes
    rows: list[PlanRow] = []
    for compute in COMPUTE_MODES:
        logical = physical_gpus * LOGICAL_PER_PHYSICAL[compute]
        reported = (reported_mib or {}).get(compute)
        memory = partition_memory_bytes(spec, compute, reported_mib=reported)
        tps = [1 << i for i in range(logical.bit_length()) if 1 << i <= logical]
        tps = [tp for tp in tps if check_cpx_tp(tp, [compute]) is None]
        for nps in MEMORY_MODES:
            if nps not in modes or compatibility_refusal(compute, nps, modes) is not None:
                continue
            for tp in tps:
                why = tp_refusal(facts, tp)
                prediction = None if why else predict(facts, memory, replace(settings, tp=tp), reserve)
                rows.append(PlanRow(compute, nps, tp, logical // tp, memory, prediction, why))
    return rows


# ---------------------------------------------------------------- prediction vs vLLM's log


@dataclass(frozen=True, slots=True)
class LoggedKv:
    """What vLLM's startup log said about its KV cache (None: not said)."""

    tokens: int | None = None
    concurrency: float | None = None
    context: int | None = None  # the "for L tokens per request" of the concurrency line


def logged_kv(lines: Iterable[str]) -> LoggedKv:
    """The KV-cache lines of a `vllm serve` log, read by serve_log's parser (the last one wins)."""
    tokens = context = None
    factor = None
    for line in lines:
        event = parse_serve_line(line)
        if isinstance(event, FatalLine) or not isinstance(event, StageReached):
            continue
        if event.kv_tokens is not None:
            tokens = event.kv_tokens
        if event.max_concurrency is not None:
            factor = event.max_concurrency
            context = event.concurrency_tokens
    return LoggedKv(tokens, factor, context)


def _error_pct(predicted: float | None, logged: float | None) -> float | None:
    if predicted is None or logged is None or logged == 0:
        return None
    return (predicted - logged) / logged * 100.0


@dataclass(frozen=True, slots=True)
class FitComparison:
    """A prediction beside vLLM's own figures, with the error in percent of the logged value."""

    context: int | None
    predicted_tokens: int | None
    logged_tokens: int | None
    predicted_concurrency: float | None
    logged_concurrency: float | None

    @property
    def tokens_error_pct(self) -> float | None:
        return _error_pct(self.predicted_tokens, self.logged_tokens)

    @property
    def concurrency_error_pct(self) -> float | None:
        return _error_pct(self.predicted_concurrency, self.logged_concurrency)

    def line(self) -> str:
        def part(label: str, predicted: Any, logged: Any, err: float | None, fmt: str) -> str:
            p = format(predicted, fmt) if predicted is not None else "?"
            g = format(logged, fmt) if logged is not None else "not logged"
            e = f" ({err:+.1f} %)" if err is not None else ""
            return f"{label}: predicted {p}, vLLM {g}{e}"

        at = f" at {self.context:,} tokens" if self.context is not None else ""
        return "; ".join(
            (
                part("KV cache tokens", self.predicted_tokens, self.logged_tokens, self.tokens_error_pct, ","),
                part(
                    f"max concurrency{at}",
                    self.predicted_concurrency,
                    self.logged_concurrency,
                    self.concurrency_error_pct,
                    ".2f",
                ),
            )
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "predicted_tokens": self.predicted_tokens,
            "logged_tokens": self.logged_tokens,
            "tokens_error_pct": self.tokens_error_pct,
            "predicted_concurrency": self.predicted_concurrency,
            "logged_concurrency": self.logged_concurrency,
            "concurrency_error_pct": self.concurrency_error_pct,
        }


def compare(kv: KvCapacity | FitPrediction, logged: LoggedKv) -> FitComparison:
    """Pair a prediction with the logged figures, at the context length the log names."""
    capacity = kv.kv if isinstance(kv, FitPrediction) else kv
    context = logged.context if logged.context is not None else capacity.max_model_len
    return FitComparison(
        context=context,
        predicted_tokens=capacity.logged_tokens(context),
        logged_tokens=logged.tokens,
        predicted_concurrency=capacity.concurrency(context),
        logged_concurrency=logged.concurrency,
    )
