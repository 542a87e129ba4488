"""`vllm bench latency` / `vllm bench throughput` for the demo: the output and the
--output-json of vLLM 0.32 (tests/fixtures/vllm-0.32-cpu/OFFLINE.md), with
timings from the simulated model's step time. Runs in a few seconds of wall
time whatever it reports."""

import json
import random
import sys
import time
import types

from .model_profile import ModelProfile

_FLAGS_WITHOUT_VALUE = (
    "--enforce-eager",
    "--trust-remote-code",
    "--disable-detokenize",
    "--use-beam-search",
    "--profile",
    "--async-scheduling",
    "--no-enable-chunked-prefill",
    "--enable-chunked-prefill",
    "--disable-log-stats",
)
_GONE = ("--num-scheduler-steps", "--speculative-model", "--num-speculative-tokens", "--use-v2-block-manager")


# What parse() starts from: vLLM 0.32's defaults of the flags the simulator reads.
_DEFAULTS = {
    "model": None,
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "batch_size": 8,
    "input_len": None,
    "output_len": None,
    "random_input_len": 1024,
    "random_output_len": 128,
    "num_prompts": 1000,
    "num_iters": 30,
    "num_iters_warmup": 10,
    "output_json": None,
    "dtype": "auto",
    "quantization": None,
    "kv_cache_dtype": "auto",
    "enforce_eager": False,
    "async_scheduling": False,
    "max_model_len": None,
    "seed": 0,
}


def parse(kind, argv):
    """Known flags over _DEFAULTS; others accepted (a value is taken when one follows)."""
    args = types.SimpleNamespace(**_DEFAULTS)
    names = {
        "--model": ("model", str),
        "--tensor-parallel-size": ("tensor_parallel_size", int),
        "-tp": ("tensor_parallel_size", int),
        "--batch-size": ("batch_size", int),
        "--input-len": ("input_len", int),
        "--output-len": ("output_len", int),
        "--random-input-len": ("random_input_len", int),
        "--random-output-len": ("random_output_len", int),
        "--num-prompts": ("num_prompts", int),
        "--num-iters": ("num_iters", int),
        "--num-iters-warmup": ("num_iters_warmup", int),
        "--output-json": ("output_json", str),
        "--dtype": ("dtype", str),
        "--quantization": ("quantization", str),
        "-q": ("quantization", str),
        "--kv-cache-dtype": ("kv_cache_dtype", str),
        "--max-model-len": ("max_model_len", int),
        "--seed": ("seed", int),
    }
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, inline = arg.partition("=")
        if flag in _GONE:
            sys.stderr.write(
                "usage: vllm bench %s [options]\nvllm bench %s: error: unrecognized arguments: %s\n"
                % (kind, kind, flag)
            )
            raise SystemExit(2)
        if flag == "--enforce-eager":
            args.enforce_eager = True
        if flag in names:
            if eq:
                value = inline
                i += 1
            elif i + 1 < len(argv):
                value = argv[i + 1]
                i += 2
            else:
                sys.stderr.write("vllm bench %s: error: argument %s: expected one argument\n" % (kind, flag))
                raise SystemExit(2)
            attr, conv = names[flag]
            try:
                setattr(args, attr, conv(value))
            except ValueError:
                sys.stderr.write(
                    "vllm bench %s: error: argument %s: invalid %s value: %r\n" % (kind, flag, conv.__name__, value)
                )
                raise SystemExit(2) from None
            continue
        if arg.startswith("-") and not eq and flag not in _FLAGS_WITHOUT_VALUE and i + 1 < len(argv):
            if not argv[i + 1].startswith("-"):
                i += 2
                continue
        i += 1
    if not args.model:
        sys.stderr.write("vllm bench %s: error: the following arguments are required: --model\n" % kind)
        raise SystemExit(2)
    return args


