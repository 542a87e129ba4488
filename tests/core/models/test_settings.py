"""The fit's settings from --set pairs and a preset's argv; the share a start sets."""

from __future__ import annotations

import pytest

from console.core.models.fit import FitError, ServeSettings
from console.core.models.settings import settings_from_args, settings_from_pairs, utilization_from_args


def test_a_presets_argv_gives_the_fit_settings():
    argv = [
        "--max-model-len",
        "4608",
        "--kv-cache-dtype=fp8",
        "--enforce-eager",
        "-tp",
        "8",
        "--num-scheduler-steps",
        "10",
    ]
    s = settings_from_args(argv)
    assert (s.max_model_len, s.kv_cache_dtype, s.enforce_eager, s.tp) == (4608, "fp8", True, 8)
    assert settings_from_args(["--gpu-memory-utilization", "0.45"]).gpu_memory_utilization == 0.45


def test_set_pairs_override_and_bad_ones_are_named():
    s = settings_from_pairs({"max-model-len": "8192", "tensor_parallel_size": "4"}, ServeSettings(max_model_len=1))
    assert (s.max_model_len, s.tp) == (8192, 4)
    with pytest.raises(FitError, match=r"^--set colour: not a fit setting"):
        settings_from_pairs({"colour": "red"})
    with pytest.raises(FitError, match=r"max_model_len='long': expected a whole number"):
        settings_from_pairs({"max_model_len": "long"})
    with pytest.raises(FitError, match=r"gpu_memory_utilization='1.5'"):
        settings_from_pairs({"gpu_memory_utilization": "1.5"})


def test_the_share_a_start_sets():
    assert utilization_from_args(["vllm", "serve", "m", "--gpu-memory-utilization", "0.45"]) == 0.45
    assert utilization_from_args(["--gpu-memory-utilization=0.3"]) == 0.3
    assert utilization_from_args(["vllm", "serve", "m"]) is None
    with pytest.raises(FitError):
        utilization_from_args(["--gpu-memory-utilization", "lots"])
