"""`vllm bench serve` flags of vLLM 0.32, their defaults and its Namespace line."""

import argparse
import json
import sys
import uuid

from .constants import SITE
from .serve_args import normalize_flag

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
BENCH_TOP_USAGE = (
    "usage: vllm [-h] [-v]\n"
    "            {chat,complete,serve,launch,bench,collect-env,download-kernels,preload,"
    "run-batch,snapshot}\n"
    "            ..."
)
BENCH_DATASETS = [
    "sharegpt",
    "burstgpt",
    "random",
    "random-mm",
    "random-rerank",
    "hf",
    "custom",
    "custom_audio",
    "custom_image",
    "prefix_repetition",
    "spec_bench",
    "speed_bench",
    "timed_trace",
]
BENCH_BACKENDS = [
    "vllm",
    "openai",
    "openai-chat",
    "openai-responses",
    "openai-audio",
    "openai-embeddings",
    "openai-embeddings-chat",
    "openai-embeddings-clip",
    "openai-embeddings-vlm2vec",
    "infinity-embeddings",
    "infinity-embeddings-clip",
    "vllm-pooling",
    "vllm-rerank",
]
BENCH_SIMULATED_BACKENDS = ("vllm", "openai", "openai-chat")
BENCH_OPENAI_COMPATIBLE = ("vllm", "openai", "openai-chat", "openai-responses")
BENCH_SPEED_SUBSETS = [
    "throughput_16k",
    "throughput_1k",
    "throughput_8k",
    "qualitative",
    "throughput_2k",
    "throughput_32k",
]
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
    (
        "--random-mm-bucket-config",
        "random_mm_bucket_config",
        "str",
        _Repr("{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}"),
        None,
    ),
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
    (
        "logging_config",
        _Repr("LoggingConfig(log_level='INFO', formatter='text', configure_logging=True, pylogging_config_file=None)"),
    ),
]


class BenchArgError(Exception):
    pass


class _BenchParser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(
            "usage: vllm bench serve [options]\nvllm bench <bench_type> [options] serve: error: %s\n" % message
        )
        raise BenchArgError(message)


def bench_parser():
    p = _BenchParser(
        prog="vllm bench serve",
        usage="vllm bench serve [options]",
        add_help=False,
        description="Benchmark the online serving throughput (rocm-console simulator).",
    )
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
    args, extra = parser.parse_known_args([normalize_flag(a) for a in argv])
    if extra:
        sys.stderr.write("%s\nvllm: error: unrecognized arguments: %s\n" % (BENCH_TOP_USAGE, " ".join(extra)))
        raise BenchArgError("unrecognized arguments")
    if args.request_id_prefix is None:
        args.request_id_prefix = "bench-%s-" % uuid.uuid4().hex[:8]
    return args


def bench_namespace(args):
    items = [
        ("subparser", "bench"),
        ("bench_type", "serve"),
        (
            "dispatch_function",
            _Repr("<function BenchmarkServingSubcommand.cmd at 0x7f%010x>" % (id(args) & 0xFFFFFFFFFF)),
        ),
    ]
    items += [(dest, getattr(args, dest)) for _, dest, _, _, _ in BENCH_ARGS]
    items += BENCH_NAMESPACE_TAIL
    return "Namespace(%s)" % ", ".join("%s=%r" % (k, v) for k, v in items)
