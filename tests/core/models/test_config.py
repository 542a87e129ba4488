"""Reading config.json into the facts a fit plan needs: shapes, quantization, MoE, MLA, sizes, errors."""

from __future__ import annotations

import pytest

from console.core.models.config import ModelConfigError, read_config, weight_bytes_from_index
from console.core.models.fit import FitError, weights_per_gpu
from tests.core.models.fixtures import DEEPSEEK_V3, INDEX, MIXTRAL_8X7B, config, facts

LLAMAS = [
    "amd--Llama-3.1-8B-Instruct-FP8-KV",
    "amd--Llama-3.1-70B-Instruct-FP8-KV",
    "meta-llama--Llama-3.1-70B-Instruct",
    "amd--Llama-3.1-405B-Instruct-FP8-KV",
]


@pytest.mark.parametrize("key", LLAMAS + ["tiny-llama"])
def test_fixture_configs_read_as_published(key):
    raw, f = config(key), facts(key)
    assert (f.num_layers, f.num_attention_heads, f.num_kv_heads) == (
        raw["num_hidden_layers"],
        raw["num_attention_heads"],
        raw["num_key_value_heads"],
    )
    assert (f.hidden_size, f.intermediate_size, f.vocab_size) == (
        raw["hidden_size"],
        raw["intermediate_size"],
        raw["vocab_size"],
    )
    # head size: the config's head_dim when it states one (the tiny model), else hidden / heads
    assert f.head_dim == raw.get("head_dim", raw["hidden_size"] // raw["num_attention_heads"])
    assert f.max_position_embeddings == raw["max_position_embeddings"]  # llama3 rope: no stretching
    assert f.tie_word_embeddings is False and not f.is_moe and not f.is_mla


def test_amd_fp8_kv_checkpoints_are_fp8_with_kv_scales():
    for key in ("amd--Llama-3.1-8B-Instruct-FP8-KV", "amd--Llama-3.1-70B-Instruct-FP8-KV"):
        q = facts(key).quantization
        assert q is not None and (q.method, q.weight_bits, q.kv_cache_fp8) == ("fp8", 8, True)
        assert q.kv_auto_fp8 is False  # vLLM 0.32 keeps kv_cache_dtype auto = bf16 for them
    assert facts("meta-llama--Llama-3.1-70B-Instruct").quantization is None
    assert facts("tiny-llama").dtype == "float32"  # transformers 5 writes "dtype", not "torch_dtype"


def test_parameter_count_is_the_llama_arithmetic_and_rounds_to_the_hubs_figure():
    f = facts("amd--Llama-3.1-8B-Instruct-FP8-KV")
    h, i, v, layers = 4096, 14336, 128256, 32
    per_layer = 2 * h * h + 2 * h * (8 * 128) + 3 * h * i + 2 * h  # q, o; k, v; gate, up, down; 2 norms
    assert f.parameters == layers * per_layer + 2 * v * h + h  # embeddings + lm_head, final norm
    for key in LLAMAS:
        if "hub_params_billion" in INDEX[key]:
            assert round(facts(key).parameters / 1e9) == INDEX[key]["hub_params_billion"], key


def test_fp8_weight_size_matches_the_files_on_the_hub():
    # linear layers in 1 byte, embeddings and lm_head in bf16: about 9.08 GB, as the hub lists
    listed = sum(INDEX["amd--Llama-3.1-8B-Instruct-FP8-KV"]["weight_files_gb"]) * 1e9
    estimate = weights_per_gpu(facts("amd--Llama-3.1-8B-Instruct-FP8-KV"))
    assert abs(estimate - listed) / listed < 0.005


def test_tiny_model_size_matches_its_safetensors_file():
    f = facts("tiny-llama")
    stored = weights_per_gpu(f, dtype="float32")
    assert stored == f.parameters * 4
    real = INDEX["tiny-llama"]["safetensors_bytes"]
    assert 0 < real - stored < 4096  # the difference is the file's JSON header
    # the real size, when given, is what the plan uses; --dtype auto serves float32 as bfloat16
    sized = read_config(config("tiny-llama"), name="tiny", weight_bytes=real)
    assert weights_per_gpu(sized, dtype="float32") == real
    assert weights_per_gpu(sized) == pytest.approx(real / 2, abs=1)


def test_multimodal_text_config_is_the_language_model():
    text = {k: v for k, v in config("meta-llama--Llama-3.1-70B-Instruct").items() if k != "torch_dtype"}
    vision = {
        "model_type": "mllama",
        "text_config": text,
        "vision_config": {"hidden_size": 1280, "num_hidden_layers": 32},
        "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "fp8", "kv_cache_scheme": "static"},
    }
    f = read_config(vision, name="org/vision-70b")
    assert (f.num_layers, f.hidden_size, f.num_kv_heads) == (80, 8192, 8)
    assert f.dtype == "bfloat16" and f.quantization is not None and f.quantization.kv_cache_fp8


def test_mixture_of_experts_counts_every_expert():
    f = read_config(MIXTRAL_8X7B, name="mistralai/Mixtral-8x7B-v0.1")
    assert f.is_moe and (f.num_experts, f.experts_per_token, f.moe_intermediate_size) == (8, 2, 14336)
    # Mistral AI: "46.7B total parameters"
    assert f.parameters == pytest.approx(46.7e9, rel=0.002)


def test_deepseek_latent_attention_and_experts():
    f = read_config(DEEPSEEK_V3, name="deepseek-ai/DeepSeek-V3")
    assert f.is_mla and f.is_moe and f.dense_layers == 3
    assert f.shared_expert_intermediate_size == 2048  # one shared expert of moe_intermediate_size
    assert f.parameters == pytest.approx(671e9, rel=0.002)  # the paper's 671B (its MTP module aside)
    assert f.max_position_embeddings == 4096 * 40  # yarn stretches the original context
    assert f.quantization is not None and f.quantization.weight_bits == 8


@pytest.mark.parametrize(
    ("qc", "bits", "per_weight", "kv_auto"),
    [
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 128, "type": "int"}}},
                "ignore": ["lm_head"],
            },
            4,
            4.125,
            False,
        ),
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, 4, 4.125, False),
        ({"quant_method": "gptq", "bits": 8, "group_size": -1, "desc_act": False}, 8, 8.0, False),
        (
            {"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp4", "qscheme": "per_group"}}},
            4,
            4.0,
            False,
        ),
        ({"quant_method": "mxfp4"}, 4, 4.0, False),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, 4, 4.0, False),
        (
            {"quant_method": "modelopt", "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}},
            8,
            8.0,
            True,
        ),
    ],
)
def test_quantization_formats(qc, bits, per_weight, kv_auto):
    q = read_config({**config("meta-llama--Llama-3.1-70B-Instruct"), "quantization_config": qc}).quantization
    assert q is not None and q.weight_bits == bits and q.bits_per_weight == per_weight and q.kv_auto_fp8 is kv_auto


