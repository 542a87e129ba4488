#!/usr/bin/env python3
"""Simulated `vllm` command: a vLLM 0.32 look-alike for rocm-console's demo and fast tests.

This file is uploaded to a node and run as `python3 vllm.py serve MODEL [flags]`.
It is self-contained on purpose: stdlib only, Python >= 3.8, never imports
`console`. It does no GPU work and says so: its version is "0.32.0+sim".

Commands
    serve [MODEL] [flags]   OpenAI-compatible HTTP server with vLLM 0.32's log lines
    bench ...               prints "not simulated yet", exit 2
    --version               prints the version

serve flags (vLLM's spelling; `--max_model_len` is read as `--max-model-len`, like vLLM)
    --host (all interfaces), --port (8000), --tensor-parallel-size/-tp,
    --pipeline-parallel-size/-pp, --data-parallel-size/-dp, --max-model-len (also 32k, 1M),
    --gpu-memory-utilization (0.9), --kv-cache-dtype, --max-num-batched-tokens (8192),
    --max-num-seqs (256), --served-model-name NAME..., --dtype, --[no-]enforce-eager,
    --block-size (16), --[no-]async-scheduling, --compilation-config/-O, --quantization/-q,
    --swap-space, --distributed-executor-backend, --[no-]trust-remote-code,
    --disable-log-requests, --enable-log-requests, --disable-log-stats,
    --disable-uvicorn-access-log, --uvicorn-log-level, --load-format, --model, --seed,
    --tokenizer, --tokenizer-mode, --[no-]enable-prefix-caching, --[no-]enable-chunked-prefill,
    --[no-]enable-expert-parallel, --max-seq-len-to-capture, --api-key, --chat-template,
    --generation-config, and --num-scheduler-steps (accepted with a warning; real 0.32
    no longer has it). Anything else: "vllm serve: error: unrecognized arguments: ...", exit 2.

Environment
    ROCM_CONSOLE_SIM_VLLM_SPEEDUP  divides every startup delay (default 1: ~6 s to ready,
                                   ~4 s with --enforce-eager) and the crash delay
    ROCM_CONSOLE_SIM_VLLM_FAIL     kv | oom | crash: force that failure ("crash": the engine
                                   dies 2 s / SPEEDUP after ready, exit 1)
    ROCM_CONSOLE_SIM_DIR           the simulated node's folder: this process registers itself
                                   in processes.json there (see below); unset = no registration
    ROCM_CONSOLE_SIM_GPU_VRAM_MB   VRAM of one (logical) GPU in MiB (default 196592)
    CUDA_VISIBLE_DEVICES           logical GPU indices (else HIP_VISIBLE_DEVICES, else 0..N-1);
                                   the first TP x PP x DP of them are used
    VLLM_LOG_STATS_INTERVAL        seconds between "Engine 000: Avg prompt throughput" lines (10)
    VLLM_ALLOW_LONG_MAX_MODEL_LEN  1: a --max-model-len above the model's limit only warns

GPU footprint
    After the weights are loaded the APIServer pid is written to processes.json (one entry
    per GPU: {"pid", "name": "python3", "gpu", "vram_bytes", "started"}) under an fcntl lock
    on processes.json.lock, atomically; vram_bytes grows to gpu_memory_utilization x VRAM
    once the KV cache is allocated. The entries are removed at exit (signals, atexit).

The simulated model
    Its size comes from the name ("70B", "8x7B", "125m"; 8B otherwise; a name containing
    "tiny" is a 2-layer toy with a 2048-token limit, every other model has 131072), weight
    bytes from --dtype/--quantization or FP8/AWQ/GPTQ/MXFP4 in the name, KV bytes per token
    from a Llama-like shape. Per GPU: budget = gpu_memory_utilization x VRAM, minus
    weights / (TP x PP), activations, RCCL and graph memory; the rest is KV cache.
    Failures follow from that, with vLLM 0.32's wording:
      --max-model-len above the limit        pydantic ValidationError (max_model_len), exit 1
      another live process in processes.json on our GPU leaving less than the budget free
                                             "Free memory on device ..." ValueError, exit 1
      weights larger than a GPU             HIP out of memory while loading, exit 1
      utilization > 0.98, "405B" in the name, TP < 8, or FAIL=oom
                                             HIP out of memory while profiling, exit 1
      KV cache smaller than one max_model_len request, or FAIL=kv
                                             "To serve at least one request ...", exit 1
      port in use                           OSError: [Errno 98] Address already in use, exit 1

Timing model (continuous batching, one engine step at a time)
    Each step decodes one token for every running request that has finished its prefill
    and prefills chunks of new prompts within --max-num-batched-tokens; at most
    --max-num-seqs run, the rest wait (FCFS); KV blocks are allocated as sequences grow
    and the newest request is preempted (recomputed later) when they run out.
    step = overhead (4 ms, +2.5 ms if TP > 1, x1.6 with --enforce-eager)
         + weights_per_gpu / 3.2 TB/s + context_tokens x kv_bytes_per_token / 3.2 TB/s
         + tokens x 2 x params / (TP x PP) / 600 TFLOP/s (x2 for FP8), +-5 % jitter.
    So an 8B model on one GPU has ~9 ms ITL at concurrency 1, ~30 ms at 256, and a
    1024-token prompt adds ~27 ms of TTFT. Prompt tokens = max(words, chars / 4);
    generated text is deterministic pseudo-words. Without ignore_eos a request ends
    with "stop" at a length drawn from its prompt (24..503 tokens) if max_tokens is longer.
    /metrics is updated like vLLM V1: TTFT at the first token, ITL per gap, the other
    request histograms at the finish.

Log shapes follow the real 0.32 samples: engine lines are `(EngineCore pid=N)` (0.33 prints
`EngineCore_DP0`), workers `(Worker pid=N)` or `(Worker_TPr pid=N)`; those pids are made up
(only the APIServer process exists). "Application startup complete." is printed right after
the socket starts listening, so a client that sees it can connect.

Deviations from real vLLM: one engine even with DP > 1; n > 1, logprobs, stop strings,
tools and batched prompts are not simulated (400); prefix caching never hits; an engine
crash ends the process with exit code 1.
"""

import argparse
import asyncio
import atexit
import bisect
import collections
import email.utils
import json
import logging
import os
import random
import re
import signal
import socket
import sys
import time
import uuid
import zlib

try:
    import fcntl
except ImportError:  # pragma: no cover - every node is Linux
    fcntl = None

__simulated__ = True

VERSION = "0.32.0+sim"
FINGERPRINT = "vllm-0.32.0+sim-5ac2b1de"
SITE = "/usr/local/lib/python3.12/dist-packages"
PYLIB = "/usr/lib/python3.12"

ENV_SPEEDUP = "ROCM_CONSOLE_SIM_VLLM_SPEEDUP"
ENV_FAIL = "ROCM_CONSOLE_SIM_VLLM_FAIL"
ENV_DIR = "ROCM_CONSOLE_SIM_DIR"
ENV_VRAM = "ROCM_CONSOLE_SIM_GPU_VRAM_MB"
DEFAULT_VRAM_MB = 196592
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

HBM_BYTES_PER_S = 3.2e12
FLOPS = 6.0e14

TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
               10.0, 20.0, 40.0, 80.0]
REQUEST_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                   60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
ITERATION_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")

ROUTES = [
    ("/openapi.json", "GET, HEAD"), ("/docs", "GET, HEAD"), ("/docs/oauth2-redirect", "GET, HEAD"),
    ("/redoc", "GET, HEAD"), ("/load", "GET"), ("/version", "GET"), ("/health", "GET"),
    ("/metrics", "GET"), ("/tokenize", "POST"), ("/detokenize", "POST"), ("/v1/models", "GET"),
    ("/ping", "GET"), ("/ping", "POST"), ("/invocations", "POST"), ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"), ("/v1/responses", "POST"),
    ("/v1/responses/{response_id}", "GET"), ("/v1/responses/{response_id}/cancel", "POST"),
    ("/v1/messages", "POST"), ("/v1/messages/count_tokens", "POST"),
]

VOCAB = (" the", " of", " and", " to", " in", " a", " is", " that", " for", " it", " with", " as",
         " on", " by", " this", " from", " at", " which", " be", " are", " each", " more", " when",
         " model", " GPU", " memory", " token", " batch", " cache", " kernel", " layer", " tensor",
         " request", " latency", " throughput", " node", " partition", " compute", " serve",
         " data", " value", " time", " block", " queue", " stream", " weight", " graph", " rate",
         "ing", "ed", "s", "er", "ly", ",", ".", ",", ".", " AMD", " Instinct", " ROCm", " vLLM",
         " HIP", " bandwidth", " prefill", " decode", " scheduler", " engine", "\n")


# ----------------------------------------------------------------------------- log


class Log:
    """vLLM's log shapes: `(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:N] message`."""

    def __init__(self, world):
        self.pid = os.getpid()
        self.engine_pid = self.pid + 49
        self.worker_pid = self.pid + 89
        self.world = world

    @staticmethod
    def _emit(text, err=False):
        stream = sys.stderr if err else sys.stdout
        try:
            buf = getattr(stream, "buffer", None)
            if buf is not None:
                buf.write(text.encode("utf-8", "replace"))
                buf.flush()
            else:
                stream.write(text)
                stream.flush()
        except (OSError, ValueError):
            pass

    def tag(self, who):
        if who == "api":
            return "(APIServer pid=%d) " % self.pid
        if who == "engine":
            return "(EngineCore pid=%d) " % self.engine_pid
        return "(%s pid=%d) " % (self.worker_name(who), self.worker_pid + int(who))

    def worker_name(self, rank):
        return "Worker" if self.world == 1 else "Worker_TP%d" % int(rank)

    def __call__(self, who, level, src, msg=""):
        head = "%s%s %s [%s] " % (self.tag(who), level, time.strftime("%m-%d %H:%M:%S"), src)
        self._emit("".join(head + line + "\n" for line in str(msg).split("\n")))

    def block(self, who, level, src, lines):
        for line in lines:
            self(who, level, src, line)

    def tagged(self, who, lines):
        """Lines a child process wrote to its stderr (only the process tag, no level)."""
        tag = self.tag(who)
        self._emit("".join(tag + line + "\n" for line in lines), err=True)

    def raw(self, lines, err=False):
        if isinstance(lines, str):
            lines = [lines]
        self._emit("".join(line + "\n" for line in lines), err)

    def uvicorn(self, msg):
        self._emit("INFO:     %s\n" % msg, err=True)

    def access(self, client, method, target, version, status):
        self._emit('INFO:     %s - "%s %s HTTP/%s" %d %s\n'
                   % (client, method, target, version, status, REASONS.get(status, "")))


