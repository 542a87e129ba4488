"""The simulated model: size, shape and memory footprint from its name and flags."""

import re

from .constants import FLOPS, HBM_BYTES_PER_S, GiB


def _params_from_name(name):
    """Billions of parameters from a model name (70B, 8x7B, 125m), 8 by default."""
    m = re.search(r"(\d+)x(\d+(?:\.\d+)?)b(?![a-z0-9])", name)
    if m:
        return int(m.group(1)) * float(m.group(2)) * 0.8
    found = re.findall(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)b(?![a-z0-9])", name)
    if found:
        return max(float(x) for x in found)
    found = re.findall(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)m(?![a-z0-9])", name)
    if found:
        return max(float(x) for x in found) / 1000.0
    if "deepseek-v3" in name or "deepseek-r1" in name:
        return 671.0
    return 8.0


def _shape(params_b):
    """(layers, kv heads, head dim, hidden) of a Llama-like model of that size."""
    for limit, shape in (
        (1.0, (16, 8, 64, 2048)),
        (4.0, (28, 8, 128, 3072)),
        (10.0, (32, 8, 128, 4096)),
        (20.0, (40, 8, 128, 5120)),
        (40.0, (64, 8, 128, 5120)),
        (90.0, (80, 8, 128, 8192)),
        (160.0, (88, 8, 128, 12288)),
        (300.0, (94, 4, 128, 4096)),
        (500.0, (126, 8, 128, 16384)),
    ):
        if params_b <= limit:
            return shape
    return (61, 8, 128, 7168)


def _architecture(name):
    if "mixtral" in name:
        return "MixtralForCausalLM"
    if "qwen3" in name:
        return "Qwen3MoeForCausalLM" if re.search(r"-a\d+(\.\d+)?b", name) else "Qwen3ForCausalLM"
    if "qwen" in name:
        return "Qwen2ForCausalLM"
    if "deepseek" in name:
        return "DeepseekV3ForCausalLM"
    if "gpt-oss" in name:
        return "GptOssForCausalLM"
    if "mistral" in name:
        return "MistralForCausalLM"
    if "gemma" in name:
        return "Gemma3ForCausalLM"
    if "phi" in name:
        return "Phi3ForCausalLM"
    return "LlamaForCausalLM"


class ModelProfile:
    """Sizes, memory plan and step timing of the simulated model on the simulated GPUs."""

    def __init__(self, args, vram_bytes):
        name = args.model.lower()
        quant = (args.quantization or "").lower()
        self.tiny = "tiny" in name
        self.params_b = 0.001 if self.tiny else _params_from_name(name)
        self.arch = _architecture(name)
        if args.dtype in ("float", "float32"):
            wbytes, self.torch_dtype = 4.0, "torch.float32"
        elif args.dtype in ("half", "float16"):
            wbytes, self.torch_dtype = 2.0, "torch.float16"
        else:
            wbytes, self.torch_dtype = 2.0, "torch.bfloat16"
        kv_bytes = 4 if wbytes == 4.0 else 2
        self.fp8 = "fp8" in quant or "fp8" in name or quant in ("quark", "modelopt")
        if self.fp8:
            wbytes = 1.03
        elif any(k in quant or k in name for k in ("awq", "gptq", "int4", "w4a16", "mxfp4", "fp4")):
            wbytes = 0.56
        if args.kv_cache_dtype.startswith("fp8"):
            kv_bytes = 1
        layers, kv_heads, head_dim, self.hidden = (2, 4, 32, 128) if self.tiny else _shape(self.params_b)
        self.tp = args.tensor_parallel_size
        self.pp = args.pipeline_parallel_size
        shards = self.tp * self.pp
        self.weights_total = self.params_b * 1e9 * wbytes
        self.weights_per_gpu = self.weights_total / shards
        self.kv_per_token = max(1, layers // self.pp) * max(1, kv_heads // self.tp) * head_dim * 2 * kv_bytes
        self.limit = 2048 if self.tiny else 131072
        self.vram = vram_bytes
        self.shards = max(1, int(-(-self.weights_total // (4.6 * GiB))))
        self.eager = bool(args.enforce_eager)
        overhead = 0.004 + (0.0025 if self.tp > 1 else 0.0) + (0.002 if self.pp > 1 else 0.0)
        if self.eager:
            overhead *= 1.6
        if args.async_scheduling:
            overhead -= 0.0008
        self.overhead = overhead
        self.flops_per_token = 2.0 * self.params_b * 1e9 / shards
        self.flops = FLOPS * (2.0 if self.fp8 else 1.0)

    def memory(self, args):
        """Per-GPU memory plan in bytes: budget, activations, rccl, graphs, KV cache."""
        budget = args.gpu_memory_utilization * self.vram
        per_gpu_b = self.params_b / (self.tp * self.pp)
        act = (0.05 if self.tiny else 0.45 + args.max_num_batched_tokens / 8192.0 * (0.6 + per_gpu_b / 25.0)) * GiB
        rccl = (0.25 + (0.45 if self.tp * self.pp > 1 else 0.0)) * GiB
        graphs = 0.0 if self.eager else (0.3 + min(args.max_num_seqs, 512) / 512.0 * 0.6) * GiB
        kv = budget - self.weights_per_gpu - act - rccl - graphs
        return budget, act, rccl, graphs, kv

    def step_time(self, n_decode, n_prefill, ctx_tokens):
        t = self.overhead + self.weights_per_gpu / HBM_BYTES_PER_S
        t += ctx_tokens * self.kv_per_token / HBM_BYTES_PER_S
        t += (n_decode + n_prefill) * self.flops_per_token / self.flops
        return t
