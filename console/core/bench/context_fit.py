"""Does a benchmark's longest request fit the instance's context? Checked before the client starts.

A random-dataset request asks for up to input_len x (1 + range_ratio) prompt tokens and
output_len x (1 + range_ratio) output tokens (vLLM's random dataset draws each length from
[len x (1 - r), len x (1 + r)]). Over the instance's max_model_len, vLLM answers every such
request "400 Bad Request": a run of zeros that tells nothing. Other datasets' lengths are
not known before the run, so they are not checked.
"""

from __future__ import annotations

import math

from console.core.model import BenchPreset


def longest_request(preset: BenchPreset) -> tuple[int, int] | None:
    """(prompt tokens, output tokens) of the longest request the preset can send, or None."""
    if preset.dataset != "random" or preset.input_len is None or preset.output_len is None:
        return None
    spread = 1.0 + (preset.range_ratio or 0.0)
    return math.ceil(preset.input_len * spread), math.ceil(preset.output_len * spread)


def context_refusal(preset: BenchPreset, max_model_len: int | None, instance: str) -> str | None:
    """Why the run would only collect errors (one line), or None when it fits or is unknown."""
    longest = longest_request(preset)
    if longest is None or max_model_len is None:
        return None
    prompt, output = longest
    if prompt + output <= max_model_len:
        return None
    return (
        f"{preset.name}: requests of up to {prompt} + {output} = {prompt + output} tokens do not fit "
        f"instance {instance}'s max_model_len {max_model_len}; lower input_len/output_len "
        f"(--set input_len=...) or serve with a larger --max-model-len"
    )
