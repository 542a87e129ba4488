"""The random, sharegpt, prefix_repetition and timed_trace datasets of `vllm bench serve`."""

import json
import math
import random

from .bench_args import BENCH_DATASETS_SRC, BENCH_SRC
from .bench_output import BenchFatal, bench_log
from .constants import PYLIB
from .failures import tb_frame, vllm_src
from .openai_api import count_text_tokens

BENCH_WORDS = (
    "the of and to in a is it for on as by at be or an we are was his her can all one had but not "
    "you has new may use way out up two so do if no my who its get how our any old see now man day "
    "per top end set run big low key map row bit box cut fix hot mix net sum tag tip web ask add "
    "air arm art bed car dog eye far fun gas job law lot oil red sea sun tea war win yes age bad "
    "few hit let lie own pay put say six ten try via yet"
).split()


class BenchSample(object):
    __slots__ = ("prompt", "prompt_len", "expected_output_len", "request_id", "timestamp")

    def __init__(self, prompt, prompt_len, expected_output_len, request_id, timestamp=None):
        self.prompt = prompt
        self.prompt_len = prompt_len
        self.expected_output_len = expected_output_len
        self.request_id = request_id
        self.timestamp = timestamp  # timed_trace: seconds after the run's start


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
    return (
        tb_frame(
            BENCH_SRC,
            2165,
            "main_async",
            "input_requests = get_samples(args, tokenizer)",
            "get_samples(args, tokenizer)",
        )
        + tb_frame(
            BENCH_DATASETS_SRC,
            2413,
            "get_samples",
            "input_requests = dataset_mapping[args.dataset_name]()",
            "dataset_mapping[args.dataset_name]()",
        )
        + tb_frame(BENCH_DATASETS_SRC, lambda_line, "<lambda>", lambda_code, lambda_caret)
    )


def bench_random_samples(args):
    """RandomDataset.sample(): lengths uniform around the means, prompts of short words (no
    tokenizer special tokens, so `--random-input-len 64` gives 64-token prompts)."""
    rin, rout = _range_ratios(args.random_range_ratio)
    frames = _dataset_frames(2258, '"random": lambda: RandomDataset(', "RandomDataset(")
    for which, r in (("input", rin), ("output", rout)):
        if not 0.0 <= r < 1.0:
            raise BenchFatal(
                frames
                + tb_frame(
                    vllm_src("benchmarks/datasets/utils.py"),
                    65,
                    "get_sampling_params",
                    'raise ValueError("%s_range_ratio must be in [0, 1).")' % which,
                ),
                "ValueError: %s_range_ratio must be in [0, 1)." % which,
            )
    num_special = 0
    real_input_len = max(0, int(args.random_input_len) - num_special)
    in_low = int(math.floor(real_input_len * (1 - rin)))
    in_high = int(math.ceil(real_input_len * (1 + rin)))
    out_low = max(int(math.floor(args.random_output_len * (1 - rout))), 1)
    out_high = max(int(math.ceil(args.random_output_len * (1 + rout))), 1)
    prefix_len = max(0, int(args.random_prefix_len))
    if prefix_len + in_low < 1:
        raise BenchFatal(
            frames + tb_frame(BENCH_DATASETS_SRC, 606, "sample", "raise ValueError("),
            "ValueError: --random-input-len is too small: with tokenizer special tokens %d and input "
            "range ratio %s, the minimum possible total input tokens (prefix + sampled) is %d. "
            "Increase --random-input-len and/or --random-prefix-len, or decrease the input range "
            "ratio so that prefix_len + floor(max(0, random_input_len - num_special)) * (1 - "
            "input_range_ratio) >= 1." % (num_special, rin, prefix_len + in_low),
        )
    bench_log(
        "INFO",
        "utils.py:88",
        "Sampling input_len from [%s, %s] and output_len from [%s, %s]" % (in_low, in_high, out_low, out_high),
    )
    rng = random.Random(args.seed)
    n = max(0, args.num_prompts)
    input_lens = [rng.randint(in_low, in_high) for _ in range(n)]
    output_lens = [rng.randint(out_low, out_high) for _ in range(n)]
    offsets = [rng.randrange(len(BENCH_WORDS)) for _ in range(n)]
    prefix = [rng.choice(BENCH_WORDS) for _ in range(prefix_len)]
    samples = []
    w = len(BENCH_WORDS)
    for i in range(n):
        # each prompt its own random words, as vLLM's random token ids: two prompts share no
        # prefix-cache block by chance (rotations of one word cycle did, issue B2)
        own = random.Random("%s-%d-%d" % (args.seed, i, offsets[i]))
        words = prefix + [BENCH_WORDS[own.randrange(w)] for _ in range(input_lens[i])]
        samples.append(
            BenchSample(" ".join(words), prefix_len + input_lens[i], output_lens[i], args.request_id_prefix + str(i))
        )
    return samples


