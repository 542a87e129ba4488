"""argv for a serving benchmark client from a bench preset.

Two clients (vllm-formats.md §3):
- "vllm-bench": `vllm bench serve …` (vLLM ≥ 0.9; the only one from 0.11 on);
- "benchmark_serving": `python3 benchmarks/benchmark_serving.py …` of older
  images (0.6.3-0.9.x). Its flag names of that era are the same for every flag
  used here (`--base-url` existed in the script as well); `--burstiness` only
  from 0.8.5, so it is passed only when the preset sets it.

`--random-range-ratio` means different things across versions (0.6.3: length in
[len·r, len], default 1.0; later: [len·(1-r), len·(1+r)], default 0.0): the
preset's value is passed as written, and left out when unset, so each version
uses its own default (which, in both eras, means fixed lengths).

Everything is an argv tuple, never a shell string.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

from console.core import profiles as _profiles
from console.core.bench.clients.argv import check_outside
from console.core.bench.goodput import slo_of
from console.core.model import BenchPreset
from console.core.toml_source import Invalid

__all__ = [
    "CLIENTS",
    "OVERRIDABLE",
    "apply_bench_overrides",
    "bench_endpoint",
    "build_bench_argv",
    "sweep_points",
]

CLIENTS = ("vllm-bench", "benchmark_serving")
_EMPTY: Mapping[str, str] = MappingProxyType({})
CHAT_ENDPOINT = "/v1/chat/completions"
COMPLETIONS_ENDPOINT = "/v1/completions"

# Preset keys `--set KEY=VALUE` may change, with the flag-style aliases users type.
OVERRIDABLE = tuple(f.name for f in dataclasses.fields(BenchPreset) if f.name not in ("name", "source"))
_ALIASES = {
    "dataset_name": "dataset",
    "random_input_len": "input_len",
    "random_output_len": "output_len",
    "random_range_ratio": "range_ratio",
}
_TEXT_FIELDS = frozenset(
    {
        "client",
        "backend",
        "endpoint",
        "dataset",
        "dataset_path",
        "percentile_metrics",
        "metric_percentiles",
        "cold_start",
        "trace",
        "client_path",
    }
)
_OPTIONAL_FIELDS = frozenset(f.name for f in dataclasses.fields(BenchPreset) if f.default is None)

# Flags the console sets from build arguments, and flags that belong to a preset
# key: a copy in extra_args would silently win (argparse keeps the last one).
_CONSOLE_FLAGS = {
    "--base-url": "the instance's address",
    "--host": "the instance's address",
    "--port": "the instance's address",
    "--model": "the instance's model",
    "--save-result": "the console (always on)",
    "--result-dir": "the console (the instance's state folder)",
    "--result-filename": "the console",
}
_PRESET_FLAGS = {
    "--backend": "backend",
    "--endpoint": "endpoint",
    "--dataset-name": "dataset",
    "--dataset-path": "dataset_path",
    "--random-input-len": "input_len",
    "--random-output-len": "output_len",
    "--random-range-ratio": "range_ratio",
    "--sonnet-input-len": "input_len",
    "--sonnet-output-len": "output_len",
    "--sharegpt-output-len": "output_len",
    "--hf-output-len": "output_len",
    "--custom-output-len": "output_len",
    "--input-len": "input_len",
    "--output-len": "output_len",
    "--num-prompts": "num_prompts",
    "--request-rate": "request_rate",
    "--max-concurrency": "max_concurrency",
    "--burstiness": "burstiness",
    "--seed": "seed",
    "--ignore-eos": "ignore_eos",
    "--percentile-metrics": "percentile_metrics",
    "--metric-percentiles": "metric_percentiles",
    "--prefix-repetition-output-len": "output_len",
    "--goodput": "slo_ttft_ms / slo_tpot_ms / slo_e2e_ms",
    "--timed-trace-sec-multiplier": "trace_speedup",  # the speedup is in the converted file's times
    "--timed-trace-chunk-hash-size": "trace (the console writes 16-token chunks)",
}


# ---------------------------------------------------------------- overrides


def _override_key(key: str) -> str:
    name = key.strip().lstrip("-").replace("-", "_")
    name = _ALIASES.get(name, name)
    if name not in OVERRIDABLE:
        raise ValueError(f"--set {key}: unknown bench preset key (one of: {', '.join(OVERRIDABLE)})")
    return name


def _override_value(name: str, text: str) -> object:
    """A `--set` value -> the value a TOML profile would give for that key."""
    if name in _TEXT_FIELDS:
        return text
    if name == "extra_args":
        try:
            return shlex.split(text)
        except ValueError as exc:
            raise ValueError(f"cannot split into arguments ({exc})") from None
    stripped = text.strip()
    if name == "max_concurrency" and "," in stripped and not stripped.startswith("["):
        stripped = f"[{stripped}]"
    try:
        return tomllib.loads(f"v = {stripped}")["v"]
    except tomllib.TOMLDecodeError:
        return stripped


def apply_bench_overrides(preset: BenchPreset, overrides: Mapping[str, str]) -> BenchPreset:
    """`--set num_prompts=50 --set max_concurrency=1,4,16`: the preset with those keys changed.

    Keys are preset keys (dashes or a leading `--` allowed; `dataset_name`,
    `random_input_len`, ... accepted as aliases). Values are checked like the
    profile's; an empty value unsets an optional key. Raises ValueError.
    """
    if not overrides:
        return preset
    checks = _profiles.BENCH_FIELDS  # the profile's own checks: one source of truth
    changes: dict[str, Any] = {}
    for key, raw in overrides.items():
        name = _override_key(str(key))
        text = "" if raw is None else str(raw)
        if not text.strip():
            if name in _OPTIONAL_FIELDS:
                changes[name] = None
                continue
            if name == "max_concurrency":
                changes[name] = ()
                continue
            if name == "extra_args":
                changes[name] = ()
                continue
            raise ValueError(f"--set {key}: empty value")
        value = _override_value(name, text)
        try:
            changes[name] = checks[name](value)
        except Invalid as exc:
            raise ValueError(f"--set {key}={text}: {exc.message}") from None
    return dataclasses.replace(preset, **changes)


def sweep_points(preset: BenchPreset) -> tuple[int | None, ...]:
    """The max-concurrency value of each run: the preset's list, or one run without a limit."""
    return tuple(preset.max_concurrency) or (None,)


