"""serve_log: real vLLM 0.32 CPU logs and the per-version lines of reference §4."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.serve.log import (
    FatalLine,
    ServeLogState,
    ServerStopping,
    ServeStage,
    StageReached,
    clean_line,
    parse_serve_line,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-0.32-cpu"
S = ServeStage


def read_lines(name: str) -> list[str]:
    # newline="" keeps the "\r" redraws inside lines, as a log tail would deliver them
    with open(FIXTURES / name, encoding="utf-8", newline="") as fh:
        return fh.read().split("\n")


def stages(lines) -> list[ServeStage]:
    """Each stage in the order first reached."""
    seen: list[ServeStage] = []
    for line in lines:
        event = parse_serve_line(line)
        if isinstance(event, StageReached) and event.stage not in seen:
            seen.append(event.stage)
    return seen


def fold(lines) -> ServeLogState:
    return ServeLogState().feed_lines(lines)


# ---------------------------------------------------------------- real 0.32 logs


def test_every_sample_log_is_covered():
    assert sorted(p.name for p in FIXTURES.glob("serve_*.log")) == [
        "serve_fail.log",
        "serve_fail_port_in_use.log",
        "serve_shutdown.log",
        "serve_shutdown_sigterm.log",
        "serve_startup_eager.log",
    ]


def test_startup_eager_reaches_ready():
    lines = read_lines("serve_startup_eager.log")
    assert stages(lines) == [
        S.STARTING,
        S.ENGINE_INIT,
        S.LOADING_WEIGHTS,
        S.WEIGHTS_LOADED,
        S.KV_CACHE,
        S.ENGINE_READY,
        S.SERVER_STARTING,
        S.READY,
    ]  # --enforce-eager: no graph capture
    state = fold(lines)
    assert state.stage is S.READY
    assert state.version == "0.32.0"
    assert state.model == "/srv/models/tiny-llama"
    assert state.kv_tokens == 524_288
    assert state.max_concurrency == 256.0
    assert state.url == "http://127.0.0.1:8011"
    # The run ends with a SIGTERM whose teardown logs EngineDeadError: not a failure.
    assert state.stopping
    assert state.fatal is None
    assert state.ready


def test_startup_eager_state_just_before_ready():
    lines = read_lines("serve_startup_eager.log")
    cut = next(i for i, line in enumerate(lines) if "Application startup complete" in line)
    state = fold(lines[:cut])
    assert state.stage is S.SERVER_STARTING
    assert state.stage_detail == "http://127.0.0.1:8011"
    assert not state.ready
    kv = fold(lines[: next(i for i, ln in enumerate(lines) if "KV cache size" in ln) + 1])
    assert kv.stage is S.KV_CACHE
    assert kv.stage_detail == "KV cache 524,288 tokens, max concurrency 256.00x"


def test_startup_eager_details():
    events = {
        e.stage: e for e in map(parse_serve_line, read_lines("serve_startup_eager.log")) if isinstance(e, StageReached)
    }
    assert events[S.ENGINE_INIT].detail == "V1 engine, vLLM 0.32.0"
    assert events[S.WEIGHTS_LOADED].detail == "in 0.01 s"
    assert events[S.ENGINE_READY].detail == "engine ready in 0.39 s"


def test_startup_eager_loading_progress_from_tqdm_redraws():
    lines = read_lines("serve_startup_eager.log")
    shard_lines = [ln for ln in lines if "checkpoint shards" in ln]
    details = [parse_serve_line(ln).detail for ln in shard_lines]  # type: ignore[union-attr]
    assert details == ["shards 0/1", "shards 1/1"]


def test_startup_eager_logo_version_line():
    line = next(ln for ln in read_lines("serve_startup_eager.log") if "version 0.32.0" in ln)
    event = parse_serve_line(line)
    assert isinstance(event, StageReached)
    assert (event.stage, event.detail, event.version) == (S.STARTING, "vLLM 0.32.0", "0.32.0")


def test_fail_max_model_len_prefers_the_root_cause():
    state = fold(read_lines("serve_fail.log"))
    assert state.fatal is not None
    # pydantic's generic "ValidationError: 1 validation error" comes first; the
    # specific "User-specified max_model_len (999999) ..." follows and wins.
    assert state.fatal.reason == "max_model_len too large"
    assert "User-specified max_model_len (999999)" in state.fatal.line
    assert state.stage is S.STARTING
    assert state.version == "0.32.0"
    assert state.failed and not state.ready


def test_fail_port_in_use():
    state = fold(read_lines("serve_fail_port_in_use.log"))
    assert state.fatal == FatalLine("address already in use", "OSError: [Errno 98] Address already in use")
    assert state.stage is S.STARTING


@pytest.mark.parametrize("name", ["serve_shutdown.log", "serve_shutdown_sigterm.log"])
def test_shutdown_logs_are_not_failures(name):
    state = fold(read_lines(name))
    assert state.stopping
    assert state.fatal is None
    assert state.stage is None


def test_sigterm_engine_dead_line_alone_is_fatal():
    # Out of a shutdown, EngineDeadError means the engine died under the server.
    line = next(ln for ln in read_lines("serve_shutdown_sigterm.log") if "EngineDeadError" in ln)
    event = parse_serve_line(line)
    assert isinstance(event, FatalLine) and event.reason == "engine died" and not event.specific
    assert ServeLogState().feed(line).fatal == event


def test_noise_lines_in_samples_are_ignored():
    noise = [
        # mentions an OSError but is only a warning
        (
            "(APIServer pid=25756) WARNING 11-21 07:43:40 [system_utils.py:255] Found ulimit of"
            " 20000 and failed to automatically increase with error current limit exceeds maximum"
            " limit. This can cause fd limit errors like `OSError: [Errno 24] Too many open"
            " files`. Consider increasing with ulimit -n"
        ),
        "Triton is installed, but doesn't include CPU backend. Disabling Triton.",
        "Traceback (most recent call last):",
        '  File "/srv/vllm-venv/bin/vllm", line 8, in <module>',
        (
            "(APIServer pid=26212) WARNING 11-21 07:44:58 [vllm.py:1703] Enforce eager set,"
            " disabling torch.compile, CUDAGraphs, and JIT kernel warmup."
        ),
        'INFO:     127.0.0.1:57468 - "POST /v1/completions HTTP/1.1" 400 Bad Request',
        (
            "(APIServer pid=26212) INFO 11-21 07:45:26 [loggers.py:335] Engine 000: Avg prompt"
            " throughput: 0.2 tokens/s, Avg generation throughput: 0.2 tokens/s, Running: 0"
            " reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%"
        ),
        "INFO:     Application shutdown complete.",
        "",
    ]
    for line in noise:
        assert parse_serve_line(line) is None, line


# ---------------------------------------------------------------- reference §4, per version

# (line, stage, detail) for the startup stages
STAGE_LINES = [
    # 0.6.3 (V0)
    ("INFO 10-14 21:03:12 api_server.py:528] vLLM API server version 0.6.3", S.STARTING, "vLLM 0.6.3"),
    (
        "INFO 10-14 21:03:12 api_server.py:529] args: Namespace(host=None, port=8000, model='amd/Llama-3.1-70B-Instruct-FP8-KV', tensor_parallel_size=8)",
        S.STARTING,
        "",
    ),
    (
        "INFO 10-14 21:03:20 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: model='amd/Llama-3.1-70B-Instruct-FP8-KV', speculative_config=None",
        S.ENGINE_INIT,
        "engine, vLLM 0.6.3",
    ),
    (
        "INFO 10-14 21:03:25 model_runner.py:1056] Starting to load model amd/Llama-3.1-70B-Instruct-FP8-KV...",
        S.LOADING_WEIGHTS,
        "amd/Llama-3.1-70B-Instruct-FP8-KV",
    ),
    ("INFO 10-14 21:04:02 model_runner.py:1067] Loading model weights took 14.9888 GB", S.WEIGHTS_LOADED, "14.99 GB"),
    (
        "INFO 10-14 21:04:10 distributed_gpu_executor.py:57] # GPU blocks: 12345, # CPU blocks: 2048",
        S.KV_CACHE,
        "12,345 GPU blocks",
    ),
    (
        "INFO 10-14 21:04:10 distributed_gpu_executor.py:61] Maximum concurrency for 8192 tokens per request: 24.11x",
        S.KV_CACHE,
        "max concurrency 24.11x at 8,192 tokens",
    ),
    (
        "INFO 10-14 21:04:12 model_runner.py:1383] Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static.",
        S.GRAPH_CAPTURE,
        "capturing graphs",
    ),
    (
        "INFO 10-14 21:04:30 model_runner.py:1511] Graph capturing finished in 18 secs.",
        S.GRAPH_CAPTURE,
        "graphs captured in 18 s",
    ),
    ("INFO 10-14 21:04:31 launcher.py:19] Available routes are:", S.SERVER_STARTING, ""),
    ("INFO:     Started server process [4242]", S.SERVER_STARTING, ""),
    ("INFO:     Waiting for application startup.", S.SERVER_STARTING, ""),
    ("INFO:     Application startup complete.", S.READY, "application startup complete"),
    (
        "INFO:     Uvicorn running on socket ('0.0.0.0', 8000) (Press CTRL+C to quit)",
        S.SERVER_STARTING,
        "('0.0.0.0', 8000)",
    ),
    # 0.8.5 / 0.9.1 (V1)
    ("INFO 05-02 10:11:12 [api_server.py:1043] vLLM API server version 0.8.5", S.STARTING, "vLLM 0.8.5"),
    ("INFO 06-20 10:11:12 [api_server.py:1288] vLLM API server version 0.9.1+rocm", S.STARTING, "vLLM 0.9.1+rocm"),
    (
        "INFO 06-20 10:11:12 [cli_args.py:309] non-default args: {'model': 'amd/Llama-3.1-8B-Instruct-FP8-KV', 'max_model_len': 8192}",
        S.STARTING,
        "",
    ),
    (
        "INFO 05-02 10:11:30 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: model='amd/Llama-3.1-8B-Instruct-FP8-KV'",
        S.ENGINE_INIT,
        "V1 engine, vLLM 0.8.5",
    ),
    (
        "INFO 05-02 10:12:10 [gpu_model_runner.py:1347] Model loading took 14.2091 GiB and 31.500000 seconds",
        S.WEIGHTS_LOADED,
        "14.21 GiB in 31.5 s",
    ),
    (
        "INFO 05-02 10:12:30 [kv_cache_utils.py:634] GPU KV cache size: 1,234,567 tokens",
        S.KV_CACHE,
        "KV cache 1,234,567 tokens",
    ),
    (
        "INFO 05-02 10:12:30 [kv_cache_utils.py:637] Maximum concurrency for 8,192 tokens per request: 12.34x",
        S.KV_CACHE,
        "max concurrency 12.34x at 8,192 tokens",
    ),
    (
        "INFO 05-02 10:12:55 [gpu_model_runner.py:1686] Graph capturing finished in 25 secs, took 0.52 GiB",
        S.GRAPH_CAPTURE,
        "graphs captured in 25 s, 0.52 GiB",
    ),
    (
        "INFO 05-02 10:12:55 [core.py:159] init engine (profile, create kv cache, warmup model) took 44.88 seconds",
        S.ENGINE_READY,
        "engine ready in 44.88 s",
    ),
    (
        "INFO 05-02 10:12:56 [api_server.py:1090] Starting vLLM API server on http://0.0.0.0:8000",
        S.SERVER_STARTING,
        "http://0.0.0.0:8000",
    ),
    (
        "INFO 06-20 10:12:56 [api_server.py:1351] Starting vLLM API server 0 on http://0.0.0.0:8000",
        S.SERVER_STARTING,
        "http://0.0.0.0:8000",
    ),
    # 0.10-0.12: process tags, tqdm graph capture
    (
        "(EngineCore_0 pid=311) INFO 09-10 08:00:01 [core.py:76] Initializing a V1 LLM engine (v0.10.2) with config: model='m'",
        S.ENGINE_INIT,
        "V1 engine, vLLM 0.10.2",
    ),
    (
        "(VllmWorker TP0 pid=320) INFO 09-10 08:00:09 [gpu_model_runner.py:2007] Starting to load model amd/Llama-3.1-70B-Instruct-FP8-KV...",
        S.LOADING_WEIGHTS,
        "amd/Llama-3.1-70B-Instruct-FP8-KV",
    ),
    (
        "(EngineCore_0 pid=311) Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  45%|████▌     | 30/67 [00:02<00:03, 12.10it/s]",
        S.GRAPH_CAPTURE,
        "capturing graphs (mixed prefill-decode, PIECEWISE) 30/67",
    ),
    # 0.33
    (
        "(APIServer pid=4242) INFO 01-10 12:00:00 [api_server.py:1722] vLLM server version 0.33.0, serving model amd/Llama-3.1-8B-Instruct-FP8-KV",
        S.STARTING,
        "vLLM 0.33.0, model amd/Llama-3.1-8B-Instruct-FP8-KV",
    ),
    (
        "(EngineCore_DP0 pid=4300) INFO 01-10 12:00:20 [core.py:93] Initializing a V1 LLM engine (v0.33.0) with config: model='m'",
        S.ENGINE_INIT,
        "V1 engine, vLLM 0.33.0",
    ),
    (
        "(EngineCore_DP0 pid=4300) INFO 01-10 12:00:40 [gpu_model_runner.py:2900] Model loading took 8.5 GiB memory and 12.345678 seconds",
        S.WEIGHTS_LOADED,
        "8.5 GiB in 12.35 s",
    ),
    (
        "(EngineCore_DP0 pid=4300) INFO 01-10 12:00:50 [kv_cache_utils.py:1300] GPU KV cache size: 1,234,567 tokens, Maximum concurrency for 8,192 tokens per request: 150.70x",
        S.KV_CACHE,
        "KV cache 1,234,567 tokens, max concurrency 150.70x",
    ),
    (
        "(EngineCore_DP0 pid=4300) INFO 01-10 12:01:00 [gpu_model_runner.py:4100] Graph capturing finished in 7 secs, took 0.41 GiB",
        S.GRAPH_CAPTURE,
        "graphs captured in 7 s, 0.41 GiB",
    ),
    (
        "(EngineCore_DP0 pid=4300) INFO 01-10 12:01:01 [core.py:250] init engine (profile, create kv cache, warmup model) took 35.12 s",
        S.ENGINE_READY,
        "engine ready in 35.12 s",
    ),
    (
        "(APIServer pid=4242) INFO 01-10 12:01:02 [api_server.py:1900] Starting vLLM server on http://0.0.0.0:8000",
        S.SERVER_STARTING,
        "http://0.0.0.0:8000",
    ),
]


@pytest.mark.parametrize(("line", "stage", "detail"), STAGE_LINES, ids=[f"{i}" for i in range(len(STAGE_LINES))])
def test_stage_lines_per_version(line, stage, detail):
    event = parse_serve_line(line)
    assert isinstance(event, StageReached), event
    assert event.stage is stage
    assert event.detail == detail
    assert event.line == line


def test_stage_line_fields():
    kv = parse_serve_line(STAGE_LINES[31][0])
    assert (kv.kv_tokens, kv.max_concurrency) == (1_234_567, 150.70)  # type: ignore[union-attr]
    banner = parse_serve_line(STAGE_LINES[28][0])
    assert banner.version == "0.33.0"  # type: ignore[union-attr]
    assert banner.model == "amd/Llama-3.1-8B-Instruct-FP8-KV"  # type: ignore[union-attr]
    assert parse_serve_line(STAGE_LINES[24][0]).url == "http://0.0.0.0:8000"  # type: ignore[union-attr]


# (line, reason, specific)
FATAL_LINES = [
    ("OSError: [Errno 98] Address already in use", "address already in use", True),
    (
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
        "address already in use",
        True,
    ),
    (
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 191.98 GiB of which 1.20 GiB is free.",
        "out of GPU memory",
        True,
    ),
    (
        "(EngineCore_DP0 pid=4300) ERROR 01-10 12:00:45 [core.py:800] torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.50 GiB.",
        "out of GPU memory",
        True,
    ),
    (
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        "no memory left for the KV cache",
        True,
    ),
    (
        "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in KV cache (45678). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        "KV cache too small for max_model_len",
        True,
    ),
    (
        "(EngineCore_0 pid=311) ERROR 09-10 08:00:30 [core.py:700] ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.34 GiB). Based on the available memory, the estimated maximum model length is 76512. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        "KV cache too small for max_model_len",
        True,
    ),
    (
        "(EngineCore_DP0 pid=4300) ERROR 01-10 12:00:45 [core.py:900] ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.34 GiB).",
        "KV cache too small for max_model_len",
        True,
    ),
    (
        "ValueError: User-specified max_model_len (200000) is greater than the derived max_model_len (max_position_embeddings=131072 or model_max_length=None in model's config.json).",
        "max_model_len too large",
        True,
    ),
    ("vllm serve: error: unrecognized arguments: --num-scheduler-steps 10", "unrecognized arguments", True),
    (
        "vllm serve: error: argument --max-model-len: Value abc cannot be converted to <function human_readable_int>.",
        "invalid argument",
        True,
    ),
    (
        "(EngineCore_DP0 pid=4300) ERROR 01-10 12:00:45 [core.py:708] EngineCore failed to start.",
        "engine failed to start",
        False,
    ),
    (
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}",
        "engine failed to start",
        False,
    ),
    (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
        "invalid configuration",
        False,
    ),
    ("huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error.", "model not found", True),
    ("KeyError: 'rope_type'", "uncaught KeyError", False),
]


@pytest.mark.parametrize(("line", "reason", "specific"), FATAL_LINES)
def test_fatal_lines(line, reason, specific):
    event = parse_serve_line(line)
    assert isinstance(event, FatalLine), event
    assert (event.reason, event.specific, event.line) == (reason, specific, line)


def test_v1_engine_failure_keeps_the_root_cause():
    # V1 logs the generic line first, the root cause in the traceback, then the
    # generic RuntimeError in the API server: the KV-cache line must win.
    log = [
        "(EngineCore_DP0 pid=4300) INFO 01-10 12:00:20 [core.py:93] Initializing a V1 LLM engine (v0.33.0) with config: model='m'",
        "(EngineCore_DP0 pid=4300) ERROR 01-10 12:00:45 [core.py:708] EngineCore failed to start.",
        "(EngineCore_DP0 pid=4300) ERROR 01-10 12:00:45 [core.py:708] Traceback (most recent call last):",
        "(EngineCore_DP0 pid=4300) ERROR 01-10 12:00:45 [core.py:708] ValueError: To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.34 GiB).",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}",
    ]
    state = fold(log)
    assert state.fatal is not None
    assert state.fatal.reason == "KV cache too small for max_model_len"
    assert state.stage is S.ENGINE_INIT


def test_first_specific_fatal_is_kept():
    state = fold(FATAL_LINES[2][0:1] + FATAL_LINES[0][0:1])
    assert state.fatal.reason == "out of GPU memory"  # type: ignore[union-attr]


def test_full_063_log():
    log = [line for line, _, _ in STAGE_LINES[:14]]
    state = fold(log)
    assert state.stage is S.READY and state.ready
    assert state.version == "0.6.3"
    assert state.model == "amd/Llama-3.1-70B-Instruct-FP8-KV"
    assert state.kv_tokens is None and state.max_concurrency == 24.11


def test_full_091_log_combines_kv_lines():
    log = [line for line, _, _ in STAGE_LINES[15:25]]
    state = fold(log[:6])
    assert state.stage is S.KV_CACHE
    assert state.stage_detail == "KV cache 1,234,567 tokens, max concurrency 12.34x"
    state = fold([*log, "INFO:     Application startup complete."])
    assert state.ready and state.version == "0.9.1+rocm"
    assert (state.kv_tokens, state.max_concurrency) == (1_234_567, 12.34)


def test_stage_never_goes_back():
    state = fold([STAGE_LINES[24][0], STAGE_LINES[19][0]])
    assert state.stage is S.SERVER_STARTING
    assert state.kv_tokens == 1_234_567  # facts still recorded


# ---------------------------------------------------------------- robustness


def test_ansi_colour_codes_are_ignored():
    line = (
        "\x1b[1;36m(APIServer pid=4242)\x1b[0;0m \x1b[32mINFO\x1b[0m 01-10 12:01:02 "
        "[api_server.py:1900] Starting vLLM server on http://0.0.0.0:8000\x1b[0m"
    )
    event = parse_serve_line(line)
    assert isinstance(event, StageReached)
    assert event.detail == "http://0.0.0.0:8000"
    assert "\x1b" not in event.line
    fatal = parse_serve_line("\x1b[31mOSError: [Errno 98] Address already in use\x1b[0m\n")
    assert isinstance(fatal, FatalLine) and fatal.line == "OSError: [Errno 98] Address already in use"


def test_carriage_returns_keep_the_last_redraw():
    line = (
        "\rCapturing CUDA graphs (decode, FULL):   0%|          | 0/35 [00:00<?, ?it/s]"
        "\rCapturing CUDA graphs (decode, FULL):  40%|████      | 14/35 [00:01<00:01, 12.0it/s]\r\n"
    )
    event = parse_serve_line(line)
    assert isinstance(event, StageReached)
    assert event.detail == "capturing graphs (decode, FULL) 14/35"
    assert clean_line("abc\r") == "abc"
    assert clean_line("INFO:     Application startup complete.\r\n") == "INFO:     Application startup complete."


def test_fatal_wins_within_a_redrawn_line():
    line = "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01]\rtorch.OutOfMemoryError: HIP out of memory."
    assert isinstance(parse_serve_line(line), FatalLine)


def test_shutdown_markers_per_version():
    for line in (
        "INFO 05-02 11:00:00 [api_server.py:1100] Shutting down FastAPI HTTP server.",
        "INFO:     Shutting down",
        "(APIServer pid=22793) INFO 11-21 07:43:28 [launcher.py:254] [shutdown] API server: shutdown triggered",
    ):
        assert isinstance(parse_serve_line(line), ServerStopping), line


def test_state_is_immutable_and_feed_returns_new_states():
    start = ServeLogState()
    after = start.feed("INFO:     Application startup complete.")
    assert start.stage is None and after.stage is S.READY
    assert after.feed("nothing to see") is after
    with pytest.raises(AttributeError):
        after.stage = S.STARTING  # type: ignore[misc]


def test_stage_order_and_labels():
    assert list(ServeStage) == sorted(ServeStage)
    assert S.STARTING < S.ENGINE_INIT < S.LOADING_WEIGHTS < S.WEIGHTS_LOADED < S.KV_CACHE
    assert S.KV_CACHE < S.GRAPH_CAPTURE < S.ENGINE_READY < S.SERVER_STARTING < S.READY
    assert S.READY >= S.READY and S.READY > S.STARTING
    assert S.LOADING_WEIGHTS.label == "loading weights"
    assert S.READY == "ready"  # a str enum, for JSON


def test_free_memory_check_failure_is_the_specific_reason():
    lines = [
        "(Worker pid=21833) ERROR 11-21 08:39:10 [multiproc_executor.py:772] ValueError: Free memory on device "
        "(157.98/191.98 GiB) on startup is less than desired GPU memory utilization (0.9, 172.79 GiB). Decrease GPU "
        "memory utilization or reduce GPU memory used by other processes.",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]
    state = ServeLogState().feed_lines(lines)
    assert state.fatal.reason == "not enough free GPU memory"