BANNER = [
    "",
    "       \u2588     \u2588     \u2588\u2584   \u2584\u2588",
    " \u2584\u2584 \u2584\u2588 \u2588     \u2588     \u2588 \u2580\u2584\u2580 \u2588  version {version}",
    "  \u2588\u2584\u2588\u2580 \u2588     \u2588     \u2588     \u2588  model   {model}",
    "   \u2580\u2580  \u2580\u2580\u2580\u2580\u2580 \u2580\u2580\u2580\u2580\u2580 \u2580     \u2580",
    "",
]


# ------------------------------------------------------------------------- arguments


def human_readable_int(text):
    """vLLM's integer parser: 32k = 32000, 32K = 32768, 1m = 1000000, 1M = 1048576."""
    m = re.match(r"^\s*(-?\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*$", str(text))
    if not m:
        raise ValueError(text)
    scale = {"": 1, "k": 1000, "K": 1024, "m": 10 ** 6, "M": 1 << 20, "g": 10 ** 9, "G": 1 << 30}
    return int(float(m.group(1)) * scale[m.group(2)])


DTYPES = ["auto", "half", "float16", "bfloat16", "float", "float32"]
KV_DTYPES = ["auto", "bfloat16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]

NON_DEFAULT_ORDER = [
    "model_tag", "host", "port", "uvicorn_log_level", "disable_uvicorn_access_log", "api_key",
    "chat_template", "disable_log_requests", "enable_log_requests", "model", "tokenizer",
    "tokenizer_mode", "trust_remote_code", "dtype", "seed", "max_model_len", "quantization",
    "enforce_eager", "max_seq_len_to_capture", "served_model_name", "generation_config",
    "load_format", "distributed_executor_backend", "pipeline_parallel_size",
    "tensor_parallel_size", "data_parallel_size", "enable_expert_parallel", "block_size",
    "gpu_memory_utilization", "swap_space", "kv_cache_dtype", "enable_prefix_caching",
    "max_num_batched_tokens", "max_num_seqs", "num_scheduler_steps", "enable_chunked_prefill",
    "async_scheduling", "compilation_config", "disable_log_stats",
]


def _flag(p, name, default=False):
    dest = name.replace("-", "_")
    p.add_argument("--" + name, dest=dest, action="store_true", default=default)
    p.add_argument("--no-" + name, dest=dest, action="store_false")


def serve_parser():
    p = argparse.ArgumentParser(
        prog="vllm serve", usage="vllm serve [model_tag] [options]", allow_abbrev=False,
        description="Launch a local OpenAI-compatible API server to serve LLM completions "
                    "via HTTP (rocm-console simulator: no GPU work is done).")
    p.add_argument("model_tag", nargs="?", default=None, help="The model tag to serve")
    p.add_argument("--host", default=None)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--uvicorn-log-level", default="info",
                   choices=["critical", "debug", "error", "info", "trace", "warning"])
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
    p.add_argument("--distributed-executor-backend", default=None,
                   choices=["external_launcher", "mp", "ray", "uni"])
    p.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--data-parallel-size", "-dp", type=int, default=1)
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


def _normalize(arg):
    """`--max_model_len=8` → `--max-model-len=8`, like vLLM's FlexibleArgumentParser."""
    if arg.startswith("--") and len(arg) > 2:
        key, eq, value = arg.partition("=")
        return key.replace("_", "-") + eq + value
    return arg


def parse_serve_args(argv):
    parser = serve_parser()
    args, extra = parser.parse_known_args([_normalize(a) for a in argv])
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


