#!/usr/bin/env python3
"""Simulated `vllm` command: a vLLM 0.32 look-alike for rocm-console's demo and fast tests.

This file is uploaded to a node and run as `python3 vllm.py serve MODEL [flags]`.
It is self-contained on purpose: stdlib only, Python >= 3.8, never imports
`console`. It does no GPU work and says so: its version is "0.32.0+sim".

Commands
    serve [MODEL] [flags]   OpenAI-compatible HTTP server with vLLM 0.32's log lines
    bench serve [flags]     vLLM 0.32's benchmark client (see "bench serve" below)
    bench OTHER ...         prints "not simulated yet", exit 2
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

bench serve
    Every flag of 0.32's `vllm bench serve` is accepted (defaults as in 0.32: --backend openai,
    --num-prompts 1000, --random-input-len 1024, --random-output-len 128, --request-rate inf,
    --ready-check-timeout-sec 0, ...); unknown flags: "vllm: error: unrecognized arguments", exit 2.
    Real HTTP against any OpenAI-compatible server (streamed SSE, keep-alive); backends vllm,
    openai (/v1/completions) and openai-chat (/v1/chat/completions); datasets random and sharegpt.
    Output as 0.32 prints it: the Namespace line, the (MainProcess pid=N) log lines, /tokenize
    alignment warnings, "Starting initial single prompt test run...", "Skipping endpoint ready
    check." (or the ready check with its bar and "Initial test run failed" ValueError, exit 1),
    the traffic lines, tqdm on stderr, failed requests with aiohttp-like tracebacks, the result
    block, and --save-result JSON with 0.32's keys (per-request arrays with --save-detailed).
    Metrics use vLLM's formulas (numpy-style mean/median/std/percentiles, TPOT = (e2el - ttft) /
    (tokens - 1), peak tok/s and concurrent requests per 1-second bucket). Failed requests still
    exit 0; SIGINT prints the KeyboardInterrupt traceback and exits 130; SIGTERM kills it (143).
    stdout is block-buffered into a pipe like the real client's (flushed by log lines and when the
    bar starts; set PYTHONUNBUFFERED=1 to stream it). Deviations: no tokenizer (tokens are counted
    like the fake server does, no special tokens, so the random dataset's prompts are exactly
    --random-input-len tokens), numpy's RNG is replaced by random.Random(seed), other datasets and
    backends end with NotImplementedError (exit 1), no *.pytorch.json, no plots.

Deviations from real vLLM: one engine even with DP > 1; n > 1, logprobs, stop strings,
tools and batched prompts are not simulated (400); prefix caching never hits; an engine
crash ends the process with exit code 1.
"""

import argparse
import asyncio
import atexit
import bisect
import codecs
import collections
import email.utils
import json
import logging
import math
import os
import random
import re
import signal
import socket
import sys
import time
import uuid
import zlib
from urllib.parse import urlsplit

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


# ----------------------------------------------------------------------- bench serve
#
# `vllm bench serve` of vLLM 0.32 (vllm/benchmarks/serve.py): same flags, same stdout and
# stderr, same metrics and result JSON, against any OpenAI-compatible server. Requests are
# real HTTP (asyncio streams, SSE). Only the random and sharegpt datasets and the vllm,
# openai and openai-chat backends are simulated; there is no tokenizer (tokens are counted
# like the fake server counts them: max(words, chars / 4)).

BENCH_SRC = SITE + "/vllm/benchmarks/serve.py"
BENCH_REQ_SRC = SITE + "/vllm/benchmarks/lib/endpoint_request_func.py"
BENCH_DATASETS_SRC = SITE + "/vllm/benchmarks/datasets/datasets.py"
BENCH_TOP_USAGE = ("usage: vllm [-h] [-v]\n"
                   "            {chat,complete,serve,launch,bench,collect-env,download-kernels,preload,"
                   "run-batch,snapshot}\n"
                   "            ...")
BENCH_DATASETS = ["sharegpt", "burstgpt", "random", "random-mm", "random-rerank", "hf", "custom", "custom_audio",
                  "custom_image", "prefix_repetition", "spec_bench", "speed_bench", "timed_trace"]
BENCH_BACKENDS = ["vllm", "openai", "openai-chat", "openai-responses", "openai-audio", "openai-embeddings",
                  "openai-embeddings-chat", "openai-embeddings-clip", "openai-embeddings-vlm2vec",
                  "infinity-embeddings", "infinity-embeddings-clip", "vllm-pooling", "vllm-rerank"]
BENCH_SIMULATED_BACKENDS = ("vllm", "openai", "openai-chat")
BENCH_OPENAI_COMPATIBLE = ("vllm", "openai", "openai-chat", "openai-responses")
BENCH_SPEED_SUBSETS = ["throughput_16k", "throughput_1k", "throughput_8k", "qualitative", "throughput_2k",
                       "throughput_32k"]
INF = float("inf")


