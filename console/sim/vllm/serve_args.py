"""`vllm serve` flags as vLLM 0.32 parses and reports them (non-default args)."""

import argparse
import collections
import json
import re

from .constants import DEFAULT_MODEL


def human_readable_int(text):
    """vLLM's integer parser: 32k = 32000, 32K = 32768, 1m = 1000000, 1M = 1048576."""
    m = re.match(r"^\s*(-?\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*$", str(text))
    if not m:
        raise ValueError(text)
    scale = {"": 1, "k": 1000, "K": 1024, "m": 10**6, "M": 1 << 20, "g": 10**9, "G": 1 << 30}
    return int(float(m.group(1)) * scale[m.group(2)])


DTYPES = ["auto", "half", "float16", "bfloat16", "float", "float32"]
KV_DTYPES = ["auto", "bfloat16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]

NON_DEFAULT_ORDER = [
    "model_tag",
    "host",
    "port",
    "uvicorn_log_level",
    "disable_uvicorn_access_log",
    "api_key",
    "chat_template",
    "disable_log_requests",
    "enable_log_requests",
    "model",
    "tokenizer",
    "tokenizer_mode",
    "trust_remote_code",
    "dtype",
    "seed",
    "max_model_len",
    "quantization",
    "enforce_eager",
    "max_seq_len_to_capture",
    "served_model_name",
    "generation_config",
    "load_format",
    "distributed_executor_backend",
    "pipeline_parallel_size",
    "tensor_parallel_size",
    "data_parallel_size",
    "enable_expert_parallel",
    "block_size",
    "gpu_memory_utilization",
    "swap_space",
    "kv_cache_dtype",
    "enable_prefix_caching",
    "max_num_batched_tokens",
    "max_num_seqs",
    "num_scheduler_steps",
    "enable_chunked_prefill",
    "async_scheduling",
    "compilation_config",
    "disable_log_stats",
]


def _flag(p, name, default=False):
    dest = name.replace("-", "_")
    p.add_argument("--" + name, dest=dest, action="store_true", default=default)
    p.add_argument("--no-" + name, dest=dest, action="store_false")


def serve_parser():
    p = argparse.ArgumentParser(
        prog="vllm serve",
        usage="vllm serve [model_tag] [options]",
        allow_abbrev=False,
        description="Launch a local OpenAI-compatible API server to serve LLM completions "
        "via HTTP (rocm-console simulator: no GPU work is done).",
    )
    p.add_argument("model_tag", nargs="?", default=None, help="The model tag to serve")
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--uvicorn-log-level", default="info", choices=["critical", "debug", "error", "info", "trace", "warning"]
    )
    p.add_argument("--disable-uvicorn-access-log", action="store_true")
    p.add_argument("--api-key", default=None)
    p.add_argument("--chat-template", default=None)
    p.add_argument("--disable-log-requests", action="store_true")
    p.add_argument("--enable-log-requests", action="store_true")
    p.add_argument("--model", default=None)
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--tokenizer-mode", default="auto")
    _flag(p, "trust-remote-code")
    p.add_argument("--dtype", default="auto", choices=DTYPES)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--max-model-len", type=human_readable_int, default=None)
    p.add_argument("--quantization", "-q", default=None)
    _flag(p, "enforce-eager")
    p.add_argument("--max-seq-len-to-capture", type=int, default=None)
    p.add_argument("--served-model-name", nargs="+", default=None)
    p.add_argument("--generation-config", default="auto")
    p.add_argument("--load-format", default="auto")
    p.add_argument("--distributed-executor-backend", default=None, choices=["external_launcher", "mp", "ray", "uni"])
    p.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    # multi-node data parallelism (seed 003), accepted as vLLM 0.32 does
    p.add_argument("--data-parallel-size-local", "-dpl", type=int, default=None)
    p.add_argument("--data-parallel-address", "-dpa", default=None)
    p.add_argument("--data-parallel-rpc-port", "-dpp", type=int, default=None)
    p.add_argument("--data-parallel-backend", "-dpb", default="mp", choices=["mp", "ray"])
    p.add_argument("--disable-nccl-for-dp-synchronization", action="store_true")
    _flag(p, "enable-expert-parallel")
    p.add_argument("--block-size", type=int, default=None, choices=[1, 8, 16, 32, 64, 128, 256])
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--swap-space", type=float, default=4)
    p.add_argument("--kv-cache-dtype", default="auto", choices=KV_DTYPES)
    _flag(p, "enable-prefix-caching", default=None)
    p.add_argument("--max-num-batched-tokens", type=human_readable_int, default=None)
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--num-scheduler-steps", type=int, default=None)
    _flag(p, "enable-chunked-prefill", default=None)
    _flag(p, "async-scheduling", default=None)
    p.add_argument("--compilation-config", "-O", default=None)
    p.add_argument("--disable-log-stats", action="store_true")
    return p


def normalize_flag(arg):
    """`--max_model_len=8` → `--max-model-len=8`, like vLLM's FlexibleArgumentParser."""
    if arg.startswith("--") and len(arg) > 2:
        key, eq, value = arg.partition("=")
        return key.replace("_", "-") + eq + value
    return arg


def parse_serve_args(argv):
    parser = serve_parser()
    args, extra = parser.parse_known_args([normalize_flag(a) for a in argv])
    if extra:
        parser.error("unrecognized arguments: %s" % " ".join(extra))
    for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
        if getattr(args, name) < 1:
            parser.error("argument --%s: must be >= 1" % name.replace("_", "-"))
    args.model = args.model_tag or args.model or DEFAULT_MODEL
    return parser, args


def non_default_args(parser, args):
    """The `non-default args: {...}` dict, in vLLM's order (call before defaults are resolved)."""
    defaults = vars(parser.parse_args([]))
    out = collections.OrderedDict()
    for dest in NON_DEFAULT_ORDER:
        value = getattr(args, dest, None)
        if dest == "model":
            if value != DEFAULT_MODEL:
                out[dest] = value
            continue
        if value == defaults.get(dest):
            continue
        if dest == "compilation_config":
            try:
                value = json.loads(value)
            except ValueError:
                pass
        out[dest] = value
    return dict(out)
