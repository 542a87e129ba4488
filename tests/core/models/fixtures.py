"""The model fixtures (tests/fixtures/models): their INDEX.toml and their config.json read as facts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from console.core.models.config import ModelFacts, read_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
SEEDS = Path(__file__).resolve().parents[2] / "fixtures" / "seeds"
INDEX: dict[str, Any] = tomllib.loads((MODELS / "INDEX.toml").read_text())


def config(key: str) -> dict[str, Any]:
    return json.loads((MODELS / INDEX[key]["file"]).read_text())


def facts(key: str, **kwargs: Any) -> ModelFacts:
    return read_config(config(key), name=key, **kwargs)


def seed_text(prefix: str) -> str:
    """The seed whose file name starts with `prefix` (e.g. "000"): shell line continuations,
    the mirror's table bars and runs of whitespace collapsed, so a command reads on one line."""
    (path,) = SEEDS.glob(f"{prefix}_*.txt")
    return " ".join(path.read_text().replace("\\", " ").replace("|", " ").split())


MIXTRAL_8X7B = {  # mistralai/Mixtral-8x7B-v0.1 config.json
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}

DEEPSEEK_V3 = {  # deepseek-ai/DeepSeek-V3 config.json (the keys a plan reads)
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "max_position_embeddings": 163840,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096},
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
}