class _Repr(object):
    """A value whose repr() is fixed text (for the Namespace line)."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _json_arg(text):
    return json.loads(text)


_json_arg.__name__ = "loads"  # argparse: "invalid loads value", like type=json.loads

# (flag, dest, kind, default, choices) in the order 0.32 prints its Namespace.
# kind: str int float flag list* list+ json selftimed
BENCH_ARGS = [
    ("--trust-remote-code", "trust_remote_code", "flag", False, None),
    ("--seed", "seed", "int", 0, None),
    ("--num-prompts", "num_prompts", "int", 1000, None),
    ("--dataset-name", "dataset_name", "str", "random", BENCH_DATASETS),
    ("--no-stream", "no_stream", "flag", False, None),
    ("--dataset-path", "dataset_path", "str", None, None),
    ("--no-oversample", "no_oversample", "flag", False, None),
    ("--skip-chat-template", "skip_chat_template", "flag", False, None),
    ("--enable-multimodal-chat", "enable_multimodal_chat", "flag", False, None),
    ("--disable-shuffle", "disable_shuffle", "flag", False, None),
    ("--custom-output-len", "custom_output_len", "int", 256, None),
    ("--custom-ensure-client-side-data", "custom_ensure_client_side_data", "flag", False, None),
    ("--spec-bench-output-len", "spec_bench_output_len", "int", 256, None),
    ("--spec-bench-category", "spec_bench_category", "str", None, None),
    ("--sharegpt-output-len", "sharegpt_output_len", "int", None, None),
    ("--timed-trace-chunk-hash-size", "timed_trace_chunk_hash_size", "int", 16, None),
    ("--timed-trace-sec-multiplier", "timed_trace_sec_multiplier", "float", 1, None),
    ("--timed-trace-label-timestamp", "timed_trace_label_timestamp", "str", "timestamp", None),
    ("--timed-trace-label-input-length", "timed_trace_label_input_length", "str", "input_length", None),
    ("--timed-trace-label-output-length", "timed_trace_label_output_length", "str", "output_length", None),
    ("--timed-trace-label-hash-ids", "timed_trace_label_hash_ids", "str", "hash_ids", None),
    ("--blazedit-min-distance", "blazedit_min_distance", "float", 0.0, None),
    ("--blazedit-max-distance", "blazedit_max_distance", "float", 1.0, None),
    ("--asr-max-audio-len-sec", "asr_max_audio_len_sec", "float", INF, None),
    ("--asr-min-audio-len-sec", "asr_min_audio_len_sec", "float", 0.0, None),
    ("--random-input-len", "random_input_len", "int", 1024, None),
    ("--random-output-len", "random_output_len", "int", 128, None),
    ("--random-range-ratio", "random_range_ratio", "str", "0.0", None),
    ("--random-prefix-len", "random_prefix_len", "int", 0, None),
    ("--random-batch-size", "random_batch_size", "int", 1, None),
    ("--no-reranker", "no_reranker", "flag", False, None),
    ("--random-mm-base-items-per-request", "random_mm_base_items_per_request", "int", 1, None),
    ("--random-mm-num-mm-items-range-ratio", "random_mm_num_mm_items_range_ratio", "float", 0.0, None),
    ("--random-mm-limit-mm-per-prompt", "random_mm_limit_mm_per_prompt", "json", {"image": 255, "video": 1}, None),
    ("--random-mm-bucket-config", "random_mm_bucket_config", "str",
     _Repr("{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}"), None),
    ("--hf-subset", "hf_subset", "str", None, None),
    ("--hf-split", "hf_split", "str", None, None),
    ("--hf-name", "hf_name", "str", None, None),
    ("--hf-output-len", "hf_output_len", "int", None, None),
    ("--bfcl-categories", "bfcl_categories", "str", None, None),
    ("--prefix-repetition-prefix-len", "prefix_repetition_prefix_len", "int", 256, None),
    ("--prefix-repetition-suffix-len", "prefix_repetition_suffix_len", "int", 256, None),
    ("--prefix-repetition-num-prefixes", "prefix_repetition_num_prefixes", "int", 10, None),
    ("--prefix-repetition-output-len", "prefix_repetition_output_len", "int", 128, None),
    ("--speed-bench-dataset-subset", "speed_bench_dataset_subset", "str", "qualitative", BENCH_SPEED_SUBSETS),
    ("--speed-bench-output-len", "speed_bench_output_len", "int", 4096, None),
    ("--speed-bench-category", "speed_bench_category", "str", None, None),
    ("--label", "label", "str", None, None),
    ("--backend", "backend", "str", "openai", BENCH_BACKENDS),
    ("--base-url", "base_url", "str", None, None),
    ("--host", "host", "str", "127.0.0.1", None),
    ("--port", "port", "int", 8000, None),
    ("--endpoint", "endpoint", "str", "/v1/completions", None),
    ("--header", "header", "list*", None, None),
    ("--max-concurrency", "max_concurrency", "int", None, None),
    ("--model", "model", "str", None, None),
    ("--input-len", "input_len", "int", None, None),
    ("--output-len", "output_len", "int", None, None),
    ("--tokenizer", "tokenizer", "str", None, None),
    ("--tokenizer-mode", "tokenizer_mode", "str", "auto", None),
    ("--use-beam-search", "use_beam_search", "flag", False, None),
    ("--logprobs", "logprobs", "int", None, None),
    ("--request-rate", "request_rate", "float", INF, None),
    ("--burstiness", "burstiness", "float", 1.0, None),
    ("--probe-request-rate", "probe_request_rate", "float", 0.0, None),
    ("--disable-tqdm", "disable_tqdm", "flag", False, None),
    ("--num-warmups", "num_warmups", "int", 0, None),
    ("--profile", "profile", "flag", False, None),
    ("--save-result", "save_result", "flag", False, None),
    ("--save-detailed", "save_detailed", "flag", False, None),
    ("--append-result", "append_result", "flag", False, None),
    ("--metadata", "metadata", "list*", None, None),
    ("--result-dir", "result_dir", "str", None, None),
    ("--result-filename", "result_filename", "str", None, None),
    ("--ignore-eos", "ignore_eos", "flag", False, None),
    ("--self-timed", "self_timed", "selftimed", None, None),
    ("--percentile-metrics", "percentile_metrics", "str", None, None),
    ("--metric-percentiles", "metric_percentiles", "str", "99", None),
    ("--goodput", "goodput", "list+", None, None),
    ("--request-id-prefix", "request_id_prefix", "str", None, None),
    ("--top-p", "top_p", "float", None, None),
    ("--top-k", "top_k", "int", None, None),
    ("--min-p", "min_p", "float", None, None),
    ("--temperature", "temperature", "float", None, None),
    ("--frequency-penalty", "frequency_penalty", "float", None, None),
    ("--presence-penalty", "presence_penalty", "float", None, None),
    ("--repetition-penalty", "repetition_penalty", "float", None, None),
    ("--served-model-name", "served_model_name", "str", None, None),
    ("--lora-modules", "lora_modules", "list+", None, None),
    ("--lora-assignment", "lora_assignment", "str", "random", ["random", "round-robin"]),
    ("--ramp-up-strategy", "ramp_up_strategy", "str", None, ["linear", "exponential"]),
    ("--ramp-up-start-rps", "ramp_up_start_rps", "int", None, None),
    ("--ramp-up-end-rps", "ramp_up_end_rps", "int", None, None),
    ("--ready-check-timeout-sec", "ready_check_timeout_sec", "int", 0, None),
    ("--chat-template-kwargs", "chat_template_kwargs", "json", None, None),
    ("--extra-body", "extra_body", "json", None, None),
    ("--skip-tokenizer-init", "skip_tokenizer_init", "flag", False, None),
    ("--insecure", "insecure", "flag", False, None),
    ("--plot-timeline", "plot_timeline", "flag", False, None),
    ("--timeline-itl-thresholds", "timeline_itl_thresholds", "str", "25,50", None),
    ("--plot-dataset-stats", "plot_dataset_stats", "flag", False, None),
]
BENCH_NAMESPACE_TAIL = [
    ("log_config_file", None),
    ("logging_config", _Repr("LoggingConfig(log_level='INFO', formatter='text', configure_logging=True, "
                             "pylogging_config_file=None)")),
]


class BenchArgError(Exception):
    pass


class _BenchParser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("usage: vllm bench serve [options]\n"
                         "vllm bench <bench_type> [options] serve: error: %s\n" % message)
        raise BenchArgError(message)


def bench_parser():
    p = _BenchParser(prog="vllm bench serve", usage="vllm bench serve [options]", add_help=False,
                     description="Benchmark the online serving throughput (rocm-console simulator).")
    p.add_argument("-h", "--help", action="store_true", dest="help_requested")
    types = {"str": str, "int": int, "float": float, "json": _json_arg}
    for flag, dest, kind, default, choices in BENCH_ARGS:
        if kind == "flag":
            p.add_argument(flag, dest=dest, action="store_true", default=default)
        elif kind == "selftimed":
            p.add_argument("--self-timed", dest=dest, action="store_const", const=True, default=default)
            p.add_argument("--no-self-timed", dest=dest, action="store_const", const=False)
        elif kind in ("list*", "list+"):
            p.add_argument(flag, dest=dest, nargs=kind[-1], default=default)
        else:
            p.add_argument(flag, dest=dest, type=types[kind], default=default, choices=choices)
    return p


def parse_bench_args(argv):
    parser = bench_parser()
    args, extra = parser.parse_known_args([_normalize(a) for a in argv])
    if extra:
        sys.stderr.write("%s\nvllm: error: unrecognized arguments: %s\n" % (BENCH_TOP_USAGE, " ".join(extra)))
        raise BenchArgError("unrecognized arguments")
    if args.request_id_prefix is None:
        args.request_id_prefix = "bench-%s-" % uuid.uuid4().hex[:8]
    return args


def bench_namespace(args):
    items = [("subparser", "bench"), ("bench_type", "serve"),
             ("dispatch_function", _Repr("<function BenchmarkServingSubcommand.cmd at 0x7f%010x>"
                                         % (id(args) & 0xffffffffff)))]
    items += [(dest, getattr(args, dest)) for _, dest, _, _, _ in BENCH_ARGS]
    items += BENCH_NAMESPACE_TAIL
    return "Namespace(%s)" % ", ".join("%s=%r" % (k, v) for k, v in items)


# ------------------------------------------------------------------- bench: texts


def _bench_main_frames():
    """Frames from the `vllm` script down to main_async (asyncio.run, no uvloop)."""
    return (["Traceback (most recent call last):"]
            + _frame("/usr/local/bin/vllm", 8, "<module>", "sys.exit(main())", "main()")
            + _frame(_v("entrypoints/cli/main.py"), 120, "main", "args.dispatch_function(args)")
            + _frame(_v("entrypoints/cli/benchmark/serve.py"), 22, "cmd", "main(args)")
            + _frame(BENCH_SRC, 2004, "main", "return asyncio.run(main_async(args))",
                     "asyncio.run(main_async(args))")
            + _frame(PYLIB + "/asyncio/runners.py", 195, "run", "return runner.run(main)", "runner.run(main)")
            + _frame(PYLIB + "/asyncio/runners.py", 118, "run", "return self._loop.run_until_complete(task)",
                     "self._loop.run_until_complete(task)")
            + _frame(PYLIB + "/asyncio/base_events.py", 691, "run_until_complete", "return future.result()",
                     "future.result()"))


class BenchFatal(Exception):
    """An exception that ends `vllm bench serve` with a traceback on stderr and exit 1."""

    def __init__(self, frames, last, cause=None):
        Exception.__init__(self, last)
        self.frames = frames
        self.last = last
        self.cause = cause

    def text(self):
        lines = []
        if self.cause:
            lines += self.cause.rstrip("\n").split("\n")
            lines += ["", "The above exception was the direct cause of the following exception:", ""]
        lines += _bench_main_frames() + self.frames + self.last.split("\n")
        return "\n".join(lines) + "\n"


def _fatal_in_main_async(line, code, last, caret=None, cause=None):
    return BenchFatal(_frame(BENCH_SRC, line, "main_async", code, caret), last, cause)


def _aiohttp_client_frames():
    aio = SITE + "/aiohttp/"
    return (_frame(aio + "client.py", 1756, "__aenter__", "self._resp: _RetType_co = await self._coro",
                   "await self._coro")
            + _frame(aio + "client.py", 900, "_request", "resp = await handler(req)", "await handler(req)"))


def aiohttp_connect_error(host, port, addr, strerror, errno_, where):
    """traceback.format_exception() text of aiohttp's ClientConnectorError (connection refused)."""
    aio = SITE + "/aiohttp/"
    eyes = SITE + "/aiohappyeyeballs/impl.py"
    sel = PYLIB + "/asyncio/selector_events.py"
    kind = {111: "ConnectionRefusedError", 113: "OSError", 101: "OSError"}.get(errno_, "OSError")
    first = (["Traceback (most recent call last):"]
             + _frame(aio + "connector.py", 1322, "_wrap_create_connection",
                      "sock = await aiohappyeyeballs.start_connection(", "await aiohappyeyeballs.start_connection(")
             + _frame(eyes, 124, "start_connection", "raise first_exception")
             + _frame(eyes, 75, "start_connection", "sock = await _connect_sock(", "await _connect_sock(")
             + _frame(eyes, 210, "_connect_sock", "await loop.sock_connect(sock, address)")
             + _frame(sel, 634, "sock_connect", "return await fut", "await fut")
             + _frame(sel, 674, "_sock_connect_cb", "raise OSError(err, f'Connect call failed {address}')")
             + ["%s: [Errno %d] %s" % (kind, errno_, strerror)])
    second = (["Traceback (most recent call last):"] + where + _aiohttp_client_frames()
              + _frame(aio + "client.py", 854, "_connect_and_send_request",
                       "conn = await self._connector.connect(", "await self._connector.connect(")
              + _frame(aio + "connector.py", 665, "connect",
                       "proto = await self._create_connection(req, traces, timeout)",
                       "await self._create_connection(req, traces, timeout)")
              + _frame(aio + "connector.py", 1263, "_create_connection",
                       "_, proto = await self._create_direct_connection(req, traces, timeout)",
                       "await self._create_direct_connection(req, traces, timeout)")
              + _frame(aio + "connector.py", 1641, "_create_direct_connection", "raise last_exc")
              + _frame(aio + "connector.py", 1610, "_create_direct_connection",
                       "transp, proto = await self._wrap_create_connection(",
                       "await self._wrap_create_connection(")
              + _frame(aio + "connector.py", 1345, "_wrap_create_connection",
                       "raise client_error(req.connection_key, exc) from exc")
              + ["aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host %s:%d ssl:default [%s]"
                 % (host, port, strerror)])
    return "\n".join(first + ["", "The above exception was the direct cause of the following exception:", ""]
                     + second) + "\n"


def aiohttp_disconnected_error(where):
    aio = SITE + "/aiohttp/"
    return "\n".join(
        ["Traceback (most recent call last):"] + where + _aiohttp_client_frames()
        + _frame(aio + "client.py", 871, "_connect_and_send_request", "await resp.start(conn)")
        + _frame(aio + "client_reqrep.py", 1129, "start",
                 "message, payload = await protocol.read()  # type: ignore[union-attr]",
                 "await protocol.read()")
        + _frame(aio + "streams.py", 703, "read", "await self._waiter")
        + ["aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected"]) + "\n"


def aiohttp_payload_error(where):
    aio = SITE + "/aiohttp/"
    first = (["Traceback (most recent call last):"]
             + _frame(aio + "client_proto.py", 145, "connection_lost", "uncompleted = self._parser.feed_eof()",
                      "self._parser.feed_eof()")
             + ['  File "aiohttp/_http_parser.pyx", line 620, in aiohttp._http_parser.HttpParser.feed_eof',
                "aiohttp.http_exceptions.TransferEncodingError: 400, message:",
                "  Not enough data to satisfy transfer length header."])
    second = (["Traceback (most recent call last):"] + where
              + _frame(aio + "streams.py", 46, "__anext__", "rv = await self.read_func()", "await self.read_func()")
              + _frame(aio + "streams.py", 471, "readany", 'await self._wait("readany")')
              + _frame(aio + "streams.py", 365, "_wait", "await waiter")
              + ["aiohttp.client_exceptions.ClientPayloadError: Response payload is not completed: "
                 "<TransferEncodingError: 400, message='Not enough data to satisfy transfer length header.'>"])
    return "\n".join(first + ["", "The above exception was the direct cause of the following exception:", ""]
                     + second) + "\n"


