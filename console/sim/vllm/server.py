"""The `vllm serve` process: startup log, GPU registration, HTTP listener, stats, shutdown."""

import asyncio
import errno
import os
import signal
import socket
import time
import uuid
import zlib

from .constants import (
    DEFAULT_VRAM_MB,
    ENV_DIR,
    ENV_FAIL,
    ENV_SPEEDUP,
    ENV_VRAM,
    PYLIB,
    ROUTES,
    VERSION,
    GiB,
    MiB,
)
from .engine import Engine
from .failures import (
    api_head_frames,
    config_traceback,
    engine_core_frames,
    engine_start_traceback,
    port_in_use_traceback,
    tb_frame,
    vllm_src,
    worker_frames,
)
from .gpu_registry import GpuRegistry, visible_gpus
from .lifeline import ENV as LIFELINE_ENV
from .log import BANNER, Log
from .metrics import Metrics
from .model_profile import ModelProfile
from .openai_api import OpenAIServer
from .ray_sim import connect as ray_connect
from .ray_sim import watch as ray_watch
from .serve_args import non_default_args

LOOPBACK = ("127.0.0.1", "localhost", "::1")
# Set by the node's supervisor when the port is the console's choice (agent/supervisor.py).
PORT_FILE_ENV = "ROCM_CONSOLE_PORT_FILE"
BACKLOG = 2048
PORT_TRIES = 200


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
        self.http = OpenAIServer(self)
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
        return {
            "object": "list",
            "data": [
                {
                    "id": name,
                    "object": "model",
                    "created": now,
                    "owned_by": "vllm",
                    "root": self.args.model,
                    "parent": None,
                    "max_model_len": self.max_model_len,
                    "permission": [
                        {
                            "id": "modelperm-" + uuid.uuid4().hex[:16],
                            "object": "model_permission",
                            "created": now,
                            "allow_create_engine": False,
                            "allow_sampling": True,
                            "allow_logprobs": True,
                            "allow_search_indices": False,
                            "allow_view": True,
                            "allow_fine_tuning": False,
                            "organization": "*",
                            "group": None,
                            "is_blocking": False,
                        }
                    ],
                }
                for name in self.served
            ],
        }

    def _bind(self):
        host = self.args.host or "0.0.0.0"
        if os.environ.get(LIFELINE_ENV) and host not in LOOPBACK:
            # Started by a demo console: the demo never listens beyond this machine.
            self.log.raw(["rocm-console demo: listening on 127.0.0.1 instead of %s" % host], err=True)
            host = "127.0.0.1"
        port = self.args.port
        try:
            infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
            family, _, _, _, addr = infos[0]
            sock = socket.socket(family, socket.SOCK_STREAM)
        except socket.gaierror as exc:
            self.log.raw(api_head_frames() + ["socket.gaierror: [Errno %s] %s" % (exc.errno, exc.strerror)], err=True)
            raise Fail(1) from None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
        except OSError as exc:
            sock.close()
            moved = self._bind_elsewhere(family, addr, exc)
            if moved is None:
                self.log.raw(port_in_use_traceback(exc), err=True)
                raise Fail(1) from None
            sock = moved
        sock.setblocking(False)
        return sock

    def _listen(self):
        """Listen on the bound socket (refused until now, as vLLM's is while it loads). With
        SO_REUSEADDR, Linux lets servers starting together bind one port while none listens yet:
        the ones that listen later learn it here, and move on as at the bind."""
        sock = self.sock
        for _ in range(PORT_TRIES):
            try:
                sock.listen(BACKLOG)
                return sock
            except OSError as exc:
                addr = sock.getsockname()
                sock.close()
                moved = self._bind_elsewhere(sock.family, addr, exc)
                if moved is None:
                    self.log.raw(port_in_use_traceback(exc), err=True)
                    raise Fail(1) from None
                sock = moved
        raise Fail(1)

    def _bind_elsewhere(self, family, addr, exc):
        """The supervisor picked this port free a moment ago and may move it (PORT_FILE_ENV set):
        another program or another demo took it first. Bind the next free port instead, say so in
        the log, and tell the supervisor where (the file it reads). None: fail as vLLM would."""
        path = os.environ.get(PORT_FILE_ENV)
        if not path or exc.errno != errno.EADDRINUSE:
            return None
        for port in range(addr[1] + 1, min(addr[1] + PORT_TRIES, 65535) + 1):
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((addr[0], port) + tuple(addr[2:]))
            except OSError:
                sock.close()
                continue
            try:
                with open(path + ".tmp", "w") as fh:
                    fh.write("%d\n" % port)
                os.replace(path + ".tmp", path)
            except OSError:
                sock.close()
                return None  # the console could not learn the port: better to fail as asked
            self.log(
                "api",
                "WARNING",
                "entry.py:133",
                "rocm-console: port %d was taken on this node as the server started; listening on %d" % (addr[1], port),
            )
            self.args.port = port
            return sock
        return None

    def _engine_failure(self, stage, exc_lines, worker_header=None):
        """Worker/EngineCore error blocks, then the APIServer's RuntimeError; exit 1."""
        L = self.log
        core_src = "core.py:1136"
        if worker_header:
            w_src = "multiproc_executor.py:772" if stage in ("busy", "load") else "multiproc_executor.py:822"
            L.block(
                0,
                "ERROR",
                w_src,
                [worker_header, "Traceback (most recent call last):"] + worker_frames(stage) + exc_lines,
            )
        if stage in ("busy", "load"):
            core_stage, final = (
                "init",
                [
                    "Exception: WorkerProc initialization failed due to an exception in a background process. "
                    "See stack trace for root cause."
                ],
            )
        elif stage == "profile":
            core_stage, final = (
                "profile",
                [
                    "RuntimeError: Worker failed with error '%s', please check the stack trace above for the "
                    "root cause" % exc_lines[-1].split(": ", 1)[-1]
                ],
            )
        else:
            core_stage, final = "kv", exc_lines
        frames = engine_core_frames(core_stage)
        L.block(
            "engine",
            "ERROR",
            core_src,
            ["EngineCore failed to start.", "Traceback (most recent call last):"] + frames + final,
        )
        mp = PYLIB + "/multiprocessing/process.py"
        L.tagged(
            "engine",
            ["Process EngineCore:", "Traceback (most recent call last):"]
            + tb_frame(mp, 314, "_bootstrap", "self.run()")
            + tb_frame(mp, 108, "run", "self._target(*self._args, **self._kwargs)")
            + tb_frame(vllm_src("v1/engine/core.py"), 1140, "run_engine_core", "raise e")
            + frames
            + final,
        )
        L.raw(engine_start_traceback(), err=True)
        raise Fail(1)

    def _oom_lines(self, tried, free):
        total = self.vram / float(GiB)
        allocated = max(0.0, total - free - 0.31)
        return [
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate %.2f GiB. GPU 0 has a total "
            "capacity of %.2f GiB of which %.2f GiB is free. Of the allocated memory %.2f GiB is allocated "
            "by PyTorch, and %.2f MiB is reserved by PyTorch but unallocated. If reserved but unallocated "
            "memory is large try setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid "
            "fragmentation.  See documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
            % (tried, total, free, allocated, 117.25 + (allocated * 13) % 300)
        ]

    def _engine_config_line(self):
        a, p = self.args, self.prof
        if p.eager:
            cc = (
                "{'mode': <CompilationMode.NONE: 0>, 'backend': 'inductor', 'custom_ops': ['all'], "
                "'cudagraph_mode': <CUDAGraphMode.NONE: 0>, 'cudagraph_capture_sizes': []}"
            )
        else:
            cc = (
                "{'mode': <CompilationMode.VLLM_COMPILE: 3>, 'backend': 'inductor', 'custom_ops': ['+rms_norm', "
                "'+silu_and_mul'], 'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, "
                "'max_cudagraph_capture_size': %d}" % min(512, 2 * a.max_num_seqs)
            )
        return (
            "Initializing a V1 LLM engine (v%s) with config: model=%r, speculative_config=None, "
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
            % (
                VERSION,
                a.model,
                a.tokenizer or a.model,
                a.tokenizer_mode,
                bool(a.trust_remote_code),
                p.torch_dtype,
                self.max_model_len,
                a.load_format,
                a.tensor_parallel_size,
                a.pipeline_parallel_size,
                a.data_parallel_size,
                a.quantization,
                p.eager,
                a.kv_cache_dtype,
                a.seed or 0,
                self.served[0],
                a.enable_prefix_caching is not False,
                cc,
            )
        )

    # -- startup

    async def startup(self):
        a, p, L = self.args, self.prof, self.log
        ranks = list(range(self.world))
        for line in BANNER:
            L("api", "INFO", "api_utils.py:347", line.format(version=VERSION, model=a.model))
        L("api", "INFO", "api_utils.py:286", "non-default args: %r" % (self.non_default,))
        self.sock = self._bind()
        if a.distributed_executor_backend == "ray":  # a multi-node instance (ray_sim.py)
            self.ray_nodes = await ray_connect(self)
            if self.ray_nodes is None:
                raise Fail(1)
        await self._sleep(0.3)
        L("api", "INFO", "model.py:733", "Resolved architecture: %s" % p.arch)
        if a.max_model_len and a.max_model_len > p.limit:
            if os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1":
                L(
                    "api",
                    "WARNING",
                    "model.py:2196",
                    "User-specified max_model_len (%d) is greater than the derived max_model_len "
                    "(max_position_embeddings=%s or model_max_length=None in model's config.json). "
                    "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative "
                    "position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model "
                    "uses absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA "
                    "array out-of-bounds error." % (a.max_model_len, float(p.limit)),
                )
            else:
                L.raw(
                    config_traceback(
                        "ModelConfig",
                        [
                            "  Value error, User-specified max_model_len (%d) is greater than the derived max_model_len "
                            "(max_position_embeddings=%s or model_max_length=None in model's config.json). To allow "
                            "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. "
                            "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative "
                            "position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model "
                            "uses absolute position encoding, positions exceeding derived_max_model_len will cause a CUDA "
                            "array out-of-bounds error. [type=value_error, input_value=ArgsKwargs((), {'model': "
                            "...nderer_num_workers': 1}), input_type=ArgsKwargs]" % (a.max_model_len, float(p.limit)),
                            "    For further information visit https://errors.pydantic.dev/2.14/v/value_error",
                        ],
                    ),
                    err=True,
                )
                raise Fail(1)
        gmu = a.gpu_memory_utilization
        if not 0 < gmu <= 1:
            kind, word = (
                ("greater_than", "greater than 0") if gmu <= 0 else ("less_than_equal", "less than or equal to 1")
            )
            L.raw(
                config_traceback(
                    "CacheConfig",
                    [
                        "gpu_memory_utilization",
                        "  Input should be %s [type=%s, input_value=%r, input_type=float]" % (word, kind, gmu),
                        "    For further information visit https://errors.pydantic.dev/2.14/v/%s" % kind,
                    ],
                ),
                err=True,
            )
            raise Fail(1)
        L("api", "INFO", "model.py:2152", "Using max model len %d" % self.max_model_len)
        if a.num_scheduler_steps is not None:
            L(
                "api",
                "WARNING",
                "arg_utils.py:1795",
                "--num-scheduler-steps is not used by the V1 engine and is ignored (rocm-console simulator).",
            )
        if p.eager:
            L(
                "api",
                "WARNING",
                "vllm.py:1703",
                "Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup. This is equivalent "
                "to setting -cc.mode=none -cc.cudagraph_mode=none and --kernel_config.enable_jit_warmup=False",
            )
        L(
            "api",
            "INFO",
            "scheduler.py:231",
            "Chunked prefill is enabled with max_num_batched_tokens=%d." % a.max_num_batched_tokens,
        )
        await self._sleep(0.6)
        engine_t0 = time.monotonic()
        L("engine", "INFO", "core.py:133", self._engine_config_line())
        await self._sleep(0.2)
        for r in ranks:
            L(
                r,
                "INFO",
                "parallel_state.py:1906",
                "world_size=%d rank=%d local_rank=%d distributed_init_method=tcp://127.0.0.1:%d backend=nccl"
                % (self.world, r, r, 29500 + (self.log.pid % 1000)),
            )
            L(
                r,
                "INFO",
                "parallel_state.py:2350",
                "rank %d in world size %d is assigned as DP rank 0, PP rank %d, PCP rank 0, TP rank %d, "
                "EP rank N/A, EPLB rank N/A" % (r, self.world, r // a.tensor_parallel_size, r % a.tensor_parallel_size),
            )
        budget = gmu * self.vram
        used = self.registry.used_by_others()
        busiest = max(used.values()) if used else 0
        if self.vram - busiest < budget:
            free = (self.vram - busiest) / float(GiB)
            self._engine_failure(
                "busy",
                [
                    "ValueError: Free memory on device (%.2f/%.2f GiB) on startup is less than desired GPU memory "
                    "utilization (%s, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
                    "processes." % (free, self.vram / float(GiB), gmu, budget / GiB)
                ],
                "WorkerProc failed to start.",
            )
        for r in ranks:
            L(r, "INFO", "gpu_model_runner.py:3338", "Starting to load model %s..." % a.model)
        load_t0 = time.monotonic()
        await self._sleep(0.2)
        L.raw("Loading safetensors checkpoint shards:   0%% Completed | 0/%d [00:00<?, ?it/s]" % p.shards, err=True)
        load_s = 1.2 + min(1.0, p.weights_per_gpu / GiB / 60.0)
        if p.weights_per_gpu + 0.5 * GiB > self.vram - busiest:
            await self._sleep(load_s / 2)
            free = 0.35 + (p.params_b % 1.0) / 2.0
            self._engine_failure(
                "load",
                self._oom_lines(max(free + 0.5, min(4.6, p.weights_per_gpu / GiB)), free),
                "WorkerProc failed to start.",
            )
        await self._sleep(load_s)
        elapsed = time.monotonic() - load_t0
        L.raw(
            [
                "Loading safetensors checkpoint shards: 100%% Completed | %d/%d [00:%02d<00:00, %.2fit/s]"
                % (p.shards, p.shards, int(elapsed), p.shards / max(elapsed, 0.01)),
                "",
            ],
            err=True,
        )
        for r in ranks:
            L(r, "INFO", "default_loader.py:501", "Loading weights took %.2f seconds" % (elapsed * 0.92))
        for r in ranks:
            L(
                r,
                "INFO",
                "gpu_model_runner.py:3420",
                "Model loading took %.2f GiB memory and %.6f seconds" % (p.weights_per_gpu / GiB, elapsed),
            )
        budget, act, rccl, graphs, kv = p.memory(a)
        self.registry.register(p.weights_per_gpu + rccl)
        if not p.eager:
            await self._sleep(0.5)
            h = "%010x" % (zlib.crc32(a.model.encode("utf-8")) * 7919)
            L(
                0,
                "INFO",
                "backends.py:631",
                "Using cache directory: /root/.cache/vllm/torch_compile_cache/%s/"
                "rank_0_0/backbone for vLLM's torch.compile" % h[:10],
            )
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
            self._engine_failure(
                "kv",
                [
                    "ValueError: No available memory for the cache blocks. Try increasing "
                    "`gpu_memory_utilization` when initializing the engine."
                ],
            )
        if needed > kv:
            estimate = int(kv // p.kv_per_token) // self.block_size * self.block_size
            self._engine_failure(
                "kv",
                [
                    "ValueError: To serve at least one request with the model's max seq len (%d), (%.2f GiB KV cache "
                    "is needed, which is larger than the available KV cache memory (%.2f GiB). Based on the available "
                    "memory, the estimated maximum model length is %d. Try increasing `gpu_memory_utilization` or "
                    "decreasing `max_model_len` when initializing the engine."
                    % (self.max_model_len, needed / GiB, kv / GiB, estimate)
                ],
            )
        num_blocks = int(kv // (p.kv_per_token * self.block_size))
        kv_tokens = num_blocks * self.block_size
        concurrency = kv_tokens / float(self.max_model_len)
        L(
            "engine",
            "INFO",
            "kv_cache_utils.py:1087",
            "GPU KV cache size: {:,} tokens, Maximum concurrency for {:,} tokens per request: {:.2f}x".format(
                kv_tokens, self.max_model_len, concurrency
            ),
        )
        self.registry.register(budget)
        if not p.eager:
            t = time.monotonic()
            await self._sleep(1.2)
            took = time.monotonic() - t
            mixed = 3 + min(512, 2 * a.max_num_seqs) // 8
            full = 3 + min(256, a.max_num_seqs) // 8
            bar = "\u2588" * 10
            L.raw(
                [
                    "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%%|%s| %d/%d [00:%02d<00:00, %.2fit/s]"
                    % (bar, mixed, mixed, int(took * 0.6), mixed / max(took * 0.6, 0.01)),
                    "Capturing CUDA graphs (decode, FULL): 100%%|%s| %d/%d [00:%02d<00:00, %.2fit/s]"
                    % (bar, full, full, int(took * 0.4), full / max(took * 0.4, 0.01)),
                ],
                err=True,
            )
            for r in ranks:
                L(
                    r,
                    "INFO",
                    "gpu_model_runner.py:4466",
                    "Graph capturing finished in %d secs, took %.2f GiB" % (max(1, round(took)), graphs / GiB),
                )
        L(
            "engine",
            "INFO",
            "core.py:402",
            "init engine (profile, create kv cache, warmup model) took %.2f s" % (time.monotonic() - engine_t0),
        )
        await self._sleep(0.3)

        self.engine = Engine(p, a, num_blocks, self.block_size)
        cache_info = {
            "block_size": str(self.block_size),
            "cache_dtype": a.kv_cache_dtype,
            "enable_prefix_caching": str(a.enable_prefix_caching is not False),
            "gpu_memory_utilization": str(gmu),
            "is_attention_free": "False",
            "kv_cache_max_concurrency": str(round(concurrency, 2)),
            "kv_cache_memory_bytes": str(int(kv)),
            "kv_cache_size_tokens": str(kv_tokens),
            "num_cpu_blocks": "None",
            "num_gpu_blocks": str(num_blocks),
            "num_gpu_blocks_override": "None",
            "prefix_caching_hash_algo": "sha256",
            "sliding_window": "None",
            "swap_space": str(a.swap_space),
            "user_specified_block_size": str(a.block_size is not None),
        }
        self.metrics = Metrics(self.served[0], self.max_model_len, self.engine, cache_info)
        self.engine.metrics = self.metrics
        L("api", "INFO", "entry.py:136", "Supported tasks: ['generate']")
        L(
            "api",
            "INFO",
            "hf.py:648",
            "Detected the chat template content format to be 'string'. You can set "
            "`--chat-template-content-format` to override this.",
        )
        self.sock = self._listen()
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
            self.server = await asyncio.start_server(self.http.handle, sock=self.sock, backlog=BACKLOG)
        except OSError as exc:
            self.log.raw(port_in_use_traceback(exc), err=True)
            raise Fail(1) from None
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
                self.log(
                    "api",
                    "INFO",
                    "loggers.py:335",
                    "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f "
                    "tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache "
                    "hit rate: 0.0%%"
                    % (prompt, gen, len(engine.running), len(engine.waiting), 100.0 * engine.kv_usage()),
                )
            last_prompt, last_gen = prompt, gen

    # -- running and stopping

    async def _crash_later(self):
        await asyncio.sleep(2.0 / self.speedup)
        L = self.log
        self.engine.kill()
        hip = [
            "torch.AcceleratorError: HIP error: an illegal memory access was encountered",
            "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace "
            "below might be incorrect.",
            "For debugging consider passing AMD_SERIALIZE_KERNEL=3",
            "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.",
            "",
        ]
        L.block(
            0,
            "ERROR",
            "multiproc_executor.py:822",
            ["WorkerProc hit an exception.", "Traceback (most recent call last):"] + worker_frames("crash") + hip,
        )
        core = vllm_src("v1/engine/core.py")
        L.block(
            "engine",
            "ERROR",
            "core.py:1136",
            ["EngineCore encountered a fatal error.", "Traceback (most recent call last):"]
            + tb_frame(core, 1127, "run_engine_core", "engine_core.run_busy_loop()")
            + tb_frame(core, 1170, "run_busy_loop", "self._process_engine_step()")
            + tb_frame(core, 1209, "_process_engine_step", "outputs, model_executed = self.step_fn()", "self.step_fn()")
            + tb_frame(core, 451, "step", "model_output = future.result()", "future.result()")
            + tb_frame(vllm_src("v1/executor/multiproc_executor.py"), 344, "get_response", "raise RuntimeError(")
            + [
                "RuntimeError: Worker failed with error 'HIP error: an illegal memory access was encountered', "
                "please check the stack trace above for the root cause"
            ],
        )
        self._engine_dead_block()
        await asyncio.sleep(0.5 / self.speedup)
        self.exit_code = 1
        self.stop_event.set()

    def _engine_dead_block(self):
        async_llm = vllm_src("v1/engine/async_llm.py")
        self.log.block(
            "api",
            "ERROR",
            "async_llm.py:906",
            ["AsyncLLM output_handler failed.", "Traceback (most recent call last):"]
            + tb_frame(
                async_llm,
                849,
                "output_handler",
                "outputs = await engine_core.get_output_async()",
                "await engine_core.get_output_async()",
            )
            + tb_frame(
                vllm_src("v1/engine/core_client.py"),
                1235,
                "get_output_async",
                "raise self._format_exception(outputs) from None",
            )
            + [
                "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace "
                "(above) for the root cause."
            ],
        )

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
            L(
                "api",
                "WARNING",
                "utils.py:653",
                "[shutdown] Process manager: force killing remaining process EngineCore pid %d" % L.engine_pid,
            )

        if not sigterm:
            force_kill()
        L("engine", "INFO", "core.py:1454", "[shutdown] EngineCore: trigger received signal=SIGTERM")
        L("engine", "INFO", "core.py:1635", "[shutdown] EngineCore: start mode=abort timeout=0s")
        L(
            "engine",
            "INFO",
            "core.py:1666",
            "[shutdown] EngineCore: request processing complete; starting resource teardown",
        )
        L("engine", "INFO", "core.py:1499", "[shutdown] EngineCore: exiting busy loop")
        L(
            "engine",
            "INFO",
            "multiproc_executor.py:479",
            "[shutdown] Executor: waiting for worker exit count=%d" % self.world,
        )
        if sigterm:
            force_kill()
        for r in ranks:
            L(r, "INFO", "multiproc_executor.py:843", "Parent process exited, terminating worker queues")
        for r in ranks:
            L(
                "api",
                "WARNING",
                "system_utils.py:225",
                "[shutdown] force killing sub process VLLM::%s pid %d" % (L.worker_name(r), L.worker_pid + r),
            )
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
            if getattr(self, "ray_nodes", None):
                self.tasks.append(asyncio.ensure_future(ray_watch(self, self.ray_nodes)))
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