# ---------------------------------------------------------------- builder


def bench_endpoint(preset: BenchPreset) -> str:
    """The preset's endpoint, else the backend's: chat for openai-chat, completions otherwise."""
    if preset.endpoint:
        return preset.endpoint
    return CHAT_ENDPOINT if preset.backend == "openai-chat" else COMPLETIONS_ENDPOINT


def _num(value: float) -> str:
    """1.0 -> "1", 0.25 -> "0.25" (argparse reads both as float)."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _norm_flag(item: str) -> str:
    name = item.split("=", 1)[0]
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def _check_text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    if any(c in value for c in "\n\r\0"):
        raise ValueError(f"{what} must be a single line")
    return value


def _length_flags(preset: BenchPreset, client: str) -> list[str]:
    dataset = preset.dataset
    out: list[str] = []
    if dataset.startswith("random"):  # random, random-mm, random-rerank
        if preset.input_len is not None:
            out += ["--random-input-len", str(preset.input_len)]
        if preset.output_len is not None:
            out += ["--random-output-len", str(preset.output_len)]
        if preset.range_ratio is not None:
            out += ["--random-range-ratio", _num(preset.range_ratio)]
        return out
    if preset.range_ratio is not None:
        raise ValueError(f"bench preset {preset.name!r}: range_ratio applies to the random dataset only")
    if dataset == "prefix_repetition":  # lengths: --prefix-repetition-prefix/suffix-len in extra_args
        if preset.input_len is not None:
            raise ValueError(
                f"bench preset {preset.name!r}: the prefix_repetition dataset's input is its prefix and "
                "suffix: set --prefix-repetition-prefix-len and --prefix-repetition-suffix-len in extra_args"
            )
        if preset.output_len is not None:
            out += ["--prefix-repetition-output-len", str(preset.output_len)]
        return out
    if dataset == "timed_trace":  # issue B2: lengths (and times) come from the trace file
        if preset.input_len is not None or preset.output_len is not None:
            raise ValueError(
                f"bench preset {preset.name!r}: the timed_trace dataset brings its own lengths; "
                "scale them with trace_max_input instead of input_len/output_len"
            )
        return out
    if dataset == "sonnet":
        if preset.input_len is not None:
            out += ["--sonnet-input-len", str(preset.input_len)]
        if preset.output_len is not None:
            out += ["--sonnet-output-len", str(preset.output_len)]
        return out
    own_output = {"sharegpt": "--sharegpt-output-len", "hf": "--hf-output-len", "custom": "--custom-output-len"}
    if dataset in own_output:
        if preset.input_len is not None:
            raise ValueError(
                f"bench preset {preset.name!r}: the {dataset} dataset brings its own prompts; input_len cannot be set"
            )
        if preset.output_len is not None:
            out += [own_output[dataset], str(preset.output_len)]
        return out
    if preset.input_len is None and preset.output_len is None:
        return out
    if client != "vllm-bench":
        raise ValueError(
            f"bench preset {preset.name!r}: benchmark_serving has no length flags for the "
            f"{dataset} dataset; put them in extra_args"
        )
    if preset.input_len is not None:  # `vllm bench serve`'s generic flags (0.32+)
        out += ["--input-len", str(preset.input_len)]
    if preset.output_len is not None:
        out += ["--output-len", str(preset.output_len)]
    return out


def _slo_flags(preset: BenchPreset) -> list[str]:
    """An SLO run keeps its per-request figures (goodput is counted from them, goodput.py) and
    asks `vllm bench serve` for its own goodput too; the old script keeps them unasked."""
    slo = slo_of(preset)
    if slo is None or preset.client != "vllm-bench":
        return []
    out = ["--save-detailed"]
    if slo.vllm_goodput():
        out += ["--goodput", *slo.vllm_goodput()]
    return out


def _check_trace(preset: BenchPreset) -> None:
    """Trace keys belong to the timed_trace dataset, which needs a file (issue B2, trace.py)."""
    keys = [k for k in ("trace", "trace_max_input", "trace_speedup") if getattr(preset, k) is not None]
    if preset.dataset != "timed_trace":
        if keys:
            raise ValueError(f"bench preset {preset.name!r}: {', '.join(keys)} applies to the timed_trace dataset only")
        return
    if preset.client != "vllm-bench" or preset.backend not in ("vllm", "openai"):
        raise ValueError(
            f"bench preset {preset.name!r}: the timed_trace dataset needs `vllm bench serve` (0.32+) "
            "with the vllm or openai backend (its prompts are token ids for /v1/completions)"
        )
    if preset.trace is None and preset.dataset_path is None:
        raise ValueError(f"bench preset {preset.name!r}: the timed_trace dataset needs a trace (or a dataset_path)")
    if preset.trace is None and keys:
        raise ValueError(f"bench preset {preset.name!r}: {', '.join(keys)} needs a trace to convert")
    if preset.trace is not None and preset.dataset_path is None:
        raise ValueError(
            f"bench preset {preset.name!r}: trace {preset.trace!r} has no converted file (the run's start uploads it)"
        )


def _check_extra_args(args: Sequence[str], tokenizer: str | None) -> None:
    for item in args:
        if not isinstance(item, str):
            raise TypeError(f"extra argument {item!r} is not a string")
        if not item.startswith("--"):
            continue
        flag = _norm_flag(item)
        if flag in _CONSOLE_FLAGS:
            raise ValueError(f"extra argument {item}: set by {_CONSOLE_FLAGS[flag]}")
        if flag in _PRESET_FLAGS:
            raise ValueError(f"extra argument {item}: set the preset's {_PRESET_FLAGS[flag]} instead")
        if flag == "--tokenizer" and tokenizer is not None:
            raise ValueError(f"extra argument {item}: the tokenizer is already given")


def build_bench_argv(
    preset: BenchPreset,
    *,
    client_cmd: Sequence[str],
    base_url: str,
    model: str,
    result_dir: str,
    result_filename: str,
    max_concurrency: int | None,
    overrides: Mapping[str, str] = _EMPTY,
    tokenizer: str | None = None,
) -> tuple[str, ...]:
    """The client's argv for one run (one point of a sweep).

    client_cmd: how the client starts, e.g. ("vllm",) or ("python3",
    "benchmarks/benchmark_serving.py"); for "vllm-bench" `bench serve` follows it.
    base_url: the instance's http://host:port (no /v1: the endpoint is appended).
    max_concurrency: this run's limit (None = none); take it from
    `sweep_points(apply_bench_overrides(preset, overrides))`. The request rate
    is "inf" when the preset has none. Raises ValueError on anything that would
    not run as intended.
    """
    preset = apply_bench_overrides(preset, overrides)
    if preset.client not in CLIENTS:
        raise ValueError(f"bench preset {preset.name!r}: unknown client {preset.client!r} ({', '.join(CLIENTS)})")
    cmd = list(client_cmd) if not isinstance(client_cmd, str) else None
    if not cmd or any(not isinstance(c, str) or not c for c in cmd):
        raise ValueError(f"client command must be a non-empty sequence of strings, got {client_cmd!r}")
    base_url = _check_text(base_url, "base URL").rstrip("/")
    if not base_url.startswith(("http://", "https://")) or any(c.isspace() for c in base_url):
        raise ValueError(f"base URL {base_url!r} is not an http(s) URL")
    if base_url.endswith("/v1"):
        raise ValueError(f"base URL {base_url!r}: leave out /v1 (the endpoint path is appended to it)")
    model = _check_text(model, "model")
    result_dir = _check_text(result_dir, "result folder")
    result_filename = _check_text(result_filename, "result file name")
    if "/" in result_filename:
        raise ValueError(f"result file name {result_filename!r} must not contain '/' (use result_dir)")
    if tokenizer is not None:
        tokenizer = _check_text(tokenizer, "tokenizer")
    if max_concurrency is not None and (
        isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1
    ):
        raise ValueError(f"max concurrency must be a positive integer or None, got {max_concurrency!r}")
    endpoint = bench_endpoint(preset)
    if not endpoint.startswith("/"):
        raise ValueError(f"bench preset {preset.name!r}: endpoint {endpoint!r} must start with '/'")
    if preset.backend == "openai-chat" and not endpoint.rstrip("/").endswith("chat/completions"):
        raise ValueError(f"bench preset {preset.name!r}: backend openai-chat needs a chat/completions endpoint")
    _check_extra_args(preset.extra_args, tokenizer)
    _check_trace(preset)

    argv = cmd + (["bench", "serve"] if preset.client == "vllm-bench" else [])
    argv += ["--backend", preset.backend, "--base-url", base_url, "--endpoint", endpoint]
    argv += ["--model", model]
    if tokenizer is not None:
        argv += ["--tokenizer", tokenizer]
    argv += ["--dataset-name", preset.dataset]
    if preset.dataset_path:
        argv += ["--dataset-path", preset.dataset_path]
    argv += _length_flags(preset, preset.client)
    argv += ["--num-prompts", str(preset.num_prompts)]
    rate = preset.request_rate
    argv += ["--request-rate", "inf" if rate is None or math.isinf(rate) else _num(rate)]
    if max_concurrency is not None:
        argv += ["--max-concurrency", str(max_concurrency)]
    if preset.burstiness is not None:
        argv += ["--burstiness", _num(preset.burstiness)]
    if preset.seed is not None:
        argv += ["--seed", str(preset.seed)]
    if preset.ignore_eos:
        argv.append("--ignore-eos")
    if preset.percentile_metrics:
        argv += ["--percentile-metrics", preset.percentile_metrics]
    if preset.metric_percentiles:
        argv += ["--metric-percentiles", preset.metric_percentiles]
    argv += _slo_flags(preset)
    argv += ["--save-result", "--result-dir", result_dir, "--result-filename", result_filename]
    argv += list(preset.extra_args)
    return tuple(argv)


def check_bench_argv(preset: BenchPreset, max_concurrency: int | None) -> None:
    """A dry build of the client's argv for a preset (overrides already applied): what the
    client could not run as asked fails here, before anything reaches the node. ValueError."""
    if preset.client in ("guidellm", "aiperf"):  # issue B2: an outside client's own argv
        return check_outside(preset, max_concurrency)
    if preset.trace is not None and preset.dataset_path is None:  # the file the start will upload
        preset = dataclasses.replace(preset, dataset_path="/tmp/check/trace.jsonl")
    build_bench_argv(
        preset,
        client_cmd=("vllm",),
        base_url="http://127.0.0.1:8000",
        model="model",
        result_dir="/tmp/check",
        result_filename="result.json",
        max_concurrency=max_concurrency,
    )