def _bar(desc, n, total, elapsed, rate):
    width = 10
    filled = int(width * n / total) if total else width
    pct = int(100 * n / total) if total else 100
    return "\r%s: %3d%%|%s%s| %d/%d [00:%02d<00:00, %.2fit/s]" % (
        desc,
        pct,
        "\u2588" * filled,
        " " * (width - filled),
        n,
        total,
        int(elapsed),
        rate,
    )


def _progress(desc, total, each):
    """tqdm-like redraws on stderr, as vLLM's bars; `each` seconds per item (bounded)."""
    t0 = time.time()
    sys.stderr.write(_bar(desc, 0, total, 0, 0.0))
    for n in range(1, total + 1):
        time.sleep(each)
        elapsed = time.time() - t0
        sys.stderr.write(_bar(desc, n, total, elapsed, n / max(elapsed, 1e-6)))
        sys.stderr.flush()
    sys.stderr.write("\n")


def _profile(args):
    return ModelProfile(args, 192 * 1024**3)


def _batch_seconds(profile, batch, in_len, out_len):
    t = profile.step_time(0, batch * in_len, 0)
    for k in range(out_len):
        t += profile.step_time(batch, 0, batch * (in_len + k))
    return t


def run_latency(argv):
    args = parse("latency", argv)
    in_len = args.input_len if args.input_len is not None else 32
    out_len = args.output_len if args.output_len is not None else 128
    profile = _profile(args)
    rnd = random.Random()  # runs differ, as on real GPUs
    base = _batch_seconds(profile, args.batch_size, in_len, out_len) * (1.0 + rnd.uniform(-0.02, 0.02))
    print("INFO Loading model %s (rocm-console vLLM simulator)" % args.model)
    print("Warming up...")
    sys.stdout.flush()
    step = min(0.05, 2.0 / max(1, args.num_iters + args.num_iters_warmup))
    _progress("Warmup iterations", args.num_iters_warmup, step)
    _progress("Bench iterations", args.num_iters, step)
    latencies = [base * (1.0 + rnd.gauss(0, 0.01)) for _ in range(args.num_iters)]
    ordered = sorted(latencies)

    def pct(p):
        k = (len(ordered) - 1) * p / 100.0
        lo = int(k)
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)

    avg = sum(latencies) / len(latencies)
    print("Avg latency: %s seconds" % avg)
    percentiles = {}
    for p in (10, 25, 50, 75, 90, 99):
        percentiles[str(p)] = pct(p)
        print("%d%% percentile latency: %s seconds" % (p, percentiles[str(p)]))
    if args.output_json:
        with open(args.output_json, "w") as fh:
            json.dump(
                {"model_id": args.model, "avg_latency": avg, "latencies": latencies, "percentiles": percentiles},
                fh,
                indent=4,
            )
    return 0


def run_throughput(argv):
    args = parse("throughput", argv)
    print("When dataset path is not set, it will default to random dataset")
    in_len, out_len = args.random_input_len, args.random_output_len
    profile = _profile(args)
    seqs = min(args.num_prompts, 256)
    waves = -(-args.num_prompts // seqs)
    elapsed = waves * _batch_seconds(profile, seqs, in_len, out_len) * random.uniform(0.97, 1.03)
    _progress("Processed prompts", min(args.num_prompts, 50), 0.04)
    total_tokens = args.num_prompts * (in_len + out_len)
    rps = args.num_prompts / elapsed
    tps = total_tokens / elapsed
    print(
        "Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s"
        % (rps, tps, args.num_prompts * out_len / elapsed)
    )
    print("Total num prompt tokens:  %d" % (args.num_prompts * in_len))
    print("Total num output tokens:  %d" % (args.num_prompts * out_len))
    if args.output_json:
        with open(args.output_json, "w") as fh:
            json.dump(
                {
                    "model_id": args.model,
                    "elapsed_time": elapsed,
                    "num_requests": args.num_prompts,
                    "total_num_tokens": total_tokens,
                    "requests_per_second": rps,
                    "tokens_per_second": tps,
                },
                fh,
                indent=4,
            )
    return 0
