"""The simulator's `vllm bench latency|throughput` (for the demo): the console's own
argv runs, its output parses like the real 0.32 captures and its JSON has their keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.core.bench.offline import OfflinePreset, OfflineStreamParser, build_offline_argv, offline_metrics

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "console" / "sim" / "vllm"
FIXTURES = ROOT / "tests" / "fixtures" / "vllm-0.32-cpu"


def _run(argv: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, OfflineStreamParser, list]:
    proc = subprocess.run(
        [sys.executable, str(SIM), *argv[1:]], capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False
    )
    parser = OfflineStreamParser()
    events = []
    for line in (proc.stdout + proc.stderr).split("\n"):
        events += parser.feed(line)
    return proc, parser, events


@pytest.mark.parametrize("kind", ["latency", "throughput"])
def test_sim_answers_the_consoles_offline_argv(kind, tmp_path):
    preset = OfflinePreset(
        name="p",
        kind=kind,
        model="amd/Llama-3.1-70B-Instruct-FP8-KV",
        tp=8,
        batch_size=1 if kind == "latency" else None,
        input_len=128,
        output_len=2048,
        num_prompts=100 if kind == "throughput" else None,
        num_iters_warmup=2 if kind == "latency" else None,
        num_iters=4 if kind == "latency" else None,
        args=("--kv-cache-dtype", "fp8", "--dtype", "float16"),
    )
    out = tmp_path / "r.json"
    cmd = build_offline_argv(preset, output_json=str(out), vllm_cmd=["vllm"], version="0.32.0")
    proc, parser, events = _run(list(cmd.argv), tmp_path)
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(out.read_text())
    real = json.loads((FIXTURES / f"bench_{kind}.json").read_text())
    assert set(obj) == set(real)  # the same keys as vLLM 0.32 writes
    metrics = offline_metrics(kind, obj)
    phases = {e.phase for e in events}
    if kind == "latency":
        assert {"warmup", "bench"} <= phases
        assert parser.printed["avg_latency"] == obj["avg_latency"] == metrics["latency_s"]
        assert 5.0 < obj["avg_latency"] < 60.0  # seconds, in the range of seed 000's MI300X table
    else:
        assert "generate" in phases
        assert obj["num_requests"] == 100 and obj["total_num_tokens"] == 100 * (128 + 2048)


def test_sim_refuses_flags_032_dropped(tmp_path):
    proc, _, _ = _run(["vllm", "bench", "latency", "--model", "m", "--num-scheduler-steps", "10"], tmp_path)
    assert proc.returncode == 2
    assert "unrecognized arguments: --num-scheduler-steps" in proc.stderr
