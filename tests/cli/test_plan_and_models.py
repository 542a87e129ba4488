"""`serve plan` and `models list` on the demo's simulated nodes, whose simulated Hugging Face
caches hold the seeds' models with their real config.json (console/sim/huggingface_hub)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_cli(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path), ROCM_CONSOLE_DATA_DIR=str(tmp_path / "data"), PYTHONPATH=str(ROOT))
    env.pop("ROCM_CONSOLE_DEMO_STATE", None)

    def run(*args: str) -> subprocess.CompletedProcess:
        speedup = os.environ.get("ROCM_CONSOLE_SIM_VLLM_SPEEDUP")
        extra = {"ROCM_CONSOLE_SIM_VLLM_SPEEDUP": speedup} if speedup else {}
        return subprocess.run(
            [sys.executable, "-m", "console", *args],
            capture_output=True,
            text=True,
            env={**env, **extra},
            timeout=120,
            cwd=tmp_path,
        )

    return run


def _plan(run_cli, model: str, node: str, *more: str) -> dict:
    proc = run_cli("serve", "plan", model, "--demo", "--node", node, "--json", *more)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _row(plan: dict, mode: str, tp: int) -> dict:
    return next(r for r in plan["rows"] if r["mode"] == mode and r["tp"] == tp)


def test_the_seeds_cases_in_the_plan_table(run_cli):
    # 8B FP8 on one CPX partition (24 GiB) at the seeds' --max-model-len 4608: fits
    p = _plan(run_cli, "amd/Llama-3.1-8B-Instruct-FP8-KV", "mi300x-cpx", "--set", "max_model_len=4608")
    assert p["current_mode"] == "CPX-NPS1" and p["physical_gpus"] == 8
    cpx = _row(p, "CPX-NPS1", 1)
    assert cpx["instances"] == 64 and cpx["gpu_memory_bytes"] == 24574 * 1024 * 1024
    assert cpx["fits"] and cpx["verdict"].startswith("fits:")
    assert cpx["prediction"]["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2  # bf16 KV (vLLM's auto)
    # fp8 KV halves the bytes per token and doubles the tokens
    p8 = _plan(run_cli, "amd/Llama-3.1-8B-Instruct-FP8-KV", "mi300x-cpx", "--set", "kv_cache_dtype=fp8")
    cpx8 = _row(p8, "CPX-NPS1", 1)
    assert cpx8["prediction"]["kv_bytes_per_token"] * 2 == cpx["prediction"]["kv_bytes_per_token"]
    assert cpx8["prediction"]["kv_cache_tokens"] >= 2 * cpx["prediction"]["kv_cache_tokens"] - 32

    # 70B bf16 on one SPX MI300X: fits at TP 1 (not its whole 131,072 context at 0.9), and at TP 8
    p70 = _plan(run_cli, "meta-llama/Llama-3.1-70B-Instruct", "mi300x-spx")
    tp1, tp8 = _row(p70, "SPX-NPS1", 1), _row(p70, "SPX-NPS1", 8)
    assert tp1["fits"] and tp1["verdict"].startswith("fits with max_model_len ≤")
    assert 100_000 < tp1["prediction"]["largest_max_model_len"] < 131_072
    assert tp8["fits"] and tp8["verdict"].startswith("fits:")
    assert not _row(p70, "CPX-NPS1", 1)["fits"]  # 131 GiB of weights in a 24 GiB partition

    # 405B FP8 on one 8xMI300X node: TP 8 fits, TP 2 and one CPX partition do not
    p405 = _plan(run_cli, "amd/Llama-3.1-405B-Instruct-FP8-KV", "mi300x-spx", "--set", "kv_cache_dtype=fp8")
    assert _row(p405, "SPX-NPS1", 8)["fits"]
    assert not _row(p405, "SPX-NPS1", 2)["fits"] and not _row(p405, "CPX-NPS1", 1)["fits"]


def test_plan_on_chosen_gpus_and_bad_inputs(run_cli):
    p = _plan(run_cli, "amd/Llama-3.1-8B-Instruct-FP8-KV", "mi300x-cpx", "--gpus", "1", "--context", "4608")
    assert p["on_gpus"]["gpus"] == [1] and p["on_gpus"]["verdict"].startswith("fits")
    for args, needle in (
        (("amd/not-there", "--node", "mi300x-cpx"), "mi300x-cpx: model amd/not-there: not in the Hugging Face cache"),
        (("amd/Llama-3.1-8B-Instruct-FP8-KV", "--node", "nope"), "unknown node 'nope'"),
        (("amd/Llama-3.1-8B-Instruct-FP8-KV", "--node", "mi300x-cpx", "--set", "color=red"), "--set color"),
        (
            ("amd/Llama-3.1-8B-Instruct-FP8-KV", "--node", "mi300x-cpx", "--set", "gpu_memory_utilization=1.5"),
            "gpu_memory_utilization='1.5'",
        ),
        (("amd/Llama-3.1-8B-Instruct-FP8-KV", "--node", "mi300x-cpx", "--gpus", "99"), "--gpus 99: GPU 99"),
        (("amd/Llama-3.1-8B-Instruct-FP8-KV", "--node", "mi300x-cpx", "--preset", "nope"), "unknown serve preset"),
    ):
        proc = run_cli("serve", "plan", *args, "--demo")
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr, proc.stderr


def test_models_list_shows_each_nodes_models(run_cli):
    proc = run_cli("models", "list", "--demo", "--json")
    assert proc.returncode == 0, proc.stderr
    nodes = {n["node"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert set(nodes) == {"mi300x-spx", "mi300x-cpx", "mi355x", "h100"}
    cpx = {m["name"]: m for m in nodes["mi300x-cpx"]["models"]}
    eight = cpx["amd/Llama-3.1-8B-Instruct-FP8-KV"]
    assert eight["complete"] and eight["revision"] == "f7b915a851527c63c3dfa6247a2ff42e9b485a43"
    assert eight["size_bytes"] > 9_000_000_000  # the hub's 5 GB + 4.08 GB shards (sparse here)
    partial = cpx["amd/Llama-3.1-70B-Instruct-FP8-KV"]
    assert not partial["complete"] and "interrupted" in partial["incomplete_reason"]
    assert nodes["mi300x-cpx"]["free_space"][0]["free_bytes"] > 0
    assert "amd/Llama-3.1-405B-Instruct-FP8-KV" in {m["name"] for m in nodes["mi300x-spx"]["models"]}
    text = run_cli("models", "list", "--demo", "--node", "mi300x-cpx")
    assert text.returncode == 0 and "incomplete (8 of 15 weight files missing" in text.stdout
    bad = run_cli("models", "list", "--demo", "--node", "nope")
    assert bad.returncode == 2 and "unknown node 'nope'" in bad.stderr


def test_a_start_keeps_its_prediction_and_serve_list_shows_it_beside_vllms(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")
    name = "llama-3.1-8b-fp8-cpx-g2"
    started = run_cli(
        "serve", "start", "--demo", "--node", "mi300x-cpx", "--preset", "llama-3.1-8b-fp8-cpx", "--gpus", "2", "--wait"
    )
    try:
        assert started.returncode == 0, started.stderr
        listed = run_cli("serve", "list", "--demo", "--node", "mi300x-cpx", "--json")
        assert listed.returncode == 0, listed.stderr
        [inst] = [i for i in json.loads(listed.stdout)["instances"] if i["name"] == name]
        fit = inst["fit"]
        assert fit["context"] == 4608  # the preset's --max-model-len
        assert fit["predicted_tokens"] > 0 and fit["logged_tokens"] > 0
        assert fit["tokens_error_pct"] == pytest.approx(
            (fit["predicted_tokens"] - fit["logged_tokens"]) / fit["logged_tokens"] * 100
        )
        kinds = [
            json.loads(x)["kind"] for x in (tmp_path / "data" / "demo" / "fit-pairs.jsonl").read_text().splitlines()
        ]
        assert kinds == ["predicted", "logged"]
    finally:
        run_cli("serve", "stop", "--demo", "--node", "mi300x-cpx", name)
