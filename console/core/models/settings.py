"""The fit's serve settings from what a person gives: `--set KEY=VALUE` pairs and a preset's argv.

`settings_from_args` reads the `vllm serve` flags a fit depends on out of an argv (a preset's
args, the start's extra args); `settings_from_pairs` applies `--set` pairs on top. An unknown
key or a bad value is a one-line FitError naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from console.core.models.fit import FitError, ServeSettings

__all__ = ["SETTING_KEYS", "settings_from_args", "settings_from_pairs", "utilization_from_args"]

_INT = ("tp", "max_model_len", "max_num_batched_tokens", "max_num_seqs", "block_size")
_TEXT = ("dtype", "kv_cache_dtype", "quantization")
_ALIASES = {"tensor_parallel_size": "tp", "tp_size": "tp"}
SETTING_KEYS = (*_INT, *_TEXT, "gpu_memory_utilization", "enforce_eager")


def _norm(key: str) -> str:
    key = key.strip().lstrip("-").replace("-", "_").lower()
    return _ALIASES.get(key, key)


def _value(key: str, text: str, what: str) -> Any:
    if key in _INT:
        try:
            value = int(text)
        except ValueError:
            raise FitError(f"{what} {key}={text!r}: expected a whole number") from None
        if value < 1:
            raise FitError(f"{what} {key}={text!r}: expected a positive number")
        return value
    if key == "gpu_memory_utilization":
        try:
            util = float(text)
        except ValueError:
            raise FitError(f"{what} {key}={text!r}: expected a fraction above 0 and at most 1") from None
        if not 0 < util <= 1:
            raise FitError(f"{what} {key}={text!r}: expected a fraction above 0 and at most 1")
        return util
    if key == "enforce_eager":
        if text.lower() not in ("true", "false", "1", "0", "yes", "no", ""):
            raise FitError(f"{what} {key}={text!r}: expected true or false")
        return text.lower() in ("true", "1", "yes", "")
    if not text:
        raise FitError(f"{what} {key}: empty value")
    return text


def settings_from_pairs(
    pairs: Mapping[str, str], base: ServeSettings | None = None, *, what: str = "--set"
) -> ServeSettings:
    """`base` with each pair applied; FitError naming an unknown key or a bad value."""
    settings = base if base is not None else ServeSettings()
    changes: dict[str, Any] = {}
    for raw, text in pairs.items():
        key = _norm(raw)
        if key not in SETTING_KEYS:
            raise FitError(f"{what} {raw}: not a fit setting (known: {', '.join(SETTING_KEYS)})")
        changes[key] = _value(key, str(text).strip(), what)
    return replace(settings, **changes)


def settings_from_args(args: Sequence[str], base: ServeSettings | None = None) -> ServeSettings:
    """The fit settings an argv names (`--max-model-len 4608`, `--kv-cache-dtype=fp8`,
    `--enforce-eager`, `-tp 8`); flags the fit does not read are skipped."""
    pairs: dict[str, str] = {}
    items = list(args)
    i = 0
    while i < len(items):
        item = items[i]
        i += 1
        if not item.startswith("-"):
            continue
        flag, eq, inline = item.partition("=")
        key = _norm(flag)
        if key == "tp" or flag == "-tp":
            key = "tp"
        if key not in SETTING_KEYS:
            continue
        if key == "enforce_eager":
            pairs[key] = inline if eq else "true"
            continue
        if eq:
            pairs[key] = inline
        elif i < len(items):
            pairs[key] = items[i]
            i += 1
    return settings_from_pairs(pairs, base, what="argument")


def utilization_from_args(args: Sequence[str]) -> float | None:
    """The `--gpu-memory-utilization` an argv sets (None: not set, vLLM's 0.9 and the GPU alone)."""
    found = None
    items = list(args)
    for i, item in enumerate(items):
        flag, eq, inline = item.partition("=")
        if _norm(flag) != "gpu_memory_utilization":
            continue
        text = inline if eq else (items[i + 1] if i + 1 < len(items) else "")
        found = _value("gpu_memory_utilization", text, "argument")
    return found