def _no_dataset_path(frames, line):
    """vLLM's error when a file-backed dataset is given no --dataset-path (load_data at `line`)."""
    return BenchFatal(
        frames
        + tb_frame(
            BENCH_DATASETS_SRC,
            line,
            "load_data",
            'raise ValueError("dataset_path must be provided for loading data.")',
        ),
        "ValueError: dataset_path must be provided for loading data.",
    )


def bench_sharegpt_samples(args):
    frames = _dataset_frames(2303, '"sharegpt": lambda: ShareGPTDataset(', "ShareGPTDataset(")
    frames += tb_frame(BENCH_DATASETS_SRC, 1334, "__init__", "self.load_data()")
    path = args.dataset_path
    if path is None:
        raise _no_dataset_path(frames, 1338)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, IOError) as exc:
        raise BenchFatal(
            frames
            + tb_frame(
                BENCH_DATASETS_SRC,
                1340,
                "load_data",
                'with open(self.dataset_path, encoding="utf-8") as f:',
                'open(self.dataset_path, encoding="utf-8")',
            ),
            "%s: [Errno %s] %s: %r" % (type(exc).__name__, exc.errno, exc.strerror, path),
        ) from None
    except ValueError as exc:
        raise BenchFatal(
            frames + tb_frame(BENCH_DATASETS_SRC, 1341, "load_data", "self.data = json.load(f)", "json.load(f)"),
            "json.decoder.JSONDecodeError: %s" % exc,
        ) from None
    entries = [
        e
        for e in (data if isinstance(data, list) else [])
        if isinstance(e, dict) and isinstance(e.get("conversations"), list) and len(e["conversations"]) >= 2
    ]
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
            raise BenchFatal(
                frames[:-3]
                + tb_frame(BENCH_DATASETS_SRC, 319, "maybe_oversample_requests", "random.choice(requests),")
                + tb_frame(
                    PYLIB + "/random.py", 347, "choice", "raise IndexError('Cannot choose from an empty sequence')"
                ),
                "IndexError: Cannot choose from an empty sequence",
            )
        rng = random.Random(args.seed)
        base = len(samples)
        for i in range(args.num_prompts - base):
            s = rng.choice(samples[:base])
            samples.append(
                BenchSample(s.prompt, s.prompt_len, s.expected_output_len, args.request_id_prefix + str(base + i))
            )
        bench_log("INFO", "datasets.py:324", "Oversampled requests to reach %d total samples." % args.num_prompts)
    return samples


