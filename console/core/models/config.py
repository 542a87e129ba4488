"""The facts a fit plan needs, read from a Hugging Face `config.json` (a dict).

`read_config(config, name=...)` returns `ModelFacts`: layers, attention and KV
heads, head size, hidden and MLP sizes, vocabulary, tied embeddings, the
checkpoint dtype, the context length vLLM derives, the quantization (fp8,
compressed-tensors, AWQ/GPTQ bits, Quark, ...), mixture-of-experts sizes and
multi-head latent attention (DeepSeek). A multimodal config's `text_config`
(or `llm_config`) is read for the language model. Anything needed that is
missing or malformed is a `ModelConfigError` whose text is one line naming the
model and the key.

The weights' real size, when known, comes from the safetensors index
(`model.safetensors.index.json` -> `metadata.total_size`, see
`weight_bytes_from_index`); otherwise `ParamParts` estimates the parameter count
from the shapes (docs/models.md lists what it counts and what it leaves out).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DTYPE_BYTES",
    "ModelConfigError",
    "ModelFacts",
    "ParamParts",
    "Quantization",
    "read_config",
    "weight_bytes_from_index",
]


class ModelConfigError(ValueError):
    """A config.json (or safetensors index) lacks or garbles a key a plan needs. One line."""


# Bytes per element of the dtypes a checkpoint or vLLM's --dtype names.
DTYPE_BYTES: Mapping[str, int] = {
    "float32": 4,
    "float": 4,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
}

# Context-length keys vLLM reads; it takes the smallest one present.
_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length")


@dataclass(frozen=True, slots=True)
class Quantization:
    """How a checkpoint stores its linear layers."""

    method: str  # quant_method as the config names it: "fp8", "compressed-tensors", "awq", ...
    weight_bits: int | None  # None: a method this reader cannot size (the index's size is then needed)
    group_size: int | None = None  # AWQ/GPTQ groups: one 16-bit scale per group adds 16/group bits
    kv_cache_fp8: bool = False  # the checkpoint carries FP8 KV-cache scales (serve with --kv-cache-dtype fp8)
    kv_auto_fp8: bool = False  # vLLM's kv_cache_dtype "auto" already means fp8 for it (ModelOpt checkpoints)

    @property
    def bits_per_weight(self) -> float | None:
        """Stored bits per linear weight, group scales included."""
        if self.weight_bits is None:
            return None
        extra = 16 / self.group_size if self.group_size and self.group_size > 0 else 0.0
        return self.weight_bits + extra


@dataclass(frozen=True, slots=True)
class ParamParts:
    """Parameter counts grouped by how vLLM stores and splits them under tensor parallelism.

    split_linear: attention q/o, MLP, experts (column/row parallel: 1/TP per GPU), quantized;
    kv_linear: the k/v projections (split by KV head, a whole head per GPU when KV heads < TP),
    quantized; replicated_linear: linear layers every GPU holds whole (MLA's kv_a), quantized;
    embeddings: embed_tokens and lm_head (vocabulary-parallel: 1/TP), kept in the model dtype;
    replicated: norms and MoE routers, whole on every GPU, model dtype.
    """

    split_linear: int
    kv_linear: int
    replicated_linear: int
    embeddings: int
    replicated: int

    @property
    def total(self) -> int:
        return self.split_linear + self.kv_linear + self.replicated_linear + self.embeddings + self.replicated


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What config.json says about a decoder model, in the terms a memory plan uses."""

    name: str
    model_type: str
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    dtype: str  # the checkpoint's dtype ("bfloat16"); vLLM's --dtype auto starts from it
    max_position_embeddings: int | None  # the context vLLM derives (rope scaling applied)
    quantization: Quantization | None = None
    num_experts: int = 0  # 0: dense
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    dense_layers: int = 0  # MoE models whose first layers are dense (DeepSeek's first_k_dense_replace)
    kv_lora_rank: int = 0  # multi-head latent attention: the latent cached per token (0: plain attention)
    qk_rope_head_dim: int = 0
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    weight_bytes: int | None = None  # the real size of the weights (safetensors index), all GPUs together

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    def param_parts(self) -> ParamParts:
        """The parameter count, estimated from the shapes (gated MLPs, no biases)."""
        h, layers = self.hidden_size, self.num_layers
        if self.is_mla:
            nope, rope, v = self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim
            heads = self.num_attention_heads
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank * heads * (nope + rope)
            else:
                q = h * heads * (nope + rope)
            kv_b = self.kv_lora_rank * heads * (nope + v)
            attn_split = q + kv_b + heads * v * h
            attn_kv = 0
            attn_replicated = h * (self.kv_lora_rank + rope)  # kv_a: the latent, whole on every GPU
            attn_norms = self.kv_lora_rank + (self.q_lora_rank or 0)
        else:
            q_width = self.num_attention_heads * self.head_dim
            attn_split = 2 * h * q_width  # q and o
            attn_kv = 2 * h * self.num_kv_heads * self.head_dim
            attn_replicated = 0
            attn_norms = 0
        dense_mlp = 3 * h * self.intermediate_size  # gate, up, down
        if self.is_moe:
            moe_layers = layers - self.dense_layers
            experts = self.num_experts * 3 * h * self.moe_intermediate_size
            shared = 3 * h * self.shared_expert_intermediate_size
            mlp_split = self.dense_layers * dense_mlp + moe_layers * (experts + shared)
            routers = moe_layers * h * self.num_experts
        else:
            mlp_split = layers * dense_mlp
            routers = 0
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        norms = layers * (2 * h + attn_norms) + h
        return ParamParts(
            split_linear=layers * attn_split + mlp_split,
            kv_linear=layers * attn_kv,
            replicated_linear=layers * attn_replicated,
            embeddings=embeddings,
            replicated=norms + routers,
        )

    @property
    def parameters(self) -> int:
        return self.param_parts().total


# ---------------------------------------------------------------- reading


def _fail(name: str, key: str, why: str) -> ModelConfigError:
    return ModelConfigError(f"{name}: key '{key}' {why}")


def _int(cfg: Mapping[str, Any], name: str, *keys: str, required: bool = True, minimum: int = 1) -> int | None:
    """The first of `keys` present (and not null), as an int >= minimum."""
    for key in keys:
        if key in cfg and cfg[key] is not None:
            value = cfg[key]
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                else:
                    raise _fail(name, key, f"is {value!r}, expected an integer")
            if value < minimum:
                raise _fail(name, key, f"is {value}, expected {minimum} or more")
            return value
    if required:
        raise _fail(name, keys[0], "is missing: the model cannot be sized without it")
    return None


def _text_part(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The language model's keys: a multimodal config nests them in text_config / llm_config."""
    if not isinstance(config, Mapping):
        raise ModelConfigError(f"{name}: expected a JSON object, got {type(config).__name__}")
    merged = dict(config)
    for nest in ("text_config", "llm_config", "language_config"):
        inner = config.get(nest)
        if inner is None:
            continue
        if not isinstance(inner, Mapping):
            raise _fail(name, nest, f"is {type(inner).__name__}, expected an object")
        # The text model's own keys win; the top level keeps quantization and dtype when the
        # nested part has none (that is where multimodal checkpoints put them).
        merged.update({k: v for k, v in inner.items() if v is not None})
        break
    return merged


def _dtype(cfg: Mapping[str, Any], name: str) -> str:
    for key in ("torch_dtype", "dtype"):
        value = cfg.get(key)
        if value is None:
            continue
        text = str(value).removeprefix("torch.")
        if text not in DTYPE_BYTES:
            raise _fail(name, key, f"is {value!r}, expected one of {', '.join(sorted(DTYPE_BYTES))}")
        return text
    return "float32"  # transformers' default when a config names none


def _max_length(cfg: Mapping[str, Any], name: str) -> int | None:
    found = [v for k in _LENGTH_KEYS if (v := _int(cfg, name, k, required=False)) is not None]
    if not found:
        return None
    length = min(found)
    scaling = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if isinstance(scaling, Mapping):
        kind = str(scaling.get("rope_type") or scaling.get("type") or "default")
        factor = scaling.get("factor")
        # llama3 / longrope already state the long context in max_position_embeddings;
        # yarn, linear and dynamic scaling stretch the original one.
        if kind in ("yarn", "linear", "dynamic") and isinstance(factor, int | float) and factor > 1:
            base = scaling.get("original_max_position_embeddings")
            start = base if isinstance(base, int) and base > 0 else length
            length = int(start * factor)
    return length


_BITS_BY_DTYPE = {"fp8": 8, "int8": 8, "uint8": 8, "fp6": 6, "int4": 4, "uint4": 4, "fp4": 4, "mxfp4": 4, "mx_fp4": 4}


def _quark_bits(weight: Any) -> int | None:
    specs = weight if isinstance(weight, list) else [weight]
    bits = []
    for spec in specs:
        if isinstance(spec, Mapping):
            dtype = str(spec.get("dtype") or "").lower()
            bits += [b for prefix, b in _BITS_BY_DTYPE.items() if dtype.startswith(prefix)][:1]
    return min(bits) if bits else None


def _quantization(qc: Any, name: str) -> Quantization:
    key = "quantization_config"
    if not isinstance(qc, Mapping):
        raise _fail(name, key, f"is {type(qc).__name__}, expected an object")
    method = str(qc.get("quant_method") or "").lower()
    if not method:
        raise _fail(name, f"{key}.quant_method", "is missing: the weights' storage is unknown")
    bits: int | None = None
    group: int | None = None
    kv_fp8 = kv_auto = False
    if method in ("fp8", "fbgemm_fp8", "ptpc_fp8", "fp8_pertensor"):
        bits = 8
        kv_fp8 = bool(qc.get("kv_cache_scheme"))
    elif method == "compressed-tensors":
        groups = qc.get("config_groups")
        found = []
        if isinstance(groups, Mapping):
            for spec in groups.values():
                weights = spec.get("weights") if isinstance(spec, Mapping) else None
                if isinstance(weights, Mapping) and isinstance(weights.get("num_bits"), int):
                    found.append(weights["num_bits"])
                    if isinstance(weights.get("group_size"), int):
                        group = weights["group_size"]
        bits = min(found) if found else None
        kv = qc.get("kv_cache_scheme")
        kv_fp8 = isinstance(kv, Mapping) and kv.get("num_bits") == 8
    elif method in ("awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round", "moe_wna16"):
        bits = _int(qc, name, "bits", "w_bit", required=False)
        group = _int(qc, name, "group_size", "q_group_size", required=False, minimum=-1)
        if bits is None:
            raise _fail(name, f"{key}.bits", f"is missing: {method} weights' bits are unknown")
    elif method == "quark":
        glob = qc.get("global_quant_config")
        bits = _quark_bits(glob.get("weight")) if isinstance(glob, Mapping) else None
        export = qc.get("export")
        kv_group = qc.get("kv_cache_group") or (export.get("kv_cache_group") if isinstance(export, Mapping) else None)
        kv_fp8 = bool(kv_group)
    elif method == "mxfp4":
        bits = 4
    elif method == "bitsandbytes":
        bits = 4 if qc.get("load_in_4bit") else 8
    elif method.startswith("modelopt"):
        nested = qc.get("quantization")
        inner: Mapping[str, Any] = nested if isinstance(nested, Mapping) else qc
        algo = str(inner.get("quant_algo") or "").upper()
        bits = 8 if "FP8" in algo else 4 if "FP4" in algo or "INT4" in algo else None
        kv_algo = inner.get("kv_cache_quant_algo") or qc.get("kv_cache_quant_algo")
        kv_auto = kv_fp8 = isinstance(kv_algo, str) and kv_algo.upper().startswith("FP8")
    return Quantization(method, bits, group if group and group > 0 else None, kv_fp8, kv_auto)


def read_config(
    config: Mapping[str, Any],
    *,
    name: str = "config.json",
    weight_bytes: int | None = None,
) -> ModelFacts:
    """The plan's facts from a config.json dict; `name` (repo id or path) goes into every error.

    `weight_bytes` is the real size of all weights when known (the safetensors index's
    total_size, or the sum of the .safetensors files): the plan prefers it to the estimate.
    """
    cfg = _text_part(config, name)
    heads = _int(cfg, name, "num_attention_heads", "n_head")
    assert heads is not None  # required=True raises instead
    hidden = _int(cfg, name, "hidden_size", "n_embd", "d_model")
    assert hidden is not None
    layers = _int(cfg, name, "num_hidden_layers", "n_layer", "num_layers")
    assert layers is not None
    vocab = _int(cfg, name, "vocab_size")
    assert vocab is not None
    kv_heads = _int(cfg, name, "num_key_value_heads", "num_kv_heads", required=False) or heads
    head_dim = _int(cfg, name, "head_dim", required=False)
    if head_dim is None:
        if hidden % heads:
            raise _fail(name, "head_dim", f"is missing and hidden_size {hidden} is not a multiple of {heads} heads")
        head_dim = hidden // heads
    if heads % kv_heads:
        raise _fail(name, "num_key_value_heads", f"is {kv_heads}: it must divide the {heads} attention heads")

    experts = _int(
        cfg, name, "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", required=False, minimum=0
    )
    experts = experts or 0
    moe_size = shared = dense = per_token = 0
    if experts:
        moe_size = _int(cfg, name, "moe_intermediate_size", "intermediate_size") or 0
        per_token = _int(cfg, name, "num_experts_per_tok", "moe_topk", "top_k", required=False) or 0
        shared = _int(cfg, name, "shared_expert_intermediate_size", required=False, minimum=0) or 0
        n_shared = _int(cfg, name, "n_shared_experts", required=False, minimum=0) or 0
        shared = shared or n_shared * moe_size
        dense = _int(cfg, name, "first_k_dense_replace", required=False, minimum=0) or 0
        if dense > layers:
            raise _fail(name, "first_k_dense_replace", f"is {dense}, more than the {layers} layers")
    # A MoE model without dense layers may leave intermediate_size out; a dense one may not.
    intermediate = _int(cfg, name, "intermediate_size", "n_inner", "ffn_dim", required=not experts or dense > 0)
    intermediate = intermediate or moe_size

    kv_lora = _int(cfg, name, "kv_lora_rank", required=False) or 0
    mla: dict[str, int] = {}
    if kv_lora:
        rope = _int(cfg, name, "qk_rope_head_dim")
        nope = _int(cfg, name, "qk_nope_head_dim")
        v_head = _int(cfg, name, "v_head_dim")
        assert rope is not None and nope is not None and v_head is not None
        mla = dict(
            kv_lora_rank=kv_lora,
            qk_rope_head_dim=rope,
            qk_nope_head_dim=nope,
            v_head_dim=v_head,
            q_lora_rank=_int(cfg, name, "q_lora_rank", required=False) or 0,
        )

    qc = cfg.get("quantization_config")
    quant = _quantization(qc, name) if qc is not None else None
    tie = cfg.get("tie_word_embeddings", False)
    if not isinstance(tie, bool):
        raise _fail(name, "tie_word_embeddings", f"is {tie!r}, expected true or false")
    if weight_bytes is not None and (isinstance(weight_bytes, bool) or weight_bytes <= 0):
        raise ModelConfigError(f"{name}: weight size {weight_bytes!r} is not a positive number of bytes")
    return ModelFacts(
        name=name,
        model_type=str(cfg.get("model_type") or "unknown"),
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        hidden_size=hidden,
        intermediate_size=intermediate,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        dtype=_dtype(cfg, name),
        max_position_embeddings=_max_length(cfg, name),
        quantization=quant,
        num_experts=experts,
        experts_per_token=per_token,
        moe_intermediate_size=moe_size,
        shared_expert_intermediate_size=shared,
        dense_layers=dense,
        weight_bytes=weight_bytes,
        **mla,
    )


def weight_bytes_from_index(index: Mapping[str, Any], *, name: str = "model.safetensors.index.json") -> int:
    """`metadata.total_size` of a safetensors index: the bytes of all weight tensors."""
    if not isinstance(index, Mapping):
        raise ModelConfigError(f"{name}: expected a JSON object, got {type(index).__name__}")
    meta = index.get("metadata")
    if not isinstance(meta, Mapping):
        raise _fail(name, "metadata", "is missing: no total_size to size the weights by")
    total = meta.get("total_size")
    if isinstance(total, str) and total.isdigit():
        total = int(total)
    if isinstance(total, float) and total.is_integer():
        total = int(total)
    if isinstance(total, bool) or not isinstance(total, int) or total <= 0:
        raise _fail(name, "metadata.total_size", f"is {total!r}, expected a positive number of bytes")
    return total
