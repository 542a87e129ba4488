"""The offline-benchmark dialog's fields as text -> a request, or one line saying what is wrong.

Pure (no Textual). The same checks as `rocm-console bench latency|throughput`:
the overrides go through apply_offline_overrides, so both refuse with the same words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from console.core.bench.offline import OfflineError, OfflinePreset, apply_offline_overrides
from console.ui.model.start_form import FormError, parse_pairs


@dataclass(frozen=True)
class OfflineRequest:
    node: str
    preset: OfflinePreset  # overrides applied, TP = the number of GPUs unless tp= was given
    gpus: tuple[int, ...]
    label: str | None = None
    overrides: tuple[tuple[str, str], ...] = ()  # as typed, so the run's title names them


def preset_key(preset: OfflinePreset) -> str:
    return f"{preset.kind}:{preset.name}"


def preset_prompt(preset: OfflinePreset) -> str:
    """`latency  seed000-405b-fp8-tp8  Llama-3.1-405B-Instruct-FP8-KV TP8 bs1 128/2048`."""
    model = preset.model.rstrip("/").rsplit("/", 1)[-1]
    extra = (
        f" bs{preset.batch_size}" if preset.batch_size else (f" n{preset.num_prompts}" if preset.num_prompts else "")
    )
    return f"{preset.kind:<10} {preset.name}  {model} TP{preset.tp}{extra} {preset.input_len}/{preset.output_len}"


def parse_gpu_list(text: str) -> tuple[int, ...]:
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    if not parts:
        raise FormError("GPUs: give the GPU indices, e.g. 0,1,2,3 (the GPUs must be free)")
    try:
        gpus = tuple(int(p) for p in parts)
    except ValueError:
        raise FormError(f"GPUs: {text.strip()!r} is not a list of GPU indices (e.g. 0,1)") from None
    if any(g < 0 for g in gpus) or len(set(gpus)) != len(gpus):
        raise FormError(f"GPUs: {text.strip()!r}: expected distinct non-negative GPU indices")
    return gpus


def check_offline_request(
    node: str, key: str | None, presets: Sequence[OfflinePreset], gpus_text: str, overrides_text: str, label: str
) -> OfflineRequest:
    preset = next((p for p in presets if preset_key(p) == key), None)
    if preset is None:
        raise FormError("Preset: choose an offline preset")
    gpus = parse_gpu_list(gpus_text)
    overrides = parse_pairs(overrides_text, "overrides")
    try:
        preset = apply_offline_overrides(preset, overrides)
    except OfflineError as exc:
        raise FormError(f"overrides: {exc}".replace("--set ", "")) from None
    if not any(k.replace("-", "_") == "tp" for k in overrides):
        preset = replace(preset, tp=len(gpus))
    if preset.tp != len(gpus):
        raise FormError(f"GPUs: TP {preset.tp} needs {preset.tp} GPUs, {len(gpus)} given")
    if preset.kind == "throughput" and (preset.input_len is None or preset.output_len is None):
        raise FormError("overrides: a throughput run needs input_len=N output_len=N")
    return OfflineRequest(node, preset, gpus, label.strip() or None, tuple(overrides.items()))
