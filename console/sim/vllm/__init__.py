"""Simulated `vllm` command: a vLLM 0.32 look-alike for rocm-console's demo and fast tests.

This package is uploaded to a node and run as `python3 <folder>/vllm serve MODEL [flags]`
(the folder itself: see __main__.py), or here as `python -m console.sim.vllm`. It is
self-contained on purpose: stdlib only, Python >= 3.8, never imports `console` (its modules
import each other relatively). It does no GPU work and says so: its version is "0.32.0+sim".

Modules
    cli             the `vllm` command line: serve, bench serve, --version
    server          the `vllm serve` process (startup, registration, listener, shutdown)
    serve_args      `vllm serve` flags          model_profile   the simulated model's sizes
    gpu_registry    processes.json              engine          the scheduler model
    http_server     HTTP/1.1 plumbing           openai_api      the OpenAI API and /metrics route
    metrics         Prometheus families         log             vLLM's log line shapes
    failures        vLLM's failure tracebacks   constants       shared names and bucket bounds
    lifeline        ends with the demo console  statefiles      JSON state files, pid checks
                    (lifeline and statefiles are the agent's files: git symlinks to console/agent/)
    bench_*         `vllm bench serve`: args, output, progress, datasets, http, requests,
                    metrics, run

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
    (tokens - 1), peak tok/s per 1-second bucket); "Peak concurrent
    requests" is the true peak of requests in flight (vLLM's per-second buckets can exceed
    --max-concurrency, the simulator's never does). Failed requests still
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

__simulated__ = True
