"""What a benchmark run was set up with, as its client prints it: the `Namespace(...)` of its
arguments (or vLLM 0.33's `non-default args: {...}`), a shown command line, and the pre-run
lines (`Traffic request rate: inf`, `Maximum request concurrency: 8`, warm-up, ...)."""

from __future__ import annotations

import ast
import math
import re
import shlex
import warnings
from collections.abc import Mapping

from console.core.bench.result_table import printed_number

_PAIR_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}


def _split_top(text: str) -> list[str]:
    """Split `a=1, b=(1, 2), c='x, y'` on top-level commas."""
    parts: list[str] = []
    stack: list[str] = []
    quote = ""
    start = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _PAIR_OPEN:
            # `<` only opens a repr like <function f at 0x..>, not a comparison
            if ch != "<" or text[i + 1 : i + 2].isalpha():
                stack.append(_PAIR_OPEN[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
        elif ch in ")]}" and not stack:
            pass  # unbalanced: ignore
        elif ch == "," and not stack:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


_SPECIAL_VALUES = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan, "None": None, "True": True, "False": False}


def _value(text: str) -> object:
    text = text.strip()
    if text in _SPECIAL_VALUES:
        return _SPECIAL_VALUES[text]
    if len(text) > 20000:
        return text
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning on reprs like 0x7f…>
            return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def parse_namespace(text: str) -> dict[str, object]:
    """`Namespace(a=1, b='x', f=<function …>)` (or `{…}` / the inside) -> dict.

    Values are Python literals where they parse (`inf` is float inf), else the
    text as printed (functions, nested objects).
    """
    text = text.strip()
    found = re.search(r"Namespace\((.*)\)\s*$", text, re.DOTALL)
    if found:
        inner = found.group(1)
    elif text.startswith("{"):
        value = _value(text)
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
        inner = text.strip("{}")
    elif text.startswith("Namespace("):  # cut short: take what is there
        inner = text[len("Namespace(") :]
    else:
        inner = text
    out: dict[str, object] = {}
    for part in _split_top(inner):
        if "=" in part and re.match(r"[A-Za-z_][A-Za-z0-9_]*\s*=", part):
            key, raw = part.split("=", 1)
            out[key.strip()] = _value(raw)
        elif ":" in part:  # a dict item 'key': value
            key, raw = part.split(":", 1)
            key_value = _value(key)
            if isinstance(key_value, str):
                out[key_value] = _value(raw)
    return out


# Flags of the clients (both spellings) -> setup keys.
_SETUP_FROM_ARGS = {
    "model": "model",
    "served_model_name": "served_model_name",
    "tokenizer": "tokenizer",
    "backend": "backend",
    "endpoint_type": "endpoint_type",
    "label": "label",
    "endpoint": "endpoint",
    "base_url": "base_url",
    "host": "host",
    "port": "port",
    "dataset_name": "dataset_name",
    "dataset": "dataset_path",  # 0.6.3's deprecated --dataset
    "dataset_path": "dataset_path",
    "num_prompts": "num_prompts",
    "request_rate": "request_rate",
    "burstiness": "burstiness",
    "max_concurrency": "max_concurrency",
    "seed": "seed",
    "ignore_eos": "ignore_eos",
    "percentile_metrics": "percentile_metrics",
    "metric_percentiles": "metric_percentiles",
    "random_range_ratio": "range_ratio",
    "num_warmups": "num_warmups",
}
_LEN_FLAGS = {
    "random": ("random_input_len", "random_output_len"),
    "sonnet": ("sonnet_input_len", "sonnet_output_len"),
    "sharegpt": (None, "sharegpt_output_len"),
    "hf": (None, "hf_output_len"),
    "custom": (None, "custom_output_len"),
}


def setup_from_args(args: Mapping[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, name in _SETUP_FROM_ARGS.items():
        value = args.get(key)
        # None means "not given", except for max_concurrency (None = no limit)
        if key in args and (value is not None or name == "max_concurrency"):
            out[name] = value
    for name in ("request_rate", "range_ratio", "burstiness"):
        if name in out:
            out[name] = _rate_value(out[name])
    dataset = str(args.get("dataset_name") or "")
    in_key, out_key = _LEN_FLAGS.get(dataset, (None, None))
    for name, flag, generic in (("input_len", in_key, "input_len"), ("output_len", out_key, "output_len")):
        value = args.get(generic)  # 0.33's generic --input-len/--output-len win
        if value is None and flag:
            value = args.get(flag)
        if value is not None:
            out[name] = value
    return out


def _rate_value(value: object) -> object:
    if isinstance(value, str):
        try:
            return float(value)  # "inf" -> inf
        except ValueError:
            return value
    return value


# a shown command: the client followed directly by its flags
COMMAND_RE = re.compile(r"(?:\bvllm\s+bench\s+serve|\bbenchmark_serving\.py)(?P<rest>(?:\s+\\)?\s+--[A-Za-z].*)")
_BOOL_FLAGS = {
    "ignore_eos",
    "save_result",
    "save_detailed",
    "append_result",
    "disable_tqdm",
    "trust_remote_code",
    "use_beam_search",
    "profile",
    "disable_shuffle",
    "skip_chat_template",
    "no_stream",
    "no_oversample",
    "insecure",
    "plot_timeline",
    "plot_dataset_stats",
    "skip_tokenizer_init",
    "enable_multimodal_chat",
    "self_timed",
}


def parse_command(rest: str) -> dict[str, object]:
    """Flags of a shown command line (`... benchmark_serving.py --backend x ...`)."""
    for stop in ('"', ";", "&&", "||", " | ", " > ", " 2>", " <"):
        cut = rest.find(stop)
        if cut >= 0:
            rest = rest[:cut]
    rest = rest.replace("\\\n", " ")
    try:
        words = shlex.split(rest)
    except ValueError:
        words = rest.split()
    out: dict[str, object] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("--") or len(word) < 3:
            i += 1
            continue
        name, eq, inline = word[2:].partition("=")
        key = name.replace("-", "_")
        if eq:
            out[key] = _value(inline) if _looks_number(inline) else inline
            i += 1
        elif key in _BOOL_FLAGS or i + 1 >= len(words) or words[i + 1].startswith("--"):
            out[key] = True
            i += 1
        else:
            value = words[i + 1]
            out[key] = _value(value) if _looks_number(value) else value
            i += 2
    return out


def _looks_number(text: str) -> bool:
    return bool(re.fullmatch(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf", text))


# ---------------------------------------------------------------- setup lines

SETUP_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("initial_test_start", re.compile(r"Starting initial single prompt test run")),
    ("initial_test_done", re.compile(r"Initial test run completed")),
    ("ready_check_skipped", re.compile(r"Skipping endpoint ready check")),
    ("ready_check_wait", re.compile(r"Waiting for endpoint to become up in (?P<v>\d+) seconds")),
    ("warmup_start", re.compile(r"Warming up with (?P<v>\d+) requests")),
    ("warmup_done", re.compile(r"Warmup run completed")),
    ("main_start", re.compile(r"\bStarting main benchmark run")),
    ("request_rate", re.compile(r"\bTraffic request rate:\s*(?P<v>\S+)")),
    ("ramp_up_strategy", re.compile(r"\bTraffic ramp-up strategy:\s*(?P<v>[\w-]+)")),
    ("ramp_up", re.compile(r"\bWill increase RPS from (?P<a>\S+) to (?P<b>\S+) RPS")),
    ("burstiness", re.compile(r"\bBurstiness factor:\s*(?P<v>\S+)")),
    ("max_concurrency", re.compile(r"\bMaximum request concurrency:\s*(?P<v>\S+)\s*$")),
    ("probe_request_rate", re.compile(r"\bProbe request rate:\s*(?P<v>\S+)")),
)


def setup_value(kind: str, match: re.Match) -> object:
    if kind == "ramp_up":
        return (printed_number(match["a"]), printed_number(match["b"]))
    groups = match.groupdict()
    if "v" not in groups:
        return None
    text = groups["v"]
    if kind == "ramp_up_strategy":
        return text
    number = printed_number(text)
    if (
        kind in ("max_concurrency", "ready_check_wait", "warmup_start")
        and number is not None
        and math.isfinite(number)
        and number == int(number)
    ):
        return int(number)
    return number