def _request_where(chat, streaming):
    """The endpoint_request_func.py frame an aiohttp error surfaces in."""
    func = "async_request_openai_chat_completions" if chat else "async_request_openai_completions"
    if streaming:
        return _frame(BENCH_REQ_SRC, 414 if chat else 237, func,
                      "async for chunk_bytes in response.content.iter_any():")
    return _frame(BENCH_REQ_SRC, 410 if chat else 232, func,
                  "async with session.post(url=api_url, json=payload, headers=headers) as response:")


def python_exception_text(exc, where):
    """Text like traceback.format_exception() for an unexpected client-side exception."""
    name = type(exc).__name__
    mod = type(exc).__module__
    if mod not in ("builtins", "__main__"):
        name = mod + "." + name
    return "\n".join(["Traceback (most recent call last):"] + where + ["%s: %s" % (name, exc)]) + "\n"


def _keyboard_interrupt_text(in_requests, chat):
    if in_requests:
        inner = (_frame(BENCH_SRC, 2220, "main_async", "benchmark_result = await benchmark(",
                        "await benchmark(")
                 + _frame(BENCH_SRC, 1081, "benchmark", "outputs: list[RequestFuncOutput] = await asyncio.gather(*tasks)",
                          "await asyncio.gather(*tasks)")
                 + _frame(BENCH_SRC, 979, "limited_request_func", "output = await request_func(",
                          "await request_func(")
                 + _request_where(chat, True)
                 + _frame(SITE + "/aiohttp/streams.py", 46, "__anext__", "rv = await self.read_func()",
                          "await self.read_func()")
                 + _frame(SITE + "/aiohttp/streams.py", 471, "readany", 'await self._wait("readany")')
                 + _frame(SITE + "/aiohttp/streams.py", 365, "_wait", "await waiter"))
    else:
        inner = (_frame(BENCH_SRC, 2220, "main_async", "benchmark_result = await benchmark(",
                        "await benchmark(")
                 + _frame(PYLIB + "/asyncio/tasks.py", 665, "sleep", "return await future", "await future"))
    first = (["Traceback (most recent call last):"]
             + _frame(PYLIB + "/asyncio/runners.py", 118, "run", "return self._loop.run_until_complete(task)",
                      "self._loop.run_until_complete(task)")
             + _frame(PYLIB + "/asyncio/base_events.py", 691, "run_until_complete", "return future.result()",
                      "future.result()")
             + inner + ["asyncio.exceptions.CancelledError"])
    second = (_bench_main_frames()[:-9]
              + _frame(PYLIB + "/asyncio/runners.py", 195, "run", "return runner.run(main)", "runner.run(main)")
              + _frame(PYLIB + "/asyncio/runners.py", 123, "run", "raise KeyboardInterrupt()")
              + ["KeyboardInterrupt"])
    return "\n".join(first + ["", "During handling of the above exception, another exception occurred:", ""]
                     + second) + "\n"


def bench_out(text=""):
    """print() to stdout: block-buffered into a pipe or file, like the real client."""
    try:
        sys.stdout.write(text + "\n")
    except (OSError, ValueError):
        pass


def bench_flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def bench_err(text):
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def bench_log(level, src, msg):
    """vLLM's logger: to stdout, flushed after every record (logging.StreamHandler)."""
    bench_out("(MainProcess pid=%d) %s %s [%s] %s" % (os.getpid(), level, time.strftime("%m-%d %H:%M:%S"), src, msg))
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


# ----------------------------------------------------------------- bench: tqdm


class _EMA(object):
    """tqdm.utils.EMA."""

    def __init__(self, smoothing=0.3):
        self.alpha = smoothing
        self.last = 0.0
        self.calls = 0

    def __call__(self, x=None):
        beta = 1 - self.alpha
        if x is not None:
            self.last = self.alpha * x + beta * self.last
            self.calls += 1
        return self.last / (1 - beta ** self.calls) if self.calls else self.last


def tqdm_interval(t):
    sign = "-" if t < 0 else ""
    mins, s = divmod(abs(int(t)), 60)
    h, m = divmod(mins, 60)
    return "%s%d:%02d:%02d" % (sign, h, m, s) if h else "%s%02d:%02d" % (sign, m, s)


TQDM_CHARSET = u" " + u"".join(chr(c) for c in range(0x258F, 0x2587, -1))


class BenchBar(object):
    """tqdm(total=N) as `vllm bench serve` uses it: stderr, `\\r` redraws at most every 0.1 s
    (mininterval, dynamic miniters, EMA rate with smoothing 0.3), width = terminal columns - 1
    on a tty and a 10-character bar otherwise (tqdm ignores $COLUMNS), a final redraw with the
    overall rate and a newline at close()."""

    def __init__(self, total, bar_format=None, unit="it"):
        self.total = total
        self.bar_format = bar_format
        self.unit = unit
        self.n = 0
        self.last_print_n = 0
        self.miniters = 0
        self.mininterval = 0.1
        self.maxinterval = 10.0
        self.ema_dn = _EMA()
        self.ema_dt = _EMA()
        self.ema_miniters = _EMA()
        self.overall = False
        self.closed = False
        self.last_len = 0
        try:
            self.ncols = os.get_terminal_size(sys.stderr.fileno())[0] - 1
        except (OSError, ValueError, AttributeError):
            self.ncols = None
        bench_flush()  # tqdm's status_printer flushes both streams
        self.start_t = self.last_print_t = time.time()
        self.refresh()

    def update(self, n=1):
        if self.closed:
            return
        self.n += n
        cur_t = time.time()
        if self.miniters > 1 and cur_t - self.last_print_t >= self.maxinterval:
            self.miniters = 1  # what tqdm's monitor thread does
        if self.n - self.last_print_n >= self.miniters:
            dt = cur_t - self.last_print_t
            if dt >= self.mininterval:
                dn = self.n - self.last_print_n
                if dt and dn:
                    self.ema_dn(dn)
                    self.ema_dt(dt)
                self.refresh()
                if dt >= self.maxinterval:
                    self.miniters = dn * self.mininterval / dt
                else:
                    self.miniters = self.ema_miniters(dn * (self.mininterval / dt if dt else 1))
                self.last_print_n = self.n
                self.last_print_t = cur_t

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.overall = True
        self.refresh()
        bench_err("\n")

    def refresh(self):
        s = self.format()
        pad = u" " * max(self.last_len - len(s), 0)
        self.last_len = len(s)
        bench_err(u"\r" + s + pad)

    def format(self):
        n, total = self.n, self.total
        elapsed = time.time() - self.start_t
        rate = None
        if not self.overall:
            dt = self.ema_dt()
            rate = self.ema_dn() / dt if dt else None
        if rate is None and elapsed:
            rate = n / elapsed
        inv_rate = 1 / rate if rate else None
        rate_noinv = ("%5.2f" % rate if rate else "?") + self.unit + "/s"
        rate_inv = ("%5.2f" % inv_rate if inv_rate else "?") + "s/" + self.unit
        rate_fmt = rate_inv if inv_rate and inv_rate > 1 else rate_noinv
        remaining = (total - n) / rate if rate and total else 0
        remaining_str = tqdm_interval(remaining) if rate else "?"
        elapsed_str = tqdm_interval(elapsed)
        frac = float(n) / total if total else 0.0
        if self.bar_format is not None:  # "{desc} |{bar}| {elapsed} elapsed, {remaining} remaining"
            left, right = " |", "| %s elapsed, %s remaining" % (elapsed_str, remaining_str)
        else:
            left = "{0:3.0f}%|".format(frac * 100)
            right = "| %s/%s [%s<%s, %s]" % (n, total, elapsed_str, remaining_str, rate_fmt)
        width = max(1, self.ncols - len(left) - len(right)) if self.ncols else 10
        full, part = divmod(int(frac * width * 8), 8)
        bar = TQDM_CHARSET[-1] * full
        if full < width:
            bar += TQDM_CHARSET[part] + TQDM_CHARSET[0] * (width - full - 1)
        res = left + bar + right
        return res[:self.ncols] if self.ncols else res


# --------------------------------------------------------------- bench: datasets


BENCH_WORDS = ("the of and to in a is it for on as by at be or an we are was his her can all one had but not "
               "you has new may use way out up two so do if no my who its get how our any old see now man day "
               "per top end set run big low key map row bit box cut fix hot mix net sum tag tip web ask add "
               "air arm art bed car dog eye far fun gas job law lot oil red sea sun tea war win yes age bad "
               "few hit let lie own pay put say six ten try via yet").split()


class BenchSample(object):
    __slots__ = ("prompt", "prompt_len", "expected_output_len", "request_id")

    def __init__(self, prompt, prompt_len, expected_output_len, request_id):
        self.prompt = prompt
        self.prompt_len = prompt_len
        self.expected_output_len = expected_output_len
        self.request_id = request_id


def bench_count_tokens(text):
    """Tokens the way the simulated server counts them: max(words, chars / 4)."""
    return count_text_tokens(text)


def _range_ratios(text):
    try:
        value = float(text)
        return value, value
    except (TypeError, ValueError):
        data = json.loads(text)
        return float(data.get("input", 0.0)), float(data.get("output", 0.0))


def _dataset_frames(lambda_line, lambda_code, lambda_caret):
    return (_frame(BENCH_SRC, 2165, "main_async", "input_requests = get_samples(args, tokenizer)",
                   "get_samples(args, tokenizer)")
            + _frame(BENCH_DATASETS_SRC, 2413, "get_samples",
                     "input_requests = dataset_mapping[args.dataset_name]()", "dataset_mapping[args.dataset_name]()")
            + _frame(BENCH_DATASETS_SRC, lambda_line, "<lambda>", lambda_code, lambda_caret))


