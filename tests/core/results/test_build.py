"""Runs built by the console: secrets masked, preset merged, the printed block as fallback."""

from __future__ import annotations

import json
import math
import re

from console.core.bench.output_parser import parse_result_blocks
from console.core.model import BenchPreset
from console.core.results.build import run_from_console
from console.core.results.record import run_to_dict
from console.core.serve.argv import MASK
from tests.core.results.results_helpers import CPU, NOW, parse


def test_run_from_console_masks_secrets_and_merges_the_preset():
    result = json.loads((CPU / "bench_result.json").read_text())
    preset = BenchPreset(
        name="tiny-random", dataset="random", input_len=64, output_len=64, num_prompts=50, max_concurrency=(8,), seed=0
    )
    live = {"samples": 3, "peak_output_tok_s": 1700.0, "median_ttft_p50_ms": None}
    run = run_from_console(
        {
            "node": "mi300x-a",
            "gpu_model": "AMD Instinct MI300X",
            "compute_partition": "CPX",
            "memory_partition": "NPS1",
            "instance": "tiny-g0",
            "serve_preset": "tiny",
            "serve_args": ["vllm", "serve", "m", "--api-key", "sk-123", "--tensor-parallel-size", "1"],
            "env": {"HF_TOKEN": "hf_abc", "VLLM_ROCM_USE_AITER": "1"},
            "vllm_version": "0.32.0",
            "client_argv": ["vllm", "bench", "serve", "--api-key=sk-9"],
            "sweep_id": "sw1",
            "sweep_point": 8,
        },
        result,
        live,
        setup=preset,
        label="baseline",
        created=NOW,
    )
    assert run.origin == "console" and run.source is None and run.label == "baseline"
    assert re.fullmatch(r"\d{8}-\d{6}-mi300x-a-[0-9a-f]{6}", run.id)
    assert run.context["serve_args"][4] == MASK and "sk-123" not in json.dumps(run_to_dict(run))
    assert run.context["env"] == {"HF_TOKEN": MASK, "VLLM_ROCM_USE_AITER": "1"}
    assert run.context["client_argv"][-1] == f"--api-key={MASK}"
    assert run.context["bench_preset"] == "tiny-random" and run.context["sweep_point"] == 8
    assert run.setup["dataset"] == "random" and run.setup["input_len"] == 64  # from the preset
    assert run.setup["model"] == "/srv/models/tiny-llama" and run.setup["request_rate"] == math.inf  # from the result
    assert run.metrics["output_throughput"] == result["output_throughput"]
    assert run.result == result and run.live == live
    # the same JSON imported later is the same run
    (imported,) = parse(json.dumps(result)).runs
    assert imported.fingerprint == run.fingerprint


def test_run_from_console_without_json_uses_the_printed_block():
    (block,) = parse_result_blocks((CPU / "bench_serve_stdout.raw").read_bytes())
    run = run_from_console({"node": "n"}, None, None, block=block, created=NOW)
    assert run.result is None and run.metrics["p99_e2el_ms"] == 370.98
    assert run.setup["max_concurrency"] == 8