def bench_prefix_repetition_samples(args):
    """PrefixRepetitionRandomDataset.sample(): num_prefixes random prefixes, each followed by
    num_prompts // num_prefixes random suffixes, shuffled (the same seed, the same prompts)."""
    frames = _dataset_frames(
        2296, '"prefix_repetition": lambda: PrefixRepetitionRandomDataset(', "PrefixRepetitionRandomDataset("
    )
    n = max(0, args.num_prompts)
    k = int(args.prefix_repetition_num_prefixes)
    per = n // k if k > 0 else 0
    if per == 0:
        raise BenchFatal(
            frames + tb_frame(BENCH_DATASETS_SRC, 4212, "sample", "raise ValueError("),
            "ValueError: num_requests (%d) must be greater than or equal to num_prefixes (%d)" % (n, k),
        )
    plen = max(0, int(args.prefix_repetition_prefix_len))
    slen = max(0, int(args.prefix_repetition_suffix_len))
    out_len = int(args.prefix_repetition_output_len)
    rng = random.Random(args.seed)
    prompts = []
    for _ in range(k):
        prefix = [rng.choice(BENCH_WORDS) for _ in range(plen)]
        for _ in range(per):
            prompts.append(prefix + [rng.choice(BENCH_WORDS) for _ in range(slen)])
    rng.shuffle(prompts)
    return [
        BenchSample(" ".join(words), plen + slen, out_len, args.request_id_prefix + str(i))
        for i, words in enumerate(prompts)
    ]


def _trace_chunk(hash_id, size):
    """One hash id's words: the same id and size always give the same words (vLLM seeds its
    random token ids from them), so requests that share ids share a cacheable prefix."""
    rng = random.Random("trace-%s:%d" % (hash_id, size))
    return [BENCH_WORDS[rng.randrange(len(BENCH_WORDS))] for _ in range(size)]


def bench_timed_trace_samples(args):
    """TimedTrace.sample(): one JSON object a line (vLLM 0.32's labels), the first num_prompts
    lines; a prompt is its hash ids' chunks up to input_length (no ids: an empty prompt), its
    timestamp times --timed-trace-sec-multiplier."""
    frames = _dataset_frames(2380, '"timed_trace": lambda: TimedTrace(', "TimedTrace(")
    path = args.dataset_path
    if path is None:
        raise _no_dataset_path(frames, 1448)
    try:
        with open(path) as f:
            lines = f.readlines()
    except (OSError, IOError) as exc:
        raise BenchFatal(
            frames
            + tb_frame(
                BENCH_DATASETS_SRC, 1452, "load_data", "with open(self.dataset_path) as f:", "open(self.dataset_path)"
            ),
            "%s: [Errno %s] %s: %r" % (type(exc).__name__, exc.errno, exc.strerror, path),
        ) from None
    chunk = int(args.timed_trace_chunk_hash_size)
    labels = (
        ("input", args.timed_trace_label_input_length, "--label-input-length", "Input length field"),
        ("output", args.timed_trace_label_output_length, "--label-output-length", "Output length field"),
        ("ts", args.timed_trace_label_timestamp, "--label-timestamp", "Timestamp field"),
    )
    samples = []
    for ind, line in enumerate(lines):
        if len(samples) >= args.num_prompts:
            break
        try:
            entry = json.loads(line.strip())
        except ValueError as exc:
            raise BenchFatal(
                frames + tb_frame(BENCH_DATASETS_SRC, 1530, "sample", "entry = json.loads(entry.strip())"),
                "json.decoder.JSONDecodeError: %s" % exc,
            ) from None
        values = {}
        for key, label, flag, what in labels:
            values[key] = entry.get(label)
            if values[key] is None:
                raise BenchFatal(
                    frames + tb_frame(BENCH_DATASETS_SRC, 1534, "sample", "raise ValueError("),
                    "ValueError: %s '%s' not found in trace entry. Available fields: %s. Use %s to specify "
                    "the correct field name." % (what, label, list(entry.keys()), flag),
                )
        left = int(values["input"])
        words = []
        for h in entry.get(args.timed_trace_label_hash_ids, []):
            size = chunk if left >= chunk else left
            words += _trace_chunk(h, size)
            left -= size
            if left <= 0:
                break
        samples.append(
            BenchSample(
                " ".join(words),
                len(words),
                int(values["output"]),
                args.request_id_prefix + str(ind),
                float(values["ts"]) * float(args.timed_trace_sec_multiplier),
            )
        )
    return samples


def trace_arrivals(samples):
    """get_request() when self-timed: each request leaves at its trace timestamp (cumulative
    from the start; no rate: 0.0 each)."""
    delays = [s.timestamp if s.timestamp is not None else 0.0 for s in samples]
    return delays, [0.0] * len(samples)