# ----------------------------------------------------------------------- the model


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
    for limit, shape in ((1.0, (16, 8, 64, 2048)), (4.0, (28, 8, 128, 3072)),
                         (10.0, (32, 8, 128, 4096)), (20.0, (40, 8, 128, 5120)),
                         (40.0, (64, 8, 128, 5120)), (90.0, (80, 8, 128, 8192)),
                         (160.0, (88, 8, 128, 12288)), (300.0, (94, 4, 128, 4096)),
                         (500.0, (126, 8, 128, 16384))):
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
        self.kv_per_token = (max(1, layers // self.pp) * max(1, kv_heads // self.tp)
                             * head_dim * 2 * kv_bytes)
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


# ------------------------------------------------------------------ processes.json


def _pid_alive(pid):
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:  # an unreaped zombie still answers kill(0)
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class GpuRegistry:
    """This process's entries in the simulated node's processes.json."""

    def __init__(self, folder, gpus):
        self.folder = folder or None
        self.path = os.path.join(folder, "processes.json") if folder else None
        self.gpus = list(gpus)
        self.pid = os.getpid()
        self.started = time.time()
        self.active = False

    def _read(self):
        try:
            with open(self.path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return []

    @staticmethod
    def _entries(data):
        entries = data.get("processes", []) if isinstance(data, dict) else data
        return entries if isinstance(entries, list) else []

    def _update(self, mine):
        if not self.path:
            return
        try:
            os.makedirs(self.folder, exist_ok=True)
            with open(self.path + ".lock", "a") as lock:
                if fcntl is not None:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                data = self._read()
                entries = [e for e in self._entries(data)
                           if not (isinstance(e, dict) and e.get("pid") == self.pid)] + mine
                if isinstance(data, dict):
                    data = dict(data)
                    data["processes"] = entries
                else:
                    data = entries
                tmp = "%s.%d.tmp" % (self.path, self.pid)
                with open(tmp, "w") as f:
                    json.dump(data, f, indent=1, sort_keys=True)
                os.replace(tmp, self.path)
        except OSError:
            pass

    def register(self, vram_bytes):
        if not self.path:
            return
        self.active = True
        self._update([{"pid": self.pid, "name": "python3", "gpu": g, "vram_bytes": int(vram_bytes),
                       "started": self.started} for g in self.gpus])

    def unregister(self):
        if self.active:
            self.active = False
            self._update([])

    def used_by_others(self):
        """VRAM bytes that other live (or sticky) simulated processes hold on our GPUs."""
        used = dict((g, 0) for g in self.gpus)
        if not self.path:
            return used
        for e in self._entries(self._read()):
            if not isinstance(e, dict) or e.get("pid") == self.pid:
                continue
            if not (e.get("sticky") or _pid_alive(e.get("pid"))):
                continue
            gpus = e.get("gpus", e.get("gpu"))
            for g in gpus if isinstance(gpus, list) else [gpus]:
                if g in used:
                    used[g] += int(e.get("vram_bytes", 0) or 0)
        return used


def visible_gpus(count):
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        raw = os.environ.get("HIP_VISIBLE_DEVICES")
    if raw is None:
        return list(range(count))
    out = []
    for part in raw.split(","):
        part = part.strip()
        if part.isdigit():
            out.append(int(part))
    return out[:count]


# --------------------------------------------------------------------------- metrics


def go_float(d):
    """prometheus_client's floatToGoString."""
    d = float(d)
    if d == float("inf"):
        return "+Inf"
    if d == float("-inf"):
        return "-Inf"
    if d != d:
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = "{}.{}{}".format(s[0], s[1:dot], s[dot + 1:]).rstrip("0.")
        return "{}e+0{}".format(mantissa, dot - 1)
    return s


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels):
    if not labels:
        return ""
    return "{" + ",".join('%s="%s"' % (k, _escape(labels[k])) for k in sorted(labels)) + "}"


def one_two_five(max_value):
    out, exponent = [], 0
    while True:
        for m in (1, 2, 5):
            value = m * 10 ** exponent
            if value > max_value:
                return out
            out.append(value)
        exponent += 1


class _Child:
    __slots__ = ("labels", "value", "counts", "sum", "count", "created")

    def __init__(self, labels, nbuckets):
        self.labels = labels
        self.value = 0.0
        self.counts = [0] * nbuckets
        self.sum = 0.0
        self.count = 0
        self.created = time.time()

    def inc(self, amount=1.0):
        self.value += amount

    def observe(self, value, bounds):
        i = bisect.bisect_left(bounds, value)
        if i < len(self.counts):
            self.counts[i] += 1
        self.sum += value
        self.count += 1


class Family:
    def __init__(self, name, doc, kind, buckets=None, base=True, value_fn=None):
        self.name = name
        self.doc = doc
        self.kind = kind
        self.bounds = [float(b) for b in buckets] if buckets else []
        self.base = base
        self.value_fn = value_fn
        self.children = collections.OrderedDict()

    def labels(self, **extra):
        key = tuple(sorted(extra.items()))
        child = self.children.get(key)
        if child is None:
            child = self.children[key] = _Child(extra, len(self.bounds))
        return child

    def inc(self, amount=1.0):
        self.labels().inc(amount)

    def observe(self, value):
        self.labels().observe(value, self.bounds)

    def render(self, out, base):
        def lab(extra, **more):
            merged = dict(base) if self.base else {"engine": base["engine"]}
            merged.update(extra)
            merged.update(more)
            return _labels(merged)

        if self.kind == "gauge":
            out.append("# HELP %s %s" % (self.name, self.doc))
            out.append("# TYPE %s gauge" % self.name)
            values = self.value_fn()
            if not isinstance(values, list):
                values = [({}, values)]
            for extra, value in values:
                out.append("%s%s %s" % (self.name, lab(extra), go_float(value)))
            return
        if self.kind == "counter":
            total = self.name + "_total"
            out.append("# HELP %s %s" % (total, self.doc))
            out.append("# TYPE %s counter" % total)
            for c in self.children.values():
                out.append("%s%s %s" % (total, lab(c.labels), go_float(c.value)))
        else:
            out.append("# HELP %s %s" % (self.name, self.doc))
            out.append("# TYPE %s histogram" % self.name)
            for c in self.children.values():
                cumulative = 0
                for bound, n in zip(self.bounds, c.counts):
                    cumulative += n
                    out.append("%s_bucket%s %s" % (self.name, lab(c.labels, le=go_float(bound)),
                                                   go_float(cumulative)))
                out.append("%s_bucket%s %s" % (self.name, lab(c.labels, le="+Inf"), go_float(c.count)))
                out.append("%s_count%s %s" % (self.name, lab(c.labels), go_float(c.count)))
                out.append("%s_sum%s %s" % (self.name, lab(c.labels), go_float(c.sum)))
        created = self.name + "_created"
        out.append("# HELP %s %s" % (created, self.doc))
        out.append("# TYPE %s gauge" % created)
        for c in self.children.values():
            out.append("%s%s %s" % (created, lab(c.labels), go_float(c.created)))


class Metrics:
    """vLLM V1's Prometheus families (labels model_name and engine="0")."""

    def __init__(self, model_name, max_model_len, engine, cache_info):
        self.base = {"engine": "0", "model_name": model_name}
        self.engine = engine
        tokens = one_two_five(max_model_len)
        F = Family
        self.running = F("vllm:num_requests_running", "Number of requests in model execution batches.",
                         "gauge", value_fn=lambda: len(engine.running))
        self.waiting = F("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                         "gauge", value_fn=lambda: len(engine.waiting))
        self.waiting_by_reason = F(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
            "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, "
            "blocked status). Sum of all reasons equals vllm:num_requests_waiting.", "gauge",
            value_fn=lambda: [({"reason": "capacity"}, len(engine.waiting)), ({"reason": "deferred"}, 0)])
        self.sleep_state = F(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
            "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.", "gauge",
            value_fn=lambda: [({"sleep_state": "awake"}, 1), ({"sleep_state": "weights_offloaded"}, 0),
                              ({"sleep_state": "discard_all"}, 0)])
        self.kv_usage = F("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                          "gauge", value_fn=engine.kv_usage)
        self.prefix_queries = F("vllm:prefix_cache_queries",
                                "Prefix cache queries, in terms of number of queried tokens.", "counter")
        self.prefix_hits = F("vllm:prefix_cache_hits",
                             "Prefix cache hits, in terms of number of cached tokens.", "counter")
        self.preemptions = F("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                             "counter")
        self.prompt_tokens = F("vllm:prompt_tokens", "Number of prefill tokens processed.", "counter")
        self.generation_tokens = F("vllm:generation_tokens", "Number of generation tokens processed.",
                                   "counter")
        self.success = F("vllm:request_success", "Count of successfully processed requests.", "counter")
        for reason in FINISH_REASONS:
            self.success.labels(finished_reason=reason)
        self.req_prompt = F("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
                            "histogram", tokens)
        self.req_generation = F("vllm:request_generation_tokens", "Number of generation tokens processed.",
                                "histogram", tokens)
        self.iteration = F("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                           "histogram", ITERATION_BUCKETS)
        self.max_gen = F("vllm:request_max_num_generation_tokens",
                         "Histogram of maximum number of requested generation tokens.", "histogram", tokens)
        self.params_n = F("vllm:request_params_n", "Histogram of the n request parameter.", "histogram",
                          [1, 2, 5, 10, 20])
        self.params_max_tokens = F("vllm:request_params_max_tokens",
                                   "Histogram of the max_tokens request parameter.", "histogram", tokens)
        self.ttft = F("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                      "histogram", TTFT_BUCKETS)
        self.itl = F("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                     "histogram", ITL_BUCKETS)
        self.tpot = F("vllm:request_time_per_output_token_seconds",
                      "Histogram of time_per_output_token_seconds per request.", "histogram", ITL_BUCKETS)
        self.e2e = F("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                     "histogram", REQUEST_BUCKETS)
        self.queue = F("vllm:request_queue_time_seconds",
                       "Histogram of time spent in WAITING phase for request.", "histogram", REQUEST_BUCKETS)
        self.inference = F("vllm:request_inference_time_seconds",
                           "Histogram of time spent in RUNNING phase for request.", "histogram",
                           REQUEST_BUCKETS)
        self.prefill = F("vllm:request_prefill_time_seconds",
                         "Histogram of time spent in PREFILL phase for request.", "histogram", REQUEST_BUCKETS)
        self.decode = F("vllm:request_decode_time_seconds",
                        "Histogram of time spent in DECODE phase for request.", "histogram", REQUEST_BUCKETS)
        self.req_preemptions = F("vllm:request_num_preemptions",
                                 "Histogram of the number of times a request was preempted.", "histogram",
                                 [0, 1, 2, 5, 10, 20, 50])
        self.cache_info = F("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", "gauge",
                            base=False, value_fn=lambda: [(cache_info, 1)])
        self.families = [self.running, self.waiting, self.waiting_by_reason, self.sleep_state,
                         self.kv_usage, self.prefix_queries, self.prefix_hits, self.preemptions,
                         self.prompt_tokens, self.generation_tokens, self.success, self.req_prompt,
                         self.req_generation, self.iteration, self.max_gen, self.params_n,
                         self.params_max_tokens, self.ttft, self.itl, self.tpot, self.e2e, self.queue,
                         self.inference, self.prefill, self.decode, self.req_preemptions, self.cache_info]
        for fam in self.families:  # unlabeled series exist (at 0) from the start, like V1
            if fam.kind != "gauge" and fam is not self.success:
                fam.labels()

    def render(self):
        out = []
        for fam in self.families:
            fam.render(out, self.base)
        return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- engine


class Request:
    def __init__(self, chat, prompt_tokens, max_tokens, target, finish, stream, seed, loop):
        self.rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16]
        self.chat = chat
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.target = target
        self.finish = finish
        self.stream = stream
        self.rng = random.Random(seed)
        self.created = int(time.time())
        self.arrival = self.scheduled = self.first_token = self.last_token = None
        self.prefill_left = prompt_tokens
        self.kv = 0
        self.blocks = 0
        self.generated = 0
        self.preemptions = 0
        self.state = "new"
        self.reason = None
        self.texts = []
        self.events = asyncio.Queue() if stream else None
        self.done = loop.create_future()

    def next_text(self):
        if self.generated == 1 and not self.chat:
            return self.rng.choice(VOCAB).lstrip(" ") or "The"
        return self.rng.choice(VOCAB)


class Engine:
    """A continuous-batching scheduler whose steps take the time the model profile says."""

    def __init__(self, prof, args, num_blocks, block_size):
        self.prof = prof
        self.max_seqs = args.max_num_seqs
        self.max_batched = args.max_num_batched_tokens
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.free_blocks = num_blocks
        self.waiting = collections.deque()
        self.running = []
        self.wake = asyncio.Event()
        self.rng = random.Random(20251121)
        self.metrics = None
        self.dead = False
        self.window_prompt = 0
        self.window_generation = 0

    def kv_usage(self):
        if self.num_blocks <= 0:
            return 0.0
        return (self.num_blocks - self.free_blocks) / float(self.num_blocks)

    def _blocks(self, tokens):
        return -(-tokens // self.block_size)

    def submit(self, req):
        req.arrival = asyncio.get_event_loop().time()
        req.state = "waiting"
        self.waiting.append(req)
        self.wake.set()

    def abort(self, req, reason="abort"):
        if req.state in ("waiting", "running"):
            self._finish(req, reason, asyncio.get_event_loop().time())

    def kill(self):
        """The engine died: every request ends with an error."""
        self.dead = True
        for req in list(self.running) + list(self.waiting):
            self.abort(req, "error")

    def _preempt(self, req):
        self.running.remove(req)
        self.free_blocks += req.blocks
        req.blocks = req.kv = 0
        req.prefill_left = req.prompt_tokens + req.generated
        req.preemptions += 1
        req.state = "waiting"
        self.metrics.preemptions.inc()
        self.waiting.appendleft(req)

    def _grow(self, req, tokens):
        need = self._blocks(tokens) - req.blocks
        while need > self.free_blocks:
            victim = self.running[-1]
            self._preempt(victim)
            if victim is req:
                return False
        if need > 0:
            self.free_blocks -= need
            req.blocks += need
        return True

    def _schedule(self, now):
        budget = self.max_batched
        preempted = self.metrics.preemptions.labels().value
        plan = []
        n_decode = n_prefill = ctx = 0
        for req in list(self.running):
            if req.state != "running":
                continue  # preempted while growing an older request
            if budget <= 0:
                break
            n = min(req.prefill_left, budget) if req.prefill_left > 0 else 1
            if not self._grow(req, req.kv + n):
                continue
            req.kv += n
            if req.prefill_left > 0:
                req.prefill_left -= n
                plan.append((req, True))
                n_prefill += n
            else:
                plan.append((req, False))
                n_decode += 1
                ctx += req.kv
            budget -= n
        if self.metrics.preemptions.labels().value != preempted:
            return plan, n_decode, n_prefill, ctx  # like V1: no new admissions in a step that preempted
        while self.waiting and budget > 0 and len(self.running) < self.max_seqs:
            req = self.waiting[0]
            n = min(req.prefill_left, budget)
            need = self._blocks(req.kv + n) - req.blocks
            if need > self.free_blocks:
                break
            self.waiting.popleft()
            self.free_blocks -= need
            req.blocks += need
            req.kv += n
            req.prefill_left -= n
            req.state = "running"
            if req.scheduled is None:
                req.scheduled = now
            self.running.append(req)
            plan.append((req, True))
            n_prefill += n
            budget -= n
        return plan, n_decode, n_prefill, ctx

    async def run(self):
        loop = asyncio.get_event_loop()
        while True:
            if not self.running and not self.waiting:
                self.wake.clear()
                await self.wake.wait()
                continue
            plan, n_decode, n_prefill, ctx = self._schedule(loop.time())
            if not plan:
                self.wake.clear()
                await self.wake.wait()
                continue
            dt = self.prof.step_time(n_decode, n_prefill, ctx) * (0.95 + 0.1 * self.rng.random())
            await asyncio.sleep(dt)
            now = loop.time()
            self.metrics.iteration.observe(n_decode + n_prefill)
            for req, prefill in plan:
                if req.state != "running" or (prefill and req.prefill_left > 0):
                    continue
                self._emit(req, now)

    def _emit(self, req, now):
        m = self.metrics
        first = req.generated == 0
        req.generated += 1
        text = req.next_text()
        m.generation_tokens.inc()
        self.window_generation += 1
        if first:
            req.first_token = now
            m.ttft.observe(now - req.arrival)
            m.prompt_tokens.inc(req.prompt_tokens)
            m.prefix_queries.inc(req.prompt_tokens)
            self.window_prompt += req.prompt_tokens
        else:
            m.itl.observe(now - req.last_token)
        req.last_token = now
        fin = req.finish if req.generated >= req.target else None
        req.texts.append(text)
        if req.stream:
            req.events.put_nowait((text, fin))
        if fin:
            self._finish(req, fin, now)

    def _finish(self, req, reason, now):
        if req.state == "running":
            self.running.remove(req)
            self.free_blocks += req.blocks
            req.blocks = 0
        elif req.state == "waiting":
            self.waiting.remove(req)
        req.state = "done"
        req.reason = reason
        m = self.metrics
        m.success.labels(finished_reason=reason).inc()
        if reason in ("stop", "length"):
            scheduled = req.scheduled if req.scheduled is not None else now
            first = req.first_token if req.first_token is not None else now
            m.e2e.observe(now - req.arrival)
            m.queue.observe(scheduled - req.arrival)
            m.inference.observe(now - scheduled)
            m.prefill.observe(first - scheduled)
            m.decode.observe(now - first)
            m.req_prompt.observe(req.prompt_tokens)
            m.req_generation.observe(req.generated)
            m.max_gen.observe(req.max_tokens)
            m.params_n.observe(1)
            m.params_max_tokens.observe(req.max_tokens)
            m.req_preemptions.observe(req.preemptions)
            if req.generated > 1:
                m.tpot.observe((now - first) / (req.generated - 1))
        elif req.stream:
            req.events.put_nowait((None, reason))
        if not req.done.done():
            req.done.set_result(reason)


# ------------------------------------------------------------------------------ HTTP


REASONS = {100: "Continue", 200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
           405: "Method Not Allowed", 413: "Request Entity Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}
MAX_BODY = 64 * MiB
JSON_TYPE = "application/json"
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HTTP_ROUTES = {"/health": ("GET",), "/ping": ("GET", "POST"), "/version": ("GET",),
               "/v1/models": ("GET",), "/metrics": ("GET",), "/load": ("GET",), "/tokenize": ("POST",),
               "/v1/completions": ("POST",), "/v1/chat/completions": ("POST",)}


class BadRequest(Exception):
    def __init__(self, message, status=400, kind="BadRequestError", param=None):
        Exception.__init__(self, message)
        self.status = status
        self.body = {"error": {"message": message, "type": kind, "param": param, "code": status}}


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def count_text_tokens(text):
    text = str(text or "")
    return max(len(text.split()), (len(text) + 3) // 4) if text else 0


def prompt_tokens_of(prompt):
    if isinstance(prompt, str):
        return max(1, count_text_tokens(prompt))
    if isinstance(prompt, list) and prompt:
        if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return len(prompt)
        if len(prompt) == 1:
            return prompt_tokens_of(prompt[0])
        raise BadRequest("Batched prompts are not simulated by rocm-console's vLLM simulator.")
    raise BadRequest("prompt: Field required; a string or a list of token ids")


def chat_tokens_of(messages):
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: Field required; a non-empty list")
    n = 1
    for msg in messages:
        if not isinstance(msg, dict):
            raise BadRequest("messages: each message must be an object")
        content = msg.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        n += 4 + count_text_tokens(content)
    return n + 3


class HttpServer:
    def __init__(self, sim):
        self.sim = sim
        self.connections = set()

    # -- plumbing

    async def handle(self, reader, writer):
        peer = writer.get_extra_info("peername")
        client = "%s:%s" % (peer[0], peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else "-"
        self.connections.add(writer)
        try:
            while True:
                try:
                    head = await self._read_head(reader)
                except (ValueError, UnicodeError, asyncio.LimitOverrunError):
                    await self._send(writer, (client, "-", "-", "1.1"), 400, b"Invalid HTTP request received.",
                                     "text/plain; charset=utf-8", False, log=False)
                    break
                if head is None:
                    break
                method, target, version, headers = head
                ctx = (client, method, target, version)
                keep = self._keep_alive(version, headers)
                try:
                    body = await self._read_body(reader, writer, headers, version)
                except (ValueError, asyncio.LimitOverrunError):
                    await self._send(writer, ctx, 400, {"detail": "Invalid request body"}, JSON_TYPE, False)
                    break
                if not await self.dispatch(writer, ctx, headers, body, keep):
                    break
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.connections.discard(writer)
            try:
                writer.close()
            except Exception:
                pass

    @staticmethod
    async def _read_head(reader):
        line = await reader.readline()
        if not line:
            return None
        if not line.endswith(b"\n"):
            raise ValueError("truncated request line")
        parts = line.decode("latin-1").strip().split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise ValueError("bad request line")
        headers = {}
        size = 0
        while True:
            h = await reader.readline()
            size += len(h)
            if size > 65536:
                raise ValueError("headers too large")
            if h in (b"\r\n", b"\n"):
                break
            if not h:
                raise ValueError("truncated headers")
            name, sep, value = h.decode("latin-1").partition(":")
            if not sep:
                raise ValueError("bad header")
            headers[name.strip().lower()] = value.strip()
        return parts[0].upper(), parts[1], parts[2][5:], headers

    @staticmethod
    async def _read_body(reader, writer, headers, version):
        if headers.get("expect", "").lower() == "100-continue" and version == "1.1":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts, total = [], 0
            while True:
                size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                total += size
                if total > MAX_BODY:
                    raise ValueError("body too large")
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
        length = int(headers.get("content-length") or 0)
        if length < 0 or length > MAX_BODY:
            raise ValueError("bad content-length")
        return await reader.readexactly(length) if length else b""

    @staticmethod
    def _keep_alive(version, headers):
        conn = headers.get("connection", "").lower()
        if version == "1.0":
            return "keep-alive" in conn
        return "close" not in conn

    async def _send(self, writer, ctx, status, body, ctype=JSON_TYPE, keep=True, log=True, extra=()):
        if isinstance(body, (dict, list)):
            body = dumps(body)
        lines = ["HTTP/1.1 %d %s" % (status, REASONS.get(status, "")),
                 "date: " + email.utils.formatdate(usegmt=True), "server: uvicorn",
                 "content-length: %d" % len(body)]
        if ctype:
            lines.append("content-type: " + ctype)
        lines.extend(extra)
        if not keep:
            lines.append("connection: close")
        if log:  # uvicorn logs when the response starts
            self._access(ctx, status)
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
        return keep

    def _access(self, ctx, status):
        if not self.sim.args.disable_uvicorn_access_log:
            self.sim.log.access(ctx[0], ctx[1], ctx[2], ctx[3], status)

    # -- routes

    async def dispatch(self, writer, ctx, headers, body, keep):
        method, target = ctx[1], ctx[2]
        path = target.split("?", 1)[0]
        sim = self.sim
        if path not in HTTP_ROUTES:
            return await self._send(writer, ctx, 404, {"detail": "Not Found"}, keep=keep)
        if method not in HTTP_ROUTES[path]:
            return await self._send(writer, ctx, 405, {"detail": "Method Not Allowed"}, keep=keep,
                                    extra=("allow: " + ", ".join(HTTP_ROUTES[path]),))
        if sim.args.api_key and path.startswith("/v1/"):
            if headers.get("authorization", "") != "Bearer " + sim.args.api_key:
                return await self._send(writer, ctx, 401, {"error": "Unauthorized"}, keep=keep)
        if path in ("/health", "/ping"):
            return await self._send(writer, ctx, 503 if sim.engine.dead else 200, b"", None, keep)
        if path == "/version":
            return await self._send(writer, ctx, 200, {"version": VERSION}, keep=keep)
        if path == "/v1/models":
            return await self._send(writer, ctx, 200, sim.models_json(), keep=keep)
        if path == "/metrics":
            text = "" if sim.args.disable_log_stats else sim.metrics.render()
            return await self._send(writer, ctx, 200, text.encode("utf-8"), METRICS_TYPE, keep)
        if path == "/load":
            load = len(sim.engine.running) + len(sim.engine.waiting)
            return await self._send(writer, ctx, 200, {"server_load": load}, keep=keep)
        try:
            data = self._json(body)
            if path == "/tokenize":
                return await self._send(writer, ctx, 200, self._tokenize(data), keep=keep)
            return await self.generate(writer, ctx, data, path == "/v1/chat/completions", keep)
        except BadRequest as exc:
            return await self._send(writer, ctx, exc.status, exc.body, keep=keep)
        except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong type
            exc = BadRequest("Invalid request: %s" % exc)
            return await self._send(writer, ctx, exc.status, exc.body, keep=keep)

    @staticmethod
    def _json(body):
        try:
            data = json.loads(body.decode("utf-8")) if body else None
        except (ValueError, UnicodeError) as exc:
            raise BadRequest("JSON decode error: %s" % exc)
        if not isinstance(data, dict):
            raise BadRequest("The request body must be a JSON object")
        return data

    def _tokenize(self, data):
        if "messages" in data:
            n = chat_tokens_of(data["messages"])
            seed = json.dumps(data["messages"], sort_keys=True)
        else:
            n = prompt_tokens_of(data.get("prompt"))
            seed = json.dumps(data.get("prompt"))
        rng = random.Random(zlib.crc32(seed.encode("utf-8")))
        return {"count": n, "max_model_len": self.sim.max_model_len,
                "tokens": [rng.randrange(100, 150000) for _ in range(n)], "token_strs": None}

    def _check_model(self, data):
        model = data.get("model")
        if model is not None and model not in self.sim.served:
            raise BadRequest("The model `%s` does not exist." % model, 404, "NotFoundError", "model")

    async def generate(self, writer, ctx, data, chat, keep):
        sim = self.sim
        self._check_model(data)
        if sim.engine.dead:
            raise BadRequest("EngineCore encountered an issue. See stack trace (above) for the root cause.",
                             500, "InternalServerError")
        limit = sim.max_model_len
        if chat:
            prompt_tokens = chat_tokens_of(data.get("messages"))
            seed_text = json.dumps(data.get("messages"), sort_keys=True)
            max_tokens = data.get("max_completion_tokens")
            if max_tokens is None:
                max_tokens = data.get("max_tokens")
        else:
            prompt_tokens = prompt_tokens_of(data.get("prompt"))
            seed_text = json.dumps(data.get("prompt"))
            max_tokens = data.get("max_tokens", 16)
            if max_tokens is None:
                max_tokens = 16
        n = data.get("n", 1)
        if n not in (1, None):
            raise BadRequest("n > 1 is not simulated by rocm-console's vLLM simulator.")
        if prompt_tokens > limit:
            raise BadRequest("This model's maximum context length is %d tokens. However, your request has %d "
                             "input tokens. Please reduce the length of the input messages."
                             % (limit, prompt_tokens))
        if max_tokens is None:
            max_tokens = limit - prompt_tokens
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise BadRequest("max_tokens must be at least 1, got %s." % (max_tokens,), param="max_tokens")
        if prompt_tokens + max_tokens > limit:
            raise BadRequest("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum "
                             "context length is %d tokens and your request has %d input tokens (%d > %d - %d)."
                             % (max_tokens, limit, prompt_tokens, max_tokens, limit, prompt_tokens),
                             param="max_tokens")
        seed = zlib.crc32(seed_text.encode("utf-8")) ^ int(data.get("seed") or 0)
        target, finish = max_tokens, "length"
        if not data.get("ignore_eos"):
            natural = max(24 + seed % 480, int(data.get("min_tokens") or 0))
            if natural < max_tokens:
                target, finish = natural, "stop"
        stream = bool(data.get("stream"))
        options = data.get("stream_options") or {}
        req = Request(chat, prompt_tokens, max_tokens, target, finish, stream, seed, asyncio.get_event_loop())
        sim.engine.submit(req)
        if stream:
            return await self._stream(writer, ctx, req, keep, bool(options.get("include_usage")),
                                      bool(options.get("continuous_usage_stats")))
        reason = await req.done
        if reason in ("abort", "error"):
            raise BadRequest("EngineCore encountered an issue. See stack trace (above) for the root cause.",
                             500, "InternalServerError")
        text = "".join(req.texts)
        usage = {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens + req.generated,
                 "completion_tokens": req.generated, "prompt_tokens_details": None}
        model = sim.served[0]
        if chat:
            body = {"id": req.rid, "object": "chat.completion", "created": req.created, "model": model,
                    "choices": [{"index": 0, "message": {
                        "role": "assistant", "content": text, "refusal": None, "annotations": None,
                        "audio": None, "function_call": None, "tool_calls": [], "reasoning_content": None},
                        "logprobs": None, "finish_reason": reason, "stop_reason": None, "token_ids": None}],
                    "service_tier": None, "system_fingerprint": None, "usage": usage,
                    "prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None}
        else:
            if data.get("echo") and isinstance(data.get("prompt"), str):
                text = data["prompt"] + text
            body = {"id": req.rid, "object": "text_completion", "created": req.created, "model": model,
                    "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": reason,
                                 "stop_reason": None, "token_ids": None, "prompt_logprobs": None,
                                 "prompt_token_ids": None}],
                    "service_tier": None, "system_fingerprint": None, "usage": usage,
                    "kv_transfer_params": None}
        return await self._send(writer, ctx, 200, body, keep=keep)

    async def _stream(self, writer, ctx, req, keep, include_usage, continuous):
        http11 = ctx[3] == "1.1"
        lines = ["HTTP/1.1 200 OK", "date: " + email.utils.formatdate(usegmt=True), "server: uvicorn",
                 "content-type: text/event-stream; charset=utf-8"]
        lines.append("transfer-encoding: chunked" if http11 else "connection: close")
        self._access(ctx, 200)
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        model = self.sim.served[0]
        obj = "chat.completion.chunk" if req.chat else "text_completion"

        def send(payload):
            data = b"data: " + payload + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data) if http11 else data)

        def usage():
            return {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens + req.generated,
                    "completion_tokens": req.generated}

        try:
            if req.chat:
                send(dumps({"id": req.rid, "object": obj, "created": req.created, "model": model,
                            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                         "logprobs": None, "finish_reason": None}],
                            "prompt_token_ids": None, "prompt_text": None}))
            while True:
                text, fin = await req.events.get()
                if writer.is_closing():
                    raise ConnectionResetError("client went away")
                if text is None:  # aborted, or the engine died
                    return False
                if req.chat:
                    choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": fin}
                else:
                    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": fin,
                              "stop_reason": None, "prompt_token_ids": None}
                if fin or not req.chat:
                    choice["stop_reason"] = None
                choice["token_ids"] = None
                chunk = {"id": req.rid, "object": obj, "created": req.created, "model": model,
                         "choices": [choice]}
                if continuous:
                    chunk["usage"] = usage()
                send(dumps(chunk))
                await writer.drain()
                if fin:
                    break
            if include_usage:
                send(dumps({"id": req.rid, "object": obj, "created": req.created, "model": model,
                            "choices": [], "usage": usage(), "system_fingerprint": FINGERPRINT}))
            send(b"[DONE]")
            if http11:
                writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, OSError):
            self.sim.engine.abort(req)
            return False
        return keep and http11


# ----------------------------------------------------------------- failure texts


def _frame(path, line, func, code=None, caret=None):
    out = ['  File "%s", line %d, in %s' % (path, line, func)]
    if code is not None:
        out.append("    " + code)
        if caret:
            start = code.index(caret)
            out.append(" " * (4 + start) + "^" * len(caret))
    return out


def _v(rel):
    return "%s/vllm/%s" % (SITE, rel)


def api_head_frames():
    return (["Traceback (most recent call last):"]
            + _frame("/usr/local/bin/vllm", 8, "<module>", "sys.exit(main())", "main()")
            + _frame(_v("entrypoints/cli/main.py"), 120, "main", "args.dispatch_function(args)")
            + _frame(_v("entrypoints/cli/serve.py"), 156, "cmd", "uvloop.run(run_server(args))")
            + _frame(SITE + "/uvloop/__init__.py", 96, "run", "return __asyncio.run(")
            + _frame(PYLIB + "/asyncio/runners.py", 195, "run", "return runner.run(main)",
                     "runner.run(main)")
            + _frame(PYLIB + "/asyncio/runners.py", 118, "run",
                     "return self._loop.run_until_complete(task)", "self._loop.run_until_complete(task)")
            + ['  File "uvloop/loop.pyx", line 1518, in uvloop.loop.Loop.run_until_complete']
            + _frame(SITE + "/uvloop/__init__.py", 48, "wrapper", "return await main", "await main"))


def _aenter():
    return _frame(PYLIB + "/contextlib.py", 210, "__aenter__", "return await anext(self.gen)",
                  "await anext(self.gen)")


def api_engine_frames():
    entry = _v("entrypoints/launchers/api_server/entry.py")
    return (_frame(entry, 177, "run_server", "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)")
            + _frame(entry, 195, "run_server_worker", "async with build_async_engine_client(")
            + _aenter()
            + _frame(entry, 61, "build_async_engine_client", "async with build_async_engine_client_from_engine_args(")
            + _aenter())


def port_in_use_traceback(exc):
    launcher = _v("entrypoints/launchers/launcher.py")
    return (api_head_frames()
            + _frame(_v("entrypoints/launchers/api_server/entry.py"), 176, "run_server",
                     "listen_address, sock = setup_server(args, reuse_port=False)",
                     "setup_server(args, reuse_port=False)")
            + _frame(_v("tracing/otel.py"), 175, "sync_wrapper", "return func(*args, **kwargs)",
                     "func(*args, **kwargs)")
            + _frame(launcher, 398, "setup_server", "sock = create_server_socket(sock_addr, reuse_port=reuse_port)",
                     "create_server_socket(sock_addr, reuse_port=reuse_port)")
            + _frame(launcher, 348, "create_server_socket", "sock.bind(addr)")
            + ["OSError: [Errno %d] %s" % (exc.errno or 0, os.strerror(exc.errno or 0))])


def config_traceback(cls, details):
    """A pydantic ValidationError raised while building the engine config."""
    entry = _v("entrypoints/launchers/api_server/entry.py")
    arg_utils = _v("engine/arg_utils.py")
    return (api_head_frames() + api_engine_frames()
            + _frame(entry, 83, "build_async_engine_client_from_engine_args",
                     "vllm_config = engine_args.create_engine_config(usage_context=usage_context)",
                     "engine_args.create_engine_config(usage_context=usage_context)")
            + _frame(arg_utils, 2240, "create_engine_config", "model_config = self.create_model_config()",
                     "self.create_model_config()")
            + _frame(arg_utils, 1955, "create_model_config", "return %s(" % cls, cls + "(")
            + _frame(SITE + "/pydantic/_internal/_dataclasses.py", 121, "__init__",
                     "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)")
            + ["pydantic_core._pydantic_core.ValidationError: 1 validation error for %s" % cls] + details)


def engine_start_traceback():
    """The APIServer's traceback after the engine core failed to start."""
    core_client = _v("v1/engine/core_client.py")
    utils = _v("v1/engine/utils.py")
    async_llm = _v("v1/engine/async_llm.py")
    return (api_head_frames() + api_engine_frames()
            + _frame(_v("entrypoints/launchers/api_server/entry.py"), 97,
                     "build_async_engine_client_from_engine_args", "async_llm = AsyncLLM.from_vllm_config(",
                     "AsyncLLM.from_vllm_config(")
            + _frame(async_llm, 217, "from_vllm_config", "return cls(", "cls(")
            + _frame(async_llm, 146, "__init__", "self.engine_core = EngineCoreClient.make_async_mp_client(",
                     "EngineCoreClient.make_async_mp_client(")
            + _frame(_v("tracing/otel.py"), 178, "sync_wrapper", "return func(*args, **kwargs)",
                     "func(*args, **kwargs)")
            + _frame(core_client, 130, "make_async_mp_client", "return AsyncMPClient(*client_args)",
                     "AsyncMPClient(*client_args)")
            + _frame(core_client, 1052, "__init__", "super().__init__(")
            + _frame(core_client, 620, "__init__", "with launch_core_engines(")
            + _frame(PYLIB + "/contextlib.py", 144, "__exit__", "next(self.gen)")
            + _frame(utils, 1119, "launch_core_engines", "wait_for_engine_startup(")
            + _frame(utils, 1178, "wait_for_engine_startup", "raise RuntimeError(")
            + ["RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"])


def engine_core_frames(stage):
    core = _v("v1/engine/core.py")
    frames = (_frame(core, 1103, "run_engine_core",
                     "engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
                     "EngineCoreProc(*args, engine_index=dp_rank, **kwargs)")
              + _frame(_v("tracing/otel.py"), 178, "sync_wrapper", "return func(*args, **kwargs)",
                       "func(*args, **kwargs)")
              + _frame(core, 869, "__init__", "super().__init__("))
    if stage == "init":
        executor = _v("v1/executor/multiproc_executor.py")
        return (frames
                + _frame(core, 110, "__init__", "self.model_executor = executor_class(vllm_config)",
                         "executor_class(vllm_config)")
                + _frame(_v("v1/executor/abstract.py"), 103, "__init__", "self._init_executor()")
                + _frame(executor, 176, "_init_executor", "self.workers = WorkerProc.wait_for_ready(unready_workers)",
                         "WorkerProc.wait_for_ready(unready_workers)")
                + _frame(executor, 683, "wait_for_ready", "raise e from None"))
    frames = (frames
              + _frame(core, 125, "__init__", "kv_cache_config = self._initialize_kv_caches(vllm_config)",
                       "self._initialize_kv_caches(vllm_config)")
              + _frame(core, 236, "_initialize_kv_caches",
                       "available_gpu_memory = self.model_executor.determine_available_memory()"
                       if stage == "profile" else
                       "kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,",
                       "self.model_executor.determine_available_memory()" if stage == "profile" else None))
    if stage == "profile":
        executor = _v("v1/executor/multiproc_executor.py")
        return (frames
                + _frame(_v("v1/executor/abstract.py"), 136, "determine_available_memory",
                         'return self.collective_rpc("determine_available_memory")',
                         'self.collective_rpc("determine_available_memory")')
                + _frame(executor, 361, "collective_rpc", "return aggregate(get_response())",
                         "get_response()")
                + _frame(executor, 344, "get_response", "raise RuntimeError("))
    kv = _v("v1/core/kv_cache_utils.py")
    return (frames
            + _frame(kv, 1338, "get_kv_cache_configs",
                     "_check_enough_kv_cache_memory(", None)
            + _frame(kv, 701, "_check_enough_kv_cache_memory", "raise ValueError("))


def worker_frames(stage):
    executor = _v("v1/executor/multiproc_executor.py")
    worker = _v("v1/worker/gpu_worker.py")
    runner = _v("v1/worker/gpu_model_runner.py")
    if stage == "busy":
        return (_frame(executor, 743, "worker_main", "worker = WorkerProc(*args, **kwargs)",
                       "WorkerProc(*args, **kwargs)")
                + _frame(executor, 562, "__init__", "self.worker.init_device()")
                + _frame(_v("v1/worker/worker_base.py"), 326, "init_device", "self.worker.init_device()  # type: ignore")
                + _frame(worker, 262, "init_device", "raise ValueError("))
    if stage == "load":
        return (_frame(executor, 743, "worker_main", "worker = WorkerProc(*args, **kwargs)",
                       "WorkerProc(*args, **kwargs)")
                + _frame(executor, 571, "__init__", "self.worker.load_model()")
                + _frame(worker, 289, "load_model", "self.model_runner.load_model(eep_scale_up=eep_scale_up)")
                + _frame(runner, 3343, "load_model", "self.model = model_loader.load_model(",
                         "model_loader.load_model(")
                + _frame(_v("model_executor/model_loader/base_loader.py"), 55, "load_model",
                         "self.load_weights(model, model_config)")
                + _frame(_v("model_executor/model_loader/default_loader.py"), 305, "load_weights",
                         "loaded_weights = model.load_weights(self.get_all_weights(model_config, model))",
                         "model.load_weights(self.get_all_weights(model_config, model))")
                + _frame(SITE + "/torch/utils/_device.py", 104, "__torch_function__",
                         "return func(*args, **kwargs)", "func(*args, **kwargs)"))
    if stage == "profile":
        return (_frame(executor, 817, "worker_busy_loop", "output = func(*args, **kwargs)",
                       "func(*args, **kwargs)")
                + _frame(worker, 331, "determine_available_memory", "self.model_runner.profile_run()")
                + _frame(runner, 4112, "profile_run", "hidden_states, last_hidden_states = self._dummy_run(",
                         "self._dummy_run(")
                + _frame(runner, 3891, "_dummy_run", "outputs = self.model(", "self.model(")
                + _frame(SITE + "/torch/nn/modules/module.py", 1784, "_call_impl",
                         "return forward_call(*args, **kwargs)", "forward_call(*args, **kwargs)"))
    return (_frame(executor, 817, "worker_busy_loop", "output = func(*args, **kwargs)", "func(*args, **kwargs)")
            + _frame(worker, 612, "execute_model", "output = self.model_runner.execute_model(",
                     "self.model_runner.execute_model(")
            + _frame(runner, 2875, "execute_model", "model_output = self._model_forward(",
                     "self._model_forward(")
            + _frame(SITE + "/torch/cuda/graphs.py", 86, "replay", "super().replay()"))


# ------------------------------------------------------------------------- the app


class Stop(Exception):
    """A signal arrived while starting."""


class Fail(Exception):
    def __init__(self, code):
        Exception.__init__(self, code)
        self.code = code


class Sim:
    def __init__(self, parser, args):
        self.parser = parser
        self.args = args
        self.non_default = non_default_args(parser, args)
        try:
            self.speedup = float(os.environ.get(ENV_SPEEDUP, "1") or 1)
        except ValueError:
            self.speedup = 1.0
        if not self.speedup > 0:
            self.speedup = 1.0
        self.fail_mode = (os.environ.get(ENV_FAIL) or "").strip().lower()
        try:
            vram_mb = float(os.environ.get(ENV_VRAM) or DEFAULT_VRAM_MB)
        except ValueError:
            vram_mb = DEFAULT_VRAM_MB
        self.vram = int(vram_mb * MiB)
        self.world = args.tensor_parallel_size * args.pipeline_parallel_size
        self.gpus = visible_gpus(self.world * args.data_parallel_size)
        self.log = Log(self.world)
        self.registry = GpuRegistry(os.environ.get(ENV_DIR), self.gpus)
        self.served = list(args.served_model_name or [args.model])
        if args.max_num_seqs is None:
            args.max_num_seqs = 256
        if args.max_num_batched_tokens is None:
            args.max_num_batched_tokens = 8192
        self.block_size = args.block_size or 16
        self.prof = ModelProfile(args, self.vram)
        self.max_model_len = args.max_model_len if args.max_model_len and args.max_model_len > 0 else self.prof.limit
        self.engine = None
        self.metrics = None
        self.http = HttpServer(self)
        self.server = None
        self.sock = None
        self.stop_event = None
        self.signal_name = None
        self.exit_code = 0
        self.tasks = []

    # -- helpers

    async def _sleep(self, seconds):
        if self.stop_event.is_set():
            raise Stop()
        try:
            await asyncio.wait_for(self.stop_event.wait(), seconds / self.speedup)
        except asyncio.TimeoutError:
            return
        raise Stop()

    def _on_signal(self, name):
        if self.signal_name is None:
            self.signal_name = name
        self.stop_event.set()

    def host_part(self):
        host = self.args.host
        if not host:
            return "0.0.0.0"
        return "[%s]" % host if ":" in host else host

    def models_json(self):
        now = int(time.time())
        return {"object": "list", "data": [{
            "id": name, "object": "model", "created": now, "owned_by": "vllm", "root": self.args.model,
            "parent": None, "max_model_len": self.max_model_len,
            "permission": [{"id": "modelperm-" + uuid.uuid4().hex[:16], "object": "model_permission",
                            "created": now, "allow_create_engine": False, "allow_sampling": True,
                            "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                            "allow_fine_tuning": False, "organization": "*", "group": None,
                            "is_blocking": False}]} for name in self.served]}

    def _bind(self):
        host = self.args.host or "0.0.0.0"
        port = self.args.port
        try:
            infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
            family, _, _, _, addr = infos[0]
            sock = socket.socket(family, socket.SOCK_STREAM)
        except socket.gaierror as exc:
            self.log.raw(api_head_frames() + ["socket.gaierror: [Errno %s] %s" % (exc.errno, exc.strerror)],
                         err=True)
            raise Fail(1)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
        except OSError as exc:
            sock.close()
            self.log.raw(port_in_use_traceback(exc), err=True)
            raise Fail(1)
        sock.setblocking(False)
        return sock

    def _engine_failure(self, stage, exc_lines, worker_header=None):
        """Worker/EngineCore error blocks, then the APIServer's RuntimeError; exit 1."""
        L = self.log
        core_src = "core.py:1136"
        if worker_header:
            w_src = "multiproc_executor.py:772" if stage in ("busy", "load") else "multiproc_executor.py:822"
            L.block(0, "ERROR", w_src, [worker_header, "Traceback (most recent call last):"]
                    + worker_frames(stage) + exc_lines)
        if stage in ("busy", "load"):
            core_stage, final = "init", [
                "Exception: WorkerProc initialization failed due to an exception in a background process. "
                "See stack trace for root cause."]
        elif stage == "profile":
            core_stage, final = "profile", [
                "RuntimeError: Worker failed with error '%s', please check the stack trace above for the "
                "root cause" % exc_lines[-1].split(": ", 1)[-1]]
        else:
            core_stage, final = "kv", exc_lines
        frames = engine_core_frames(core_stage)
        L.block("engine", "ERROR", core_src, ["EngineCore failed to start.", "Traceback (most recent call last):"]
                + frames + final)
        mp = PYLIB + "/multiprocessing/process.py"
        L.tagged("engine", ["Process EngineCore:", "Traceback (most recent call last):"]
                 + _frame(mp, 314, "_bootstrap", "self.run()")
                 + _frame(mp, 108, "run", "self._target(*self._args, **self._kwargs)")
                 + _frame(_v("v1/engine/core.py"), 1140, "run_engine_core", "raise e")
                 + frames + final)
        L.raw(engine_start_traceback(), err=True)
        raise Fail(1)

    def _oom_lines(self, tried, free):
        total = self.vram / float(GiB)
        allocated = max(0.0, total - free - 0.31)
        return ["torch.OutOfMemoryError: HIP out of memory. Tried to allocate %.2f GiB. GPU 0 has a total "
                "capacity of %.2f GiB of which %.2f GiB is free. Of the allocated memory %.2f GiB is allocated "
                "by PyTorch, and %.2f MiB is reserved by PyTorch but unallocated. If reserved but unallocated "
                "memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid "
                "fragmentation.  See documentation for Memory Management  "
                "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
                % (tried, total, free, allocated, 117.25 + (allocated * 13) % 300)]

    def _engine_config_line(self):
        a, p = self.args, self.prof
        if p.eager:
            cc = ("{'mode': <CompilationMode.NONE: 0>, 'backend': 'inductor', 'custom_ops': ['all'], "
                  "'cudagraph_mode': <CUDAGraphMode.NONE: 0>, 'cudagraph_capture_sizes': []}")
        else:
            cc = ("{'mode': <CompilationMode.VLLM_COMPILE: 3>, 'backend': 'inductor', 'custom_ops': ['+rms_norm', "
                  "'+silu_and_mul'], 'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, "
                  "'max_cudagraph_capture_size': %d}" % min(512, 2 * a.max_num_seqs))
        return ("Initializing a V1 LLM engine (v%s) with config: model=%r, speculative_config=None, "
                "tokenizer=%r, skip_tokenizer_init=False, tokenizer_mode=%s, revision=None, "
                "tokenizer_revision=None, trust_remote_code=%s, dtype=%s, max_seq_len=%d, download_dir=None, "
                "load_format=%s, tensor_parallel_size=%d, pipeline_parallel_size=%d, data_parallel_size=%d, "
                "disable_custom_all_reduce=False, quantization=%s, enforce_eager=%s, kv_cache_dtype=%s, "
                "device_config=cuda, structured_outputs_config=StructuredOutputsConfig(backend='auto', "
                "disable_any_whitespace=False, disable_additional_properties=False, reasoning_parser=''), "
                "observability_config=ObservabilityConfig(show_hidden_metrics_for_version=None, "
                "otlp_traces_endpoint=None, collect_detailed_traces=None), seed=%d, served_model_name=%s, "
                "enable_prefix_caching=%s, enable_chunked_prefill=True, pooler_config=None, "
                "compilation_config=%s"
                % (VERSION, a.model, a.tokenizer or a.model, a.tokenizer_mode, bool(a.trust_remote_code),
                   p.torch_dtype, self.max_model_len, a.load_format, a.tensor_parallel_size,
                   a.pipeline_parallel_size, a.data_parallel_size, a.quantization, p.eager, a.kv_cache_dtype,
                   a.seed or 0, self.served[0], a.enable_prefix_caching is not False, cc))

    # -- startup

    async def startup(self):
        a, p, L = self.args, self.prof, self.log
        ranks = list(range(self.world))
        for line in BANNER:
            L("api", "INFO", "api_utils.py:347", line.format(version=VERSION, model=a.model))
        L("api", "INFO", "api_utils.py:286", "non-default args: %r" % (self.non_default,))
        self.sock = self._bind()
        await self._sleep(0.3)
        L("api", "INFO", "model.py:733", "Resolved architecture: %s" % p.arch)
        if a.max_model_len and a.max_model_len > p.limit:
            if os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1":
                L("api", "WARNING", "model.py:2196",
                  "User-specified max_model_len (%d) is greater than the derived max_model_len "
                  "(max_position_embeddings=%s or model_max_length=None in model's config.json). "
                  "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative "
                  "position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model "
                  "uses absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA "
                  "array out-of-bounds error." % (a.max_model_len, float(p.limit)))
            else:
                L.raw(config_traceback("ModelConfig", [
                    "  Value error, User-specified max_model_len (%d) is greater than the derived max_model_len "
                    "(max_position_embeddings=%s or model_max_length=None in model's config.json). To allow "
                    "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. "
                    "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative "
                    "position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model "
                    "uses absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA "
                    "array out-of-bounds error. [type=value_error, input_value=ArgsKwargs((), {'model': "
                    "...nderer_num_workers': 1}), input_type=ArgsKwargs]" % (a.max_model_len, float(p.limit)),
                    "    For further information visit https://errors.pydantic.dev/2.14/v/value_error"]), err=True)
                raise Fail(1)
        gmu = a.gpu_memory_utilization
        if not 0 < gmu <= 1:
            kind, word = ("greater_than", "greater than 0") if gmu <= 0 else ("less_than_equal", "less than or equal to 1")
            L.raw(config_traceback("CacheConfig", [
                "gpu_memory_utilization",
                "  Input should be %s [type=%s, input_value=%r, input_type=float]" % (word, kind, gmu),
                "    For further information visit https://errors.pydantic.dev/2.14/v/%s" % kind]), err=True)
            raise Fail(1)
        L("api", "INFO", "model.py:2152", "Using max model len %d" % self.max_model_len)
        if a.num_scheduler_steps is not None:
            L("api", "WARNING", "arg_utils.py:1795",
              "--num-scheduler-steps is not used by the V1 engine and is ignored (rocm-console simulator).")
        if p.eager:
            L("api", "WARNING", "vllm.py:1703",
              "Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup. This is equivalent "
              "to setting -cc.mode=none -cc.cudagraph_mode=none and --kernel_config.enable_jit_warmup=False")
        L("api", "INFO", "scheduler.py:231",
          "Chunked prefill is enabled with max_num_batched_tokens=%d." % a.max_num_batched_tokens)
        await self._sleep(0.6)
        engine_t0 = time.monotonic()
        L("engine", "INFO", "core.py:133", self._engine_config_line())
        await self._sleep(0.2)
        for r in ranks:
            L(r, "INFO", "parallel_state.py:1906",
              "world_size=%d rank=%d local_rank=%d distributed_init_method=tcp://127.0.0.1:%d backend=nccl"
              % (self.world, r, r, 29500 + (self.log.pid % 1000)))
            L(r, "INFO", "parallel_state.py:2350",
              "rank %d in world size %d is assigned as DP rank 0, PP rank %d, PCP rank 0, TP rank %d, "
              "EP rank N/A, EPLB rank N/A" % (r, self.world, r // a.tensor_parallel_size,
                                               r % a.tensor_parallel_size))
        budget = gmu * self.vram
        used = self.registry.used_by_others()
        busiest = max(used.values()) if used else 0
        if self.vram - busiest < budget:
            free = (self.vram - busiest) / float(GiB)
            self._engine_failure("busy", [
                "ValueError: Free memory on device (%.2f/%.2f GiB) on startup is less than desired GPU memory "
                "utilization (%s, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
                "processes." % (free, self.vram / float(GiB), gmu, budget / GiB)], "WorkerProc failed to start.")
        for r in ranks:
            L(r, "INFO", "gpu_model_runner.py:3338", "Starting to load model %s..." % a.model)
        load_t0 = time.monotonic()
        await self._sleep(0.2)
        L.raw("Loading safetensors checkpoint shards:   0%% Completed | 0/%d [00:00<?, ?it/s]" % p.shards, err=True)
        load_s = 1.2 + min(1.0, p.weights_per_gpu / GiB / 60.0)
        if p.weights_per_gpu + 0.5 * GiB > self.vram - busiest:
            await self._sleep(load_s / 2)
            free = 0.35 + (p.params_b % 1.0) / 2.0
            self._engine_failure("load", self._oom_lines(max(free + 0.5, min(4.6, p.weights_per_gpu / GiB)), free),
                                 "WorkerProc failed to start.")
        await self._sleep(load_s)
        elapsed = time.monotonic() - load_t0
        L.raw(["Loading safetensors checkpoint shards: 100%% Completed | %d/%d [00:%02d<00:00, %.2fit/s]"
               % (p.shards, p.shards, int(elapsed), p.shards / max(elapsed, 0.01)), ""], err=True)
        for r in ranks:
            L(r, "INFO", "default_loader.py:501", "Loading weights took %.2f seconds" % (elapsed * 0.92))
        for r in ranks:
            L(r, "INFO", "gpu_model_runner.py:3420", "Model loading took %.2f GiB memory and %.6f seconds"
              % (p.weights_per_gpu / GiB, elapsed))
        budget, act, rccl, graphs, kv = p.memory(a)
        self.registry.register(p.weights_per_gpu + rccl)
        if not p.eager:
            await self._sleep(0.5)
            h = "%010x" % (zlib.crc32(a.model.encode("utf-8")) * 7919)
            L(0, "INFO", "backends.py:631", "Using cache directory: /root/.cache/vllm/torch_compile_cache/%s/"
                                            "rank_0_0/backbone for vLLM's torch.compile" % h[:10])
            L(0, "INFO", "backends.py:647", "Dynamo bytecode transform time: %.2f s" % (4.1 / self.speedup))
            L(0, "INFO", "monitor.py:34", "torch.compile takes %.2f s in total" % (9.8 / self.speedup))
        await self._sleep(0.5)
        if self.fail_mode == "oom" or (gmu > 0.98 and "405b" in a.model.lower() and a.tensor_parallel_size < 8):
            free = 0.62 + (p.params_b % 3.0) / 5.0
            self._engine_failure("profile", self._oom_lines(free + 1.38, free), "WorkerProc hit an exception.")
        needed = self.max_model_len * p.kv_per_token
        if self.fail_mode == "kv":
            kv = min(kv, needed * 0.62)
        for r in ranks:
            L(r, "INFO", "gpu_worker.py:298", "Available KV cache memory: %.2f GiB" % (kv / GiB))
        if kv <= 0:
            self._engine_failure("kv", ["ValueError: No available memory for the cache blocks. Try increasing "
                                        "`gpu_memory_utilization` when initializing the engine."])
        if needed > kv:
            estimate = int(kv // p.kv_per_token) // self.block_size * self.block_size
            self._engine_failure("kv", [
                "ValueError: To serve at least one request with the model's max seq len (%d), (%.2f GiB KV cache "
                "is needed, which is larger than the available KV cache memory (%.2f GiB). Based on the available "
                "memory, the estimated maximum model length is %d. Try increasing `gpu_memory_utilization` or "
                "decreasing `max_model_len` when initializing the engine."
                % (self.max_model_len, needed / GiB, kv / GiB, estimate)])
        num_blocks = int(kv // (p.kv_per_token * self.block_size))
        kv_tokens = num_blocks * self.block_size
        concurrency = kv_tokens / float(self.max_model_len)
        L("engine", "INFO", "kv_cache_utils.py:1087",
          "GPU KV cache size: {:,} tokens, Maximum concurrency for {:,} tokens per request: {:.2f}x".format(
              kv_tokens, self.max_model_len, concurrency))
        self.registry.register(budget)
        if not p.eager:
            t = time.monotonic()
            await self._sleep(1.2)
            took = time.monotonic() - t
            mixed = 3 + min(512, 2 * a.max_num_seqs) // 8
            full = 3 + min(256, a.max_num_seqs) // 8
            bar = "\u2588" * 10
            L.raw(["Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%%|%s| %d/%d [00:%02d<00:00, %.2fit/s]"
                   % (bar, mixed, mixed, int(took * 0.6), mixed / max(took * 0.6, 0.01)),
                   "Capturing CUDA graphs (decode, FULL): 100%%|%s| %d/%d [00:%02d<00:00, %.2fit/s]"
                   % (bar, full, full, int(took * 0.4), full / max(took * 0.4, 0.01))], err=True)
            for r in ranks:
                L(r, "INFO", "gpu_model_runner.py:4466", "Graph capturing finished in %d secs, took %.2f GiB"
                  % (max(1, round(took)), graphs / GiB))
        L("engine", "INFO", "core.py:402", "init engine (profile, create kv cache, warmup model) took %.2f s"
          % (time.monotonic() - engine_t0))
        await self._sleep(0.3)

        self.engine = Engine(p, a, num_blocks, self.block_size)
        cache_info = {"block_size": str(self.block_size), "cache_dtype": a.kv_cache_dtype,
                      "enable_prefix_caching": str(a.enable_prefix_caching is not False),
                      "gpu_memory_utilization": str(gmu), "is_attention_free": "False",
                      "kv_cache_max_concurrency": str(round(concurrency, 2)),
                      "kv_cache_memory_bytes": str(int(kv)), "kv_cache_size_tokens": str(kv_tokens),
                      "num_cpu_blocks": "None", "num_gpu_blocks": str(num_blocks),
                      "num_gpu_blocks_override": "None", "prefix_caching_hash_algo": "sha256",
                      "sliding_window": "None", "swap_space": str(a.swap_space),
                      "user_specified_block_size": str(a.block_size is not None)}
        self.metrics = Metrics(self.served[0], self.max_model_len, self.engine, cache_info)
        self.engine.metrics = self.metrics
        L("api", "INFO", "entry.py:136", "Supported tasks: ['generate']")
        L("api", "INFO", "hf.py:648", "Detected the chat template content format to be 'string'. You can set "
                                      "`--chat-template-content-format` to override this.")
        L("api", "INFO", "entry.py:140", "Starting vLLM server on http://%s:%d" % (self.host_part(), a.port))
        L("api", "INFO", "launcher.py:186", "Available routes are:")
        for route, methods in ROUTES:
            L("api", "INFO", "launcher.py:195", "Route: %s, Methods: %s" % (route, methods))
        self.tasks.append(asyncio.ensure_future(self.engine.run()))
        if not a.disable_log_stats:
            self.tasks.append(asyncio.ensure_future(self._stats_loop()))
        L.uvicorn("Started server process [%d]" % L.pid)
        L.uvicorn("Waiting for application startup.")
        try:
            self.server = await asyncio.start_server(self.http.handle, sock=self.sock, backlog=2048)
        except OSError as exc:
            self.log.raw(port_in_use_traceback(exc), err=True)
            raise Fail(1)
        L.uvicorn("Application startup complete.")

    async def _stats_loop(self):
        try:
            interval = float(os.environ.get("VLLM_LOG_STATS_INTERVAL", "10"))
        except ValueError:
            interval = 10.0
        if interval <= 0:
            interval = 10.0
        loop = asyncio.get_event_loop()
        engine = self.engine
        last = loop.time()
        last_prompt = last_gen = 0.0
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            elapsed = max(now - last, 1e-6)
            last = now
            prompt = engine.window_prompt / elapsed
            gen = engine.window_generation / elapsed
            engine.window_prompt = engine.window_generation = 0
            if any((prompt, gen, last_prompt, last_gen)):
                self.log("api", "INFO", "loggers.py:335",
                         "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f "
                         "tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache "
                         "hit rate: 0.0%%" % (prompt, gen, len(engine.running), len(engine.waiting),
                                              100.0 * engine.kv_usage()))
            last_prompt, last_gen = prompt, gen

    # -- running and stopping

    async def _crash_later(self):
        await asyncio.sleep(2.0 / self.speedup)
        L = self.log
        self.engine.kill()
        hip = ["torch.AcceleratorError: HIP error: an illegal memory access was encountered",
               "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace "
               "below might be incorrect.",
               "For debugging consider passing AMD_SERIALIZE_KERNEL=3",
               "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.", ""]
        L.block(0, "ERROR", "multiproc_executor.py:822", ["WorkerProc hit an exception.",
                                                          "Traceback (most recent call last):"]
                + worker_frames("crash") + hip)
        core = _v("v1/engine/core.py")
        L.block("engine", "ERROR", "core.py:1136", [
            "EngineCore encountered a fatal error.", "Traceback (most recent call last):"]
            + _frame(core, 1127, "run_engine_core", "engine_core.run_busy_loop()")
            + _frame(core, 1170, "run_busy_loop", "self._process_engine_step()")
            + _frame(core, 1209, "_process_engine_step", "outputs, model_executed = self.step_fn()",
                     "self.step_fn()")
            + _frame(core, 451, "step", "model_output = future.result()", "future.result()")
            + _frame(_v("v1/executor/multiproc_executor.py"), 344, "get_response", "raise RuntimeError(")
            + ["RuntimeError: Worker failed with error 'HIP error: an illegal memory access was encountered', "
               "please check the stack trace above for the root cause"])
        self._engine_dead_block()
        await asyncio.sleep(0.5 / self.speedup)
        self.exit_code = 1
        self.stop_event.set()

    def _engine_dead_block(self):
        async_llm = _v("v1/engine/async_llm.py")
        self.log.block("api", "ERROR", "async_llm.py:906", [
            "AsyncLLM output_handler failed.", "Traceback (most recent call last):"]
            + _frame(async_llm, 849, "output_handler", "outputs = await engine_core.get_output_async()",
                     "await engine_core.get_output_async()")
            + _frame(_v("v1/engine/core_client.py"), 1235, "get_output_async",
                     "raise self._format_exception(outputs) from None")
            + ["vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace "
               "(above) for the root cause."])

    def _shutdown_lines(self, sigterm, http=True):
        L = self.log
        ranks = list(range(self.world))
        L("api", "INFO", "launcher.py:254", "[shutdown] API server: shutdown triggered")
        L("api", "INFO", "launcher.py:270", "[shutdown] API server: stopping engine client mode=abort timeout=0s")
        L("api", "INFO", "core_client.py:770", "[shutdown] MPClient: start timeout=0s")
        L("api", "INFO", "core_client.py:772", "[shutdown] MPClient: stopping engine manager")
        L("api", "INFO", "utils.py:628", "[shutdown] Process manager: send sigterm to process EngineCore")

        def force_kill():
            L("api", "WARNING", "utils.py:648", "[shutdown] Process manager: force killing remaining processes count=1")
            L("api", "WARNING", "utils.py:653", "[shutdown] Process manager: force killing remaining process "
                                                "EngineCore pid %d" % L.engine_pid)

        if not sigterm:
            force_kill()
        L("engine", "INFO", "core.py:1454", "[shutdown] EngineCore: trigger received signal=SIGTERM")
        L("engine", "INFO", "core.py:1635", "[shutdown] EngineCore: start mode=abort timeout=0s")
        L("engine", "INFO", "core.py:1666",
          "[shutdown] EngineCore: request processing complete; starting resource teardown")
        L("engine", "INFO", "core.py:1499", "[shutdown] EngineCore: exiting busy loop")
        L("engine", "INFO", "multiproc_executor.py:479",
          "[shutdown] Executor: waiting for worker exit count=%d" % self.world)
        if sigterm:
            force_kill()
        for r in ranks:
            L(r, "INFO", "multiproc_executor.py:843", "Parent process exited, terminating worker queues")
        for r in ranks:
            L("api", "WARNING", "system_utils.py:225", "[shutdown] force killing sub process VLLM::%s pid %d"
              % (L.worker_name(r), L.worker_pid + r))
        L("api", "INFO", "core_client.py:774", "[shutdown] MPClient: engine manager stopped")
        L("api", "INFO", "core_client.py:775", "[shutdown] MPClient: cleaning up background resources")
        L("api", "INFO", "core_client.py:777", "[shutdown] MPClient: complete")
        if sigterm:
            self._engine_dead_block()
        if not http:
            return
        L("api", "INFO", "launcher.py:279", "[shutdown] API server: engine client stopped")
        L("api", "INFO", "launcher.py:282", "[shutdown] API server: signalling HTTP server shutdown")
        L("api", "INFO", "launcher.py:304", "[shutdown] API server: shutting down FastAPI HTTP server")
        L.uvicorn("Shutting down")
        L.uvicorn("Waiting for application shutdown.")
        L.uvicorn("Application shutdown complete.")

    def _close(self):
        if self.server is not None:
            self.server.close()
        for writer in list(self.http.connections):
            try:
                writer.transport.abort()
            except Exception:
                pass
        for task in self.tasks:
            task.cancel()
        if self.sock is not None and self.server is None:
            self.sock.close()
        self.registry.unregister()

    async def main(self):
        loop = asyncio.get_event_loop()
        self.stop_event = asyncio.Event()
        for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGTERM")):
            try:
                loop.add_signal_handler(sig, self._on_signal, name)
            except (ValueError, RuntimeError, NotImplementedError):
                pass
        try:
            try:
                await self.startup()
            except Stop:
                self._shutdown_lines(self.signal_name == "SIGTERM", http=False)
                return 0
            except Fail as exc:
                return exc.code
            if self.fail_mode == "crash":
                self.tasks.append(asyncio.ensure_future(self._crash_later()))
            await self.stop_event.wait()
            if self.signal_name is not None:
                self._shutdown_lines(self.signal_name == "SIGTERM")
                return self.exit_code
            # the engine died: the API server goes down with it
            self.log("api", "INFO", "launcher.py:304", "[shutdown] API server: shutting down FastAPI HTTP server")
            self.log.uvicorn("Shutting down")
            self.log.uvicorn("Waiting for application shutdown.")
            self.log.uvicorn("Application shutdown complete.")
            return self.exit_code
        finally:
            self._close()
            await asyncio.sleep(0)


# ---------------------------------------------------------------------------- entry


TOP_USAGE = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(TOP_USAGE + "\n\nvLLM CLI (rocm-console simulator %s): serve is simulated.\n" % VERSION)
        return 0 if argv else 2
    command = argv[0]
    if command in ("-v", "--version"):
        sys.stdout.write(VERSION + "\n")
        return 0
    if command == "bench":
        sys.stderr.write("vllm bench: not simulated yet (rocm-console's vLLM simulator %s)\n" % VERSION)
        return 2
    if command != "serve":
        sys.stderr.write("%s\nvllm: error: argument subparser: invalid choice: %r (choose from 'chat', "
                         "'complete', 'serve', 'bench', 'collect-env', 'run-batch')\n" % (TOP_USAGE, command))
        return 2
    parser, args = parse_serve_args(argv[1:])
    sim = Sim(parser, args)
    atexit.register(sim.registry.unregister)
    try:
        return asyncio.run(sim.main())
    except KeyboardInterrupt:
        return 0
    finally:
        sim.registry.unregister()


if __name__ == "__main__":
    sys.exit(main())