def test_unknown_quantization_needs_the_real_size():
    raw = {**config("meta-llama--Llama-3.1-70B-Instruct"), "quantization_config": {"quant_method": "hqq"}}
    f = read_config(raw, name="org/odd-70b")
    with pytest.raises(FitError, match=r"^org/odd-70b: quant_method 'hqq'.*total_size"):
        weights_per_gpu(f)
    sized = read_config(raw, name="org/odd-70b", weight_bytes=40_000_000_000)
    assert weights_per_gpu(sized, tp=4) == 10_000_000_000


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_hidden_layers": None}, "org/m: key 'num_hidden_layers' is missing"),
        ({"num_attention_heads": "64"}, "org/m: key 'num_attention_heads' is '64', expected an integer"),
        ({"num_key_value_heads": 0}, "org/m: key 'num_key_value_heads' is 0, expected 1 or more"),
        ({"num_key_value_heads": 5}, "org/m: key 'num_key_value_heads' is 5: it must divide the 64 attention heads"),
        ({"torch_dtype": "int3"}, "org/m: key 'torch_dtype' is 'int3', expected one of"),
        ({"tie_word_embeddings": "no"}, "org/m: key 'tie_word_embeddings' is 'no', expected true or false"),
        ({"quantization_config": {"bits": 4}}, "org/m: key 'quantization_config.quant_method' is missing"),
        ({"quantization_config": {"quant_method": "gptq"}}, "org/m: key 'quantization_config.bits' is missing"),
        ({"vocab_size": True}, "org/m: key 'vocab_size' is True, expected an integer"),
        ({"text_config": [1, 2]}, "org/m: key 'text_config' is list, expected an object"),
    ],
)
def test_bad_configs_are_one_line_naming_the_key(change, message):
    raw = {**config("meta-llama--Llama-3.1-70B-Instruct"), **change}
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(ModelConfigError) as err:
        read_config(raw, name="org/m")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_config_that_is_not_an_object():
    with pytest.raises(ModelConfigError, match=r"^org/m: expected a JSON object, got list$"):
        read_config([], name="org/m")  # type: ignore[arg-type]


def test_weight_bytes_from_the_safetensors_index():
    index = {
        "metadata": {"total_size": 9081200640},
        "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors"},
    }
    assert weight_bytes_from_index(index) == 9081200640
    assert weight_bytes_from_index({"metadata": {"total_size": "123"}}) == 123
    for bad, key in (({"weight_map": {}}, "metadata"), ({"metadata": {"total_size": -1}}, "metadata.total_size")):
        with pytest.raises(ModelConfigError, match=rf"^x/index.json: key '{key}'"):
            weight_bytes_from_index(bad, name="x/index.json")
    with pytest.raises(ModelConfigError, match="not a positive number of bytes"):
        read_config(config("tiny-llama"), weight_bytes=0)