def bench_random_samples(args):
    """RandomDataset.sample(): lengths uniform around the means, prompts of short words (no
    tokenizer special tokens, so `--random-input-len 64` gives 64-token prompts)."""
    rin, rout = _range_ratios(args.random_range_ratio)
    frames = _dataset_frames(2258, "\"random\": lambda: RandomDataset(", "RandomDataset(")
    for which, r in (("input", rin), ("output", rout)):
        if not 0.0 <= r < 1.0:
            raise BenchFatal(frames + _frame(_v("benchmarks/datasets/utils.py"), 65, "get_sampling_params",
                                             'raise ValueError("%s_range_ratio must be in [0, 1).")' % which),
                             "ValueError: %s_range_ratio must be in [0, 1)." % which)
    num_special = 0
    real_input_len = max(0, int(args.random_input_len) - num_special)
    in_low = int(math.floor(real_input_len * (1 - rin)))
    in_high = int(math.ceil(real_input_len * (1 + rin)))
    out_low = max(int(math.floor(args.random_output_len * (1 - rout))), 1)
    out_high = max(int(math.ceil(args.random_output_len * (1 + rout))), 1)
    prefix_len = max(0, int(args.random_prefix_len))
    if prefix_len + in_low < 1:
        raise BenchFatal(frames + _frame(BENCH_DATASETS_SRC, 606, "sample", "raise ValueError("),
                         "ValueError: --random-input-len is too small: with tokenizer special tokens %d and input "
                         "range ratio %s, the minimum possible total input tokens (prefix + sampled) is %d. "
                         "Increase --random-input-len and/or --random-prefix-len, or decrease the input range "
                         "ratio so that prefix_len + floor(max(0, random_input_len - num_special)) * (1 - "
                         "input_range_ratio) >= 1." % (num_special, rin, prefix_len + in_low))
    bench_log("INFO", "utils.py:88", "Sampling input_len from [%s, %s] and output_len from [%s, %s]"
              % (in_low, in_high, out_low, out_high))
    rng = random.Random(args.seed)
    n = max(0, args.num_prompts)
    input_lens = [rng.randint(in_low, in_high) for _ in range(n)]
    output_lens = [rng.randint(out_low, out_high) for _ in range(n)]
    offsets = [rng.randrange(len(BENCH_WORDS)) for _ in range(n)]
    prefix = [rng.choice(BENCH_WORDS) for _ in range(prefix_len)]
    samples = []
    w = len(BENCH_WORDS)
    for i in range(n):
        words = prefix + [BENCH_WORDS[(offsets[i] + i + j) % w] for j in range(input_lens[i])]
        samples.append(BenchSample(" ".join(words), prefix_len + input_lens[i], output_lens[i],
                                   args.request_id_prefix + str(i)))
    return samples


def bench_sharegpt_samples(args):
    frames = _dataset_frames(2303, "\"sharegpt\": lambda: ShareGPTDataset(", "ShareGPTDataset(")
    frames += _frame(BENCH_DATASETS_SRC, 1334, "__init__", "self.load_data()")
    path = args.dataset_path
    if path is None:
        raise BenchFatal(frames + _frame(BENCH_DATASETS_SRC, 1338, "load_data",
                                         'raise ValueError("dataset_path must be provided for loading data.")'),
                         "ValueError: dataset_path must be provided for loading data.")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, IOError) as exc:
        raise BenchFatal(frames + _frame(BENCH_DATASETS_SRC, 1340, "load_data",
                                         'with open(self.dataset_path, encoding="utf-8") as f:',
                                         'open(self.dataset_path, encoding="utf-8")'),
                         "%s: [Errno %s] %s: %r" % (type(exc).__name__, exc.errno, exc.strerror, path))
    except ValueError as exc:
        raise BenchFatal(frames + _frame(BENCH_DATASETS_SRC, 1341, "load_data", "self.data = json.load(f)",
                                         "json.load(f)"), "json.decoder.JSONDecodeError: %s" % exc)
    entries = [e for e in (data if isinstance(data, list) else [])
               if isinstance(e, dict) and isinstance(e.get("conversations"), list) and len(e["conversations"]) >= 2]
    if not args.disable_shuffle:
        random.Random(args.seed).shuffle(entries)
    output_len = args.sharegpt_output_len
    samples = []
    for entry in entries:
        if len(samples) >= args.num_prompts:
            break
        try:
            prompt = str(entry["conversations"][0]["value"])
            completion = str(entry["conversations"][1]["value"])
        except (KeyError, TypeError):
            continue
        prompt_len = bench_count_tokens(prompt)
        new_output_len = bench_count_tokens(completion) if output_len is None else output_len
        too_short = prompt_len < 4 or (output_len is None and new_output_len < 4)
        if too_short or prompt_len > 1024 or prompt_len + new_output_len > 2048:
            continue
        samples.append(BenchSample(prompt, prompt_len, new_output_len, args.request_id_prefix + str(len(samples))))
    if args.no_oversample:
        bench_log("INFO", "datasets.py:310", "Skipping oversampling. Total samples: %d." % len(samples))
    elif len(samples) < args.num_prompts:
        if not samples:
            raise BenchFatal(frames[:-3] + _frame(BENCH_DATASETS_SRC, 319, "maybe_oversample_requests",
                                                  "random.choice(requests),")
                             + _frame(PYLIB + "/random.py", 347, "choice",
                                      "raise IndexError('Cannot choose from an empty sequence')"),
                             "IndexError: Cannot choose from an empty sequence")
        rng = random.Random(args.seed)
        base = len(samples)
        for i in range(args.num_prompts - base):
            s = rng.choice(samples[:base])
            samples.append(BenchSample(s.prompt, s.prompt_len, s.expected_output_len,
                                       args.request_id_prefix + str(base + i)))
        bench_log("INFO", "datasets.py:324", "Oversampled requests to reach %d total samples." % args.num_prompts)
    return samples


# ------------------------------------------------------------------ bench: HTTP


class BenchHttpError(Exception):
    """How a request failed on the wire, rendered like aiohttp's exception text."""

    def __init__(self, kind, host=None, port=None, exc=None):
        Exception.__init__(self, kind)
        self.kind = kind
        self.host = host
        self.port = port
        self.exc = exc

    def message(self):
        """str() of the aiohttp exception."""
        if self.kind == "connect":
            return "Cannot connect to host %s:%d ssl:default [%s]" % (self.host, self.port, self._strerror())
        if self.kind == "disconnected":
            return "Server disconnected"
        return ("Response payload is not completed: <TransferEncodingError: 400, message='Not enough data to "
                "satisfy transfer length header.'>")

    def _strerror(self):
        exc = self.exc
        if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:
            return exc.strerror
        return str(exc)

    def text(self, where_post, where_stream):
        if self.kind == "connect":
            errno_ = getattr(self.exc, "errno", None) or 111
            return aiohttp_connect_error(self.host, self.port, None, self._strerror(), errno_, where_post)
        if self.kind == "disconnected":
            return aiohttp_disconnected_error(where_post)
        return aiohttp_payload_error(where_stream)


class _Conn(object):
    __slots__ = ("reader", "writer", "key")

    def __init__(self, reader, writer, key):
        self.reader = reader
        self.writer = writer
        self.key = key

    def close(self):
        try:
            self.writer.close()
        except Exception:
            pass


def join_host_port(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


class BenchHttp(object):
    """A small keep-alive HTTP/1.1 client on asyncio streams (what aiohttp does for the real one)."""

    def __init__(self, ssl_context=None):
        self.ssl_context = ssl_context
        self.idle = {}
        self.open = set()

    def close_all(self):
        for conn in list(self.open):
            conn.close()
        self.open.clear()
        self.idle.clear()

    async def _connect(self, key):
        scheme, host, port = key
        ctx = None
        if scheme == "https":
            ctx = self.ssl_context
            if ctx is None:
                import ssl
                ctx = ssl.create_default_context()
        try:
            reader, writer = await asyncio.open_connection(host, port, ssl=ctx, limit=1 << 22)
        except (OSError, asyncio.TimeoutError) as exc:
            raise BenchHttpError("connect", host, port, exc)
        conn = _Conn(reader, writer, key)
        self.open.add(conn)
        return conn

    def _drop(self, conn):
        self.open.discard(conn)
        conn.close()

    async def request(self, method, url, headers=None, body=b"", on_data=None):
        """Returns (status, reason, body); for a 200 with on_data, each body piece goes to on_data
        as it arrives instead. Raises BenchHttpError."""
        parts = urlsplit(url)
        scheme = (parts.scheme or "http").lower()
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if scheme == "https" else 80)
        key = (scheme, host, port)
        target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        lines = ["%s %s HTTP/1.1" % (method, target), "Host: %s" % join_host_port(host, port),
                 "User-Agent: Python/%d.%d aiohttp/3.13.2" % sys.version_info[:2], "Accept: */*"]
        for k, v in (headers or {}).items():
            lines.append("%s: %s" % (k, v))
        if body or method == "POST":
            lines.append("Content-Length: %d" % len(body))
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + (body or b"")
        idle = self.idle.get(key) or []
        conn = idle.pop() if idle else None
        reused = conn is not None
        if conn is None:
            conn = await self._connect(key)
        try:
            try:
                conn.writer.write(raw)
                await conn.writer.drain()
                status_line = await conn.reader.readline()
            except (OSError, ConnectionError):
                status_line = b""
            if not status_line:
                self._drop(conn)
                if reused:  # a stale keep-alive connection: retry once on a new one
                    return await self.request(method, url, headers, body, on_data)
                raise BenchHttpError("disconnected", host, port)
            try:
                version, status, reason = self._status(status_line)
                resp_headers = await self._headers(conn.reader)
            except (ValueError, OSError, ConnectionError):
                self._drop(conn)
                raise BenchHttpError("disconnected", host, port)
            stream = on_data if status == 200 else None
            pieces = []
            sink = stream or pieces.append
            try:
                complete = await self._body(conn.reader, resp_headers, sink)
            except (ValueError, OSError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                self._drop(conn)
                raise BenchHttpError("payload", host, port)
            keep = complete and version == "HTTP/1.1" and "close" not in resp_headers.get("connection", "").lower()
            if keep:
                self.idle.setdefault(key, []).append(conn)
            else:
                self._drop(conn)
            return status, reason, b"".join(pieces)
        except BaseException:
            if conn in self.open and conn not in (self.idle.get(key) or []):
                self._drop(conn)
            raise

    @staticmethod
    def _status(line):
        text = line.decode("latin-1").rstrip("\r\n")
        parts = text.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ValueError(text)
        return parts[0], int(parts[1]), parts[2] if len(parts) > 2 else ""

    @staticmethod
    async def _headers(reader):
        headers = {}
        while True:
            line = await reader.readline()
            if not line:
                raise ValueError("eof in headers")
            if line in (b"\r\n", b"\n"):
                return headers
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()

    @staticmethod
    async def _body(reader, headers, sink):
        """Read the body into sink(); True if it ended cleanly (so the connection can be reused)."""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                size_line = await reader.readline()
                if not size_line:
                    raise ValueError("eof in chunked body")
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:
                        trailer = await reader.readline()
                        if not trailer:
                            raise ValueError("eof in trailer")
                        if trailer in (b"\r\n", b"\n"):
                            return True
                data = await reader.readexactly(size)
                await reader.readexactly(2)
                sink(data)
        length = headers.get("content-length")
        if length is not None:
            n = int(length)
            if n:
                sink(await reader.readexactly(n))
            return True
        while True:
            data = await reader.read(65536)
            if not data:
                return False
            sink(data)


# -------------------------------------------------------------- bench: requests


class BenchInput(object):
    def __init__(self, prompt, api_url, prompt_len, output_len, model, model_name=None, logprobs=None,
                 extra_headers=None, extra_body=None, ignore_eos=False, request_id=None, chat=False):
        self.prompt = prompt
        self.api_url = api_url
        self.prompt_len = prompt_len
        self.output_len = output_len
        self.model = model
        self.model_name = model_name
        self.logprobs = logprobs
        self.extra_headers = extra_headers
        self.extra_body = extra_body
        self.ignore_eos = ignore_eos
        self.request_id = request_id
        self.chat = chat

    def replace(self, **changes):
        new = BenchInput.__new__(BenchInput)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new


class BenchOutput(object):
    def __init__(self):
        self.generated_text = ""
        self.success = False
        self.latency = 0.0
        self.output_tokens = 0
        self.ttft = 0.0
        self.itl = []
        self.tpot = 0.0
        self.prompt_len = 0
        self.error = ""
        self.start_time = 0.0
        self.client_queue_time = 0.0


class SseHandler(object):
    """vllm.benchmarks.lib.endpoint_request_func.StreamedResponseHandler."""

    def __init__(self):
        self.buffer = ""
        self.decoder = codecs.getincrementaldecoder("utf-8")()

    def add_chunk(self, chunk_bytes):
        self.buffer += self.decoder.decode(chunk_bytes)
        messages = []
        while "\n\n" in self.buffer:
            message, self.buffer = self.buffer.split("\n\n", 1)
            message = message.strip()
            if message:
                messages.append(message)
        if self.buffer.startswith("data: "):
            content = self.buffer[len("data: "):].strip()
            if content == "[DONE]":
                messages.append(self.buffer.strip())
                self.buffer = ""
            elif content:
                try:
                    json.loads(content)
                    messages.append(self.buffer.strip())
                    self.buffer = ""
                except ValueError:
                    pass
        return messages


def _validate_api_url(inp):
    suffix = "chat/completions" if inp.chat else "completions"
    if inp.api_url.endswith(suffix):
        return
    name = "OpenAI Chat Completions API" if inp.chat else "OpenAI Completions API"
    func = "async_request_openai_chat_completions" if inp.chat else "async_request_openai_completions"
    raise BenchFatal(
        _frame(BENCH_SRC, 2220, "main_async", "benchmark_result = await benchmark(", "await benchmark(")
        + _frame(BENCH_SRC, 1081, "benchmark", "outputs: list[RequestFuncOutput] = await asyncio.gather(*tasks)",
                 "await asyncio.gather(*tasks)")
        + _frame(BENCH_SRC, 979, "limited_request_func", "output = await request_func(", "await request_func(")
        + _frame(BENCH_REQ_SRC, 390 if inp.chat else 205, func,
                 '_validate_api_url(api_url, "%s", "%s")' % (name, suffix))
        + _frame(BENCH_REQ_SRC, 127, "_validate_api_url",
                 'raise ValueError(f"{api_name} URL must end with one of: {expected_suffixes}.")'),
        "ValueError: %s URL must end with one of: {'%s'}." % (name, suffix))


async def bench_request(inp, http, pbar=None):
    """async_request_openai_completions / async_request_openai_chat_completions."""
    _validate_api_url(inp)
    chat = inp.chat
    payload = collections.OrderedDict()
    payload["model"] = inp.model_name if inp.model_name else inp.model
    if chat:
        payload["messages"] = [{"role": "user", "content": [{"type": "text", "text": inp.prompt}]}]
        payload["max_completion_tokens"] = inp.output_len
    else:
        payload["prompt"] = inp.prompt
        payload["repetition_penalty"] = 1.0
        payload["max_tokens"] = inp.output_len
        payload["logprobs"] = inp.logprobs
    payload["stream"] = True
    payload["stream_options"] = {"include_usage": True}
    if inp.ignore_eos:
        payload["ignore_eos"] = inp.ignore_eos
    if inp.extra_body:
        payload.update(inp.extra_body)
    headers = collections.OrderedDict([("Content-Type", "application/json")])
    if os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["OPENAI_API_KEY"]
    if inp.extra_headers:
        headers.update(inp.extra_headers)
    if inp.request_id:
        headers["x-request-id"] = inp.request_id
    body = json.dumps(payload).encode("utf-8")

    out = BenchOutput()
    out.prompt_len = inp.prompt_len
    st = time.perf_counter()
    out.start_time = st
    state = {"first": False, "recent": st, "text": []}
    handler = SseHandler()

    def on_data(chunk_bytes):
        chunk_bytes = chunk_bytes.strip()
        if not chunk_bytes:
            return
        for message in handler.add_chunk(chunk_bytes):
            if message.startswith(":"):
                continue
            chunk = message[len("data: "):] if message.startswith("data: ") else message
            if chunk == "[DONE]":
                continue
            timestamp = time.perf_counter()
            data = json.loads(chunk)
            choices = data.get("choices")
            if choices:
                if chat:
                    text = choices[0]["delta"].get("content")
                else:
                    text = choices[0].get("text")
                    timestamp = time.perf_counter()
                if not state["first"]:
                    state["first"] = True
                    out.ttft = timestamp - st
                else:
                    out.itl.append(timestamp - state["recent"])
                state["recent"] = timestamp
                state["text"].append(text or "")
            else:
                usage = data.get("usage")
                if usage:
                    out.output_tokens = usage.get("completion_tokens")
                    if usage.get("prompt_tokens") is not None:
                        out.prompt_len = usage.get("prompt_tokens")

    try:
        status, reason, _ = await http.request("POST", inp.api_url, headers, body, on_data)
        if status == 200:
            if state["first"]:
                out.success = True
            else:
                out.success = False
                out.error = ("Never received a valid chunk to calculate TTFT."
                             "This response will be marked as failed!")
            out.generated_text = "".join(state["text"])
            out.latency = state["recent"] - st
        else:
            out.error = reason or ""
            out.success = False
    except BenchHttpError as exc:
        out.success = False
        out.error = exc.text(_request_where(chat, False), _request_where(chat, True))
    except Exception as exc:  # e.g. a JSON decode error in the stream
        out.success = False
        out.error = python_exception_text(exc, _request_where(chat, True))
    if pbar is not None:
        pbar.update(1)
    return out


# --------------------------------------------------------------- bench: metrics


def np_percentile(values, p):
    """numpy.percentile(values, p), linear interpolation."""
    a = sorted(values)
    if not a:
        return 0.0
    idx = (len(a) - 1) * p / 100.0
    lo = int(math.floor(idx))
    hi = min(lo + 1, len(a) - 1)
    t = idx - lo
    x, y = a[lo], a[hi]
    diff = y - x
    return y - diff * (1 - t) if t >= 0.5 else x + diff * t


def np_mean(values):
    return math.fsum(values) / len(values) if values else 0.0


def np_std(values):
    if not values:
        return 0.0
    m = np_mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / len(values))


def np_median(values):
    return np_percentile(values, 50)


def _stats_ms(values, percentiles):
    values = values or [0.0]
    return (np_mean(values) * 1000, np_median(values) * 1000, np_std(values) * 1000,
            [(p, np_percentile(values, p) * 1000) for p in percentiles])


def calculate_metrics(outputs, dur_s, has_tokenizer, percentiles, goodput):
    """serve.py calculate_metrics(): the same numbers; prints the failed requests and the tip."""
    actual_output_lens = []
    total_input = completed = good_completed = 0
    itls, tpots, all_tpots, ttfts, e2els = [], [], [], [], []
    for o in outputs:
        if o.success:
            output_len = o.output_tokens
            if not output_len:
                output_len = bench_count_tokens(o.generated_text) if has_tokenizer else 1
            actual_output_lens.append(output_len)
            total_input += o.prompt_len
            tpot = 0.0
            if output_len > 1:
                tpot = (o.latency - o.ttft) / (output_len - 1)
                tpots.append(tpot)
            all_tpots.append(tpot)
            itls += o.itl
            ttfts.append(o.ttft)
            e2els.append(o.latency)
            completed += 1
        else:
            actual_output_lens.append(0)
    if goodput:
        valid, slos = [], []
        for name, series in (("ttft", ttfts), ("tpot", all_tpots), ("e2el", e2els)):
            if name in goodput:
                valid.append(series)
                slos.append(goodput[name] / 1000.0)
        for req in zip(*valid):
            if all(s >= r for s, r in zip(slos, req)):
                good_completed += 1
    if completed == 0:
        bench_err("%s:1165: UserWarning: All requests failed. This is likely due to a misconfiguration on the "
                  "benchmark arguments.\n  metrics, actual_output_lens = calculate_metrics(\n" % BENCH_SRC)
    successful = [o for o in outputs if o.success]
    failed = [o for o in outputs if not o.success]
    if failed:
        bench_out("Failed requests during benchmark run detected (capping to 10):")
        for i, o in enumerate(failed[:10]):
            bench_out("Error %d: %s" % (i, o.error))
    max_tokens_per_s = 0.0
    max_concurrent = 0
    if successful:
        min_start = min(o.start_time for o in successful)
        max_end = max(o.start_time + o.latency for o in successful)
        seconds = int(math.ceil(max_end - min_start)) + 1
        tokens = [0] * seconds
        concurrent = [0] * seconds
        for o in successful:
            t = o.start_time + o.ttft
            times = [t]
            for gap in o.itl:
                t += gap
                times.append(t)
            for t in times:
                bucket = int(t - min_start)
                if 0 <= bucket < seconds:
                    tokens[bucket] += 1
            for second in range(int(o.start_time - min_start), int(o.start_time + o.latency - min_start) + 1):
                concurrent[second] += 1
        max_tokens_per_s = float(max(tokens))
        max_concurrent = int(max(concurrent))
        bench_out("tip: install termplotlib and gnuplot to plot the metrics")
    total_output = sum(actual_output_lens)
    m = {"completed": completed, "failed": len(failed), "total_input": total_input, "total_output": total_output,
         "request_throughput": completed / dur_s, "request_goodput": good_completed / dur_s,
         "output_throughput": total_output / dur_s, "total_token_throughput": (total_input + total_output) / dur_s,
         "max_output_tokens_per_s": max_tokens_per_s, "max_concurrent_requests": max_concurrent, "rtfx": 0.0}
    for name, series in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        mean, median, std, pcts = _stats_ms(series, percentiles)
        m["mean_%s_ms" % name] = mean
        m["median_%s_ms" % name] = median
        m["std_%s_ms" % name] = std
        m["percentiles_%s_ms" % name] = pcts
    return m, actual_output_lens


def _row(label, value, fmt="{:<10}"):
    bench_out(("{:<40} " + fmt).format(label, value))


def parse_goodput(pairs):
    out = collections.OrderedDict()
    for pair in pairs:
        name, sep, value = pair.partition(":")
        if not sep or ":" in value:
            raise ValueError(pair)
        out[name] = float(value)
    return out


# ------------------------------------------------------------------- bench: run


class BenchRun(object):
    def __init__(self, args):
        self.args = args
        self.http = None
        self.pbar = None
        self.session_open = False
        self.phase = "setup"
        self.chat = args.backend == "openai-chat"
        self.rand = random.Random(args.seed)

    # -- entry

    def run(self):
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        task = loop.create_task(self.main_async())
        interrupted = []
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            def on_sigint():
                interrupted.append(True)
                task.cancel()
            try:
                loop.add_signal_handler(signal.SIGINT, on_sigint)
            except (ValueError, RuntimeError, NotImplementedError):
                pass
        try:
            try:
                return loop.run_until_complete(task)
            except asyncio.CancelledError:
                if not interrupted:
                    raise
                bench_err(_keyboard_interrupt_text(self.phase == "main", self.chat))
                if self.pbar is not None:
                    self.pbar.close()
                if self.session_open:
                    bench_err("Unclosed client session\nclient_session: <aiohttp.client.ClientSession object at "
                              "0x7f%010x>\n" % (id(self) & 0xffffffffff))
                return 130
            except BenchFatal as exc:
                bench_flush()
                bench_err(exc.text())
                return 1
        finally:
            try:
                pending = [t for t in asyncio_all_tasks(loop) if not t.done()]
                for t in pending:
                    t.cancel()
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            except Exception:
                pass
            if self.http is not None:
                self.http.close_all()
            try:
                loop.run_until_complete(asyncio.sleep(0))
            except Exception:
                pass
            loop.close()

    # -- small HTTP helpers

    async def _get_json(self, url, method="GET", payload=None, headers=None):
        hdrs = collections.OrderedDict(headers or {})
        body = b""
        if payload is not None:
            hdrs["Content-Type"] = "application/json"
            body = json.dumps(payload).encode("utf-8")
        status, reason, raw = await self.http.request(method, url, hdrs, body)
        if status >= 400:
            raise ValueError("%d, message=%r, url=%r" % (status, reason, url))
        return json.loads(raw.decode("utf-8"))

    async def fetch_first_model(self, base_url, headers):
        models_url = base_url + "/v1/models"
        where = _frame(BENCH_SRC, 166, "get_first_model_from_server",
                       "async with session.get(models_url, headers=headers) as response:")
        frames = (_frame(BENCH_SRC, 2081, "main_async", "model_name, model_id = await get_first_model_from_server(",
                         "await get_first_model_from_server(")
                  + _frame(BENCH_SRC, 177, "get_first_model_from_server", "raise RuntimeError("))
        head = ("RuntimeError: Failed to fetch models from server at %s. Check that:\n1. The server is running\n"
                "2. The server URL is correct\nError: " % models_url)
        try:
            data = await self._get_json(models_url, headers=headers)
        except BenchHttpError as exc:
            raise BenchFatal(frames, head + exc.message(), exc.text(where, where))
        except ValueError as exc:
            raise BenchFatal(frames, head + str(exc),
                             python_exception_text(exc, where).replace("builtins.", ""))
        if isinstance(data, dict) and data.get("data"):
            first = data["data"][0]
            return first.get("id"), first.get("root", first.get("id"))
        raise BenchFatal(_frame(BENCH_SRC, 2081, "main_async",
                                "model_name, model_id = await get_first_model_from_server(",
                                "await get_first_model_from_server(")
                         + _frame(BENCH_SRC, 172, "get_first_model_from_server", "raise ValueError("),
                         "ValueError: No models found on the server at %s. Make sure the server is running and "
                         "has models loaded." % base_url)

    async def align_prompts(self, base_url, model_id, samples):
        """_align_prompts_to_server_tokenizer(): /tokenize the first prompt, re-align on a mismatch."""
        if not samples or not isinstance(samples[0].prompt, str):
            return samples

        async def tokenize(prompt):
            data = await self._get_json(base_url + "/tokenize", "POST",
                                        {"model": model_id, "prompt": prompt, "add_special_tokens": False})
            return data["tokens"]

        try:
            first = await tokenize(samples[0].prompt)
        except Exception:
            bench_out("WARNING: /tokenize unavailable, skipping alignment.")
            return samples
        expected = samples[0].prompt_len
        if len(first) == expected:
            return samples
        bench_out("WARNING: tokenizer mismatch (server=%d, expected=%d), re-aligning prompts."
                  % (len(first), expected))
        sem = asyncio.Semaphore(64)

        async def fix(s):
            async with sem:
                tokens = await tokenize(s.prompt)
                if len(tokens) <= s.prompt_len:
                    return s
                data = await self._get_json(base_url + "/detokenize", "POST",
                                            {"model": model_id, "tokens": tokens[:s.prompt_len]})
                return BenchSample(data["prompt"], s.prompt_len, s.expected_output_len, s.request_id)

        results = await asyncio.gather(*[fix(s) for s in samples], return_exceptions=True)
        return [r if isinstance(r, BenchSample) else s for s, r in zip(samples, results)]

    async def _metrics_probe(self, base_url):
        """The real client GETs /metrics twice (spec-decode and diffusion stats) before and after."""
        for _ in range(2):
            try:
                await self.http.request("GET", base_url + "/metrics")
            except Exception:
                pass

    async def _profile(self, base_url, what, headers):
        try:
            status, _, _ = await self.http.request("POST", base_url + "/" + what, headers or {})
            return status == 200
        except Exception:
            return False

    # -- main_async()

    async def main_async(self):
        a = self.args
        bench_out(bench_namespace(a))
        if a.max_concurrency is not None and a.max_concurrency <= 0:
            raise _fatal_in_main_async(2010, 'raise ValueError("--max-concurrency must be greater than 0")',
                                       "ValueError: --max-concurrency must be greater than 0")
        if a.ramp_up_strategy is not None:
            problem = None
            if a.request_rate != INF:
                problem = (2031, "When using ramp-up, do not specify --request-rate. The request rate will be "
                                 "controlled by ramp-up parameters. Please remove the --request-rate argument.")
            elif a.ramp_up_start_rps is None or a.ramp_up_end_rps is None:
                problem = (2037, "When using --ramp-up-strategy, both --ramp-up-start-rps and --ramp-up-end-rps "
                                 "must be specified")
            elif a.ramp_up_start_rps < 0 or a.ramp_up_end_rps < 0:
                problem = (2042, "Ramp-up start and end RPS must be non-negative")
            elif a.ramp_up_start_rps > a.ramp_up_end_rps:
                problem = (2044, "Ramp-up start RPS must be less than end RPS")
            elif a.ramp_up_strategy == "exponential" and a.ramp_up_start_rps == 0:
                problem = (2046, "For exponential ramp-up, the start RPS cannot be 0.")
            if problem:
                raise _fatal_in_main_async(problem[0], "raise ValueError(", "ValueError: " + problem[1])
        label = a.label
        if a.base_url is not None:
            api_url = a.base_url + a.endpoint
            base_url = a.base_url
        else:
            base_url = "http://" + join_host_port(a.host, a.port)
            api_url = base_url + a.endpoint
        headers = None
        if a.header:
            headers = collections.OrderedDict()
            for item in a.header:
                if "=" not in item:
                    raise _fatal_in_main_async(
                        2067, 'raise ValueError("Invalid header format. Please use KEY=VALUE format.")',
                        "ValueError: Invalid header format. Please use KEY=VALUE format.")
                k, v = item.split("=", 1)
                headers[k.strip()] = v.strip()
        ssl_context = None
        if a.insecure or "https://" in base_url:
            import ssl
            ssl_context = ssl._create_unverified_context() if a.insecure else ssl.create_default_context()
        self.http = BenchHttp(ssl_context)

        if a.model is None:
            bench_out("Model not specified, fetching first model from server...")
            model_name, model_id = await self.fetch_first_model(base_url, headers)
            bench_out("First model name: %s, first model id: %s" % (model_name, model_id))
        else:
            model_name, model_id = a.served_model_name, a.model
        has_tokenizer = not a.skip_tokenizer_init
        tokenizer_id = (a.tokenizer if a.tokenizer is not None else model_id) if has_tokenizer else None

        if a.dataset_name in ("random", "random-mm", "random-rerank", "prefix_repetition") and a.dataset_path:
            raise _fatal_in_main_async(
                2114, "raise ValueError(",
                "ValueError: Cannot use '%s' dataset with --dataset-path. Please specify the appropriate "
                "--dataset-name (e.g., 'sharegpt', 'custom', 'hf') for your dataset file: %s"
                % (a.dataset_name, a.dataset_path))
        if a.input_len is not None:
            a.random_input_len = a.input_len
        if a.output_len is not None:
            a.random_output_len = a.sharegpt_output_len = a.output_len
        if a.dataset_name in ("random", "random-mm") and a.backend in BENCH_OPENAI_COMPATIBLE:
            a.ignore_eos = True
        if a.dataset_name != "timed_trace" and a.self_timed is not None:
            raise _fatal_in_main_async(2157, "raise ValueError(",
                                       "ValueError: --self-timed/--no-self-timed is only supported with "
                                       "--dataset-name=timed_trace")
        if a.dataset_name == "random":
            samples = bench_random_samples(a)
        elif a.dataset_name == "sharegpt":
            samples = bench_sharegpt_samples(a)
        else:
            raise _fatal_in_main_async(2165, "input_requests = get_samples(args, tokenizer)",
                                       "NotImplementedError: rocm-console's vLLM simulator only simulates the "
                                       "'random' and 'sharegpt' datasets, not %r" % a.dataset_name,
                                       "get_samples(args, tokenizer)")
        if a.dataset_name in ("random", "prefix_repetition"):
            samples = await self.align_prompts(base_url, model_id, samples)
        goodput = {}
        if a.goodput:
            try:
                goodput = parse_goodput(a.goodput)
            except ValueError:
                raise _fatal_in_main_async(
                    2172, "goodput_config_dict = check_goodput_args(args)",
                    "argparse.ArgumentTypeError: Invalid format found for service level objectives. Specify "
                    "service level objectives for goodput as \"KEY:VALUE\" pairs, where the key is a metric name, "
                    "and the value is a number in milliseconds.", "check_goodput_args(args)")
            for name, value in goodput.items():
                if name not in ("ttft", "tpot", "e2el"):
                    raise _fatal_in_main_async(
                        2172, "goodput_config_dict = check_goodput_args(args)",
                        "ValueError: Invalid metric name found, %s: %s. The service level objective name should "
                        "be one of ['ttft', 'tpot', 'e2el']. " % (name, value), "check_goodput_args(args)")
                if value < 0:
                    raise _fatal_in_main_async(
                        2172, "goodput_config_dict = check_goodput_args(args)",
                        "ValueError: Invalid value found, %s: %s. The service level objective value should be "
                        "non-negative." % (name, value), "check_goodput_args(args)")
        if a.backend not in BENCH_SIMULATED_BACKENDS:
            raise _fatal_in_main_async(2220, "benchmark_result = await benchmark(",
                                       "NotImplementedError: rocm-console's vLLM simulator only simulates the "
                                       "vllm, openai and openai-chat backends, not %r" % a.backend,
                                       "await benchmark(")
        sampling = collections.OrderedDict(
            (k, v) for k, v in (("top_p", a.top_p), ("top_k", a.top_k), ("min_p", a.min_p),
                                ("temperature", a.temperature), ("frequency_penalty", a.frequency_penalty),
                                ("presence_penalty", a.presence_penalty),
                                ("repetition_penalty", a.repetition_penalty)) if v is not None)
        if "temperature" not in sampling:
            bench_out("WARNING: vllm bench serve no longer sets temperature==0 (greedy) in requests by default. "
                      "The default will be determined on the server side and can be model/API specific. For the "
                      "old behavior, include --temperature=0.")
        extra_body = dict(sampling)
        extra_body.update(a.extra_body or {})
        percentile_metrics = a.percentile_metrics or "ttft,tpot,itl"
        result = await self.benchmark(
            api_url=api_url, base_url=base_url, model_id=model_id, model_name=model_name,
            has_tokenizer=has_tokenizer, samples=samples, headers=headers, extra_body=extra_body,
            selected_metrics=percentile_metrics.split(","),
            percentiles=[float(p) for p in a.metric_percentiles.split(",")], goodput=goodput)

        result_json = collections.OrderedDict()
        current_dt = time.strftime("%Y%m%d-%H%M%S")
        result_json["date"] = current_dt
        result_json["endpoint_type"] = a.backend
        result_json["backend"] = a.backend
        result_json["label"] = label
        result_json["model_id"] = model_id
        result_json["tokenizer_id"] = tokenizer_id
        result_json["num_prompts"] = a.num_prompts
        for item in a.metadata or []:
            if "=" not in item:
                raise _fatal_in_main_async(2273, "raise ValueError(",
                                           "ValueError: Invalid metadata format. Please use KEY=VALUE format.")
            k, v = item.split("=", 1)
            result_json[k.strip()] = v.strip()
        result_json["request_rate"] = a.request_rate if a.request_rate < INF else "inf"
        result_json["burstiness"] = a.burstiness
        result_json["max_concurrency"] = a.max_concurrency
        if a.ramp_up_strategy is not None:
            result_json["ramp_up_strategy"] = a.ramp_up_strategy
            result_json["ramp_up_start_rps"] = a.ramp_up_start_rps
            result_json["ramp_up_end_rps"] = a.ramp_up_end_rps
        result_json.update(result)
        file_name = self.result_filename(model_id, label, current_dt)
        if not a.save_detailed:
            for field in ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors"):
                result_json.pop(field, None)
        if (a.save_result or a.append_result) and file_name:
            with open(file_name, "a+" if a.append_result else "w", encoding="utf-8") as f:
                if a.append_result and f.tell() != 0:
                    f.write("\n")
                json.dump(result_json, f)
        return 0

    def result_filename(self, model_id, label, current_dt):
        a = self.args
        if not (a.plot_timeline or a.save_result or a.append_result):
            return None
        base_model_id = model_id.split("/")[-1]
        conc = "-concurrency%s" % a.max_concurrency if a.max_concurrency is not None else ""
        label = label or a.backend
        if a.ramp_up_strategy is not None:
            name = "%s-ramp-up-%s-%sqps-%sqps%s-%s-%s.json" % (label, a.ramp_up_strategy, a.ramp_up_start_rps,
                                                             a.ramp_up_end_rps, conc, base_model_id, current_dt)
        else:
            name = "%s-%sqps%s-%s-%s.json" % (label, a.request_rate, conc, base_model_id, current_dt)
        if a.result_filename:
            name = a.result_filename
        if a.result_dir:
            os.makedirs(a.result_dir, exist_ok=True)
            name = os.path.join(a.result_dir, name)
        return name

    # -- arrivals

    def arrival_plan(self, n):
        """get_request(): (cumulative delay, rate) per request; Poisson/gamma gaps, seeded."""
        a = self.args
        rates, delays = [], []
        for i in range(n):
            rate = a.request_rate
            if a.ramp_up_strategy and a.ramp_up_start_rps is not None and a.ramp_up_end_rps is not None:
                progress = i / float(max(n - 1, 1))
                if a.ramp_up_strategy == "linear":
                    rate = a.ramp_up_start_rps + (a.ramp_up_end_rps - a.ramp_up_start_rps) * progress
                else:
                    rate = a.ramp_up_start_rps * (float(a.ramp_up_end_rps) / a.ramp_up_start_rps) ** progress
            if not rate > 0:
                raise BenchFatal(_frame(BENCH_SRC, 456, "get_request", "assert current_request_rate > 0.0, ("),
                                 "AssertionError: Obtained non-positive request rate %s." % rate)
            rates.append(rate)
            if rate == INF:
                delays.append(0.0)
            elif a.burstiness == INF:
                delays.append(1.0 / rate)
            else:
                delays.append(self.rand.gammavariate(a.burstiness, 1.0 / (rate * a.burstiness)))
        for i in range(1, len(delays)):
            delays[i] += delays[i - 1]
        if a.ramp_up_strategy is None and delays and delays[-1] != 0:
            factor = (n / a.request_rate) / delays[-1]
            delays = [d * factor for d in delays]
        return delays, rates

    # -- benchmark()

    async def wait_for_endpoint(self, test_input, timeout_seconds, retry_interval=5):
        bench_out("Waiting for endpoint to become up in %d seconds" % timeout_seconds)
        deadline = time.perf_counter() + timeout_seconds
        output = BenchOutput()
        bar = BenchBar(timeout_seconds, bar_format="{desc} |{bar}| {elapsed} elapsed, {remaining} remaining",
                       unit="s")
        while True:
            remaining = deadline - time.perf_counter()
            elapsed = timeout_seconds - remaining
            bar.update(min(elapsed - bar.n, timeout_seconds - bar.n))
            bar.refresh()
            if remaining <= 0:
                bar.close()
                break
            output = await bench_request(test_input, self.http)
            if output.success:
                bar.close()
                return output
            last = str(output.error).rstrip().rsplit("\n", 1)[-1]
            bench_log("WARNING", "ready_checker.py:71", "Endpoint is not ready. Error='%s'" % last)
            sleep = min(retry_interval, remaining)
            if sleep > 0:
                await asyncio.sleep(sleep)
        return output

    async def benchmark(self, api_url, base_url, model_id, model_name, has_tokenizer, samples, headers,
                        extra_body, selected_metrics, percentiles, goodput):
        a = self.args
        max_concurrency = a.max_concurrency
        request_rate = a.request_rate
        self.session_open = True
        bench_out("Starting initial single prompt test run...")
        if not samples:
            raise BenchFatal(_frame(BENCH_SRC, 2220, "main_async", "benchmark_result = await benchmark(",
                                    "await benchmark(")
                             + _frame(BENCH_SRC, 839, "benchmark", "input_requests[0].prompt,"),
                             "IndexError: list index out of range")
        first = samples[0]
        test_input = BenchInput(first.prompt, api_url, first.prompt_len, first.expected_output_len, model_id,
                                model_name, a.logprobs, headers, extra_body or None, a.ignore_eos, chat=self.chat)
        if a.ready_check_timeout_sec > 0:
            self.phase = "ready"
            test_output = await self.wait_for_endpoint(test_input, a.ready_check_timeout_sec)
            if not test_output.success:
                raise BenchFatal(_frame(BENCH_SRC, 2220, "main_async", "benchmark_result = await benchmark(",
                                        "await benchmark(")
                                 + _frame(BENCH_SRC, 884, "benchmark", "raise ValueError("),
                                 "ValueError: Initial test run failed - Please make sure benchmark arguments are "
                                 "correctly specified. Error: %s" % test_output.error)
            bench_out("Initial test run completed.")
        else:
            bench_out("Skipping endpoint ready check.")
        sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None

        if a.num_warmups > 0:
            self.phase = "warmup"
            bench_out("Warming up with %d requests..." % a.num_warmups)
            warm_bar = None if a.disable_tqdm else BenchBar(a.num_warmups)
            self.pbar = warm_bar

            async def warm():
                if sem is None:
                    return await bench_request(test_input, self.http, warm_bar)
                async with sem:
                    return await bench_request(test_input, self.http, warm_bar)

            await asyncio.gather(*[warm() for _ in range(a.num_warmups)])
            if warm_bar is not None:
                warm_bar.close()
            self.pbar = None
            bench_out("Warmup run completed.")

        bench_out("Starting main benchmark run...")
        lora_iter = None
        if a.lora_modules:
            mods = list(a.lora_modules)
            if a.lora_assignment == "round-robin":
                lora_iter = iter([mods[i % len(mods)] for i in range(len(samples))])
            else:
                lora_iter = iter([self.rand.choice(mods) for _ in range(len(samples))])
        if a.profile:
            bench_out("Starting profiler...")
            if await self._profile(base_url, "start_profile", headers):
                bench_out("Profiler started")
        distribution = "Poisson process" if a.burstiness == 1.0 else "Gamma distribution"
        if a.ramp_up_strategy is not None:
            bench_out("Traffic ramp-up strategy: %s." % a.ramp_up_strategy)
            bench_out("Will increase RPS from %s to %s RPS over the duration of the benchmark."
                      % (a.ramp_up_start_rps, a.ramp_up_end_rps))
        else:
            bench_out("Traffic request rate: %s" % request_rate)
        bench_out("Burstiness factor: %s (%s)" % (a.burstiness, distribution))
        bench_out("Maximum request concurrency: %s" % max_concurrency)
        await self._metrics_probe(base_url)
        if not a.burstiness > 0:
            raise BenchFatal(_frame(BENCH_SRC, 2220, "main_async", "benchmark_result = await benchmark(",
                                    "await benchmark(")
                             + _frame(BENCH_SRC, 440, "get_request", "assert burstiness > 0, ("),
                             "AssertionError: A positive burstiness factor is expected, but given %s."
                             % a.burstiness)
        delays, rates = self.arrival_plan(len(samples))
        self.phase = "main"
        pbar = None if a.disable_tqdm else BenchBar(len(samples))
        self.pbar = pbar

        async def limited(inp, arrival):
            if sem is None:
                out = await bench_request(inp, self.http, pbar)
            else:
                async with sem:
                    out = await bench_request(inp, self.http, pbar)
            out.client_queue_time = out.start_time - arrival
            return out

        probe_outputs = []
        probe_stop = asyncio.Event()
        probe_task = None
        if a.probe_request_rate > 0:
            bench_out("Probe request rate: %s req/s" % a.probe_request_rate)
            probe_input = test_input.replace(prompt="Hi", prompt_len=1, output_len=1)

            async def probe_loop():
                while not probe_stop.is_set():
                    probe_outputs.append(await bench_request(probe_input, self.http))
                    await asyncio.sleep(1.0 / a.probe_request_rate)

            probe_task = asyncio.ensure_future(probe_loop())

        start = time.perf_counter()
        tasks = []
        start_ts = time.time()
        for i, s in enumerate(samples):
            if delays[i] > 0:
                wait = start_ts + delays[i] - time.time()
                if wait > 0:
                    await asyncio.sleep(wait)
            req_model_id, req_model_name = model_id, model_name
            if lora_iter is not None:
                req_model_id = req_model_name = next(lora_iter)
            inp = BenchInput(s.prompt, api_url, s.prompt_len, s.expected_output_len or 0, req_model_id,
                             req_model_name, a.logprobs, headers, extra_body or None, a.ignore_eos, s.request_id,
                             chat=self.chat)
            tasks.append(asyncio.ensure_future(limited(inp, time.perf_counter())))
        outputs = await asyncio.gather(*tasks)
        if probe_task is not None:
            probe_stop.set()
            await probe_task
        if pbar is not None:
            pbar.close()
        self.pbar = None
        self.phase = "report"
        duration = time.perf_counter() - start
        await self._metrics_probe(base_url)

        m, actual_output_lens = calculate_metrics(outputs, duration, has_tokenizer, percentiles, goodput)
        bench_out("{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
        _row("Successful requests:", m["completed"])
        _row("Failed requests:", m["failed"])
        if max_concurrency is not None:
            _row("Maximum request concurrency:", max_concurrency)
        if request_rate != INF:
            _row("Request rate configured (RPS):", request_rate, "{:<10.2f}")
        _row("Benchmark duration (s):", duration, "{:<10.2f}")
        _row("Total input tokens:", m["total_input"])
        if has_tokenizer:
            _row("Total generated tokens:", m["total_output"])
        _row("Request throughput (req/s):", m["request_throughput"], "{:<10.2f}")
        if goodput:
            _row("Request goodput (req/s):", m["request_goodput"], "{:<10.2f}")
        if has_tokenizer:
            _row("Output token throughput (tok/s):", m["output_throughput"], "{:<10.2f}")
            _row("Peak output token throughput (tok/s):", m["max_output_tokens_per_s"], "{:<10.2f}")
        _row("Peak concurrent requests:", m["max_concurrent_requests"], "{:<10.2f}")
        if has_tokenizer:
            _row("Total token throughput (tok/s):", m["total_token_throughput"], "{:<10.2f}")

        probe_stats = None
        if probe_task is not None:
            lats = [o.latency for o in probe_outputs if o.success]
            if lats:
                probe_stats = collections.OrderedDict([
                    ("probe_completed", len(lats)), ("probe_failed", len(probe_outputs) - len(lats)),
                    ("probe_median_e2el_ms", np_median(lats) * 1000),
                    ("probe_p99_e2el_ms", np_percentile(lats, 99) * 1000),
                    ("probe_max_e2el_ms", max(lats) * 1000)])
                bench_out("{s:{c}^{n}}".format(s="Probe Requests", n=50, c="-"))
                _row("Probe requests completed:", probe_stats["probe_completed"])
                _row("Probe requests failed:", probe_stats["probe_failed"])
                _row("Median probe E2EL (ms):", probe_stats["probe_median_e2el_ms"], "{:<10.2f}")
                _row("P99 probe E2EL (ms):", probe_stats["probe_p99_e2el_ms"], "{:<10.2f}")
                _row("Max probe E2EL (ms):", probe_stats["probe_max_e2el_ms"], "{:<10.2f}")

        result = collections.OrderedDict([
            ("duration", duration), ("completed", m["completed"]), ("failed", m["failed"]),
            ("total_input_tokens", m["total_input"]), ("total_output_tokens", m["total_output"]),
            ("request_throughput", m["request_throughput"]),
            ("request_goodput", m["request_goodput"] if goodput else None),
            ("output_throughput", m["output_throughput"]), ("total_token_throughput", m["total_token_throughput"]),
            ("input_lens", [o.prompt_len for o in outputs]), ("output_lens", actual_output_lens),
            ("ttfts", [o.ttft for o in outputs]), ("itls", [o.itl for o in outputs]),
            ("latencies", [o.latency for o in outputs]), ("start_times", [o.start_time for o in outputs]),
            ("queue_times", [o.client_queue_time for o in outputs]),
            ("generated_texts", [o.generated_text for o in outputs]), ("errors", [o.error for o in outputs]),
            ("max_output_tokens_per_s", m["max_output_tokens_per_s"]),
            ("max_concurrent_requests", m["max_concurrent_requests"]), ("rtfx", m["rtfx"])])
        queue_times = e2els_queue = None
        if max_concurrency is not None:
            queue_times = [o.client_queue_time for o in outputs if o.success]
            if request_rate != INF:
                e2els_queue = [o.latency + o.client_queue_time for o in outputs if o.success]
        if probe_stats is not None:
            result.update(probe_stats)

        def one_metric(attr, name, header, values=None):
            if attr not in selected_metrics:
                return
            if values is None:
                mean, median, std = m["mean_%s_ms" % attr], m["median_%s_ms" % attr], m["std_%s_ms" % attr]
                pcts = m["percentiles_%s_ms" % attr]
            else:
                mean, median, std, pcts = _stats_ms(values, percentiles)
            bench_out("{s:{c}^{n}}".format(s=header, n=50, c="-"))
            _row("Mean %s (ms):" % name, mean, "{:<10.2f}")
            _row("Median %s (ms):" % name, median, "{:<10.2f}")
            result["mean_%s_ms" % attr] = mean
            result["median_%s_ms" % attr] = median
            result["std_%s_ms" % attr] = std
            for p, value in pcts:
                word = str(int(p)) if int(p) == p else str(p)
                _row("P%s %s (ms):" % (word, name), value, "{:<10.2f}")
                result["p%s_%s_ms" % (word, attr)] = value

        if has_tokenizer:
            one_metric("ttft", "TTFT", "Time to First Token")
            one_metric("tpot", "TPOT", "Time per Output Token (excl. 1st token)")
            one_metric("itl", "ITL", "Inter-token Latency")
        one_metric("e2el", "E2EL", "End-to-end Latency")
        if queue_times is not None:
            one_metric("client_queue_time", "Client Queue Time", "Client-side Queueing", queue_times)
        if e2els_queue is not None:
            one_metric("e2el_including_client_queue", "E2EL incl. Client Queue",
                       "Queue-inclusive End-to-end Latency", e2els_queue)
        bench_out("=" * 50)
        if a.profile:
            bench_out("Stopping profiler...")
            if await self._profile(base_url, "stop_profile", headers):
                bench_out("Profiler stopped")
        self.session_open = False
        return result


def asyncio_all_tasks(loop):
    try:
        return asyncio.all_tasks(loop)
    except AttributeError:  # pragma: no cover - Python < 3.7
        return asyncio.Task.all_tasks(loop)


BENCH_HELP = """usage: vllm bench serve [options]

Benchmark the online serving throughput (rocm-console's vLLM simulator %s: the random and
sharegpt datasets and the vllm, openai and openai-chat backends are simulated; every other
flag of vLLM 0.32 is accepted).
"""


def bench_main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write("usage: vllm bench [-h] {latency,mm-processor,serve,startup,sweep,throughput} ...\n")
        return 0 if argv else 2
    if argv[0] != "serve":
        sys.stderr.write("vllm bench %s: not simulated yet (rocm-console's vLLM simulator %s)\n" % (argv[0], VERSION))
        return 2
    try:
        args = parse_bench_args(argv[1:])
    except BenchArgError:
        return 2
    if args.help_requested:
        sys.stdout.write(BENCH_HELP % VERSION)
        return 0
    return BenchRun(args).run()


# ---------------------------------------------------------------------------- entry


TOP_USAGE = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(TOP_USAGE + "\n\nvLLM CLI (rocm-console simulator %s): serve and bench serve are simulated.\n" % VERSION)
        return 0 if argv else 2
    command = argv[0]
    if command in ("-v", "--version"):
        sys.stdout.write(VERSION + "\n")
        return 0
    if command == "bench":
        return bench_main(argv[1:])
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
